// SPDX-License-Identifier: GPL-2.0
/*
 * Play the HCA: raise an affiliated async event on (device, qpn) through the
 * QP's own event handler, as a driver does. With "migrate", first set
 * path_mig_state to MIGRATED through ib_modify_qp (RTS->RTS), as the hardware
 * does when it fails over.
 *
 * Lookup: apmlab_device_get() holds the device; rdma_restrack_get_byid()
 * holds the QP's restrack entry (RDMA_RESTRACK_QP ids are the QPN for every
 * QP type except SMI/GSI, whose id is qpn | port << 24; both functions are
 * exported by ib_core in 6.1 and 6.12). Holding the entry delays the QP's
 * kfree in ib_destroy_qp_user() (rdma_restrack_del waits for it), not the
 * driver's destroy: injecting while the owner destroys that same QP is racy.
 */
#include <linux/mutex.h>
#include <rdma/restrack.h>
#include "apmlab.h"

static DEFINE_MUTEX(inject_lock);

/* The last injection, shown by reading debugfs "inject". */
static struct {
	bool valid;
	char dev[IB_DEVICE_NAME_MAX];
	u32 qpn;
	int event;
	bool migrate;
	int modify_ret;
	int ret;
	bool user;
	int qp_type;
} last;

static int raise_on(struct ib_qp *qp, int event, bool migrate)
{
	struct ib_qp_attr attr = {};
	struct ib_event ev = {};

	if (!qp->event_handler)
		return -EOPNOTSUPP;
	if (migrate) {
		attr.path_mig_state = IB_MIG_MIGRATED;
		last.modify_ret = ib_modify_qp(qp, &attr, IB_QP_PATH_MIG_STATE);
		if (last.modify_ret)
			return last.modify_ret;
	}
	ev.device = qp->device;
	ev.element.qp = qp;
	ev.event = event;
	qp->event_handler(&ev, qp->qp_context);
	return 0;
}

int apmlab_inject(const char *devname, u32 qpn, int event, bool migrate)
{
	struct rdma_restrack_entry *res;
	struct ib_device *dev;
	struct ib_qp *qp;
	int ret;

	mutex_lock(&inject_lock);
	memset(&last, 0, sizeof(last));
	last.valid = true;
	strscpy(last.dev, devname, sizeof(last.dev));
	last.qpn = qpn;
	last.event = event;
	last.migrate = migrate;
	last.qp_type = -1;

	dev = apmlab_device_get(devname);
	if (!dev) {
		ret = -ENODEV;
		goto out;
	}
	res = rdma_restrack_get_byid(dev, RDMA_RESTRACK_QP, qpn);
	if (IS_ERR(res)) {
		ret = PTR_ERR(res);	/* -ENOENT: no such QP */
		goto put_dev;
	}
	qp = container_of(res, struct ib_qp, res);
	last.user = !rdma_is_kernel_res(res);
	last.qp_type = qp->qp_type;
	ret = raise_on(qp, event, migrate);
	rdma_restrack_put(res);
put_dev:
	ib_device_put(dev);
out:
	last.ret = ret;
	mutex_unlock(&inject_lock);
	return ret;
}

void apmlab_inject_show(struct seq_file *m)
{
	mutex_lock(&inject_lock);
	if (!last.valid) {
		seq_puts(m, "{}\n");
	} else {
		seq_printf(m, "{\"dev\":\"%s\",\"qpn\":%u,\"event\":\"%s\",\"event_num\":%d,",
			   last.dev, last.qpn, apmlab_event_name(last.event),
			   last.event);
		seq_printf(m, "\"migrate\":%s,\"modify_ret\":%d,\"ret\":%d,\"owner\":\"%s\",\"qp_type\":%d}\n",
			   last.migrate ? "true" : "false", last.modify_ret,
			   last.ret, last.user ? "user" : "kernel", last.qp_type);
	}
	mutex_unlock(&inject_lock);
}
