// SPDX-License-Identifier: GPL-2.0
/*
 * lab-verbs: the data path of an InfiniBand HCA as libibverbs sees it,
 * case by case, between two devices in one process (lab/progs/README.md).
 * Each case connects a fresh RC (or UC) QP pair, dev0 port 1 -> dev1 port 1,
 * does one thing and prints one JSON line with what came back: the
 * completions' statuses, opcodes, byte counts, immediate data, and whether
 * the data arrived intact. It checks nothing itself: the lab test does.
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#define BUF 4096

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	unsigned char *buf;
	uint16_t lid;
};

static void usage(FILE *f)
{
	fprintf(f, "usage: lab-verbs [--dev0 ibsim0] [--dev1 ibsim1] [--case NAME]\n"
		"Runs each case (or one) between dev0 and dev1 port 1 and prints one JSON line\n"
		"per case: send-imm, write-imm, read, uc-send, bad-lkey, out-of-bounds,\n"
		"short-recv, bad-rkey, no-remote-write, rnr-exceeded, rnr-retried.\n");
}

static void die(const char *what)
{
	fprintf(stderr, "lab-verbs: %s\n", what);
	exit(1);
}

static struct ibv_context *open_dev(const char *name)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *c = NULL;

	for (int i = 0; l && l[i]; i++)
		if (!strcmp(ibv_get_device_name(l[i]), name))
			c = ibv_open_device(l[i]);
	if (l)
		ibv_free_device_list(l);
	if (!c)
		die("cannot open the device");
	return c;
}

static void setup(struct side *s, struct ibv_context *ctx, enum ibv_qp_type type, int access)
{
	struct ibv_port_attr pa;
	struct ibv_qp_init_attr ia = {
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = type,
	};
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = access };

	s->ctx = ctx;
	s->pd = ibv_alloc_pd(ctx);
	s->cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	s->buf = calloc(1, BUF);
	if (!s->pd || !s->cq || !s->buf)
		die("pd, cq or buffer");
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ);
	ia.send_cq = ia.recv_cq = s->cq;
	s->qp = ibv_create_qp(s->pd, &ia);
	if (!s->mr || !s->qp)
		die("mr or qp");
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("modify to INIT");
	if (ibv_query_port(ctx, 1, &pa))
		die("query port");
	s->lid = pa.lid;
}

static void connect_to(struct side *s, struct side *peer, int rnr_retry)
{
	int rc = s->qp->qp_type == IBV_QPT_RC;
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_4096, .dest_qp_num = peer->qp->qp_num,
		.rq_psn = 0, .max_dest_rd_atomic = 1, .min_rnr_timer = 1,
		.ah_attr = { .dlid = peer->lid, .port_num = 1 },
	};
	int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;

	if (rc)
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	if (ibv_modify_qp(s->qp, &a, mask))
		die("modify to RTR");
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = rnr_retry;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (rc)
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	if (ibv_modify_qp(s->qp, &a, mask))
		die("modify to RTS");
}

static void teardown(struct side *s)
{
	ibv_destroy_qp(s->qp);
	ibv_dereg_mr(s->mr);
	ibv_destroy_cq(s->cq);
	ibv_dealloc_pd(s->pd);
	free(s->buf);
}

static void post_recv(struct side *s, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)s->buf, .length = len, .lkey = s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 100, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (ibv_post_recv(s->qp, &wr, &bad))
		die("post recv");
}

/* Posts one send; the caller's sge (lkey, range) and remote fields. */
static void post(struct side *s, enum ibv_wr_opcode op, struct ibv_sge *sge, uint64_t raddr,
		 uint32_t rkey, uint32_t imm)
{
	struct ibv_send_wr wr = {
		.wr_id = 200, .sg_list = sge, .num_sge = 1, .opcode = op, .send_flags = IBV_SEND_SIGNALED,
		.imm_data = htonl(imm), .wr.rdma = { .remote_addr = raddr, .rkey = rkey },
	}, *bad;

	if (ibv_post_send(s->qp, &wr, &bad))
		die("post send");
}

/* Polls one completion for up to ms and prints it as ,"name":{...} (or null). */
static void poll_one(struct side *s, const char *name, int ms, uint32_t peer_qpn)
{
	struct timespec d = { 0, 1000000 };
	struct ibv_wc wc;

	for (int i = 0; i < ms; i++) {
		int n = ibv_poll_cq(s->cq, 1, &wc);

		if (n < 0)
			die("poll cq");
		if (n == 0) {
			nanosleep(&d, NULL);
			continue;
		}
		printf(",\"%s\":{\"status\":%d,\"opcode\":%d,\"byte_len\":%u,\"wr_id\":%llu,\"src_is_peer\":%s",
		       name, wc.status, wc.opcode, wc.byte_len, (unsigned long long)wc.wr_id,
		       wc.src_qp == peer_qpn ? "true" : "false");
		if (wc.wc_flags & IBV_WC_WITH_IMM)
			printf(",\"imm\":%u", ntohl(wc.imm_data));
		printf("}");
		return;
	}
	printf(",\"%s\":null", name);
}

