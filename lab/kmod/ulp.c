// SPDX-License-Identifier: GPL-2.0
/*
 * The kernel ULP of the seed thread: a kernel RC QP pair (dev0 <-> dev1,
 * port 1, RoCE v2 GIDs) made through ib_verbs, armed with
 * PATH_MIG_STATE=REARM, whose QP event handler reacts to PATH_MIG.
 *
 * The event handler only logs and queues work: drivers may call QP event
 * handlers in atomic context (6.1's rxe raises QP events from tasklets, older
 * mlx4/mlx5 from their EQ interrupt), and ib_modify_qp may sleep. The work
 * runs on an ordered workqueue.
 */
#include <linux/etherdevice.h>
#include <linux/ipv6.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/workqueue.h>
#include <net/ipv6.h>
#include <rdma/ib_cache.h>
#include "apmlab.h"

#define PORT 1

struct side {
	struct ib_device *dev;
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct ib_qp *qp;
	int gid_index;		/* IPv4-mapped RoCE v2 GID on PORT */
	union ib_gid gid;
	u8 mac[ETH_ALEN];	/* the GID's netdev address */
	struct side *peer;
};

struct react {
	struct work_struct work;
	struct side *s;
};

static struct side sides[2];
static bool running;
static DEFINE_MUTEX(ulp_lock);		/* start/stop/show */
static DEFINE_SPINLOCK(accept_lock);	/* accepting vs the event handler */
static bool accepting;
static atomic_t behavior = ATOMIC_INIT(APMLAB_CORRECT);
static struct workqueue_struct *wq;

static const char *const behavior_names[] = {
	[APMLAB_CORRECT] = "correct",
	[APMLAB_NO_REARM] = "no-rearm",
	[APMLAB_REARM_NO_ALT] = "rearm-no-alt",
};

int apmlab_behavior_parse(const char *s)
{
	int i;

	for (i = 0; i < ARRAY_SIZE(behavior_names); i++)
		if (!strcmp(s, behavior_names[i]))
			return i;
	return -EINVAL;
}

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

static void query_and_log(struct ib_qp *qp)
{
	int st, mig, ret;

	ret = apmlab_query(qp, &st, &mig);
	apmlab_log_query(qp, ret, st, mig);
}

/* The path a RoCE port can offer: the same GIDs as the primary. */
static void fill_av(struct side *s, struct rdma_ah_attr *ah)
{
	memset(ah, 0, sizeof(*ah));
	ah->type = rdma_ah_find_type(s->dev, PORT);
	rdma_ah_set_port_num(ah, PORT);
	rdma_ah_set_grh(ah, &s->peer->gid, 0, s->gid_index, 64, 0);
	/* Kernel callers pass a resolved AV; rxe uses dmac to spot loopback. */
	ether_addr_copy(ah->roce.dmac, s->peer->mac);
}

static int modify(struct side *s, const char *what, struct ib_qp_attr *a,
		  int mask)
{
	int ret = ib_modify_qp(s->qp, a, mask);

	apmlab_log_modify(s->qp, what, mask, ret);
	return ret;
}

static int load_alt_path(struct side *s)
{
	struct ib_qp_attr a = {};

	fill_av(s, &a.alt_ah_attr);
	a.alt_port_num = PORT;
	a.alt_pkey_index = 0;
	a.alt_timeout = 14;
	return modify(s, "alt_path", &a, IB_QP_ALT_PATH);
}

static int rearm(struct side *s)
{
	struct ib_qp_attr a = { .path_mig_state = IB_MIG_REARM };

	return modify(s, "rearm", &a, IB_QP_PATH_MIG_STATE);
}

static void react(struct work_struct *work)
{
	struct react *r = container_of(work, struct react, work);
	struct side *s = r->s;

	switch (atomic_read(&behavior)) {
	case APMLAB_CORRECT:
		/* Step 1 (send a LAP) has no kernel API since 5.6. */
		apmlab_log_note(s->qp, "lap_unavailable", -EOPNOTSUPP);
		load_alt_path(s);	/* -EINVAL on RoCE: recorded */
		rearm(s);
		break;
	case APMLAB_NO_REARM:
		apmlab_log_note(s->qp, "no_rearm", 0);
		break;
	case APMLAB_REARM_NO_ALT:
		rearm(s);
		break;
	}
	query_and_log(s->qp);
	kfree(r);
}

static void qp_event(struct ib_event *ev, void *ctx)
{
	struct side *s = ctx;
	unsigned long flags;
	struct react *r;

	apmlab_log_event(ev->element.qp, ev->event);
	if (ev->event != IB_EVENT_PATH_MIG)
		return;
	spin_lock_irqsave(&accept_lock, flags);
	if (accepting) {
		r = kzalloc(sizeof(*r), GFP_ATOMIC);
		if (r) {
			INIT_WORK(&r->work, react);
			r->s = s;
			queue_work(wq, &r->work);
		} else {
			apmlab_log_note(s->qp, "react_alloc_failed", -ENOMEM);
		}
	}
	spin_unlock_irqrestore(&accept_lock, flags);
}

