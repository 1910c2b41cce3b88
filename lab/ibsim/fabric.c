// SPDX-License-Identifier: GPL-2.0
/*
 * The simulated fabric: one switch routing by DLID to the four ports, the
 * "packets" RC/UC QPs exchange, retries, and the async events they raise.
 *
 * A "packet" carries what APM needs (IBTA; the receive rules are
 * qib_ruc_check_hdr's) and the sender's posted sends, which the responder
 * executes once they pass those rules (data.c): it travels from a sender over its
 * primary path (local port -> DLID) to the QP named by its dest_qp_num on
 * the DLID's device, and carries MigReq=1 when the sender is MIGRATED.
 * Every tick_ms each RC/UC QP in RTS/SQD with requests to send (its posted
 * sends, or the simulated request stream while its traffic is on) sends
 * one. An RC request that arrives is ACKed over the responder's primary
 * path, and the ACK obeys the same receive rules, so traffic in one
 * direction arms (or migrates) both ends. A request or ACK that is lost
 * leaves the request unacknowledged; when (retry_cnt + 1) local ACK
 * timeouts have passed, the requester's retries are exhausted
 * (retries_exhausted: migrate if ARMED, else ERR). Nothing else notices a
 * failure: a port going DOWN raises PORT_ERR on its own device and no
 * more; an idle QP on a dead path notices nothing.
 *
 * Datagrams (GSI, UD) are in dgram.c.
 */
#include <linux/irq_work.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <rdma/ib_mad.h>
#include "ibsim.h"

static unsigned int tick_ms = 50;
module_param(tick_ms, uint, 0444);
MODULE_PARM_DESC(tick_ms, "interval of the simulated RC traffic (ms)");

bool ibsim_traffic = true;

struct ibsim_ev {
	struct list_head list;
	struct ibsim_qp *qp;		/* NULL: a port event */
	struct ibsim_dev *dev;
	u32 port;
	enum ib_event_type type;
};


#define EVLOG_LEN 256
static struct {
	u64 seq;
	int dev;
	u32 qpn, port;
	bool is_qp;
	int type;
} evlog[EVLOG_LEN];
static u64 evlog_next;

static LIST_HEAD(ev_list);
static LIST_HEAD(later_list);	/* raised by ev_later_work, not before */
static DEFINE_SPINLOCK(ev_lock);
static struct work_struct ev_work;
static struct delayed_work tick_work, ev_later_work;
static struct work_struct sends_work;
static bool stopping;

static const char *const event_names[] = {
	[IB_EVENT_CQ_ERR] = "CQ_ERR",
	[IB_EVENT_QP_FATAL] = "QP_FATAL",
	[IB_EVENT_QP_REQ_ERR] = "QP_REQ_ERR",
	[IB_EVENT_QP_ACCESS_ERR] = "QP_ACCESS_ERR",
	[IB_EVENT_COMM_EST] = "COMM_EST",
	[IB_EVENT_SQ_DRAINED] = "SQ_DRAINED",
	[IB_EVENT_PATH_MIG] = "PATH_MIG",
	[IB_EVENT_PATH_MIG_ERR] = "PATH_MIG_ERR",
	[IB_EVENT_DEVICE_FATAL] = "DEVICE_FATAL",
	[IB_EVENT_PORT_ACTIVE] = "PORT_ACTIVE",
	[IB_EVENT_PORT_ERR] = "PORT_ERR",
	[IB_EVENT_QP_LAST_WQE_REACHED] = "QP_LAST_WQE_REACHED",
};

static const char *event_name(int e)
{
	if (e < 0 || e >= ARRAY_SIZE(event_names) || !event_names[e])
		return "OTHER";
	return event_names[e];
}

/* --- the switch --- */

static bool path_alive(struct ibsim_qp *qp, bool alt)
{
	u32 port = alt ? qp->attr.alt_port_num : qp->attr.port_num;
	struct rdma_ah_attr *ah = alt ? &qp->attr.alt_ah_attr : &qp->attr.ah_attr;

	if (port < 1 || port > IBSIM_NPORT)
		return false;
	return ibsim_port_alive(&qp->dev->port[port]) &&
		ibsim_lid_alive(rdma_ah_get_dlid(ah));
}

