#!/usr/bin/env bash
# Installs everything the lab needs on a Debian 12 host (run as root) and
# fetches the lab kernels into the download cache. Idempotent, and fast
# (well under a second) when everything is already in place:
#   - apt-get update once (stamp in $CACHE/setup/);
#   - apt-get install of the host packages and of linux-headers-<ver> for
#     the host suite's lab kernels, 6.1 and 6.12 (the test module builds
#     against /lib/modules/<ver>/build);
#   - apt-get download + dpkg-deb -x of linux-image-<ver> (never installed on
#     the host) into $CACHE/kernels/<name>/, re-fetched when Debian's meta
#     package names a newer version;
#   - kernels of other suites (5.10 from bullseye, 7.2 from sid; only when
#     LAB_KERNELS names them): their image, and their headers unpacked into
#     $CACHE/kernels/<name>/headers/ (nothing of theirs is installed), with
#     lab/apt-suite.sh's private package lists; a kernel whose modules carry
#     no BTF (5.10) also gets its RDMA modules' debug files from the -dbg
#     package, in $CACHE/kernels/<name>/dbg/ (apmwatch btf gen reads them).
# Versions are resolved at run time by lab/kver.sh and printed.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
CACHE=${CACHE:-$(cd "$here/.." && pwd)/.cache}
KERNELS=${LAB_KERNELS:-"6.1 6.12"}
# A lab kernel's Debian suite: "" is the host's own.
suite_of() {
	case "$1" in
	5.10) echo bullseye ;;
	7.2) echo sid ;;
	*) echo "" ;;
	esac
}
say() { printf 'setup: %s\n' "$*" >&2; }
die() { printf 'setup: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (apt-get, qemu); run it as root on a Debian 12 host"
command -v apt-get >/dev/null || die "apt-get not found: the lab needs a Debian 12 host"

mkdir -p "$CACHE/setup" "$CACHE/kernels"
# Serialise concurrent runs (several make targets may start at once).
exec 9>"$CACHE/setup/lock"
flock 9

export DEBIAN_FRONTEND=noninteractive
# linux-headers-<6.12 ver> depends on its linux-image package, so apt installs
# that image on the host too: INITRD=No skips the host initramfs hook for it.
export INITRD=No
apt_opts=(-y -q -o Dpkg::Use-Pty=0 --no-install-recommends)

updated=
apt_update() {
	say "apt-get update"
	apt-get update -q >&2 || die "apt-get update failed"
	touch "$CACHE/setup/apt-updated"
	updated=1
}
# Runs an apt command; if it fails on package lists older than this run,
# updates them once and tries again (a mirror drops superseded versions).
apt_retry() {
	"$@" && return 0
	[ -z "$updated" ] || return 1
	apt_update
	"$@"
}
[ -e "$CACHE/setup/apt-updated" ] || apt_update

# kver.sh asks apt-cache (about a second); its answer can change only when
# the package lists do, so it is kept until they change.
kver() {
	local f="$CACHE/setup/kver-$1" v lists=/var/lib/apt/lists lists_mtime
	[ -z "$(suite_of "$1")" ] || lists="$CACHE/apt/$(suite_of "$1")/lists"
	lists_mtime=$(stat -c %Y "$lists" 2>/dev/null || echo 0)
	if [ -s "$f" ] && [ "$(sed -n 2p "$f")" = "$lists_mtime" ]; then
		sed -n 1p "$f"
		return
	fi
	v=$("$here/kver.sh" "$1") || return 1
	printf '%s\n%s\n' "$v" "$lists_mtime" >"$f"
	echo "$v"
}
declare -A ver
for k in $KERNELS; do
	ver[$k]=$(kver "$k") || die "cannot resolve the $k kernel version"
	say "kernel $k -> ${ver[$k]}"
done

pkgs=(qemu-system-x86 busybox-static cpio xz-utils gcc make clang llvm libbpf-dev
	iproute2 rdma-core ibverbs-utils rdmacm-utils libibverbs-dev librdmacm-dev
	libibumad-dev ibverbs-providers libibverbs1 librdmacm1 libibumad3 kmod
	perftest   # ib_send_bw, ib_write_bw, ib_read_lat run on ibsim in the lab
	openmpi-bin libopenmpi-dev  # lab-mpi: Open MPI's openib BTL (and its APM) on ibsim in the lab
	chromium   # the postmortem HTML report is rendered headless in make test
	prometheus # promtool and the server: the alerting rules are tested against a live audit
	man-db     # the packaged man pages are rendered in make test
	rpm        # and the .rpm's file list is read
	lintian rpmlint  # make package-test fails on their errors
	pahole     # apmwatch btf gen is tested with it (btfgen)
	bash-completion  # and the packaged bash completion is run
	systemd)   # the lab guest starts the packaged units under Debian's systemd
installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }
# Optional: installed when this Debian has them.
for p in bpftool infiniband-diags; do
	if installed "$p" || apt-cache show "$p" >/dev/null 2>&1; then
		pkgs+=("$p")
	else
		say "optional package $p not available, skipped"
	fi
