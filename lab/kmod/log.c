// SPDX-License-Identifier: GPL-2.0
/*
 * A fixed ring of records printed as JSON lines. Writers may run in atomic
 * context (QP event handlers), so the ring is guarded by a spinlock and
 * records only hold fixed-size data and string literals.
 */
#include <linux/spinlock.h>
#include <linux/ktime.h>
#include "apmlab.h"

#define LOG_LEN 512

enum kind { K_EVENT, K_MODIFY, K_QUERY, K_NOTE };

struct rec {
	u64 seq;
	u64 ns;			/* CLOCK_MONOTONIC, like bpf_ktime_get_ns */
	enum kind kind;
	char dev[IB_DEVICE_NAME_MAX];
	u32 qpn;
	const char *what;	/* string literal */
	int a, b, c;		/* per kind: event | mask,ret | ret,state,mig */
};

static struct rec ring[LOG_LEN];
static u64 next_seq;
static u64 clear_seq;	/* records before this were cleared */
static DEFINE_SPINLOCK(log_lock);

static void add(struct ib_qp *qp, enum kind kind, const char *what,
		int a, int b, int c)
{
	unsigned long flags;
	struct rec *r;

	spin_lock_irqsave(&log_lock, flags);
	r = &ring[next_seq % LOG_LEN];
	r->seq = next_seq++;
	r->ns = ktime_get_ns();
	r->kind = kind;
	strscpy(r->dev, qp ? dev_name(&qp->device->dev) : "", sizeof(r->dev));
	r->qpn = qp ? qp->qp_num : 0;
	r->what = what;
	r->a = a;
	r->b = b;
	r->c = c;
	spin_unlock_irqrestore(&log_lock, flags);
}

void apmlab_log_event(struct ib_qp *qp, int event)
{
	add(qp, K_EVENT, NULL, event, 0, 0);
}

void apmlab_log_modify(struct ib_qp *qp, const char *what, int mask, int ret)
{
	add(qp, K_MODIFY, what, mask, ret, 0);
}

void apmlab_log_query(struct ib_qp *qp, int ret, int qp_state, int mig)
{
	add(qp, K_QUERY, NULL, ret, qp_state, mig);
}

void apmlab_log_note(struct ib_qp *qp, const char *what, int ret)
{
	add(qp, K_NOTE, what, ret, 0, 0);
}

static void show_one(struct seq_file *m, const struct rec *r)
{
	seq_printf(m, "{\"seq\":%llu,\"ns\":%llu,\"dev\":\"%s\",\"qpn\":%u,",
		   r->seq, r->ns, r->dev, r->qpn);
	switch (r->kind) {
	case K_EVENT:
		seq_printf(m, "\"kind\":\"event\",\"event\":\"%s\",\"event_num\":%d}\n",
			   apmlab_event_name(r->a), r->a);
		break;
	case K_MODIFY:
		seq_printf(m, "\"kind\":\"modify\",\"what\":\"%s\",\"mask\":%d,\"ret\":%d}\n",
			   r->what, r->a, r->b);
		break;
	case K_QUERY:
		seq_printf(m, "\"kind\":\"query\",\"ret\":%d,\"qp_state\":\"%s\",\"path_mig_state\":\"%s\"}\n",
			   r->a, apmlab_qps_name(r->b), apmlab_mig_name(r->c));
		break;
	case K_NOTE:
		seq_printf(m, "\"kind\":\"note\",\"what\":\"%s\",\"ret\":%d}\n",
			   r->what, r->a);
		break;
	}
}

void apmlab_log_show(struct seq_file *m)
{
	unsigned long flags;
	u64 i, first;

	spin_lock_irqsave(&log_lock, flags);
	first = next_seq > LOG_LEN ? next_seq - LOG_LEN : 0;
	first = max(first, clear_seq);
	for (i = first; i < next_seq; i++)
		show_one(m, &ring[i % LOG_LEN]);
	spin_unlock_irqrestore(&log_lock, flags);
}

/* Clearing keeps sequence numbers growing, so readers can tell records apart. */
void apmlab_log_clear(void)
{
	unsigned long flags;

	spin_lock_irqsave(&log_lock, flags);
	clear_seq = next_seq;
	spin_unlock_irqrestore(&log_lock, flags);
}