static bool connected_type(struct ibsim_qp *qp)
{
	return qp->ibqp.qp_type == IB_QPT_RC || qp->ibqp.qp_type == IB_QPT_UC;
}

static struct ibsim_qp *find_qp(struct ibsim_dev *d, u32 qpn)
{
	struct ibsim_qp *qp;

	list_for_each_entry(qp, &ibsim_qps, list)
		if (qp->dev == d && qp->ibqp.qp_num == qpn &&
		    qp->ibqp.qp_type != IB_QPT_GSI)
			return qp;
	return NULL;
}

/* --- events --- */

static void queue_on(struct list_head *list, struct ibsim_qp *qp,
		     struct ibsim_dev *d, u32 port, enum ib_event_type type)
{
	struct ibsim_ev *e = kzalloc(sizeof(*e), GFP_ATOMIC);
	unsigned long flags;

	if (!e) {
		pr_warn_ratelimited("ibsim: event %s lost (no memory)\n",
				    event_name(type));
		return;
	}
	e->qp = qp;
	e->dev = d;
	e->port = port;
	e->type = type;
	spin_lock_irqsave(&ev_lock, flags);
	list_add_tail(&e->list, list);
	spin_unlock_irqrestore(&ev_lock, flags);
}

static void queue_ev(struct ibsim_qp *qp, struct ibsim_dev *d, u32 port,
		     enum ib_event_type type)
{
	queue_on(&ev_list, qp, d, port, type);
}

/* A QP event raised only once ibsim_kick_events_later's delay has passed. */
void ibsim_queue_qp_event_later(struct ibsim_qp *qp, enum ib_event_type type)
{
	queue_on(&later_list, qp, qp->dev, 0, type);
}

/* Moves the held events to the queue (their time came, or their QP goes). */
void ibsim_release_later(void)
{
	spin_lock_irq(&ev_lock);
	list_splice_tail_init(&later_list, &ev_list);
	spin_unlock_irq(&ev_lock);
}

/*
 * mlx5's EQE numbers for the QP events (include/linux/mlx5/device.h), and
 * back: mlx5_ib_handle_qp_event's mapping.
 */
static const struct {
	enum ib_event_type ib;
	int raw;
} raw_types[] = {
	{ IB_EVENT_PATH_MIG, MLX5_EVENT_TYPE_PATH_MIG },
	{ IB_EVENT_COMM_EST, MLX5_EVENT_TYPE_COMM_EST },
	{ IB_EVENT_SQ_DRAINED, MLX5_EVENT_TYPE_SQ_DRAINED },
	{ IB_EVENT_QP_LAST_WQE_REACHED, MLX5_EVENT_TYPE_SRQ_LAST_WQE },
	{ IB_EVENT_QP_FATAL, MLX5_EVENT_TYPE_WQ_CATAS_ERROR },
	{ IB_EVENT_PATH_MIG_ERR, MLX5_EVENT_TYPE_PATH_MIG_FAILED },
	{ IB_EVENT_QP_REQ_ERR, MLX5_EVENT_TYPE_WQ_INVAL_REQ_ERROR },
	{ IB_EVENT_QP_ACCESS_ERR, MLX5_EVENT_TYPE_WQ_ACCESS_ERROR },
};

/*
 * Shaped like mlx5_ib_qp_event (drivers/infiniband/hw/mlx5/qp.c): the
 * driver's first sight of a QP event, with the QPN only (in its
 * struct mlx5_core_qp) and the EQE number, in atomic context; it queues
 * the typed copy that the ordered work item hands to the QP's event
 * handler. apmwatch's raw driver hook attaches here in the lab
 * (trace --raw-event-hook ibsim:ibsim_mlx5_qp_event).
 */
noinline void ibsim_mlx5_qp_event(struct mlx5_core_qp *mqp, int type)
{
	struct ibsim_qp *qp = container_of(mqp, struct ibsim_qp, base.mqp)->base.container_mibqp;
	int i;

	for (i = 0; i < ARRAY_SIZE(raw_types); i++) {
		if (raw_types[i].raw == type) {
			queue_ev(qp, qp->dev, 0, raw_types[i].ib);
			return;
		}
	}
	pr_warn_ratelimited("ibsim: qp %d: unknown raw event %d\n", mqp->qpn, type);
}

