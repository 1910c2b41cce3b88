// SPDX-License-Identifier: GPL-2.0
/*
 * lab-altport.so: an LD_PRELOAD library for the lab that corrects one
 * defect of an application's APM and records what it does (lab/progs/
 * README.md). Open MPI 4.1's openib loads its alternate path with
 * alt_ah_attr.port_num left as ibv_query_qp returned it (0 before any
 * alternate), and ib_uverbs refuses an alternate whose AH port differs from
 * alt_port_num (EINVAL). Wrapping libibverbs' ibv_modify_qp, this sets
 * alt_ah_attr.port_num to alt_port_num on every IBV_QP_ALT_PATH modify and
 * changes nothing else, so the rest of the application's APM (whether it
 * rearms, when) runs as written.
 *
 * On stderr, one JSON line per APM modify ({"altport":"modify",...}: the
 * device, QPN, mask, the AH port it had, the alternate, the result) and, at
 * exit, how often the process read its async events
 * ({"altport":"exit","async_event_reads":N}): ibv_get_async_event is wrapped
 * only to count.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <unistd.h>
#include <infiniband/verbs.h>

typedef int (*modify_fn)(struct ibv_qp *, struct ibv_qp_attr *, int);
typedef int (*async_fn)(struct ibv_context *, struct ibv_async_event *);

static int async_reads;

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	static modify_fn real;
	int had, ret, err;

	if (!real)
		real = (modify_fn)dlsym(RTLD_NEXT, "ibv_modify_qp");
	if (!real)
		return ENOSYS;
	if (!(mask & (IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE)))
		return real(qp, attr, mask);
	had = attr->alt_ah_attr.port_num;
	if (mask & IBV_QP_ALT_PATH)
		attr->alt_ah_attr.port_num = attr->alt_port_num;
	ret = real(qp, attr, mask);
	err = ret > 0 ? ret : (ret < 0 ? errno : 0);
	fprintf(stderr, "{\"altport\":\"modify\",\"pid\":%d,\"dev\":\"%s\",\"qpn\":%u,\"mask\":%d,"
		"\"alt_ah_port_was\":%d,\"alt_port\":%u,\"alt_dlid\":%u,\"mig_state\":%d,\"errno\":%d}\n",
		(int)getpid(), ibv_get_device_name(qp->context->device), qp->qp_num, mask, had,
		attr->alt_port_num, attr->alt_ah_attr.dlid, attr->path_mig_state, err);
	errno = err;
	return ret;
}

int ibv_get_async_event(struct ibv_context *ctx, struct ibv_async_event *ev)
{
	static async_fn real;

	if (!real)
		real = (async_fn)dlsym(RTLD_NEXT, "ibv_get_async_event");
	if (!real)
		return -1;
	__atomic_add_fetch(&async_reads, 1, __ATOMIC_RELAXED);
	return real(ctx, ev);
}

__attribute__((destructor)) static void report(void)
{
	fprintf(stderr, "{\"altport\":\"exit\",\"pid\":%d,\"async_event_reads\":%d}\n",
		(int)getpid(), __atomic_load_n(&async_reads, __ATOMIC_RELAXED));
}
