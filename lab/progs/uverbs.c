/* The raw uverbs ABI: legacy write() commands (see uverbs.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include "uverbs.h"

/* Sends one command: header, then body (whose "response" points at resp). */
static int uv_cmd(int fd, uint32_t cmd, const void *body, size_t in, size_t out)
{
	char buf[512];
	struct ib_uverbs_cmd_hdr *h = (struct ib_uverbs_cmd_hdr *)buf;
	size_t len = sizeof(*h) + in;

	if (len > sizeof(buf) || len % 4 || out % 4)
		return -EINVAL;
	h->command = cmd;
	h->in_words = len / 4;
	h->out_words = out / 4;
	memcpy(buf + sizeof(*h), body, in);
	if (write(fd, buf, len) != (ssize_t)len)
		return -errno;
	return 0;
}

static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");

	if (!f)
		return -errno;
	if (!fgets(buf, len, f)) {
		fclose(f);
		return -EIO;
	}
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

/* /sys/class/infiniband_verbs/uverbsN/ibdev == name -> /dev/infiniband/uverbsN */
static int find_uverbs(const char *name, char *path, size_t len)
{
	DIR *d = opendir("/sys/class/infiniband_verbs");
	struct dirent *e;
	char p[300], buf[128];
	int ret = -ENODEV;

	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "uverbs", 6))
			continue;
		snprintf(p, sizeof(p), "/sys/class/infiniband_verbs/%s/ibdev", e->d_name);
		if (read_line(p, buf, sizeof(buf)) == 0 && !strcmp(buf, name)) {
			snprintf(path, len, "/dev/infiniband/%s", e->d_name);
			ret = 0;
			break;
		}
	}
	closedir(d);
	return ret;
}

int uv_open(struct uv_dev *d, const char *name)
{
	struct ib_uverbs_get_context gc = {};
	struct ib_uverbs_get_context_resp gcr = {};
	struct ib_uverbs_alloc_pd pd = {};
	struct ib_uverbs_alloc_pd_resp pdr = {};
	struct ib_uverbs_create_cq cq = {};
	struct ib_uverbs_create_cq_resp cqr = {};
	char path[300];
	int ret;

	d->name = name;
	ret = find_uverbs(name, path, sizeof(path));
	if (ret)
		return ret;
	d->fd = open(path, O_RDWR | O_CLOEXEC);
	if (d->fd < 0)
		return -errno;
	gc.response = (uintptr_t)&gcr;
	ret = uv_cmd(d->fd, IB_USER_VERBS_CMD_GET_CONTEXT, &gc, sizeof(gc), sizeof(gcr));
	if (ret)
		return ret;
	d->async_fd = gcr.async_fd;
	pd.response = (uintptr_t)&pdr;
	ret = uv_cmd(d->fd, IB_USER_VERBS_CMD_ALLOC_PD, &pd, sizeof(pd), sizeof(pdr));
	if (ret)
		return ret;
	d->pd = pdr.pd_handle;
	cq.response = (uintptr_t)&cqr;
	cq.cqe = 256;
	cq.comp_channel = -1;
	ret = uv_cmd(d->fd, IB_USER_VERBS_CMD_CREATE_CQ, &cq, sizeof(cq), sizeof(cqr));
	if (ret)
		return ret;
	d->cq = cqr.cq_handle;
	return 0;
}

int uv_create_rc_qp(struct uv_dev *d, uint64_t user_handle, uint32_t *handle,
		    uint32_t *qpn)
{
	struct ib_uverbs_create_qp c = {};
	struct ib_uverbs_create_qp_resp r = {};
	int ret;

	c.response = (uintptr_t)&r;
	c.user_handle = user_handle;
	c.pd_handle = d->pd;
	c.send_cq_handle = d->cq;
	c.recv_cq_handle = d->cq;
	c.max_send_wr = 16;
	c.max_recv_wr = 16;
	c.max_send_sge = 1;
	c.max_recv_sge = 1;
	c.sq_sig_all = 1;
	c.qp_type = d->uc ? IBV_QPT_UC : IBV_QPT_RC;	/* the kernel ABI uses the same numbers */
	if (d->has_srq) {
		c.srq_handle = d->srq;
		c.is_srq = 1;
	}
	ret = uv_cmd(d->fd, IB_USER_VERBS_CMD_CREATE_QP, &c, sizeof(c), sizeof(r));
	if (ret)
		return ret;
	*handle = r.qp_handle;
	*qpn = r.qpn;
	return 0;
}