/*
 * The EQ interrupt. A ConnectX raises a QP's event as an EQE; the async
 * EQ's interrupt handler (mlx5_eq_async_int) hands each to the raw event
 * function in hardirq context, in the order the EQ holds them. Here the
 * raw events wait in one FIFO (the EQ) and an irq_work, which runs in
 * hardirq context (a self-IPI), hands them on in order: so the raw
 * function, and any probe on it, runs in interrupt context and may
 * interrupt whatever else runs on that CPU, a BPF program included.
 */
struct ibsim_eqe {
	struct list_head list;
	struct ibsim_qp *qp;
	int raw;
};

static LIST_HEAD(eq_list);
static DEFINE_SPINLOCK(eq_lock);
static struct irq_work eq_irq;

static void eq_irq_fn(struct irq_work *w)
{
	struct ibsim_eqe *e;

	for (;;) {
		spin_lock(&eq_lock);
		e = list_first_entry_or_null(&eq_list, struct ibsim_eqe, list);
		if (e)
			list_del(&e->list);
		spin_unlock(&eq_lock);
		if (!e)
			break;
		ibsim_mlx5_qp_event(&e->qp->base.mqp, e->raw);
		if (atomic_dec_and_test(&e->qp->raw_pending))
			wake_up_var(&e->qp->raw_pending);
		kfree(e);
	}
	/* mlx5_ib_qp_event queues the typed copy's work item itself */
	ibsim_kick_events();
}

/* Waits until the EQ holds nothing more for qp (it is being destroyed). */
void ibsim_drain_eq(struct ibsim_qp *qp)
{
	wait_var_event(&qp->raw_pending, !atomic_read(&qp->raw_pending));
}

/* A QP event from the fabric goes through the raw event path, as on mlx5. */
void ibsim_queue_qp_event(struct ibsim_qp *qp, enum ib_event_type type)
{
	struct ibsim_eqe *e;
	unsigned long flags;
	int i;

	for (i = 0; i < ARRAY_SIZE(raw_types); i++) {
		if (raw_types[i].ib != type)
			continue;
		e = kzalloc(sizeof(*e), GFP_ATOMIC);
		if (!e) {
			pr_warn_ratelimited("ibsim: event %s lost (no memory)\n",
					    event_name(type));
			return;
		}
		e->qp = qp;
		e->raw = raw_types[i].raw;
		atomic_inc(&qp->raw_pending);
		spin_lock_irqsave(&eq_lock, flags);
		list_add_tail(&e->list, &eq_list);
		spin_unlock_irqrestore(&eq_lock, flags);
		irq_work_queue(&eq_irq);
		return;
	}
	queue_ev(qp, qp->dev, 0, type);
}

void ibsim_queue_port_event(struct ibsim_dev *d, u32 port,
			    enum ib_event_type type)
{
	queue_ev(NULL, d, port, type);
}

void ibsim_kick_events(void)
{
	queue_work(ibsim_wq, &ev_work);
}

static void ev_later_fn(struct work_struct *w)
{
	ibsim_release_later();
	ibsim_kick_events();
}

/* Raises the queued events a little after the caller returns. */
void ibsim_kick_events_later(void)
{
	queue_delayed_work(ibsim_wq, &ev_later_work, msecs_to_jiffies(10));
}

static void log_ev(struct ibsim_ev *e)
{
	unsigned long flags;
	int i;

	spin_lock_irqsave(&ev_lock, flags);
	i = evlog_next % EVLOG_LEN;
	evlog[i].seq = evlog_next++;
	evlog[i].dev = e->dev->index;
	evlog[i].is_qp = e->qp != NULL;
	evlog[i].qpn = e->qp ? e->qp->ibqp.qp_num : 0;
	evlog[i].port = e->port;
	evlog[i].type = e->type;
	spin_unlock_irqrestore(&ev_lock, flags);
}

