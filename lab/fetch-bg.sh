#!/usr/bin/env bash
# Fetches lab kernels in the background (lab/setup-host.sh) while make
# test runs its unit tests, and waits for that fetch before the lab needs
# them.
#
#   lab/fetch-bg.sh start DIR KERNEL...   start the fetch; its log is DIR/log
#   lab/fetch-bg.sh wait DIR              wait for a fetch started in DIR (none
#                                          started: return at once), show its
#                                          log, and fail as it failed
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
verb=${1:-} dir=${2:-}
[ -n "$verb" ] && [ -n "$dir" ] || { echo "usage: lab/fetch-bg.sh start|wait DIR [KERNEL...]" >&2; exit 2; }
shift 2
case "$verb" in
start)
	mkdir -p "$dir" || exit 1
	rm -f "$dir/status" "$dir/pid"
	[ $# -gt 0 ] || exit 0
	# holding none of make's output: make does not wait for it
	(
		LAB_KERNELS="$*" "$here/setup-host.sh" >"$dir/log" 2>&1 </dev/null
		echo $? >"$dir/status"
	) >/dev/null 2>&1 </dev/null &
	echo $! >"$dir/pid"
	echo "lab: fetching kernels $* in the background (log: $dir/log)"
	;;
wait)
	[ -e "$dir/pid" ] || exit 0
	pid=$(cat "$dir/pid")
	while [ ! -e "$dir/status" ]; do
		if ! kill -0 "$pid" 2>/dev/null && [ ! -e "$dir/status" ]; then
			sleep 1
			[ -e "$dir/status" ] || { echo "lab: the background kernel fetch (pid $pid) ended without a status: see $dir/log" >&2; rm -f "$dir/pid"; exit 1; }
		fi
		sleep 1
	done
	rc=$(cat "$dir/status")
	sed 's/^/[fetch] /' "$dir/log"
	rm -f "$dir/pid"
	[ "$rc" = 0 ] || { echo "lab: fetching the kernels failed (exit $rc)" >&2; exit 1; }
	;;
*)
	echo "lab/fetch-bg.sh: unknown verb '$verb'" >&2
	exit 2
	;;
esac
