/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Async events: QP events through any (struct ib_event *, void *) handler
 * (__ib_qp_event_handler, or a ULP's as fallback), raw driver QP events
 * (mlx5, mlx4), and port/device events (ib_dispatch_event_clients).
 * Entry only: fentry, else kprobe. Both build the record in the scratch
 * map with probe reads: direct BTF loads into a record reserved in the
 * ring (as fexit_modify) measured 4-10% slower on the QP event path, on
 * both kernels (docs/performance.md).
 */
#ifndef APMWATCH_EVENT_BPF_H
#define APMWATCH_EVENT_BPF_H

/* ---- QP async events: (struct ib_event *, void *) handlers ---- */

static __always_inline void qp_event(struct ib_event *ev, __u64 ip)
{
	struct apm_record *r = new_record(APM_KIND_QP_EVENT, ip);
	if (!r)
		return;
	r->ev_type = BPF_CORE_READ(ev, event);
	read_qp(r, BPF_CORE_READ(ev, element.qp));
	if (!(r->flags & APM_F_DEV))
		read_dev(r, BPF_CORE_READ(ev, device));
	emit(r);
}

SEC("fentry/__ib_qp_event_handler")
int BPF_PROG(fentry_qp_event, struct ib_event *ev)
{
	qp_event(ev, bpf_get_func_ip(ctx));
	return 0;
}

SEC("kprobe/__ib_qp_event_handler")
int BPF_KPROBE(kprobe_qp_event, struct ib_event *ev)
{
	qp_event(ev, kprobe_ip(ctx));
	return 0;
}

/* ---- driver hooks: raw event numbers, QPN only ---- */

static __always_inline void raw_qp_event(__u32 qpn, int type, __u8 flags, __u64 ip)
{
	struct apm_record *r = new_record(APM_KIND_QP_EVENT, ip);
	if (!r)
		return;
	r->qpn = qpn & 0xffffff;
	r->ev_type = type;
	r->flags |= APM_F_RAW_EVENT | flags;
	emit(r);
}

SEC("fentry/mlx5_ib_qp_event")
int BPF_PROG(fentry_mlx5_qp_event, struct mlx5_core_qp *qp, int type)
{
	raw_qp_event(BPF_CORE_READ(qp, qpn), type, 0, bpf_get_func_ip(ctx));
	return 0;
}

SEC("kprobe/mlx5_ib_qp_event")
int BPF_KPROBE(kprobe_mlx5_qp_event, struct mlx5_core_qp *qp, int type)
{
	raw_qp_event(BPF_CORE_READ(qp, qpn), type, 0, kprobe_ip(ctx));
	return 0;
}

SEC("fentry/mlx4_ib_qp_event")
int BPF_PROG(fentry_mlx4_qp_event, struct mlx4_qp *qp, int type)
{
	raw_qp_event(BPF_CORE_READ(qp, qpn), type, APM_F_MLX4, bpf_get_func_ip(ctx));
	return 0;
}

SEC("kprobe/mlx4_ib_qp_event")
int BPF_KPROBE(kprobe_mlx4_qp_event, struct mlx4_qp *qp, int type)
{
	raw_qp_event(BPF_CORE_READ(qp, qpn), type, APM_F_MLX4, kprobe_ip(ctx));
	return 0;
}

/* ---- port and device events ---- */

static __always_inline void port_event(struct ib_event *ev, __u64 ip)
{
	struct apm_record *r = new_record(APM_KIND_PORT_EVENT, ip);
	if (!r)
		return;
	r->ev_type = BPF_CORE_READ(ev, event);
	read_dev(r, BPF_CORE_READ(ev, device));
	r->port = read_u32_or_u8(__builtin_preserve_access_index(&ev->element.port_num),
				 bpf_core_field_size(ev->element.port_num));
	emit(r);
}

SEC("fentry/ib_dispatch_event_clients")
int BPF_PROG(fentry_port_event, struct ib_event *ev)
{
	port_event(ev, bpf_get_func_ip(ctx));
	return 0;
}

SEC("kprobe/ib_dispatch_event_clients")
int BPF_KPROBE(kprobe_port_event, struct ib_event *ev)
{
	port_event(ev, kprobe_ip(ctx));
	return 0;
}

#endif
