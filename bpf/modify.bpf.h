/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * QP modify: ib_modify_qp, ib_modify_qp_with_udata (the collector attaches
 * these programs to both). fentry + fexit, else kprobe + kretprobe joined.
 * The two variants read the same fields two ways: direct BTF loads (fexit)
 * and probe reads (kprobe).
 */
#ifndef APMWATCH_MODIFY_BPF_H
#define APMWATCH_MODIFY_BPF_H

/* A modify of the APM attributes (a rearm, an alternate load) is stamped
 * at its entry; its one record comes at the exit. A firmware command can
 * block for up to a minute (mlx5: MLX5_CMD_TIMEOUT_MSEC), and a call that
 * entered before a deadline is judged by its entry: the entry waits in a
 * map (modify_at here, inflight for the kprobe variant), where the
 * collector finds a call still in progress and announces it to the model
 * (APM_KIND_MODIFY_ENTRY), which holds that QP's deadlines until the
 * exit's record comes. A fast call costs no record but its own. */
#define APM_MODIFY_ANNOUNCED (IB_QP_ALT_PATH | IB_QP_PATH_MIG_STATE)

/* ---- fentry + fexit variant: direct BTF loads into the ring buffer ---- */

/* Direct (BTF) reads for the fexit path: plain loads the verifier turns
 * into fault-safe PROBE_MEM loads, much cheaper than bpf_probe_read_kernel
 * (read_qp_btf, common.bpf.h, for the QP). */
static __always_inline void read_path_btf(struct apm_path *p, struct rdma_ah_attr *ah)
{
	if (bpf_core_field_size(ah->port_num) == 1)
		p->port = *(__u8 *)&ah->port_num;
	else
		p->port = ah->port_num;
	if (ah->type == RDMA_AH_ATTR_TYPE_IB) { /* RoCE keeps a MAC in this union */
		p->dlid = ah->ib.dlid;
		p->src_path_bits = ah->ib.src_path_bits;
	}
	p->sgid_index = ah->grh.sgid_index;
	p->is_global = ah->ah_flags & IB_AH_GRH;
	__u64 hi = ah->grh.dgid.global.subnet_prefix, lo = ah->grh.dgid.global.interface_id;
	__builtin_memcpy(p->dgid, &hi, 8);
	__builtin_memcpy(p->dgid + 8, &lo, 8);
}

static __always_inline void modify_fill_btf(struct apm_record *r, struct ib_qp *qp,
					    struct ib_qp_attr *attr, int mask)
{
	read_qp_btf(r, qp);
	r->attr_mask = mask;
	if (mask & IB_QP_STATE)
		r->state = attr->qp_state;
	if (mask & IB_QP_PATH_MIG_STATE)
		r->mig_state = attr->path_mig_state;
	if (mask & IB_QP_DEST_QPN)
		r->dest_qpn = attr->dest_qp_num;
}

/* The paths of a full record (the mask names IB_QP_AV or IB_QP_ALT_PATH). */
static __always_inline void modify_paths_btf(struct apm_record *r, struct ib_qp_attr *attr, int mask)
{
	if (mask & IB_QP_AV) {
		r->flags |= APM_F_HAS_PRIMARY;
		read_path_btf(&r->primary, &attr->ah_attr);
		r->primary.pkey_index = attr->pkey_index;
	}
	if (mask & IB_QP_ALT_PATH) {
		r->flags |= APM_F_HAS_ALT;
		read_path_btf(&r->alt, &attr->alt_ah_attr);
		if (bpf_core_field_size(attr->alt_port_num) == 1)
			r->alt.port = *(__u8 *)&attr->alt_port_num;
		else
			r->alt.port = attr->alt_port_num;
		r->alt.pkey_index = attr->alt_pkey_index;
		r->alt.timeout = attr->alt_timeout;
	}
}

/* fentry keeps the entry of a modify of the APM attributes (map
 * modify_at): its stamp and what announces it should it still be in
 * progress when the collector looks, all direct loads. Other modifies
 * (state changes, the bulk) cost only the mask test here and are stamped
 * at their exit. */
