// SPDX-License-Identifier: GPL-2.0
/*
 * QPs: create/modify/query/destroy and the work queues.
 *
 * modify_qp checks the transition with ib_modify_qp_is_ok() and keeps every
 * attribute it was given; query_qp answers from that copy. The path
 * migration state follows rdmavt's rvt_modify_qp (drivers/infiniband/sw/
 * rdmavt/qp.c): REARM only from MIGRATED into RTS (EINVAL on an ARMED QP),
 * MIGRATED refused from REARM and only into RTS/SQD, a no-op from MIGRATED,
 * and a migration when ARMED (forced); ARMED is refused unless the
 * armed-modify knob says firmware accepts it (knob.c). A migration copies
 * the alternate into the primary (hfi1/qib *_migrate_qp): afterwards both
 * are the same path, unless the alt-after-migration knob zeroes it.
 *
 * Data path: GSI/UD sends are carried by the switch (dgram.c). RC/UC sends
 * are queued here and carried by the fabric (fabric.c), their payloads
 * executed at the responder (data.c): an RC send completes when its
 * request is acknowledged, fails with RETRY_EXC_ERR when its retries run
 * out, and a UC send completes once it is sent. A QP in ERR completes
 * whatever is posted with IB_WC_WR_FLUSH_ERR.
 */
#include <linux/slab.h>
#include <linux/delay.h>
#include "ibsim.h"

static const char *const qps_names[] = {
	"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR",
};
static const char *const mig_names[] = { "MIGRATED", "REARM", "ARMED" };

const char *ibsim_qps_name(int s)
{
	return s >= 0 && s < ARRAY_SIZE(qps_names) ? qps_names[s] : "?";
}

const char *ibsim_mig_name(int m)
{
	return m >= 0 && m < ARRAY_SIZE(mig_names) ? mig_names[m] : "?";
}

int ibsim_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
		    struct ib_udata *udata)
{
	struct ibsim_qp *qp = to_sqp(ibqp);
	struct ibsim_dev *d = to_sdev(ibqp->device);

	switch (init->qp_type) {
	case IB_QPT_RC:
	case IB_QPT_UC:
	case IB_QPT_UD:
		break;
	case IB_QPT_GSI:
		if (init->port_num < 1 || init->port_num > IBSIM_NPORT)
			return -EINVAL;
		break;
	default:
		return -EOPNOTSUPP;
	}
	if (init->create_flags)
		return -EOPNOTSUPP;
	if (init->srq && init->qp_type != IB_QPT_RC && init->qp_type != IB_QPT_UC)
		return -EOPNOTSUPP;	/* datagrams take their receives from the QP's own queue */
	if (init->cap.max_send_wr > IBSIM_MAX_WR ||
	    init->cap.max_recv_wr > IBSIM_MAX_WR ||
	    init->cap.max_send_sge > IBSIM_MAX_SGE ||
	    init->cap.max_recv_sge > IBSIM_MAX_SGE)
		return -EINVAL;
	qp->dev = d;
	qp->scq = to_scq(init->send_cq);
	qp->rcq = to_scq(init->recv_cq);
	qp->port = init->port_num;
	qp->rq_size = max_t(u32, init->cap.max_recv_wr, 1);
	qp->rq = kvcalloc(qp->rq_size, sizeof(*qp->rq), GFP_KERNEL);
	if (!qp->rq)
		return -ENOMEM;
	qp->sq_size = max_t(u32, init->cap.max_send_wr, 1);
	qp->sq = kvcalloc(qp->sq_size, sizeof(*qp->sq), GFP_KERNEL);
	if (!qp->sq) {
		kvfree(qp->rq);
		return -ENOMEM;
	}
	spin_lock_init(&qp->rq_lock);
	spin_lock_init(&qp->sq_lock);
	/* a user QP's sends are checked through their lkeys: no inline data */
	init->cap.max_inline_data = ibqp->uobject || udata ? 0 :
		min_t(u32, init->cap.max_inline_data, IBSIM_MAX_INLINE);
	qp->cap = init->cap;
	qp->sq_sig_type = init->sq_sig_type;
	qp->attr.qp_state = IB_QPS_RESET;
	qp->attr.path_mig_state = IB_MIG_MIGRATED;
	qp->traffic = true;

