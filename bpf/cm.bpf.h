/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The CM: ib_cm_notify (migrate, establish) and the LAP/APR handlers
 * (cm_lap_handler, cm_apr_handler), each with its return code. fentry +
 * fexit, else kprobe + kretprobe; entry and exit joined (join_put,
 * join_done; ib_cm_notify's fentry and fexit through per-task storage).
 */
#ifndef APMWATCH_CM_BPF_H
#define APMWATCH_CM_BPF_H

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

/* The BTF variant joins through per-task storage, not the inflight hash:
 * the entry keeps the two states the record must show as they were at the
 * call (a successful COMM_EST or PATH_MIG changes them), and the exit,
 * which sees the arguments and the result, builds the record in the ring
 * with direct loads (as fexit_modify). */
struct notify_at_call {
	__u8 state;
	__u8 lap_state;
	__u8 valid;
	__u8 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct notify_at_call);
} notify_calls SEC(".maps");

SEC("fentry/ib_cm_notify")
int BPF_PROG(fentry_notify, struct ib_cm_id *id, int event)
{
	if (!id)
		return 0;
	struct notify_at_call *c = bpf_task_storage_get(&notify_calls, bpf_get_current_task_btf(), 0,
							 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!c) {
		count(APM_CNT_INFLIGHT_FULL);
		return 0;
	}
	c->state = id->state;
	c->lap_state = id->lap_state;
	c->valid = 1;
	return 0;
}

SEC("fexit/ib_cm_notify")
int BPF_PROG(fexit_notify, struct ib_cm_id *id, int event, int ret)
{
	struct notify_at_call *c = bpf_task_storage_get(&notify_calls, bpf_get_current_task_btf(), 0, 0);
	if (!c || !c->valid || !id) {
		count(APM_CNT_UNJOINED);
		return 0;
	}
	c->valid = 0;
	struct apm_record *r = reserve_short_btf(APM_KIND_CM_NOTIFY, bpf_get_func_ip(ctx));
	if (!r)
		return 0;
	r->obj = (__u64)id;
	r->ev_type = event;
	r->ret = ret;
	r->state = c->state;
	r->mig_state = c->lap_state;
	read_dev_btf(r, id->device);
	r->local_id = bpf_ntohl(id->local_id);
	r->remote_id = bpf_ntohl(id->remote_id);
	/* local_qpn lies past the ib_cm_id the verifier knows: a probe read */
	struct cm_id_private *priv = (void *)id; /* id is its first member */
	r->qpn = bpf_ntohl(BPF_CORE_READ(priv, local_qpn)) & 0xffffff;
	bpf_ringbuf_submit(r, APM_RB_FLAGS);
	return 0;
}

SEC("kprobe/ib_cm_notify")
int BPF_KPROBE(kprobe_notify, struct ib_cm_id *id, int event)
{
	notify_entry(id, event, kprobe_ip(ctx));
	return 0;
}

SEC("kretprobe/ib_cm_notify")
int BPF_KRETPROBE(kretprobe_notify, int ret)
{
	join_done(APM_SLOT_NOTIFY, ret);
	return 0;
}

/* ---- cm_lap_handler / cm_apr_handler(struct cm_work *) ---- */

/* The handlers' record is stamped at the entry (their exit cannot read the
 * work item: the CM may have freed it) and stays in the inflight hash until
 * the exit, where the collector sees it and keeps its watermarks below it
 * (collector/mark.go). Per-task storage would be cheaper but invisible to
 * the collector, so a mark could pass a handler still running. */

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
	fexit_join(ctx, APM_SLOT_HANDLER);
	return 0;
}

SEC("kprobe/cm_lap_handler")
int BPF_KPROBE(kprobe_handler, struct cm_work *work)
{
	handler_entry(work, kprobe_ip(ctx));
	return 0;
}

SEC("kretprobe/cm_lap_handler")
int BPF_KRETPROBE(kretprobe_handler, int ret)
{
	join_done(APM_SLOT_HANDLER, ret);
	return 0;
}

#endif
