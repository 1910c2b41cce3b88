// SPDX-License-Identifier: GPL-2.0
/*
 * ibsim module: registers ibsim0 and ibsim1 (RDMA_NODE_IB_CA, two IB ports
 * each, LIDs dev*2+port: ibsim0 1,2; ibsim1 3,4), all ports ACTIVE.
 */
#include <linux/module.h>
#include "ibsim.h"

DEFINE_MUTEX(ibsim_mutex);
LIST_HEAD(ibsim_qps);
struct ibsim_dev *ibsim_devs[IBSIM_NDEV];
struct workqueue_struct *ibsim_wq;
struct workqueue_struct *ibsim_cq_wq;	/* completion handlers (verbs.c) */

static void ibsim_free(int i)
{
	struct ibsim_dev *d = ibsim_devs[i];

	if (!d)
		return;
	if (d->registered)
		ib_unregister_device(&d->ibdev);
	xa_destroy(&d->mrs);
	ib_dealloc_device(&d->ibdev);
	ibsim_devs[i] = NULL;
}

/*
 * Each HCA numbers its QPs from its own space: the two start 0x1000 apart
 * so that the lab's QPNs tell the devices apart, and "qpn align" makes the
 * next QPs of both share numbers, as two ConnectX of one host often do;
 * "qpn apart" puts them 0x1000 apart again, above every QPN given so far.
 */
int ibsim_qpn_align(bool apart)
{
	u32 next = 0;
	int i;

	mutex_lock(&ibsim_mutex);
	for (i = 0; i < IBSIM_NDEV; i++)
		if (ibsim_devs[i])
			next = max(next, ibsim_devs[i]->next_qpn);
	for (i = 0; i < IBSIM_NDEV; i++)
		if (ibsim_devs[i])
			ibsim_devs[i]->next_qpn = next + (apart ? i * 0x1000 : 0);
	mutex_unlock(&ibsim_mutex);
	return 0;
}

static int ibsim_add(int i)
{
	struct ibsim_dev *d;
	char name[IB_DEVICE_NAME_MAX];
	u32 p;
	int ret;

	d = ib_alloc_device(ibsim_dev, ibdev);
	if (!d)
		return -ENOMEM;
	d->index = i;
	xa_init(&d->mrs);
	d->next_qpn = 0x10 + i * 0x1000;
	for (p = 1; p <= IBSIM_NPORT; p++) {
		d->port[p].lid = ibsim_base_lid(i, p, 0);
		d->port[p].state = IB_PORT_ACTIVE;
	}
	d->ibdev.node_type = RDMA_NODE_IB_CA;
	d->ibdev.phys_port_cnt = IBSIM_NPORT;
	d->ibdev.num_comp_vectors = 1;
	d->ibdev.node_guid = cpu_to_be64(0x0002c90300a00000ULL | (i << 8));
	snprintf(d->ibdev.node_desc, sizeof(d->ibdev.node_desc),
		 "ibsim%d simulated HCA", i);
	d->ibdev.uverbs_cmd_mask =
		BIT_ULL(IB_USER_VERBS_CMD_GET_CONTEXT) |
		BIT_ULL(IB_USER_VERBS_CMD_QUERY_DEVICE) |
		BIT_ULL(IB_USER_VERBS_CMD_QUERY_PORT) |
		BIT_ULL(IB_USER_VERBS_CMD_ALLOC_PD) |
		BIT_ULL(IB_USER_VERBS_CMD_DEALLOC_PD) |
		BIT_ULL(IB_USER_VERBS_CMD_REG_MR) |
		BIT_ULL(IB_USER_VERBS_CMD_DEREG_MR) |
		BIT_ULL(IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL) |
		BIT_ULL(IB_USER_VERBS_CMD_CREATE_CQ) |
		BIT_ULL(IB_USER_VERBS_CMD_DESTROY_CQ) |
		BIT_ULL(IB_USER_VERBS_CMD_POLL_CQ) |
		BIT_ULL(IB_USER_VERBS_CMD_REQ_NOTIFY_CQ) |
		BIT_ULL(IB_USER_VERBS_CMD_CREATE_QP) |
		BIT_ULL(IB_USER_VERBS_CMD_CREATE_SRQ) |
		BIT_ULL(IB_USER_VERBS_CMD_MODIFY_SRQ) |
		BIT_ULL(IB_USER_VERBS_CMD_QUERY_SRQ) |
		BIT_ULL(IB_USER_VERBS_CMD_DESTROY_SRQ) |
		BIT_ULL(IB_USER_VERBS_CMD_POST_SRQ_RECV) |
		BIT_ULL(IB_USER_VERBS_CMD_MODIFY_QP) |
		BIT_ULL(IB_USER_VERBS_CMD_QUERY_QP) |
		BIT_ULL(IB_USER_VERBS_CMD_DESTROY_QP) |
		BIT_ULL(IB_USER_VERBS_CMD_POST_SEND) |
		BIT_ULL(IB_USER_VERBS_CMD_POST_RECV) |
		BIT_ULL(IB_USER_VERBS_CMD_CREATE_AH) |
		BIT_ULL(IB_USER_VERBS_CMD_DESTROY_AH);
	ib_set_device_ops(&d->ibdev, &ibsim_ops);
	ibsim_devs[i] = d;
	snprintf(name, sizeof(name), "ibsim%d", i);
	ret = ib_register_device(&d->ibdev, name, NULL);
	if (ret) {
		pr_err("ibsim: registering %s: %d\n", name, ret);
		return ret;
	}
	d->registered = true;
	return 0;
}

static int __init ibsim_init(void)
{
	int i, ret;

	ibsim_wq = alloc_ordered_workqueue("ibsim", 0);
	if (!ibsim_wq)
		return -ENOMEM;
	ibsim_cq_wq = alloc_workqueue("ibsim_cq", WQ_HIGHPRI, 0);
	if (!ibsim_cq_wq) {
		destroy_workqueue(ibsim_wq);
		return -ENOMEM;
	}
	ret = ibsim_fabric_init();
	if (ret)
		goto out_wq;
	for (i = 0; i < IBSIM_NDEV; i++) {
		ret = ibsim_add(i);
		if (ret)
			goto out_devs;
	}
	ret = ibsim_ctl_init();
	if (ret)
		goto out_devs;
	pr_info("ibsim: ibsim0 ibsim1 registered; control in /sys/kernel/debug/ibsim\n");
	return 0;

out_devs:
	ibsim_fabric_exit();
	for (i = IBSIM_NDEV - 1; i >= 0; i--)
		ibsim_free(i);
out_wq:
	destroy_workqueue(ibsim_cq_wq);
	destroy_workqueue(ibsim_wq);
	return ret;
}

static void __exit ibsim_exit(void)
{
	int i;

	ibsim_ctl_exit();
	ibsim_fabric_exit();	/* no more ticks */
	for (i = IBSIM_NDEV - 1; i >= 0; i--)
		ibsim_free(i);
	destroy_workqueue(ibsim_cq_wq);
	destroy_workqueue(ibsim_wq);
}

module_init(ibsim_init);
module_exit(ibsim_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("apmwatch lab: a software InfiniBand HCA with APM");