	mutex_lock(&ibsim_mutex);
	ibqp->qp_num = init->qp_type == IB_QPT_GSI ? 1 : d->next_qpn++;
	qp->base.container_mibqp = qp;
	qp->base.mqp.qpn = ibqp->qp_num;
	list_add_tail(&qp->list, &ibsim_qps);
	mutex_unlock(&ibsim_mutex);
	return 0;
}

int ibsim_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct ibsim_qp *qp = to_sqp(ibqp);

	/*
	 * Off the list, nothing new is raised on it; what is queued is
	 * delivered before destroy returns, as mlx5 does (destroy waits for
	 * the reference each event in flight holds).
	 */
	mutex_lock(&ibsim_mutex);
	list_del(&qp->list);
	ibsim_forget_qp(qp);
	mutex_unlock(&ibsim_mutex);
	ibsim_drain_eq(qp);	/* its raw events, then their typed copies */
	ibsim_release_later();
	ibsim_kick_events();
	flush_workqueue(ibsim_wq);
	kvfree(qp->rq);
	kvfree(qp->sq);
	return 0;
}

#if IBSIM_OLD_OPS
/* Before 5.15 the driver allocates the QP and frees it once destroyed. */
struct ib_qp *ibsim_create_qp_old(struct ib_pd *pd, struct ib_qp_init_attr *init,
				  struct ib_udata *udata)
{
	struct ibsim_qp *qp = kzalloc(sizeof(*qp), GFP_KERNEL);
	int err;

	if (!qp)
		return ERR_PTR(-ENOMEM);
	qp->ibqp.device = pd->device;
	err = ibsim_create_qp(&qp->ibqp, init, udata);
	if (err) {
		kfree(qp);
		return ERR_PTR(err);
	}
	return &qp->ibqp;
}

int ibsim_destroy_qp_old(struct ib_qp *ibqp, struct ib_udata *udata)
{
	int err = ibsim_destroy_qp(ibqp, udata);

	if (!err)
		kfree(to_sqp(ibqp));
	return err;
}
#endif

/*
 * The QP moves to its alternate path: the alternate is copied into the
 * primary, its local ACK timeout with it (IBTA; hfi1/qib *_migrate_qp),
 * and stays as it was, or reads zero (alt-after-migration knob). Under
 * ibsim_mutex. Returns nothing: the caller raises PATH_MIG.
 */
static void copy_alt(struct ibsim_qp *qp)
{
	struct ib_qp_attr *a = &qp->attr;

	a->ah_attr = a->alt_ah_attr;
	a->port_num = a->alt_port_num;
	a->pkey_index = a->alt_pkey_index;
	a->timeout = a->alt_timeout;
	if (ibsim_knob[KNOB_ALT_AFTER_MIG] == ALT_ZERO) {
		memset(&a->alt_ah_attr, 0, sizeof(a->alt_ah_attr));
		a->alt_port_num = 0;
		a->alt_pkey_index = 0;
		a->alt_timeout = 0;
		qp->alt_valid = false;
	}
	a->path_mig_state = IB_MIG_MIGRATED;
	qp->migrations++;
	qp->unacked_since_ns = 0;	/* retries start again (restart_rc) */
}

/* The HCA migrates (retries ran out, or the peer's MigReq=1 arrived on the alternate). */
void ibsim_migrate(struct ibsim_qp *qp)
{
	copy_alt(qp);
	ibsim_queue_qp_event(qp, IB_EVENT_PATH_MIG);
}

