/*
 * lab-ibpair: N connected RC QP pairs ibsim0 <-> ibsim1 (primary port 1 <->
 * port 1, alternate port 2 <-> port 2), loaded and armed, made and driven
 * through the raw uverbs ABI (libibverbs opens ibsim through its rxe
 * provider but cannot make its queues). Reacts
 * to PATH_MIG per --behavior; prints one JSON line per async event, per
 * modify and per query.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common.h"
#include "uverbs.h"

const char *prog = "lab-ibpair";

#define MAX_PAIRS 2048
#define ARM_TIMEOUT_MS 10000

enum bkind {
	B_REARM,		/* new alternate on a live route, then rearm */
	B_MVAPICH,		/* one modify: ALT_PATH | PATH_MIG_STATE=REARM */
	B_NEVER_REARM,
	B_LATE_REARM,		/* rearm (as B_REARM) after late_ms */
	B_REARM_NO_ALT,
	B_REARM_THEN_ALT,
	B_ALT_ONTO_PRIMARY,	/* loads the path it now runs on, then rearms */
	B_ONE_SIDE,		/* only the ibsim0 side reacts (as B_REARM) */
	B_NO_TRAFFIC,		/* rearms, but the ibsim1 side never sends */
};

static const char *const bnames[] = {
	"rearm", "mvapich", "never-rearm", "late-rearm", "rearm-no-alt",
	"rearm-then-alt", "alt-onto-primary", "one-side", "no-traffic",
};

struct iq {
	struct uv_dev *d;
	int side;		/* 0: ibsim0, 1: ibsim1 */
	uint32_t handle, qpn, peer_qpn;
	long rearm_at;
};

static struct uv_dev devs[2];
static const char *const devnames[2] = { "ibsim0", "ibsim1" };
static struct iq qps[2 * MAX_PAIRS];
static int nqps, events;
static enum bkind behavior = B_REARM;
static long late_ms;
static const char *control = "/sys/kernel/debug/ibsim";
static volatile sig_atomic_t stop, force;

static void usage(void)
{
	printf("usage: lab-ibpair --behavior B [--pairs N] [--duration D]\n"
	       "\n"
	       "Makes N RC QP pairs ibsim0 <-> ibsim1 through the raw uverbs ABI: primary\n"
	       "path port 1 <-> port 1, alternate port 2 <-> port 2 loaded (RTS->RTS\n"
	       "ALT_PATH) and rearmed; once both ends read ARMED prints one ready line per\n"
	       "QP ({\"pid\":..,\"dev\":\"ibsim0\",\"qpn\":..,\"ready\":true,...}). Then reads\n"
	       "the async fds: one JSON line per event, a query after it, and per\n"
	       "PATH_MIG the behaviour's reaction (one line per modify, then a query).\n"
	       "\n"
	       "behaviours: rearm (new alternate on the other port, then rearm) |\n"
	       "  mvapich (one modify ALT_PATH|PATH_MIG_STATE=REARM) | never-rearm |\n"
	       "  late-rearm=DURATION | rearm-no-alt | rearm-then-alt | alt-onto-primary\n"
	       "  (loads the path it now runs on) | one-side (only ibsim0 reacts) |\n"
	       "  no-traffic (rearms, but the ibsim1 QPs never send)\n"
	       "\n"
	       "Completions (e.g. the retry-exceeded error of a QP whose primary failed\n"
	       "unarmed) print {\"wc\":STATUS,\"status\":N,\"dev\":..,\"qpn\":..}.\n"
	       "SIGUSR1 forces a migration (modify PATH_MIG_STATE=MIGRATED) of every\n"
	       "ibsim0 QP; SIGTERM/SIGINT destroy the QPs and exit.\n"
	       "\n"
	       "  --pairs N       QP pairs (default 1, at most %d)\n"
	       "  --duration D    run time (default: until SIGTERM/SIGINT)\n"
	       "  --control DIR   the ibsim module's debugfs dir (for no-traffic)\n"
	       "  --uc            UC QPs instead of RC (no ACKs, no retries: a dead path\n"
	       "                  goes unnoticed; only a forced migration moves them)\n"
	       "  --srq           the QPs take their receives from one SRQ per device\n"
	       "                  (an SRQ QP entering ERR raises QP_LAST_WQE_REACHED)\n"
	       "  --alias N       the primary path by the peer port's LMC alias N: DLID\n"
	       "                  base + N, source path bits N (set lab-ib lmc first);\n"
	       "                  a query line (\"query\":\"ready\") per QP before the ready lines\n"
	       "  --no-events     never read the async fds: events stay queued in the\n"
	       "                  kernel until the QPs go (for lab-ib bench)\n"
	       "  --help          this text\n"
	       "\n"
	       "Exit: 0 done; 1 error (no ibsim device, a verb failed); 2 usage.\n", MAX_PAIRS);
}

