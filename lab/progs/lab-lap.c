/*
 * lab-lap: send a hand-made CM LAP (attribute 0x19) or APR (0x1A) MAD through
 * libibumad to another port's GSI QP (QP1). Modern kernels never send LAPs
 * (ib_send_cm_lap was removed in 5.6), so this is how the lab makes one.
 *
 * RoCE addressing: ib_umad_write() builds an address handle from the umad
 * header with rdma_create_user_ah(); on a RoCE port that needs a GRH
 * (grh_present, the local GID index, the destination GID), and the kernel
 * resolves the destination MAC itself. QP1 takes Q_Key 0x80010000.
 *
 * InfiniBand addressing (ibsim): the MAD goes to the receiving port's LID
 * without a GRH; LIDs and GIDs come from sysfs (libibverbs opens ibsim
 * through its rxe provider but cannot make its queues). The LAP's alternate path is --alt-port on both sides.
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
	       "  --to D2         receiving local device (default: the other of rxe0/rxe1,\n"
	       "                  or of ibsim0/ibsim1)\n"
	       "  --dgid GID      receiving GID instead of a local device (no counters)\n"
	       "  --port N        port on both sides (default 1)\n"
	       "  --attr A        lap (default) | apr\n"
	       "  --count N       MADs to send (default 1)\n"
	       "  --local-comm-id N   the LAP's local comm ID (default: made up)\n"
	       "  --remote-comm-id N  the LAP's remote comm ID: the receiver's local comm\n"
	       "                  ID of an established connection (default: made up)\n"
	       "  --remote-qpn N  the LAP's remote QPN (default 0x100)\n"
	       "  --alt-port N    InfiniBand: the alternate path's port on both sides\n"
	       "                  (default 2); its LIDs and GIDs go in the LAP\n"
	       "  --wait D        how long to wait for the receiver's counter (default 3s)\n"
	       "  --bench B       time --count MADs in bursts of B, each until the\n"
	       "                  receiver counted it in cm_rx_duplicates (the MADs must\n"
	       "                  be duplicates: a LAP already pending on the cm_id they\n"
	       "                  name); prints {\"bench\":..,\"per_second\":..,\n"
	       "                  \"best_burst_ns_per_mad\":..,\"lost\":..} instead of a\n"
	       "                  line per MAD\n"
	       "  --help          this text\n");
}

/* /sys/class/infiniband/DEV/ports/PORT/GROUP/lap (or apr); -1 if absent. */
static long cm_counter(const char *dev, int port, const char *group, const char *attr)
{
	char path[256];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/%s/%s",
		 dev, port, group, attr);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

static long rx_counter(const char *dev, int port, const char *attr)
{
	return cm_counter(dev, port, "cm_rx_msgs", attr);
}

/* First line of /sys/class/infiniband/DEV/ports/PORT/NAME, "" if absent. */
static void port_attr(const char *dev, int port, const char *name, char *buf, size_t len)
{
	char path[256];
	FILE *f;

	buf[0] = 0;
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/%s", dev, port, name);
	f = fopen(path, "r");
	if (!f)
		return;
	if (!fgets(buf, len, f))
		buf[0] = 0;
	buf[strcspn(buf, "\n")] = 0;
	fclose(f);
}

static int is_ib(const char *dev, int port)
{
	char ll[64];

	port_attr(dev, port, "link_layer", ll, sizeof(ll));
	return !strcmp(ll, "InfiniBand");
}

/* The LID and GID 0 of an InfiniBand port from sysfs. */
static void ib_addr(const char *dev, int port, uint16_t *lid, union ibv_gid *gid)
{
	char buf[128];

	port_attr(dev, port, "lid", buf, sizeof(buf));
	if (!buf[0])
		die("%s port %d: no LID in sysfs", dev, port);
	*lid = (uint16_t)strtoul(buf, NULL, 0);
	port_attr(dev, port, "gids/0", buf, sizeof(buf));
	if (inet_pton(AF_INET6, buf, gid->raw) != 1)
		die("%s port %d: bad GID '%s' in sysfs", dev, port, buf);
}

