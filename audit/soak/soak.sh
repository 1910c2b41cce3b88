#!/bin/sh
# Soak run of `apmwatch audit` inside the lab guest (make audit-soak): QPs
# created and destroyed in a loop (lab-pair --pairs), a PATH_MIG injected
# into every tenth batch (missed-rearm findings and bundles), the daemon's
# RSS sampled every SAMPLE seconds. Prints one line per sample, then a
# summary line. Needs: apmwatch, lab-pair, lab-inject, wget (busybox).
MINUTES=${1:-5}
SAMPLE=${2:-15}
PAIRS=${3:-8}
D=/tmp/soak
rm -rf $D; mkdir -p $D
apmwatch audit --findings $D/findings.jsonl --recorder-dir $D/rec --recorder-max-bytes 8388608 \
	--recorder-max-age 2m --bundle-after 1s --reconcile-interval 2s --ready-file $D/ready 2>$D/log &
A=$!
while [ ! -e $D/ready ]; do sleep 0.1; kill -0 $A 2>/dev/null || { cat $D/log; exit 1; }; done
metric() { wget -qO- http://127.0.0.1:9578/metrics | awk -v s="$1" '$1==s {print $2}'; }
rss() { awk '/^VmRSS/ {print $2}' /proc/$A/status; }
start=$(date +%s); end=$((start + MINUTES * 60)); next=$start; batches=0; qps=0
echo "soak: t_s rss_kib batches qps_made events model_qps findings bundles recorder_bytes lost"
while [ "$(date +%s)" -lt "$end" ]; do
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
kill -TERM $A; wait $A; rc=$?
echo "soak: audit exit $rc; $(ls $D/rec/incidents | wc -l) bundles kept; $(wc -l < $D/findings.jsonl) finding lines"
grep -c level=WARN $D/log | sed 's/^/soak: warnings in the log: /'
tail -3 $D/log
