/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * A modify of the APM attributes that ib_uverbs refuses itself. Its
 * modify_qp (uverbs_cmd.c) looks the QP up by its handle, then checks the
 * command before the verbs layer: the ports, an alternate whose address
 * vector's port differs from alt_port_num, the states. A command refused
 * there never reaches ib_modify_qp_with_udata, so the modify hooks never
 * see it. Only a failed command costs more than a test of its return:
 *   ib_uverbs_modify_qp, ib_uverbs_ex_modify_qp  fexit (else kprobe, which
 *       keeps the bundle for the kretprobe, only for a command that names
 *       IB_QP_ALT_PATH or IB_QP_PATH_MIG_STATE): a failed command of the
 *       APM attributes is read again from the caller's buffer, its QP found
 *       by its handle in the file's object table (ufile->idr, an xarray)
 *       as uverbs' lookup found it, and checked to be a QP's.
 * A failed command that reached the verbs layer has its record there: the
 * modify hooks' exits mark the thread (map uverbs_verbs_failed) with the
 * QP, and the uverbs exit drops its own. The record of a command refused
 * by ib_uverbs is named after the uverbs function, its fields the
 * command's, stamped at the exit (a refusal takes no firmware command);
 * r->port carries the alternate address vector's port
 * (alt_dest.port_num), the one ib_uverbs compares to alt_port_num.
 */
#ifndef APMWATCH_UVERBS_BPF_H
#define APMWATCH_UVERBS_BPF_H

#include <rdma/ib_user_verbs.h> /* struct ib_uverbs_modify_qp: the uverbs ABI */

/* The QP of a failed modify that reached the verbs layer, by thread. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64); /* pid_tgid */
	__type(value, __u64); /* struct ib_qp * */
} uverbs_failed SEC(".maps");

/* The bundle of a command of the APM attributes in progress, and the
 * hooked function, for the kretprobe (which sees no arguments, and whose
 * address is unknown without bpf_get_func_ip, before 5.15). */
struct uverbs_call {
	__u64 attrs; /* struct uverbs_attr_bundle * */
	__u64 ip;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64); /* pid_tgid */
	__type(value, struct uverbs_call);
} uverbs_bundle SEC(".maps");

/* The modify hooks' exits: a failed call on this thread reached the verbs
 * layer (its record is there). */
static __always_inline void uverbs_verbs_failed(struct ib_qp *qp)
{
	__u64 k = bpf_get_current_pid_tgid(), v = (__u64)qp;
	bpf_map_update_elem(&uverbs_failed, &k, &v, BPF_ANY);
}

/* Per-CPU room for a command being read (too large for the stack beside
 * the helpers' frames). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ib_uverbs_modify_qp);
} uverbs_scratch SEC(".maps");

/* The command's handle and attribute mask, the words after the two
 * address vectors (struct ib_uverbs_modify_qp): whether it names APM
 * attributes, read before anything else. */
static __always_inline int uverbs_apm_cmd(const void *in, __u64 len, __u32 *handle)
{
	__u32 w[2] = {};
	if (!in || len < sizeof(struct ib_uverbs_modify_qp))
		return 0;
	if (bpf_probe_read_user(w, sizeof(w), in + __builtin_offsetof(struct ib_uverbs_modify_qp, qp_handle)))
		return 0;
	*handle = w[0];
	return (w[1] & (IB_QP_ALT_PATH | IB_QP_PATH_MIG_STATE)) != 0;
}

/* xarray internals (include/linux/xarray.h): an internal entry has its low
 * two bits 2; a node is an internal entry above 4096; a node's slots hold
 * 64 entries (XA_CHUNK_SHIFT 6) indexed by the index's bits at its shift. */
#define XA_CHUNK_SHIFT 6
#define XA_CHUNK_MASK ((1UL << XA_CHUNK_SHIFT) - 1)
#define XA_LEVELS 6 /* 36 bits: past any 32-bit handle */

static __always_inline int xa_node_entry(__u64 e) { return (e & 3) == 2 && e > 4096; }

/* The entry at index in the xarray xa, as xa_load finds it; 0 when there
 * is none (or a reserved, sibling or retry entry). */
static __always_inline __u64 xa_find_entry(struct xarray *xa, __u32 index)
{
	__u64 e = (__u64)BPF_CORE_READ(xa, xa_head);
	if (!xa_node_entry(e))
		return index == 0 && (e & 3) != 2 ? e : 0;
#pragma unroll
	for (int level = 0; level < XA_LEVELS; level++) {
		struct xa_node *n = (struct xa_node *)(e - 2);
		__u8 shift = BPF_CORE_READ(n, shift);
		if (level == 0 && shift < 64 - XA_CHUNK_SHIFT && ((__u64)index >> shift) > XA_CHUNK_MASK)
			return 0; /* past the tree's reach */
		__u64 slot = ((__u64)index >> (shift & 63)) & XA_CHUNK_MASK;
		e = 0;
		if (bpf_probe_read_kernel(&e, sizeof(e), __builtin_preserve_access_index(&n->slots[slot])))
			return 0;
		if (!xa_node_entry(e))
			return (e & 3) == 2 ? 0 : e;
	}
	return 0;
}

