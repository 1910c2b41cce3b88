/*
 * lab-lap: send a hand-made CM LAP (attribute 0x19) or APR (0x1A) MAD through
 * libibumad to another port's GSI QP (QP1). Modern kernels never send LAPs
 * (ib_send_cm_lap was removed in 5.6), so this is how the lab makes one.
 *
 * RoCE addressing: ib_umad_write() builds an address handle from the umad
 * header with rdma_create_user_ah(); on a RoCE port that needs a GRH
 * (grh_present, the local GID index, the destination GID), and the kernel
 * resolves the destination MAC itself. QP1 takes Q_Key 0x80010000.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/umad.h>
#include "common.h"

const char *prog = "lab-lap";

#define CM_CLASS 0x07
#define CM_CLASS_VERSION 2
#define METHOD_SEND 0x03
#define ATTR_LAP 0x0019
#define ATTR_APR 0x001A
#define QP1_QKEY 0x80010000u
#define MAD_SIZE 256

static void usage(void)
{
	printf("usage: lab-lap --dev D [--to D2 | --dgid GID] [options]\n"
	       "\n"
	       "Sends a hand-made CM LAP (attribute 0x19) or APR (0x1A) MAD, class 0x07,\n"
	       "method Send, through umad from port --port of D to the GSI QP (QP1) of\n"
	       "another port. On RoCE the MAD carries a GRH from D's IPv4-mapped RoCE v2\n"
	       "GID to the destination GID. When the destination is a local device,\n"
	       "prints its cm_rx_msgs counter before and after (waits up to --wait).\n"
	       "Output: JSON lines on stdout; errors on stderr, exit 1.\n"
	       "\n"
	       "  --dev D         sending device (required)\n"
	       "  --to D2         receiving local device (default: rxe1 for rxe0, else rxe0)\n"
	       "  --dgid GID      receiving GID instead of a local device (no counters)\n"
	       "  --port N        port on both sides (default 1)\n"
	       "  --attr A        lap (default) | apr\n"
	       "  --count N       MADs to send (default 1)\n"
	       "  --wait D        how long to wait for the receiver's counter (default 3s)\n"
	       "  --help          this text\n");
}

/* /sys/class/infiniband/DEV/ports/PORT/cm_rx_msgs/lap (or apr); -1 if absent. */
static long rx_counter(const char *dev, int port, const char *attr)
{
	char path[256];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/cm_rx_msgs/%s",
		 dev, port, attr);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

static void put_be32(uint8_t *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, 4);
}

/*
 * The CM message after the 24-byte MAD header. LAP: local comm ID @0, remote
 * comm ID @4, remote QPN @12 (24 bits), alternate local/remote LID @20/@22,
 * alternate local/remote GID @24/@40, flow label/traffic class @56, hop
 * limit @60. APR: local comm ID @0, remote comm ID @4, AP status @9.
 */
