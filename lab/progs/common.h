/* Shared helpers of the lab programs: JSON lines, errors, verbs lookups. */
#ifndef LAB_COMMON_H
#define LAB_COMMON_H

#include <stdint.h>
#include <infiniband/verbs.h>

extern const char *prog;

/* Prints "prog: message" on stderr and exits 1. */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* Prints "prog: message (try --help)" on stderr and exits 2. */
void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* Prints one line on stdout and flushes it (readers wait for lines). */
void jline(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "250ms", "3s", "2m", "1.5s", bare number = seconds. -1 when invalid. */
long parse_duration_ms(const char *s);
long now_ms(void);
long long now_ns(void);

const char *qp_state_name(int s);
const char *mig_state_name(int s);
const char *event_name(int e);
/* "path_mig", "PATH_MIG", "6" -> 6; -1 when unknown. */
int event_parse(const char *s);

struct ibv_context *open_device(const char *name);
/* Finds the IPv4-mapped RoCE v2 GID of a port; 0 or -1 (errno set). */
int find_roce_v4_gid(struct ibv_context *ctx, uint8_t port, int *index,
		     union ibv_gid *gid);
/* Text form of a GID: "::ffff:10.0.0.1" style for v4-mapped, else hex. */
void gid_str(const union ibv_gid *gid, char *buf, size_t len);

#endif
