#!/bin/sh
# Soak run of `apmwatch audit` inside the lab guest (make audit-soak): QPs
# created and destroyed in a loop (lab-pair --pairs), a PATH_MIG injected
# into every tenth batch (missed-rearm findings and bundles), and every
# STORM_EVERY seconds a port-failure storm on the simulated InfiniBand HCA
# (STORM_PAIRS never-rearm pairs armed, port 1 of ibsim0 down: a
# missed-rearm per QP; then port 2: an unprotected-failure per QP). The
# daemon's RSS is sampled every SAMPLE seconds; its heap profile is printed
# (base64, between soak-heap lines) after HEAP_AT seconds and at the end.
# Prints one line per sample and storm, then a summary. Needs: apmwatch,
# lab-pair, lab-inject, lab-ibpair, lab-ib, wget and base64 (busybox).
MINUTES=${1:-5}
SAMPLE=${2:-15}
PAIRS=${3:-8}
STORM_EVERY=${4:-240}
STORM_PAIRS=${5:-100}
HEAP_AT=${6:-300}
D=/tmp/soak
rm -rf $D; mkdir -p $D
case "$(uname -r)" in 6.12*) HOOK= ;; *) HOOK="--event-hook apmlab:qp_event" ;; esac
apmwatch audit --findings $D/findings.jsonl --recorder-dir $D/rec --recorder-max-bytes 8388608 \
	--recorder-max-age 2m --bundle-after 1s --reconcile-interval 2s --ready-file $D/ready --pprof $HOOK 2>$D/log &
