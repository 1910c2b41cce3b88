#!/usr/bin/env bash
# Builds $CACHE/bpftrace/tree: Debian's bpftrace and every shared library it
# needs, for the lab benchmark only (make lab-bench hands the tree to the
# guest as LAB_EXTRA, so it is at /extra: /extra/bin/bpftrace, /extra/lib).
# Nothing is installed on the host: the package and its dependency closure
# are fetched with apt-get download into $CACHE/bpftrace/debs and unpacked
# with dpkg-deb -x (61 MiB of packages; the tree is 198 MiB, 186 of them
# libLLVM, libclang, libz3 and ICU's data: it fits the guest's 2 GiB).
# libc.so.6 is left out: the guest has the host's, the same Debian release.
# Idempotent; prints the tree's path.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
CACHE=${CACHE:-$(cd "$here/.." && pwd)/.cache}
top=$CACHE/bpftrace
say() { printf 'bpftrace-tree: %s\n' "$*" >&2; }
die() { printf 'bpftrace-tree: %s\n' "$*" >&2; exit 1; }

if [ -x "$top/tree/bin/bpftrace" ] && [ -e "$top/tree/.complete" ]; then
	echo "$top/tree"
	exit 0
fi
mkdir -p "$top/debs"
exec 9>"$top/lock"
flock 9

closure=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
	--no-breaks --no-replaces --no-enhances bpftrace | grep -v '^ ' | grep -v '<' | sort -u)
[ -n "$closure" ] || die "apt-cache knows no bpftrace (run apt-get update)"
say "fetching $(echo "$closure" | wc -w) packages into $top/debs"
# apt's sandbox user cannot write into a root-owned cache directory.
(cd "$top/debs" && apt-get download -q -o APT::Sandbox::User=root $closure >&2) ||
	die "apt-get download failed"

rm -rf "$top/root" "$top/tree"
mkdir -p "$top/root" "$top/tree/bin" "$top/tree/lib"
for d in "$top"/debs/*.deb; do dpkg-deb -x "$d" "$top/root"; done
libpath=$top/root/usr/lib/x86_64-linux-gnu:$top/root/lib/x86_64-linux-gnu
cp "$top/root/usr/bin/bpftrace" "$top/tree/bin/"
LD_LIBRARY_PATH=$libpath ldd "$top/root/usr/bin/bpftrace" | awk '$2 == "=>" { print $1, $3 }' |
	while read -r name file; do
		case $name in libc.so.*) continue ;; esac
		[ -e "$file" ] || die "bpftrace needs $name: not found"
		cp -L "$file" "$top/tree/lib/$name"
	done
touch "$top/tree/.complete"
say "tree $(du -sh "$top/tree" | cut -f1) ($(du -sh "$top/debs" | cut -f1) of packages)"
echo "$top/tree"
