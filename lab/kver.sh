#!/bin/sh
# Prints the full Debian kernel version behind a lab kernel name, resolved at
# run time from Debian's meta packages: `lab/kver.sh 6.1` -> 6.1.0-NN-amd64.
# 6.1 and 6.12 come from the host's suite (bookworm; needs `apt-get update`
# to have run once); 5.10 from bullseye and 7.2 from sid, through
# lab/apt-suite.sh's private package lists (fetched on first use).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
suite=
case "${1:-}" in
5.10) suite=bullseye meta=linux-image-amd64 ;;
6.1) meta=linux-image-amd64 ;;
6.12) meta=linux-image-6.12-amd64 ;;
7.2) suite=sid meta=linux-image-amd64 ;;
*) echo "kver.sh: unknown lab kernel '${1:-}' (want 5.10, 6.1, 6.12 or 7.2)" >&2; exit 2 ;;
esac
if [ -n "$suite" ]; then
	deps=$("$here/apt-suite.sh" "$suite" cache depends "$meta" 2>/dev/null) || deps=
else
	deps=$(apt-cache depends "$meta" 2>/dev/null) || deps=
fi
v=$(echo "$deps" | awk '/Depends: linux-image-[0-9]/ { sub(/.*linux-image-/, ""); print; exit }')
[ -n "$v" ] || { echo "kver.sh: cannot resolve $meta${suite:+ in $suite} (run apt-get update)" >&2; exit 1; }
case "$v" in
"$1".*) ;;
*) echo "kver.sh: $meta${suite:+ in $suite} is $v now, not a $1 kernel" >&2; exit 1 ;;
esac
echo "$v"