void ibsim_flush_rq(struct ibsim_qp *qp)
{
	struct ib_wc wc = {
		.status = IB_WC_WR_FLUSH_ERR,
		.opcode = IB_WC_RECV,
		.qp = &qp->ibqp,
	};
	unsigned long flags;

	spin_lock_irqsave(&qp->rq_lock, flags);
	while (qp->rq_count) {
		wc.wr_id = qp->rq[qp->rq_head].wr_id;
		qp->rq_head = (qp->rq_head + 1) % qp->rq_size;
		qp->rq_count--;
		spin_unlock_irqrestore(&qp->rq_lock, flags);
		ibsim_cq_add(qp->rcq, &wc);
		spin_lock_irqsave(&qp->rq_lock, flags);
	}
	spin_unlock_irqrestore(&qp->rq_lock, flags);
}

/*
 * The QP goes to ERR: as a retry-exceeded send does (hfi1/qib restart_rc),
 * the send at the head completes with why and its own wr_id, later sends
 * and the receive queue are flushed (why IB_WC_WR_FLUSH_ERR: a modify to
 * ERR, or a responder that NAKed). No async event but LAST_WQE_REACHED
 * for a QP on an SRQ. Under ibsim_mutex.
 */
void ibsim_to_error(struct ibsim_qp *qp, enum ib_wc_status why)
{
	if (qp->attr.qp_state == IB_QPS_ERR)
		return;
	WRITE_ONCE(qp->attr.qp_state, IB_QPS_ERR);
	qp->unacked_since_ns = 0;
	qp->rnr_until_ns = 0;
	ibsim_fail_head(qp, why);
	ibsim_flush_rq(qp);
	if (qp->ibqp.srq)
		ibsim_queue_qp_event(qp, IB_EVENT_QP_LAST_WQE_REACHED);
}

/* rvt_modify_qp's checks; ARMED per the armed-modify knob. */
static int check_mig_state(struct ibsim_qp *qp, enum ib_mig_state want,
			   enum ib_qp_state next)
{
	enum ib_mig_state cur = qp->attr.path_mig_state;

	switch (want) {
	case IB_MIG_REARM:
		return cur == IB_MIG_ARMED || next != IB_QPS_RTS ? -EINVAL : 0;
	case IB_MIG_MIGRATED:
		if (cur == IB_MIG_REARM)
			return -EINVAL;
		return next != IB_QPS_RTS && next != IB_QPS_SQD ? -EINVAL : 0;
	case IB_MIG_ARMED:
		return ibsim_knob[KNOB_ARMED_MODIFY] == ARMED_ACCEPT ? 0 : -EINVAL;
	default:
		return -EINVAL;
	}
}

static int check_attrs(struct ibsim_qp *qp, struct ib_qp_attr *a, int mask,
		       enum ib_qp_state next)
{
	if ((mask & IB_QP_PORT) &&
	    (a->port_num < 1 || a->port_num > IBSIM_NPORT))
		return -EINVAL;
	if ((mask & IB_QP_ALT_PATH) &&
	    (a->alt_port_num < 1 || a->alt_port_num > IBSIM_NPORT ||
	     a->alt_pkey_index >= IBSIM_PKEYS))
		return -EINVAL;
	if ((mask & IB_QP_PKEY_INDEX) && a->pkey_index >= IBSIM_PKEYS)
		return -EINVAL;
	if (mask & IB_QP_PATH_MIG_STATE)
		return check_mig_state(qp, a->path_mig_state, next);
	return 0;
}