/* Raises queued events, one at a time, as a driver's event path does. */
static void ev_fn(struct work_struct *w)
{
	struct ibsim_ev *e;
	struct ib_event ev;

	for (;;) {
		spin_lock_irq(&ev_lock);
		e = list_first_entry_or_null(&ev_list, struct ibsim_ev, list);
		if (e)
			list_del(&e->list);
		spin_unlock_irq(&ev_lock);
		if (!e)
			return;
		memset(&ev, 0, sizeof(ev));
		ev.device = &e->dev->ibdev;
		ev.event = e->type;
		log_ev(e);
		if (e->qp) {
			ev.element.qp = &e->qp->ibqp;
			if (e->qp->ibqp.event_handler)
				e->qp->ibqp.event_handler(&ev,
						e->qp->ibqp.qp_context);
		} else {
			ev.element.port_num = e->port;
			ib_dispatch_event(&ev);
		}
		kfree(e);
	}
}

/*
 * Raises a QP event now, in the caller's context, as rdmavt does from
 * inside rvt_modify_qp after unlocking. No ibsim lock may be held.
 */
void ibsim_raise_qp_event(struct ibsim_qp *qp, enum ib_event_type type)
{
	struct ibsim_ev e = { .qp = qp, .dev = qp->dev, .type = type };
	struct ib_event ev = {
		.device = &qp->dev->ibdev,
		.event = type,
		.element.qp = &qp->ibqp,
	};

	log_ev(&e);
	if (qp->ibqp.event_handler)
		qp->ibqp.event_handler(&ev, qp->ibqp.qp_context);
}

/* Under ibsim_mutex: no packet queued may name qp any more. */
void ibsim_forget_qp(struct ibsim_qp *qp)
{
	ibsim_dgram_forget(qp);
}

/* --- RC/UC "packets", ACKs and retries (all under ibsim_mutex) --- */

static bool sending(struct ibsim_qp *qp)
{
	return connected_type(qp) && (qp->attr.qp_state == IB_QPS_RTS ||
				      qp->attr.qp_state == IB_QPS_SQD);
}

/* The responder side answers in RTR, RTS and SQD. */
static bool receiving(struct ibsim_qp *qp)
{
	return qp->attr.qp_state >= IB_QPS_RTR && qp->attr.qp_state <= IB_QPS_SQD;
}

/*
 * d takes a packet from s that arrived on d's port dport: the header
 * checks of qib_ruc_check_hdr / hfi1_ruc_check_hdr. ARMED with MigReq=1:
 * it must have come on the alternate path (SLID == alternate DLID, the
 * alternate's port), then d migrates; otherwise it must have come on the
 * primary, and REARM with MigReq=0 turns ARMED. A packet that fails the
 * check is dropped. The first packet in RTR raises COMM_EST (IBTA; rvt's
 * rvt_comm_est when state == RTR), and nothing else ever does.
 */
static bool receive(struct ibsim_qp *d, struct ibsim_qp *s, u32 dport)
{
	u32 slid = ibsim_slid(s);
	bool migreq = s->attr.path_mig_state == IB_MIG_MIGRATED;
	struct ib_qp_attr *a = &d->attr;

	if (!receiving(d) || d->ibqp.qp_type != s->ibqp.qp_type ||
	    a->dest_qp_num != s->ibqp.qp_num)
		return false;
	if (a->path_mig_state == IB_MIG_ARMED && migreq) {
		if (!d->alt_valid || dport != a->alt_port_num ||
		    rdma_ah_get_dlid(&a->alt_ah_attr) != slid)
			return false;
		ibsim_migrate(d);
	} else {
		if (dport != a->port_num || rdma_ah_get_dlid(&a->ah_attr) != slid)
			return false;
		if (a->path_mig_state == IB_MIG_REARM && !migreq)
			a->path_mig_state = IB_MIG_ARMED;
	}
	if (a->qp_state == IB_QPS_RTR && !d->rtr_packet) {
		d->rtr_packet = true;
		ibsim_queue_qp_event(d, IB_EVENT_COMM_EST);
	}
	d->rx++;
	return true;
}

