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
metric() { wget -qO- http://127.0.0.1:9578/metrics | awk -v s="$1" '$1==s {print $2}'; }
rss() { awk '/^VmRSS/ {print $2}' /proc/$A/status; }
kinds() { grep -c "\"kind\":\"$1\"" $D/findings.jsonl; }
# heap LABEL: the heap profile (after a GC) as base64 between marker lines
heap() {
	echo "soak-heap-begin $1 t=$(( $(date +%s) - start ))"
	wget -qO- 'http://127.0.0.1:9578/debug/pprof/heap?gc=1' | base64
	echo "soak-heap-end $1"
}
# storm: STORM_PAIRS pairs armed on ibsim, both ports of ibsim0 fail in turn
storm() {
	storms=$((storms + 1)); t0=$(date +%s); mr0=$(kinds missed-rearm); uf0=$(kinds unprotected-failure)
	: >$D/storm.out # before the program starts: the wait below reads it at once
	lab-ibpair --behavior never-rearm --pairs "$STORM_PAIRS" >$D/storm.out 2>&1 &
	S=$!
	n=0; while [ "$(grep -c '"ready":true' $D/storm.out)" -lt $((2 * STORM_PAIRS)) ] && [ $n -lt 600 ]; do sleep 0.5; n=$((n + 1)); done
	armed=$(grep -c '"ready":true' $D/storm.out)
	[ "$armed" -gt 0 ] || { echo "soak-storm: $storms: no QP armed:"; head -5 $D/storm.out; }
	lab-ib port --dev ibsim0 --port 1 down >/dev/null
	n=0; while [ $(( $(kinds missed-rearm) - mr0 )) -lt "$armed" ] && [ $n -lt 120 ]; do sleep 0.5; n=$((n + 1)); done
	lab-ib port --dev ibsim0 --port 2 down >/dev/null
	n=0; while [ $(( $(kinds unprotected-failure) - uf0 )) -lt "$armed" ] && [ $n -lt 120 ]; do sleep 0.5; n=$((n + 1)); done
	kill $S 2>/dev/null; wait $S 2>/dev/null
	for dev in ibsim0 ibsim1; do for p in 1 2; do lab-ib port --dev $dev --port $p up >/dev/null; done; done
	for lid in 1 2 3 4; do lab-ib link --lid $lid up >/dev/null; done
	lab-ib traffic on >/dev/null
	echo "soak-storm: $storms t=$((t0 - start)) qps=$armed missed_rearm=$(( $(kinds missed-rearm) - mr0 )) unprotected_failure=$(( $(kinds unprotected-failure) - uf0 )) took=$(( $(date +%s) - t0 ))s"
}
start=$(date +%s); end=$((start + MINUTES * 60)); next=$start; batches=0; qps=0
storms=0; nextstorm=$((start + STORM_EVERY)); heaped=
echo "soak: t_s rss_kib batches qps_made events model_qps findings bundles recorder_bytes lost"
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
		next=$((now + SAMPLE))
		echo "soak: $((now - start)) $(rss) $batches $qps $(wget -qO- http://127.0.0.1:9578/metrics | awk '/^apmwatch_events_total/ {s+=$2} END {print s}') \
$(metric apmwatch_model_qps) $(metric 'apmwatch_findings_total{kind="missed-rearm",severity="error"}') \
$(metric 'apmwatch_bundles_total{result="written"}') $(metric apmwatch_recorder_bytes) $(metric apmwatch_lost_events_total)"
	fi
done
echo "soak: $(( $(date +%s) - start )) $(rss) $batches $qps (end)"
heap end
echo "soak: $storms storms; lost $(metric apmwatch_lost_events_total); findings: $(kinds missed-rearm) missed-rearm, $(kinds unprotected-failure) unprotected-failure"
kill -TERM $A; wait $A; rc=$?
echo "soak: audit exit $rc; $(ls $D/rec/incidents | wc -l) bundles kept; $(wc -l < $D/findings.jsonl) finding lines"
grep -c level=WARN $D/log | sed 's/^/soak: warnings in the log: /'
tail -3 $D/log