SEC("fentry/ib_modify_qp")
int BPF_PROG(fentry_modify, struct ib_qp *qp, struct ib_qp_attr *attr, int mask)
{
	if (!qp || !attr || !(mask & APM_MODIFY_ANNOUNCED))
		return 0;
	struct apm_modify_entry e = {
		.at = bpf_ktime_get_boot_ns(),
		.func_ip = bpf_get_func_ip(ctx),
		.attr_mask = mask,
	};
	struct ib_qp *real = qp->real_qp;
	if (real)
		qp = real;
	struct ib_device *dev = qp->device;
	if (dev) {
		e.dev_index = dev->index;
		e.flags = APM_F_DEV;
	}
	e.qpn = qp->qp_num;
	e.qp_type = qp->qp_type;
	e.flags |= qp->uobject ? APM_F_USER : APM_F_KERNEL;
	if (mask & IB_QP_PATH_MIG_STATE)
		e.mig_state = attr->path_mig_state;
	if (mask & IB_QP_STATE)
		e.state = attr->qp_state;
	struct join_key k = { .pid_tgid = bpf_get_current_pid_tgid(), .slot = APM_SLOT_MODIFY };
	if (bpf_map_update_elem(&modify_at, &k, &e, BPF_ANY))
		count(APM_CNT_INFLIGHT_FULL);
	return 0;
}

/* fexit sees the arguments and the return code at once: no join of the
 * record, built in place in the ring buffer; a modify of the APM attributes
 * is stamped at the entry fentry kept (at the exit when fentry missed it:
 * counted as unjoined), any other at its exit.
 * ib_modify_qp* leave the fields read here unchanged (the core only fills
 * the RoCE dmac and sgid_attr of the caller's attr). Both targets share the
 * first three arguments; bpf_get_func_ret reads the return code whatever
 * the argument count. The mask decides first: a modify without a path (a
 * rearm, a state change) reserves the short record and reads no path field. */
SEC("fexit/ib_modify_qp")
int BPF_PROG(fexit_modify, struct ib_qp *qp, struct ib_qp_attr *attr, int mask)
{
	if (!qp || !attr)
		return 0;
	__u64 ret = 0;
	bpf_get_func_ret(ctx, &ret);
	if ((int)ret)
		uverbs_verbs_failed(qp);
	__u64 at = 0;
	if (mask & APM_MODIFY_ANNOUNCED) {
		struct join_key k = { .pid_tgid = bpf_get_current_pid_tgid(), .slot = APM_SLOT_MODIFY };
		struct apm_modify_entry *entered = bpf_map_lookup_elem(&modify_at, &k);
		if (entered) {
			at = entered->at;
			bpf_map_delete_elem(&modify_at, &k);
		} else {
			count(APM_CNT_UNJOINED);
		}
	}
	struct apm_record *r;
	if (mask & (IB_QP_AV | IB_QP_ALT_PATH)) {
		r = bpf_ringbuf_reserve(&events, APM_RECORD_PATHS, 0);
		if (!r)
			goto lost;
		__builtin_memset(r, 0, APM_RECORD_PATHS);
		modify_paths_btf(r, attr, mask);
	} else {
		r = bpf_ringbuf_reserve(&events, APM_RECORD_SHORT, 0);
		if (!r)
			goto lost;
		__builtin_memset(r, 0, APM_RECORD_SHORT);
	}
	/* One clock read: the exit's stamp, or the entry's and the time since
	 * (a clock read is a device read where the TSC is not trusted). */
	__u64 now = bpf_ktime_get_boot_ns();
	fill_header_btf_at(r, APM_KIND_MODIFY, bpf_get_func_ip(ctx), at ? at : now);
	if (at) {
		__u64 us = now > at ? (now - at) / 1000 : 0;
		r->took_us = us > 0xffffffff ? 0xffffffff : (__u32)us;
	}
	r->ret = (int)ret;
	modify_fill_btf(r, qp, attr, mask);
	bpf_ringbuf_submit(r, APM_RB_FLAGS);
	return 0;
lost:
	count(APM_CNT_LOST);
	return 0;
}


/* ---- kprobe variant: probe reads into a scratch record ---- */