A=$!
while [ ! -e $D/ready ]; do sleep 0.1; kill -0 $A 2>/dev/null || { cat $D/log; exit 1; }; done
# scrape: the daemon's metrics into $D/m; metric NAME: one of them, as read
scrape() { wget -qO- http://127.0.0.1:9578/metrics >$D/m; }
metric() { awk -v s="$1" '$1==s {print $2}' $D/m; }
status() { awk -v k="$1:" '$1==k {print $2}' /proc/$A/status; }
rss() { status VmRSS; }
kinds() { grep -c "\"kind\":\"$1\"" $D/findings.jsonl; }
# since FROM KIND: findings of KIND written after byte FROM of the log (a
# storm reads only its own part: the whole log grows to megabytes in an hour)
since() { tail -c +$(($1 + 1)) $D/findings.jsonl | grep -c "\"kind\":\"$2\""; }
size() { wc -c <$D/findings.jsonl; }
ms() { awk '{ printf "%d", $1 * 1000 }' /proc/uptime; }
# cpu: the daemon's CPU time so far (user + system, clock ticks of 10 ms)
cpu() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' /proc/$A/stat; }
# mem: where the RSS is (KiB): the kernel's split of it, and the Go
# runtime's own account (the heap live at the last GC, the heap in use,
# the idle heap not yet given back, stacks, all it took from the OS) and
# the goroutine count
mem() {
	echo "soak-mem: $1 $(status RssAnon) $(status RssFile) $(status RssShmem)" \
		"$(awk '$1 == "go_gc_heap_live_bytes" { l = $2 } $1 == "go_memstats_heap_inuse_bytes" { u = $2 } $1 == "go_memstats_heap_idle_bytes" { i = $2 }
			$1 == "go_memstats_heap_released_bytes" { r = $2 } $1 == "go_memstats_stack_inuse_bytes" { s = $2 }
			$1 == "go_memstats_sys_bytes" { y = $2 } $1 == "go_goroutines" { g = $2 }
			END { printf "%d %d %d %d %d %d", l / 1024, u / 1024, (i - r) / 1024, s / 1024, y / 1024, g }' $D/m)"
}
# heap LABEL: the heap profile (after a GC) as base64 between marker lines
heap() {
	echo "soak-heap-begin $1 t=$(( $(date +%s) - start ))"
	wget -qO- 'http://127.0.0.1:9578/debug/pprof/heap?gc=1' | base64
	echo "soak-heap-end $1"
}
# storm: STORM_PAIRS pairs armed on ibsim, both ports of ibsim0 fail in turn
storm() {
	storms=$((storms + 1)); t0=$(date +%s); m0=$(ms); off=$(size); c0=$(cpu)
	: >$D/storm.out # before the program starts: the wait below reads it at once
	lab-ibpair --behavior never-rearm --pairs "$STORM_PAIRS" >$D/storm.out 2>&1 &
	S=$!
	n=0; while [ "$(grep -c '"ready":true' $D/storm.out)" -lt $((2 * STORM_PAIRS)) ] && [ $n -lt 1500 ]; do sleep 0.2; n=$((n + 1)); done
	armed=$(grep -c '"ready":true' $D/storm.out)
	[ "$armed" -gt 0 ] || { echo "soak-storm: $storms: no QP armed:"; head -5 $D/storm.out; }
	m1=$(ms); lab-ib port --dev ibsim0 --port 1 down >/dev/null
	n=0; while [ "$(since "$off" missed-rearm)" -lt "$armed" ] && [ $n -lt 300 ]; do sleep 0.2; n=$((n + 1)); done
	m2=$(ms); lab-ib port --dev ibsim0 --port 2 down >/dev/null
	n=0; while [ "$(since "$off" unprotected-failure)" -lt "$armed" ] && [ $n -lt 300 ]; do sleep 0.2; n=$((n + 1)); done
	m3=$(ms)
	kill $S 2>/dev/null; wait $S 2>/dev/null
	for dev in ibsim0 ibsim1; do for p in 1 2; do lab-ib port --dev $dev --port $p up >/dev/null; done; done
	for lid in 1 2 3 4; do lab-ib link --lid $lid up >/dev/null; done
	lab-ib traffic on >/dev/null
	# arm: the pairs made and armed; fail1/fail2: a port down until every
	# QP's finding is in the log (polled every 200 ms); down: the QPs
	# destroyed and the fabric reset; audit_cpu: the daemon's CPU meanwhile
	echo "soak-storm: $storms t=$((t0 - start)) qps=$armed missed_rearm=$(since "$off" missed-rearm)" \
		"unprotected_failure=$(since "$off" unprotected-failure) took=$(( $(date +%s) - t0 ))s" \
		"arm=$((m1 - m0))ms fail1=$((m2 - m1))ms fail2=$((m3 - m2))ms down=$(( $(ms) - m3 ))ms" \
		"audit_cpu=$(( ($(cpu) - c0) * 10 ))ms"
}
start=$(date +%s); end=$((start + MINUTES * 60)); next=$start; batches=0; qps=0
storms=0; nextstorm=$((start + STORM_EVERY)); heaped=
echo "soak: t_s rss_kib batches qps_made events model_qps findings bundles recorder_bytes lost"
echo "soak-mem: t_s rss_anon_kib rss_file_kib rss_shmem_kib heap_live_kib heap_inuse_kib heap_idle_kept_kib stacks_kib go_sys_kib goroutines"
while [ "$(date +%s)" -lt "$end" ]; do
	if [ "$(date +%s)" -ge "$nextstorm" ]; then
		storm
		nextstorm=$(( $(date +%s) + STORM_EVERY ))
	fi
	if [ -z "$heaped" ] && [ $(( $(date +%s) - start )) -ge "$HEAP_AT" ]; then
		heap early; heaped=1
	fi
	batches=$((batches + 1))
	if [ $((batches % 10)) -eq 0 ]; then
		lab-pair --pairs "$PAIRS" --behavior never-rearm --duration 4s >$D/pair.out 2>&1 &
		P=$!
		for i in 1 2 3 4 5 6 7 8 9 10 20 30; do grep -q '"ready":true' $D/pair.out && break; sleep 0.2; done
		sleep 0.5
		Q=$(grep '"ready":true' $D/pair.out | grep '"rxe0"' | head -1 | sed 's/.*"qpn":\([0-9]*\).*/\1/')
		[ -n "$Q" ] && lab-inject --dev rxe0 --qpn "$Q" --event path_mig --migrate >/dev/null
		wait $P
	else
		lab-pair --pairs "$PAIRS" --duration 200ms >/dev/null 2>&1
	fi
	qps=$((qps + 2 * PAIRS))
	now=$(date +%s)
	if [ "$now" -ge "$next" ]; then
		next=$((now + SAMPLE)); scrape
		echo "soak: $((now - start)) $(rss) $batches $qps $(awk '/^apmwatch_events_total/ {s+=$2} END {print s}' $D/m) \
$(metric apmwatch_model_qps) $(metric 'apmwatch_findings_total{kind="missed-rearm",severity="error"}') \
$(metric 'apmwatch_bundles_total{result="written"}') $(metric apmwatch_recorder_bytes) $(metric apmwatch_lost_events_total)"
		mem $((now - start))
	fi
done
echo "soak: $(( $(date +%s) - start )) $(rss) $batches $qps (end)"
heap end
scrape
# what counting one kind over the whole log costs by now (storms used to
# poll that way, three counts every half second)
m0=$(ms); kinds missed-rearm >/dev/null
echo "soak: one count over the whole finding log ($(wc -l <$D/findings.jsonl) lines, $(size) bytes) took $(( $(ms) - m0 )) ms"
echo "soak: $storms storms; lost $(metric apmwatch_lost_events_total); findings: $(kinds missed-rearm) missed-rearm, $(kinds unprotected-failure) unprotected-failure"
kill -TERM $A; wait $A; rc=$?
echo "soak: audit exit $rc; $(ls $D/rec/incidents | wc -l) bundles kept; $(wc -l < $D/findings.jsonl) finding lines"
grep -c level=WARN $D/log | sed 's/^/soak: warnings in the log: /'
tail -3 $D/log
