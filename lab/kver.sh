#!/bin/sh
# Prints the full Debian kernel version behind a lab kernel name, resolved at
# run time from Debian's meta packages: `lab/kver.sh 6.1` -> 6.1.0-NN-amd64.
# Needs `apt-get update` to have run once.
set -eu
case "${1:-}" in
6.1) meta=linux-image-amd64 ;;
6.12) meta=linux-image-6.12-amd64 ;;
*) echo "kver.sh: unknown lab kernel '${1:-}' (want 6.1 or 6.12)" >&2; exit 2 ;;
esac
v=$(apt-cache depends "$meta" 2>/dev/null | awk '/Depends: linux-image-[0-9]/ { sub(/.*linux-image-/, ""); print; exit }')
[ -n "$v" ] || { echo "kver.sh: cannot resolve $meta (run apt-get update)" >&2; exit 1; }
echo "$v"
