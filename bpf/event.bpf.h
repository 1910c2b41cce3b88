/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Async events: QP events through any (struct ib_event *, void *) handler
 * (__ib_qp_event_handler, or a ULP's as fallback), raw driver QP events
 * (mlx5, mlx4), and port/device events (ib_dispatch_event_clients).
 * Entry only: fentry, else kprobe. Each builds its record in place in the
 * ring buffer (reserve_short), never in the per-CPU scratch map: the raw
 * driver functions run in the EQ interrupt, and below 6.3 (and on OFED
 * before 23.10) the typed handlers do too, so these programs can interrupt
 * another apmwatch program on the same CPU, whose half-built scratch
 * record they would overwrite (fentry's recursion guard is per program).
 * Fields come with probe reads: direct BTF loads measured 4-10% slower on
 * the QP event path (docs/performance.md).
 */
#ifndef APMWATCH_EVENT_BPF_H
#define APMWATCH_EVENT_BPF_H

/* ---- QP async events: (struct ib_event *, void *) handlers ---- */

static __always_inline void qp_event(struct ib_event *ev, __u64 ip)
{
	struct apm_record *r = reserve_short(APM_KIND_QP_EVENT, ip);
	if (!r)
		return;
	r->ev_type = BPF_CORE_READ(ev, event);
	read_qp(r, BPF_CORE_READ(ev, element.qp));
	if (!(r->flags & APM_F_DEV))
		read_dev(r, BPF_CORE_READ(ev, device));
	bpf_ringbuf_submit(r, APM_RB_FLAGS);
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

/* ---- driver hooks: raw event numbers ---- */

/* The raw event's QP: the driver's own ib_qp when the container the
 * driver keeps the event's argument in is found and names the same QPN
 * (a QP of another shape, or a layout the BTF does not describe, gives
 * the QPN alone, as before). Device, QP type and owner then come as for a
 * typed event, so a kernel ULP's event on a host with several HCAs, whose
 * QPNs repeat, is pinned on the right QP. */
static __always_inline void raw_qp_event(struct apm_record *r, struct ib_qp *ibqp, __u32 qpn, int type, __u8 flags)
{
	qpn &= 0xffffff;
	if (ibqp && (BPF_CORE_READ(ibqp, qp_num) & 0xffffff) == qpn)
		read_qp(r, ibqp);
	r->qpn = qpn;
	r->ev_type = type;
	r->flags |= APM_F_RAW_EVENT | flags;
	bpf_ringbuf_submit(r, APM_RB_FLAGS);
}

static __always_inline struct ib_qp *mlx5_ibqp(struct mlx5_core_qp *mqp)
{
	if (!bpf_core_type_exists(struct mlx5_ib_qp_base) || !bpf_core_type_exists(struct mlx5_ib_qp))
		return 0;
	struct mlx5_ib_qp_base *base = (void *)mqp - bpf_core_field_offset(struct mlx5_ib_qp_base, mqp);
	struct mlx5_ib_qp *q = BPF_CORE_READ(base, container_mibqp);
	if (!q)
		return 0;
	return (void *)q + bpf_core_field_offset(struct mlx5_ib_qp, ibqp);
}

static __always_inline struct ib_qp *mlx4_ibqp(struct mlx4_qp *mqp)
{
	if (!bpf_core_type_exists(struct mlx4_ib_qp))
		return 0;
	struct mlx4_ib_qp *q = (void *)mqp - bpf_core_field_offset(struct mlx4_ib_qp, mqp);
	return (void *)q + bpf_core_field_offset(struct mlx4_ib_qp, ibqp);
}

SEC("fentry/mlx5_ib_qp_event")
int BPF_PROG(fentry_mlx5_qp_event, struct mlx5_core_qp *qp, int type)
{
	struct apm_record *r = reserve_short(APM_KIND_QP_EVENT, bpf_get_func_ip(ctx));
	if (r)
		raw_qp_event(r, mlx5_ibqp(qp), BPF_CORE_READ(qp, qpn), type, 0);
	return 0;
}

SEC("kprobe/mlx5_ib_qp_event")
int BPF_KPROBE(kprobe_mlx5_qp_event, struct mlx5_core_qp *qp, int type)
{
	struct apm_record *r = reserve_short(APM_KIND_QP_EVENT, kprobe_ip(ctx));
	if (r)
		raw_qp_event(r, mlx5_ibqp(qp), BPF_CORE_READ(qp, qpn), type, 0);
	return 0;
}

SEC("fentry/mlx4_ib_qp_event")
int BPF_PROG(fentry_mlx4_qp_event, struct mlx4_qp *qp, int type)
{
	struct apm_record *r = reserve_short(APM_KIND_QP_EVENT, bpf_get_func_ip(ctx));
	if (r)
		raw_qp_event(r, mlx4_ibqp(qp), BPF_CORE_READ(qp, qpn), type, APM_F_MLX4);
	return 0;
}

SEC("kprobe/mlx4_ib_qp_event")
int BPF_KPROBE(kprobe_mlx4_qp_event, struct mlx4_qp *qp, int type)
{
	struct apm_record *r = reserve_short(APM_KIND_QP_EVENT, kprobe_ip(ctx));
	if (r)
		raw_qp_event(r, mlx4_ibqp(qp), BPF_CORE_READ(qp, qpn), type, APM_F_MLX4);
	return 0;
}

/* ---- port and device events ---- */

/* ib_event_type's GID_CHANGE (include/rdma/ib_verbs.h, 18 since 2.6). */
#define APM_IB_EVENT_GID_CHANGE 18

/* Port and device events as the driver reports them (ib_dispatch_event,
 * which queues the work that updates the port cache and then calls
 * ib_dispatch_event_clients), and GID_CHANGE where the core dispatches it
 * to the clients itself (the GID cache, dispatch_gid_change_event; a
 * driver's GID_CHANGE is never passed on to them). Each event once: the
 * driver's hook leaves GID_CHANGE to the clients' hook, which takes only
 * that. */
static __always_inline void port_event(struct ib_event *ev, __u64 ip, int gid_only)
{
	__u32 type = BPF_CORE_READ(ev, event);
	if ((type == APM_IB_EVENT_GID_CHANGE) != gid_only)
		return;
	struct apm_record *r = reserve_short(APM_KIND_PORT_EVENT, ip);
	if (!r)
		return;
	r->ev_type = type;
	read_dev(r, BPF_CORE_READ(ev, device));
	r->port = read_u32_or_u8(__builtin_preserve_access_index(&ev->element.port_num),
				 bpf_core_field_size(ev->element.port_num));
	bpf_ringbuf_submit(r, APM_RB_FLAGS);
}

SEC("fentry/ib_dispatch_event")
int BPF_PROG(fentry_port_event, struct ib_event *ev)
{
	port_event(ev, bpf_get_func_ip(ctx), 0);
	return 0;
}

SEC("kprobe/ib_dispatch_event")
int BPF_KPROBE(kprobe_port_event, struct ib_event *ev)
{
	port_event(ev, kprobe_ip(ctx), 0);
	return 0;
}

SEC("fentry/ib_dispatch_event_clients")
int BPF_PROG(fentry_gid_event, struct ib_event *ev)
{
	port_event(ev, bpf_get_func_ip(ctx), 1);
	return 0;
}

SEC("kprobe/ib_dispatch_event_clients")
int BPF_KPROBE(kprobe_gid_event, struct ib_event *ev)
{
	port_event(ev, kprobe_ip(ctx), 1);
	return 0;
}

#endif
