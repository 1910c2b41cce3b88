// SPDX-License-Identifier: GPL-2.0
/*
 * Control interface, /sys/kernel/debug/ibsim/:
 *
 *   ctl     write one command; errors come back as the write's errno
 *             port DEV PORT down|up   take a port DOWN (PORT_ERR, and every
 *                                     QP whose primary crosses it fails over
 *                                     or fails) or back ACTIVE (PORT_ACTIVE)
 *             link LID down|up        the switch stops (resumes) routing to
 *                                     LID (one LID of a port's range, lid.c):
 *                                     no port event, paths to it fail
 *             lmc N                   every port gets 2^N LIDs (0..3), renumbered
 *                                     from 1 << N, with LID_CHANGE (lid.c)
 *             traffic on|off [DEV QPN]  simulated RC traffic, global or one QP
 *             poke [DEV QPN]          one packet from every QP (or one)
 *             bench DEV QPN N         COMM_EST N times through one user QP's
 *                                     event handler, timed (bench.c)
 *             knob NAME VALUE         a firmware knob (knob.c); ENOENT no
 *                                     such knob, EINVAL no such value
 *             profile ibta|mlx5       every knob at once
 *             qpn align|apart         both HCAs number their next QPs alike
 *                                     (each from the higher of their next
 *                                     QPNs), as separate HCAs of one host
 *                                     do; apart: 0x1000 apart again
 *           DEV is ibsim0 or ibsim1. ENODEV no such device, ENOENT no such
 *           QP or LID, EINVAL bad command. A write returns once the events
 *           it caused have been raised.
 *   show    read  JSON lines: {"traffic":..}, one per port, one per QP
 *   events  read  JSON lines: the last 256 async events raised
 *   bench   read  one JSON line: the last bench run
 *   knobs   read  one line per knob: NAME VALUE
 */
#include <linux/debugfs.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include "ibsim.h"

#define CMD_MAX 128
#define MAX_WORDS 5

static struct dentry *dir;

static int split(char *buf, char **w)
{
	char *p = strim(buf);
	int n = 0;

	while (p && *p) {
		if (n == MAX_WORDS)
			return -E2BIG;
		w[n++] = strsep(&p, " \t\n");
		p = p ? skip_spaces(p) : NULL;
	}
	return n;
}

static int parse_dev(const char *s)
{
	if (!strcmp(s, "ibsim0"))
		return 0;
	if (!strcmp(s, "ibsim1"))
		return 1;
	return -ENODEV;
}

static int parse_updown(const char *s, bool *up)
{
	if (!strcmp(s, "up") || !strcmp(s, "on"))
		*up = true;
	else if (!strcmp(s, "down") || !strcmp(s, "off"))
		*up = false;
	else
		return -EINVAL;
	return 0;
}

/* "DEV QPN" at w[0], w[1] */
static int parse_qp(char **w, int *dev, int *qpn)
{
	u32 n;

	*dev = parse_dev(w[0]);
	if (*dev < 0)
		return *dev;
	if (kstrtou32(w[1], 0, &n) || n > INT_MAX)
		return -EINVAL;
	*qpn = n;
	return 0;
}

