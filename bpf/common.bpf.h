/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * What every hook family shares: kernel constants, the load-time config,
 * the maps, building and emitting records, reading a QP, and joining an
 * entry with its exit. Included once, by apmwatch.bpf.c.
 */
#ifndef APMWATCH_COMMON_BPF_H
#define APMWATCH_COMMON_BPF_H

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

/* Each ib_modify_qp* call of the APM attributes in progress (fentry), for
 * its fexit: a modify record is stamped at the entry (as the kprobe
 * variant's), the collector keeps its watermarks below the oldest entry
 * here and announces a call it finds still in progress
 * (APM_KIND_MODIFY_ENTRY, made from this entry). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct join_key);
	__type(value, struct apm_modify_entry);
} modify_at SEC(".maps");

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

/* The probes never wake the reader: it polls on a short timer
 * (collector.pollInterval) and reads until the ring is empty. A wakeup is
 * an interrupt (irq_work); one per record, or per record past a threshold
 * while the reader is behind, cost more than the rest of the probe, and
 * even the threshold's check (bpf_ringbuf_query) was a fifth of it
 * (docs/performance.md). */
#define APM_RB_FLAGS BPF_RB_NO_WAKEUP

static __always_inline void emit(struct apm_record *r)
{
	long err;
	if (r->kind == APM_KIND_DEV_NAME)
		err = bpf_ringbuf_output(&events, r, sizeof(*r), APM_RB_FLAGS);
	else if (r->flags & (APM_F_HAS_PRIMARY | APM_F_HAS_ALT))
		err = bpf_ringbuf_output(&events, r, APM_RECORD_PATHS, APM_RB_FLAGS);
	else /* no paths: the record ends before them */
		err = bpf_ringbuf_output(&events, r, APM_RECORD_SHORT, APM_RB_FLAGS);
	if (err)
		count(APM_CNT_LOST);
}

/* The traced function's address in a kprobe: bpf_get_func_ip where the
 * kernel has it (5.15 and later), else the probed instruction's address:
 * x86's kprobe leaves the ip one past its int3, and a kprobe on ftrace sets
 * it so as well (kernels without the helper have no IBT, so the probe sits
 * at the function's first byte). A CO-RE check picks the branch at load
 * time; the verifier never walks the other one. */
static __always_inline __u64 kprobe_ip(struct pt_regs *ctx)
{
	if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_get_func_ip))
		return bpf_get_func_ip(ctx);
	return PT_REGS_IP(ctx) - 1;
}

/* The same in a kretprobe, where the ip is the return address: 0 without
 * the helper (the collector then names the hook from its program). */
static __always_inline __u64 kretprobe_ip(struct pt_regs *ctx)
{
	if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_get_func_ip))
		return bpf_get_func_ip(ctx);
	return 0;
}

/* Fill in the common header of a zeroed record. */
static __always_inline void fill_header_fields(struct apm_record *r, __u8 kind, __u64 ip)
{
	__u64 id = bpf_get_current_pid_tgid();
	r->boot_ns = bpf_ktime_get_boot_ns();
	r->func_ip = ip;
	r->cpu = bpf_get_smp_processor_id();
	r->pid = id >> 32;
	r->tid = (__u32)id;
	r->kind = kind;
	bpf_get_current_comm(r->comm, sizeof(r->comm));
}

/* Zero a record and fill in the common header. */
static __always_inline void fill_header(struct apm_record *r, __u8 kind, __u64 ip)
{
	__builtin_memset(r, 0, sizeof(*r));
	fill_header_fields(r, kind, ip);
}

/* The header for BTF programs (fentry, fexit, tp_btf): pid, tid, comm and
 * CPU loaded from the current task, one helper call instead of three. The
 * caller has zeroed the record. */
static __always_inline void fill_header_btf_at(struct apm_record *r, __u8 kind, __u64 ip, __u64 now)
{
	struct task_struct *t = bpf_get_current_task_btf();
	r->boot_ns = now;
	r->func_ip = ip;
	if (bpf_core_field_exists(t->cpu))
		r->cpu = t->cpu;
	else
		r->cpu = bpf_get_smp_processor_id();
	r->pid = t->tgid;
	r->tid = t->pid;
	r->kind = kind;
	__u64 *dst = (__u64 *)r->comm;
	dst[0] = *(__u64 *)&t->comm[0];
	dst[1] = *(__u64 *)&t->comm[8];
}

