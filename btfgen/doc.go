// Package btfgen writes external BTF for the RDMA modules that carry none
// (MLNX_OFED and DOCA-OFED builds, RHEL 8-class kernels), from what the
// host has: a module file's own .BTF section (what distribution kernels
// ship), or pahole run on a module with debug info (a -dbg or debuginfo
// package, an OFED debug build). It writes DIR/MODULE.btf, the layout the
// collector reads (--btf, /var/lib/apmwatch/btf/$(uname -r)), and says
// exactly what is missing.
//
//	gen.go     the modules wanted, one report line each
//	find.go    finding a module's file: names, compression, vermagic
//	source.go  its BTF: the .BTF section, or pahole on its DWARF
//	min.go     --min: only the types and members the probes read
package btfgen
