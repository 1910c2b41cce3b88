#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include "common.h"

void die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

void usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (try --help)\n");
	exit(2);
}

void jline(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

long parse_duration_ms(const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -1;
	if (!strcmp(end, "ms"))
		return (long)v;
	if (!*end || !strcmp(end, "s"))
		return (long)(v * 1000);
	if (!strcmp(end, "m"))
		return (long)(v * 60000);
	return -1;
}

long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static const char *const qps_names[] = {
	"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR",
};

const char *qp_state_name(int s)
{
	if (s < 0 || s >= (int)(sizeof(qps_names) / sizeof(*qps_names)))
		return "UNKNOWN";
	return qps_names[s];
}

const char *mig_state_name(int s)
{
	switch (s) {
	case IBV_MIG_MIGRATED:
		return "MIGRATED";
	case IBV_MIG_REARM:
		return "REARM";
	case IBV_MIG_ARMED:
		return "ARMED";
	}
	return "UNKNOWN";
}

/* Indexed by enum ibv_event_type (same values as the kernel's ib_event_type). */
static const char *const event_names[] = {
	"CQ_ERR", "QP_FATAL", "QP_REQ_ERR", "QP_ACCESS_ERR", "COMM_EST",
	"SQ_DRAINED", "PATH_MIG", "PATH_MIG_ERR", "DEVICE_FATAL",
	"PORT_ACTIVE", "PORT_ERR", "LID_CHANGE", "PKEY_CHANGE", "SM_CHANGE",
	"SRQ_ERR", "SRQ_LIMIT_REACHED", "QP_LAST_WQE_REACHED",
	"CLIENT_REREGISTER", "GID_CHANGE", "WQ_FATAL",
};
#define N_EVENTS ((int)(sizeof(event_names) / sizeof(*event_names)))

const char *event_name(int e)
{
	if (e < 0 || e >= N_EVENTS)
		return "UNKNOWN";
	return event_names[e];
}

int event_parse(const char *s)
{
	char *end;
	long n;
	int i;

	n = strtol(s, &end, 0);
	if (*s && !*end)
		return n >= 0 && n < N_EVENTS ? (int)n : -1;
	for (i = 0; i < N_EVENTS; i++)
		if (!strcasecmp(s, event_names[i]))
			return i;
	return -1;
}

struct ibv_context *open_device(const char *name)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int i, n;

	list = ibv_get_device_list(&n);
	if (!list)
		die("cannot list RDMA devices: %s", strerror(errno));
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			break;
	if (i == n)
		die("no RDMA device named %s", name);
	ctx = ibv_open_device(list[i]);
	if (!ctx)
		die("cannot open %s: %s", name, strerror(errno));
	ibv_free_device_list(list);
	return ctx;
}

int find_roce_v4_gid(struct ibv_context *ctx, uint8_t port, int *index,
		     union ibv_gid *gid)
{
	static const uint8_t v4mapped[12] = { [10] = 0xff, [11] = 0xff };
	struct ibv_port_attr pa;
	struct ibv_gid_entry e;
	int i;

	if (ibv_query_port(ctx, port, &pa))
		return -1;
	for (i = 0; i < pa.gid_tbl_len; i++) {
		if (ibv_query_gid_ex(ctx, port, i, &e, 0))
			continue;	/* empty entry: ENODATA */
		if (e.gid_type == IBV_GID_TYPE_ROCE_V2 &&
		    !memcmp(e.gid.raw, v4mapped, sizeof(v4mapped))) {
			*index = i;
			*gid = e.gid;
			return 0;
		}
	}
	errno = ENOENT;
	return -1;
}

void gid_str(const union ibv_gid *gid, char *buf, size_t len)
{
	if (!inet_ntop(AF_INET6, gid->raw, buf, len))
		snprintf(buf, len, "?");
}
