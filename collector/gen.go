package collector

// The probes are compiled from ../bpf with clang; the generated Go and the
// object files are committed, so building needs no clang. libbpf's headers
// come from the host (Debian's libbpf-dev) at generate time. The enums of
// bpf/apmwatch.h (record kinds, flags, counters, join slots) reach Go as
// apmApmKind, apmApmFlag, apmApmCounter and apmApmSlot: the read-only
// globals in apmwatch.bpf.c put them in the BTF, and bpf2go writes every
// global's type.
//go:generate go tool bpf2go -tags linux -target amd64 -type apm_record -type apm_path -type apm_modify_entry -cc clang -cflags "-O2 -g -Wall -Werror -D__TARGET_ARCH_x86 -I/usr/include/x86_64-linux-gnu" apm ../bpf/apmwatch.bpf.c -- -I../bpf
