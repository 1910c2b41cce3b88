#!/bin/sh
# Builds NVIDIA's out-of-tree RDMA stack (mlnx-ofa_kernel, the kernel part
# of MLNX_OFED / DOCA-OFED) for one Debian kernel, the way its Debian
# packaging does (debian/rules with WITH_DKMS=0), and keeps the result:
#
#   lab/ofed/build.sh COMMIT KERNEL OUTDIR
#   e.g. lab/ofed/build.sh c5f8c91f 6.1.0-57-amd64 .cache/ofed/24.07-6.1.0-57-amd64
#
# COMMIT names a mlnx-ofa_kernel source tree in the git repository OFED_GIT
# (a git dir; default: $CACHE/ofed/mlnx-ofa_kernel.git, cloned from OFED_URL,
# default https://github.com/knneth/mlnx-ofa_kernel, a public mirror of
# NVIDIA's source drops, when it is not there; its c5f8c91f is "OFED
# 24.07-0.6.1.0", mlnx-ofa_kernel 24.07-OFED.24.07.0.6.1.1).
#
# KERNEL is the release of an installed linux-headers package
# (/usr/src/linux-headers-KERNEL, or KSRC_OBJ=DIR).
#
# Not yet part of the lab: nothing runs this script (make test, lab-run).
# Run once end to end (66 min on 2 cores beside other work), it gave OFED
# 24.07's ib_core, ib_cm, ib_uverbs, mlx5_core and mlx5_ib (and 25 more)
# for Debian 12's 6.1.0-57-amd64, with DWARF and no .BTF (kbuild: "Skipping
# BTF generation ... due to unavailability of vmlinux"), and the lab's ibsim
# and apmlab modules built against them unchanged.
#
# OUTDIR gets what the Debian packages would install, rooted at OUTDIR:
#
#   OUTDIR/lib/modules/KERNEL/updates/dkms/*.ko   mlnx-ofed-kernel-modules: the
#                                                 modules, with DWARF, not stripped
#   OUTDIR/usr/src/ofa_kernel/ARCH/KERNEL/        the "mod_dev_dir" that out-of-tree
#                                                 modules build against (include/,
#                                                 configure.mk.kernel, compat*,
#                                                 ofed_scripts/, Module.symvers)
#   OUTDIR/build.log                              configure, make and install output
#   OUTDIR/modules.txt                            each .ko: size, vermagic, sections
#   OUTDIR/.complete                              the commit and kernel it holds
#
# Idempotent: a complete OUTDIR for the same commit and kernel is left as it
# is. The build goes to OUTDIR.partial and is renamed into place at the end;
# a failed build leaves OUTDIR.partial (and its log) for a look, and the next
# run starts it again. Every compile runs under nice -n 19 with JOBS jobs
# (default 2). OFED_CONF replaces the configure options (default: the ones
# debian/rules takes from ofed_scripts/dkms_ofed get-config).
set -eu

me=lab/ofed/build.sh
die() { echo "$me: $*" >&2; exit 1; }

[ $# -eq 3 ] || die "usage: $me COMMIT KERNEL OUTDIR"
commit=$1 kver=$2 out=${3%/}
here=$(cd "$(dirname "$0")/../.." && pwd)
git_dir=${OFED_GIT:-${CACHE:-$here/.cache}/ofed/mlnx-ofa_kernel.git}
jobs=${JOBS:-2}
case $jobs in '' | *[!0-9]*) die "JOBS must be a number, not '$jobs'" ;; esac

for t in git make gcc patch autoconf automake readelf modinfo flock; do
	command -v "$t" >/dev/null 2>&1 || die "$t is not installed"
done

if [ ! -d "$git_dir" ] && [ -z "${OFED_GIT:-}" ]; then
	mkdir -p "$(dirname "$git_dir")"
	git clone -q --bare "${OFED_URL:-https://github.com/knneth/mlnx-ofa_kernel}" "$git_dir.tmp" &&
		mv "$git_dir.tmp" "$git_dir" || die "cannot clone ${OFED_URL:-https://github.com/knneth/mlnx-ofa_kernel}"
fi
[ -d "$git_dir" ] || die "no git repository at $git_dir (set OFED_GIT)"
sha=$(git --git-dir="$git_dir" rev-parse --verify -q "$commit^{commit}") ||
	die "$commit is not a commit in $git_dir"

