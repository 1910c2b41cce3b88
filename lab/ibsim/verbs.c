// SPDX-License-Identifier: GPL-2.0
/*
 * Device, port, PD, AH, MR, CQ and user-context verbs, and the ops table.
 * Memory regions are in mem.c.
 */
#include <linux/slab.h>
#include <rdma/ib_mad.h>
#include "ibsim.h"

static const u16 ibsim_pkeys[IBSIM_PKEYS] = { 0xffff, 0x7fff };

static int ibsim_query_device(struct ib_device *ibdev,
			      struct ib_device_attr *a, struct ib_udata *udata)
{
	struct ibsim_dev *d = to_sdev(ibdev);

	if (udata && (udata->inlen || udata->outlen))
		return -EINVAL;
	memset(a, 0, sizeof(*a));
	a->fw_ver = 1;
	a->sys_image_guid = d->ibdev.node_guid;
	a->max_mr_size = ~0ULL;
	a->page_size_cap = PAGE_SIZE;
	a->vendor_id = 0x2c9;
	a->vendor_part_id = 0x1aa;
	a->hw_ver = 1;
	a->max_qp = 4096;
	a->max_srq = 1024;
	a->max_srq_wr = IBSIM_MAX_SRQ_WR;
	a->max_srq_sge = IBSIM_MAX_SGE;
	a->max_qp_wr = IBSIM_MAX_WR;
	a->device_cap_flags = IB_DEVICE_AUTO_PATH_MIG |
		IB_DEVICE_CHANGE_PHY_PORT | IB_DEVICE_PORT_ACTIVE_EVENT |
		IB_DEVICE_SYS_IMAGE_GUID | IB_DEVICE_RC_RNR_NAK_GEN;
	a->max_send_sge = IBSIM_MAX_SGE;
	a->max_recv_sge = IBSIM_MAX_SGE;
	a->max_sge_rd = 1;
	a->max_cq = 4096;
	a->max_cqe = IBSIM_MAX_CQE;
	a->max_mr = 4096;
	a->max_pd = 4096;
	a->max_qp_rd_atom = 16;
	a->max_qp_init_rd_atom = 16;
	a->max_res_rd_atom = 4096;
	a->max_ah = 4096;
	a->max_pkeys = IBSIM_PKEYS;
	a->local_ca_ack_delay = 15;
	return 0;
}

static int ibsim_query_port(struct ib_device *ibdev, ibsim_port_t port,
			    struct ib_port_attr *a)
{
	struct ibsim_dev *d = to_sdev(ibdev);
	struct ibsim_port *p = &d->port[port];

	/* the core zeroed *a */
	mutex_lock(&ibsim_mutex);
	a->state = p->state;
	a->phys_state = p->state == IB_PORT_ACTIVE ?
		IB_PORT_PHYS_STATE_LINK_UP : IB_PORT_PHYS_STATE_DISABLED;
	a->lid = p->lid;
	a->lmc = p->lmc;
	a->port_cap_flags = p->cap_flags | IB_PORT_AUTO_MIGR_SUP |
		IB_PORT_TRAP_SUP | IB_PORT_SYS_IMAGE_GUID_SUP;
	mutex_unlock(&ibsim_mutex);
	a->max_mtu = IB_MTU_4096;
	a->active_mtu = IB_MTU_4096;
	a->gid_tbl_len = 1;
	a->pkey_tbl_len = IBSIM_PKEYS;
	a->max_msg_sz = IBSIM_MAX_MSG;
	a->sm_lid = IBSIM_SM_LID;
	a->sm_sl = 0;
	a->max_vl_num = 1;
	a->subnet_timeout = 18;
	a->active_width = IB_WIDTH_4X;
	a->active_speed = IB_SPEED_EDR;
	return 0;
}

static int ibsim_modify_port(struct ib_device *ibdev, ibsim_port_t port, int mask,
			     struct ib_port_modify *pm)
{
	struct ibsim_port *p = &to_sdev(ibdev)->port[port];

	mutex_lock(&ibsim_mutex);
	p->cap_flags |= pm->set_port_cap_mask;
	p->cap_flags &= ~pm->clr_port_cap_mask;
	mutex_unlock(&ibsim_mutex);
	return 0;
}