/* d's ACK to s over d's primary path: true if s took it. */
static bool sending_or_rtr_ack(struct ibsim_qp *d, struct ibsim_qp *s)
{
	struct ibsim_dev *sd;
	u32 sport;

	if (!path_alive(d, false) ||
	    !ibsim_lid_port(rdma_ah_get_dlid(&d->attr.ah_attr), &sd, &sport) ||
	    sd != s->dev)
		return false;
	return receive(s, d, sport);
}

/* One packet from s over its primary path; the QP that took it, or NULL. */
static struct ibsim_qp *transmit(struct ibsim_qp *s)
{
	struct ibsim_dev *dd;
	struct ibsim_qp *d;
	u32 dport;

	if (!path_alive(s, false) ||
	    !ibsim_lid_port(rdma_ah_get_dlid(&s->attr.ah_attr), &dd, &dport))
		return NULL;
	s->tx++;
	d = find_qp(dd, s->attr.dest_qp_num);
	return d && receive(d, s, dport) ? d : NULL;
}

/*
 * Retries ran out (hfi1/qib restart_rc): an ARMED QP migrates and starts
 * its retries again on the new path; any other QP's send fails with
 * RETRY_EXC_ERR and the QP goes to ERR, with no async event. With the
 * dead-alternate knob at pathmig-err, an ARMED QP whose alternate is dead
 * gets PATH_MIG_ERR instead of migrating, then goes to ERR.
 */
static void round_trip(struct ibsim_qp *s);

static void retries_exhausted(struct ibsim_qp *qp)
{
	qp->retries_exhausted++;
	if (qp->attr.path_mig_state == IB_MIG_ARMED) {
		if (ibsim_knob[KNOB_DEAD_ALT] == DEADALT_RETRY ||
		    (qp->alt_valid && path_alive(qp, true))) {
			/*
			 * restart_rc resends the request at once on the new
			 * path, with MigReq=1: the peer learns of the
			 * migration long before software hears of it.
			 */
			ibsim_migrate(qp);
			round_trip(qp);
			return;
		}
		ibsim_queue_qp_event(qp, IB_EVENT_PATH_MIG_ERR);
	}
	ibsim_to_error(qp, IB_WC_RETRY_EXC_ERR);
}

/* The local ACK timeout, 4.096 us << timeout; 0 is infinite (ibv_modify_qp(3)). */
static u64 ack_timeout_ns(u8 timeout)
{
	return timeout ? 4096ULL << min_t(u8, timeout, 31) : 0;
}

/* Whether qp has requests to send: its own, or the simulated stream. */
static bool has_requests(struct ibsim_qp *qp)
{
	if (READ_ONCE(qp->own_sends) ||
	    (qp->ibqp.srq && READ_ONCE(to_ssrq(qp->ibqp.srq)->posted)))
		return ibsim_sq_count(qp) > 0;
	return ibsim_traffic && qp->traffic;
}

/* A NAK's status at the requester. */
static enum ib_wc_status nak_status(enum ibsim_exec r)
{
	switch (r) {
	case EXEC_NAK_ACCESS:
		return IB_WC_REM_ACCESS_ERR;
	case EXEC_NAK_INVALID:
		return IB_WC_REM_INV_REQ_ERR;
	default:
		return IB_WC_REM_OP_ERR;
	}
}

/*
 * The response came back: the sends the responder took complete; an RNR
 * NAK holds the next one for the responder's RNR timer (rnr_retry times,
 * 7 for ever); any other NAK fails it and the QP goes to ERR.
 */
static void response(struct ibsim_qp *s, struct ibsim_qp *d, enum ibsim_exec r)
{
	s->acks++;
	s->unacked_since_ns = 0;
	ibsim_complete_executed(s);
	if (r == EXEC_OK) {
		s->rnr_naks = 0;
		return;
	}
	if (r == EXEC_RNR) {
		s->rnr_naks_total++;
		if (s->attr.rnr_retry != 7 && s->rnr_naks++ >= s->attr.rnr_retry) {
			ibsim_to_error(s, IB_WC_RNR_RETRY_EXC_ERR);
			return;
		}
		s->rnr_until_ns = ktime_get_ns() +
			ibsim_rnr_timer_ns(d->attr.min_rnr_timer);
		return;
	}
	ibsim_to_error(s, nak_status(r));
}