# The kernel's build (obj) and source directories, as /lib/modules/KERNEL/
# build and source point on Debian: the arch package's Makefile includes the
# -common package's. OFED's configure would find them from --kernel-sources=
# /lib/modules/KERNEL/build (ofed_scripts/configure: "build" -> "source");
# here they are named explicitly.
kobj=${KSRC_OBJ:-/usr/src/linux-headers-$kver}
[ -f "$kobj/.config" ] || die "no kernel headers at $kobj (install linux-headers-$kver or set KSRC_OBJ)"
ksrc=${KSRC:-$(sed -n 's|^include \(/.*\)/Makefile$|\1|p' "$kobj/Makefile" | head -n 1)}
[ -n "$ksrc" ] || ksrc=$kobj
[ -d "$ksrc/include" ] || die "no kernel source headers at $ksrc (set KSRC)"

mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
stamp="commit=$sha kernel=$kver"
if [ -f "$out/.complete" ] && [ "$(cat "$out/.complete")" = "$stamp" ]; then
	echo "ofed: $out is complete (mlnx-ofa_kernel $sha for $kver)"
	exit 0
fi
[ ! -e "$out" ] || [ -f "$out/.complete" ] || die "$out exists but is not an OFED build of this script: remove it"

# One build of OUTDIR at a time (util-linux flock; the lock file stays).
exec 9>"$out.lock"
flock -n 9 || die "another build of $out is running (lock: $out.lock)"
part=$out.partial
rm -rf "$part"
mkdir -p "$part"
log=$part/build.log
src=$part/build
: >"$log"
start=$(date +%s)
# fail STEP first|last: one line naming the step, the first (make: the
# compiler's) or last (configure: its verdict) error line of the log, and the log.
fail() {
	e=$(grep -E 'error[: ]|Error [0-9]' "$log" 2>/dev/null | if [ "$2" = first ]; then head -n 1; else tail -n 1; fi | cut -c1-240) || e=
	die "$1 failed${e:+: $e} (log: $log)"
}

