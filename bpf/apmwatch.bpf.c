//go:build ignore
// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * apmwatch probes: QP modify, QP async events, port events, CM notify and
 * LAP/APR handling, CM MADs on the wire, QP create/destroy. One record type
 * (struct apm_record, apmwatch.h) for everything. Every program exists as a
 * fentry/fexit (or tp_btf) variant and a kprobe/kretprobe (or raw_tp)
 * variant; the collector picks one per hook.
 */
#include <linux/bpf.h>
#define __VMLINUX_H__ /* pt_regs field names of the kernel, see ib_types.h */
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

#include "apmwatch.h"
#include "ib_types.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define IB_QP_STATE (1 << 0)
#define IB_QP_AV (1 << 7)
#define IB_QP_ALT_PATH (1 << 14)
#define IB_QP_PATH_MIG_STATE (1 << 18)
#define IB_QP_DEST_QPN (1 << 20)
#define IB_AH_GRH 1
#define IB_MGMT_CLASS_CM 0x07
#define MAX_ERRNO 4095

volatile const struct apm_config cfg = {};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, APM_CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* One scratch record per CPU: records are too big for the stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct apm_record);
} scratch SEC(".maps");

struct join_key {
	__u64 pid_tgid;
	__u32 slot;
	__u32 _pad;
};

/* Records captured at entry, waiting for their exit on the same thread. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct join_key);
	__type(value, struct apm_record);
} inflight SEC(".maps");

/* Low 32 bits of the TIDs of MADs written through ib_umad. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} umad_tids SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &idx);
	if (v)
		(*v)++;
}

static __always_inline __u64 wakeup_flags(void)
{
	if (!cfg.wakeup_bytes)
		return 0;
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) + sizeof(struct apm_record) >= cfg.wakeup_bytes ?
		       BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

/* Batched wakeups: the reader is woken only once cfg.wakeup_bytes are
 * queued, and otherwise polls on a short timer (collector.pollInterval). */
static __always_inline void emit(struct apm_record *r)
{
	if (bpf_ringbuf_output(&events, r, sizeof(*r), wakeup_flags()))
		count(APM_CNT_LOST);
}

/* Zero a record and fill in the common header. */
static __always_inline void fill_header(struct apm_record *r, __u8 kind, __u64 ip)
{
	__builtin_memset(r, 0, sizeof(*r));
	__u64 id = bpf_get_current_pid_tgid();
	r->boot_ns = bpf_ktime_get_boot_ns();
	r->func_ip = ip;
	r->cpu = bpf_get_smp_processor_id();
	r->pid = id >> 32;
	r->tid = (__u32)id;
	r->kind = kind;
	bpf_get_current_comm(r->comm, sizeof(r->comm));
}

/* A zeroed scratch record with the common header filled in. */
static __always_inline struct apm_record *new_record(__u8 kind, __u64 ip)
{
	__u32 zero = 0;
	struct apm_record *r = bpf_map_lookup_elem(&scratch, &zero);
	if (!r)
		return 0;
	fill_header(r, kind, ip);
	return r;
}

static __always_inline void read_dev(struct apm_record *r, struct ib_device *dev)
{
	if (dev)
		bpf_probe_read_kernel_str(r->dev, sizeof(r->dev), dev->name);
}

/* u8 before 5.13, u32 after. */

static __always_inline __u32 read_u32_or_u8(const void *p, __u32 size)
{
	if (size == 1) {
		__u8 v = 0;
		bpf_probe_read_kernel(&v, 1, p);
		return v;
	}
	__u32 v = 0;
	bpf_probe_read_kernel(&v, 4, p);
	return v;
}

static __always_inline void read_qp(struct apm_record *r, struct ib_qp *qp)
{
	if (!qp)
		return;
	struct ib_qp *real = BPF_CORE_READ(qp, real_qp);
	if (real)
		qp = real;
	read_dev(r, BPF_CORE_READ(qp, device));
	r->qpn = BPF_CORE_READ(qp, qp_num);
	r->qp_type = BPF_CORE_READ(qp, qp_type);
	struct ib_uqp_object *uobj = BPF_CORE_READ(qp, uobject);
	if (uobj) {
		r->flags |= APM_F_USER;
		r->uhandle = BPF_CORE_READ(uobj, uevent.uobject.id);
		r->user_handle = BPF_CORE_READ(uobj, uevent.uobject.user_handle);
	} else {
		r->flags |= APM_F_KERNEL;
	}
}

