// SPDX-License-Identifier: GPL-2.0
/*
 * Datagrams through the simulated switch: GSI (QP1) and UD sends are copied
 * into the next receive buffer posted on the QP the DLID and remote QPN
 * name (QP1 of the port that owns the DLID), with a receive completion, and
 * the send completes on the sender's CQ. This is what lets ib_mad, ib_cm and
 * ib_umad run between ibsim0 and ibsim1. Sends are queued (post_send may run
 * in atomic context) and delivered by one work item under ibsim_mutex.
 *
 * A user UD QP's data moves through its lkeys (mem.c), read when the
 * datagram is delivered; a kernel QP's is copied at post. A UD receiver
 * takes a datagram only with its own Q_Key (IBTA: a remote Q_Key with the
 * high bit set means the sender's own), and finds the GRH the AH carried
 * in the 40 bytes before the data (IB_WC_GRH).
 */
#include <linux/slab.h>
#include "ibsim.h"

struct ibsim_pkt {
	struct list_head list;
	struct ibsim_qp *src;
	u64 wr_id;
	bool signaled;
	u32 dlid;
	u8 src_path_bits;	/* the AH's */
	u8 sl;
	u32 remote_qpn;
	u16 pkey_index;
	u32 src_port;
	u32 qkey;
	bool grh;
	union ib_gid dgid;
	u8 hop_limit, traffic_class;
	u32 flow_label;
	bool user;		/* data behind sge[] (lkeys), read at delivery */
	int num_sge;
	struct ib_sge sge[IBSIM_MAX_SGE];
	u32 len;
	u8 data[];
};

#define IBSIM_UD_MAX	4096	/* the ports' MTU */

static LIST_HEAD(pkt_list);
static DEFINE_SPINLOCK(pkt_lock);
static struct work_struct pkt_work;