static void copy_attrs(struct ibsim_qp *qp, struct ib_qp_attr *a, int mask)
{
	struct ib_qp_attr *s = &qp->attr;

	if (mask & IB_QP_ACCESS_FLAGS)
		s->qp_access_flags = a->qp_access_flags;
	if (mask & IB_QP_PKEY_INDEX)
		s->pkey_index = a->pkey_index;
	if (mask & IB_QP_PORT)
		s->port_num = a->port_num;
	if (mask & IB_QP_QKEY)
		s->qkey = a->qkey;
	if (mask & IB_QP_AV) {
		s->ah_attr = a->ah_attr;
		s->ah_attr.grh.sgid_attr = NULL;
	}
	if (mask & IB_QP_PATH_MTU)
		s->path_mtu = a->path_mtu;
	if (mask & IB_QP_TIMEOUT)
		s->timeout = a->timeout;
	if (mask & IB_QP_RETRY_CNT)
		s->retry_cnt = a->retry_cnt;
	if (mask & IB_QP_RNR_RETRY)
		s->rnr_retry = a->rnr_retry;
	if (mask & IB_QP_RQ_PSN)
		s->rq_psn = a->rq_psn;
	if (mask & IB_QP_MAX_QP_RD_ATOMIC)
		s->max_rd_atomic = a->max_rd_atomic;
	if (mask & IB_QP_ALT_PATH) {
		s->alt_ah_attr = a->alt_ah_attr;
		s->alt_ah_attr.grh.sgid_attr = NULL;
		s->alt_port_num = a->alt_port_num;
		s->alt_pkey_index = a->alt_pkey_index;
		s->alt_timeout = a->alt_timeout;
		qp->alt_valid = true;
	}
	if (mask & IB_QP_MIN_RNR_TIMER)
		s->min_rnr_timer = a->min_rnr_timer;
	if (mask & IB_QP_SQ_PSN)
		s->sq_psn = a->sq_psn;
	if (mask & IB_QP_MAX_DEST_RD_ATOMIC)
		s->max_dest_rd_atomic = a->max_dest_rd_atomic;
	if (mask & IB_QP_DEST_QPN)
		s->dest_qp_num = a->dest_qp_num;
	if (mask & IB_QP_EN_SQD_ASYNC_NOTIFY)
		s->en_sqd_async_notify = a->en_sqd_async_notify;
}

/* After check_mig_state; true when software forced a migration. */
static bool set_mig_state(struct ibsim_qp *qp, enum ib_mig_state want)
{
	if (want == IB_MIG_MIGRATED && qp->attr.path_mig_state == IB_MIG_ARMED) {
		copy_alt(qp);
		return true;
	}
	qp->attr.path_mig_state = want;	/* REARM: ARMED once the peer's MigReq=0 arrives */
	return false;
}

int ibsim_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *a, int mask,
		    struct ib_udata *udata)
{
	struct ibsim_qp *qp = to_sqp(ibqp);
	enum ib_qp_state cur, next;
	bool forced = false, last_wqe = false;
	unsigned int lat = (mask & IB_QP_PATH_MIG_STATE) ? ibsim_pm_latency_ms() : 0;
	int ret;

	if (lat)	/* the firmware command's time (pm-latency knob) */
		msleep(lat);
	mutex_lock(&ibsim_mutex);
	cur = (mask & IB_QP_CUR_STATE) ? a->cur_qp_state : qp->attr.qp_state;
	next = (mask & IB_QP_STATE) ? a->qp_state : cur;
	if (!ib_modify_qp_is_ok(cur, next, ibqp->qp_type, mask)) {
		ret = -EINVAL;
		goto out;
	}
	ret = check_attrs(qp, a, mask, next);
	if (ret)
		goto out;
	if (next == IB_QPS_RESET) {
		memset(&qp->attr, 0, sizeof(qp->attr));
		qp->alt_valid = false;
		qp->rtr_packet = false;
		qp->unacked_since_ns = 0;
		qp->rnr_until_ns = 0;
		qp->rnr_naks = 0;
		qp->attr.path_mig_state = IB_MIG_MIGRATED;
		WRITE_ONCE(qp->attr.qp_state, IB_QPS_RESET);
		goto out;
	}
	copy_attrs(qp, a, mask);
	if (mask & IB_QP_PATH_MIG_STATE)
		forced = set_mig_state(qp, a->path_mig_state);
	if (next == IB_QPS_RTR && cur != IB_QPS_RTR)
		qp->rtr_packet = false;
	if (next == IB_QPS_ERR && cur != IB_QPS_ERR) {
		last_wqe = qp->ibqp.srq != NULL;
		ibsim_to_error(qp, IB_WC_WR_FLUSH_ERR);
	}
	WRITE_ONCE(qp->attr.qp_state, next);
	if (forced && ibsim_knob[KNOB_FORCED_EVENT] == FORCED_AFTER)
		ibsim_queue_qp_event_later(qp, IB_EVENT_PATH_MIG);
	if (forced)
		ibsim_forced_migration(qp);
out:
	mutex_unlock(&ibsim_mutex);
	if (last_wqe)
		ibsim_kick_events();
	if (!forced)
		return ret;
	/*
	 * rdmavt raises PATH_MIG from inside the modify, after unlocking;
	 * firmware may raise it after the call returned, or not at all.
	 */
	if (ibsim_knob[KNOB_FORCED_EVENT] == FORCED_INSIDE)
		ibsim_raise_qp_event(qp, IB_EVENT_PATH_MIG);
	else if (ibsim_knob[KNOB_FORCED_EVENT] == FORCED_AFTER)
		ibsim_kick_events_later();
	ibsim_kick_events();	/* what its first packet did at the peer */
	return ret;
}

