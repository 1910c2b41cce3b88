// SPDX-License-Identifier: GPL-2.0
/*
 * The kernel ULP's pair connected through ib_cm (InfiniBand only): side 1
 * listens, side 0 sends a REQ carrying a primary path (port 1 <-> port 1)
 * and an alternate path (port 2 <-> port 2). Each side moves its QP with
 * ib_cm_init_qp_attr(), so the CM itself loads the alternate path at RTR
 * and asks for REARM at RTS. REP, RTU, DREQ and DREP follow; a LAP that
 * arrives is logged (IB_CM_LAP_RECEIVED) and left pending, as rdma_cm does.
 */
#include <linux/completion.h>
#include <linux/ktime.h>
#include <linux/sched.h>
#include <linux/version.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_cm.h>
#include <rdma/ib_sa.h>
#include "apmlab.h"

#define APMLAB_SERVICE_ID 0x1000000000a9a9a9ULL
#define CM_TIMEOUT_MS 10000

static DECLARE_COMPLETION(connected);	/* server saw the RTU */
static DECLARE_COMPLETION(client_done);	/* client sent the RTU (or failed) */
static int client_ret, server_ret;
static struct ib_cm_id *client_id;

static const char *const cm_event_names[] = {
	[IB_CM_REQ_ERROR] = "cm_req_error",
	[IB_CM_REQ_RECEIVED] = "cm_req_received",
	[IB_CM_REP_ERROR] = "cm_rep_error",
	[IB_CM_REP_RECEIVED] = "cm_rep_received",
	[IB_CM_RTU_RECEIVED] = "cm_rtu_received",
	[IB_CM_USER_ESTABLISHED] = "cm_user_established",
	[IB_CM_DREQ_ERROR] = "cm_dreq_error",
	[IB_CM_DREQ_RECEIVED] = "cm_dreq_received",
	[IB_CM_DREP_RECEIVED] = "cm_drep_received",
	[IB_CM_TIMEWAIT_EXIT] = "cm_timewait_exit",
	[IB_CM_MRA_RECEIVED] = "cm_mra_received",
	[IB_CM_REJ_RECEIVED] = "cm_rej_received",
	[IB_CM_LAP_ERROR] = "cm_lap_error",
	[IB_CM_LAP_RECEIVED] = "cm_lap_received",
	[IB_CM_APR_RECEIVED] = "cm_apr_received",
	[IB_CM_SIDR_REQ_ERROR] = "cm_sidr_req_error",
	[IB_CM_SIDR_REQ_RECEIVED] = "cm_sidr_req_received",
	[IB_CM_SIDR_REP_RECEIVED] = "cm_sidr_rep_received",
};

static const char *cm_event_name(int e)
{
	if (e < 0 || e >= ARRAY_SIZE(cm_event_names) || !cm_event_names[e])
		return "cm_other";
	return cm_event_names[e];
}

/* Moves the QP to state with the attributes the CM computes. */
static int cm_modify(struct apmlab_side *s, struct ib_cm_id *id,
		     enum ib_qp_state state, const char *what)
{
	struct ib_qp_attr a = { .qp_state = state };
	int mask, ret;

	ret = ib_cm_init_qp_attr(id, &a, &mask);
	if (ret) {
		apmlab_log_note(s->qp, what, ret);
		return ret;
	}
	if (state == IB_QPS_INIT)
		a.qp_access_flags |= IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ;
	ret = ib_modify_qp(s->qp, &a, mask);
	apmlab_log_modify(s->qp, what, mask, ret);
	return ret;
}

static int server_req(struct apmlab_side *s, struct ib_cm_id *id)
{
	struct ib_cm_rep_param rep = {};
	int ret;

	s->cm_id = id;
	id->context = s;
	ret = cm_modify(s, id, IB_QPS_INIT, "cm_init");
	if (!ret)
		ret = cm_modify(s, id, IB_QPS_RTR, "cm_rtr");
	if (!ret)
		ret = cm_modify(s, id, IB_QPS_RTS, "cm_rts");
	if (ret)
		return ret;
	rep.qp_num = s->qp->qp_num;
	rep.starting_psn = 0;
	rep.responder_resources = 1;
	rep.initiator_depth = 1;
	rep.flow_control = 1;
	rep.rnr_retry_count = 7;
	ret = ib_send_cm_rep(id, &rep);
	apmlab_log_note(s->qp, "cm_send_rep", ret);
	return ret;
}