/* IB, minus the SMI (QP0): there is no subnet manager to talk to. */
static int ibsim_port_immutable(struct ib_device *ibdev, ibsim_port_t port,
				struct ib_port_immutable *im)
{
	im->core_cap_flags = RDMA_CORE_PORT_IBA_IB & ~RDMA_CORE_CAP_IB_SMI;
	im->pkey_tbl_len = IBSIM_PKEYS;
	im->gid_tbl_len = 1;
	im->max_mad_size = IB_MGMT_MAD_SIZE;
	return 0;
}

static u64 port_guid(struct ibsim_dev *d, u32 port)
{
	return be64_to_cpu(d->ibdev.node_guid) | port;
}

static int ibsim_query_gid(struct ib_device *ibdev, ibsim_port_t port, int index,
			   union ib_gid *gid)
{
	if (index != 0)
		return -EINVAL;
	gid->global.subnet_prefix = cpu_to_be64(0xfe80000000000000ULL);
	gid->global.interface_id = cpu_to_be64(port_guid(to_sdev(ibdev), port));
	return 0;
}

static int ibsim_query_pkey(struct ib_device *ibdev, ibsim_port_t port, u16 index,
			    u16 *pkey)
{
	if (index >= IBSIM_PKEYS)
		return -EINVAL;
	*pkey = ibsim_pkeys[index];
	return 0;
}

static int ibsim_alloc_ucontext(struct ib_ucontext *uc, struct ib_udata *udata)
{
	return 0;
}

static void ibsim_dealloc_ucontext(struct ib_ucontext *uc)
{
}

static int ibsim_alloc_pd(struct ib_pd *pd, struct ib_udata *udata)
{
	return 0;
}

static int ibsim_dealloc_pd(struct ib_pd *pd, struct ib_udata *udata)
{
	return 0;
}

static int ibsim_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init,
			   struct ib_udata *udata)
{
	struct ibsim_ah *ah = container_of(ibah, struct ibsim_ah, ibah);

	ah->attr = *init->ah_attr;
	ah->attr.grh.sgid_attr = NULL;
	return 0;
}

static int ibsim_query_ah(struct ib_ah *ibah, struct rdma_ah_attr *attr)
{
	struct ibsim_ah *ah = container_of(ibah, struct ibsim_ah, ibah);

	*attr = ah->attr;
	return 0;
}

static int ibsim_destroy_ah(struct ib_ah *ibah, u32 flags)
{
	return 0;
}

/*
 * The completion handler runs on its own work item, as an HCA calls it from
 * its completion interrupt: never inside post_send and never under the
 * driver's locks (a handler that sleeps or takes a lock the caller holds
 * would work here and fail on hardware otherwise).
 */
static void comp_fn(struct work_struct *w)
{
	struct ibsim_cq *cq = container_of(w, struct ibsim_cq, comp_work);

	if (cq->ibcq.comp_handler)
		cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
}

#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 11, 0)
static int ibsim_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *a,
			   struct uverbs_attr_bundle *attrs)
#else
static int ibsim_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *a,
			   struct ib_udata *udata)
#endif
{
	struct ibsim_cq *cq = to_scq(ibcq);

	if (a->cqe < 1 || a->cqe > IBSIM_MAX_CQE || a->flags)
		return -EINVAL;
	cq->ring = kcalloc(a->cqe, sizeof(*cq->ring), GFP_KERNEL);
	if (!cq->ring)
		return -ENOMEM;
	spin_lock_init(&cq->lock);
	INIT_WORK(&cq->comp_work, comp_fn);
	cq->size = a->cqe;
	ibcq->cqe = a->cqe;
	return 0;
}

static int ibsim_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	cancel_work_sync(&to_scq(ibcq)->comp_work);
	kfree(to_scq(ibcq)->ring);
	return 0;
}

/* Adds a completion; the completion handler follows if the CQ is armed. */
void ibsim_cq_add(struct ibsim_cq *cq, const struct ib_wc *wc)
{
	unsigned long flags;
	bool call = false;

	spin_lock_irqsave(&cq->lock, flags);
	if (cq->count == cq->size) {
		cq->overflows++;
	} else {
		cq->ring[(cq->head + cq->count) % cq->size] = *wc;
		cq->count++;
		if (cq->notify) {
			cq->notify = 0;
			call = true;
		}
	}
	spin_unlock_irqrestore(&cq->lock, flags);
	if (call)
		queue_work(ibsim_cq_wq, &cq->comp_work);
}

