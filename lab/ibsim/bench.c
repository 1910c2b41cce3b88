// SPDX-License-Identifier: GPL-2.0
/*
 * The QP event loop of the lab's probe-cost benchmark. "bench DEV QPN N"
 * raises IB_EVENT_COMM_EST on one user QP N times, calling the QP's event
 * handler as the driver's event path does (ev_fn), in chunks of
 * BENCH_CHUNK calls timed with ktime_get_ns(). The result of the last run
 * is read from /sys/kernel/debug/ibsim/bench as one JSON line:
 *   {"events":N,"ns":T,"best_chunk_ns_per_event":B}
 * User QPs only: their handler (ib_uverbs, behind __ib_qp_event_handler
 * on kernels that have it) queues the event for the owner and never calls
 * back into the driver, so the loop may hold ibsim_mutex (the QP cannot be
 * destroyed under it). The owner should not read its async events while
 * the loop runs; they are freed with the QP.
 */
#include <linux/ktime.h>
#include <linux/sched.h>
#include "ibsim.h"

#define BENCH_CHUNK 64
#define BENCH_MAX (1U << 24)

static DEFINE_MUTEX(bench_lock);
static struct {
	u32 events;
	u64 ns, best_chunk_ns;
} last;

int ibsim_bench_events(int dev, u32 qpn, u32 n)
{
	u64 start, t0, d, best = U64_MAX, total;
	struct ibsim_qp *qp;
	struct ib_event ev;
	u32 done, i, k;
	int err = 0;

	if (n == 0 || n > BENCH_MAX)
		return -EINVAL;
	mutex_lock(&ibsim_mutex);
	qp = ibsim_qp_at(dev, qpn, &err);
	if (qp && (!qp->ibqp.uobject || !qp->ibqp.event_handler))
		err = -EOPNOTSUPP;
	if (err) {
		mutex_unlock(&ibsim_mutex);
		return err;
	}
	memset(&ev, 0, sizeof(ev));
	ev.device = &qp->dev->ibdev;
	ev.event = IB_EVENT_COMM_EST;
	ev.element.qp = &qp->ibqp;
	start = ktime_get_ns();
	for (done = 0; done < n; done += k) {
		k = min_t(u32, BENCH_CHUNK, n - done);
		t0 = ktime_get_ns();
		for (i = 0; i < k; i++)
			qp->ibqp.event_handler(&ev, qp->ibqp.qp_context);
		d = ktime_get_ns() - t0;
		if (k == BENCH_CHUNK && d < best)
			best = d;
		cond_resched();
	}
	total = ktime_get_ns() - start;
	mutex_unlock(&ibsim_mutex);

	mutex_lock(&bench_lock);
	last.events = n;
	last.ns = total;
	last.best_chunk_ns = best == U64_MAX ? 0 : best;
	mutex_unlock(&bench_lock);
	return 0;
}

void ibsim_bench_show(struct seq_file *m)
{
	mutex_lock(&bench_lock);
	seq_printf(m, "{\"events\":%u,\"ns\":%llu,\"best_chunk_ns_per_event\":%llu.%02llu}\n",
		   last.events, last.ns, last.best_chunk_ns / BENCH_CHUNK,
		   (last.best_chunk_ns % BENCH_CHUNK) * 100 / BENCH_CHUNK);
	mutex_unlock(&bench_lock);
}
