//go:build ignore
// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * apmwatch probes: QP modify, QP async events, port events, CM notify and
 * LAP/APR handling, CM MADs on the wire, QP create/destroy. One record type
 * (struct apm_record, apmwatch.h) for everything. Every program exists as a
 * fentry/fexit (or tp_btf) variant and a kprobe/kretprobe (or raw_tp)
 * variant; the collector picks one per hook (collector/hooks.go).
 *
 * This is the one file bpf2go compiles; each hook family is a header:
 *   common.bpf.h   maps, config, record building, QP reads, entry/exit join
 *   modify.bpf.h   ib_modify_qp, ib_modify_qp_with_udata
 *   event.bpf.h    QP async events (generic, mlx5, mlx4), port events
 *   cm.bpf.h       ib_cm_notify, cm_lap_handler, cm_apr_handler
 *   mad.bpf.h      MAD send/receive and ib_umad write tracepoints
 *   qp_life.bpf.h  QP create and destroy
 *   dev.bpf.h      device names (register, rename)
 *   uverbs.bpf.h   APM modifies ib_uverbs refuses before the verbs layer
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

/* The enums bpf2go turns into Go constants (gen.go, -type) must be in the
 * object's BTF: these read-only globals name them; nothing reads them. */
const volatile enum apm_kind apm_kind_btf = 0;
const volatile enum apm_flag apm_flag_btf = 0;
const volatile enum apm_counter apm_counter_btf = 0;
const volatile enum apm_slot apm_slot_btf = 0;

#include "common.bpf.h"
#include "uverbs.bpf.h"
#include "modify.bpf.h"
#include "event.bpf.h"
#include "cm.bpf.h"
#include "mad.bpf.h"
#include "qp_life.bpf.h"
#include "dev.bpf.h"
