/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * MADs on the wire: tracepoints ib_mad:ib_mad_ib_send_mad,
 * ib_mad:ib_mad_recv_done_handler, ib_umad:ib_umad_write; tp_btf, else
 * raw_tp. The tracepoints' arguments (TP_PROTO) are the same in 6.1 and
 * 6.12; their trace record layout is not, and is not used.
 */
#ifndef APMWATCH_MAD_BPF_H
#define APMWATCH_MAD_BPF_H

static __always_inline int mad_header(struct apm_record *r, struct ib_mad_hdr *hdr)
{
	r->mgmt_class = BPF_CORE_READ(hdr, mgmt_class);
	if (!cfg.all_mads && r->mgmt_class != IB_MGMT_CLASS_CM)
		return -1;
	r->method = BPF_CORE_READ(hdr, method);
	r->attr_id = bpf_ntohs(BPF_CORE_READ(hdr, attr_id));
	r->obj = bpf_be64_to_cpu(BPF_CORE_READ(hdr, tid));
	if (r->mgmt_class == IB_MGMT_CLASS_CM)
		cm_payload(r, (const __u8 *)hdr);
	return 0;
}

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
	if (!wr || !qi)
		return;
	struct apm_record *r = new_record(APM_KIND_MAD, 0);
	if (!r)
		return;
	struct ib_mad_hdr *hdr = BPF_CORE_READ(wr, send_buf.mad);
	if (!hdr || mad_header(r, hdr))
		return;
	r->dir = 1;
	mad_qp_info(r, qi);
	if (r->mgmt_class == IB_MGMT_CLASS_CM)
		r->qpn = cm_local_qpn(r->attr_id, (const __u8 *)hdr);
	r->remote_qpn = BPF_CORE_READ(wr, send_wr.remote_qpn);
	__u32 low = (__u32)r->obj;
	if (bpf_map_lookup_elem(&umad_tids, &low))
		r->flags |= APM_F_FROM_UMAD;
	emit(r);
}

static __always_inline void mad_recv(struct ib_mad_qp_info *qi, struct ib_wc *wc,
				     struct ib_mad_hdr *hdr)
{
	if (!qi || !wc || !hdr)
		return;
	struct apm_record *r = new_record(APM_KIND_MAD, 0);
	if (!r)
		return;
	if (mad_header(r, hdr))
		return;
	r->dir = 2;
	mad_qp_info(r, qi);
	r->remote_qpn = BPF_CORE_READ(wc, src_qp);
	r->slid = BPF_CORE_READ(wc, slid);
	emit(r);
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
	mad_send(wr, qi);
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
	mad_recv(qi, wc, hdr);
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
