#!/usr/bin/env bash
# Usage: lab/bench-baseline.sh REV TREE
# Builds apmwatch at git revision REV and prints the path of a copy of the
# benchmark's extra tree TREE (hard links) with that binary added as
# bin/apmwatch-baseline: make lab-bench BASELINE=REV measures it side by
# side with the build under test (APMWATCH_BENCH_BASELINE). Cached in
# $CACHE/bench-baseline/<commit>.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
CACHE=${CACHE:-$(cd "$here/.." && pwd)/.cache}
die() { printf 'bench-baseline: %s\n' "$*" >&2; exit 1; }
[ $# -eq 2 ] || die "usage: lab/bench-baseline.sh REV TREE"
rev=$1 tree=$2
[ -d "$tree" ] || die "no tree at $tree"
commit=$(git -C "$here/.." rev-parse --verify "$rev^{commit}") || die "no revision $rev"
out=$CACHE/bench-baseline/$commit
if [ ! -x "$out/tree/bin/apmwatch-baseline" ]; then
	src=$(mktemp -d)
	trap 'rm -rf "$src"' EXIT
	git -C "$here/.." archive "$commit" | tar -x -C "$src"
	mkdir -p "$out"
	(cd "$src" && CGO_ENABLED=0 go build -trimpath -o "$out/apmwatch" ./cmd/apmwatch) >&2
	rm -rf "$out/tree"
	cp -al "$tree" "$out/tree"
	cp "$out/apmwatch" "$out/tree/bin/apmwatch-baseline"
fi
echo "$out/tree"
