/*
 * lab-ulp: drive the apmlab module's kernel ULP (a kernel RC QP pair that
 * reacts to PATH_MIG) through /sys/kernel/debug/apmlab/{ulp,log}.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common.h"

const char *prog = "lab-ulp";
static const char *ctl = "/sys/kernel/debug/apmlab";

static void usage(void)
{
	printf("usage: lab-ulp COMMAND [options]\n"
	       "\n"
	       "Drives the apmlab module's kernel ULP: a kernel RC QP pair DEV0 <-> DEV1\n"
	       "made through ib_verbs, armed (PATH_MIG_STATE=REARM), whose QP event\n"
	       "handler reacts to PATH_MIG from a workqueue.\n"
	       "\n"
	       "commands:\n"
	       "  start [--behavior B] [--dev0 D --dev1 D | --ib] [--cm]\n"
	       "                 make the pair, then print the status lines; --ib is\n"
	       "                 --dev0 ibsim0 --dev1 ibsim1 (InfiniBand: primary port 1,\n"
	       "                 alternate port 2 loaded at connect, then rearmed);\n"
	       "                 --cm connects through ib_cm with the alternate path in\n"
	       "                 the REQ (IB only) and calls ib_cm_notify(PATH_MIG) on\n"
	       "                 each migration; status then shows the comm IDs\n"
	       "  status         {\"running\":..,\"behavior\":..} then one JSON line per QP\n"
	       "                 (dev, qpn, peer_qpn, qp_state, path_mig_state)\n"
	       "  log [--clear]  events seen and modifies done, one JSON line each\n"
	       "                 (--clear: print, then clear)\n"
	       "  behavior B     change the behaviour of a running pair\n"
	       "  bench-notify N the CM hook's benchmark (a --cm pair): N calls of\n"
	       "                 ib_cm_notify(COMM_EST) on the established client cm_id\n"
	       "                 (-EISCONN, nothing changes), timed in chunks of 64;\n"
	       "                 prints {\"bench\":\"notify\",\"calls\":..,\"ns\":..,\n"
	       "                 \"best_chunk_ns_per_call\":..,\"ret\":..}"
	       "  stop           destroy the pair\n"
	       "\n"
	       "behaviours: correct (default: load a new alternate path, which RoCE\n"
	       "rejects with EINVAL and InfiniBand takes on the other port, then rearm)\n"
	       "| no-rearm | rearm-no-alt | no-notify (correct without ib_cm_notify)\n"
	       "\n"
	       "  --control DIR  the module's debugfs dir (default /sys/kernel/debug/apmlab)\n"
	       "  --help         this text\n");
}

static void ctl_write(const char *file, const char *cmd)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", ctl, file);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		die("cannot open %s: %s (is the apmlab module loaded and debugfs mounted?)",
		    path, strerror(errno));
	if (write(fd, cmd, strlen(cmd)) < 0) {
		int err = errno;

		if (err == EBUSY)
			die("'%s': the kernel ULP is already running", cmd);
		if (err == ENOENT && !strcmp(cmd, "stop"))
			die("the kernel ULP is not running");
		if (err == EPROTONOSUPPORT)
			die("'%s': --cm needs InfiniBand ports (ibsim0, ibsim1)", cmd);
		if (err == ENODEV)
			die("'%s': no such RDMA device", cmd);
		if (err == ENOTCONN)
			die("'%s': no --cm pair is running (lab-ulp start --ib --cm)", cmd);
		die("'%s' on %s failed: %s", cmd, path, strerror(err));
	}
	close(fd);
}

static void ctl_cat(const char *file)
{
	char path[512], buf[8192];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", ctl, file);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		die("cannot open %s: %s (is the apmlab module loaded and debugfs mounted?)",
		    path, strerror(errno));
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		fwrite(buf, 1, n, stdout);
	if (n < 0)
		die("read %s: %s", path, strerror(errno));
	fflush(stdout);
	close(fd);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "behavior", required_argument, NULL, 'b' },
		{ "dev0", required_argument, NULL, '0' },
		{ "dev1", required_argument, NULL, '1' },
		{ "ib", no_argument, NULL, 'i' },
		{ "cm", no_argument, NULL, 'm' },
		{ "clear", no_argument, NULL, 'C' },
		{ "control", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	const char *behavior = "correct", *dev0 = "rxe0", *dev1 = "rxe1", *cmd;
	char buf[256];
	int c, clear = 0, cm = 0;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'b':
			behavior = optarg;
			break;
		case '0':
			dev0 = optarg;
			break;
		case '1':
			dev1 = optarg;
			break;
		case 'i':
			dev0 = "ibsim0";
			dev1 = "ibsim1";
			break;
		case 'm':
			cm = 1;
			break;
		case 'C':
			clear = 1;
			break;
		case 'c':
			ctl = optarg;
			break;
		case 'h':
			usage();
			return 0;
		default:
			usage_error("bad arguments");
		}
	}
	if (optind >= argc)
		usage_error("missing command");
	cmd = argv[optind++];

	if (!strcmp(cmd, "start") && optind == argc) {
		if (strcmp(behavior, "correct") && strcmp(behavior, "no-rearm") &&
		    strcmp(behavior, "rearm-no-alt") && strcmp(behavior, "no-notify"))
			usage_error("unknown behavior '%s'", behavior);
		if (strlen(dev0) > 64 || strlen(dev1) > 64)
			usage_error("bad device name");
		snprintf(buf, sizeof(buf), "start %s %s %s%s", behavior, dev0, dev1,
			 cm ? " cm" : "");
		ctl_write("ulp", buf);
		ctl_cat("ulp");
	} else if (!strcmp(cmd, "status") && optind == argc) {
		ctl_cat("ulp");
	} else if (!strcmp(cmd, "log") && optind == argc) {
		ctl_cat("log");
		if (clear)
			ctl_write("log", "clear");
	} else if (!strcmp(cmd, "behavior") && optind + 1 == argc) {
		snprintf(buf, sizeof(buf), "behavior %s", argv[optind]);
		ctl_write("ulp", buf);
		ctl_cat("ulp");
	} else if (!strcmp(cmd, "bench-notify") && optind + 1 == argc) {
		char *end;
		unsigned long n;

		errno = 0;
		n = strtoul(argv[optind], &end, 10);
		if (errno || *end || end == argv[optind] || n < 1 || n > (1UL << 24))
			usage_error("bad count '%s' (1..%lu)", argv[optind], 1UL << 24);
		snprintf(buf, sizeof(buf), "bench-notify %lu", n);
		ctl_write("ulp", buf);
		ctl_cat("bench");
	} else if (!strcmp(cmd, "stop") && optind == argc) {
		ctl_write("ulp", "stop");
		ctl_cat("ulp");
	} else {
		usage_error("unknown command or arguments: %s", cmd);
	}
	return 0;
}
