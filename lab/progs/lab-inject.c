/*
 * lab-inject: ask the apmlab module to raise an async event on a QP, as an
 * HCA would, through /sys/kernel/debug/apmlab/inject.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common.h"

const char *prog = "lab-inject";

static void usage(void)
{
	printf("usage: lab-inject --dev D --qpn N --event E [--migrate]\n"
	       "\n"
	       "Raises async event E on QP N of RDMA device D through the QP's own\n"
	       "event handler (the apmlab module plays the HCA). The owner sees it as\n"
	       "an ibv async event (user QP) or in its QP event handler (kernel QP).\n"
	       "Prints the module's record of the injection as one JSON line.\n"
	       "\n"
	       "  --dev D       RDMA device name, e.g. rxe0\n"
	       "  --qpn N       QP number (decimal or 0x hex)\n"
	       "  --event E     path_mig | path_mig_err | comm_est | any ib_event_type\n"
	       "                name (qp_fatal, sq_drained, ...) or number 0..19\n"
	       "  --migrate     first set path_mig_state=MIGRATED with ib_modify_qp\n"
	       "                (RTS->RTS), as the hardware does on a failover\n"
	       "  --control DIR the module's debugfs dir (default /sys/kernel/debug/apmlab)\n"
	       "  --help        this text\n"
	       "\n"
	       "Exit: 0 done; 1 error (no module, no device, no such QP, modify failed).\n");
}

static const char *explain(int err, const char *dev, const char *qpn, int migrate)
{
	static char buf[256];

	switch (err) {
	case ENODEV:
		snprintf(buf, sizeof(buf), "no RDMA device named %s", dev);
		break;
	case ENOENT:
		snprintf(buf, sizeof(buf), "no QP %s on %s", qpn, dev);
		break;
	case EOPNOTSUPP:
		snprintf(buf, sizeof(buf), "QP %s on %s has no event handler", qpn, dev);
		break;
	default:
		snprintf(buf, sizeof(buf), "%s failed: %s",
			 migrate ? "ib_modify_qp(PATH_MIG_STATE=MIGRATED)" : "injection",
			 strerror(err));
	}
	return buf;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dev", required_argument, NULL, 'd' },
		{ "qpn", required_argument, NULL, 'q' },
		{ "event", required_argument, NULL, 'e' },
		{ "migrate", no_argument, NULL, 'm' },
		{ "control", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	const char *dev = NULL, *qpn = NULL, *ctl = "/sys/kernel/debug/apmlab";
	char path[512], cmd[256], out[1024], *end;
	int c, event = -1, migrate = 0, fd;
	ssize_t n;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			dev = optarg;
			break;
		case 'q':
			qpn = optarg;
			strtoul(qpn, &end, 0);
			if (!*qpn || *end)
				usage_error("bad QPN '%s'", qpn);
			break;
		case 'e':
			event = event_parse(optarg);
			if (event < 0)
				usage_error("unknown event '%s'", optarg);
			break;
		case 'm':
			migrate = 1;
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
	if (!dev || !qpn || event < 0)
		usage_error("--dev, --qpn and --event are required");
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);

	snprintf(path, sizeof(path), "%s/inject", ctl);
	fd = open(path, O_RDWR);
	if (fd < 0)
		die("cannot open %s: %s (is the apmlab module loaded and debugfs mounted?)",
		    path, strerror(errno));
	snprintf(cmd, sizeof(cmd), "%s %s %d%s", dev, qpn, event,
		 migrate ? " migrate" : "");
	if (write(fd, cmd, strlen(cmd)) < 0)
		die("%s", explain(errno, dev, qpn, migrate));
	if (lseek(fd, 0, SEEK_SET) < 0)
		die("lseek %s: %s", path, strerror(errno));
	n = read(fd, out, sizeof(out) - 1);
	if (n < 0)
		die("read %s: %s", path, strerror(errno));
	out[n] = '\0';
	fputs(out, stdout);
	close(fd);
	return 0;
}
