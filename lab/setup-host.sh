#!/usr/bin/env bash
# Installs everything the lab needs on a Debian 12 host (run as root) and
# fetches the two lab kernels into the download cache. Idempotent, and fast
# (well under a second) when everything is already in place:
#   - apt-get update once (stamp in $CACHE/setup/);
#   - apt-get install of the host packages and of linux-headers-<ver> for
#     both lab kernels (the test module builds against /lib/modules/<ver>/build);
#   - apt-get download + dpkg-deb -x of linux-image-<ver> (never installed on
#     the host) into $CACHE/kernels/<6.1|6.12>/, re-fetched when Debian's meta
#     package names a newer version.
# Versions are resolved at run time by lab/kver.sh and printed.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
CACHE=${CACHE:-$(cd "$here/.." && pwd)/.cache}
KERNELS=${LAB_KERNELS:-"6.1 6.12"}
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
lists_mtime=$(stat -c %Y /var/lib/apt/lists 2>/dev/null || echo 0)
kver() {
	local f="$CACHE/setup/kver-$1" v
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
	chromium   # the postmortem HTML report is rendered headless in make test
	prometheus # promtool and the server: the alerting rules are tested against a live audit
	man-db     # the packaged man pages are rendered in make test
	rpm        # and the .rpm's file list is read
	lintian rpmlint  # make package-test fails on their errors
	pahole     # apmwatch btf gen is tested with it (btfgen)
	bash-completion)  # and the packaged bash completion is run
installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }
# Optional: installed when this Debian has them.
for p in bpftool infiniband-diags; do
	if installed "$p" || apt-cache show "$p" >/dev/null 2>&1; then
		pkgs+=("$p")
	else
		say "optional package $p not available, skipped"
	fi
done
for k in $KERNELS; do pkgs+=("linux-headers-${ver[$k]}"); done

missing=()
for p in "${pkgs[@]}"; do
	installed "$p" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	say "apt-get install ${missing[*]}"
	apt_retry apt-get install "${apt_opts[@]}" "${missing[@]}" >&2 || die "apt-get install failed"
fi
for k in $KERNELS; do
	[ -e "/lib/modules/${ver[$k]}/build/Makefile" ] || die "headers for ${ver[$k]} missing at /lib/modules/${ver[$k]}/build"
done

# Kernel images: downloaded and unpacked into the cache, never installed.
for k in $KERNELS; do
	v=${ver[$k]}
	dir="$CACHE/kernels/$k"
	if [ -e "$dir/kver" ] && [ "$(cat "$dir/kver")" = "$v" ] && [ -e "$dir/vmlinuz" ] &&
		[ -e "$dir/lib/modules/$v/modules.dep" ]; then
		continue
	fi
	say "fetching linux-image-$v into $dir"
	tmp=$(mktemp -d "$CACHE/kernels/.fetch-$k.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	(cd "$tmp" && apt_retry apt-get download -q -o APT::Sandbox::User=root "linux-image-$v" >&2) ||
		die "apt-get download linux-image-$v failed"
	deb=$(ls "$tmp"/linux-image-*.deb)
	mkdir "$tmp/root"
	dpkg-deb -x "$deb" "$tmp/root" || die "unpacking $deb failed"
	[ -e "$tmp/root/boot/vmlinuz-$v" ] || die "$deb has no boot/vmlinuz-$v"
	# modules.dep is made by depmod at install time: make it here.
	depmod -b "$tmp/root" "$v" || die "depmod for $v failed"
	new="$tmp/kernel"
	mkdir -p "$new/lib"
	mv "$tmp/root/lib/modules" "$new/lib/modules"
	mv "$tmp/root/boot/vmlinuz-$v" "$new/vmlinuz"
	cp "$tmp/root/boot/config-$v" "$new/config" 2>/dev/null || true
	echo "$v" >"$new/kver"
	rm -rf "$dir"
	mv "$new" "$dir"
	rm -rf "$tmp"
	trap - EXIT
done
say "ready (${KERNELS// /, })"
