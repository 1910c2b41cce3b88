// SPDX-License-Identifier: GPL-2.0
/*
 * The data an RC/UC request carries, executed at the responder when the
 * request arrives (fabric.c decides whether it does), and the requester's
 * completions when the ACK comes back. All under ibsim_mutex.
 *
 * Each posted send is executed once: a resend of a request the responder
 * already took (its ACK was lost, or the requester migrated and resent on
 * the alternate) is a duplicate, which the responder ACKs again without
 * delivering it twice (IBTA's PSN rule; qib/hfi1 rc_rcv_error). The
 * responder's answers are IBTA's and rdmavt's (hfi1/qib rc_rcv):
 *  - SEND, SEND with immediate, RDMA WRITE with immediate: the next
 *    receive WQE (the QP's or its SRQ's) takes the data; none posted is an
 *    RNR NAK, resent after the responder's RNR timer, rnr_retry times (7:
 *    for ever), then IB_WC_RNR_RETRY_EXC_ERR;
 *  - RDMA WRITE/READ: the QP must allow the remote access and the rkey
 *    must name a region of the QP's PD that allows it and holds the range;
 *  - a receive WQE too short: IB_WC_LOC_LEN_ERR at the responder, NAK
 *    invalid request (IB_WC_REM_INV_REQ_ERR at the requester); a receive
 *    WQE whose lkey fails: IB_WC_LOC_PROT_ERR there, IB_WC_REM_OP_ERR
 *    here; an rkey that fails: NAK remote access (IB_WC_REM_ACCESS_ERR).
 *    The responder's QP goes to ERR on each (rvt_rc_error: its receives
 *    are flushed), and so does the NAKed requester's.
 * A requester whose own lkeys fail (a wrong key, PD or access, or an address
 * outside the region: rvt_lkey_ok) completes with IB_WC_LOC_PROT_ERR (past
 * max_msg_sz: IB_WC_LOC_LEN_ERR) and goes to ERR; nothing is sent.
 * UC has no ACK and no NAK: what the responder cannot take (no receive WQE,
 * one too short, which it keeps, a bad rkey) is dropped (rvt uc_rcv).
 */
#include <linux/slab.h>
#include <linux/mm.h>
#include "ibsim.h"

/* IBTA's RNR timer field (Table 45), in units of 10 us. */
static const u32 rnr_10us[32] = {
	65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192,
	256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288,
	16384, 24576, 32768, 49152,
};

u64 ibsim_rnr_timer_ns(u8 code)
{
	return (u64)rnr_10us[code & 31] * 10000;
}

/* The next receive WQE of qp (its SRQ's if it has one); false if none. */
bool ibsim_take_rwqe(struct ibsim_qp *qp, struct ibsim_wqe *e)
{
	unsigned long flags;
	bool ok = false;

	if (qp->ibqp.srq) {
		struct ibsim_srq *srq = to_ssrq(qp->ibqp.srq);

		spin_lock_irqsave(&srq->lock, flags);
		if (srq->count) {
			*e = srq->ring[srq->head];
			srq->head = (srq->head + 1) % srq->size;
			srq->count--;
			ok = true;
		}
		spin_unlock_irqrestore(&srq->lock, flags);
		return ok;
	}
	spin_lock_irqsave(&qp->rq_lock, flags);
	if (qp->rq_count) {
		*e = qp->rq[qp->rq_head];
		qp->rq_head = (qp->rq_head + 1) % qp->rq_size;
		qp->rq_count--;
		ok = true;
	}
	spin_unlock_irqrestore(&qp->rq_lock, flags);
	return ok;
}

/* The room of qp's next receive WQE (its SRQ's); false if none is posted. */
static bool rwqe_room(struct ibsim_qp *qp, u64 *room)
{
	spinlock_t *lock = qp->ibqp.srq ? &to_ssrq(qp->ibqp.srq)->lock : &qp->rq_lock;
	struct ibsim_wqe *e = NULL;
	unsigned long flags;
	int i;

	spin_lock_irqsave(lock, flags);
	if (qp->ibqp.srq && to_ssrq(qp->ibqp.srq)->count)
		e = &to_ssrq(qp->ibqp.srq)->ring[to_ssrq(qp->ibqp.srq)->head];
	else if (!qp->ibqp.srq && qp->rq_count)
		e = &qp->rq[qp->rq_head];
	*room = 0;
	for (i = 0; e && i < e->num_sge; i++)
		*room += e->sge[i].length;
	spin_unlock_irqrestore(lock, flags);
	return e != NULL;
}

/* The requester's data of w in buf: -EPERM/-ERANGE on a bad lkey. */
static int gather(struct ibsim_qp *s, struct ibsim_swqe *w, void *buf)
{
	int n;

	if (w->inl) {
		memcpy(buf, w->inl_data, w->len);
		return 0;
	}
	n = ibsim_sge_copy(s, w->sge, w->num_sge, buf, w->len, false);
	return n < 0 ? n : 0;
}

