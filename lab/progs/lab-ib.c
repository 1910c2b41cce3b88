/*
 * lab-ib: drive the simulated InfiniBand fabric of the ibsim module through
 * /sys/kernel/debug/ibsim/ (ports, LID links, RC traffic) and show what the
 * driver sees.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common.h"

const char *prog = "lab-ib";
static const char *control = "/sys/kernel/debug/ibsim";

static void usage(void)
{
	printf("usage: lab-ib show | events\n"
	       "       lab-ib port --dev D --port P down|up\n"
	       "       lab-ib link --lid L down|up\n"
	       "       lab-ib lmc N\n"
	       "       lab-ib traffic on|off|poke [--dev D --qpn N]\n"
	       "       lab-ib poke [--dev D --qpn N]  (the same as traffic poke)\n"
	       "       lab-ib bench --dev D --qpn N COUNT\n"
	       "       lab-ib knob [NAME VALUE]\n"
	       "       lab-ib profile ibta|mlx5\n"
	       "       lab-ib qpn align|apart\n"
	       "\n"
	       "Drives the simulated InfiniBand HCA (ibsim0, ibsim1: two ports each,\n"
	       "LIDs 1,2 and 3,4 with LMC 0, one switch).\n"
	       "  show     ports (LID, state, link) and QPs (state, path-mig-state,\n"
	       "           primary and alternate port/DLID, packets) as the driver sees\n"
	       "           them, one JSON line each\n"
	       "  events   the last async events the driver raised, one JSON line each\n"
	       "  port     take port P of D DOWN (PORT_ERR on D only; a QP whose path\n"
	       "           crosses it notices when its requests' retries run out:\n"
	       "           it migrates if ARMED, else goes to ERR) or ACTIVE\n"
	       "  link     the switch stops (resumes) routing to LID L: paths to it fail\n"
	       "           as for a port, but no port event; with an LMC, only L of its\n"
	       "           port's LIDs\n"
	       "  lmc      every port gets 2^N LIDs (N 0..3), its base 1 << N apart\n"
	       "           (N 1: LIDs 2-3, 4-5 on ibsim0, 6-7, 8-9 on ibsim1), with a\n"
	       "           LID_CHANGE on each port, every LID routed again\n"
	       "  traffic  the simulated request stream on or off, for all QPs or one\n"
	       "           (a QP that posted a send is driven by its own sends only)\n"
	       "  poke     one request from every connected QP (or one)\n"
	       "  bench    COMM_EST COUNT times through one user QP's event handler,\n"
	       "           timed in chunks of 64 in the driver; prints\n"
	       "           {\"events\":..,\"ns\":..,\"best_chunk_ns_per_event\":..}\n"
	       "  knob     with no arguments, every firmware knob as NAME VALUE lines;\n"
	       "           with NAME VALUE, sets one: armed-modify refuse|accept,\n"
	       "           forced-event none|inside|after, alt-after-migration copy|zero,\n"
	       "           dead-alternate retry|pathmig-err, pm-latency 0|1500ms|3s,\n"
	       "           unloaded-alt-port 0|1\n"
	       "  profile  every knob at once: ibta (rdmavt's answers: refuse, inside,\n"
	       "           copy, retry, 0, 0; the default) or mlx5 (accept, none, zero,\n"
	       "           pathmig-err, 0, 0)\n"
	       "  qpn      align: both HCAs give their next QPs the same numbers (from\n"
	       "           the higher of their next QPNs), as two HCAs of one host do;\n"
	       "           apart: their next QPNs 0x1000 apart again (the default)\n"
	       "Changes print one JSON line once the events they caused were raised.\n"
	       "\n"
	       "  --control DIR   the module's debugfs dir (default /sys/kernel/debug/ibsim)\n"
	       "  --help          this text\n"
	       "\n"
	       "Exit: 0 done; 1 error (no module, no such device, QP or LID); 2 usage.\n");
}

static void cat(const char *name)
{
	char path[512], buf[4096];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", control, name);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		die("cannot open %s: %s (is the ibsim module loaded?)", path, strerror(errno));
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (fwrite(buf, 1, n, stdout) != (size_t)n)
			die("writing stdout: %s", strerror(errno));
	if (n < 0)
		die("reading %s: %s", path, strerror(errno));
	close(fd);
	fflush(stdout);
}

/* Writes one command; 0 or the errno the module answered. */
static int ctl_errno(const char *cmd)
{
	char path[512];
	int fd, err = 0;

	snprintf(path, sizeof(path), "%s/ctl", control);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		die("cannot open %s: %s (is the ibsim module loaded?)", path, strerror(errno));
	if (write(fd, cmd, strlen(cmd)) < 0)
		err = errno;
	close(fd);
	return err;
}