static int parse_behavior(const char *s)
{
	size_t i;

	if (!strncmp(s, "late-rearm=", 11)) {
		late_ms = parse_duration_ms(s + 11);
		behavior = B_LATE_REARM;
		return late_ms < 0 ? -1 : 0;
	}
	for (i = 0; i < sizeof(bnames) / sizeof(*bnames); i++) {
		if (i != B_LATE_REARM && !strcmp(s, bnames[i])) {
			behavior = i;
			return 0;
		}
	}
	return -1;
}

/* --alias: the primary path's LMC alias (0: the base LID). */
static int alias;

static void set_dest(struct ib_uverbs_qp_dest *d, int side, int port)
{
	memset(d, 0, sizeof(*d));
	d->dlid = uv_port_lid(devnames[!side], port);
	d->port_num = port;
}

/* One modify, printed as {"modify":WHAT,...}; returns 0 or -errno. */
static int modify(struct iq *q, const char *what, struct ib_uverbs_modify_qp *m)
{
	int ret;

	m->qp_handle = q->handle;
	ret = uv_modify_qp(q->d, m);
	if (m->attr_mask & IBV_QP_ALT_PATH)
		jline("{\"modify\":\"%s\",\"pid\":%d,\"dev\":\"%s\",\"qpn\":%u,\"mask\":%u,\"ret\":%d,\"errno\":%d,\"error\":\"%s\",\"alt_port\":%u,\"alt_dlid\":%u,\"live\":%s}",
		      what, getpid(), q->d->name, q->qpn, m->attr_mask, ret, -ret,
		      ret ? strerror(-ret) : "", m->alt_port_num, m->alt_dest.dlid,
		      uv_port_active(devnames[q->side], m->alt_port_num) &&
		      uv_port_active(devnames[!q->side], m->alt_port_num) ? "true" : "false");
	else
		jline("{\"modify\":\"%s\",\"pid\":%d,\"dev\":\"%s\",\"qpn\":%u,\"mask\":%u,\"ret\":%d,\"errno\":%d,\"error\":\"%s\"}",
		      what, getpid(), q->d->name, q->qpn, m->attr_mask, ret, -ret,
		      ret ? strerror(-ret) : "");
	return ret;
}

/* The primary port the QP runs on now (0 if the query fails). */
static int current_port(struct iq *q)
{
	struct ib_uverbs_query_qp_resp r;

	return uv_query_qp(q->d, q->handle, &r) ? 0 : r.port_num;
}

static void fill_alt(struct iq *q, struct ib_uverbs_modify_qp *m, int port)
{
	set_dest(&m->alt_dest, q->side, port);
	m->alt_port_num = port;
	m->alt_pkey_index = 0;
	m->alt_timeout = 14;
	m->attr_mask |= IBV_QP_ALT_PATH;
}

static int load_alt(struct iq *q, int port)
{
	struct ib_uverbs_modify_qp m = {};

	fill_alt(q, &m, port);
	return modify(q, "alt_path", &m);
}

static int rearm(struct iq *q)
{
	struct ib_uverbs_modify_qp m = {};

	m.attr_mask = IBV_QP_PATH_MIG_STATE;
	m.path_mig_state = IBV_MIG_REARM;
	return modify(q, "rearm", &m);
}

static void query(struct iq *q, const char *when)
{
	struct ib_uverbs_query_qp_resp r;
	int ret = uv_query_qp(q->d, q->handle, &r);

	if (ret) {
		jline("{\"query\":\"%s\",\"pid\":%d,\"dev\":\"%s\",\"qpn\":%u,\"ret\":%d,\"qp_state\":\"UNKNOWN\",\"path_mig_state\":\"UNKNOWN\"}",
		      when, getpid(), q->d->name, q->qpn, ret);
		return;
	}
	jline("{\"query\":\"%s\",\"pid\":%d,\"dev\":\"%s\",\"qpn\":%u,\"ret\":0,\"qp_state\":\"%s\",\"path_mig_state\":\"%s\",\"port\":%u,\"dlid\":%u,\"alt_port\":%u,\"alt_dlid\":%u}",
	      when, getpid(), q->d->name, q->qpn, qp_state_name(r.qp_state),
	      mig_state_name(r.path_mig_state), r.port_num, r.dest.dlid,
	      r.alt_port_num, r.alt_dest.dlid);
}