int ibsim_gsi_send(struct ibsim_qp *qp, const struct ib_ud_wr *wr)
{
	const struct ib_send_wr *s = &wr->wr;
	bool user = qp->ibqp.uobject != NULL;
	struct ibsim_ah *ah;
	struct ibsim_pkt *p;
	unsigned long flags;
	u32 len = 0, off = 0;
	int i;

	for (i = 0; i < s->num_sge; i++)
		len += s->sg_list[i].length;
	if (len > (user ? IBSIM_UD_MAX : IBSIM_MAD_MAX) || !wr->ah ||
	    s->num_sge > IBSIM_MAX_SGE ||
	    (s->opcode != IB_WR_SEND && s->opcode != IB_WR_SEND_WITH_IMM))
		return -EINVAL;
	p = kzalloc(sizeof(*p) + (user ? 0 : len), GFP_ATOMIC);
	if (!p)
		return -ENOMEM;
	for (i = 0; i < s->num_sge; i++) {
		p->sge[i] = s->sg_list[i];
		if (!user)
			memcpy(p->data + off, (void *)(uintptr_t)s->sg_list[i].addr,
			       s->sg_list[i].length);
		off += s->sg_list[i].length;
	}
	ah = container_of(wr->ah, struct ibsim_ah, ibah);
	p->src = qp;
	p->user = user;
	p->num_sge = s->num_sge;
	p->wr_id = s->wr_id;
	p->signaled = (s->send_flags & IB_SEND_SIGNALED) ||
		qp->sq_sig_type == IB_SIGNAL_ALL_WR;
	p->dlid = rdma_ah_get_dlid(&ah->attr);
	p->src_path_bits = rdma_ah_get_path_bits(&ah->attr);
	p->sl = rdma_ah_get_sl(&ah->attr);
	if (rdma_ah_get_ah_flags(&ah->attr) & IB_AH_GRH) {
		const struct ib_global_route *g = rdma_ah_read_grh(&ah->attr);

		p->grh = true;
		p->dgid = g->dgid;
		p->hop_limit = g->hop_limit;
		p->traffic_class = g->traffic_class;
		p->flow_label = g->flow_label;
	}
	p->remote_qpn = wr->remote_qpn;
	p->qkey = (wr->remote_qkey & 0x80000000) && qp->ibqp.qp_type == IB_QPT_UD ?
		qp->attr.qkey : wr->remote_qkey;
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

/* The GRH the receiver finds in front of the data (IBTA 8.3). */
static void make_grh(struct ib_grh *g, struct ibsim_pkt *p, u32 sport)
{
	memset(g, 0, sizeof(*g));
	if (!p->grh)
		return;
	g->version_tclass_flow = cpu_to_be32(6 << 28 | p->traffic_class << 20 |
					     (p->flow_label & 0xfffff));
	g->paylen = cpu_to_be16(p->len);
	g->next_hdr = 0x1b;	/* IBA_NEXT_HEADER_BTH */
	g->hop_limit = p->hop_limit;
	g->sgid.global.subnet_prefix = cpu_to_be64(0xfe80000000000000ULL);
	g->sgid.global.interface_id = cpu_to_be64(
		be64_to_cpu(p->src->dev->ibdev.node_guid) | sport);
	g->dgid = p->dgid;
}

/*
 * Copies the GRH and the datagram into dst's next receive buffer: -ENOBUFS
 * when none is posted, -EMSGSIZE when it is too short, -EPERM/-ERANGE when
 * a user receive's lkey fails.
 */
static int scatter(struct ibsim_qp *dst, struct ibsim_pkt *p, const u8 *data,
		   u64 *wr_id)
{
	u32 total = sizeof(struct ib_grh) + p->len;
	struct ibsim_wqe e;
	u8 *buf;
	int n;

	if (!ibsim_take_rwqe(dst, &e))
		return -ENOBUFS;
	*wr_id = e.wr_id;
	buf = kmalloc(total, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	make_grh((struct ib_grh *)buf, p, p->src_port);
	memcpy(buf + sizeof(struct ib_grh), data, p->len);
	if (dst->ibqp.uobject) {
		n = ibsim_sge_copy(dst, e.sge, e.num_sge, buf, total, true);
	} else {
		u32 off = 0;
		int i;

		for (i = 0; i < e.num_sge && off < total; i++) {
			u32 part = min(e.sge[i].length, total - off);

			memcpy((void *)(uintptr_t)e.sge[i].addr, buf + off, part);
			off += part;
		}
		n = off == total ? 0 : -EMSGSIZE;
	}
	kfree(buf);
	return n < 0 ? n : 0;
}

static void deliver_dgram(struct ibsim_pkt *p, const u8 *data)
{
	struct ibsim_dev *sd = p->src->dev, *dd;
	struct ibsim_qp *dst;
	struct ib_wc wc = {};
	u32 dport;

	if (!ibsim_port_alive(&sd->port[p->src_port]))
		return;
	if (!ibsim_lid_alive(p->dlid) || !ibsim_lid_port(p->dlid, &dd, &dport))
		return;
	dst = find_dgram_qp(dd, dport, p->remote_qpn);
	if (!dst || READ_ONCE(dst->attr.qp_state) < IB_QPS_RTR ||
	    READ_ONCE(dst->attr.qp_state) > IB_QPS_SQD)
		return;
	if (dst->ibqp.qp_type == IB_QPT_UD && dst->attr.qkey != p->qkey)
		return;	/* Q_Key violation: dropped */
	switch (scatter(dst, p, data, &wc.wr_id)) {
	case -ENOBUFS:
	case -ENOMEM:
		return;	/* no receive buffer: dropped, as UD does */
	case -EMSGSIZE:
		wc.status = IB_WC_LOC_LEN_ERR;
		break;
	case -EPERM:
	case -ERANGE:
		wc.status = IB_WC_LOC_PROT_ERR;
		break;
	default:
		wc.status = IB_WC_SUCCESS;
		wc.wc_flags = p->grh ? IB_WC_GRH : 0;
	}
	wc.opcode = IB_WC_RECV;
	wc.byte_len = sizeof(struct ib_grh) + p->len;
	wc.qp = &dst->ibqp;
	wc.src_qp = p->src->ibqp.qp_num;
	wc.slid = sd->port[p->src_port].lid |
		(p->src_path_bits & ((1U << sd->port[p->src_port].lmc) - 1));
	wc.dlid_path_bits = p->dlid - dd->port[dport].lid;
	wc.sl = p->sl;
	wc.pkey_index = p->pkey_index;
	wc.port_num = dport;
	ibsim_cq_add(dst->rcq, &wc);
}

/* A user datagram's data, read through its lkeys now; NULL and *st on a failure. */
static u8 *user_data(struct ibsim_pkt *p, enum ib_wc_status *st)
{
	u8 *buf = kmalloc(max_t(u32, p->len, 1), GFP_KERNEL);
	int n;

	*st = IB_WC_LOC_PROT_ERR;
	if (!buf)
		return NULL;
	n = ibsim_sge_copy(p->src, p->sge, p->num_sge, buf, p->len, false);
	if (n < 0) {
		*st = IB_WC_LOC_PROT_ERR;
		kfree(buf);
		return NULL;
	}
	*st = IB_WC_SUCCESS;
	return buf;
}

static void pkt_fn(struct work_struct *w)
{
	struct ibsim_pkt *p;
	struct ib_wc wc = { .opcode = IB_WC_SEND };
	u8 *data;

	mutex_lock(&ibsim_mutex);
	for (;;) {
		spin_lock_irq(&pkt_lock);
		p = list_first_entry_or_null(&pkt_list, struct ibsim_pkt, list);
		if (p)
			list_del(&p->list);
		spin_unlock_irq(&pkt_lock);
		if (!p)
			break;
		wc.status = IB_WC_SUCCESS;
		data = p->user ? user_data(p, &wc.status) : p->data;
		if (data)
			deliver_dgram(p, data);
		if (p->signaled || wc.status != IB_WC_SUCCESS) {
			wc.wr_id = p->wr_id;
			wc.qp = &p->src->ibqp;
			ibsim_cq_add(p->src->scq, &wc);
		}
		if (p->user)
			kfree(data);
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
