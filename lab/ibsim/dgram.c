// SPDX-License-Identifier: GPL-2.0
/*
 * Datagrams through the simulated switch: GSI (QP1) and UD sends are copied
 * into the next receive buffer posted on the QP the DLID and remote QPN
 * name (QP1 of the port that owns the DLID), with a receive completion, and
 * the send completes on the sender's CQ. This is what lets ib_mad, ib_cm and
 * ib_umad run between ibsim0 and ibsim1. Sends are queued (post_send may run
 * in atomic context) and delivered by one work item under ibsim_mutex.
 */
#include <linux/slab.h>
#include "ibsim.h"

struct ibsim_pkt {
	struct list_head list;
	struct ibsim_qp *src;
	u64 wr_id;
	bool signaled;
	u32 dlid;
	u8 sl;
	u32 remote_qpn;
	u16 pkey_index;
	u32 src_port;
	u32 len;
	u8 data[];
};

static LIST_HEAD(pkt_list);
static DEFINE_SPINLOCK(pkt_lock);
static struct work_struct pkt_work;

int ibsim_gsi_send(struct ibsim_qp *qp, const struct ib_ud_wr *wr)
{
	const struct ib_send_wr *s = &wr->wr;
	struct ibsim_ah *ah;
	struct ibsim_pkt *p;
	unsigned long flags;
	u32 len = 0, off = 0;
	int i;

	if (qp->ibqp.uobject)
		return -EOPNOTSUPP;	/* user datagrams are not carried */
	for (i = 0; i < s->num_sge; i++)
		len += s->sg_list[i].length;
	if (len > IBSIM_MAD_MAX || !wr->ah)
		return -EINVAL;
	p = kzalloc(sizeof(*p) + len, GFP_ATOMIC);
	if (!p)
		return -ENOMEM;
	for (i = 0; i < s->num_sge; i++) {
		memcpy(p->data + off, (void *)(uintptr_t)s->sg_list[i].addr,
		       s->sg_list[i].length);
		off += s->sg_list[i].length;
	}
	ah = container_of(wr->ah, struct ibsim_ah, ibah);
	p->src = qp;
	p->wr_id = s->wr_id;
	p->signaled = (s->send_flags & IB_SEND_SIGNALED) ||
		qp->sq_sig_type == IB_SIGNAL_ALL_WR;
	p->dlid = rdma_ah_get_dlid(&ah->attr);
	p->sl = rdma_ah_get_sl(&ah->attr);
	p->remote_qpn = wr->remote_qpn;
	p->pkey_index = wr->pkey_index;
	p->src_port = qp->ibqp.qp_type == IB_QPT_GSI ? qp->port :
		qp->attr.port_num;
	p->len = len;
	spin_lock_irqsave(&pkt_lock, flags);
	list_add_tail(&p->list, &pkt_list);
	spin_unlock_irqrestore(&pkt_lock, flags);
	queue_work(ibsim_wq, &pkt_work);
	return 0;
}

static struct ibsim_qp *find_dgram_qp(struct ibsim_dev *d, u32 port, u32 qpn)
{
	struct ibsim_qp *qp;

	list_for_each_entry(qp, &ibsim_qps, list) {
		if (qp->dev != d)
			continue;
		if (qpn == 1 && qp->ibqp.qp_type == IB_QPT_GSI && qp->port == port)
			return qp;
		if (qpn != 1 && qp->ibqp.qp_type == IB_QPT_UD &&
		    qp->ibqp.qp_num == qpn)
			return qp;
	}
	return NULL;
}

/*
 * Copies the datagram into dst's next receive buffer, after a 40-byte GRH
 * slot: -ENOBUFS when none is posted, -EMSGSIZE when it is too short.
 */
