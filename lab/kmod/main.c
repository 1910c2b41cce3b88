// SPDX-License-Identifier: GPL-2.0
/*
 * apmlab control interface, /sys/kernel/debug/apmlab/:
 *
 *   inject  write "DEV QPN EVENT [migrate]"  raise EVENT (name such as
 *                 path_mig, or number) on QP QPN of DEV; errors come back as
 *                 the write's errno: ENODEV no such device, ENOENT no such QP,
 *                 EOPNOTSUPP QP without event handler, EINVAL bad command,
 *                 else the errno of the migrate modify.
 *           read  the last injection as one JSON line.
 *   ulp     write "start [BEHAVIOR [DEV0 DEV1 [cm]]]" | "stop" | "behavior B"
 *                 BEHAVIOR: correct (default) | no-rearm | rearm-no-alt |
 *                 no-notify; devices default to rxe0 rxe1; "cm" connects
 *                 through ib_cm with an alternate path (IB ports only,
 *                 else EPROTONOSUPPORT) and calls ib_cm_notify(PATH_MIG) on
 *                 migration unless no-notify.
 *           read  JSON lines: {"running":..,"behavior":..}, then one per QP
 *                 (dev, qpn, peer_qpn, live qp_state and path_mig_state).
 *           write "bench-notify N"  the CM hook's benchmark: N calls of
 *                 ib_cm_notify(COMM_EST) on the --cm pair's established
 *                 client cm_id (-EISCONN, nothing changes), timed; ENOTCONN
 *                 without a --cm pair.
 *   bench   read  the last bench-notify run as one JSON line.
 *   log     read  events seen and modifies done, one JSON line each.
 *           write "clear"
 */
#include <linux/debugfs.h>
#include <linux/module.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include "apmlab.h"

#define CMD_MAX 128
#define MAX_WORDS 5

static struct dentry *dir;

/* Copies a command from userspace and splits it into words. */
static int read_cmd(const char __user *ubuf, size_t len, char *buf,
		    char **w, int *n)
{
	char *p;

	if (len >= CMD_MAX)
		return -EINVAL;
	if (copy_from_user(buf, ubuf, len))
		return -EFAULT;
	buf[len] = '\0';
	p = strim(buf);
	*n = 0;
	while (p && *p && *n < MAX_WORDS) {
		w[(*n)++] = strsep(&p, " \t\n");
		p = p ? skip_spaces(p) : NULL;
	}
	if (p && *p)
		return -E2BIG;
	return *n ? 0 : -EINVAL;
}

static ssize_t inject_write(struct file *f, const char __user *ubuf,
			    size_t len, loff_t *off)
{
	char buf[CMD_MAX], *w[MAX_WORDS];
	bool migrate = false;
	int n, ret, event;
	u32 qpn;

	ret = read_cmd(ubuf, len, buf, w, &n);
	if (ret)
		return ret;
	if (n < 3 || n > 4)
		return -EINVAL;
	if (n == 4) {
		if (strcmp(w[3], "migrate"))
			return -EINVAL;
		migrate = true;
	}
	if (kstrtou32(w[1], 0, &qpn))
		return -EINVAL;
	event = apmlab_event_parse(w[2]);
	if (event < 0)
		return event;
	ret = apmlab_inject(w[0], qpn, event, migrate);
	return ret ? ret : len;
}

static ssize_t ulp_write(struct file *f, const char __user *ubuf,
			 size_t len, loff_t *off)
{
	char buf[CMD_MAX], *w[MAX_WORDS];
	int n, ret, b = APMLAB_CORRECT;

	ret = read_cmd(ubuf, len, buf, w, &n);
	if (ret)
		return ret;
	if (!strcmp(w[0], "bench-notify") && n == 2) {
		u32 count;

		if (kstrtou32(w[1], 0, &count))
			return -EINVAL;
		ret = apmlab_ulp_bench_notify(count);
		return ret ? ret : len;
	}
	if (n >= 2) {
		b = apmlab_behavior_parse(w[1]);
		if (b < 0)
			return b;
	}
	if (!strcmp(w[0], "start") && (n == 1 || n == 2))
		ret = apmlab_ulp_start(b, "rxe0", "rxe1", false);
	else if (!strcmp(w[0], "start") && n == 4)
		ret = apmlab_ulp_start(b, w[2], w[3], false);
	else if (!strcmp(w[0], "start") && n == 5 && !strcmp(w[4], "cm"))
		ret = apmlab_ulp_start(b, w[2], w[3], true);
	else if (!strcmp(w[0], "stop") && n == 1)
		ret = apmlab_ulp_stop();
	else if (!strcmp(w[0], "behavior") && n == 2)
		ret = apmlab_ulp_set_behavior(b);
	else
		ret = -EINVAL;
	return ret ? ret : len;
}

static ssize_t log_write(struct file *f, const char __user *ubuf,
			 size_t len, loff_t *off)
{
	char buf[CMD_MAX], *w[MAX_WORDS];
	int n, ret;

	ret = read_cmd(ubuf, len, buf, w, &n);
	if (ret)
		return ret;
	if (n != 1 || strcmp(w[0], "clear"))
		return -EINVAL;
	apmlab_log_clear();
	return len;
}

#define SHOW(name, fn)							\
static int name##_show(struct seq_file *m, void *v)			\
{									\
	fn(m);								\
	return 0;							\
}									\
static int name##_open(struct inode *i, struct file *f)		\
{									\
	return single_open(f, name##_show, NULL);			\
}									\
static const struct file_operations name##_fops = {			\
	.owner = THIS_MODULE,						\
	.open = name##_open,						\
	.read = seq_read,						\
	.llseek = seq_lseek,						\
	.release = single_release,					\
	.write = name##_write,						\
}

SHOW(inject, apmlab_inject_show);
SHOW(ulp, apmlab_ulp_show);
SHOW(log, apmlab_log_show);

static int bench_show(struct seq_file *m, void *v)
{
	apmlab_bench_show(m);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(bench);

static int __init apmlab_init(void)
{
	int ret = apmlab_devs_init();

	if (ret)
		return ret;
	ret = apmlab_ulp_init();
	if (ret) {
		apmlab_devs_exit();
		return ret;
	}
	dir = debugfs_create_dir("apmlab", NULL);
	if (IS_ERR(dir)) {
		apmlab_ulp_exit();
		apmlab_devs_exit();
		return PTR_ERR(dir);
	}
	debugfs_create_file("inject", 0600, dir, NULL, &inject_fops);
	debugfs_create_file("ulp", 0600, dir, NULL, &ulp_fops);
	debugfs_create_file("log", 0600, dir, NULL, &log_fops);
	debugfs_create_file("bench", 0400, dir, NULL, &bench_fops);
	pr_info("apmlab: control files in /sys/kernel/debug/apmlab\n");
	return 0;
}

static void __exit apmlab_exit(void)
{
	debugfs_remove_recursive(dir);	/* waits for running file ops */
	apmlab_ulp_exit();
	apmlab_devs_exit();
}

module_init(apmlab_init);
module_exit(apmlab_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("apmwatch lab: inject QP async events, play a kernel ULP");
