/*
 * The raw uverbs ABI (write() on /dev/infiniband/uverbsN): enough for RC QPs
 * on a device whose queues libibverbs cannot make (ibsim: its rxe provider
 * opens it, but ibsim's CQs and QPs are not rxe's mmap'ed queues). Each call returns 0 or
 * a negative errno.
 */
#ifndef LAB_UVERBS_H
#define LAB_UVERBS_H

#include <stdint.h>
#include <rdma/ib_user_verbs.h>

struct uv_dev {
	const char *name;
	int fd, async_fd;
	uint32_t pd, cq;
	uint32_t srq;		/* the device's SRQ handle, when has_srq */
	int has_srq;
	int uc;			/* uv_create_rc_qp makes UC QPs instead */
};

/* Opens the uverbs device of RDMA device name, gets a context, a PD, a CQ.
 * uv_create_rc_qp attaches the QP to the device's SRQ once one was made. */
int uv_open(struct uv_dev *d, const char *name);
int uv_create_rc_qp(struct uv_dev *d, uint64_t user_handle, uint32_t *handle,
		    uint32_t *qpn);
/* A shared receive queue for the device's later QPs (d->srq). */
int uv_create_srq(struct uv_dev *d);
int uv_modify_qp(struct uv_dev *d, struct ib_uverbs_modify_qp *m);
int uv_query_qp(struct uv_dev *d, uint32_t handle, struct ib_uverbs_query_qp_resp *r);
int uv_destroy_qp(struct uv_dev *d, uint32_t handle);
/* Polls up to n (at most 8) completions of the device's CQ; count or -errno. */
int uv_poll_cq(struct uv_dev *d, struct ib_uverbs_wc *wc, int n);

/* sysfs: the LID of a port (0 if unknown) and whether it is ACTIVE. */
unsigned int uv_port_lid(const char *dev, int port);
int uv_port_active(const char *dev, int port);

#endif