/* An lkey that fails, or an address outside its region, is a protection error (rvt_lkey_ok). */
static enum ib_wc_status local_status(int err)
{
	return err == -EMSGSIZE ? IB_WC_LOC_LEN_ERR : IB_WC_LOC_PROT_ERR;
}

/* The responder's receive completion (and its QP to ERR on a failure). */
static void recv_done(struct ibsim_qp *s, struct ibsim_qp *d, u64 wr_id,
		      struct ibsim_swqe *w, enum ib_wc_status st)
{
	struct ib_wc wc = {
		.wr_id = wr_id,
		.status = st,
		.qp = &d->ibqp,
		.src_qp = s->ibqp.qp_num,
		.slid = ibsim_slid(s),
		.dlid_path_bits = rdma_ah_get_dlid(&s->attr.ah_attr) &
			((1U << d->dev->port[d->attr.port_num].lmc) - 1),
		.sl = rdma_ah_get_sl(&s->attr.ah_attr),
		.pkey_index = d->attr.pkey_index,
		.port_num = d->attr.port_num,
		.byte_len = w->len,
	};

	switch (w->opcode) {
	case IB_WR_RDMA_WRITE_WITH_IMM:
		wc.opcode = IB_WC_RECV_RDMA_WITH_IMM;
		wc.wc_flags = IB_WC_WITH_IMM;
		wc.ex.imm_data = w->imm;
		break;
	case IB_WR_SEND_WITH_IMM:
		wc.wc_flags = IB_WC_WITH_IMM;
		wc.ex.imm_data = w->imm;
		fallthrough;
	default:
		wc.opcode = IB_WC_RECV;
	}
	if (st != IB_WC_SUCCESS) {
		wc.wc_flags = 0;
		ibsim_cq_add(d->rcq, &wc);
		ibsim_to_error(d, IB_WC_WR_FLUSH_ERR);
		return;
	}
	d->rx_msgs++;
	d->rx_bytes += w->len;
	ibsim_cq_add(d->rcq, &wc);
}

/* A SEND or WRITE with immediate: into the next receive WQE. */
static enum ibsim_exec exec_recv(struct ibsim_qp *s, struct ibsim_qp *d,
				 struct ibsim_swqe *w, void *buf)
{
	struct ibsim_wqe e;
	u64 room;
	int n;

	/* UC drops a message its receive WQE cannot hold and keeps the WQE (rvt uc_rcv's rewind) */
	if (d->ibqp.qp_type == IB_QPT_UC && w->opcode != IB_WR_RDMA_WRITE_WITH_IMM &&
	    rwqe_room(d, &room) && room < w->len)
		return EXEC_DROP;
	if (!ibsim_take_rwqe(d, &e))
		return EXEC_RNR;
	if (w->opcode == IB_WR_RDMA_WRITE_WITH_IMM) {
		recv_done(s, d, e.wr_id, w, IB_WC_SUCCESS);
		return EXEC_OK;
	}
	n = ibsim_sge_copy(d, e.sge, e.num_sge, buf, w->len, true);
	if (n == -EMSGSIZE) {
		recv_done(s, d, e.wr_id, w, IB_WC_LOC_LEN_ERR);
		return EXEC_NAK_INVALID;
	}
	if (n < 0) {
		recv_done(s, d, e.wr_id, w, IB_WC_LOC_PROT_ERR);
		return EXEC_NAK_OP;
	}
	recv_done(s, d, e.wr_id, w, IB_WC_SUCCESS);
	return EXEC_OK;
}

static bool qp_allows(struct ibsim_qp *d, int access)
{
	return (d->attr.qp_access_flags & access) == access;
}

/* One request at the responder d. */
static enum ibsim_exec exec_one(struct ibsim_qp *s, struct ibsim_qp *d,
				struct ibsim_swqe *w, enum ib_wc_status *local)
{
	bool write = w->opcode == IB_WR_RDMA_WRITE ||
		w->opcode == IB_WR_RDMA_WRITE_WITH_IMM;
	enum ibsim_exec r = EXEC_OK;
	void *buf = NULL;
	int err;

	if (w->len > IBSIM_MAX_MSG) {
		*local = IB_WC_LOC_LEN_ERR;
		return EXEC_LOCAL;
	}
	if (w->len) {
		buf = kvmalloc(w->len, GFP_KERNEL);
		if (!buf)
			return EXEC_RNR;	/* the responder is out of resources */
	}
	if (w->opcode == IB_WR_RDMA_READ) {
		if (!qp_allows(d, IB_ACCESS_REMOTE_READ) ||
		    ibsim_rkey_copy(d, w->rkey, w->remote_addr, buf, w->len, false)) {
			r = EXEC_NAK_ACCESS;
			goto out;
		}
		err = ibsim_sge_copy(s, w->sge, w->num_sge, buf, w->len, true);
		if (err < 0) {
			*local = local_status(err);
			r = EXEC_LOCAL;
		}
		goto out;
	}
	err = gather(s, w, buf);
	if (err) {
		*local = local_status(err);
		r = EXEC_LOCAL;
		goto out;
	}
	if (write && (!qp_allows(d, IB_ACCESS_REMOTE_WRITE) ||
		      ibsim_rkey_copy(d, w->rkey, w->remote_addr, buf, w->len, true))) {
		r = EXEC_NAK_ACCESS;
		goto out;
	}
	if (w->opcode != IB_WR_RDMA_WRITE)
		r = exec_recv(s, d, w, buf);
	else {
		d->rx_msgs++;
		d->rx_bytes += w->len;
	}
out:
	kvfree(buf);
	if (r == EXEC_NAK_ACCESS && d->ibqp.qp_type == IB_QPT_UC)
		return EXEC_DROP;	/* UC has no NAK: rvt uc_rcv drops it */
	if (r == EXEC_NAK_ACCESS)
		ibsim_to_error(d, IB_WC_WR_FLUSH_ERR);
	return r;
}

