/* SPDX-License-Identifier: GPL-2.0 */
/*
 * apmlab: a test module for the apmwatch lab. It plays the HCA (raises QP
 * async events through a QP's real event handler) and a kernel ULP (a kernel
 * RC QP pair that reacts to PATH_MIG). Control: /sys/kernel/debug/apmlab/.
 */
#ifndef APMLAB_H
#define APMLAB_H

#include <linux/seq_file.h>
#include <rdma/ib_cm.h>
#include <rdma/ib_verbs.h>

/* names.c */
const char *apmlab_event_name(int event);
int apmlab_event_parse(const char *s);	/* name or number; -EINVAL */
const char *apmlab_qps_name(int state);
const char *apmlab_mig_name(int mig);

/* log.c: a ring of JSON-line records, read through debugfs "log" */
void apmlab_log_event(struct ib_qp *qp, int event);
void apmlab_log_modify(struct ib_qp *qp, const char *what, int mask, int ret);
void apmlab_log_query(struct ib_qp *qp, int ret, int qp_state, int mig);
void apmlab_log_note(struct ib_qp *qp, const char *what, int ret);
void apmlab_log_show(struct seq_file *m);
void apmlab_log_clear(void);

/* devs.c: a device by name, held (ib_device_put); NULL if none */
struct ib_device *apmlab_device_get(const char *name);
int apmlab_devs_init(void);
void apmlab_devs_exit(void);

/* inject.c: play the HCA */
int apmlab_inject(const char *dev, u32 qpn, int event, bool migrate);
void apmlab_inject_show(struct seq_file *m);

/* ulp.c: the kernel ULP */
enum apmlab_behavior {
	APMLAB_CORRECT,		/* try a new alternate path, then rearm */
	APMLAB_NO_REARM,	/* log the event, do nothing */
	APMLAB_REARM_NO_ALT,	/* rearm without loading a new alternate */
	APMLAB_NO_NOTIFY,	/* correct, but never ib_cm_notify(PATH_MIG) */
};
int apmlab_behavior_parse(const char *s);
int apmlab_ulp_start(int behavior, const char *dev0, const char *dev1, bool cm);
int apmlab_ulp_stop(void);
int apmlab_ulp_set_behavior(int behavior);
void apmlab_ulp_show(struct seq_file *m);
int apmlab_ulp_init(void);
void apmlab_ulp_exit(void);

/* kpair.c: one side of the kernel ULP's QP pair */
#define APMLAB_PORT 1
struct apmlab_side {
	struct ib_device *dev;
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct ib_qp *qp;
	bool ib;		/* InfiniBand port: LID addressing, alternate on port 2 */
	int gid_index;		/* RoCE: IPv4-mapped RoCE v2 GID on APMLAB_PORT */
	union ib_gid gid;
	u8 mac[ETH_ALEN];	/* the GID's netdev address */
	struct ib_cm_id *cm_id;		/* --cm: the connection's CM id */
	struct ib_cm_id *listen_id;	/* --cm, server side */
	struct apmlab_side *peer;
};

int apmlab_side_create(struct apmlab_side *s, const char *name,
		       void (*handler)(struct ib_event *, void *));
int apmlab_side_rtr(struct apmlab_side *s);	/* to RTR */
int apmlab_side_rts(struct apmlab_side *s);	/* RTR to RTS, armed */
void apmlab_side_destroy(struct apmlab_side *s);
/* -EINVAL on RoCE; on IB the alternate is the port the QP does not run on */
int apmlab_load_alt_path(struct apmlab_side *s);
int apmlab_rearm(struct apmlab_side *s);
/* Query a QP's state and path-migration state (-1 each on error). */
int apmlab_query(struct ib_qp *qp, int *qp_state, int *mig);

/* cm.c: connect the pair through ib_cm (IB ports), alternate path in the REQ */
int apmlab_cm_connect(struct apmlab_side *client, struct apmlab_side *server);
void apmlab_cm_disconnect(struct apmlab_side *client, struct apmlab_side *server);
int apmlab_cm_notify(struct apmlab_side *s);	/* ib_cm_notify(PATH_MIG), logged */

/* The CM hook's benchmark (bench file): ib_cm_notify(COMM_EST) on the
 * established client cm_id, n times, chunks of 64 timed. */
#define APMLAB_BENCH_CHUNK 64	/* calls a timed chunk */
struct apmlab_bench {
	u32 calls;
	u64 ns, best_chunk_ns;
	int ret;		/* the last call's */
};
int apmlab_cm_bench_notify(struct apmlab_side *s, u32 n, struct apmlab_bench *out);
int apmlab_ulp_bench_notify(u32 n);
void apmlab_bench_show(struct seq_file *m);

#endif
