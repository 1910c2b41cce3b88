/*
 * lab-pair: connected RC QP pairs DEV0 <-> DEV1 through libibverbs in one
 * process, armed for APM, reacting to PATH_MIG per a behaviour.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "apm.h"
#include "common.h"

const char *prog = "lab-pair";

#define MAX_PAIRS 64

static void usage(void)
{
	printf("usage: lab-pair [--behavior B] [--duration D] [options]\n"
	       "\n"
	       "Makes connected RC QP pairs DEV0 <-> DEV1 (RoCE v2, IPv4-mapped GIDs)\n"
	       "in one process, moves them to RTS and arms them (RTS->RTS with\n"
	       "PATH_MIG_STATE=REARM), prints one ready line per QP, then prints every\n"
	       "async event of both devices and reacts to PATH_MIG per the behaviour.\n"
	       "All output is JSON lines on stdout; errors go to stderr, exit 1.\n"
	       "\n"
	       "  --behavior B      %s\n"
	       "                    (default rearm-no-alt; lab-ibpair's rearm loads a new\n"
	       "                    alternate first, RoCE has none to load)\n"
	       "  --duration D      exit after D (250ms, 5s, 2m); default: until SIGTERM/SIGINT\n"
	       "  --pairs N         number of QP pairs (default 1, max %d)\n"
	       "  --dev0 NAME       first device (default rxe0)\n"
	       "  --dev1 NAME       second device (default rxe1)\n"
	       "  --port N          port on both devices (default 1)\n"
	       "  --no-arm          leave the QPs MIGRATED after RTS\n"
	       "  --no-connect      leave the QPs in RESET (created, never modified)\n"
	       "  --loop-modify N   after setup, do N RTS->RTS PATH_MIG_STATE=REARM modifies\n"
	       "                    on the first QP as fast as possible, print the rate, exit\n"
	       "  --help            this text\n"
	       "\n"
	       "Signals: SIGUSR1 prints every QP's own ibv_query_qp (\"on_signal\");\n"
	       "SIGUSR2 destroys every QP and keeps running.\n",
	       BEHAVIOR_HELP, MAX_PAIRS);
}

struct dev {
	const char *name;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	int gid_index;
	union ibv_gid gid;
};

static void dev_open(struct dev *d, uint8_t port)
{
	d->ctx = open_device(d->name);
	if (find_roce_v4_gid(d->ctx, port, &d->gid_index, &d->gid))
		die("%s port %u has no IPv4-mapped RoCE v2 GID", d->name, port);
	d->pd = ibv_alloc_pd(d->ctx);
	if (!d->pd)
		die("ibv_alloc_pd on %s: %s", d->name, strerror(errno));
	d->cq = ibv_create_cq(d->ctx, 64, NULL, NULL, 0);
	if (!d->cq)
		die("ibv_create_cq on %s: %s", d->name, strerror(errno));
}

static void qp_create(struct labqp *q, struct dev *d, struct dev *peer, uint8_t port)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = d->cq,
		.recv_cq = d->cq,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
	};

	q->qp = ibv_create_qp(d->pd, &ia);
	if (!q->qp)
		die("ibv_create_qp on %s: %s", d->name, strerror(errno));
	q->dev = d->name;
	q->port = port;
	q->gid_index = d->gid_index;
	q->peer_gid = peer->gid;
}

static void must(int ret, struct labqp *q, const char *step)
{
	if (ret)
		die("%s on %s QP %u failed: %s", step, q->dev, q->qp->qp_num,
		    strerror(ret > 0 ? ret : errno));
}

/* RESET -> INIT -> RTR -> RTS towards peer_qpn. */
static void qp_connect(struct labqp *q, uint32_t peer_qpn)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = q->port;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	must(lq_modify(q, "init", &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
		       IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), q, "RESET->INIT");

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer_qpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = q->peer_gid;
	a.ah_attr.grh.sgid_index = q->gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = q->port;
	must(lq_modify(q, "rtr", &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
		       IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
	     q, "INIT->RTR");

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	must(lq_modify(q, "rts", &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
		       IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
		       IBV_QP_MAX_QP_RD_ATOMIC), q, "RTR->RTS");
}

/* The loop is timed whole and in chunks of LOOP_CHUNK modifies: the
 * fastest chunk is the cost without the host's preemptions (the lab's
 * vCPUs are host threads on a shared machine). */
#define LOOP_CHUNK 64