static void ctl(const char *cmd, const char *what)
{
	int err = ctl_errno(cmd);

	switch (err) {
	case 0:
		break;
	case ENODEV:
		die("%s: no such device (want ibsim0 or ibsim1)", what);
	case ENOENT:
		die("%s: no such QP or LID", what);
	default:
		die("%s: %s", what, strerror(err));
	}
}

/* A knob write: its errors name the knob, not a device or QP. */
static void knob_ctl(const char *cmd, const char *name, const char *value)
{
	int err = ctl_errno(cmd);

	if (err == ENOENT)
		usage_error("no knob named '%s' (lab-ib knob lists them)", name);
	if (err == EINVAL)
		usage_error("knob %s has no value '%s'", name, value);
	if (err)
		die("knob %s: %s", name, strerror(err));
}

static int updown(const char *s)
{
	if (!strcmp(s, "up") || !strcmp(s, "on"))
		return 1;
	if (!strcmp(s, "down") || !strcmp(s, "off"))
		return 0;
	return -1;
}

static int checked_uint(const char *s, const char *name)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 0);
	if (errno || *end || end == s || v < 0 || v > 0xffffff)
		usage_error("bad %s '%s'", name, s);
	return (int)v;
}

static int checked_dev(const char *s)
{
	if (strcmp(s, "ibsim0") && strcmp(s, "ibsim1"))
		die("no ibsim device named %s (want ibsim0 or ibsim1)", s);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dev", required_argument, NULL, 'd' },
		{ "port", required_argument, NULL, 'p' },
		{ "lid", required_argument, NULL, 'l' },
		{ "qpn", required_argument, NULL, 'q' },
		{ "control", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	const char *dev = NULL, *verb, *arg = NULL, *arg2 = NULL;
	int c, port = -1, lid = -1, qpn = -1, up;
	char cmd[160], what[160];

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd': dev = optarg; break;
		case 'p': port = checked_uint(optarg, "port"); break;
		case 'l': lid = checked_uint(optarg, "lid"); break;
		case 'q': qpn = checked_uint(optarg, "qpn"); break;
		case 'c': control = optarg; break;
		case 'h': usage(); return 0;
		default: usage_error("bad arguments");
		}
	}
	if (optind >= argc)
		usage_error("a command is required");
	verb = argv[optind++];
	if (optind < argc)
		arg = argv[optind++];
	if (optind < argc && !strcmp(verb, "knob"))
		arg2 = argv[optind++];
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	if (dev && strlen(dev) > 32)
		usage_error("bad device name");

	if (!strcmp(verb, "show") || !strcmp(verb, "events")) {
		if (arg)
			usage_error("%s takes no argument", verb);
		cat(verb);
		return 0;
	}
	if (!strcmp(verb, "port")) {
		if (!dev || port < 0 || !arg || (up = updown(arg)) < 0)
			usage_error("port needs --dev D --port P and down|up");
		checked_dev(dev);
		snprintf(cmd, sizeof(cmd), "port %s %d %s", dev, port, up ? "up" : "down");
		snprintf(what, sizeof(what), "port %s/%d", dev, port);
		ctl(cmd, what);
		jline("{\"port\":%d,\"dev\":\"%s\",\"state\":\"%s\",\"ret\":0}",
		      port, dev, up ? "up" : "down");
		return 0;
	}
	if (!strcmp(verb, "link")) {
		if (lid < 0 || !arg || (up = updown(arg)) < 0)
			usage_error("link needs --lid L and down|up");
		snprintf(cmd, sizeof(cmd), "link %d %s", lid, up ? "up" : "down");
		snprintf(what, sizeof(what), "LID %d", lid);
		ctl(cmd, what);
		jline("{\"link\":%d,\"state\":\"%s\",\"ret\":0}", lid, up ? "up" : "down");
		return 0;
	}
	if (!strcmp(verb, "qpn")) {
		if (!arg || (strcmp(arg, "align") && strcmp(arg, "apart")))
			usage_error("qpn needs align or apart");
		snprintf(cmd, sizeof(cmd), "qpn %s", arg);
		ctl(cmd, "qpn");
		jline("{\"qpn\":\"%s\",\"ret\":0}", arg);
		return 0;
	}
	if (!strcmp(verb, "lmc")) {
		int n = arg ? checked_uint(arg, "lmc") : -1;

		if (n < 0 || n > 3)
			usage_error("lmc needs N, 0 to 3");
		snprintf(cmd, sizeof(cmd), "lmc %d", n);
		ctl(cmd, "lmc");
		jline("{\"lmc\":%d,\"ret\":0}", n);
		return 0;
	}
	if (!strcmp(verb, "traffic") || !strcmp(verb, "poke")) {
		int poke = !strcmp(verb, "poke") || (arg && !strcmp(arg, "poke"));

		if (!strcmp(verb, "traffic") && poke)
			arg = NULL; /* traffic poke: the same as poke */

		if (!poke && (!arg || (strcmp(arg, "on") && strcmp(arg, "off"))))
			usage_error("traffic needs on|off|poke");
		if (poke && arg)
			usage_error("poke takes no argument");
		if ((qpn < 0) != (dev == NULL))
			usage_error("--dev and --qpn go together");
		if (dev) {
			checked_dev(dev);
			snprintf(what, sizeof(what), "QP %d on %s", qpn, dev);
		} else {
			snprintf(what, sizeof(what), "%s", verb);
		}
		if (poke && dev)
			snprintf(cmd, sizeof(cmd), "poke %s %d", dev, qpn);
		else if (poke)
			snprintf(cmd, sizeof(cmd), "poke");
		else if (dev)
			snprintf(cmd, sizeof(cmd), "traffic %s %s %d", arg, dev, qpn);
		else
			snprintf(cmd, sizeof(cmd), "traffic %s", arg);
		ctl(cmd, what);
		if (dev)
			jline("{\"%s\":\"%s\",\"dev\":\"%s\",\"qpn\":%d,\"ret\":0}",
			      verb, poke ? "sent" : arg, dev, qpn);
		else
			jline("{\"%s\":\"%s\",\"ret\":0}", verb, poke ? "sent" : arg);
		return 0;
	}
	if (!strcmp(verb, "knob")) {
		if (!arg) {
			cat("knobs");
			return 0;
		}
		if (!arg2)
			usage_error("knob needs NAME VALUE (or nothing, to list them)");
		if (strlen(arg) > 32 || strlen(arg2) > 32)
			usage_error("bad knob '%s'", arg);
		snprintf(cmd, sizeof(cmd), "knob %s %s", arg, arg2);
		knob_ctl(cmd, arg, arg2);
		jline("{\"knob\":\"%s\",\"value\":\"%s\",\"ret\":0}", arg, arg2);
		return 0;
	}
	if (!strcmp(verb, "profile")) {
		if (!arg || (strcmp(arg, "ibta") && strcmp(arg, "mlx5")))
			usage_error("profile needs ibta or mlx5");
		snprintf(cmd, sizeof(cmd), "profile %s", arg);
		ctl(cmd, "profile");
		jline("{\"profile\":\"%s\",\"ret\":0}", arg);
		return 0;
	}
	if (!strcmp(verb, "bench")) {
		char *end;
		unsigned long n;

		if (!dev || qpn < 0 || !arg)
			usage_error("bench needs --dev D --qpn N and a count");
		errno = 0;
		n = strtoul(arg, &end, 10);
		if (errno || *end || end == arg || n < 1 || n > (1UL << 24))
			usage_error("bad count '%s' (1..%lu)", arg, 1UL << 24);
		checked_dev(dev);
		snprintf(cmd, sizeof(cmd), "bench %s %d %lu", dev, qpn, n);
		snprintf(what, sizeof(what), "QP %d on %s (a user QP?)", qpn, dev);
		ctl(cmd, what);
		cat("bench");
		return 0;
	}
	usage_error("unknown command '%s'", verb);
}
