/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Minimal CO-RE views of the kernel types the probes read. Only the fields
 * used are named; offsets come from the running kernel's BTF (vmlinux and
 * module BTF) at load time, so member order and padding here do not matter.
 * Fields that changed type across versions are read size-aware
 * (bpf_core_field_size), see common.bpf.h and modify.bpf.h.
 * Checked against the BTF of Debian 6.1.0-57 and 6.12.117.
 */
#ifndef APMWATCH_IB_TYPES_H
#define APMWATCH_IB_TYPES_H

#define __core __attribute__((preserve_access_index))

/* x86-64 pt_regs with the kernel's field names (bpf_tracing.h uses them
 * when __VMLINUX_H__ is defined). Layout is the stable x86-64 one. */
struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	unsigned long ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
} __core;

/* Enums are only compatible with enums in CO-RE: name the kernel's. */
enum ib_qp_type { IB_QPT_APMWATCH_ };
enum ib_qp_state { IB_QPS_APMWATCH_ };
enum ib_mig_state { IB_MIG_APMWATCH_ };
enum ib_event_type { IB_EVENT_APMWATCH_ };
enum ib_cm_state { IB_CM_APMWATCH_ };
enum ib_cm_lap_state { IB_CM_LAP_APMWATCH_ };
enum rdma_ah_attr_type { RDMA_AH_ATTR_TYPE_IB = 1 }; /* kernel: UNDEFINED, IB, ROCE, OPA */

/* The current task (bpf_get_current_task_btf): cpu exists with
 * CONFIG_THREAD_INFO_IN_TASK (x86). */
struct task_struct {
	int pid;
	int tgid;
	unsigned int cpu;
	char comm[16];
} __core;

struct ib_device {
	char name[64];
	__u32 index;
} __core;

struct ib_uobject {
	__u64 user_handle;
	void *object; /* the ib_qp, ib_cq... the uobject stands for */
	int id;
} __core;

/* ib_uverbs' command buffers (6.12 wraps the bundle's header fields in a
 * struct_group: CO-RE finds them through the anonymous members). */
struct ib_udata {
	const void *inbuf;
	__u64 inlen;
} __core;

/* The file's object table: every uobject by its handle (an xarray since
 * 5.1). */
struct xarray {
	void *xa_head;
} __core;

struct xa_node {
	unsigned char shift;
	void *slots[64];
} __core;

struct ib_uverbs_file {
	struct xarray idr;
} __core;

struct uverbs_attr_bundle {
	struct ib_udata ucore;
	struct ib_uverbs_file *ufile;
} __core;

struct ib_uevent_object {
	struct ib_uobject uobject;
} __core;

/* qp->uobject is a struct ib_uqp_object * since 5.x (both 6.1 and 6.12). */
struct ib_uqp_object {
	struct ib_uevent_object uevent;
} __core;

struct ib_qp {
	struct ib_device *device;
	struct ib_qp *real_qp;
	struct ib_uqp_object *uobject;
	__u32 qp_num;
	enum ib_qp_type qp_type;
} __core;

union ib_gid {
	__u8 raw[16];
	struct {
		__u64 subnet_prefix;
		__u64 interface_id;
	} global;
} __core;

struct ib_global_route {
	union ib_gid dgid;
	__u8 sgid_index;
} __core;

struct ib_ah_attr {
	__u16 dlid;
	__u8 src_path_bits;
} __core;

struct rdma_ah_attr {
	struct ib_global_route grh;
	__u32 port_num; /* u8 before 5.13: read size-aware */
	__u8 ah_flags;
	enum rdma_ah_attr_type type;
	union {
		struct ib_ah_attr ib; /* only meaningful for RDMA_AH_ATTR_TYPE_IB */
	};
} __core;

struct ib_qp_attr {
	enum ib_qp_state qp_state;
	enum ib_mig_state path_mig_state;
	__u32 dest_qp_num;
	struct rdma_ah_attr ah_attr;
	struct rdma_ah_attr alt_ah_attr;
	__u16 pkey_index;
	__u16 alt_pkey_index;
	__u32 port_num;     /* u8 before 5.13 */
	__u32 alt_port_num; /* u8 before 5.13 */
	__u8 alt_timeout;
} __core;

struct ib_event {
	struct ib_device *device;
	union {
		struct ib_qp *qp;
		__u32 port_num; /* u8 before 5.13 */
	} element;
	enum ib_event_type event;
} __core;

/* ib_cm */
struct ib_cm_id {
	struct ib_device *device;
	enum ib_cm_state state;
	enum ib_cm_lap_state lap_state;
	__u32 local_id;  /* __be32 */
	__u32 remote_id; /* __be32 */
} __core;

/* cm.c private; struct ib_cm_id id is its first member. */
struct cm_id_private {
	struct ib_cm_id id;
	__u32 local_qpn; /* __be32 */
} __core;

struct ib_wc {
	struct ib_qp *qp;
	__u32 src_qp;
	__u32 slid;
	__u8 dlid_path_bits;
	__u32 port_num;
} __core;

struct ib_mad_recv_buf {
	union {
		void *mad;
	};
} __core;

struct ib_mad_recv_wc {
	struct ib_wc *wc;
	struct ib_mad_recv_buf recv_buf;
} __core;

struct cm_work {
	struct ib_mad_recv_wc *mad_recv_wc;
} __core;

/* ib_mad (mad_priv.h) */
struct ib_mad_hdr {
	__u8 base_version;
	__u8 mgmt_class;
	__u8 class_version;
	__u8 method;
	__u16 status;
	__u16 class_specific;
	__u64 tid;     /* __be64 */
	__u16 attr_id; /* __be16 */
} __core;

struct ib_mad_port_private {
	struct ib_device *device;
	int port_num;
} __core;

struct ib_mad_qp_info {
	struct ib_mad_port_private *port_priv;
	struct ib_qp *qp;
} __core;

struct ib_mad_send_buf {
	void *mad;
} __core;

struct ib_ud_wr {
	__u32 remote_qpn;
} __core;

struct ib_mad_send_wr_private {
	struct ib_mad_send_buf send_buf;
	struct ib_ud_wr send_wr;
} __core;

/* drivers: the raw event's argument and the QP it belongs to, as the
 * drivers find it (mlx5: to_mibqp() is container_of(mqp, struct
 * mlx5_ib_qp_base, mqp)->container_mibqp, for trans and raw packet QPs
 * alike; mlx4: container_of(mqp, struct mlx4_ib_qp, mqp)). */
struct mlx5_core_qp {
	int qpn;
} __core;

struct mlx5_ib_qp {
	struct ib_qp ibqp;
} __core;

struct mlx5_ib_qp_base {
	struct mlx5_ib_qp *container_mibqp;
	struct mlx5_core_qp mqp;
} __core;

struct mlx4_qp {
	int qpn;
} __core;

struct mlx4_ib_qp {
	struct ib_qp ibqp;
	struct mlx4_qp mqp;
} __core;

#endif