static void loop_modify(struct labqp *q, long n, long deadline)
{
	struct ibv_qp_attr a = { .path_mig_state = IBV_MIG_REARM };
	long i, failed = 0;
	long long t0 = now_ns(), tc = t0, ns, best = 0;
	int first_err = 0;

	for (i = 0; i < n; i++) {
		int ret = ibv_modify_qp(q->qp, &a, IBV_QP_PATH_MIG_STATE);

		if (ret) {
			failed++;
			if (!first_err)
				first_err = ret > 0 ? ret : errno;
		}
		if ((i + 1) % LOOP_CHUNK == 0) {
			long long t = now_ns();

			if (!best || t - tc < best)
				best = t - tc;
			tc = t;
			if (deadline && now_ms() >= deadline) {
				i++;
				break;
			}
		}
	}
	ns = now_ns() - t0;
	jline("{\"bench\":\"loop_modify\",\"pid\":%d,\"dev\":\"%s\",\"qpn\":%u,\"modifies\":%ld,\"failed\":%ld,\"first_errno\":%d,\"ns\":%lld,\"ns_per_modify\":%lld,\"per_second\":%.0f,\"best_chunk_ns_per_modify\":%.1f}",
	      getpid(), q->dev, q->qp->qp_num, i, failed, first_err, ns,
	      i ? ns / i : 0, ns > 0 ? i * 1e9 / ns : 0.0, best / (double)LOOP_CHUNK);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "behavior", required_argument, NULL, 'b' },
		{ "duration", required_argument, NULL, 'd' },
		{ "pairs", required_argument, NULL, 'n' },
		{ "dev0", required_argument, NULL, '0' },
		{ "dev1", required_argument, NULL, '1' },
		{ "port", required_argument, NULL, 'p' },
		{ "no-arm", no_argument, NULL, 'A' },
		{ "no-connect", no_argument, NULL, 'R' },
		{ "loop-modify", required_argument, NULL, 'L' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	static struct labqp qps[2 * MAX_PAIRS];
	struct dev d[2] = { { .name = "rxe0" }, { .name = "rxe1" } };
	struct evloop l = { .extra_fd = -1 };
	long duration = 0, loops = 0;
	int c, i, pairs = 1, arm = 1, connect = 1;
	uint8_t port = 1;

	l.b.kind = B_REARM_NO_ALT;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'b':
			if (behavior_parse(optarg, &l.b))
				usage_error("unknown behavior '%s'", optarg);
			break;
		case 'd':
			duration = parse_duration_ms(optarg);
			if (duration <= 0)
				usage_error("bad duration '%s'", optarg);
			break;
		case 'n':
			pairs = atoi(optarg);
			if (pairs < 1 || pairs > MAX_PAIRS)
				usage_error("--pairs must be 1..%d", MAX_PAIRS);
			break;
		case '0':
			d[0].name = optarg;
			break;
		case '1':
			d[1].name = optarg;
			break;
		case 'p':
			port = atoi(optarg);
			if (port < 1)
				usage_error("bad port '%s'", optarg);
			break;
		case 'A':
			arm = 0;
			break;
		case 'R':
			connect = 0;
			break;
		case 'L':
			loops = atol(optarg);
			if (loops < 1)
				usage_error("--loop-modify needs a count >= 1");
			break;
		case 'h':
			usage();
			return 0;
		default:
			usage_error("bad arguments");
		}
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	if (loops && !connect)
		usage_error("--loop-modify needs connected QPs: drop --no-connect");

	evloop_signals();
	dev_open(&d[0], port);
	dev_open(&d[1], port);
	for (i = 0; i < pairs; i++) {
		qp_create(&qps[2 * i], &d[0], &d[1], port);
		qp_create(&qps[2 * i + 1], &d[1], &d[0], port);
	}
	for (i = 0; i < 2 * pairs; i++) {
		if (connect)
			qp_connect(&qps[i], qps[i ^ 1].qp->qp_num);
		if (connect && arm)
			must(lq_rearm(&qps[i]), &qps[i], "arm (RTS->RTS REARM)");
		lq_query(&qps[i], "after_setup");
	}
	for (i = 0; i < 2 * pairs; i++)
		lq_ready(&qps[i], qps[i ^ 1].qp->qp_num);

	l.deadline = duration ? now_ms() + duration : 0;
	if (loops) {
		loop_modify(&qps[0], loops, l.deadline);
	} else {
		l.ctx[0] = d[0].ctx;
		l.dev[0] = d[0].name;
		l.ctx[1] = d[1].ctx;
		l.dev[1] = d[1].name;
		l.nctx = 2;
		l.qps = qps;
		l.nqps = 2 * pairs;
		l.usr2_destroy = 1;
		evloop_run(&l);
	}

	for (i = 0; i < 2 * pairs; i++)
		if (qps[i].qp && ibv_destroy_qp(qps[i].qp))
			die("ibv_destroy_qp: %s", strerror(errno));
	for (i = 0; i < 2; i++) {
		ibv_destroy_cq(d[i].cq);
		ibv_dealloc_pd(d[i].pd);
		ibv_close_device(d[i].ctx);
	}
	jline("{\"exit\":true,\"pid\":%d,\"events\":%d}", getpid(), l.events);
	return 0;
}