int ibsim_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *a, int mask,
		   struct ib_qp_init_attr *init)
{
	struct ibsim_qp *qp = to_sqp(ibqp);

	mutex_lock(&ibsim_mutex);
	*a = qp->attr;
	if (!rdma_ah_get_port_num(&a->alt_ah_attr) &&
	    ibsim_knob[KNOB_UNLOADED_ALT_PORT] == UNLOADED_ALT_PORT1) {
		a->alt_ah_attr.type = RDMA_AH_ATTR_TYPE_IB;	/* knob.c: mlx4 */
		rdma_ah_set_port_num(&a->alt_ah_attr, 1);
		a->alt_port_num = 1;
	}
	mutex_unlock(&ibsim_mutex);
	a->cur_qp_state = a->qp_state;
	a->cap = qp->cap;
	a->sq_draining = 0;
	memset(init, 0, sizeof(*init));
	init->qp_type = ibqp->qp_type;
	init->cap = qp->cap;
	init->sq_sig_type = qp->sq_sig_type;
	init->port_num = qp->port;
	return 0;
}

/* The opcodes an RC or UC QP carries (IBTA: UC has no READ). */
static bool opcode_ok(struct ibsim_qp *qp, enum ib_wr_opcode op)
{
	switch (op) {
	case IB_WR_SEND:
	case IB_WR_SEND_WITH_IMM:
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
		return true;
	case IB_WR_RDMA_READ:
		return qp->ibqp.qp_type == IB_QPT_RC;
	default:
		return false;	/* atomics, invalidate, memory windows: not offered */
	}
}

/* Fills e from wr; inline data of a kernel QP is copied now (the caller may reuse it). */
static int fill_swqe(struct ibsim_qp *qp, const struct ib_send_wr *wr,
		     struct ibsim_swqe *e)
{
	int i;

