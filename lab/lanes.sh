#!/usr/bin/env bash
# Runs lab steps in lanes side by side: each argument is one lane, a
# space-separated list of steps TARGET:KERNEL run one after the other as
# `make TARGET KERNEL=K LAB_KERNELS=K $LANE_ARGS` (KERNEL K1+K2: LAB_KERNELS
# "K1 K2", KERNEL K1). A guest under TCG keeps about one
# core busy and spends much of a suite waiting, so two lanes on a 2-core
# machine take little more than the longer one alone.
#
# Every step runs even when an earlier one failed (a failure on one kernel
# says nothing about the others). Output is streamed with a [TARGET KERNEL]
# prefix on each line and kept whole per step in $BUILD/lab/logs/; the end
# is a table of steps, status and seconds. Exit status 1 if any step failed.
#
# Each failed step's log is named in $logs/failed; `lab/lanes.sh --report`
# prints, for each, its failed tests and their last lines, so that the end
# of a long run (all a CI page may keep) says what failed.
#
#   lab/lanes.sh "lab-test:6.1" "lab-test:6.12" "lab-core:5.10 lab-core:7.2"
#   lab/lanes.sh --report
set -uo pipefail

[ $# -gt 0 ] || { echo "usage: lab/lanes.sh 'TARGET:KERNEL ...' ... | --report" >&2; exit 2; }
MAKE=${MAKE:-make}
logs=${BUILD:-build}/lab/logs
mkdir -p "$logs" || exit 1

# report: the failed steps' FAIL lines, each top-level failed test's last
# logged lines before its FAIL, and the lab runner's own error lines.
if [ "$1" = --report ]; then
	[ -s "$logs/failed" ] || exit 0
	echo "lanes: what failed"
	while IFS= read -r log; do
		echo "  $log:"
		awk '
			/^=== (RUN|CONT|NAME|PAUSE)/ { n = 0; next }
			/^ *--- FAIL/ { for (i = (n > 6 ? n - 6 : 0); i < n; i++) print "      " buf[i % 6]; print "    " $0; n = 0; next }
			/^(panic:|lab: |FAIL\t|fatal error:)/ { print "    " $0; next }
			{ buf[n % 6] = substr($0, 1, 300); n++ }
		' "$log" | tail -n 40
	done <"$logs/failed"
	exit 0
fi
results=$(mktemp -d) || exit 1
trap 'rm -rf "$results"' EXIT

# Checked before anything runs: a malformed step fails at once.
for lane in "$@"; do
	for step in $lane; do
		case "$step" in
		*:*) ;;
		*) echo "lanes: step '$step' is not TARGET:KERNEL" >&2; exit 2 ;;
		esac
	done
done

run_lane() {
	local lane=$1 n=$2 step target k start rc log
	for step in $lane; do
		target=${step%%:*} k=${step#*:}
		log="$logs/$target-$k.log"
		start=$(date +%s)
		# The make's status, not sed's or tee's.
		# shellcheck disable=SC2086 # LANE_ARGS are make arguments, one per word
		"$MAKE" --no-print-directory "$target" KERNEL="${k%%+*}" LAB_KERNELS="${k//+/ }" ${LANE_ARGS:-} 2>&1 |
			tee "$log" | sed -u "s/^/[$target $k] /"
		rc=${PIPESTATUS[0]}
		printf '%s\t%s\t%s\t%s\n' "$step" "$rc" "$(($(date +%s) - start))" "$log" >>"$results/$n"
	done
}

n=0
pids=()
for lane in "$@"; do
	n=$((n + 1))
	run_lane "$lane" "$n" &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done

failed=
echo "lanes: step, exit status, seconds, log"
for f in "$results"/*; do
	while IFS=$'\t' read -r step rc secs log; do
		printf '  %-22s %3s %6ss  %s\n' "$step" "$rc" "$secs" "$log"
		[ "$rc" = 0 ] || { failed="$failed $step"; echo "$log" >>"$logs/failed"; }
	done <"$f"
done
[ -z "$failed" ] || { echo "lanes: FAILED:$failed" >&2; exit 1; }