static __always_inline void read_path(struct apm_path *p, struct rdma_ah_attr *ah)
{
	p->port = read_u32_or_u8(__builtin_preserve_access_index(&ah->port_num),
				 bpf_core_field_size(ah->port_num));
	if (BPF_CORE_READ(ah, type) == RDMA_AH_ATTR_TYPE_IB)
		p->dlid = BPF_CORE_READ(ah, ib.dlid);
	p->sgid_index = BPF_CORE_READ(ah, grh.sgid_index);
	p->is_global = BPF_CORE_READ(ah, ah_flags) & IB_AH_GRH;
	bpf_probe_read_kernel(p->dgid, sizeof(p->dgid),
			      __builtin_preserve_access_index(&ah->grh.dgid));
}

static __always_inline void join_put(struct apm_record *r, __u32 slot)
{
	struct join_key k = { .pid_tgid = bpf_get_current_pid_tgid(), .slot = slot };
	if (bpf_map_update_elem(&inflight, &k, r, BPF_ANY))
		count(APM_CNT_INFLIGHT_FULL);
}

static __always_inline void join_done(__u32 slot, __s64 ret)
{
	struct join_key k = { .pid_tgid = bpf_get_current_pid_tgid(), .slot = slot };
	struct apm_record *r = bpf_map_lookup_elem(&inflight, &k);
	if (!r) {
		count(APM_CNT_UNJOINED);
		return;
	}
	r->ret = (__s32)ret;
	emit(r);
	bpf_map_delete_elem(&inflight, &k);
}

/* ---- QP modify: ib_modify_qp, ib_modify_qp_with_udata ---- */

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

/* Direct (BTF) reads for the fexit path: plain loads the verifier turns
 * into fault-safe PROBE_MEM loads, much cheaper than bpf_probe_read_kernel.
 * qp->uobject points to a type vmlinux only forward-declares, so it is read
 * with BPF_CORE_READ. */
static __always_inline void read_path_btf(struct apm_path *p, struct rdma_ah_attr *ah)
{
	if (bpf_core_field_size(ah->port_num) == 1)
		p->port = *(__u8 *)&ah->port_num;
	else
		p->port = ah->port_num;
	if (ah->type == RDMA_AH_ATTR_TYPE_IB) /* RoCE keeps a MAC in this union */
		p->dlid = ah->ib.dlid;
	p->sgid_index = ah->grh.sgid_index;
	p->is_global = ah->ah_flags & IB_AH_GRH;
	__u64 hi = ah->grh.dgid.global.subnet_prefix, lo = ah->grh.dgid.global.interface_id;
	__builtin_memcpy(p->dgid, &hi, 8);
	__builtin_memcpy(p->dgid + 8, &lo, 8);
}

static __always_inline void read_qp_btf(struct apm_record *r, struct ib_qp *qp)
{
	struct ib_qp *real = qp->real_qp;
	if (real)
		qp = real;
	struct ib_device *dev = qp->device;
	if (dev) {
		__u64 *dst = (__u64 *)r->dev;
#pragma unroll
		for (int i = 0; i < APM_DEV_NAME_LEN / 8; i++)
			dst[i] = *(__u64 *)&dev->name[i * 8];
		r->dev[APM_DEV_NAME_LEN - 1] = 0;
	}
	r->qpn = qp->qp_num;
	r->qp_type = qp->qp_type;
	struct ib_uqp_object *uobj = qp->uobject;
	if (uobj) {
		r->flags |= APM_F_USER;
		r->uhandle = BPF_CORE_READ(uobj, uevent.uobject.id);
		r->user_handle = BPF_CORE_READ(uobj, uevent.uobject.user_handle);
	} else {
		r->flags |= APM_F_KERNEL;
	}
}

/* fexit sees the arguments and the return code at once: one program, no
 * join map, the record built in place in the ring buffer. ib_modify_qp*
 * leave the fields read here unchanged (the core only fills the RoCE dmac
 * and sgid_attr of the caller's attr). Both targets share the first three
 * arguments; bpf_get_func_ret reads the return code whatever the argument
 * count. */