static void fill(unsigned char *b, int len, int seed)
{
	for (int i = 0; i < len; i++)
		b[i] = (unsigned char)(seed + i * 7);
}

static int same(unsigned char *a, int len, int seed)
{
	for (int i = 0; i < len; i++)
		if (a[i] != (unsigned char)(seed + i * 7))
			return 0;
	return 1;
}

static void run(const char *name, struct ibv_context *c0, struct ibv_context *c1)
{
	enum ibv_qp_type type = strcmp(name, "uc-send") ? IBV_QPT_RC : IBV_QPT_UC;
	int access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	int rnr = 7, intact = -1;
	struct side a, b;
	struct ibv_sge sge;

	if (!strcmp(name, "no-remote-write"))
		access = IBV_ACCESS_REMOTE_READ;
	if (!strcmp(name, "rnr-exceeded"))
		rnr = 0;
	setup(&a, c0, type, access);
	setup(&b, c1, type, access);
	connect_to(&a, &b, rnr);
	connect_to(&b, &a, rnr);
	fill(a.buf, BUF, 1);
	fill(b.buf + 2048, 1024, 9);
	sge = (struct ibv_sge){ .addr = (uintptr_t)a.buf, .length = 32, .lkey = a.mr->lkey };
	printf("{\"case\":\"%s\"", name);
	if (!strcmp(name, "send-imm") || !strcmp(name, "uc-send")) {
		post_recv(&b, 64);
		post(&a, IBV_WR_SEND_WITH_IMM, &sge, 0, 0, 0x1234);
		poll_one(&b, "responder", 5000, a.qp->qp_num);
		intact = same(b.buf, 32, 1);
	} else if (!strcmp(name, "write-imm")) {
		post_recv(&b, 64);
		post(&a, IBV_WR_RDMA_WRITE_WITH_IMM, &sge, (uintptr_t)b.buf + 1024, b.mr->rkey, 0xbeef);
		poll_one(&b, "responder", 5000, a.qp->qp_num);
		intact = same(b.buf + 1024, 32, 1);
	} else if (!strcmp(name, "read")) {
		sge.length = 64;
		post(&a, IBV_WR_RDMA_READ, &sge, (uintptr_t)b.buf + 2048, b.mr->rkey, 0);
		poll_one(&a, "requester", 5000, 0);
		intact = same(a.buf, 64, 9);
		printf(",\"intact\":%s}\n", intact ? "true" : "false");
		goto out;
	} else if (!strcmp(name, "bad-lkey")) {
		sge.lkey ^= 0x100;
		post(&a, IBV_WR_SEND, &sge, 0, 0, 0);
	} else if (!strcmp(name, "out-of-bounds")) {
		sge.addr = (uintptr_t)a.buf + BUF - 16;
		post(&a, IBV_WR_SEND, &sge, 0, 0, 0);
	} else if (!strcmp(name, "short-recv")) {
		post_recv(&b, 8);
		post(&a, IBV_WR_SEND, &sge, 0, 0, 0);
		poll_one(&b, "responder", 5000, a.qp->qp_num);
	} else if (!strcmp(name, "bad-rkey") || !strcmp(name, "no-remote-write")) {
		post(&a, IBV_WR_RDMA_WRITE, &sge, (uintptr_t)b.buf,
		     !strcmp(name, "bad-rkey") ? b.mr->rkey ^ 0x100 : b.mr->rkey, 0);
	} else if (!strcmp(name, "rnr-exceeded")) {
		post(&a, IBV_WR_SEND, &sge, 0, 0, 0);
	} else if (!strcmp(name, "rnr-retried")) {
		struct timespec d = { 0, 300000000 };

		post(&a, IBV_WR_SEND, &sge, 0, 0, 0);
		nanosleep(&d, NULL);
		post_recv(&b, 64);
		poll_one(&b, "responder", 5000, a.qp->qp_num);
		intact = same(b.buf, 32, 1);
	} else {
		die("unknown case");
	}
	poll_one(&a, "requester", 5000, 0);
	if (intact >= 0)
		printf(",\"intact\":%s", intact ? "true" : "false");
	printf("}\n");
out:
	fflush(stdout);
	teardown(&a);
	teardown(&b);
}

int main(int argc, char **argv)
{
	static const char *const cases[] = { "send-imm", "write-imm", "read", "uc-send", "bad-lkey",
		"out-of-bounds", "short-recv", "bad-rkey", "no-remote-write", "rnr-exceeded",
		"rnr-retried" };
	static const struct option opts[] = {
		{ "dev0", required_argument, NULL, 'a' }, { "dev1", required_argument, NULL, 'b' },
		{ "case", required_argument, NULL, 'c' }, { "help", no_argument, NULL, 'h' }, {}
	};
	const char *d0 = "ibsim0", *d1 = "ibsim1", *only = NULL;
	struct ibv_context *c0, *c1;
	int o;

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'a': d0 = optarg; break;
		case 'b': d1 = optarg; break;
		case 'c': only = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	c0 = open_dev(d0);
	c1 = open_dev(d1);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (!only || !strcmp(only, cases[i]))
			run(cases[i], c0, c1);
	ibv_close_device(c0);
	ibv_close_device(c1);
	return 0;
}