static void build_mad(uint8_t *mad, int attr, uint64_t tid,
		      const union ibv_gid *sgid, const union ibv_gid *dgid)
{
	uint8_t *msg = mad + 24;
	uint16_t be_attr = htobe16(attr);
	uint64_t be_tid = htobe64(tid);

	memset(mad, 0, MAD_SIZE);
	mad[0] = 1;			/* base version */
	mad[1] = CM_CLASS;
	mad[2] = CM_CLASS_VERSION;
	mad[3] = METHOD_SEND;
	memcpy(mad + 8, &be_tid, 8);
	memcpy(mad + 16, &be_attr, 2);
	put_be32(msg + 0, 0x1ab00000 | (tid & 0xffff));	/* local comm ID */
	put_be32(msg + 4, 0x2ab00000 | (tid & 0xffff));	/* remote comm ID */
	if (attr == ATTR_LAP) {
		put_be32(msg + 12, 0x000100 << 8);	/* remote QPN 0x100 */
		memcpy(msg + 24, sgid->raw, 16);
		memcpy(msg + 40, dgid->raw, 16);
		msg[60] = 64;				/* hop limit */
	} else {
		msg[9] = 0;				/* AP status: success */
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dev", required_argument, NULL, 'd' },
		{ "to", required_argument, NULL, 't' },
		{ "dgid", required_argument, NULL, 'g' },
		{ "port", required_argument, NULL, 'p' },
		{ "attr", required_argument, NULL, 'a' },
		{ "count", required_argument, NULL, 'n' },
		{ "wait", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	const char *dev = NULL, *to = NULL, *dgid_s = NULL, *attr_s = "lap";
	int c, i, port = 1, count = 1, attr = ATTR_LAP, sidx, didx, fd, agent;
	long wait_ms = 3000, before = -1, after = -1, deadline;
	union ibv_gid sgid, dgid;
	struct ibv_context *ctx;
	char sg[64], dg[64];
	void *umad;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd': dev = optarg; break;
		case 't': to = optarg; break;
		case 'g': dgid_s = optarg; break;
		case 'p': port = atoi(optarg); break;
		case 'a':
			attr_s = optarg;
			if (!strcmp(optarg, "lap"))
				attr = ATTR_LAP;
			else if (!strcmp(optarg, "apr"))
				attr = ATTR_APR;
			else
				usage_error("--attr must be lap or apr");
			break;
		case 'n':
			count = atoi(optarg);
			if (count < 1)
				usage_error("--count must be >= 1");
			break;
		case 'w':
			wait_ms = parse_duration_ms(optarg);
			if (wait_ms < 0)
				usage_error("bad duration '%s'", optarg);
			break;
		case 'h': usage(); return 0;
		default: usage_error("bad arguments");
		}
	}
	if (!dev)
		usage_error("--dev is required");
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	if (port < 1)
		usage_error("bad port");
	if (to && dgid_s)
		usage_error("--to and --dgid exclude each other");
	if (!to && !dgid_s)
		to = strcmp(dev, "rxe0") ? "rxe0" : "rxe1";

	ctx = open_device(dev);
	if (find_roce_v4_gid(ctx, port, &sidx, &sgid))
		die("%s port %d has no IPv4-mapped RoCE v2 GID", dev, port);
	ibv_close_device(ctx);
	if (to) {
		ctx = open_device(to);
		if (find_roce_v4_gid(ctx, port, &didx, &dgid))
			die("%s port %d has no IPv4-mapped RoCE v2 GID", to, port);
		ibv_close_device(ctx);
		before = rx_counter(to, port, attr_s);
	} else if (inet_pton(AF_INET6, dgid_s, dgid.raw) != 1) {
		usage_error("bad GID '%s' (want IPv6 text, e.g. ::ffff:10.0.0.2)", dgid_s);
	}
	gid_str(&sgid, sg, sizeof(sg));
	gid_str(&dgid, dg, sizeof(dg));

	if (umad_init() < 0)
		die("umad_init failed (is ib_umad loaded?)");
	fd = umad_open_port((char *)dev, port);
	if (fd < 0)
		die("umad_open_port %s:%d: %s", dev, port, strerror(-fd));
	/* Class 0: a send-only agent on QP1; ib_cm owns class 0x07 receives. */
	agent = umad_register(fd, 0, 0, 0, NULL);
	if (agent < 0)
		die("umad_register: %s", strerror(-agent));
	umad = calloc(1, umad_size() + MAD_SIZE);
	if (!umad)
		die("out of memory");

	for (i = 0; i < count; i++) {
		uint64_t tid = ((uint64_t)getpid() << 16) | (uint64_t)i;
		ib_mad_addr_t *a;
		int ret;

		build_mad(umad_get_mad(umad), attr, tid, &sgid, &dgid);
		if (umad_set_addr(umad, 0, 1, 0, QP1_QKEY) < 0)
			die("umad_set_addr failed");
		a = umad_get_mad_addr(umad);
		a->grh_present = 1;
		a->gid_index = sidx;
		a->hop_limit = 64;
		a->traffic_class = 0;
		a->flow_label = 0;
		memcpy(a->gid, dgid.raw, 16);
		ret = umad_send(fd, agent, umad, MAD_SIZE, 0, 0);
		if (ret < 0)
			die("umad_send %s to %s: %s", attr_s, dg, strerror(-ret));
		jline("{\"sent\":\"%s\",\"attr_id\":%d,\"pid\":%d,\"dev\":\"%s\",\"port\":%d,\"sgid_index\":%d,\"sgid\":\"%s\",\"dgid\":\"%s\",\"tid\":%llu}",
		      attr == ATTR_LAP ? "LAP" : "APR", attr, getpid(), dev, port,
		      sidx, sg, dg, (unsigned long long)tid);
	}

	if (to) {
		deadline = now_ms() + wait_ms;
		do {
			after = rx_counter(to, port, attr_s);
			if (before >= 0 && after >= before + count)
				break;
			usleep(20000);
		} while (now_ms() < deadline);
		jline("{\"receiver\":\"%s\",\"port\":%d,\"counter\":\"cm_rx_msgs/%s\",\"before\":%ld,\"after\":%ld,\"counted\":%s}",
		      to, port, attr_s, before, after,
		      before >= 0 && after >= before + count ? "true" : "false");
	}
	umad_unregister(fd, agent);
	umad_close_port(fd);
	free(umad);
	return 0;
}