	memset(e, 0, offsetof(struct ibsim_swqe, inl_data));
	e->wr_id = wr->wr_id;
	e->opcode = wr->opcode;
	e->signaled = wr->send_flags & IB_SEND_SIGNALED ||
		qp->sq_sig_type == IB_SIGNAL_ALL_WR;
	e->num_sge = wr->num_sge;
	for (i = 0; i < wr->num_sge; i++) {
		e->sge[i] = wr->sg_list[i];
		e->len += wr->sg_list[i].length;
	}
	if (wr->opcode == IB_WR_SEND_WITH_IMM ||
	    wr->opcode == IB_WR_RDMA_WRITE_WITH_IMM)
		e->imm = wr->ex.imm_data;
	if (wr->opcode == IB_WR_RDMA_WRITE || wr->opcode == IB_WR_RDMA_READ ||
	    wr->opcode == IB_WR_RDMA_WRITE_WITH_IMM) {
		e->remote_addr = rdma_wr(wr)->remote_addr;
		e->rkey = rdma_wr(wr)->rkey;
	}
	/* a user QP has no inline data (max_inline_data 0): its lkeys are checked */
	if ((wr->send_flags & IB_SEND_INLINE) && !qp->ibqp.uobject &&
	    wr->opcode != IB_WR_RDMA_READ) {
		u32 off = 0;

		if (e->len > IBSIM_MAX_INLINE)
			return -EINVAL;
		for (i = 0; i < wr->num_sge; i++) {
			memcpy(e->inl_data + off,
			       (void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			off += wr->sg_list[i].length;
		}
		e->inl = true;
	}
	return 0;
}

static int post_send_one(struct ibsim_qp *qp, const struct ib_send_wr *wr)
{
	enum ib_qp_state st = READ_ONCE(qp->attr.qp_state);
	struct ibsim_swqe *e;
	unsigned long flags;
	struct ib_wc wc = {
		.wr_id = wr->wr_id,
		.opcode = IB_WC_SEND,
		.qp = &qp->ibqp,
	};
	int ret;

	if (wr->num_sge > qp->cap.max_send_sge || wr->num_sge > IBSIM_MAX_SGE)
		return -EINVAL;
	if (st == IB_QPS_ERR) {
		wc.status = IB_WC_WR_FLUSH_ERR;
		ibsim_cq_add(qp->scq, &wc);
		return 0;
	}
	if (st != IB_QPS_RTS && st != IB_QPS_SQD)
		return -EINVAL;
	if (qp->ibqp.qp_type == IB_QPT_GSI || qp->ibqp.qp_type == IB_QPT_UD)
		return ibsim_gsi_send(qp, ud_wr(wr));
	if (!opcode_ok(qp, wr->opcode))
		return -EINVAL;
	/* RC/UC: queued; the fabric sends it (fabric.c) */
	spin_lock_irqsave(&qp->sq_lock, flags);
	if (qp->sq_count == qp->sq_size) {
		spin_unlock_irqrestore(&qp->sq_lock, flags);
		return -ENOMEM;
	}
	e = &qp->sq[(qp->sq_head + qp->sq_count) % qp->sq_size];
	ret = fill_swqe(qp, wr, e);
	if (!ret) {
		qp->sq_count++;
		WRITE_ONCE(qp->own_sends, true);
	}
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	return ret;
}

int ibsim_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		    const struct ib_send_wr **bad)
{
	struct ibsim_qp *qp = to_sqp(ibqp);
	int ret = 0;

	for (; wr; wr = wr->next) {
		ret = post_send_one(qp, wr);
		if (ret) {
			*bad = wr;
			break;
		}
	}
	if (READ_ONCE(qp->own_sends))
		ibsim_kick_sends();
	return ret;
}

int ibsim_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		    const struct ib_recv_wr **bad)
{
	struct ibsim_qp *qp = to_sqp(ibqp);
	enum ib_qp_state st = READ_ONCE(qp->attr.qp_state);
	struct ibsim_wqe *e;
	unsigned long flags;
	int i, ret = 0;

	if (st == IB_QPS_RESET) {
		*bad = wr;
		return -EINVAL;
	}
	for (; wr; wr = wr->next) {
		if (wr->num_sge > IBSIM_MAX_SGE) {
			ret = -EINVAL;
			break;
		}
		spin_lock_irqsave(&qp->rq_lock, flags);
		if (qp->rq_count == qp->rq_size) {
			spin_unlock_irqrestore(&qp->rq_lock, flags);
			ret = -ENOMEM;
			break;
		}
		e = &qp->rq[(qp->rq_head + qp->rq_count) % qp->rq_size];
		e->wr_id = wr->wr_id;
		e->num_sge = wr->num_sge;
		for (i = 0; i < wr->num_sge; i++)
			e->sge[i] = wr->sg_list[i];
		qp->rq_count++;
		WRITE_ONCE(qp->own_sends, true);	/* it moves data: no simulated stream */
		spin_unlock_irqrestore(&qp->rq_lock, flags);
	}
	if (ret)
		*bad = wr;
	else if (READ_ONCE(qp->attr.qp_state) == IB_QPS_ERR)
		ibsim_flush_rq(qp);
	return ret;
}
