/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ibsim: a software InfiniBand HCA for the apmwatch lab. Two devices
 * (ibsim0, ibsim1) with two IB ports each, cabled to one simulated switch.
 * Only the HCA is simulated: ib_core, ib_mad, ib_cm, ib_umad and ib_uverbs
 * run unmodified on top of it. See docs/lab.md.
 *
 * Locking: ibsim_mutex guards every QP's connection state (attributes, APM
 * state machine), the QP list and the ports. Work queues and CQs have
 * their own spinlocks (post_send/post_recv/poll_cq may run in atomic
 * context). Async events are queued and raised from one ordered work item,
 * never under ibsim_mutex, so a handler may call back into the driver.
 */
#ifndef IBSIM_H
#define IBSIM_H

#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/seq_file.h>
#include <linux/spinlock.h>
#include <linux/version.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>
#include <linux/mlx5/qp.h>
#include <rdma/ib_verbs.h>

#define IBSIM_NDEV	2
#define IBSIM_NPORT	2
#define IBSIM_PKEYS	2
#define IBSIM_MAX_SGE	4
/* qib's defaults (ib_qib_max_qp_wrs, ib_qib_max_srq_wrs): Open MPI's openib asks for SRQs of 1088 */
#define IBSIM_MAX_WR	0x3FFF
#define IBSIM_MAX_SRQ_WR	0x1FFFF
#define IBSIM_MAX_CQE	4096
#define IBSIM_MAD_MAX	2048	/* largest GSI payload carried */
#define IBSIM_SM_LID	1

/*
 * The device ops before 5.15 (Debian bullseye's 5.10): port numbers are u8,
 * there is no create_user_ah, and the driver allocates and frees the QP
 * itself (ib_core allocates it, sized by INIT_RDMA_OBJ_SIZE, from 5.15 on).
 */
#if LINUX_VERSION_CODE < KERNEL_VERSION(5, 15, 0)
#define IBSIM_OLD_OPS 1
typedef u8 ibsim_port_t;
#else
#define IBSIM_OLD_OPS 0
typedef u32 ibsim_port_t;
#endif

/*
 * A port's LIDs: lid is the base of 2^lmc LIDs (lid, aligned to 2^lmc, up to
 * lid + 2^lmc - 1), as a subnet manager assigns them (IBTA PortInfo LID and
 * LMC). lids_down has bit k set when the switch does not route to lid + k.
 */
#define IBSIM_MAX_LMC	3

struct ibsim_port {
	u32 lid;
	u8 lmc;
	u8 lids_down;
	enum ib_port_state state;
	u32 cap_flags;		/* modify_port set/clear bits on top */
};

struct ibsim_dev {
	struct ib_device ibdev;
	int index;
	struct ibsim_port port[IBSIM_NPORT + 1];	/* 1-based */
	u32 next_qpn;
	bool registered;
	struct xarray mrs;	/* key >> 8 -> ibsim_mr, changed under ibsim_mutex */
};

struct ibsim_pd {
	struct ib_pd ibpd;
};

struct ibsim_ucontext {
	struct ib_ucontext ibuc;
};

struct ibsim_ah {
	struct ib_ah ibah;
	struct rdma_ah_attr attr;
};

struct ibsim_mr {
	struct ib_mr ibmr;
	int access;		/* IB_ACCESS_* */
	bool dma;		/* every kernel address (get_dma_mr) */
	struct ib_umem *umem;	/* a user region's pinned pages */
	struct page **pages;
	size_t npages;
	u32 first;		/* the region's offset in its first page */
};

struct ibsim_cq {
	struct ib_cq ibcq;
	spinlock_t lock;
	struct ib_wc *ring;
	int size, head, count;
	int notify;		/* armed IB_CQ_* flags, 0 if not armed */
	u64 overflows;
	struct work_struct comp_work;	/* calls the completion handler */
};

struct ibsim_wqe {
	u64 wr_id;
	int num_sge;
	struct ib_sge sge[IBSIM_MAX_SGE];
};

struct ibsim_srq {
	struct ib_srq ibsrq;
	spinlock_t lock;
	struct ibsim_wqe *ring;
	int size, head, count;
	u32 limit;
	bool posted;		/* a receive was posted: its QPs move data */
};

#define IBSIM_MAX_INLINE 256	/* kernel ULPs' IB_SEND_INLINE data, copied at post */
#define IBSIM_MAX_MSG	(16 << 20)	/* the ports' max_msg_sz */

/* A posted RC/UC send: what the requester carries, and how far it got. */
struct ibsim_swqe {
	u64 wr_id;
	enum ib_wr_opcode opcode;
	bool signaled;
	bool executed;		/* the responder took it: a resend is a duplicate */
	u8 num_sge;
	struct ib_sge sge[IBSIM_MAX_SGE];
	u32 len;		/* the sum of the SGEs */
	__be32 imm;
	u64 remote_addr;	/* RDMA WRITE/READ */
	u32 rkey;
	bool inl;		/* data in inl[], not behind lkeys */
	u8 inl_data[IBSIM_MAX_INLINE];
};

