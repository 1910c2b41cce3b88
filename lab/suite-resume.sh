#!/usr/bin/env bash
# lab/suite-resume.sh KERNEL SKIP: guest.test's full suite on KERNEL (make
# lab-run), skipping the tests SKIP matches. Under TCG with two vCPUs the
# kernel's live code patching (text_poke_bp's int3, used to attach and
# detach every fentry probe) now and then oopses on a loaded host: "Oops:
# int3" at a patched function's entry, then a panic, and the suite's guest
# is gone. When the guest died that way (the console log says "Oops:
# int3"), the tests that had not passed run again in a fresh guest, once,
# saying so; any other failure, and a second oops, is the result.
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: lab/suite-resume.sh KERNEL SKIP" >&2; exit 2; }
k=$1 skip=$2
make=${MAKE:-make}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

suite() {
	LAB_TIMEOUT=${LAB_TIMEOUT:-2280} $make --no-print-directory lab-run KERNEL="$k" \
		CMD="guest.test -test.v -test.timeout 35m -test.skip \"$1\"" 2>&1 | tee "$out"
	return "${PIPESTATUS[0]}"
}

suite "$skip"
rc=$?
[ $rc -eq 0 ] && exit 0
log=$(sed -n 's/.*(whole log: \([^)]*\)):.*/\1/p' "$out" | tail -1)
if [ -z "$log" ] || ! grep -q "Oops: int3" "$log" 2>/dev/null; then
	exit $rc
fi
passed=$(sed -n 's/^--- PASS: \([A-Za-z0-9_]*\) .*/\1/p' "$out" | paste -sd'|')
echo "lab-test: $k: the guest's kernel died of an int3 oops (TCG and live code patching, $log); running the tests that had not passed again, once" >&2
if [ -n "$passed" ]; then
	skip="${skip:+$skip|}^($passed)\$"
fi
suite "$skip"
