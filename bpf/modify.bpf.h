/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * QP modify: ib_modify_qp, ib_modify_qp_with_udata (the collector attaches
 * these programs to both). fentry + fexit, else kprobe + kretprobe joined.
 * The two variants read the same fields two ways: direct BTF loads (fexit)
 * and probe reads (kprobe).
 */
#ifndef APMWATCH_MODIFY_BPF_H
#define APMWATCH_MODIFY_BPF_H

/* A modify of the APM attributes (a rearm, an alternate load) announces
 * itself at its entry with a short APM_KIND_MODIFY_ENTRY record; its modify
 * record, stamped at the same entry, follows at the exit (the kprobe
 * variant stamps every modify at its entry). A firmware
 * command can block for up to a minute (mlx5: MLX5_CMD_TIMEOUT_MSEC), and a
 * call that entered before a deadline is judged by its entry: the model
 * holds that QP's deadlines until the exit's record comes. */
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

/* fentry keeps the entry stamp of a modify of the APM attributes (map
 * modify_at) and announces it. Other modifies (state changes, the bulk)
 * cost only the mask test here and are stamped at their exit. */
SEC("fentry/ib_modify_qp")
int BPF_PROG(fentry_modify, struct ib_qp *qp, struct ib_qp_attr *attr, int mask)
{
	if (!qp || !attr || !(mask & APM_MODIFY_ANNOUNCED))
		return 0;
	__u64 now = bpf_ktime_get_boot_ns();
	struct join_key k = { .pid_tgid = bpf_get_current_pid_tgid(), .slot = APM_SLOT_MODIFY };
	if (bpf_map_update_elem(&modify_at, &k, &now, BPF_ANY))
		count(APM_CNT_INFLIGHT_FULL);
	struct apm_record *r = reserve_short_btf(APM_KIND_MODIFY_ENTRY, bpf_get_func_ip(ctx));
	if (!r)
		return 0;
	r->boot_ns = now;
	modify_fill_btf(r, qp, attr, mask);
	bpf_ringbuf_submit(r, APM_RB_FLAGS);
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
	uverbs_reached_verbs();
	if (!qp || !attr)
		return 0;
	__u64 at = 0;
	if (mask & APM_MODIFY_ANNOUNCED) {
		struct join_key k = { .pid_tgid = bpf_get_current_pid_tgid(), .slot = APM_SLOT_MODIFY };
		__u64 *entered = bpf_map_lookup_elem(&modify_at, &k);
		if (entered) {
			at = *entered;
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
	__u64 ret = 0;
	bpf_get_func_ret(ctx, &ret);
	fill_header_btf(r, APM_KIND_MODIFY, bpf_get_func_ip(ctx));
	if (at) {
		r->took_us = took_us(at);
		r->boot_ns = at;
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

SEC("kprobe/ib_modify_qp")
int BPF_KPROBE(kprobe_modify, struct ib_qp *qp, struct ib_qp_attr *attr, int mask)
{
	struct apm_record *r = modify_record(qp, attr, mask, kprobe_ip(ctx));
	if (!r)
		return 0;
	join_put(r, APM_SLOT_MODIFY);
	if (mask & APM_MODIFY_ANNOUNCED) {
		/* the announcement: the same record, short, of its own kind */
		r->kind = APM_KIND_MODIFY_ENTRY;
		r->flags &= ~(APM_F_HAS_PRIMARY | APM_F_HAS_ALT);
		emit(r);
	}
	return 0;
}

SEC("kretprobe/ib_modify_qp")
int BPF_KRETPROBE(kretprobe_modify, int ret)
{
	uverbs_reached_verbs();
	join_done(APM_SLOT_MODIFY, ret);
	return 0;
}

#endif
