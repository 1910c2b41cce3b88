// SPDX-License-Identifier: GPL-2.0
/*
 * Shared receive queues. A QP attached to one takes its receives from it;
 * when such a QP enters ERR (retries run out, or a modify to ERR) no more
 * WQEs will be taken from the SRQ for it, and the HCA raises
 * IB_EVENT_QP_LAST_WQE_REACHED (IBTA; rdmavt rvt_error_qp returns "last
 * WQE" for an SRQ QP and its callers raise the event; mlx5 maps its
 * MLX5_EVENT_TYPE_SRQ_LAST_WQE to it). It is the one asynchronous sign that
 * an SRQ consumer (IPoIB-CM, an SRP target, an NFS/RDMA server) lost a QP.
 */
#include <linux/slab.h>
#include "ibsim.h"

int ibsim_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
		     struct ib_udata *udata)
{
	struct ibsim_srq *srq = to_ssrq(ibsrq);

	if (init->srq_type != IB_SRQT_BASIC)
		return -EOPNOTSUPP;
	if (init->attr.max_wr < 1 || init->attr.max_wr > IBSIM_MAX_SRQ_WR ||
	    init->attr.max_sge > IBSIM_MAX_SGE)
		return -EINVAL;
	srq->ring = kvcalloc(init->attr.max_wr, sizeof(*srq->ring), GFP_KERNEL);
	if (!srq->ring)
		return -ENOMEM;
	spin_lock_init(&srq->lock);
	srq->size = init->attr.max_wr;
	srq->limit = init->attr.srq_limit;
	return 0;
}

int ibsim_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		     enum ib_srq_attr_mask mask, struct ib_udata *udata)
{
	struct ibsim_srq *srq = to_ssrq(ibsrq);

	if (mask & IB_SRQ_MAX_WR)
		return -EINVAL;	/* no resize */
	if (mask & IB_SRQ_LIMIT)
		WRITE_ONCE(srq->limit, attr->srq_limit);
	return 0;
}

int ibsim_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr)
{
	struct ibsim_srq *srq = to_ssrq(ibsrq);

	attr->max_wr = srq->size;
	attr->max_sge = IBSIM_MAX_SGE;
	attr->srq_limit = READ_ONCE(srq->limit);
	return 0;
}

int ibsim_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata)
{
	kvfree(to_ssrq(ibsrq)->ring);
	return 0;
}

int ibsim_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
			const struct ib_recv_wr **bad)
{
	struct ibsim_srq *srq = to_ssrq(ibsrq);
	struct ibsim_wqe *e;
	unsigned long flags;
	int i;

	for (; wr; wr = wr->next) {
		if (wr->num_sge > IBSIM_MAX_SGE) {
			*bad = wr;
			return -EINVAL;
		}
		spin_lock_irqsave(&srq->lock, flags);
		if (srq->count == srq->size) {
			spin_unlock_irqrestore(&srq->lock, flags);
			*bad = wr;
			return -ENOMEM;
		}
		e = &srq->ring[(srq->head + srq->count) % srq->size];
		e->wr_id = wr->wr_id;
		e->num_sge = wr->num_sge;
		for (i = 0; i < wr->num_sge; i++)
			e->sge[i] = wr->sg_list[i];
		srq->count++;
		WRITE_ONCE(srq->posted, true);
		spin_unlock_irqrestore(&srq->lock, flags);
	}
	return 0;
}