/* The three steps, minus the LAP: a new alternate on the other port, then rearm. */
static void rearm_with_alt(struct iq *q)
{
	int cur = current_port(q);

	load_alt(q, cur == 1 ? 2 : 1);
	rearm(q);
}

static void react(struct iq *q)
{
	struct ib_uverbs_modify_qp m = {};
	int cur;

	switch (behavior) {
	case B_ONE_SIDE:
		if (q->side != 0)
			return;
		/* fall through */
	case B_REARM:
	case B_NO_TRAFFIC:
		rearm_with_alt(q);
		break;
	case B_MVAPICH:
		cur = current_port(q);
		fill_alt(q, &m, cur == 1 ? 2 : 1);
		m.attr_mask |= IBV_QP_PATH_MIG_STATE;
		m.path_mig_state = IBV_MIG_REARM;
		modify(q, "alt_path_rearm", &m);
		break;
	case B_NEVER_REARM:
		return;
	case B_LATE_REARM:
		q->rearm_at = now_ms() + late_ms;
		jline("{\"scheduled\":\"rearm\",\"pid\":%d,\"dev\":\"%s\",\"qpn\":%u,\"in_ms\":%ld}",
		      getpid(), q->d->name, q->qpn, late_ms);
		return;
	case B_REARM_NO_ALT:
		rearm(q);
		break;
	case B_REARM_THEN_ALT:
		cur = current_port(q);
		rearm(q);
		load_alt(q, cur == 1 ? 2 : 1);
		break;
	case B_ALT_ONTO_PRIMARY:
		load_alt(q, current_port(q));
		rearm(q);
		break;
	}
	query(q, "after_react");
}

/*
 * INIT and RTR: every QP of the run is made ready to receive before any
 * goes to RTS (connect_rts), as connection managers and MPI bring-ups do:
 * an RC QP in RTS sends at once (ibsim's request stream, like an
 * application's first send), and a peer still in RESET or INIT drops the
 * requests, so a slow bring-up of the peer (a busy guest) would run out the
 * requester's retries (about 0.5 s at timeout 14) and move it to ERR before
 * its first rearm.
 */
static int connect_rtr(struct iq *q)
{
	struct ib_uverbs_modify_qp m = {};
	int ret;

	m.attr_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	m.qp_state = IBV_QPS_INIT;
	m.port_num = 1;
	m.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	ret = modify(q, "init", &m);
	if (ret)
		return ret;
	memset(&m, 0, sizeof(m));
	m.attr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
		IBV_QP_RQ_PSN;
	if (!q->d->uc)	/* UC has no responder resources and no RNR */
		m.attr_mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	m.qp_state = IBV_QPS_RTR;
	set_dest(&m.dest, q->side, 1);
	m.dest.dlid += alias;
	m.dest.src_path_bits = alias;
	m.path_mtu = IBV_MTU_2048;
	m.dest_qp_num = q->peer_qpn;
	m.max_dest_rd_atomic = 1;
	m.min_rnr_timer = 12;
	return modify(q, "rtr", &m);
}

/* RTS, the alternate path and the first rearm. */
static int connect_rts(struct iq *q)
{
	struct ib_uverbs_modify_qp m = {};
	int ret;

	m.attr_mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (!q->d->uc)	/* UC has no ACK timeout and no retries */
		m.attr_mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
	m.qp_state = IBV_QPS_RTS;
	m.timeout = 14;
	m.retry_cnt = 7;
	m.rnr_retry = 7;
	m.max_rd_atomic = 1;
	ret = modify(q, "rts", &m);
	if (ret)
		return ret;
	ret = load_alt(q, 2);
	return ret ? ret : rearm(q);
}

static void control_write(const char *cmd)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/ctl", control);
	f = fopen(path, "w");
	if (!f || fputs(cmd, f) < 0 || fclose(f) != 0)
		die("'%s' on %s: %s (is the ibsim module loaded?)", cmd, path, strerror(errno));
}

static struct iq *by_handle(uint64_t h)
{
	return h < (uint64_t)nqps ? &qps[h] : NULL;
}

