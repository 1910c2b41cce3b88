/*
 * APM reactions shared by lab-pair and lab-cm-pair: the behaviours, the
 * modifies (each printed as a JSON line) and the async event loop.
 */
#ifndef LAB_APM_H
#define LAB_APM_H

#include <infiniband/verbs.h>

enum bkind {
	B_NEVER_REARM,		/* do nothing */
	B_LATE_REARM,		/* rearm after late_ms */
	B_REARM_NO_ALT,		/* rearm at once, no alternate-path attempt (the default) */
	B_ALT_THEN_REARM,	/* load a new alternate path, then rearm */
	B_REARM_THEN_ALT,	/* rearm, then load a new alternate path */
};

struct behavior {
	enum bkind kind;
	long late_ms;
};

#define BEHAVIOR_HELP \
	"rearm-no-alt | never-rearm | late-rearm=DURATION |\n" \
	"                    alt-then-rearm | rearm-then-alt"

int behavior_parse(const char *s, struct behavior *b);
const char *behavior_name(const struct behavior *b);

/* One QP the program owns. */
struct labqp {
	struct ibv_qp *qp;
	const char *dev;
	const char *role;	/* "client"/"server" for lab-cm-pair, else NULL */
	uint8_t port;
	int gid_index;		/* own IPv4-mapped RoCE v2 GID */
	union ibv_gid peer_gid;
	long rearm_at;		/* now_ms() deadline of a late rearm, or 0 */
	void *user;		/* e.g. the rdma_cm_id */
};

/* Each prints {"modify":WHAT,...,"ret":..,"errno":..} and returns ret. */
int lq_modify(struct labqp *q, const char *what, struct ibv_qp_attr *a, int mask);
int lq_rearm(struct labqp *q);
int lq_load_alt(struct labqp *q);
/* Prints {"query":WHEN,"dev":..,"qpn":..,"qp_state":..,"path_mig_state":..}. */
void lq_query(struct labqp *q, const char *when);
/* The behaviour's reaction to PATH_MIG. */
void lq_react(struct labqp *q, const struct behavior *b);
/* Prints {"pid":..,"dev":..,"qpn":..,"ready":true,...}. */
void lq_ready(struct labqp *q, int peer_qpn);

struct evloop {
	struct ibv_context *ctx[8];
	const char *dev[8];
	int nctx;
	struct labqp *qps;
	int nqps;
	struct behavior b;
	long deadline;		/* now_ms() value to stop at, 0 = until signal */
	/* Called for every QP event after it is printed and queried. */
	void (*on_qp_event)(struct labqp *q, enum ibv_event_type e, void *arg);
	void *arg;
	int extra_fd;		/* -1 or an fd to watch (rdma_cm channel) */
	void (*on_extra)(void *arg);
	int events;		/* async events seen */
	int usr2_destroy;	/* SIGUSR2 destroys every QP (lab-pair) */
};

/* Blocks SIGINT/SIGTERM/SIGUSR1/SIGUSR2 so that evloop_run can wait for them with ppoll. */
void evloop_signals(void);
/* Runs until the deadline or SIGINT/SIGTERM. */
void evloop_run(struct evloop *l);

#endif