/* fill_header_btf stamped now. */
static __always_inline void fill_header_btf(struct apm_record *r, __u8 kind, __u64 ip)
{
	fill_header_btf_at(r, kind, ip, bpf_ktime_get_boot_ns());
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

/* The device by its index: the collector knows the names (from the
 * APM_KIND_DEV_NAME records and rdma netlink), so no record copies one. */
static __always_inline void read_dev(struct apm_record *r, struct ib_device *dev)
{
	if (dev) {
		r->dev_index = BPF_CORE_READ(dev, index);
		r->flags |= APM_F_DEV;
	}
}

/* read_dev for BTF programs: a direct load. */
static __always_inline void read_dev_btf(struct apm_record *r, struct ib_device *dev)
{
	if (dev) {
		r->dev_index = dev->index;
		r->flags |= APM_F_DEV;
	}
}

/* Port numbers: u8 before 5.13, u32 after. */
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

/* The owner of a QP: user (uobject set) or kernel ULP. The uverbs handle
 * (id) and the user's handle (user_handle, the first member) come in one
 * probe read of the start of the uobject when the running kernel's BTF
 * puts id in its first 64 bytes, else in two. */
static __always_inline void read_owner(struct apm_record *r, struct ib_uqp_object *uobj)
{
	if (!uobj) {
		r->flags |= APM_F_KERNEL;
		return;
	}
	r->flags |= APM_F_USER;
	struct ib_uobject *u = &uobj->uevent.uobject;
	__u32 id_off = bpf_core_field_offset(u->id);
	if (bpf_core_field_offset(uobj->uevent.uobject) == 0 && bpf_core_field_offset(u->user_handle) == 0 &&
	    bpf_core_field_size(u->id) == 4 && id_off <= 60) {
		__u64 buf[8] = {};
		if (bpf_probe_read_kernel(buf, id_off + 4, uobj) == 0) {
			r->user_handle = buf[0];
			r->uhandle = *(__u32 *)((__u8 *)buf + id_off);
		}
		return;
	}
	r->uhandle = BPF_CORE_READ(uobj, uevent.uobject.id);
	r->user_handle = BPF_CORE_READ(uobj, uevent.uobject.user_handle);
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
	read_owner(r, BPF_CORE_READ(qp, uobject));
}

/* read_qp for BTF programs (fentry, fexit): direct loads, which the
 * verifier turns into fault-safe PROBE_MEM loads, much cheaper than
 * bpf_probe_read_kernel. qp->uobject points to a type vmlinux only
 * forward-declares, so read_owner reads it with BPF_CORE_READ. */
static __always_inline void read_qp_btf(struct apm_record *r, struct ib_qp *qp)
{
	struct ib_qp *real = qp->real_qp;
	if (real)
		qp = real;
	read_dev_btf(r, qp->device);
	r->qpn = qp->qp_num;
	r->qp_type = qp->qp_type;
	read_owner(r, qp->uobject);
}

/* A zeroed short record (no paths) reserved in the ring buffer, its header
 * filled for a BTF program; 0 (counted as lost) when the ring is full. */
static __always_inline struct apm_record *reserve_short_btf(__u8 kind, __u64 ip)
{
	struct apm_record *r = bpf_ringbuf_reserve(&events, APM_RECORD_SHORT, 0);
	if (!r) {
		count(APM_CNT_LOST);
		return 0;
	}
	__builtin_memset(r, 0, APM_RECORD_SHORT);
	fill_header_btf(r, kind, ip);
	return r;
}

/* A zeroed short record (no paths) reserved in the ring buffer, its header
 * filled with helpers (any program type, any context: nothing is shared
 * with another program); 0 (counted as lost) when the ring is full. The
 * caller submits it. */
static __always_inline struct apm_record *reserve_short(__u8 kind, __u64 ip)
{
	struct apm_record *r = bpf_ringbuf_reserve(&events, APM_RECORD_SHORT, 0);
	if (!r) {
		count(APM_CNT_LOST);
		return 0;
	}
	__builtin_memset(r, 0, APM_RECORD_SHORT);
	fill_header_fields(r, kind, ip);
	return r;
}

/* Microseconds since the entry stamp at, saturated. */
static __always_inline __u32 took_us(__u64 at)
{
	__u64 now = bpf_ktime_get_boot_ns();
	__u64 us = now > at ? (now - at) / 1000 : 0;
	return us > 0xffffffff ? 0xffffffff : (__u32)us;
}

/* ---- joining an entry with its exit on one thread (map "inflight") ---- */

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
	r->took_us = took_us(r->boot_ns);
	emit(r);
	bpf_map_delete_elem(&inflight, &k);
}

/* The fexit side of a join: the int return code of the traced function. */
static __always_inline void fexit_join(void *ctx, __u32 slot)
{
	__u64 ret = 0;
	bpf_get_func_ret(ctx, &ret);
	join_done(slot, (int)ret);
}

/* ---- CM MAD payload, read by the CM handlers and the MAD tracepoints ---- */

/* Offsets in the CM payload, after the 24-byte MAD header (IBTA vol 1,
 * tables 115 and 117; kernel ibta_vol1_c12.h). */
#define CM_PAYLOAD 24
#define CM_LOCAL_COMM_ID (CM_PAYLOAD + 0)
#define CM_REMOTE_COMM_ID (CM_PAYLOAD + 4)
#define CM_LAP_ALT_LOCAL_LID (CM_PAYLOAD + 20)
#define CM_APR_STATUS (CM_PAYLOAD + 9)
#define CM_REQ_LOCAL_QPN (CM_PAYLOAD + 32)
#define CM_REP_LOCAL_QPN (CM_PAYLOAD + 12)
#define CM_ATTR_REQ 0x10
#define CM_ATTR_REP 0x13
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

/* The sender's QPN in a REQ or REP (24 bits, the high three bytes of the
 * big-endian word): in a MAD this host sends, the connection's local QP. */
static __always_inline __u32 cm_local_qpn(__u16 attr, const __u8 *mad)
{
	__u32 v = 0;
	if (attr == CM_ATTR_REQ)
		bpf_probe_read_kernel(&v, 4, mad + CM_REQ_LOCAL_QPN);
	else if (attr == CM_ATTR_REP)
		bpf_probe_read_kernel(&v, 4, mad + CM_REP_LOCAL_QPN);
	return bpf_ntohl(v) >> 8;
}

#endif