static void handle_async(int side)
{
	struct ib_uverbs_async_event_desc ev;
	struct iq *q = NULL;
	ssize_t n = read(devs[side].async_fd, &ev, sizeof(ev));

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n != (ssize_t)sizeof(ev))
		die("reading the async fd of %s: %s", devnames[side], n < 0 ? strerror(errno) : "short read");
	events++;
	switch (ev.event_type) {
	case IBV_EVENT_CQ_ERR:
		jline("{\"event\":\"%s\",\"event_num\":%u,\"pid\":%d,\"dev\":\"%s\",\"cq\":true}",
		      event_name(ev.event_type), ev.event_type, getpid(), devnames[side]);
		return;
	case IBV_EVENT_DEVICE_FATAL:
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
		jline("{\"event\":\"%s\",\"event_num\":%u,\"pid\":%d,\"dev\":\"%s\",\"port\":%llu}",
		      event_name(ev.event_type), ev.event_type, getpid(), devnames[side],
		      (unsigned long long)ev.element);
		return;
	default:
		q = by_handle(ev.element);
		jline("{\"event\":\"%s\",\"event_num\":%u,\"pid\":%d,\"dev\":\"%s\",\"qpn\":%u}",
		      event_name(ev.event_type), ev.event_type, getpid(), devnames[side],
		      q ? q->qpn : 0);
	}
	if (!q)
		return;
	query(q, "after_event");
	if (ev.event_type == IBV_EVENT_PATH_MIG)
		react(q);
}

static const char *wc_status_name(unsigned int st)
{
	static const char *const names[] = {
		"SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_EEC_OP_ERR",
		"LOC_PROT_ERR", "WR_FLUSH_ERR", "MW_BIND_ERR", "BAD_RESP_ERR",
		"LOC_ACCESS_ERR", "REM_INV_REQ_ERR", "REM_ACCESS_ERR", "REM_OP_ERR",
		"RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR",
	};

	return st < sizeof(names) / sizeof(*names) ? names[st] : "OTHER";
}

/* Prints every completion on both CQs: {"wc":STATUS,...}. */
static void poll_cqs(void)
{
	struct ib_uverbs_wc wc[8];
	int s, n, i;

	for (s = 0; s < 2; s++) {
		while ((n = uv_poll_cq(&devs[s], wc, 8)) > 0)
			for (i = 0; i < n; i++)
				jline("{\"wc\":\"%s\",\"status\":%u,\"pid\":%d,\"dev\":\"%s\",\"qpn\":%u,\"wr_id\":%llu,\"opcode\":%u}",
				      wc_status_name(wc[i].status), wc[i].status, getpid(),
				      devnames[s], wc[i].qp_num,
				      (unsigned long long)wc[i].wr_id, wc[i].opcode);
		if (n < 0)
			die("polling the CQ of %s: %s", devnames[s], strerror(-n));
	}
}

static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		force = 1;
	else
		stop = 1;
}

/* SIGUSR1: a software-forced migration (modify MIGRATED) of every ibsim0 QP. */
static void force_migrations(void)
{
	struct ib_uverbs_modify_qp m;
	int i;

	for (i = 0; i < nqps; i++) {
		if (qps[i].side != 0)
			continue;
		memset(&m, 0, sizeof(m));
		m.attr_mask = IBV_QP_PATH_MIG_STATE;
		m.path_mig_state = IBV_MIG_MIGRATED;
		modify(&qps[i], "force_migrate", &m);
		query(&qps[i], "after_force");
	}
}