done
for k in $KERNELS; do
	[ -n "$(suite_of "$k")" ] || pkgs+=("linux-headers-${ver[$k]}")
done

missing=()
for p in "${pkgs[@]}"; do
	installed "$p" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	say "apt-get install ${missing[*]}"
	apt_retry apt-get install "${apt_opts[@]}" "${missing[@]}" >&2 || die "apt-get install failed"
fi
for k in $KERNELS; do
	[ -n "$(suite_of "$k")" ] && continue
	[ -e "/lib/modules/${ver[$k]}/build/Makefile" ] || die "headers for ${ver[$k]} missing at /lib/modules/${ver[$k]}/build"
done

# apt-get download of PACKAGES into DIR, from kernel K's suite.
download() {
	local k=$1 dir=$2 suite
	shift 2
	suite=$(suite_of "$k")
	if [ -n "$suite" ]; then
		(cd "$dir" && "$here/apt-suite.sh" "$suite" get download -q "$@" >&2)
	else
		(cd "$dir" && apt_retry apt-get download -q -o APT::Sandbox::User=root "$@" >&2)
	fi
}

# Kernel images: downloaded and unpacked into the cache, never installed.
for k in $KERNELS; do
	v=${ver[$k]}
	dir="$CACHE/kernels/$k"
	if [ -e "$dir/kver" ] && [ "$(cat "$dir/kver")" = "$v" ] && [ -e "$dir/vmlinuz" ] &&
		[ -e "$dir/config" ] && [ -e "$dir/lib/modules/$v/modules.dep" ]; then
		continue
	fi
	say "fetching linux-image-$v into $dir"
	tmp=$(mktemp -d "$CACHE/kernels/.fetch-$k.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	# sid splits the image into linux-binary-<ver>, linux-modules-<ver> and
	# linux-base-<ver> (config, modules.builtin).
	ipkgs=("linux-image-$v")
	if [ -n "$(suite_of "$k")" ]; then
		deps=$("$here/apt-suite.sh" "$(suite_of "$k")" cache depends "linux-image-$v")
	else
		deps=$(apt-cache depends "linux-image-$v")
	fi
	while read -r p; do ipkgs+=("$p"); done < <(echo "$deps" |
		awk -v v="$v" '$1 == "Depends:" && ($2 == "linux-binary-" v || $2 == "linux-modules-" v || $2 == "linux-base-" v) { print $2 }' | sort -u)
	download "$k" "$tmp" "${ipkgs[@]}" || die "apt-get download ${ipkgs[*]} failed"
	mkdir "$tmp/root"
	for deb in "$tmp"/*.deb; do
		dpkg-deb -x "$deb" "$tmp/root" || die "unpacking $deb failed"
	done
	deb=linux-image-$v
	# Newer packages keep everything under /usr/lib/modules/<ver> (no /boot).
	if [ -d "$tmp/root/usr/lib/modules/$v" ] && [ ! -e "$tmp/root/lib/modules/$v" ]; then
		mkdir -p "$tmp/root/lib/modules"
		mv "$tmp/root/usr/lib/modules/$v" "$tmp/root/lib/modules/$v"
	fi
	vmlinuz=$tmp/root/boot/vmlinuz-$v config=$tmp/root/boot/config-$v
	[ -e "$vmlinuz" ] || vmlinuz=$tmp/root/lib/modules/$v/vmlinuz
	[ -e "$config" ] || config=$tmp/root/lib/modules/$v/config
	[ -e "$vmlinuz" ] || die "$deb has no boot/vmlinuz-$v nor usr/lib/modules/$v/vmlinuz"
	# modules.dep is made by depmod at install time: make it here.
	depmod -b "$tmp/root" "$v" || die "depmod for $v failed"
	new="$tmp/kernel"
	mkdir -p "$new/lib"
	mv "$vmlinuz" "$new/vmlinuz"
	cp "$config" "$new/config" 2>/dev/null || true
	mv "$tmp/root/lib/modules" "$new/lib/modules"
	echo "$v" >"$new/kver"
	# What other suites' kernels bring along (kept across image updates of the same version).
	for keep in headers dbg; do
		if [ -e "$dir/$keep/kver" ] && [ "$(cat "$dir/$keep/kver")" = "$v" ]; then
			mv "$dir/$keep" "$new/$keep"
		fi
	done
	rm -rf "$dir"
	mv "$new" "$dir"
	rm -rf "$tmp"
	trap - EXIT
done

# What a module build needs in the sid chroot (the closure of these).
toolchain="gcc-16 make dash bash coreutils sed mawk grep findutils diffutils binutils libelf1t64 kmod pahole"

# Other suites' kernels: their headers, unpacked into the cache (the
# test modules build against $CACHE/kernels/<name>/headers/usr/src/linux-headers-<ver>,
# with the make arguments in make-args).
for k in $KERNELS; do
	suite=$(suite_of "$k")
	[ -n "$suite" ] || continue
	v=${ver[$k]}
	hdr="$CACHE/kernels/$k/headers"
	[ -e "$hdr/kver" ] && [ "$(cat "$hdr/kver")" = "$v" ] && continue
	say "fetching linux-headers-$v ($suite) into $hdr"
	tmp=$(mktemp -d "$CACHE/kernels/.headers-$k.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	# The headers package and what it needs of the kernel's own: -common and kbuild.
	hpkgs=("linux-headers-$v")
	while read -r p; do hpkgs+=("$p"); done < <("$here/apt-suite.sh" "$suite" cache depends "linux-headers-$v" |
		awk '/Depends: linux-(headers|kbuild)-/ { sub(/.*Depends: /, ""); print }' | sort -u)
	download "$k" "$tmp" "${hpkgs[@]}" || die "apt-get download ${hpkgs[*]} failed"
	mkdir "$tmp/headers"
	for deb in "$tmp"/*.deb; do
		dpkg-deb -x "$deb" "$tmp/headers" || die "unpacking $deb failed"
	done
	src="$tmp/headers/usr/src/linux-headers-$v"
	[ -e "$src/Makefile" ] || die "linux-headers-$v has no usr/src/linux-headers-$v/Makefile"
	case "$k" in
	5.10)
		# Its Makefile includes the -common tree by an absolute /usr/src path: point it at the cache.
		sed -i "s#^include /usr/src/#include $hdr/usr/src/#" "$src/Makefile"
		# bullseye builds with gcc-10, which bookworm lacks: its gcc-12 builds 5.10 modules.
		echo "CC=gcc" >"$tmp/headers/make-args"
		;;
	*)
		# sid's headers name gcc-16, and its kbuild programs need sid's
		# glibc: the headers tree is also a chroot of sid's toolchain
		# (unpacked, never configured), where the modules build.
		say "unpacking sid's toolchain for the $k modules into $hdr"
		tpkgs=()
		while read -r p; do tpkgs+=("$p"); done < <("$here/apt-suite.sh" "$suite" cache depends --recurse \
			--no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces --no-enhances \
			$toolchain 2>/dev/null | grep -v '^[ <]' | sort -u)
		mkdir "$tmp/tc"
		download "$k" "$tmp/tc" "${tpkgs[@]}" || die "apt-get download of sid's toolchain failed"
		for deb in "$tmp"/tc/*.deb; do
			dpkg-deb -x "$deb" "$tmp/headers" || die "unpacking $deb failed"
		done
		for d in bin sbin lib lib64; do
			[ -e "$tmp/headers/$d" ] || [ ! -d "$tmp/headers/usr/$d" ] || ln -s "usr/$d" "$tmp/headers/$d"
		done
		# Unpacked, not configured: the alternatives kbuild calls by their plain names.
		[ -e "$tmp/headers/usr/bin/awk" ] || ln -s mawk "$tmp/headers/usr/bin/awk"
		mkdir -p "$tmp/headers/dev" "$tmp/headers/tmp" "$tmp/headers/proc"
		chmod 1777 "$tmp/headers/tmp"
		[ -e "$tmp/headers/dev/null" ] || mknod -m 666 "$tmp/headers/dev/null" c 1 3
		[ -x "$tmp/headers/usr/bin/make" ] || die "sid's toolchain has no make"
		: >"$tmp/headers/make-args"
		: >"$tmp/headers/chroot"
		;;
	esac
	echo "$v" >"$tmp/headers/kver"
	rm -rf "$hdr"
	mv "$tmp/headers" "$hdr"
	rm -rf "$tmp"
	trap - EXIT
done

# A kernel whose modules carry no BTF (5.10): the debug files of the RDMA
# modules apmwatch hooks (and mlx5_core and mlx5_ib, whose types the lab's
# raw driver hook reads), from linux-image-<ver>-dbg (about 800 MB, read
# once; only these files are kept, made again when the list changes).
dbg_modules="ib_core ib_cm ib_uverbs ib_umad mlx5_core mlx5_ib"
for k in $KERNELS; do
	v=${ver[$k]}
	dir="$CACHE/kernels/$k"
	[ -e "$dir/config" ] || die "$dir has no config: cannot tell whether its modules carry BTF"
	if grep -q '^CONFIG_DEBUG_INFO_BTF_MODULES=y' "$dir/config"; then
		rm -rf "$dir/dbg"
		continue
	fi
	[ -e "$dir/dbg/kver" ] && [ "$(cat "$dir/dbg/kver")" = "$v $dbg_modules" ] && continue
	say "fetching linux-image-$v-dbg for the debug info of $dbg_modules (its modules carry no BTF)"
	tmp=$(mktemp -d "$CACHE/kernels/.dbg-$k.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	download "$k" "$tmp" "linux-image-$v-dbg" || die "apt-get download linux-image-$v-dbg failed"
	deb=$(ls "$tmp"/linux-image-*-dbg_*.deb)
	pat=()
	for m in $dbg_modules; do pat+=("*/$m.ko"); done
	mkdir "$tmp/x"
	dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp/x" --wildcards "${pat[@]}" ||
		die "unpacking the debug modules from $deb failed"
	rm -f "$deb"
	mkdir "$tmp/dbg"
	for m in $dbg_modules; do
		f=$(find "$tmp/x" -name "$m.ko" | head -1)
		[ -n "$f" ] || die "$deb has no debug file for $m"
		mv "$f" "$tmp/dbg/"
	done
	echo "$v $dbg_modules" >"$tmp/dbg/kver"
	rm -rf "$dir/dbg"
	mv "$tmp/dbg" "$dir/dbg"
	rm -rf "$tmp"
	trap - EXIT
done
say "ready (${KERNELS// /, })"