/*
 * The requests of s that d has not taken yet, in order, until one is not
 * taken: EXEC_OK when all were, else why the first was not (*local: the
 * requester's own status for EXEC_LOCAL). UC: a SEND with no receive WQE
 * is dropped and the next goes on.
 */
enum ibsim_exec ibsim_execute(struct ibsim_qp *s, struct ibsim_qp *d,
			      enum ib_wc_status *local)
{
	unsigned long flags;
	int i, count;

	spin_lock_irqsave(&s->sq_lock, flags);
	count = s->sq_count;
	spin_unlock_irqrestore(&s->sq_lock, flags);
	for (i = 0; i < count; i++) {
		struct ibsim_swqe *w = &s->sq[(s->sq_head + i) % s->sq_size];
		enum ibsim_exec r;

		if (w->executed)
			continue;
		if (READ_ONCE(d->attr.qp_state) == IB_QPS_ERR)
			return EXEC_NAK_OP;
		r = exec_one(s, d, w, local);
		if (r == EXEC_DROP || (r == EXEC_RNR && s->ibqp.qp_type == IB_QPT_UC))
			r = EXEC_OK;	/* UC: dropped, and the next goes on */
		if (r != EXEC_OK)
			return r;
		w->executed = true;
	}
	return EXEC_OK;
}

static enum ib_wc_opcode wc_opcode(enum ib_wr_opcode op)
{
	switch (op) {
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
		return IB_WC_RDMA_WRITE;
	case IB_WR_RDMA_READ:
		return IB_WC_RDMA_READ;
	default:
		return IB_WC_SEND;
	}
}

/* Pops the head send into wc; false if none (or, executed_only, not taken). */
static bool sq_pop(struct ibsim_qp *qp, struct ib_wc *wc, bool *signaled,
		   bool executed_only)
{
	unsigned long flags;
	struct ibsim_swqe *e;

	spin_lock_irqsave(&qp->sq_lock, flags);
	e = &qp->sq[qp->sq_head];
	if (!qp->sq_count || (executed_only && !e->executed)) {
		spin_unlock_irqrestore(&qp->sq_lock, flags);
		return false;
	}
	wc->wr_id = e->wr_id;
	wc->opcode = wc_opcode(e->opcode);
	wc->byte_len = e->opcode == IB_WR_RDMA_READ ? e->len : 0;
	*signaled = e->signaled;
	qp->sq_head = (qp->sq_head + 1) % qp->sq_size;
	qp->sq_count--;
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	return true;
}

/* The sends the responder took are acknowledged (RC) or sent (UC). */
void ibsim_complete_executed(struct ibsim_qp *qp)
{
	struct ib_wc wc = { .status = IB_WC_SUCCESS, .qp = &qp->ibqp };
	bool signaled;

	while (sq_pop(qp, &wc, &signaled, true))
		if (signaled)
			ibsim_cq_add(qp->scq, &wc);
}

/* UC: every send posted is sent, whether the responder took it or not. */
void ibsim_complete_sent(struct ibsim_qp *qp)
{
	struct ib_wc wc = { .status = IB_WC_SUCCESS, .qp = &qp->ibqp };
	bool signaled;

	while (sq_pop(qp, &wc, &signaled, false))
		if (signaled)
			ibsim_cq_add(qp->scq, &wc);
}

/*
 * The head send completes with why (errors complete even if unsignaled),
 * every later one with IB_WC_WR_FLUSH_ERR. A QP driven by the simulated
 * request stream has no send posted: its error completes with wr_id 0.
 */
void ibsim_fail_head(struct ibsim_qp *qp, enum ib_wc_status why)
{
	struct ib_wc wc = { .status = why, .opcode = IB_WC_SEND, .qp = &qp->ibqp };
	bool signaled, any = false;

	while (sq_pop(qp, &wc, &signaled, false)) {
		ibsim_cq_add(qp->scq, &wc);
		wc.status = IB_WC_WR_FLUSH_ERR;
		any = true;
	}
	if (!any && why != IB_WC_WR_FLUSH_ERR && !READ_ONCE(qp->own_sends))
		ibsim_cq_add(qp->scq, &wc);
}

int ibsim_sq_count(struct ibsim_qp *qp)
{
	return READ_ONCE(qp->sq_count);
}
