#!/bin/sh
# Replays every crafted recording in DIR with two apmwatch binaries, one
# after the other, on one core, each under a time and address-space cap,
# and prints a Markdown table row per file (docs/performance.md,
# "Hostile recordings"):
#   CRAFT_DIR=DIR CRAFT_SIZE=16000000 go test -run TestWrite ./recording/recordingtest
#   recording/recordingtest/measure.sh OLD/apmwatch NEW/apmwatch DIR [SECONDS] [MIB]
set -u
old=$1 new=$2 dir=$3 secs=${4:-60} mib=${5:-4096}
cpu=$(($(nproc) - 1))
err=$(mktemp)
trap 'rm -f "$err"' EXIT
one() { # binary file -> "2.43 s, 116 MiB" or what stopped it
	out=$( (ulimit -v $((mib * 1024)); timeout "$secs" /usr/bin/time -f '%e %U %M' \
		taskset -c "$cpu" "$1" postmortem -o json "$2" >/dev/null 2>"$err"); echo "rc=$?")
	rc=${out#rc=}
	set -- $(tail -1 "$err")
	case $rc in
	124) echo "killed after $secs s" ;;
	0 | 1) echo "$1 s (user $2 s), $(($3 / 1024)) MiB$([ "$rc" = 1 ] && echo ', refused')" ;;
	*) echo "failed (exit $rc: $mib MiB cap?)" ;;
	esac
}
label() { basename "$(dirname "$1")"; } # OLD and NEW are DIR/apmwatch
echo "| file | bytes | $(label "$old") | $(label "$new") |"
echo "|---|---|---|---|"
for f in "$dir"/*.rec; do
	echo "| $(basename "$f" .rec) | $(stat -c %s "$f") | $(one "$old" "$f") | $(one "$new" "$f") |"
done
