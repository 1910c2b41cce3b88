#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "apm.h"
#include "common.h"

static const char *const bnames[] = {
	[B_NEVER_REARM] = "never-rearm",
	[B_LATE_REARM] = "late-rearm",
	[B_REARM_NO_ALT] = "rearm-no-alt",
	[B_ALT_THEN_REARM] = "alt-then-rearm",
	[B_REARM_THEN_ALT] = "rearm-then-alt",
};

int behavior_parse(const char *s, struct behavior *b)
{
	size_t i;

	b->late_ms = 0;
	if (!strncmp(s, "late-rearm=", 11)) {
		b->kind = B_LATE_REARM;
		b->late_ms = parse_duration_ms(s + 11);
		return b->late_ms < 0 ? -1 : 0;
	}
	if (!strcmp(s, "rearm")) {
		/* its old name here; lab-ibpair's rearm loads a new alternate first */
		fprintf(stderr, "warning: --behavior rearm is rearm-no-alt on RoCE (no alternate path to load); "
			"write rearm-no-alt: the old name goes in the next release\n");
		b->kind = B_REARM_NO_ALT;
		return 0;
	}
	for (i = 0; i < sizeof(bnames) / sizeof(*bnames); i++) {
		if (bnames[i] && i != B_LATE_REARM && !strcmp(s, bnames[i])) {
			b->kind = i;
			return 0;
		}
	}
	return -1;
}

const char *behavior_name(const struct behavior *b)
{
	return bnames[b->kind];
}

int lq_modify(struct labqp *q, const char *what, struct ibv_qp_attr *a, int mask)
{
	int ret = ibv_modify_qp(q->qp, a, mask);
	/* libibverbs returns the errno value; some paths return -1 + errno. */
	int err = ret > 0 ? ret : ret < 0 ? errno : 0;

	jline("{\"modify\":\"%s\",\"pid\":%d,\"dev\":\"%s\",\"qpn\":%u,\"mask\":%d,\"ret\":%d,\"errno\":%d,\"error\":\"%s\"}",
	      what, getpid(), q->dev, q->qp->qp_num, mask, ret, err,
	      err ? strerror(err) : "");
	return ret;
}

int lq_rearm(struct labqp *q)
{
	struct ibv_qp_attr a = { .path_mig_state = IBV_MIG_REARM };

	return lq_modify(q, "rearm", &a, IBV_QP_PATH_MIG_STATE);
}

/*
 * The only other path a one-port RoCE device has is the primary itself;
 * the kernel rejects any IBV_QP_ALT_PATH on RoCE ports with EINVAL.
 */
int lq_load_alt(struct labqp *q)
{
	struct ibv_qp_attr a = {};

	a.alt_ah_attr.is_global = 1;
	a.alt_ah_attr.grh.dgid = q->peer_gid;
	a.alt_ah_attr.grh.sgid_index = q->gid_index;
	a.alt_ah_attr.grh.hop_limit = 64;
	a.alt_ah_attr.port_num = q->port;
	a.alt_port_num = q->port;
	a.alt_pkey_index = 0;
	a.alt_timeout = 14;
	return lq_modify(q, "alt_path", &a, IBV_QP_ALT_PATH);
}

void lq_query(struct labqp *q, const char *when)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr a;
	int ret;

	memset(&a, 0, sizeof(a));
	ret = ibv_query_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_PATH_MIG_STATE, &init);
	jline("{\"query\":\"%s\",\"pid\":%d,\"dev\":\"%s\",\"qpn\":%u,\"ret\":%d,\"qp_state\":\"%s\",\"path_mig_state\":\"%s\"}",
	      when, getpid(), q->dev, q->qp->qp_num, ret,
	      ret ? "UNKNOWN" : qp_state_name(a.qp_state),
	      ret ? "UNKNOWN" : mig_state_name(a.path_mig_state));
}

void lq_react(struct labqp *q, const struct behavior *b)
{
	switch (b->kind) {
	case B_REARM_NO_ALT:
		lq_rearm(q);
		break;
	case B_NEVER_REARM:
		return;
	case B_LATE_REARM:
		q->rearm_at = now_ms() + b->late_ms;
		jline("{\"scheduled\":\"rearm\",\"pid\":%d,\"dev\":\"%s\",\"qpn\":%u,\"in_ms\":%ld}",
		      getpid(), q->dev, q->qp->qp_num, b->late_ms);
		return;
	case B_ALT_THEN_REARM:
		lq_load_alt(q);
		lq_rearm(q);
		break;
	case B_REARM_THEN_ALT:
		lq_rearm(q);
		lq_load_alt(q);
		break;
	}
	lq_query(q, "after_react");
}

void lq_ready(struct labqp *q, int peer_qpn)
{
	char role[32] = "";

	if (q->role)
		snprintf(role, sizeof(role), ",\"cm\":\"%s\"", q->role);
	jline("{\"pid\":%d,\"dev\":\"%s\",\"qpn\":%u,\"ready\":true,\"peer_qpn\":%d,\"gid_index\":%d%s}",
	      getpid(), q->dev, q->qp->qp_num, peer_qpn, q->gid_index, role);
}

static struct labqp *find_qp(struct evloop *l, struct ibv_qp *qp)
{
	int i;

	for (i = 0; i < l->nqps; i++)
		if (l->qps[i].qp == qp)
			return &l->qps[i];
	return NULL;
}