static int run(char **w, int n)
{
	int dev = -1, qpn = -1, ret;
	bool up;
	u32 v;

	if (!strcmp(w[0], "port") && n == 4) {
		dev = parse_dev(w[1]);
		if (dev < 0)
			return dev;
		if (kstrtou32(w[2], 0, &v) || parse_updown(w[3], &up))
			return -EINVAL;
		return ibsim_port_set(dev, v, up);
	}
	if (!strcmp(w[0], "link") && n == 3) {
		if (kstrtou32(w[1], 0, &v) || parse_updown(w[2], &up))
			return -EINVAL;
		return ibsim_link_set(v, up);
	}
	if (!strcmp(w[0], "lmc") && n == 2) {
		if (kstrtou32(w[1], 0, &v))
			return -EINVAL;
		return ibsim_lmc_set(v);
	}
	if (!strcmp(w[0], "traffic") && (n == 2 || n == 4)) {
		if (parse_updown(w[1], &up))
			return -EINVAL;
		if (n == 4) {
			ret = parse_qp(w + 2, &dev, &qpn);
			if (ret)
				return ret;
		}
		return ibsim_traffic_set(dev, qpn, up);
	}
	if (!strcmp(w[0], "poke") && (n == 1 || n == 3)) {
		if (n == 3) {
			ret = parse_qp(w + 1, &dev, &qpn);
			if (ret)
				return ret;
		}
		return ibsim_poke(dev, qpn);
	}
	if (!strcmp(w[0], "knob") && n == 3)
		return ibsim_knob_set(w[1], w[2]);
	if (!strcmp(w[0], "profile") && n == 2)
		return ibsim_profile_set(w[1]);
	if (!strcmp(w[0], "qpn") && n == 2 && !strcmp(w[1], "align"))
		return ibsim_qpn_align(false);
	if (!strcmp(w[0], "qpn") && n == 2 && !strcmp(w[1], "apart"))
		return ibsim_qpn_align(true);
	if (!strcmp(w[0], "bench") && n == 4) {
		ret = parse_qp(w + 1, &dev, &qpn);
		if (ret)
			return ret;
		if (kstrtou32(w[3], 0, &v))
			return -EINVAL;
		return ibsim_bench_events(dev, qpn, v);
	}
	return -EINVAL;
}

static ssize_t ctl_write(struct file *f, const char __user *ubuf, size_t len,
			 loff_t *off)
{
	char buf[CMD_MAX], *w[MAX_WORDS];
	int n, ret;

	if (len >= CMD_MAX)
		return -EINVAL;
	if (copy_from_user(buf, ubuf, len))
		return -EFAULT;
	buf[len] = '\0';
	n = split(buf, w);
	if (n <= 0)
		return n ? n : -EINVAL;
	ret = run(w, n);
	return ret ? ret : len;
}

static int show_show(struct seq_file *m, void *v)
{
	ibsim_show(m);
	return 0;
}

static int events_show(struct seq_file *m, void *v)
{
	ibsim_events_show(m);
	return 0;
}

static int bench_show(struct seq_file *m, void *v)
{
	ibsim_bench_show(m);
	return 0;
}

static int knobs_show(struct seq_file *m, void *v)
{
	ibsim_knobs_show(m);
	return 0;
}

static int ctl_show(struct seq_file *m, void *v)
{
	seq_puts(m, "port DEV PORT down|up\nlink LID down|up\nlmc N\ntraffic on|off [DEV QPN]\npoke [DEV QPN]\nbench DEV QPN N\nknob NAME VALUE\nprofile ibta|mlx5\nqpn align|apart\n");
	return 0;
}

DEFINE_SHOW_ATTRIBUTE(show);
DEFINE_SHOW_ATTRIBUTE(events);
DEFINE_SHOW_ATTRIBUTE(bench);
DEFINE_SHOW_ATTRIBUTE(knobs);

static int ctl_open(struct inode *i, struct file *f)
{
	return single_open(f, ctl_show, NULL);
}

static const struct file_operations ctl_fops = {
	.owner = THIS_MODULE,
	.open = ctl_open,
	.read = seq_read,
	.llseek = seq_lseek,
	.release = single_release,
	.write = ctl_write,
};

int ibsim_ctl_init(void)
{
	dir = debugfs_create_dir("ibsim", NULL);
	if (IS_ERR(dir))
		return PTR_ERR(dir);
	debugfs_create_file("ctl", 0600, dir, NULL, &ctl_fops);
	debugfs_create_file("show", 0400, dir, NULL, &show_fops);
	debugfs_create_file("events", 0400, dir, NULL, &events_fops);
	debugfs_create_file("bench", 0400, dir, NULL, &bench_fops);
	debugfs_create_file("knobs", 0400, dir, NULL, &knobs_fops);
	return 0;
}

void ibsim_ctl_exit(void)
{
	debugfs_remove_recursive(dir);
}