/* The QP a handle names in a uverbs file, checked as uverbs' own lookup
 * checks the type: the object's QP points back at this uobject (a CQ's or
 * an MR's object does not); 0 when the handle names no QP. */
static __always_inline struct ib_qp *uverbs_qp(struct uverbs_attr_bundle *attrs, __u32 handle)
{
	struct ib_uverbs_file *f = BPF_CORE_READ(attrs, ufile);
	if (!f)
		return 0;
	__u64 u = xa_find_entry(__builtin_preserve_access_index(&f->idr), handle);
	if (!u)
		return 0;
	struct ib_uobject *uobj = (struct ib_uobject *)u;
	struct ib_qp *qp = BPF_CORE_READ(uobj, object);
	if (!qp || BPF_CORE_READ(uobj, id) != (int)handle)
		return 0;
	struct ib_uqp_object *back = BPF_CORE_READ(qp, uobject);
	if ((__u64)back + bpf_core_field_offset(back->uevent.uobject) != u)
		return 0;
	return qp;
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

/* The mark a failed verbs call left for this thread's command (the QP, or
 * 0), taken at every failed command's exit, whatever the command named:
 * left behind, it would hide a later refusal. */
static __always_inline __u64 uverbs_take_mark(void)
{
	__u64 k = bpf_get_current_pid_tgid();
	__u64 *reached = bpf_map_lookup_elem(&uverbs_failed, &k);
	if (!reached)
		return 0;
	__u64 qp = *reached;
	bpf_map_delete_elem(&uverbs_failed, &k);
	return qp;
}

/* The exit of a failed command (ret != 0): its record when it named APM
 * attributes, did not reach the verbs layer (its QP is not verbs_qp), and
 * its handle names a QP. */
static __always_inline void uverbs_failed_cmd(struct uverbs_attr_bundle *attrs, int ret, __u64 ip,
					       __u64 verbs_qp)
{
	/* -EFAULT is a buffer that faults: reading the command (before the
	 * QP is looked up) or writing ib_uverbs_ex_modify_qp's response after
	 * a modify that succeeded. Neither is a refusal of the attributes. */
	if (!attrs || ret == -14)
		return;
	const void *in = BPF_CORE_READ(attrs, ucore.inbuf);
	__u32 handle = 0;
	if (!uverbs_apm_cmd(in, BPF_CORE_READ(attrs, ucore.inlen), &handle))
		return;
	struct ib_qp *qp = uverbs_qp(attrs, handle);
	if (!qp || (__u64)qp == verbs_qp)
		return;
	__u32 zero = 0;
	struct ib_uverbs_modify_qp *m = bpf_map_lookup_elem(&uverbs_scratch, &zero);
	if (!m || bpf_probe_read_user(m, sizeof(*m), in))
		return;
	struct apm_record *r = new_record(APM_KIND_MODIFY, ip);
	if (!r)
		return;
	read_qp(r, qp);
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

/* ---- fexit ---- */

SEC("fexit/ib_uverbs_modify_qp")
int BPF_PROG(fexit_uverbs_modify, struct uverbs_attr_bundle *attrs)
{
	__u64 ret = 0;
	bpf_get_func_ret(ctx, &ret);
	if ((int)ret)
		uverbs_failed_cmd(attrs, (int)ret, bpf_get_func_ip(ctx), uverbs_take_mark());
	return 0;
}

/* ---- kprobe + kretprobe ---- */

SEC("kprobe/ib_uverbs_modify_qp")
int BPF_KPROBE(kprobe_uverbs_modify, struct uverbs_attr_bundle *attrs)
{
	__u32 handle;
	if (!attrs || !uverbs_apm_cmd(BPF_CORE_READ(attrs, ucore.inbuf), BPF_CORE_READ(attrs, ucore.inlen), &handle))
		return 0;
	__u64 k = bpf_get_current_pid_tgid();
	struct uverbs_call v = { .attrs = (__u64)attrs, .ip = kprobe_ip(ctx) };
	if (bpf_map_update_elem(&uverbs_bundle, &k, &v, BPF_ANY))
		count(APM_CNT_INFLIGHT_FULL);
	return 0;
}

/* The bundle lives in the caller's frame (ib_uverbs_write), still there
 * when the command returns. */
SEC("kretprobe/ib_uverbs_modify_qp")
int BPF_KRETPROBE(kretprobe_uverbs_modify, int ret)
{
	__u64 mark = ret ? uverbs_take_mark() : 0;
	__u64 k = bpf_get_current_pid_tgid();
	struct uverbs_call *c = bpf_map_lookup_elem(&uverbs_bundle, &k);
	if (!c)
		return 0;
	struct uverbs_call v = *c;
	bpf_map_delete_elem(&uverbs_bundle, &k);
	if (ret)
		uverbs_failed_cmd((struct uverbs_attr_bundle *)v.attrs, ret, v.ip, mark);
	return 0;
}

#endif
