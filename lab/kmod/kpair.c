// SPDX-License-Identifier: GPL-2.0
/*
 * One side of the kernel ULP's RC QP pair, made through ib_verbs: PD, CQ,
 * QP, the connect sequence and the modifies the ULP does (each logged with
 * its return code). On RoCE (rxe) the path is the port's IPv4-mapped RoCE v2
 * GID; on InfiniBand (ibsim) it is the peer port's LID, port 1 <-> port 1
 * primary and port 2 <-> port 2 alternate.
 */
#include <linux/etherdevice.h>
#include <net/ipv6.h>
#include <rdma/ib_cache.h>
#include "apmlab.h"

int apmlab_query(struct ib_qp *qp, int *qp_state, int *mig)
{
	struct ib_qp_init_attr init = {};
	struct ib_qp_attr attr = {};
	int ret;

	ret = ib_query_qp(qp, &attr, IB_QP_STATE | IB_QP_PATH_MIG_STATE, &init);
	*qp_state = ret ? -1 : attr.qp_state;
	*mig = ret ? -1 : attr.path_mig_state;
	return ret;
}

/* The peer's LID on port (IB), 0 if unknown. */
static u32 peer_lid(struct apmlab_side *s, u32 port)
{
	struct ib_port_attr pa;

	if (ib_query_port(s->peer->dev, port, &pa))
		return 0;
	return pa.lid;
}

static void fill_ib_av(struct apmlab_side *s, struct rdma_ah_attr *ah, u32 port)
{
	memset(ah, 0, sizeof(*ah));
	ah->type = RDMA_AH_ATTR_TYPE_IB;
	rdma_ah_set_port_num(ah, port);
	rdma_ah_set_dlid(ah, peer_lid(s, port));
	rdma_ah_set_sl(ah, 0);
}

/* The path a RoCE port can offer: the same GIDs as the primary. */
static void fill_av(struct apmlab_side *s, struct rdma_ah_attr *ah)
{
	if (s->ib) {
		fill_ib_av(s, ah, APMLAB_PORT);
		return;
	}
	memset(ah, 0, sizeof(*ah));
	ah->type = rdma_ah_find_type(s->dev, APMLAB_PORT);
	rdma_ah_set_port_num(ah, APMLAB_PORT);
	rdma_ah_set_grh(ah, &s->peer->gid, 0, s->gid_index, 64, 0);
	/* Kernel callers pass a resolved AV; rxe uses dmac to spot loopback. */
	ether_addr_copy(ah->roce.dmac, s->peer->mac);
}

static int modify(struct apmlab_side *s, const char *what, struct ib_qp_attr *a,
		  int mask)
{
	int ret = ib_modify_qp(s->qp, a, mask);

	apmlab_log_modify(s->qp, what, mask, ret);
	return ret;
}

/* The port the QP's primary path uses now (it changes with each migration). */
static u32 current_port(struct apmlab_side *s)
{
	struct ib_qp_init_attr init = {};
	struct ib_qp_attr attr = {};

	if (ib_query_qp(s->qp, &attr, IB_QP_PORT, &init) || !attr.port_num)
		return APMLAB_PORT;
	return attr.port_num;
}

int apmlab_load_alt_path(struct apmlab_side *s)
{
	struct ib_qp_attr a = {};

	if (s->ib) {
		u32 alt = current_port(s) == 1 ? 2 : 1;

		fill_ib_av(s, &a.alt_ah_attr, alt);
		a.alt_port_num = alt;
		a.alt_pkey_index = 0;
		a.alt_timeout = 14;
		return modify(s, "alt_path", &a, IB_QP_ALT_PATH);
	}
	fill_av(s, &a.alt_ah_attr);
	a.alt_port_num = APMLAB_PORT;
	a.alt_pkey_index = 0;
	a.alt_timeout = 14;
	return modify(s, "alt_path", &a, IB_QP_ALT_PATH);
}

int apmlab_rearm(struct apmlab_side *s)
{
	struct ib_qp_attr a = { .path_mig_state = IB_MIG_REARM };

	return modify(s, "rearm", &a, IB_QP_PATH_MIG_STATE);
}