static void put_be16(uint8_t *p, uint16_t v)
{
	v = htobe16(v);
	memcpy(p, &v, 2);
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
struct lap_ids {
	long local, remote, qpn;	/* -1: made up */
	uint16_t alt_slid, alt_dlid;	/* IB only */
};

static void build_mad(uint8_t *mad, int attr, uint64_t tid,
		      const union ibv_gid *sgid, const union ibv_gid *dgid,
		      const struct lap_ids *ids)
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
	put_be32(msg + 0, ids->local >= 0 ? (uint32_t)ids->local :
		 0x1ab00000 | (tid & 0xffff));		/* local comm ID */
	put_be32(msg + 4, ids->remote >= 0 ? (uint32_t)ids->remote :
		 0x2ab00000 | (tid & 0xffff));		/* remote comm ID */
	if (attr == ATTR_LAP) {
		put_be32(msg + 12, (uint32_t)(ids->qpn >= 0 ? ids->qpn : 0x100) << 8);
		put_be16(msg + 20, ids->alt_slid);
		put_be16(msg + 22, ids->alt_dlid);
		memcpy(msg + 24, sgid->raw, 16);
		memcpy(msg + 40, dgid->raw, 16);
		msg[60] = 64;				/* hop limit */
	} else {
		msg[9] = 0;				/* AP status: success */
	}
}

static long parse_u32_opt(const char *s, const char *name)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno || *end || end == s || v > 0xffffffffUL)
		usage_error("bad %s '%s'", name, s);
	return (long)v;
}

/* What every MAD of one run shares. */
struct sender {
	int fd, agent, attr, ib, sidx;
	uint16_t dlid;
	const union ibv_gid *sgid, *dgid;
	const struct lap_ids *ids;
	void *umad;
	const char *attr_s, *dg;
};

/* Sends MAD number i; returns its transaction ID. */
static uint64_t send_mad(const struct sender *s, int i)
{
	uint64_t tid = ((uint64_t)getpid() << 16) | (uint64_t)i;
	ib_mad_addr_t *a;
	int ret;

	build_mad(umad_get_mad(s->umad), s->attr, tid, s->sgid, s->dgid, s->ids);
	if (umad_set_addr(s->umad, s->ib ? s->dlid : 0, 1, 0, QP1_QKEY) < 0)
		die("umad_set_addr failed");
	a = umad_get_mad_addr(s->umad);
	if (!s->ib) {
		a->grh_present = 1;
		a->gid_index = s->sidx;
		a->hop_limit = 64;
		a->traffic_class = 0;
		a->flow_label = 0;
		memcpy(a->gid, s->dgid->raw, 16);
	}
	ret = umad_send(s->fd, s->agent, s->umad, MAD_SIZE, 0, 0);
	if (ret < 0)
		die("umad_send %s to %s: %s", s->attr_s, s->dg, strerror(-ret));
	return tid;
}

/*
 * --bench: count MADs in bursts of burst, each burst timed from its first
 * send until the receiver's CM counted all of it as duplicates
 * (cm_rx_duplicates, which cm_lap_handler bumps for a LAP while one is
 * pending on the cm_id it names). Prints one line: the whole run's rate and
 * the fastest burst's time per MAD. A burst not counted within 2 s ends
 * the run (its MADs are reported lost).
 */