static int scatter(struct ibsim_qp *dst, struct ibsim_pkt *p, u64 *wr_id)
{
	struct ibsim_wqe e;
	unsigned long flags;
	u32 off = 0, skip = sizeof(struct ib_grh), n;
	int i;

	spin_lock_irqsave(&dst->rq_lock, flags);
	if (!dst->rq_count) {
		spin_unlock_irqrestore(&dst->rq_lock, flags);
		return -ENOBUFS;
	}
	e = dst->rq[dst->rq_head];
	dst->rq_head = (dst->rq_head + 1) % dst->rq_size;
	dst->rq_count--;
	spin_unlock_irqrestore(&dst->rq_lock, flags);
	*wr_id = e.wr_id;
	for (i = 0; i < e.num_sge && off < p->len; i++) {
		u8 *buf = (u8 *)(uintptr_t)e.sge[i].addr;
		u32 room = e.sge[i].length;

		if (skip) {
			n = min(skip, room);
			memset(buf, 0, n);
			buf += n;
			room -= n;
			skip -= n;
		}
		n = min(room, p->len - off);
		memcpy(buf, p->data + off, n);
		off += n;
	}
	return off == p->len ? 0 : -EMSGSIZE;
}

static void deliver_dgram(struct ibsim_pkt *p)
{
	struct ibsim_dev *sd = p->src->dev, *dd;
	struct ibsim_qp *dst;
	struct ib_wc wc = {};
	u32 dport;

	if (!ibsim_port_alive(&sd->port[p->src_port]))
		return;
	if (!ibsim_port_alive(ibsim_lid_port(p->dlid, &dd, &dport)))
		return;
	dst = find_dgram_qp(dd, dport, p->remote_qpn);
	if (!dst || dst->ibqp.uobject ||
	    READ_ONCE(dst->attr.qp_state) < IB_QPS_RTR ||
	    READ_ONCE(dst->attr.qp_state) > IB_QPS_SQD)
		return;
	switch (scatter(dst, p, &wc.wr_id)) {
	case -ENOBUFS:
		return;	/* no receive buffer: dropped, as UD does */
	case -EMSGSIZE:
		wc.status = IB_WC_LOC_LEN_ERR;
		break;
	default:
		wc.status = IB_WC_SUCCESS;
	}
	wc.opcode = IB_WC_RECV;
	wc.byte_len = sizeof(struct ib_grh) + p->len;
	wc.qp = &dst->ibqp;
	wc.src_qp = p->src->ibqp.qp_num;
	wc.slid = sd->port[p->src_port].lid;
	wc.sl = p->sl;
	wc.pkey_index = p->pkey_index;
	wc.port_num = dport;
	ibsim_cq_add(dst->rcq, &wc);
}

static void pkt_fn(struct work_struct *w)
{
	struct ibsim_pkt *p;
	struct ib_wc wc = { .status = IB_WC_SUCCESS, .opcode = IB_WC_SEND };

	mutex_lock(&ibsim_mutex);
	for (;;) {
		spin_lock_irq(&pkt_lock);
		p = list_first_entry_or_null(&pkt_list, struct ibsim_pkt, list);
		if (p)
			list_del(&p->list);
		spin_unlock_irq(&pkt_lock);
		if (!p)
			break;
		deliver_dgram(p);
		if (p->signaled) {
			wc.wr_id = p->wr_id;
			wc.qp = &p->src->ibqp;
			ibsim_cq_add(p->src->scq, &wc);
		}
		kfree(p);
	}
	mutex_unlock(&ibsim_mutex);
}

/* Under ibsim_mutex: drop the datagrams qp sent that are not delivered yet. */
void ibsim_dgram_forget(struct ibsim_qp *qp)
{
	struct ibsim_pkt *p, *pn;

	spin_lock_irq(&pkt_lock);
	list_for_each_entry_safe(p, pn, &pkt_list, list) {
		if (p->src == qp) {
			list_del(&p->list);
			kfree(p);
		}
	}
	spin_unlock_irq(&pkt_lock);
}

void ibsim_dgram_init(void)
{
	INIT_WORK(&pkt_work, pkt_fn);
}
