/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * A modify of the APM attributes that ib_uverbs refuses itself. Its
 * modify_qp (uverbs_cmd.c) checks the command before the verbs layer: the
 * ports, an alternate whose address vector's port differs from
 * alt_port_num, the states. A command refused there never reaches
 * ib_modify_qp_with_udata, so the modify hooks never see it. Three hooks
 * catch it (fentry + fexit, else kprobe + kretprobe):
 *   ib_uverbs_modify_qp, ib_uverbs_ex_modify_qp  the command, read from
 *       the caller's buffer at the entry (only one that names IB_QP_ALT_PATH
 *       or IB_QP_PATH_MIG_STATE is kept, map uverbs_cmd), its result at the
 *       exit;
 *   rdma_lookup_get_uobject  the QP its handle names (the command's first
 *       lookup).
 * The modify hooks' exits drop the kept command: a command that reached
 * the verbs layer has its record there. One that did not and failed, with
 * its QP found, becomes a modify record named after the uverbs function,
 * its fields the command's; r->port carries the alternate address vector's
 * port (alt_dest.port_num), the one ib_uverbs compares to alt_port_num.
 */
#ifndef APMWATCH_UVERBS_BPF_H
#define APMWATCH_UVERBS_BPF_H

#include <rdma/ib_user_verbs.h> /* struct ib_uverbs_modify_qp: the uverbs ABI */

/* A kept command: entry stamp, the QP (struct ib_qp *) once looked up. */
struct uverbs_cmd {
	__u64 at;
	__u64 qp;
	struct ib_uverbs_modify_qp cmd;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64); /* pid_tgid */
	__type(value, struct uverbs_cmd);
} uverbs_cmd SEC(".maps");

/* How many commands are kept, over all threads: rdma_lookup_get_uobject
 * runs on nearly every uverbs command (each post and poll of a provider
 * without mapped queues), and its hook returns at once while this is 0.
 * A kretprobe lost under load can leave it above 0: the hook then only
 * looks in uverbs_cmd for nothing. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __s64);
} uverbs_busy SEC(".maps");

static __always_inline void uverbs_busy_add(__s64 n)
{
	__u32 zero = 0;
	__s64 *b = bpf_map_lookup_elem(&uverbs_busy, &zero);
	if (b)
		__sync_fetch_and_add(b, n);
}

static __always_inline int uverbs_idle(void)
{
	__u32 zero = 0;
	__s64 *b = bpf_map_lookup_elem(&uverbs_busy, &zero);
	return !b || *b <= 0;
}

/* Per-CPU room for a command being read (too large for the stack beside
 * the helpers' frames). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct uverbs_cmd);
} uverbs_scratch SEC(".maps");

/* The verbs layer was reached: the modify hooks' exits call this. */
static __always_inline void uverbs_reached_verbs(void)
{
	if (uverbs_idle())
		return;
	__u64 k = bpf_get_current_pid_tgid();
	if (bpf_map_delete_elem(&uverbs_cmd, &k) == 0)
		uverbs_busy_add(-1);
}

/* Keeps the command at in (the caller's buffer, len bytes) if it names
 * APM attributes. */
static __always_inline void uverbs_keep(const void *in, __u64 len)
{
	if (!in || len < sizeof(struct ib_uverbs_modify_qp))
		return;
	__u32 zero = 0;
	struct uverbs_cmd *c = bpf_map_lookup_elem(&uverbs_scratch, &zero);
	if (!c)
		return;
	if (bpf_probe_read_user(&c->cmd, sizeof(c->cmd), in))
		return;
	if (!(c->cmd.attr_mask & (IB_QP_ALT_PATH | IB_QP_PATH_MIG_STATE)))
		return;
	c->at = bpf_ktime_get_boot_ns();
	c->qp = 0;
	__u64 k = bpf_get_current_pid_tgid();
	int fresh = bpf_map_lookup_elem(&uverbs_cmd, &k) == 0;
	if (bpf_map_update_elem(&uverbs_cmd, &k, c, BPF_ANY))
		count(APM_CNT_INFLIGHT_FULL);
	else if (fresh)
		uverbs_busy_add(1);
}

/* The QP of a kept command: the first lookup that found an object (with
 * its id when known, handle_ok says whether it is the command's handle). */
static __always_inline void uverbs_lookup_done(__u64 uobj, int handle_ok)
{
	if (uverbs_idle())
		return;
	__u64 k = bpf_get_current_pid_tgid();
	struct uverbs_cmd *c = bpf_map_lookup_elem(&uverbs_cmd, &k);
	if (!c || c->qp || !handle_ok || !uobj || uobj >= (__u64)-MAX_ERRNO)
		return;
	struct ib_uobject *u = (struct ib_uobject *)uobj;
	c->qp = (__u64)BPF_CORE_READ(u, object);
}

