/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * QP lifetime: create (ib_create_qp_user, ib_create_qp_kernel; exit only,
 * the new QP is the return value) and destroy (ib_destroy_qp_user, entry
 * and exit joined).
 */
#ifndef APMWATCH_QP_LIFE_BPF_H
#define APMWATCH_QP_LIFE_BPF_H

/* ---- QP create ---- */

static __always_inline void qp_created(__u64 ret, __u64 ip)
{
	struct apm_record *r = new_record(APM_KIND_QP_CREATE, ip);
	if (!r)
		return;
	if (ret >= (__u64)-MAX_ERRNO) {
		r->ret = (__s32)ret;
	} else if (ret) {
		read_qp(r, (struct ib_qp *)ret);
	}
	emit(r);
}

SEC("fexit/ib_create_qp_user")
int BPF_PROG(fexit_qp_create)
{
	__u64 ret = 0;
	bpf_get_func_ret(ctx, &ret);
	qp_created(ret, bpf_get_func_ip(ctx));
	return 0;
}

SEC("kretprobe/ib_create_qp_user")
int BPF_KRETPROBE(kretprobe_qp_create, void *ret)
{
	qp_created((__u64)ret, kretprobe_ip(ctx));
	return 0;
}

/* ---- QP destroy: ib_destroy_qp_user(qp, udata) ---- */

static __always_inline void destroy_entry(struct ib_qp *qp, __u64 ip)
{
	struct apm_record *r = new_record(APM_KIND_QP_DESTROY, ip);
	if (!r)
		return;
	read_qp(r, qp);
	join_put(r, APM_SLOT_DESTROY);
}

SEC("fentry/ib_destroy_qp_user")
int BPF_PROG(fentry_destroy, struct ib_qp *qp)
{
	destroy_entry(qp, bpf_get_func_ip(ctx));
	return 0;
}

SEC("fexit/ib_destroy_qp_user")
int BPF_PROG(fexit_destroy)
{
	fexit_join(ctx, APM_SLOT_DESTROY);
	return 0;
}

SEC("kprobe/ib_destroy_qp_user")
int BPF_KPROBE(kprobe_destroy, struct ib_qp *qp)
{
	destroy_entry(qp, kprobe_ip(ctx));
	return 0;
}

SEC("kretprobe/ib_destroy_qp_user")
int BPF_KRETPROBE(kretprobe_destroy, int ret)
{
	join_done(APM_SLOT_DESTROY, ret);
	return 0;
}

#endif