static __always_inline void read_path(struct apm_path *p, struct rdma_ah_attr *ah)
{
	p->port = read_u32_or_u8(__builtin_preserve_access_index(&ah->port_num),
				 bpf_core_field_size(ah->port_num));
	if (BPF_CORE_READ(ah, type) == RDMA_AH_ATTR_TYPE_IB) {
		p->dlid = BPF_CORE_READ(ah, ib.dlid);
		p->src_path_bits = BPF_CORE_READ(ah, ib.src_path_bits);
	}
	p->sgid_index = BPF_CORE_READ(ah, grh.sgid_index);
	p->is_global = BPF_CORE_READ(ah, ah_flags) & IB_AH_GRH;
	bpf_probe_read_kernel(p->dgid, sizeof(p->dgid),
			      __builtin_preserve_access_index(&ah->grh.dgid));
}

static __always_inline struct apm_record *modify_record(struct ib_qp *qp, struct ib_qp_attr *attr,
							  int mask, __u64 ip)
{
	struct apm_record *r = new_record(APM_KIND_MODIFY, ip);
	if (!r)
		return 0;
	read_qp(r, qp);
	r->attr_mask = mask;
	if (mask & IB_QP_STATE)
		r->state = BPF_CORE_READ(attr, qp_state);
	if (mask & IB_QP_PATH_MIG_STATE)
		r->mig_state = BPF_CORE_READ(attr, path_mig_state);
	if (mask & IB_QP_DEST_QPN)
		r->dest_qpn = BPF_CORE_READ(attr, dest_qp_num);
	if (mask & IB_QP_AV) {
		r->flags |= APM_F_HAS_PRIMARY;
		read_path(&r->primary, __builtin_preserve_access_index(&attr->ah_attr));
		r->primary.pkey_index = BPF_CORE_READ(attr, pkey_index);
	}
	if (mask & IB_QP_ALT_PATH) {
		r->flags |= APM_F_HAS_ALT;
		read_path(&r->alt, __builtin_preserve_access_index(&attr->alt_ah_attr));
		r->alt.port = read_u32_or_u8(__builtin_preserve_access_index(&attr->alt_port_num),
					     bpf_core_field_size(attr->alt_port_num));
		r->alt.pkey_index = BPF_CORE_READ(attr, alt_pkey_index);
		r->alt.timeout = BPF_CORE_READ(attr, alt_timeout);
	}
	return r;
}

/* The kprobe keeps the whole record in the join map (inflight) until the
 * exit; the collector announces a call of the APM attributes it finds
 * there still in progress. r->obj keeps the QP for the exit: a failed call
 * tells the uverbs exit it reached the verbs layer (uverbs_verbs_failed). */
SEC("kprobe/ib_modify_qp")
int BPF_KPROBE(kprobe_modify, struct ib_qp *qp, struct ib_qp_attr *attr, int mask)
{
	struct apm_record *r = modify_record(qp, attr, mask, kprobe_ip(ctx));
	if (!r)
		return 0;
	r->obj = (__u64)qp;
	join_put(r, APM_SLOT_MODIFY);
	return 0;
}

/* The entry leaves the join map before its record goes out (copied to the
 * scratch record first): the collector never finds a call in progress
 * whose result it has read. */
SEC("kretprobe/ib_modify_qp")
int BPF_KRETPROBE(kretprobe_modify, int ret)
{
	struct join_key k = { .pid_tgid = bpf_get_current_pid_tgid(), .slot = APM_SLOT_MODIFY };
	struct apm_record *in = bpf_map_lookup_elem(&inflight, &k);
	__u32 zero = 0;
	struct apm_record *r = bpf_map_lookup_elem(&scratch, &zero);
	if (!in || !r) {
		count(APM_CNT_UNJOINED);
		return 0;
	}
	__builtin_memcpy(r, in, sizeof(*r));
	bpf_map_delete_elem(&inflight, &k);
	if (ret)
		uverbs_verbs_failed((struct ib_qp *)r->obj);
	r->obj = 0;
	r->ret = ret;
	r->took_us = took_us(r->boot_ns);
	emit(r);
	return 0;
}

#endif
