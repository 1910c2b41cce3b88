/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The CM: ib_cm_notify (migrate, establish) and the LAP/APR handlers
 * (cm_lap_handler, cm_apr_handler), each with its return code. fentry +
 * fexit, else kprobe + kretprobe; entry and exit joined (join_put,
 * join_done).
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

SEC("fentry/ib_cm_notify")
int BPF_PROG(fentry_notify, struct ib_cm_id *id, int event)
{
	notify_entry(id, event, bpf_get_func_ip(ctx));
	return 0;
}

SEC("fexit/ib_cm_notify")
int BPF_PROG(fexit_notify)
{
	fexit_join(ctx, APM_SLOT_NOTIFY);
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
	handler_entry(work, bpf_get_func_ip(ctx));
	return 0;
}

SEC("kretprobe/cm_lap_handler")
int BPF_KRETPROBE(kretprobe_handler, int ret)
{
	join_done(APM_SLOT_HANDLER, ret);
	return 0;
}

#endif