static int find_roce_v4_gid(struct side *s)
{
	const struct ib_gid_attr *ga;
	struct ib_port_attr pa;
	u16 vlan;
	int i, ret;

	ret = ib_query_port(s->dev, PORT, &pa);
	if (ret)
		return ret;
	for (i = 0; i < pa.gid_tbl_len; i++) {
		ga = rdma_get_gid_attr(s->dev, PORT, i);
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

static int side_create(struct side *s, const char *name)
{
	struct ib_qp_init_attr ia = {};
	int ret;

	s->dev = ib_device_get_by_name(name, RDMA_DRIVER_UNKNOWN);
	if (!s->dev)
		return -ENODEV;
	ret = find_roce_v4_gid(s);
	if (ret)
		return ret;
	s->pd = ib_alloc_pd(s->dev, 0);
	if (IS_ERR(s->pd))
		return PTR_ERR(s->pd);
	s->cq = ib_alloc_cq(s->dev, NULL, 16, 0, IB_POLL_DIRECT);
	if (IS_ERR(s->cq))
		return PTR_ERR(s->cq);
	ia.event_handler = qp_event;
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

static void side_destroy(struct side *s)
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

/* RESET -> INIT -> RTR -> RTS, then RTS -> RTS with PATH_MIG_STATE=REARM. */
static int side_connect(struct side *s)
{
	struct ib_qp_attr a = {};
	int ret;

	a.qp_state = IB_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = PORT;
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
	ret = modify(s, "rtr", &a, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU |
		     IB_QP_DEST_QPN | IB_QP_RQ_PSN | IB_QP_MAX_DEST_RD_ATOMIC |
		     IB_QP_MIN_RNR_TIMER);
	if (ret)
		return ret;

	memset(&a, 0, sizeof(a));
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
	return rearm(s);
}

static void stop_locked(void)
{
	spin_lock_irq(&accept_lock);
	accepting = false;
	spin_unlock_irq(&accept_lock);
	flush_workqueue(wq);
	side_destroy(&sides[0]);
	side_destroy(&sides[1]);
	running = false;
}

int apmlab_ulp_start(int b, const char *dev0, const char *dev1)
{
	int ret;

	mutex_lock(&ulp_lock);
	if (running) {
		ret = -EBUSY;
		goto out;
	}
	atomic_set(&behavior, b);
	running = true;
	sides[0].peer = &sides[1];
	sides[1].peer = &sides[0];
	ret = side_create(&sides[0], dev0);
	if (!ret)
		ret = side_create(&sides[1], dev1);
	if (!ret) {
		spin_lock_irq(&accept_lock);
		accepting = true;
		spin_unlock_irq(&accept_lock);
		ret = side_connect(&sides[0]);
	}
	if (!ret)
		ret = side_connect(&sides[1]);
	if (ret) {
		apmlab_log_note(NULL, "start_failed", ret);
		stop_locked();
	}
out:
	mutex_unlock(&ulp_lock);
	return ret;
}

int apmlab_ulp_stop(void)
{
	int ret = 0;

	mutex_lock(&ulp_lock);
	if (running)
		stop_locked();
	else
		ret = -ENOENT;
	mutex_unlock(&ulp_lock);
	return ret;
}

int apmlab_ulp_set_behavior(int b)
{
	atomic_set(&behavior, b);
	return 0;
}

/* One summary line, then one line per QP (JSON lines). */
void apmlab_ulp_show(struct seq_file *m)
{
	int i, st, mig, ret;

	mutex_lock(&ulp_lock);
	seq_printf(m, "{\"running\":%s,\"behavior\":\"%s\"}\n",
		   running ? "true" : "false",
		   behavior_names[atomic_read(&behavior)]);
	for (i = 0; running && i < 2; i++) {
		ret = apmlab_query(sides[i].qp, &st, &mig);
		seq_printf(m, "{\"dev\":\"%s\",\"qpn\":%u,\"peer_qpn\":%u,\"gid_index\":%d,\"kernel\":true,\"query_ret\":%d,\"qp_state\":\"%s\",\"path_mig_state\":\"%s\"}\n",
			   dev_name(&sides[i].dev->dev), sides[i].qp->qp_num,
			   sides[i].peer->qp->qp_num, sides[i].gid_index, ret,
			   apmlab_qps_name(st), apmlab_mig_name(mig));
	}
	mutex_unlock(&ulp_lock);
}

int apmlab_ulp_init(void)
{
	wq = alloc_ordered_workqueue("apmlab", 0);
	return wq ? 0 : -ENOMEM;
}

void apmlab_ulp_exit(void)
{
	mutex_lock(&ulp_lock);
	if (running)
		stop_locked();
	mutex_unlock(&ulp_lock);
	destroy_workqueue(wq);
}