SEC("fexit/ib_modify_qp")
int BPF_PROG(fexit_modify, struct ib_qp *qp, struct ib_qp_attr *attr, int mask)
{
	if (!qp || !attr)
		return 0;
	__u64 flags = wakeup_flags();
	struct apm_record *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		count(APM_CNT_LOST);
		return 0;
	}
	__u64 ret = 0;
	bpf_get_func_ret(ctx, &ret);
	fill_header(r, APM_KIND_MODIFY, bpf_get_func_ip(ctx));
	r->ret = (int)ret;
	read_qp_btf(r, qp);
	r->attr_mask = mask;
	if (mask & IB_QP_STATE)
		r->state = attr->qp_state;
	if (mask & IB_QP_PATH_MIG_STATE)
		r->mig_state = attr->path_mig_state;
	if (mask & IB_QP_DEST_QPN)
		r->dest_qpn = attr->dest_qp_num;
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
	bpf_ringbuf_submit(r, flags);
	return 0;
}

SEC("kprobe/ib_modify_qp")
int BPF_KPROBE(kprobe_modify, struct ib_qp *qp, struct ib_qp_attr *attr, int mask)
{
	struct apm_record *r = modify_record(qp, attr, mask, bpf_get_func_ip(ctx));
	if (r)
		join_put(r, APM_SLOT_MODIFY);
	return 0;
}

SEC("kretprobe/ib_modify_qp")
int BPF_KRETPROBE(kretprobe_modify, int ret)
{
	join_done(APM_SLOT_MODIFY, ret);
	return 0;
}

/* ---- QP async events: (struct ib_event *, void *) handlers ---- */

static __always_inline void qp_event(struct ib_event *ev, __u64 ip)
{
	struct apm_record *r = new_record(APM_KIND_QP_EVENT, ip);
	if (!r)
		return;
	r->ev_type = BPF_CORE_READ(ev, event);
	read_qp(r, BPF_CORE_READ(ev, element.qp));
	if (!r->dev[0])
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
	qp_event(ev, bpf_get_func_ip(ctx));
	return 0;
}

/* Driver hooks: raw event numbers, QPN only. */
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
	raw_qp_event(BPF_CORE_READ(qp, qpn), type, 0, bpf_get_func_ip(ctx));
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
	raw_qp_event(BPF_CORE_READ(qp, qpn), type, APM_F_MLX4, bpf_get_func_ip(ctx));
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
	port_event(ev, bpf_get_func_ip(ctx));
	return 0;
}

/* ---- ib_cm_notify(cm_id, event) ---- */

static __always_inline void notify_entry(struct ib_cm_id *id, int event, __u64 ip)
{
	struct apm_record *r = new_record(APM_KIND_CM_NOTIFY, ip);
	if (!r)
		return;
	r->obj = (__u64)id;
	r->ev_type = event;
	read_dev(r, BPF_CORE_READ(id, device));
	r->state = BPF_CORE_READ(id, state);
	r->mig_state = BPF_CORE_READ(id, lap_state);
	r->local_id = bpf_ntohl(BPF_CORE_READ(id, local_id));
	r->remote_id = bpf_ntohl(BPF_CORE_READ(id, remote_id));
	struct cm_id_private *priv = (void *)id; /* id is its first member */
	r->qpn = bpf_ntohl(BPF_CORE_READ(priv, local_qpn)) & 0xffffff;
	join_put(r, APM_SLOT_NOTIFY);
}

SEC("fentry/ib_cm_notify")
int BPF_PROG(fentry_notify, struct ib_cm_id *id, int event)
{
	notify_entry(id, event, bpf_get_func_ip(ctx));
	return 0;
}

SEC("fexit/ib_cm_notify")
int BPF_PROG(fexit_notify)
{
	__u64 ret = 0;
	bpf_get_func_ret(ctx, &ret);
	join_done(APM_SLOT_NOTIFY, (int)ret);
	return 0;
}

SEC("kprobe/ib_cm_notify")
int BPF_KPROBE(kprobe_notify, struct ib_cm_id *id, int event)
{
	notify_entry(id, event, bpf_get_func_ip(ctx));
	return 0;
}

SEC("kretprobe/ib_cm_notify")
int BPF_KRETPROBE(kretprobe_notify, int ret)
{
	join_done(APM_SLOT_NOTIFY, ret);
	return 0;
}

/* ---- cm_lap_handler / cm_apr_handler(struct cm_work *) ---- */

