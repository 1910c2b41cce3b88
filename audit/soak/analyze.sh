#!/bin/sh
# analyze.sh LOG OUTDIR: the figures of a soak log (make audit-soak):
# the RSS slope of a least-squares fit over the last 45 minutes (all of a
# shorter run), the storms, and the heap growth between the two profiles
# (go tool pprof -diff_base, written to OUTDIR with the profiles).
set -eu
LOG=$1; OUT=$2
mkdir -p "$OUT"
tr -d '\r' <"$LOG" >"$OUT/soak.log"
awk '$1 == "soak:" && $2 ~ /^[0-9]+$/ && $3 ~ /^[0-9]+$/ && $4 !~ /storms/ { print $2, $3 }' "$OUT/soak.log" >"$OUT/rss.txt"
[ -s "$OUT/rss.txt" ] || { echo "analyze: no RSS samples in $LOG" >&2; exit 1; }
# fit NAME FILE: the least-squares slope of FILE's "t_s KiB" lines over the
# last 45 minutes (all of a shorter run), with its standard error
fit() {
	awk -v name="$1" '
	{ t[NR] = $1; r[NR] = $2; if ($1 > tmax) tmax = $1 }
	END {
		from = tmax - 2700; if (from < 0) from = 0
		for (i = 1; i <= NR; i++) if (t[i] >= from) { n++; sx += t[i]; sy += r[i]; sxx += t[i]*t[i]; sxy += t[i]*r[i]
			if (min == "" || r[i] < min) min = r[i]; if (r[i] > max) max = r[i] }
		if (n < 3) { print "analyze: fewer than 3 samples of " name " in the fit window" > "/dev/stderr"; exit 1 }
		b = (n*sxy - sx*sy) / (n*sxx - sx*sx); a = (sy - b*sx) / n
		for (i = 1; i <= NR; i++) if (t[i] >= from) { e = r[i] - a - b*t[i]; ss += e*e }
		# the standard error of the slope: how far the noise alone moves it
		se = sqrt(ss / (n - 2) / (sxx - sx*sx/n))
		printf "%s: %d samples, run %d s; fit from t=%d s: slope %.2f MiB/hour (standard error %.2f); %.1f-%.1f MiB in the window, residuals sd %.1f MiB\n", name, NR, tmax, from, b*3600/1024, se*3600/1024, min/1024, max/1024, sqrt(ss/(n-2))/1024
	}' "$2"
}
fit rss "$OUT/rss.txt"
# where the RSS is: each part's own slope (soak-mem lines; the goroutine
# count is not in KiB and is given as its range)
awk '$1 == "soak-mem:" && $2 ~ /^[0-9]+$/' "$OUT/soak.log" >"$OUT/mem.txt"
if [ -s "$OUT/mem.txt" ]; then
	col=3
	for part in rss_anon rss_file rss_shmem heap_live heap_inuse heap_idle_kept stacks go_sys; do
		awk -v c=$col '{ print $2, $c }' "$OUT/mem.txt" >"$OUT/mem-$part.txt"
		fit "$part" "$OUT/mem-$part.txt"
		col=$((col + 1))
	done
	awk '{ if (min == "" || $11 < min) min = $11; if ($11 > max) max = $11 } END { printf "goroutines: %d-%d\n", min, max }' "$OUT/mem.txt"
fi
grep '^soak-storm:' "$OUT/soak.log" || echo "analyze: no storms in the log"
grep -E '^soak: (.*storms|audit exit|warnings|one count)' "$OUT/soak.log" || true
for h in early end; do
	sed -n "/^soak-heap-begin $h/,/^soak-heap-end $h/p" "$OUT/soak.log" | sed '1d;$d' | base64 -d >"$OUT/heap-$h.pb.gz" ||
		{ echo "analyze: no $h heap profile in $LOG" >&2; exit 1; }
done
grep '^soak-heap-begin' "$OUT/soak.log"
go tool pprof -top -nodecount=12 -sample_index=inuse_space -diff_base "$OUT/heap-early.pb.gz" "$OUT/heap-end.pb.gz" 2>/dev/null |
	tee "$OUT/heap-diff.txt"
