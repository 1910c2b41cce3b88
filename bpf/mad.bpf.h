/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * MADs on the wire: tracepoints ib_mad:ib_mad_ib_send_mad,
 * ib_mad:ib_mad_recv_done_handler, ib_umad:ib_umad_write; tp_btf, else
 * raw_tp. The tracepoints' arguments (TP_PROTO) are the same in 6.1 and
 * 6.12; their trace record layout is not, and is not used. The MAD's own
 * bytes come in one probe read (mad_head_read) on both variants.
 */
#ifndef APMWATCH_MAD_BPF_H
#define APMWATCH_MAD_BPF_H

/* The 24-byte MAD header (IBTA wire layout: class @1, method @3, TID @8,
 * attribute @16) and the CM comm IDs after it, in one probe read; a MAD
 * buffer always holds at least the 256-byte MAD. */
#define MAD_HEAD 32

static __always_inline int mad_head_read(__u8 *b, const void *mad)
{
	if (!mad || bpf_probe_read_kernel(b, MAD_HEAD, mad))
		return -1;
	if (!cfg.all_mads && b[1] != IB_MGMT_CLASS_CM)
		return -1;
	return 0;
}

static __always_inline void mad_head_fill(struct apm_record *r, const __u8 *b)
{
	__u64 tid;
	__u16 attr;
	__u32 v;
	r->mgmt_class = b[1];
	r->method = b[3];
	__builtin_memcpy(&tid, b + 8, 8);
	r->obj = bpf_be64_to_cpu(tid);
	__builtin_memcpy(&attr, b + 16, 2);
	r->attr_id = bpf_ntohs(attr);
	if (r->mgmt_class == IB_MGMT_CLASS_CM) {
		__builtin_memcpy(&v, b + CM_LOCAL_COMM_ID, 4);
		r->local_id = bpf_ntohl(v);
		__builtin_memcpy(&v, b + CM_REMOTE_COMM_ID, 4);
		r->remote_id = bpf_ntohl(v);
	}
}

/* Sent MADs: the CM's REQ and REP name the connection's local QP. */
static __always_inline void mad_send_fill(struct apm_record *r, const __u8 *b, const void *mad)
{
	mad_head_fill(r, b);
	r->dir = 1;
	if (r->mgmt_class == IB_MGMT_CLASS_CM)
		r->qpn = cm_local_qpn(r->attr_id, mad);
	__u32 low = (__u32)r->obj;
	if (bpf_map_lookup_elem(&umad_tids, &low))
		r->flags |= APM_F_FROM_UMAD;
}

/* ---- raw_tp variant: probe reads into a scratch record ---- */

static __always_inline void mad_qp_info(struct apm_record *r, struct ib_mad_qp_info *qi)
{
	struct ib_mad_port_private *pp = BPF_CORE_READ(qi, port_priv);
	read_dev(r, BPF_CORE_READ(pp, device));
	r->port = BPF_CORE_READ(pp, port_num);
	r->mad_qpn = BPF_CORE_READ(qi, qp, qp_num);
}

static __always_inline void mad_send(struct ib_mad_send_wr_private *wr,
				     struct ib_mad_qp_info *qi)
{
	__u8 b[MAD_HEAD];
	if (!wr || !qi)
		return;
	const void *mad = BPF_CORE_READ(wr, send_buf.mad);
	if (mad_head_read(b, mad))
		return;
	struct apm_record *r = new_record(APM_KIND_MAD, 0);
	if (!r)
		return;
	mad_send_fill(r, b, mad);
	mad_qp_info(r, qi);
	r->remote_qpn = BPF_CORE_READ(wr, send_wr.remote_qpn);
	emit(r);
}

static __always_inline void mad_recv(struct ib_mad_qp_info *qi, struct ib_wc *wc,
				     struct ib_mad_hdr *hdr)
{
	__u8 b[MAD_HEAD];
	if (!qi || !wc || mad_head_read(b, hdr))
		return;
	struct apm_record *r = new_record(APM_KIND_MAD, 0);
	if (!r)
		return;
	mad_head_fill(r, b);
	r->dir = 2;
	mad_qp_info(r, qi);
	r->remote_qpn = BPF_CORE_READ(wc, src_qp);
	r->slid = BPF_CORE_READ(wc, slid);
	emit(r);
}

/* ---- tp_btf variant: direct BTF loads, the record reserved in place ---- */

static __always_inline void mad_qp_info_btf(struct apm_record *r, struct ib_mad_qp_info *qi)
{
	struct ib_mad_port_private *pp = qi->port_priv;
	if (pp) {
		read_dev_btf(r, pp->device);
		r->port = pp->port_num;
	}
	struct ib_qp *qp = qi->qp;
	if (qp)
		r->mad_qpn = qp->qp_num;
}

static __always_inline void umad_write(struct ib_mad_hdr *hdr)
{
	if (!hdr)
		return;
	__u32 low = (__u32)bpf_be64_to_cpu(BPF_CORE_READ(hdr, tid));
	__u8 one = 1;
	bpf_map_update_elem(&umad_tids, &low, &one, BPF_ANY);
}

SEC("tp_btf/ib_mad_ib_send_mad")
int BPF_PROG(tp_mad_send, struct ib_mad_send_wr_private *wr, struct ib_mad_qp_info *qi)
{
	__u8 b[MAD_HEAD];
	if (!wr || !qi)
		return 0;
	const void *mad = wr->send_buf.mad; /* void *: read with a probe read */
	if (mad_head_read(b, mad))
		return 0;
	struct apm_record *r = reserve_short_btf(APM_KIND_MAD, 0);
	if (!r)
		return 0;
	mad_send_fill(r, b, mad);
	mad_qp_info_btf(r, qi);
	r->remote_qpn = wr->send_wr.remote_qpn;
	bpf_ringbuf_submit(r, APM_RB_FLAGS);
	return 0;
}

SEC("raw_tp/ib_mad_ib_send_mad")
int raw_mad_send(struct bpf_raw_tracepoint_args *ctx)
{
	mad_send((void *)ctx->args[0], (void *)ctx->args[1]);
	return 0;
}

SEC("tp_btf/ib_mad_recv_done_handler")
int BPF_PROG(tp_mad_recv, struct ib_mad_qp_info *qi, struct ib_wc *wc, struct ib_mad_hdr *hdr)
{
	__u8 b[MAD_HEAD];
	if (!qi || !wc || mad_head_read(b, hdr))
		return 0;
	struct apm_record *r = reserve_short_btf(APM_KIND_MAD, 0);
	if (!r)
		return 0;
	mad_head_fill(r, b);
	r->dir = 2;
	mad_qp_info_btf(r, qi);
	r->remote_qpn = wc->src_qp;
	r->slid = wc->slid;
	bpf_ringbuf_submit(r, APM_RB_FLAGS);
	return 0;
}

SEC("raw_tp/ib_mad_recv_done_handler")
int raw_mad_recv(struct bpf_raw_tracepoint_args *ctx)
{
	mad_recv((void *)ctx->args[0], (void *)ctx->args[1], (void *)ctx->args[2]);
	return 0;
}

SEC("tp_btf/ib_umad_write")
int BPF_PROG(tp_umad_write, void *file, void *umad_hdr, struct ib_mad_hdr *hdr)
{
	umad_write(hdr);
	return 0;
}

SEC("raw_tp/ib_umad_write")
int raw_umad_write(struct bpf_raw_tracepoint_args *ctx)
{
	umad_write((void *)ctx->args[2]);
	return 0;
}

#endif
