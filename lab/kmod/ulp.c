// SPDX-License-Identifier: GPL-2.0
/*
 * A kernel ULP that uses APM: a kernel RC QP pair (dev0 <-> dev1,
 * port 1; RoCE v2 GIDs on rxe, LIDs on ibsim with the alternate on port 2)
 * made through ib_verbs, armed with
 * PATH_MIG_STATE=REARM, whose QP event handler reacts to PATH_MIG.
 *
 * The event handler only logs and queues work: drivers may call QP event
 * handlers in atomic context (6.1's rxe raises QP events from tasklets, older
 * mlx4/mlx5 from their EQ interrupt), and ib_modify_qp may sleep. The work
 * runs on an ordered workqueue.
 */
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/workqueue.h>
#include "apmlab.h"

struct react {
	struct work_struct work;
	struct apmlab_side *s;
};

static struct apmlab_side sides[2];
static bool running;
static bool use_cm;		/* connected through ib_cm */
static DEFINE_MUTEX(ulp_lock);		/* start/stop/show */
static DEFINE_SPINLOCK(accept_lock);	/* accepting vs the event handler */
static bool accepting;
static atomic_t behavior = ATOMIC_INIT(APMLAB_CORRECT);
static struct workqueue_struct *wq;

static const char *const behavior_names[] = {
	[APMLAB_CORRECT] = "correct",
	[APMLAB_NO_REARM] = "no-rearm",
	[APMLAB_REARM_NO_ALT] = "rearm-no-alt",
	[APMLAB_NO_NOTIFY] = "no-notify",
};

int apmlab_behavior_parse(const char *s)
{
	int i;

	for (i = 0; i < ARRAY_SIZE(behavior_names); i++)
		if (!strcmp(s, behavior_names[i]))
			return i;
	return -EINVAL;
}

static void query_and_log(struct ib_qp *qp)
{
	int st, mig, ret;

	ret = apmlab_query(qp, &st, &mig);
	apmlab_log_query(qp, ret, st, mig);
}

static void react(struct work_struct *work)
{
	struct react *r = container_of(work, struct react, work);
	struct apmlab_side *s = r->s;

	int b = atomic_read(&behavior);

	/* A CM user tells the CM the QP migrated (it swaps its AVs, if no LAP is pending). */
	if (use_cm && b != APMLAB_NO_NOTIFY)
		apmlab_cm_notify(s);
	switch (b) {
	case APMLAB_CORRECT:
	case APMLAB_NO_NOTIFY:
		/* Step 1 (send a LAP) has no kernel API since 5.6. */
		apmlab_log_note(s->qp, "lap_unavailable", -EOPNOTSUPP);
		apmlab_load_alt_path(s);	/* -EINVAL on RoCE: recorded */
		apmlab_rearm(s);
		break;
	case APMLAB_NO_REARM:
		apmlab_log_note(s->qp, "no_rearm", 0);
		break;
	case APMLAB_REARM_NO_ALT:
		apmlab_rearm(s);
		break;
	}
	query_and_log(s->qp);
	kfree(r);
}

static void qp_event(struct ib_event *ev, void *ctx)
{
	struct apmlab_side *s = ctx;
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

static void stop_locked(void)
{
	spin_lock_irq(&accept_lock);
	accepting = false;
	spin_unlock_irq(&accept_lock);
	flush_workqueue(wq);
	if (use_cm)
		apmlab_cm_disconnect(&sides[0], &sides[1]);
	apmlab_side_destroy(&sides[0]);
	apmlab_side_destroy(&sides[1]);
	running = false;
}

int apmlab_ulp_start(int b, const char *dev0, const char *dev1, bool cm)
{
	int ret;

	mutex_lock(&ulp_lock);
	if (running) {
		ret = -EBUSY;
		goto out;
	}
	atomic_set(&behavior, b);
	running = true;
	use_cm = cm;
	sides[0].peer = &sides[1];
	sides[1].peer = &sides[0];
	ret = apmlab_side_create(&sides[0], dev0, qp_event);
	if (!ret)
		ret = apmlab_side_create(&sides[1], dev1, qp_event);
	if (!ret) {
		spin_lock_irq(&accept_lock);
		accepting = true;
		spin_unlock_irq(&accept_lock);
		if (cm && !(sides[0].ib && sides[1].ib))
			ret = -EPROTONOSUPPORT;	/* the CM pair needs IB ports */
		else if (cm)
			ret = apmlab_cm_connect(&sides[0], &sides[1]);
		else
			ret = apmlab_side_rtr(&sides[0]);
	}
	if (!ret && !cm)
		ret = apmlab_side_rtr(&sides[1]);
	if (!ret && !cm)
		ret = apmlab_side_rts(&sides[0]);
	if (!ret && !cm)
		ret = apmlab_side_rts(&sides[1]);
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

static struct apmlab_bench last_bench;	/* under ulp_lock */

/* The CM hook's benchmark on the running --cm pair's client side. */
int apmlab_ulp_bench_notify(u32 n)
{
	int ret;

	if (n == 0 || n > (1U << 24))
		return -EINVAL;
	mutex_lock(&ulp_lock);
	if (!running || !use_cm)
		ret = -ENOTCONN;
	else
		ret = apmlab_cm_bench_notify(&sides[0], n, &last_bench);
	mutex_unlock(&ulp_lock);
	return ret;
}

/* The last benchmark run, one JSON line. */
void apmlab_bench_show(struct seq_file *m)
{
	mutex_lock(&ulp_lock);
	seq_printf(m, "{\"bench\":\"notify\",\"calls\":%u,\"ns\":%llu,\"best_chunk_ns_per_call\":%llu.%02llu,\"ret\":%d}\n",
		   last_bench.calls, last_bench.ns, last_bench.best_chunk_ns / APMLAB_BENCH_CHUNK,
		   (last_bench.best_chunk_ns % APMLAB_BENCH_CHUNK) * 100 / APMLAB_BENCH_CHUNK, last_bench.ret);
	mutex_unlock(&ulp_lock);
}

/* One summary line, then one line per QP (JSON lines). */
void apmlab_ulp_show(struct seq_file *m)
{
	int i, st, mig, ret;

	mutex_lock(&ulp_lock);
	seq_printf(m, "{\"running\":%s,\"behavior\":\"%s\",\"cm\":%s}\n",
		   running ? "true" : "false",
		   behavior_names[atomic_read(&behavior)],
		   running && use_cm ? "true" : "false");
	for (i = 0; running && i < 2; i++) {
		ret = apmlab_query(sides[i].qp, &st, &mig);
		seq_printf(m, "{\"dev\":\"%s\",\"qpn\":%u,\"peer_qpn\":%u,\"gid_index\":%d,\"kernel\":true,\"query_ret\":%d,\"qp_state\":\"%s\",\"path_mig_state\":\"%s\"",
			   dev_name(&sides[i].dev->dev), sides[i].qp->qp_num,
			   sides[i].peer->qp->qp_num, sides[i].gid_index, ret,
			   apmlab_qps_name(st), apmlab_mig_name(mig));
		if (use_cm && sides[i].cm_id) {
			struct ib_cm_id *id = sides[i].cm_id;

			seq_printf(m, ",\"local_comm_id\":%u,\"remote_comm_id\":%u,\"cm_state\":%d,\"lap_state\":%d",
				   be32_to_cpu(id->local_id), be32_to_cpu(id->remote_id),
				   id->state, id->lap_state);
		}
		seq_puts(m, "}\n");
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