static int client_rep(struct apmlab_side *s, struct ib_cm_id *id)
{
	int ret = cm_modify(s, id, IB_QPS_RTR, "cm_rtr");

	if (!ret)
		ret = cm_modify(s, id, IB_QPS_RTS, "cm_rts");
	if (!ret) {
		ret = ib_send_cm_rtu(id, NULL, 0);
		apmlab_log_note(s->qp, "cm_send_rtu", ret);
	}
	return ret;
}

static int cm_handler(struct ib_cm_id *id, const struct ib_cm_event *ev)
{
	struct apmlab_side *s = id->context;
	int ret;

	apmlab_log_note(s->qp, cm_event_name(ev->event), 0);
	switch (ev->event) {
	case IB_CM_REQ_RECEIVED:
		ret = server_req(s, id);
		if (ret) {
			s->cm_id = NULL;
			server_ret = ret;
			complete(&connected);
			return ret;	/* the CM destroys the new id */
		}
		break;
	case IB_CM_REP_RECEIVED:
		client_ret = client_rep(s, id);
		complete(&client_done);
		break;
	case IB_CM_RTU_RECEIVED:
		server_ret = 0;
		complete(&connected);
		break;
	case IB_CM_DREQ_RECEIVED:
		apmlab_log_note(s->qp, "cm_send_drep", ib_send_cm_drep(id, NULL, 0));
		break;
	case IB_CM_REQ_ERROR:
	case IB_CM_REP_ERROR:
	case IB_CM_REJ_RECEIVED:
		if (id == client_id) {
			client_ret = -ECONNREFUSED;
			complete(&client_done);
		}
		break;
	default:
		break;
	}
	return 0;
}

static int fill_path(struct sa_path_rec *p, struct apmlab_side *from,
		     struct apmlab_side *to, u32 port)
{
	struct ib_port_attr a, b;
	int ret;

	ret = ib_query_port(from->dev, port, &a);
	if (!ret)
		ret = ib_query_port(to->dev, port, &b);
	if (!ret)
		ret = rdma_query_gid(from->dev, port, 0, &p->sgid);
	if (!ret)
		ret = rdma_query_gid(to->dev, port, 0, &p->dgid);
	if (ret)
		return ret;
	p->rec_type = SA_PATH_REC_TYPE_IB;
	sa_path_set_slid(p, a.lid);
	sa_path_set_dlid(p, b.lid);
	p->pkey = cpu_to_be16(0xffff);
	p->mtu = IB_MTU_2048;
	p->mtu_selector = IB_SA_EQ;
	p->rate = IB_RATE_100_GBPS;
	p->rate_selector = IB_SA_EQ;
	p->packet_life_time = 14;
	p->packet_life_time_selector = IB_SA_EQ;
	p->reversible = 1;
	p->numb_path = 1;
	p->hop_limit = 0;
	p->service_id = cpu_to_be64(APMLAB_SERVICE_ID);
	return 0;
}