/* Offsets in the CM payload, after the 24-byte MAD header (IBTA vol 1,
 * tables 115 and 117; kernel ibta_vol1_c12.h). */
#define CM_PAYLOAD 24
#define CM_LOCAL_COMM_ID (CM_PAYLOAD + 0)
#define CM_REMOTE_COMM_ID (CM_PAYLOAD + 4)
#define CM_LAP_ALT_LOCAL_LID (CM_PAYLOAD + 20)
#define CM_APR_STATUS (CM_PAYLOAD + 9)
#define CM_ATTR_LAP 0x19
#define CM_ATTR_APR 0x1A

static __always_inline void cm_payload(struct apm_record *r, const __u8 *mad)
{
	__u32 v = 0;
	bpf_probe_read_kernel(&v, 4, mad + CM_LOCAL_COMM_ID);
	r->local_id = bpf_ntohl(v);
	bpf_probe_read_kernel(&v, 4, mad + CM_REMOTE_COMM_ID);
	r->remote_id = bpf_ntohl(v);
}

static __always_inline void handler_entry(struct cm_work *work, __u64 ip)
{
	struct apm_record *r = new_record(APM_KIND_CM_HANDLER, ip);
	if (!r)
		return;
	struct ib_mad_recv_wc *wc = BPF_CORE_READ(work, mad_recv_wc);
	const __u8 *mad = BPF_CORE_READ(wc, recv_buf.mad);
	struct ib_wc *w = BPF_CORE_READ(wc, wc);
	read_dev(r, BPF_CORE_READ(w, qp, device));
	if (mad) {
		struct ib_mad_hdr *hdr = (void *)mad;
		r->attr_id = bpf_ntohs(BPF_CORE_READ(hdr, attr_id));
		r->mgmt_class = BPF_CORE_READ(hdr, mgmt_class);
		cm_payload(r, mad);
		if (r->attr_id == CM_ATTR_LAP) {
			__u16 lid = 0;
			bpf_probe_read_kernel(&lid, 2, mad + CM_LAP_ALT_LOCAL_LID);
			r->alt_dlid = bpf_ntohs(lid);
		} else if (r->attr_id == CM_ATTR_APR) {
			bpf_probe_read_kernel(&r->status, 1, mad + CM_APR_STATUS);
		}
	}
	join_put(r, APM_SLOT_HANDLER);
}

SEC("fentry/cm_lap_handler")
int BPF_PROG(fentry_handler, struct cm_work *work)
{
	handler_entry(work, bpf_get_func_ip(ctx));
	return 0;
}

SEC("fexit/cm_lap_handler")
int BPF_PROG(fexit_handler)
{
	__u64 ret = 0;
	bpf_get_func_ret(ctx, &ret);
	join_done(APM_SLOT_HANDLER, (int)ret);
	return 0;
}

SEC("kprobe/cm_lap_handler")
int BPF_KPROBE(kprobe_handler, struct cm_work *work)
{
	handler_entry(work, bpf_get_func_ip(ctx));
	return 0;
}

SEC("kretprobe/cm_lap_handler")
int BPF_KRETPROBE(kretprobe_handler, int ret)
{
	join_done(APM_SLOT_HANDLER, ret);
	return 0;
}

/* ---- MADs: tracepoints ib_mad:ib_mad_ib_send_mad, ib_mad_recv_done_handler,
 * ib_umad:ib_umad_write. The tracepoints' arguments (TP_PROTO) are the
 * same in 6.1 and 6.12; their trace record layout is not, and is not used. */

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

/* ---- QP create (exit only: the new QP is the return value) ---- */

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
	qp_created((__u64)ret, bpf_get_func_ip(ctx));
	return 0;
}

/* ---- QP destroy: ib_destroy_qp_user(qp, udata), entry and exit joined ---- */

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
	__u64 ret = 0;
	bpf_get_func_ret(ctx, &ret);
	join_done(APM_SLOT_DESTROY, (int)ret);
	return 0;
}

SEC("kprobe/ib_destroy_qp_user")
int BPF_KPROBE(kprobe_destroy, struct ib_qp *qp)
{
	destroy_entry(qp, bpf_get_func_ip(ctx));
	return 0;
}

SEC("kretprobe/ib_destroy_qp_user")
int BPF_KRETPROBE(kretprobe_destroy, int ret)
{
	join_done(APM_SLOT_DESTROY, ret);
	return 0;
}