static int ibsim_poll_cq(struct ib_cq *ibcq, int n, struct ib_wc *wc)
{
	struct ibsim_cq *cq = to_scq(ibcq);
	unsigned long flags;
	int i;

	spin_lock_irqsave(&cq->lock, flags);
	for (i = 0; i < n && cq->count; i++) {
		wc[i] = cq->ring[cq->head];
		cq->head = (cq->head + 1) % cq->size;
		cq->count--;
	}
	spin_unlock_irqrestore(&cq->lock, flags);
	return i;
}

static int ibsim_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags f)
{
	struct ibsim_cq *cq = to_scq(ibcq);
	unsigned long flags;
	int ret = 0;

	spin_lock_irqsave(&cq->lock, flags);
	cq->notify = f & IB_CQ_SOLICITED_MASK;
	if ((f & IB_CQ_REPORT_MISSED_EVENTS) && cq->count)
		ret = 1;
	spin_unlock_irqrestore(&cq->lock, flags);
	return ret;
}

const struct ib_device_ops ibsim_ops = {
	.owner = THIS_MODULE,
	/*
	 * qib's driver id with the first ABI of its userspace provider:
	 * Debian's unmodified libibverbs binds libipathverbs (rdma-core
	 * providers/ipathverbs) to the device, and at ABI version 1 that
	 * provider maps no queue: it creates CQs, QPs and SRQs and polls,
	 * posts and arms through the uverbs commands (POLL_CQ, POST_SEND,
	 * POST_RECV, POST_SRQ_RECV, REQ_NOTIFY_CQ), which reach the verbs
	 * below. So every libibverbs program (ibv_*_pingpong, perftest, Open
	 * MPI) runs on ibsim with the same kernel ops as the kernel's ULPs.
	 */
	.driver_id = RDMA_DRIVER_QIB,
	.uverbs_abi_ver = 1,

	.query_device = ibsim_query_device,
	.query_port = ibsim_query_port,
	.modify_port = ibsim_modify_port,
	.get_port_immutable = ibsim_port_immutable,
	.query_gid = ibsim_query_gid,
	.query_pkey = ibsim_query_pkey,
	.alloc_ucontext = ibsim_alloc_ucontext,
	.dealloc_ucontext = ibsim_dealloc_ucontext,
	.alloc_pd = ibsim_alloc_pd,
	.dealloc_pd = ibsim_dealloc_pd,
	.create_ah = ibsim_create_ah,
#if !IBSIM_OLD_OPS
	.create_user_ah = ibsim_create_ah,
#endif
	.query_ah = ibsim_query_ah,
	.destroy_ah = ibsim_destroy_ah,
	.get_dma_mr = ibsim_get_dma_mr,
	.reg_user_mr = ibsim_reg_user_mr,
	.dereg_mr = ibsim_dereg_mr,
	.create_cq = ibsim_create_cq,
	.destroy_cq = ibsim_destroy_cq,
	.poll_cq = ibsim_poll_cq,
	.req_notify_cq = ibsim_req_notify_cq,
#if IBSIM_OLD_OPS
	.create_qp = ibsim_create_qp_old,
	.destroy_qp = ibsim_destroy_qp_old,
#else
	.create_qp = ibsim_create_qp,
	.destroy_qp = ibsim_destroy_qp,
#endif
	.modify_qp = ibsim_modify_qp,
	.query_qp = ibsim_query_qp,
	.post_send = ibsim_post_send,
	.post_recv = ibsim_post_recv,
	.create_srq = ibsim_create_srq,
	.modify_srq = ibsim_modify_srq,
	.query_srq = ibsim_query_srq,
	.destroy_srq = ibsim_destroy_srq,
	.post_srq_recv = ibsim_post_srq_recv,

	INIT_RDMA_OBJ_SIZE(ib_ah, ibsim_ah, ibah),
	INIT_RDMA_OBJ_SIZE(ib_cq, ibsim_cq, ibcq),
	INIT_RDMA_OBJ_SIZE(ib_pd, ibsim_pd, ibpd),
#if !IBSIM_OLD_OPS
	INIT_RDMA_OBJ_SIZE(ib_qp, ibsim_qp, ibqp),
#endif
	INIT_RDMA_OBJ_SIZE(ib_srq, ibsim_srq, ibsrq),
	INIT_RDMA_OBJ_SIZE(ib_ucontext, ibsim_ucontext, ibuc),
};