static void handle_async(struct evloop *l, int c)
{
	struct ibv_async_event ev;
	struct labqp *q = NULL;
	enum ibv_event_type t;

	if (ibv_get_async_event(l->ctx[c], &ev)) {
		if (errno == EAGAIN)
			return;
		die("ibv_get_async_event on %s: %s", l->dev[c], strerror(errno));
	}
	t = ev.event_type;
	l->events++;
	switch (t) {
	case IBV_EVENT_CQ_ERR:
		jline("{\"event\":\"%s\",\"event_num\":%d,\"pid\":%d,\"dev\":\"%s\",\"cq\":true}",
		      event_name(t), t, getpid(), l->dev[c]);
		break;
	case IBV_EVENT_DEVICE_FATAL:
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
		jline("{\"event\":\"%s\",\"event_num\":%d,\"pid\":%d,\"dev\":\"%s\",\"port\":%d}",
		      event_name(t), t, getpid(), l->dev[c], ev.element.port_num);
		break;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
	case IBV_EVENT_WQ_FATAL:
		jline("{\"event\":\"%s\",\"event_num\":%d,\"pid\":%d,\"dev\":\"%s\"}",
		      event_name(t), t, getpid(), l->dev[c]);
		break;
	default:	/* QP events */
		q = find_qp(l, ev.element.qp);
		jline("{\"event\":\"%s\",\"event_num\":%d,\"pid\":%d,\"dev\":\"%s\",\"qpn\":%u}",
		      event_name(t), t, getpid(), l->dev[c],
		      ev.element.qp ? ev.element.qp->qp_num : 0);
		break;
	}
	ibv_ack_async_event(&ev);
	if (!q)
		return;
	lq_query(q, "after_event");
	if (l->on_qp_event)
		l->on_qp_event(q, t, l->arg);
	if (t == IBV_EVENT_PATH_MIG)
		lq_react(q, &l->b);
}

static void run_timers(struct evloop *l, long now)
{
	int i;

	for (i = 0; i < l->nqps; i++) {
		struct labqp *q = &l->qps[i];

		if (q->rearm_at && q->rearm_at <= now) {
			q->rearm_at = 0;
			lq_rearm(q);
			lq_query(q, "after_react");
		}
	}
}

static long next_wakeup(struct evloop *l)
{
	long t = l->deadline;
	int i;

	for (i = 0; i < l->nqps; i++)
		if (l->qps[i].rearm_at && (!t || l->qps[i].rearm_at < t))
			t = l->qps[i].rearm_at;
	return t;
}

void evloop_signals(void)
{
	sigset_t s;

	sigemptyset(&s);
	sigaddset(&s, SIGINT);
	sigaddset(&s, SIGTERM);
	sigaddset(&s, SIGUSR1);
	sigaddset(&s, SIGUSR2);
	sigprocmask(SIG_BLOCK, &s, NULL);
}

static volatile sig_atomic_t stop, usr1, usr2;

static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		usr1 = 1;
	else if (sig == SIGUSR2)
		usr2 = 1;
	else
		stop = 1;
}

/* SIGUSR1: print every QP's own ibv_query_qp ("on_signal"). SIGUSR2 (only
 * with l->usr2_destroy): destroy every QP, print {"destroyed":true,...},
 * keep running. */
static void on_user_signals(struct evloop *l)
{
	int i;

	if (usr1) {
		usr1 = 0;
		for (i = 0; i < l->nqps; i++)
			if (l->qps[i].qp)
				lq_query(&l->qps[i], "on_signal");
	}
	if (usr2 && l->usr2_destroy) {
		usr2 = 0;
		for (i = 0; i < l->nqps; i++) {
			struct labqp *q = &l->qps[i];
			unsigned qpn;
			int ret;

			if (!q->qp)
				continue;
			qpn = q->qp->qp_num;
			ret = ibv_destroy_qp(q->qp);
			if (!ret) {
				q->qp = NULL;
				q->rearm_at = 0;
			}
			jline("{\"destroyed\":%s,\"pid\":%d,\"dev\":\"%s\",\"qpn\":%u,\"ret\":%d}",
			      ret ? "false" : "true", getpid(), q->dev, qpn, ret);
		}
	}
}

void evloop_run(struct evloop *l)
{
	struct pollfd pfd[9];
	struct sigaction sa = { .sa_handler = on_signal };
	sigset_t empty;
	int i, n;

	sigemptyset(&empty);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGUSR2, &sa, NULL);
	for (i = 0; i < l->nctx; i++) {
		int fl = fcntl(l->ctx[i]->async_fd, F_GETFL);

		fcntl(l->ctx[i]->async_fd, F_SETFL, fl | O_NONBLOCK);
		pfd[i] = (struct pollfd){ .fd = l->ctx[i]->async_fd, .events = POLLIN };
	}
	n = l->nctx;
	if (l->extra_fd >= 0)
		pfd[n++] = (struct pollfd){ .fd = l->extra_fd, .events = POLLIN };

	while (!stop) {
		long now = now_ms(), wake = next_wakeup(l);
		struct timespec ts, *tsp = NULL;
		int r;

		if (l->deadline && now >= l->deadline)
			break;
		on_user_signals(l);
		run_timers(l, now);
		wake = next_wakeup(l);
		if (wake) {
			long d = wake > now ? wake - now : 0;

			ts.tv_sec = d / 1000;
			ts.tv_nsec = (d % 1000) * 1000000;
			tsp = &ts;
		}
		r = ppoll(pfd, n, tsp, &empty);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			die("ppoll: %s", strerror(errno));
		}
		for (i = 0; i < l->nctx; i++)
			if (pfd[i].revents & POLLIN)
				handle_async(l, i);
		if (l->extra_fd >= 0 && (pfd[n - 1].revents & POLLIN))
			l->on_extra(l->arg);
	}
}
