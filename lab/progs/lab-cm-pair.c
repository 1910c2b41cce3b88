/*
 * lab-cm-pair: an RC connection through librdmacm in one process (listener
 * on the server device's IPv4 address, client on the client device's),
 * armed for APM; on PATH_MIG it calls rdma_notify(id, IBV_EVENT_PATH_MIG),
 * then reacts per a behaviour.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#include "apm.h"
#include "common.h"

const char *prog = "lab-cm-pair";

static void usage(void)
{
	printf("usage: lab-cm-pair [--behavior B] [--duration D] [options]\n"
	       "\n"
	       "Connects an RC QP pair through librdmacm in one process: a listener on\n"
	       "the IPv4 address of the server device (its IPv4-mapped RoCE v2 GID) and a\n"
	       "client from the client device's address. Arms both QPs (RTS->RTS with\n"
	       "PATH_MIG_STATE=REARM), prints one ready line per QP, then prints every\n"
	       "async and CM event. On PATH_MIG it calls rdma_notify(id,\n"
	       "IBV_EVENT_PATH_MIG), prints the result, then reacts per the behaviour.\n"
	       "All output is JSON lines on stdout; errors go to stderr, exit 1.\n"
	       "\n"
	       "  --behavior B      %s\n"
	       "                    (default rearm-no-alt; lab-ibpair's rearm loads a new\n"
	       "                    alternate first, RoCE has none to load)\n"
	       "  --duration D      exit after D (250ms, 5s, 2m); default: until SIGTERM/SIGINT\n"
	       "  --client-dev D    default rxe0\n"
	       "  --server-dev D    default rxe1\n"
	       "  --tcp-port N      rdma_cm port (RDMA_PS_TCP) to listen on (default 0: any\n"
	       "                    free port, printed in the cm_setup line)\n"
	       "  --no-notify       do not call rdma_notify on PATH_MIG\n"
	       "  --help            this text\n",
	       BEHAVIOR_HELP);
}

struct conn {
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct labqp *q;
	const char *role;
	int established;
};

static struct rdma_event_channel *chan;
static struct conn client = { .role = "client" }, server = { .role = "server" };
static struct labqp qps[2];
static int notify = 1;

static void ip_of_dev(const char *dev, struct sockaddr_in *sa, int *gid_index,
		      union ibv_gid *gid)
{
	struct ibv_context *ctx = open_device(dev);

	if (find_roce_v4_gid(ctx, 1, gid_index, gid))
		die("%s port 1 has no IPv4-mapped RoCE v2 GID", dev);
	ibv_close_device(ctx);
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	memcpy(&sa->sin_addr, gid->raw + 12, 4);
}

static void make_qp(struct conn *c, struct labqp *q)
{
	struct ibv_qp_init_attr ia = {
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
	};

	c->pd = ibv_alloc_pd(c->id->verbs);
	if (!c->pd)
		die("ibv_alloc_pd (%s): %s", c->role, strerror(errno));
	c->cq = ibv_create_cq(c->id->verbs, 16, NULL, NULL, 0);
	if (!c->cq)
		die("ibv_create_cq (%s): %s", c->role, strerror(errno));
	ia.send_cq = c->cq;
	ia.recv_cq = c->cq;
	if (rdma_create_qp(c->id, c->pd, &ia))
		die("rdma_create_qp (%s): %s", c->role, strerror(errno));
	c->q = q;
	q->qp = c->id->qp;
	q->dev = ibv_get_device_name(c->id->verbs->device);
	q->role = c->role;
	q->port = c->id->port_num;
	q->user = c;
}

static struct rdma_conn_param conn_param(void)
{
	struct rdma_conn_param p = {
		.responder_resources = 1, .initiator_depth = 1,
		.retry_count = 7, .rnr_retry_count = 7,
	};
	return p;
}

static void print_cm(struct rdma_cm_event *e, const char *role)
{
	jline("{\"cm_event\":\"%s\",\"pid\":%d,\"cm\":\"%s\",\"status\":%d}",
	      rdma_event_str(e->event), getpid(), role, e->status);
}

/* Drives both sides' CM events until both are ESTABLISHED. */
static void connect_pair(struct sockaddr_in *src, struct sockaddr_in *dst)
{
	struct rdma_conn_param p = conn_param();
	struct rdma_cm_event *e;
	long deadline = now_ms() + 15000;

	if (rdma_resolve_addr(client.id, (struct sockaddr *)src,
			      (struct sockaddr *)dst, 5000))
		die("rdma_resolve_addr: %s", strerror(errno));
	while (!(client.established && server.established)) {
		if (now_ms() > deadline)
			die("rdma_cm connection not established within 15 s");
		if (rdma_get_cm_event(chan, &e))
			die("rdma_get_cm_event: %s", strerror(errno));
		print_cm(e, e->id == client.id ? "client" : "server");
		switch (e->event) {
		case RDMA_CM_EVENT_ADDR_RESOLVED:
			if (rdma_resolve_route(client.id, 5000))
				die("rdma_resolve_route: %s", strerror(errno));
			break;
		case RDMA_CM_EVENT_ROUTE_RESOLVED:
			make_qp(&client, &qps[0]);
			if (rdma_connect(client.id, &p))
				die("rdma_connect: %s", strerror(errno));
			break;
		case RDMA_CM_EVENT_CONNECT_REQUEST:
			server.id = e->id;
			make_qp(&server, &qps[1]);
			if (rdma_accept(server.id, &p))
				die("rdma_accept: %s", strerror(errno));
			break;
		case RDMA_CM_EVENT_ESTABLISHED:
			if (e->id == client.id)
				client.established = 1;
			else
				server.established = 1;
			break;
		default:
			die("unexpected rdma_cm event %s (status %d) while connecting",
			    rdma_event_str(e->event), e->status);
		}
		rdma_ack_cm_event(e);
	}
}