int apmlab_cm_connect(struct apmlab_side *c, struct apmlab_side *srv)
{
	struct sa_path_rec prim = {}, alt = {};
	struct ib_cm_req_param req = {};
	struct ib_qp_attr a = {};
	int ret;

	reinit_completion(&connected);
	reinit_completion(&client_done);
	client_ret = server_ret = -ETIMEDOUT;
	srv->listen_id = ib_create_cm_id(srv->dev, cm_handler, srv);
	if (IS_ERR(srv->listen_id)) {
		ret = PTR_ERR(srv->listen_id);
		srv->listen_id = NULL;
		return ret;
	}
#if LINUX_VERSION_CODE < KERNEL_VERSION(5, 15, 0)
	/* 5.10 (Debian bullseye) still takes a service mask: 0 is the exact ID */
	ret = ib_cm_listen(srv->listen_id, cpu_to_be64(APMLAB_SERVICE_ID), 0);
#else
	ret = ib_cm_listen(srv->listen_id, cpu_to_be64(APMLAB_SERVICE_ID));
#endif
	if (ret)
		return ret;
	c->cm_id = ib_create_cm_id(c->dev, cm_handler, c);
	if (IS_ERR(c->cm_id)) {
		ret = PTR_ERR(c->cm_id);
		c->cm_id = NULL;
		return ret;
	}
	client_id = c->cm_id;
	a.qp_state = IB_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = APMLAB_PORT;
	a.qp_access_flags = IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ;
	ret = ib_modify_qp(c->qp, &a, IB_QP_STATE | IB_QP_PKEY_INDEX |
			   IB_QP_PORT | IB_QP_ACCESS_FLAGS);
	apmlab_log_modify(c->qp, "init", IB_QP_STATE | IB_QP_PKEY_INDEX |
			  IB_QP_PORT | IB_QP_ACCESS_FLAGS, ret);
	if (ret)
		return ret;
	ret = fill_path(&prim, c, srv, 1);
	if (!ret)
		ret = fill_path(&alt, c, srv, 2);
	if (ret)
		return ret;
	req.primary_path = &prim;
	req.alternate_path = &alt;
	req.service_id = cpu_to_be64(APMLAB_SERVICE_ID);
	req.qp_num = c->qp->qp_num;
	req.qp_type = IB_QPT_RC;
	req.starting_psn = 0;
	req.responder_resources = 1;
	req.initiator_depth = 1;
	req.remote_cm_response_timeout = 20;
	req.local_cm_response_timeout = 20;
	req.flow_control = 1;
	req.retry_count = 7;
	req.rnr_retry_count = 7;
	req.max_cm_retries = 3;
	ret = ib_send_cm_req(c->cm_id, &req);
	apmlab_log_note(c->qp, "cm_send_req", ret);
	if (ret)
		return ret;
	if (!wait_for_completion_timeout(&client_done, msecs_to_jiffies(CM_TIMEOUT_MS)))
		return -ETIMEDOUT;
	if (client_ret)
		return client_ret;
	if (!wait_for_completion_timeout(&connected, msecs_to_jiffies(CM_TIMEOUT_MS)))
		return -ETIMEDOUT;
	return server_ret;
}

void apmlab_cm_disconnect(struct apmlab_side *c, struct apmlab_side *srv)
{
	/* ib_destroy_cm_id sends the DREQ (or REJ) the state needs */
	if (c->cm_id)
		ib_destroy_cm_id(c->cm_id);
	if (srv->cm_id)
		ib_destroy_cm_id(srv->cm_id);
	if (srv->listen_id)
		ib_destroy_cm_id(srv->listen_id);
	c->cm_id = srv->cm_id = srv->listen_id = NULL;
}

int apmlab_cm_notify(struct apmlab_side *s)
{
	int ret = s->cm_id ? ib_cm_notify(s->cm_id, IB_EVENT_PATH_MIG) : -ENOTCONN;

	apmlab_log_note(s->qp, "cm_notify_path_mig", ret);
	return ret;
}

/*
 * ib_cm_notify(COMM_EST) n times on the established cm_id of s, in chunks
 * of APMLAB_BENCH_CHUNK calls timed with ktime_get_ns(): on an established
 * connection the CM answers -EISCONN and changes nothing (cm_establish),
 * so every call takes the same path through the hook.
 */
int apmlab_cm_bench_notify(struct apmlab_side *s, u32 n, struct apmlab_bench *out)
{
	u64 start, t0, d, best = U64_MAX;
	u32 done, i, k;
	int ret = 0;

	if (!s->cm_id)
		return -ENOTCONN;
	start = ktime_get_ns();
	for (done = 0; done < n; done += k) {
		k = min_t(u32, APMLAB_BENCH_CHUNK, n - done);
		t0 = ktime_get_ns();
		for (i = 0; i < k; i++)
			ret = ib_cm_notify(s->cm_id, IB_EVENT_COMM_EST);
		d = ktime_get_ns() - t0;
		if (k == APMLAB_BENCH_CHUNK && d < best)
			best = d;
		cond_resched();
	}
	out->calls = n;
	out->ns = ktime_get_ns() - start;
	out->best_chunk_ns = best == U64_MAX ? 0 : best;
	out->ret = ret;
	return 0;
}