static void bench(const struct sender *s, const char *to, int port, int count, int burst)
{
	long long t0, start, best = -1, d;
	long base, got = 0, first, last_change;
	int sent = 0, b, i, lost = 0;

	if (!to)
		usage_error("--bench needs a local receiver (--to)");
	first = cm_counter(to, port, "cm_rx_duplicates", s->attr_s);
	if (first < 0)
		die("%s port %d: no cm_rx_duplicates/%s counter", to, port, s->attr_s);
	start = now_ns();
	while (sent < count && !lost) {
		b = count - sent < burst ? count - sent : burst;
		base = first + sent;
		t0 = now_ns();
		for (i = 0; i < b; i++)
			send_mad(s, sent + i);
		last_change = now_ms();
		for (;;) {
			long v = cm_counter(to, port, "cm_rx_duplicates", s->attr_s);

			if (v != got) {
				got = v;
				last_change = now_ms();
			}
			if (v >= base + b)
				break;
			if (now_ms() - last_change > 2000) {
				lost = (int)(base + b - v);
				break;
			}
			usleep(20);
		}
		d = now_ns() - t0;
		if (b == burst && !lost && (best < 0 || d < best))
			best = d;
		sent += b;
	}
	d = now_ns() - start;
	jline("{\"bench\":\"%s\",\"receiver\":\"%s\",\"count\":%d,\"burst\":%d,\"ns\":%lld,\"per_second\":%.0f,\"best_burst_ns_per_mad\":%.1f,\"lost\":%d}",
	      s->attr_s, to, sent, burst, d, d > 0 ? sent * 1e9 / d : 0.0,
	      best > 0 ? (double)best / burst : 0.0, lost);
	if (lost)
		die("%d of %d %s MADs not counted as duplicates by %s (is one pending on the cm_id they name?)",
		    lost, sent, s->attr_s, to);
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
		{ "bench", required_argument, NULL, 'b' },
		{ "wait", required_argument, NULL, 'w' },
		{ "local-comm-id", required_argument, NULL, 'L' },
		{ "remote-comm-id", required_argument, NULL, 'R' },
		{ "remote-qpn", required_argument, NULL, 'Q' },
		{ "alt-port", required_argument, NULL, 'A' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	const char *dev = NULL, *to = NULL, *dgid_s = NULL, *attr_s = "lap";
	int c, i, port = 1, count = 1, attr = ATTR_LAP, sidx = 0, didx, fd, agent;
	int ib, alt_port = 2, bench_burst = 0;
	struct sender snd;
	uint16_t dlid = 0;
	struct lap_ids ids = { -1, -1, -1, 0, 0 };
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
		case 'b':
			bench_burst = atoi(optarg);
			if (bench_burst < 1 || bench_burst > 4096)
				usage_error("--bench must be 1..4096");
			break;
		case 'w':
			wait_ms = parse_duration_ms(optarg);
			if (wait_ms < 0)
				usage_error("bad duration '%s'", optarg);
			break;
		case 'L': ids.local = parse_u32_opt(optarg, "--local-comm-id"); break;
		case 'R': ids.remote = parse_u32_opt(optarg, "--remote-comm-id"); break;
		case 'Q': ids.qpn = parse_u32_opt(optarg, "--remote-qpn") & 0xffffff; break;
		case 'A':
			alt_port = atoi(optarg);
			if (alt_port < 1)
				usage_error("bad --alt-port");
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
	ib = is_ib(dev, port);
	if (!to && !dgid_s) {
		if (ib)
			to = strcmp(dev, "ibsim0") ? "ibsim0" : "ibsim1";
		else
			to = strcmp(dev, "rxe0") ? "rxe0" : "rxe1";
	}
	if (ib) {
		union ibv_gid unused;

		if (!to)
			usage_error("--dgid is for RoCE; on InfiniBand use --to");
		ib_addr(dev, alt_port, &ids.alt_slid, &sgid);
		ib_addr(to, alt_port, &ids.alt_dlid, &dgid);
		ib_addr(to, port, &dlid, &unused);
		before = rx_counter(to, port, attr_s);
	} else {
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

	snd = (struct sender){ fd, agent, attr, ib, sidx, dlid, &sgid, &dgid, &ids, umad, attr_s, dg };
	if (bench_burst) {
		bench(&snd, to, port, count, bench_burst);
		to = NULL; /* the bench printed what was counted */
	}
	for (i = 0; !bench_burst && i < count; i++) {
		uint64_t tid = send_mad(&snd, i);

		if (ib)
			jline("{\"sent\":\"%s\",\"attr_id\":%d,\"pid\":%d,\"dev\":\"%s\",\"port\":%d,\"dlid\":%u,\"alt_slid\":%u,\"alt_dlid\":%u,\"sgid\":\"%s\",\"dgid\":\"%s\",\"tid\":%llu}",
			      attr == ATTR_LAP ? "LAP" : "APR", attr, getpid(), dev, port,
			      dlid, ids.alt_slid, ids.alt_dlid, sg, dg, (unsigned long long)tid);
		else
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