/*
 * One round of qp's requests. A request that reaches the responder is
 * executed there (data.c: the sends it has not taken yet); RC answers
 * with an ACK or NAK over the responder's primary path, which the
 * requester checks like any packet (so the ACK's MigReq arms it, or
 * migrates it). A request or response lost leaves the request
 * unacknowledged; after (retry_cnt + 1) local ACK timeouts the retries run
 * out. UC has neither ACKs nor a retry timer: its sends complete once
 * sent, and a UC path failure goes unnoticed.
 */
static void round_trip(struct ibsim_qp *s)
{
	enum ib_wc_status local = IB_WC_SUCCESS;
	enum ibsim_exec r = EXEC_OK;
	struct ibsim_qp *d;
	u64 now, tmo;

	d = transmit(s);
	if (d && READ_ONCE(s->own_sends))
		r = ibsim_execute(s, d, &local);
	if (r == EXEC_LOCAL) {
		ibsim_complete_executed(s);
		ibsim_to_error(s, local);
		return;
	}
	if (s->ibqp.qp_type == IB_QPT_UC) {
		ibsim_complete_sent(s);
		return;
	}
	if (d && sending_or_rtr_ack(d, s)) {
		response(s, d, r);
		return;
	}
	now = ktime_get_ns();
	if (!s->unacked_since_ns) {
		s->unacked_since_ns = now;
		return;
	}
	tmo = ack_timeout_ns(s->attr.timeout);
	if (tmo && now - s->unacked_since_ns >= tmo * (s->attr.retry_cnt + 1))
		retries_exhausted(s);
}

static void requests(struct ibsim_qp *s)
{
	if (!sending(s) || !has_requests(s)) {
		s->unacked_since_ns = 0;
		return;
	}
	if (s->rnr_until_ns && ktime_get_ns() < s->rnr_until_ns)
		return;
	s->rnr_until_ns = 0;
	round_trip(s);
}

static void tick_fn(struct work_struct *w)
{
	struct ibsim_qp *qp;

	mutex_lock(&ibsim_mutex);
	list_for_each_entry(qp, &ibsim_qps, list)
		requests(qp);
	mutex_unlock(&ibsim_mutex);
	ev_fn(NULL);	/* same ordered queue: raise them now */
	if (!READ_ONCE(stopping))
		queue_delayed_work(ibsim_wq, &tick_work,
				   msecs_to_jiffies(tick_ms ? tick_ms : 1));
}

/*
 * A QP software just moved to its alternate sends its next request at once
 * if it has any (its request stream does not wait for a tick), with
 * MigReq=1. Under ibsim_mutex.
 */
void ibsim_forced_migration(struct ibsim_qp *qp)
{
	if (sending(qp) && has_requests(qp))
		round_trip(qp);
}

/* Posted sends go out at once, not at the next tick. */
static void sends_fn(struct work_struct *w)
{
	struct ibsim_qp *qp;

	mutex_lock(&ibsim_mutex);
	list_for_each_entry(qp, &ibsim_qps, list)
		if (READ_ONCE(qp->own_sends) && ibsim_sq_count(qp) &&
		    !qp->unacked_since_ns && !qp->rnr_until_ns)
			requests(qp);
	mutex_unlock(&ibsim_mutex);
	ev_fn(NULL);
}

void ibsim_kick_sends(void)
{
	queue_work(ibsim_wq, &sends_work);
}

/* Runs the queued events before a control write returns. */
void ibsim_settle(void)
{
	irq_work_sync(&eq_irq);
	ibsim_kick_events();
	flush_workqueue(ibsim_wq);
}

static struct ibsim_dev *dev_at(int i)
{
	return i >= 0 && i < IBSIM_NDEV ? ibsim_devs[i] : NULL;
}