static __always_inline void path_from_uverbs(struct apm_path *p, struct ib_uverbs_qp_dest *d)
{
	p->port = d->port_num;
	p->dlid = d->dlid;
	p->src_path_bits = d->src_path_bits;
	p->sgid_index = d->sgid_index;
	p->is_global = d->is_global;
	__builtin_memcpy(p->dgid, d->dgid, sizeof(p->dgid));
}

/* The exit: a kept command still here did not reach the verbs layer; if
 * it failed and its QP is known, its record. */
static __always_inline void uverbs_done(int ret, __u64 ip)
{
	__u64 k = bpf_get_current_pid_tgid();
	struct uverbs_cmd *c = bpf_map_lookup_elem(&uverbs_cmd, &k);
	if (!c)
		return;
	if (ret && c->qp) {
		struct apm_record *r = new_record(APM_KIND_MODIFY, ip);
		if (r) {
			struct ib_uverbs_modify_qp *m = &c->cmd;
			read_qp(r, (struct ib_qp *)c->qp);
			r->boot_ns = c->at;
			r->took_us = took_us(c->at);
			r->ret = ret;
			r->attr_mask = m->attr_mask;
			if (m->attr_mask & IB_QP_STATE)
				r->state = m->qp_state;
			if (m->attr_mask & IB_QP_PATH_MIG_STATE)
				r->mig_state = m->path_mig_state;
			if (m->attr_mask & IB_QP_DEST_QPN)
				r->dest_qpn = m->dest_qp_num;
			if (m->attr_mask & IB_QP_AV) {
				r->flags |= APM_F_HAS_PRIMARY;
				path_from_uverbs(&r->primary, &m->dest);
				r->primary.pkey_index = m->pkey_index;
			}
			if (m->attr_mask & IB_QP_ALT_PATH) {
				r->flags |= APM_F_HAS_ALT;
				path_from_uverbs(&r->alt, &m->alt_dest);
				r->port = m->alt_dest.port_num;
				r->alt.port = m->alt_port_num;
				r->alt.pkey_index = m->alt_pkey_index;
				r->alt.timeout = m->alt_timeout;
			}
			emit(r);
		}
	}
	if (bpf_map_delete_elem(&uverbs_cmd, &k) == 0)
		uverbs_busy_add(-1);
}

/* ---- fentry + fexit ---- */

SEC("fentry/ib_uverbs_modify_qp")
int BPF_PROG(fentry_uverbs_modify, struct uverbs_attr_bundle *attrs)
{
	if (attrs)
		uverbs_keep(attrs->ucore.inbuf, attrs->ucore.inlen);
	return 0;
}

SEC("fexit/ib_uverbs_modify_qp")
int BPF_PROG(fexit_uverbs_modify)
{
	__u64 ret = 0;
	bpf_get_func_ret(ctx, &ret);
	uverbs_done((int)ret, bpf_get_func_ip(ctx));
	return 0;
}

/* rdma_lookup_get_uobject(obj, ufile, s64 id, mode, attrs): the third
 * argument is the handle. */
SEC("fexit/rdma_lookup_get_uobject")
int BPF_PROG(fexit_uverbs_lookup)
{
	if (uverbs_idle())
		return 0;
	__u64 k = bpf_get_current_pid_tgid();
	struct uverbs_cmd *c = bpf_map_lookup_elem(&uverbs_cmd, &k);
	if (!c || c->qp)
		return 0;
	__u64 id = 0, ret = 0;
	bpf_get_func_arg(ctx, 2, &id);
	bpf_get_func_ret(ctx, &ret);
	uverbs_lookup_done(ret, (__u32)id == c->cmd.qp_handle);
	return 0;
}

/* ---- kprobe + kretprobe ---- */

SEC("kprobe/ib_uverbs_modify_qp")
int BPF_KPROBE(kprobe_uverbs_modify, struct uverbs_attr_bundle *attrs)
{
	if (attrs)
		uverbs_keep(BPF_CORE_READ(attrs, ucore.inbuf), BPF_CORE_READ(attrs, ucore.inlen));
	return 0;
}

SEC("kretprobe/ib_uverbs_modify_qp")
int BPF_KRETPROBE(kretprobe_uverbs_modify, int ret)
{
	uverbs_done(ret, kretprobe_ip(ctx));
	return 0;
}

/* The kretprobe cannot see the handle: the command's first lookup that
 * found an object is its QP (modify_qp looks nothing else up first). */
SEC("kretprobe/rdma_lookup_get_uobject")
int BPF_KRETPROBE(kretprobe_uverbs_lookup, void *ret)
{
	uverbs_lookup_done((__u64)ret, 1);
	return 0;
}

#endif