struct ibsim_qp {
	struct ib_qp ibqp;
	struct list_head list;		/* ibsim_qps, under ibsim_mutex */
	struct ibsim_dev *dev;
	struct ibsim_cq *scq, *rcq;
	u32 port;			/* GSI/SMI: the port it serves */
	/*
	 * The raw event's argument (fabric.c), kept as mlx5_ib keeps it
	 * (drivers/infiniband/hw/mlx5/mlx5_ib.h): struct mlx5_ib_qp_base
	 * holds a pointer back to the QP (container_mibqp) before the
	 * struct mlx5_core_qp, and the QP starts with its struct ib_qp, so
	 * mlx5's to_mibqp() and apmwatch's raw hook find the ib_qp here as
	 * on a ConnectX.
	 */
	struct {
		struct ibsim_qp *container_mibqp;
		struct mlx5_core_qp mqp;
	} base;
	atomic_t raw_pending;		/* raw events queued for the EQ interrupt */

	spinlock_t rq_lock;
	struct ibsim_wqe *rq;
	int rq_size, rq_head, rq_count;

	/* under ibsim_mutex */
	struct ib_qp_attr attr;		/* everything modify_qp set */
	struct ib_qp_cap cap;
	enum ib_sig_type sq_sig_type;
	bool alt_valid;			/* an alternate path was loaded */
	bool traffic;			/* the simulated request stream is on */
	bool rtr_packet;		/* a packet arrived since RTR */
	/*
	 * The requester's retry timer: when the oldest request not yet
	 * acknowledged was sent (0: none). Retries run out after
	 * (retry_cnt + 1) local ACK timeouts (4.096 us << timeout).
	 */
	u64 unacked_since_ns;
	u64 tx, rx, acks, migrations, retries_exhausted;

	/*
	 * The QP moves data: it posted a send or a receive (or its SRQ got a
	 * receive). It is driven by its own sends only: its simulated request
	 * stream, which stands in for the traffic of programs that move no
	 * data (lab-ibpair, lab-ulp), stops.
	 */
	bool own_sends;
	u64 rnr_until_ns;		/* an RNR NAK: no resend before */
	u32 rnr_naks;			/* in a row, against rnr_retry */
	u64 rx_bytes, rx_msgs, rnr_naks_total;
	spinlock_t sq_lock;
	struct ibsim_swqe *sq;
	int sq_size, sq_head, sq_count;
};

static inline struct ibsim_dev *to_sdev(struct ib_device *d)
{
	return container_of(d, struct ibsim_dev, ibdev);
}

static inline struct ibsim_qp *to_sqp(struct ib_qp *q)
{
	return container_of(q, struct ibsim_qp, ibqp);
}

static inline struct ibsim_srq *to_ssrq(struct ib_srq *s)
{
	return container_of(s, struct ibsim_srq, ibsrq);
}

static inline struct ibsim_cq *to_scq(struct ib_cq *c)
{
	return container_of(c, struct ibsim_cq, ibcq);
}

extern struct mutex ibsim_mutex;
extern struct list_head ibsim_qps;
extern struct ibsim_dev *ibsim_devs[IBSIM_NDEV];
extern struct workqueue_struct *ibsim_wq;
extern struct workqueue_struct *ibsim_cq_wq;
extern bool ibsim_traffic;

/* knob.c: what firmware decides (docs/lab.md, knob.c) */
enum { KNOB_ARMED_MODIFY, KNOB_FORCED_EVENT, KNOB_ALT_AFTER_MIG, KNOB_DEAD_ALT,
       KNOB_PM_LATENCY, KNOB_UNLOADED_ALT_PORT, IBSIM_KNOBS };
enum { ARMED_REFUSE, ARMED_ACCEPT };
enum { FORCED_NONE, FORCED_INSIDE, FORCED_AFTER };
enum { ALT_COPY, ALT_ZERO };
enum { DEADALT_RETRY, DEADALT_PATHMIG_ERR };
enum { PMLAT_0, PMLAT_1500MS, PMLAT_3S };
enum { UNLOADED_ALT_PORT0, UNLOADED_ALT_PORT1 };
extern int ibsim_knob[IBSIM_KNOBS];
unsigned int ibsim_pm_latency_ms(void);
int ibsim_knob_set(const char *name, const char *value);	/* -ENOENT, -EINVAL */
int ibsim_profile_set(const char *name);
void ibsim_knobs_show(struct seq_file *m);

/* verbs.c */
extern const struct ib_device_ops ibsim_ops;
void ibsim_cq_add(struct ibsim_cq *cq, const struct ib_wc *wc);
void ibsim_flush_rq(struct ibsim_qp *qp);

/* mem.c: memory regions and copies through them (under ibsim_mutex) */
struct ib_mr *ibsim_get_dma_mr(struct ib_pd *pd, int access);
struct ib_mr *ibsim_reg_user_mr(struct ib_pd *pd, u64 start, u64 len,
				u64 virt, int access,
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 17, 0)
				struct ib_dmah *dmah,
#endif
				struct ib_udata *udata);
int ibsim_dereg_mr(struct ib_mr *mr, struct ib_udata *udata);
int ibsim_sge_copy(struct ibsim_qp *qp, const struct ib_sge *sge, int n,
		   void *buf, u32 len, bool to_sges);