int uv_create_srq(struct uv_dev *d)
{
	struct ib_uverbs_create_srq c = {};
	struct ib_uverbs_create_srq_resp r = {};
	int ret;

	c.response = (uintptr_t)&r;
	c.pd_handle = d->pd;
	c.max_wr = 64;
	c.max_sge = 1;
	ret = uv_cmd(d->fd, IB_USER_VERBS_CMD_CREATE_SRQ, &c, sizeof(c), sizeof(r));
	if (ret)
		return ret;
	d->srq = r.srq_handle;
	d->has_srq = 1;
	return 0;
}

int uv_modify_qp(struct uv_dev *d, struct ib_uverbs_modify_qp *m)
{
	return uv_cmd(d->fd, IB_USER_VERBS_CMD_MODIFY_QP, m, sizeof(*m), 0);
}

int uv_query_qp(struct uv_dev *d, uint32_t handle, struct ib_uverbs_query_qp_resp *r)
{
	struct ib_uverbs_query_qp q = {};

	memset(r, 0, sizeof(*r));
	q.response = (uintptr_t)r;
	q.qp_handle = handle;
	q.attr_mask = 0x1fffff;
	return uv_cmd(d->fd, IB_USER_VERBS_CMD_QUERY_QP, &q, sizeof(q), sizeof(*r));
}

int uv_destroy_qp(struct uv_dev *d, uint32_t handle)
{
	struct ib_uverbs_destroy_qp q = {};
	struct ib_uverbs_destroy_qp_resp r = {};

	q.response = (uintptr_t)&r;
	q.qp_handle = handle;
	return uv_cmd(d->fd, IB_USER_VERBS_CMD_DESTROY_QP, &q, sizeof(q), sizeof(r));
}

int uv_poll_cq(struct uv_dev *d, struct ib_uverbs_wc *wc, int n)
{
	uint64_t buf[(sizeof(struct ib_uverbs_poll_cq_resp) +
		      8 * sizeof(struct ib_uverbs_wc)) / 8 + 1];
	struct ib_uverbs_poll_cq_resp *r = (struct ib_uverbs_poll_cq_resp *)buf;
	struct ib_uverbs_poll_cq p = {};
	int ret, i;

	if (n > 8)
		n = 8;
	memset(buf, 0, sizeof(buf));
	p.response = (uintptr_t)buf;
	p.cq_handle = d->cq;
	p.ne = n;
	ret = uv_cmd(d->fd, IB_USER_VERBS_CMD_POLL_CQ, &p, sizeof(p),
		     sizeof(*r) + n * sizeof(struct ib_uverbs_wc));
	if (ret)
		return ret;
	for (i = 0; i < (int)r->count && i < n; i++)
		memcpy(&wc[i], (char *)buf + sizeof(*r) + i * sizeof(struct ib_uverbs_wc),
		       sizeof(struct ib_uverbs_wc));
	return i;
}

unsigned int uv_port_lid(const char *dev, int port)
{
	char p[300], buf[64];

	snprintf(p, sizeof(p), "/sys/class/infiniband/%s/ports/%d/lid", dev, port);
	if (read_line(p, buf, sizeof(buf)))
		return 0;
	return (unsigned int)strtoul(buf, NULL, 0);
}

int uv_port_active(const char *dev, int port)
{
	char p[300], buf[64];

	snprintf(p, sizeof(p), "/sys/class/infiniband/%s/ports/%d/state", dev, port);
	return read_line(p, buf, sizeof(buf)) == 0 && strstr(buf, "ACTIVE") != NULL;
}
