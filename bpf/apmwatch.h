/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Record layouts shared by the probes (apmwatch.bpf.c) and the Go collector.
 * Every C<->Go layout is defined here once: bpf2go -type generates the Go
 * types from the compiled object's BTF. Only fixed-width types, explicit
 * padding, no pointers.
 */
#ifndef APMWATCH_H
#define APMWATCH_H

#define APM_DEV_NAME_LEN 64 /* IB_DEVICE_NAME_MAX */
#define APM_COMM_LEN 16

/* apm_record.kind: the same numbers as event.Kind in Go. */
enum apm_kind {
	APM_KIND_MODIFY = 1,
	APM_KIND_QP_EVENT = 2,
	APM_KIND_PORT_EVENT = 3,
	APM_KIND_CM_NOTIFY = 4,
	APM_KIND_CM_HANDLER = 5,
	APM_KIND_MAD = 6,
	APM_KIND_QP_CREATE = 7,
	APM_KIND_QP_DESTROY = 8,
	APM_KIND_DEV_NAME = 9, /* a device's index and name (registered, renamed): read by the collector, no event */
	/* 10: Go's event.KindModifyEntry; 9 in Go is a reading, no record.
	 * No probe emits it: the collector makes it from an entry still in
	 * the modify entry map (struct apm_modify_entry) or the join map. */
	APM_KIND_MODIFY_ENTRY = 10, /* a modify of APM attributes entered; its modify record follows at the exit */
};

/* apm_record.flags */
enum apm_flag {
	APM_F_HAS_PRIMARY = 1 << 0, /* primary path captured (IB_QP_AV) */
	APM_F_HAS_ALT = 1 << 1,     /* alternate path captured (IB_QP_ALT_PATH) */
	APM_F_USER = 1 << 2,        /* QP owned by userspace (qp->uobject set) */
	APM_F_KERNEL = 1 << 3,      /* QP owned by a kernel ULP */
	APM_F_FROM_UMAD = 1 << 4,   /* MAD written by userspace through ib_umad */
	APM_F_RAW_EVENT = 1 << 5,   /* ev_type is a driver's raw event number */
	APM_F_MLX4 = 1 << 6,        /* with APM_F_RAW_EVENT: mlx4 numbering */
	APM_F_DEV = 1 << 7,         /* dev_index is set */
};

/* Per-CPU counters (array map "counters"). */
enum apm_counter {
	APM_CNT_LOST = 0,         /* ring buffer reserve failures */
	APM_CNT_UNJOINED = 1,     /* exits whose entry was never seen */
	APM_CNT_INFLIGHT_FULL = 2, /* entries dropped: join map full, or no per-task storage */
	APM_CNT_MAX = 4,
};

/* Slots that pair an entry with its exit on one thread. */
enum apm_slot {
	APM_SLOT_MODIFY = 1,
	APM_SLOT_NOTIFY = 2,
	APM_SLOT_HANDLER = 3,
	APM_SLOT_DESTROY = 4,
};

struct apm_path {
	__u32 port;
	__u16 dlid;
	__u16 pkey_index;
	__u8 sgid_index;
	__u8 is_global;
	__u8 timeout;
	__u8 src_path_bits; /* IB: the SLID is the port's LID | these (LMC) */
	__u8 dgid[16];
};

/* A modify of the APM attributes in progress (map modify_at, fentry on
 * ib_modify_qp*): its entry stamp, and what the collector needs to
 * announce a call that is still in progress when it looks (a firmware
 * command can block for a minute): who, which QP, what it sets. */
struct apm_modify_entry {
	__u64 at;        /* bpf_ktime_get_boot_ns() at the entry */
	__u64 func_ip;   /* the hooked function */
	__u32 dev_index; /* with APM_F_DEV in flags */
	__u32 qpn;
	__u32 attr_mask;
	__u8 mig_state;
	__u8 state;
	__u8 qp_type;
	__u8 flags; /* APM_F_DEV, APM_F_USER or APM_F_KERNEL */
};

struct apm_record {
	__u64 boot_ns;    /* bpf_ktime_get_boot_ns() */
	__u64 func_ip;    /* address of the hooked function (0 for tracepoints) */
	__u64 obj;        /* cm_id address (cm-notify); MAD TID (mad) */
	__u64 user_handle; /* user QP: uobject->user_handle */
	__u32 cpu;
	__u32 pid;        /* tgid */
	__u32 tid;
	__u32 qpn;
	__u32 attr_mask;
	__s32 ret;
	__u32 uhandle;    /* user QP: uobject id */
	__u32 dest_qpn;
	__u32 local_id;   /* CM comm ids, host order */
	__u32 remote_id;
	__u32 port;       /* port event, MAD port */
	__u32 mad_qpn;    /* QP a MAD travelled on */
	__u32 remote_qpn; /* MAD send: remote QPN; recv: source QP */
	__u32 dev_index;  /* ib_device.index (APM_F_DEV): the collector knows its name */
	__u16 attr_id;    /* MAD / CM handler attribute id, host order */
	__u16 slid;
	__u16 dlid;
	__u16 alt_dlid;   /* LAP: alternate local port LID of the sender */
	__u8 kind;        /* enum apm_kind */
	__u8 flags;       /* enum apm_flag */
	__u8 qp_type;
	__u8 state;       /* modify: target state; cm-notify: cm state */
	__u8 mig_state;   /* modify: path_mig_state; cm-notify: lap state */
	__u8 ev_type;     /* ib_event_type (or raw driver event) */
	__u8 mgmt_class;
	__u8 method;
	__u8 dir;         /* MAD: 1 send, 2 recv */
	__u8 status;      /* APR status */
	__u8 _pad[2];
	__u32 took_us;    /* entry/exit records: microseconds from entry to exit (0: under 1 us or unknown) */
	char comm[APM_COMM_LEN];
	/* A record without paths (neither APM_F_HAS_PRIMARY nor APM_F_HAS_ALT)
	 * ends here: APM_RECORD_SHORT bytes go to the ring buffer. */
	struct apm_path primary;
	struct apm_path alt;
	/* A record with paths ends here (APM_RECORD_PATHS); only
	 * APM_KIND_DEV_NAME records carry a name. */
	char dev[APM_DEV_NAME_LEN];
};

#define APM_RECORD_SHORT __builtin_offsetof(struct apm_record, primary)
#define APM_RECORD_PATHS __builtin_offsetof(struct apm_record, dev)

/* Load-time settings: a volatile const in .rodata, set before load. */
struct apm_config {
	__u8 all_mads; /* 0: only CM-class MADs (0x07); 1: every MAD */
	__u8 _pad[3];
};

#endif