int ibsim_rkey_copy(struct ibsim_qp *qp, u32 rkey, u64 addr, void *buf,
		    u32 len, bool to_mr);

/* srq.c */
int ibsim_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
		     struct ib_udata *udata);
int ibsim_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		     enum ib_srq_attr_mask mask, struct ib_udata *udata);
int ibsim_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr);
int ibsim_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata);
int ibsim_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
			const struct ib_recv_wr **bad);

/* qp.c */
int ibsim_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
		    struct ib_udata *udata);
int ibsim_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		    struct ib_udata *udata);
int ibsim_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		   struct ib_qp_init_attr *init);
int ibsim_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata);
#if IBSIM_OLD_OPS
struct ib_qp *ibsim_create_qp_old(struct ib_pd *pd, struct ib_qp_init_attr *init,
				  struct ib_udata *udata);
int ibsim_destroy_qp_old(struct ib_qp *ibqp, struct ib_udata *udata);
#endif
int ibsim_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		    const struct ib_send_wr **bad);
int ibsim_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		    const struct ib_recv_wr **bad);
void ibsim_migrate(struct ibsim_qp *qp);
void ibsim_to_error(struct ibsim_qp *qp, enum ib_wc_status why);
int ibsim_sq_count(struct ibsim_qp *qp);
const char *ibsim_qps_name(int s);
const char *ibsim_mig_name(int m);

/* data.c: what a request does at the responder, and its completions */
enum ibsim_exec { EXEC_OK, EXEC_RNR, EXEC_NAK_ACCESS, EXEC_NAK_INVALID,
		  EXEC_NAK_OP, EXEC_LOCAL, EXEC_DROP };
enum ibsim_exec ibsim_execute(struct ibsim_qp *s, struct ibsim_qp *d,
			      enum ib_wc_status *local);
bool ibsim_take_rwqe(struct ibsim_qp *qp, struct ibsim_wqe *e);
void ibsim_complete_executed(struct ibsim_qp *qp);
void ibsim_complete_sent(struct ibsim_qp *qp);
void ibsim_fail_head(struct ibsim_qp *qp, enum ib_wc_status why);
u64 ibsim_rnr_timer_ns(u8 code);

/* fabric.c: the switch, "packets", failures, events */
struct ibsim_port *ibsim_lid_port(u32 lid, struct ibsim_dev **dev, u32 *port);
bool ibsim_port_alive(struct ibsim_port *p);	/* ACTIVE */
bool ibsim_lid_alive(u32 lid);
void ibsim_queue_qp_event(struct ibsim_qp *qp, enum ib_event_type type);
void ibsim_raise_qp_event(struct ibsim_qp *qp, enum ib_event_type type);	/* now, no lock held */
void ibsim_mlx5_qp_event(struct mlx5_core_qp *mqp, int type);
void ibsim_drain_eq(struct ibsim_qp *qp);
int ibsim_qpn_align(bool apart);
void ibsim_kick_events_later(void);
void ibsim_queue_qp_event_later(struct ibsim_qp *qp, enum ib_event_type type);
void ibsim_release_later(void);
void ibsim_forced_migration(struct ibsim_qp *qp);	/* under ibsim_mutex */
void ibsim_kick_sends(void);
void ibsim_queue_port_event(struct ibsim_dev *dev, u32 port,
			    enum ib_event_type type);
void ibsim_kick_events(void);
void ibsim_forget_qp(struct ibsim_qp *qp);	/* drop its queued events and packets */
int ibsim_port_set(int dev, u32 port, bool up);
int ibsim_link_set(u32 lid, bool up);
int ibsim_lmc_set(u32 lmc);
void ibsim_settle(void);	/* raise the queued events, wait for them */
u32 ibsim_base_lid(int dev, u32 port, u8 lmc);
u32 ibsim_slid(struct ibsim_qp *qp);	/* its primary path's source LID */
u32 ibsim_ah_slid(struct ibsim_dev *d, u32 port, const struct rdma_ah_attr *ah);
int ibsim_traffic_set(int dev, int qpn, bool on);	/* qpn < 0: global */
int ibsim_poke(int dev, int qpn);			/* qpn < 0: all */
struct ibsim_qp *ibsim_qp_at(int dev, u32 qpn, int *err);	/* under ibsim_mutex */
void ibsim_show(struct seq_file *m);
void ibsim_events_show(struct seq_file *m);
int ibsim_fabric_init(void);
void ibsim_fabric_exit(void);

/* dgram.c: GSI and UD datagrams */
int ibsim_gsi_send(struct ibsim_qp *qp, const struct ib_ud_wr *wr);
void ibsim_dgram_forget(struct ibsim_qp *qp);
void ibsim_dgram_init(void);

/* bench.c: the QP event loop of the probe-cost benchmark */
int ibsim_bench_events(int dev, u32 qpn, u32 n);
void ibsim_bench_show(struct seq_file *m);

/* ctl.c: /sys/kernel/debug/ibsim/ */
int ibsim_ctl_init(void);
void ibsim_ctl_exit(void);

#endif