int ibsim_port_set(int dev, u32 port, bool up)
{
	struct ibsim_dev *d = dev_at(dev);
	enum ib_port_state want = up ? IB_PORT_ACTIVE : IB_PORT_DOWN;

	if (!d)
		return -ENODEV;
	if (port < 1 || port > IBSIM_NPORT)
		return -EINVAL;
	mutex_lock(&ibsim_mutex);
	if (d->port[port].state != want) {
		d->port[port].state = want;
		ibsim_queue_port_event(d, port, up ? IB_EVENT_PORT_ACTIVE :
				       IB_EVENT_PORT_ERR);
	}
	mutex_unlock(&ibsim_mutex);
	ibsim_settle();
	return 0;
}

/* Under ibsim_mutex: QP qpn of device dev; NULL with *err ENODEV or ENOENT. */
struct ibsim_qp *ibsim_qp_at(int dev, u32 qpn, int *err)
{
	struct ibsim_qp *qp = dev_at(dev) ? find_qp(dev_at(dev), qpn) : NULL;

	if (!qp)
		*err = dev_at(dev) ? -ENOENT : -ENODEV;
	return qp;
}

int ibsim_traffic_set(int dev, int qpn, bool on)
{
	struct ibsim_qp *qp;
	int ret = 0;

	mutex_lock(&ibsim_mutex);
	if (qpn < 0) {
		ibsim_traffic = on;
	} else {
		qp = dev_at(dev) ? find_qp(dev_at(dev), qpn) : NULL;
		if (qp)
			qp->traffic = on;
		else
			ret = dev_at(dev) ? -ENOENT : -ENODEV;
	}
	mutex_unlock(&ibsim_mutex);
	return ret;
}

int ibsim_poke(int dev, int qpn)
{
	struct ibsim_qp *qp;
	int ret = 0;

	mutex_lock(&ibsim_mutex);
	if (qpn < 0) {
		list_for_each_entry(qp, &ibsim_qps, list)
			if (sending(qp))
				round_trip(qp);
	} else {
		qp = dev_at(dev) ? find_qp(dev_at(dev), qpn) : NULL;
		if (qp && sending(qp))
			round_trip(qp);
		else
			ret = dev_at(dev) ? -ENOENT : -ENODEV;
	}
	mutex_unlock(&ibsim_mutex);
	ibsim_settle();
	return ret;
}

static const char *const port_states[] = {
	"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER",
};

static const char *qp_type_name(enum ib_qp_type t)
{
	switch (t) {
	case IB_QPT_RC: return "RC";
	case IB_QPT_UC: return "UC";
	case IB_QPT_UD: return "UD";
	case IB_QPT_GSI: return "GSI";
	default: return "OTHER";
	}
}