static void wait_armed(void)
{
	struct ib_uverbs_query_qp_resp r;
	long deadline = now_ms() + ARM_TIMEOUT_MS;
	int i, armed;

	do {
		for (armed = 0, i = 0; i < nqps; i++)
			if (!uv_query_qp(qps[i].d, qps[i].handle, &r) && r.path_mig_state == IBV_MIG_ARMED)
				armed++;
		if (armed == nqps)
			return;
		usleep(20000);
	} while (now_ms() < deadline && !stop);
	die("only %d of %d QPs ARMED after %d ms (is simulated traffic on? lab-ib traffic on)",
	    armed, nqps, ARM_TIMEOUT_MS);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "behavior", required_argument, NULL, 'b' },
		{ "pairs", required_argument, NULL, 'n' },
		{ "duration", required_argument, NULL, 'd' },
		{ "control", required_argument, NULL, 'c' },
		{ "no-events", no_argument, NULL, 'E' },
		{ "srq", no_argument, NULL, 'S' },
		{ "uc", no_argument, NULL, 'U' },
		{ "alias", required_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	struct pollfd pfd[2];
	int no_events = 0, srq = 0, uc = 0;
	long duration = 0, deadline = 0, now;
	int c, i, s, ret, pairs = 1, have_behavior = 0;
	char cmd[128];

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'b':
			if (parse_behavior(optarg))
				usage_error("unknown behavior '%s'", optarg);
			have_behavior = 1;
			break;
		case 'n':
			pairs = atoi(optarg);
			if (pairs < 1 || pairs > MAX_PAIRS)
				usage_error("--pairs must be 1..%d", MAX_PAIRS);
			break;
		case 'd':
			duration = parse_duration_ms(optarg);
			if (duration < 0)
				usage_error("bad duration '%s'", optarg);
			break;
		case 'c': control = optarg; break;
		case 'E': no_events = 1; break;
		case 'S': srq = 1; break;
		case 'U': uc = 1; break;
		case 'a':
			alias = atoi(optarg);
			if (alias < 0 || alias > 7)
				usage_error("--alias must be 0..7");
			break;
		case 'h': usage(); return 0;
		default: usage_error("bad arguments");
		}
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	if (!have_behavior)
		usage_error("--behavior is required");
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGUSR1, on_signal);

	for (s = 0; s < 2; s++) {
		devs[s].uc = uc;
		ret = uv_open(&devs[s], devnames[s]);
		if (ret)
			die("opening %s through uverbs: %s (is the ibsim module loaded?)",
			    devnames[s], strerror(-ret));
		if (srq && (ret = uv_create_srq(&devs[s])))
			die("create SRQ on %s: %s", devnames[s], strerror(-ret));
	}
	for (i = 0; i < pairs; i++) {
		for (s = 0; s < 2; s++) {
			struct iq *q = &qps[nqps];

			q->d = &devs[s];
			q->side = s;
			ret = uv_create_rc_qp(q->d, nqps, &q->handle, &q->qpn);
			if (ret)
				die("create QP on %s: %s", devnames[s], strerror(-ret));
			nqps++;
		}
		qps[nqps - 2].peer_qpn = qps[nqps - 1].qpn;
		qps[nqps - 1].peer_qpn = qps[nqps - 2].qpn;
	}
	for (i = 0; i < nqps; i++)
		if (connect_rtr(&qps[i]))
			die("connecting QP %u on %s failed", qps[i].qpn, qps[i].d->name);
	for (i = 0; i < nqps; i++)
		if (connect_rts(&qps[i]))
			die("connecting QP %u on %s failed", qps[i].qpn, qps[i].d->name);
	wait_armed();
	for (i = 0; i < nqps; i++) {
		if (behavior == B_NO_TRAFFIC && qps[i].side == 1) {
			snprintf(cmd, sizeof(cmd), "traffic off %s %u", devnames[1], qps[i].qpn);
			control_write(cmd);
		}
	}
	for (i = 0; alias && i < nqps; i++)
		query(&qps[i], "ready"); /* the paths as the HCA holds them: the alias DLID */
	for (i = 0; i < nqps; i++)
		jline("{\"pid\":%d,\"dev\":\"%s\",\"qpn\":%u,\"ready\":true,\"peer_qpn\":%u,\"behavior\":\"%s\",\"path_mig_state\":\"ARMED\"}",
		      getpid(), qps[i].d->name, qps[i].qpn, qps[i].peer_qpn, bnames[behavior]);

	if (duration)
		deadline = now_ms() + duration;
	for (s = 0; s < 2; s++) {
		pfd[s].fd = no_events ? -1 : devs[s].async_fd; /* poll skips fd -1 */
		pfd[s].events = POLLIN;
	}
	while (!stop) {
		if (force) {
			force = 0;
			force_migrations();
		}
		now = now_ms();
		if (deadline && now >= deadline)
			break;
		for (i = 0; i < nqps; i++) {
			if (qps[i].rearm_at && now >= qps[i].rearm_at) {
				qps[i].rearm_at = 0;
				rearm_with_alt(&qps[i]);
				query(&qps[i], "after_react");
			}
		}
		ret = poll(pfd, 2, 50);
		if (ret < 0 && errno != EINTR)
			die("poll: %s", strerror(errno));
		for (s = 0; ret > 0 && s < 2; s++)
			if (pfd[s].revents & POLLIN)
				handle_async(s);
		poll_cqs();
	}
	for (i = 0; i < nqps; i++) {
		ret = uv_destroy_qp(qps[i].d, qps[i].handle);
		if (ret)
			fprintf(stderr, "%s: destroy QP %u on %s: %s\n", prog, qps[i].qpn,
				qps[i].d->name, strerror(-ret));
	}
	jline("{\"exit\":true,\"pid\":%d,\"events\":%d}", getpid(), events);
	return 0;
}