# The source tree. Mirrors may hold the tree without its largest generated
# files: compat/configure and compat/autom4te.cache/* come from compat/
# configure.ac by autoconf, and ofed_scripts/configure runs compat/autogen.sh
# itself when compat/configure is not there ("if [[ ! -x configure ||
# $FORCE_AUTOGEN -eq 1 ]]; then ex ./autogen.sh"). Anything else missing is
# an error.
tree=$part/tree.txt
git --git-dir="$git_dir" ls-tree -r "$sha" >"$tree"
missing=$(awk '{ print $3 }' "$tree" | git --git-dir="$git_dir" cat-file --batch-check |
	awk -v tree="$tree" '$2 == "missing" { gone[$1] = 1 }
		END { FS = "\t"; while ((getline l < tree) > 0) { split(l, f, "\t"); split(f[1], a, " "); if (a[3] in gone) print f[2] } }')
rm -f "$tree"
excludes=
for p in $missing; do
	case $p in
	compat/configure | compat/autom4te.cache/*) excludes="$excludes :(exclude)$p" ;;
	*) die "$sha misses $p in $git_dir (an incomplete mirror)" ;;
	esac
done
mkdir -p "$src"
# shellcheck disable=SC2086 # the pathspecs have no blanks
# (git archive names the missing objects on stderr even when excluded.)
git --git-dir="$git_dir" archive -o "$part/src.tar" "$sha" -- . $excludes 2>/dev/null &&
	tar -x -C "$src" -f "$part/src.tar" && rm -f "$part/src.tar" ||
	die "cannot unpack $sha from $git_dir"
# A tree unpacked on a case-insensitive file system has one of Makefile and
# makefile in ofed_scripts/; the build's driver is makefile (the targets kernel
# and install_modules), Makefile is the Kbuild file.
grep -q '^install_modules:' "$src/ofed_scripts/makefile" 2>/dev/null ||
	die "$sha is not an intact mlnx-ofa_kernel tree: ofed_scripts/makefile has no install_modules target (Makefile and makefile merged by a case-insensitive copy?)"

cd "$src"
echo "== mlnx-ofa_kernel $sha ($(sed -n '1s/.*(\(.*\)).*/\1/p' debian/changelog)) for $kver" >>"$log"
echo "== kernel build dir $kobj, source dir $ksrc, $jobs jobs" >>"$log"

# Configure: as debian/rules' override_dh_auto_configure (WITH_DKMS=0):
# compat's files get an old time stamp so that automake's rules do not run
# again, then ./configure with the options ofed_scripts/dkms_ofed get-config
# gives (core, user_mad, user_access, addr_trans, mlx5, mlxfw, ipoib).
# ./configure applies backports/ (ofed_scripts/ofed_patch.sh), writes
# configure.mk.kernel and include/generated/autoconf.h, and runs compat/
# configure, which probes the kernel's headers with test compiles.
find compat -type f -exec touch -t 200012201010 '{}' + || true
opts=${OFED_CONF:-$(./ofed_scripts/dkms_ofed "$kver" "$kobj" get-config 2>>"$log")}
echo "== configure options: $opts" >>"$log"
# shellcheck disable=SC2086 # options are words
nice -n 19 ./configure --kernel-version="$kver" --with-linux="$ksrc" --with-linux-obj="$kobj" \
	$opts --with-njobs="$jobs" >>"$log" 2>&1 || fail configure last
# A backport that did not apply leaves .rej files (ofed_patch.sh uses patch --reject).
rej=$(find . -name '*.rej' | head -n 1)
[ -z "$rej" ] || die "a backport patch did not apply: $rej (log: $log)"

# Build: as mlnx-ofa_kernel.spec's %build ("make %{?_smp_mflags} kernel";
# debian/rules' "make -j$(NJOBS)" is "all": kernel and build_py_scripts).
# The makefile passes CONFIG_DEBUG_INFO from configure (--with-debug-info,
# the default), so kbuild compiles with -g as the kernel's own config does.
nice -n 19 make -j"$jobs" kernel >>"$log" 2>&1 || fail "make kernel" first

# Install: as debian/rules' override_dh_auto_install. On Debian and Ubuntu
# (lsb_release) the makefile's install_modules copies every .ko into
# lib/modules/KERNEL/updates/dkms/; elsewhere it runs kbuild's
# modules_install into INSTALL_MOD_DIR. depmod's files are removed as
# debian/rules does. No strip: debian/rules' override_dh_strip ("strip -g"
# on every .ko) is skipped, as with MLNX_KO_NO_STRIP=1, and nothing signs
# them (WITH_MOD_SIGN=0, the default).
make install_modules INSTALL_MOD_DIR=updates INSTALL_MOD_PATH="$part" KERNELRELEASE="$kver" \
	>>"$log" 2>&1 || fail "make install_modules" first
find "$part/lib/modules" -type f -name 'modules.*' -delete

# The headers tree: as debian/rules' override_dh_auto_install (WITH_DKMS=0):
# mod_dev_dir = /usr/src/ofa_kernel/$(deb_arch)/$(kernelver), deb_arch =
# uname -m; the same files ofed_scripts/dkms_ofed_post_build.sh copies for
# DKMS and mlnx-ofa_kernel.spec's %install for RPM.
dev=$part/usr/src/ofa_kernel/$(uname -m)/$kver
mkdir -p "$dev"
cp -a include/ config* compat* ofed_scripts Module*.symvers "$dev/" ||
	die "cannot copy the headers tree to $dev"

cd "$part"
rm -rf "$src"

# Check what came out: the modules the lab needs, each with DWARF and built
# for this kernel; list every .ko with its size, vermagic and whether it has
# .debug_info and .BTF.
moddir=lib/modules/$kver/updates
[ -d "$moddir" ] || die "make install_modules wrote nothing under $part/$moddir (log: $log)"
need="mlx_compat ib_core ib_cm iw_cm rdma_cm rdma_ucm ib_uverbs ib_umad"
case " $opts " in *" --with-mlx5-mod "*) need="$need mlx5_core mlx5_ib" ;; esac
for m in $need; do
	[ -n "$(find "$moddir" -name "$m.ko")" ] || die "no $m.ko was built (log: $log)"
done
find "$moddir" -name '*.ko' | sort | while read -r ko; do
	vm=$(modinfo -F vermagic "$ko")
	case $vm in "$kver "*) ;; *) die "$ko has vermagic '$vm', not $kver" ;; esac
	sec=$(readelf -S -W "$ko")
	dbg=no btf=no
	case $sec in *" .debug_info "*) dbg=yes ;; esac
	case $sec in *" .BTF "*) btf=yes ;; esac
	[ $dbg = yes ] || die "$ko has no .debug_info (log: $log)"
	printf '%s %s debug_info=%s btf=%s vermagic=%s\n' "$ko" "$(wc -c <"$ko")" $dbg $btf "$vm"
done >modules.txt
echo "== built in $(($(date +%s) - start)) s" >>"$log"

echo "$stamp" >.complete
cd /
rm -rf "$out"
mv "$part" "$out"
echo "ofed: built mlnx-ofa_kernel $sha for $kver into $out in $(($(date +%s) - start)) s"