static int find_roce_v4_gid(struct apmlab_side *s)
{
	const struct ib_gid_attr *ga;
	struct ib_port_attr pa;
	u16 vlan;
	int i, ret;

	ret = ib_query_port(s->dev, APMLAB_PORT, &pa);
	if (ret)
		return ret;
	for (i = 0; i < pa.gid_tbl_len; i++) {
		ga = rdma_get_gid_attr(s->dev, APMLAB_PORT, i);
		if (IS_ERR(ga))
			continue;
		if (ga->gid_type == IB_GID_TYPE_ROCE_UDP_ENCAP &&
		    ipv6_addr_v4mapped((struct in6_addr *)ga->gid.raw)) {
			s->gid_index = i;
			s->gid = ga->gid;
			ret = rdma_read_gid_l2_fields(ga, &vlan, s->mac);
			rdma_put_gid_attr(ga);
			return ret;
		}
		rdma_put_gid_attr(ga);
	}
	return -ENOENT;
}

int apmlab_side_create(struct apmlab_side *s, const char *name,
		       void (*handler)(struct ib_event *, void *))
{
	struct ib_qp_init_attr ia = {};
	int ret;

	s->dev = apmlab_device_get(name);
	if (!s->dev)
		return -ENODEV;
	s->ib = rdma_protocol_ib(s->dev, APMLAB_PORT);
	if (!s->ib) {
		ret = find_roce_v4_gid(s);
		if (ret)
			return ret;
	}
	s->pd = ib_alloc_pd(s->dev, 0);
	if (IS_ERR(s->pd))
		return PTR_ERR(s->pd);
	s->cq = ib_alloc_cq(s->dev, NULL, 16, 0, IB_POLL_DIRECT);
	if (IS_ERR(s->cq))
		return PTR_ERR(s->cq);
	ia.event_handler = handler;
	ia.qp_context = s;
	ia.send_cq = s->cq;
	ia.recv_cq = s->cq;
	ia.cap.max_send_wr = 8;
	ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.sq_sig_type = IB_SIGNAL_ALL_WR;
	ia.qp_type = IB_QPT_RC;
	s->qp = ib_create_qp(s->pd, &ia);
	return PTR_ERR_OR_ZERO(s->qp);
}

void apmlab_side_destroy(struct apmlab_side *s)
{
	if (!IS_ERR_OR_NULL(s->qp))
		ib_destroy_qp(s->qp);
	if (!IS_ERR_OR_NULL(s->cq))
		ib_free_cq(s->cq);
	if (!IS_ERR_OR_NULL(s->pd))
		ib_dealloc_pd(s->pd);
	if (s->dev)
		ib_device_put(s->dev);
	memset(s, 0, sizeof(*s));
}

/*
 * RESET -> INIT -> RTR (apmlab_side_rtr), then RTR -> RTS and RTS -> RTS
 * with PATH_MIG_STATE=REARM (apmlab_side_rts); on IB an RTS -> RTS
 * ALT_PATH load (port 2) comes before the rearm. Both sides are made RTR
 * before either goes to RTS: an RC QP in RTS sends at once, and a peer
 * not yet RTR drops what it sends until the requester's retries run out.
 */
int apmlab_side_rtr(struct apmlab_side *s)
{
	struct ib_qp_attr a = {};
	int ret;

	a.qp_state = IB_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = APMLAB_PORT;
	a.qp_access_flags = IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ;
	ret = modify(s, "init", &a, IB_QP_STATE | IB_QP_PKEY_INDEX |
		     IB_QP_PORT | IB_QP_ACCESS_FLAGS);
	if (ret)
		return ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTR;
	a.path_mtu = IB_MTU_1024;
	a.dest_qp_num = s->peer->qp->qp_num;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	fill_av(s, &a.ah_attr);
	return modify(s, "rtr", &a, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU |
		      IB_QP_DEST_QPN | IB_QP_RQ_PSN | IB_QP_MAX_DEST_RD_ATOMIC |
		      IB_QP_MIN_RNR_TIMER);
}

int apmlab_side_rts(struct apmlab_side *s)
{
	struct ib_qp_attr a = {};
	int ret;

	a.qp_state = IB_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	ret = modify(s, "rts", &a, IB_QP_STATE | IB_QP_TIMEOUT |
		     IB_QP_RETRY_CNT | IB_QP_RNR_RETRY | IB_QP_SQ_PSN |
		     IB_QP_MAX_QP_RD_ATOMIC);
	if (ret)
		return ret;
	if (s->ib) {
		ret = apmlab_load_alt_path(s);
		if (ret)
			return ret;
	}
	return apmlab_rearm(s);
}