static void on_qp_event(struct labqp *q, enum ibv_event_type t, void *arg)
{
	struct conn *c = q->user;
	int ret, err;

	(void)arg;
	if (t != IBV_EVENT_PATH_MIG || !notify)
		return;
	ret = rdma_notify(c->id, IBV_EVENT_PATH_MIG);
	err = ret ? errno : 0;
	jline("{\"notify\":\"PATH_MIG\",\"pid\":%d,\"cm\":\"%s\",\"dev\":\"%s\",\"qpn\":%u,\"ret\":%d,\"errno\":%d,\"error\":\"%s\"}",
	      getpid(), c->role, q->dev, q->qp->qp_num, ret, err,
	      err ? strerror(err) : "");
}

static void on_cm_event(void *arg)
{
	struct rdma_cm_event *e;

	(void)arg;
	if (rdma_get_cm_event(chan, &e))
		die("rdma_get_cm_event: %s", strerror(errno));
	print_cm(e, e->id == client.id ? "client" : "server");
	rdma_ack_cm_event(e);
}

static void teardown(void)
{
	struct conn *cs[2] = { &client, &server };
	int i;

	for (i = 0; i < 2; i++) {
		if (!cs[i]->id)
			continue;
		rdma_disconnect(cs[i]->id);
		rdma_destroy_qp(cs[i]->id);
		ibv_destroy_cq(cs[i]->cq);
		ibv_dealloc_pd(cs[i]->pd);
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "behavior", required_argument, NULL, 'b' },
		{ "duration", required_argument, NULL, 'd' },
		{ "client-dev", required_argument, NULL, 'c' },
		{ "server-dev", required_argument, NULL, 's' },
		{ "tcp-port", required_argument, NULL, 'p' },
		{ "no-notify", no_argument, NULL, 'N' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	const char *cdev = "rxe0", *sdev = "rxe1";
	struct sockaddr_in csa, ssa;
	struct evloop l = {};
	struct rdma_cm_id *listen_id;
	union ibv_gid cgid, sgid;
	int c, cidx, sidx, port = 0;
	long duration = 0;
	char ipc[32], ips[32];

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
		case 'c':
			cdev = optarg;
			break;
		case 's':
			sdev = optarg;
			break;
		case 'p':
			port = atoi(optarg);
			if (port < 0 || port > 65535)
				usage_error("bad port '%s'", optarg);
			break;
		case 'N':
			notify = 0;
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

	evloop_signals();
	ip_of_dev(cdev, &csa, &cidx, &cgid);
	ip_of_dev(sdev, &ssa, &sidx, &sgid);
	ssa.sin_port = htons(port);
	inet_ntop(AF_INET, &csa.sin_addr, ipc, sizeof(ipc));
	inet_ntop(AF_INET, &ssa.sin_addr, ips, sizeof(ips));
	chan = rdma_create_event_channel();
	if (!chan)
		die("rdma_create_event_channel: %s", strerror(errno));
	if (rdma_create_id(chan, &listen_id, NULL, RDMA_PS_TCP) ||
	    rdma_create_id(chan, &client.id, NULL, RDMA_PS_TCP))
		die("rdma_create_id: %s", strerror(errno));
	if (rdma_bind_addr(listen_id, (struct sockaddr *)&ssa))
		die("rdma_bind_addr %s:%d: %s", ips, port, strerror(errno));
	if (rdma_listen(listen_id, 1))
		die("rdma_listen: %s", strerror(errno));
	port = ntohs(rdma_get_src_port(listen_id));
	ssa.sin_port = htons(port);
	jline("{\"cm_setup\":true,\"pid\":%d,\"client_dev\":\"%s\",\"client_ip\":\"%s\",\"server_dev\":\"%s\",\"server_ip\":\"%s\",\"tcp_port\":%d}",
	      getpid(), cdev, ipc, sdev, ips, port);

	connect_pair(&csa, &ssa);

	qps[0].gid_index = cidx;
	qps[0].peer_gid = sgid;
	qps[1].gid_index = sidx;
	qps[1].peer_gid = cgid;
	for (c = 0; c < 2; c++) {
		if (lq_rearm(&qps[c]))
			die("arm (RTS->RTS REARM) on %s QP %u failed", qps[c].dev,
			    qps[c].qp->qp_num);
		lq_query(&qps[c], "after_setup");
	}
	lq_ready(&qps[0], qps[1].qp->qp_num);
	lq_ready(&qps[1], qps[0].qp->qp_num);

	l.ctx[0] = client.id->verbs;
	l.dev[0] = qps[0].dev;
	l.nctx = 1;
	if (server.id->verbs != client.id->verbs) {
		l.ctx[1] = server.id->verbs;
		l.dev[1] = qps[1].dev;
		l.nctx = 2;
	}
	l.qps = qps;
	l.nqps = 2;
	l.deadline = duration ? now_ms() + duration : 0;
	l.on_qp_event = on_qp_event;
	l.extra_fd = chan->fd;
	l.on_extra = on_cm_event;
	evloop_run(&l);

	teardown();
	jline("{\"exit\":true,\"pid\":%d,\"events\":%d}", getpid(), l.events);
	return 0;
}