void ibsim_show(struct seq_file *m)
{
	struct ibsim_qp *qp;
	int i;
	u32 p;

	mutex_lock(&ibsim_mutex);
	seq_printf(m, "{\"traffic\":%s,\"tick_ms\":%u}\n",
		   ibsim_traffic ? "true" : "false", tick_ms);
	for (i = 0; i < IBSIM_NDEV; i++) {
		for (p = 1; ibsim_devs[i] && p <= IBSIM_NPORT; p++) {
			struct ibsim_port *pt = &ibsim_devs[i]->port[p];

			u8 all = (1U << (1U << pt->lmc)) - 1;
			u32 k;

			/* link: "up" every LID routed, "down" none, else "partial" */
			seq_printf(m, "{\"dev\":\"ibsim%d\",\"port\":%u,\"lid\":%u,\"lmc\":%u,\"state\":\"%s\",\"link\":\"%s\",\"sm_lid\":%u,\"lids_down\":[",
				   i, p, pt->lid, pt->lmc, pt->state < ARRAY_SIZE(port_states) ?
				   port_states[pt->state] : "?",
				   !pt->lids_down ? "up" : pt->lids_down == all ? "down" : "partial",
				   IBSIM_SM_LID);
			for (k = 0; k < (1U << pt->lmc); k++)
				if (pt->lids_down & BIT(k))
					seq_printf(m, "%s%u", pt->lids_down & (BIT(k) - 1) ? "," : "", pt->lid + k);
			seq_puts(m, "]}\n");
		}
	}
	list_for_each_entry(qp, &ibsim_qps, list) {
		struct ib_qp_attr *a = &qp->attr;

		seq_printf(m, "{\"dev\":\"ibsim%d\",\"qpn\":%u,\"type\":\"%s\",\"owner\":\"%s\",\"state\":\"%s\",\"path_mig_state\":\"%s\"",
			   qp->dev->index, qp->ibqp.qp_num,
			   qp_type_name(qp->ibqp.qp_type),
			   qp->ibqp.uobject ? "user" : "kernel",
			   ibsim_qps_name(a->qp_state),
			   ibsim_mig_name(a->path_mig_state));
		if (connected_type(qp))
			seq_printf(m, ",\"port\":%u,\"dlid\":%u,\"dest_qpn\":%u,\"alt_valid\":%s,\"alt_port\":%u,\"alt_dlid\":%u,\"slid\":%u,\"alt_slid\":%u,\"timeout\":%u,\"retry_cnt\":%u,\"traffic\":%s,\"own_sends\":%s,\"sq\":%d,\"unacked\":%s,\"tx\":%llu,\"rx\":%llu,\"acks\":%llu,\"migrations\":%llu,\"retries_exhausted\":%llu",
				   a->port_num, rdma_ah_get_dlid(&a->ah_attr),
				   a->dest_qp_num, qp->alt_valid ? "true" : "false",
				   a->alt_port_num,
				   rdma_ah_get_dlid(&a->alt_ah_attr), ibsim_slid(qp),
				   a->alt_port_num >= 1 && a->alt_port_num <= IBSIM_NPORT ?
				   ibsim_ah_slid(qp->dev, a->alt_port_num, &a->alt_ah_attr) : 0,
				   a->timeout,
				   a->retry_cnt, qp->traffic ? "true" : "false",
				   qp->own_sends ? "true" : "false",
				   ibsim_sq_count(qp),
				   qp->unacked_since_ns ? "true" : "false",
				   qp->tx, qp->rx, qp->acks, qp->migrations,
				   qp->retries_exhausted);
		else
			seq_printf(m, ",\"port\":%u", qp->port ? qp->port : a->port_num);
		seq_puts(m, "}\n");
	}
	mutex_unlock(&ibsim_mutex);
}

void ibsim_events_show(struct seq_file *m)
{
	u64 first, s;
	int i;

	spin_lock_irq(&ev_lock);
	first = evlog_next > EVLOG_LEN ? evlog_next - EVLOG_LEN : 0;
	for (s = first; s < evlog_next; s++) {
		i = s % EVLOG_LEN;
		if (evlog[i].is_qp)
			seq_printf(m, "{\"seq\":%llu,\"dev\":\"ibsim%d\",\"qpn\":%u,\"event\":\"%s\",\"event_num\":%d}\n",
				   evlog[i].seq, evlog[i].dev, evlog[i].qpn,
				   event_name(evlog[i].type), evlog[i].type);
		else
			seq_printf(m, "{\"seq\":%llu,\"dev\":\"ibsim%d\",\"port\":%u,\"event\":\"%s\",\"event_num\":%d}\n",
				   evlog[i].seq, evlog[i].dev, evlog[i].port,
				   event_name(evlog[i].type), evlog[i].type);
	}
	spin_unlock_irq(&ev_lock);
}

int ibsim_fabric_init(void)
{
	init_irq_work(&eq_irq, eq_irq_fn);
	INIT_WORK(&ev_work, ev_fn);
	INIT_WORK(&sends_work, sends_fn);
	INIT_DELAYED_WORK(&ev_later_work, ev_later_fn);
	ibsim_dgram_init();
	INIT_DELAYED_WORK(&tick_work, tick_fn);
	queue_delayed_work(ibsim_wq, &tick_work, msecs_to_jiffies(tick_ms));
	return 0;
}

void ibsim_fabric_exit(void)
{
	WRITE_ONCE(stopping, true);
	cancel_delayed_work_sync(&tick_work);
	cancel_delayed_work_sync(&ev_later_work);
	irq_work_sync(&eq_irq);
	flush_workqueue(ibsim_wq);
}
