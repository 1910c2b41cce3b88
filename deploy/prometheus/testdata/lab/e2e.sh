#!/bin/sh
# Runs inside the lab guest (make prom-test): Debian's Prometheus scrapes a
# live `apmwatch audit` with the shipped rules while a QP migrates and is
# not rearmed. Prints, between "=== BEGIN NAME ===" and "=== END NAME ==="
# lines, what the host-side test (deploy/prometheus, TestLab) checks:
#   alerts       /api/v1/alerts once ApmwatchMissedRearm is pending or firing
#   query        /api/v1/query of a recording rule (apmwatch:qps:by_mig_state)
#   scrape       /metrics while the missed rearm is open
#   scrape-after /metrics after the actuator rearmed the QP (a resolution,
#                apmwatch_unprotected_seconds observed)
#   findings     the daemon's finding lines
set -u
t=/tmp/prom
mkdir -p "$t"
die() { echo "prom-test: $*" >&2; for f in "$t"/*.err; do echo "--- $f" >&2; tail -n 20 "$f" >&2; done; exit 1; }
# wait_for N CMD...: until CMD succeeds, every 0.2 s, N times at most
wait_for() {
	n=$1; shift
	i=0
	until "$@"; do
		i=$((i + 1)); [ $i -ge "$n" ] && return 1
		sleep 0.2
	done
}
get() { wget -q -O - "$1"; }
block() {
	echo "=== BEGIN $1 ==="
	awk 1
	echo "=== END $1 ==="
}

apmwatch audit --metrics-addr 127.0.0.1:9578 --findings "$t/findings.jsonl" --rearm-deadline 1s \
	--reconcile-interval 1s --ready-file "$t/ready" >"$t/audit.out" 2>"$t/audit.err" &
audit=$!
wait_for 300 test -e "$t/ready" || die "apmwatch audit did not attach"

/extra/prometheus --config.file=/extra/prometheus.yml --storage.tsdb.path="$t/tsdb" \
	--web.listen-address=127.0.0.1:9090 --log.level=warn >"$t/prometheus.out" 2>"$t/prometheus.err" &
prom=$!
wait_for 600 get http://127.0.0.1:9090/-/ready >/dev/null 2>&1 || die "prometheus did not get ready"
# The target is up once the first scrape succeeded.
up() { get 'http://127.0.0.1:9090/api/v1/query?query=up%7Bjob%3D%22apmwatch%22%7D' | grep -q '"value":\[[0-9.]*,"1"\]'; }
wait_for 300 up || die "prometheus never scraped apmwatch audit"

lab-pair --behavior never-rearm --duration 120s >"$t/pair.out" 2>"$t/pair.err" &
pair=$!
ready2() { [ "$(grep -c '"ready":true' "$t/pair.out")" -ge 2 ]; }
wait_for 300 ready2 || die "lab-pair did not get ready"
line=$(grep '"ready":true' "$t/pair.out" | grep '"dev":"rxe0"' | head -n 1)
qpn=$(echo "$line" | sed 's/.*"qpn":\([0-9]*\).*/\1/')
pid=$(echo "$line" | sed 's/.*"pid":\([0-9]*\).*/\1/')
lab-inject --dev rxe0 --qpn "$qpn" --event path_mig --migrate >/dev/null || die "lab-inject failed"

missed() { grep -q '"kind":"missed-rearm"' "$t/findings.jsonl" 2>/dev/null; }
wait_for 300 missed || die "no missed-rearm finding"
alert() { get http://127.0.0.1:9090/api/v1/alerts >"$t/alerts.json" && grep -q '"alertname":"ApmwatchMissedRearm"' "$t/alerts.json"; }
wait_for 300 alert || die "ApmwatchMissedRearm never became pending or firing"
block alerts <"$t/alerts.json"
# The recording rule sees the MIGRATED reading one reconcile, one scrape and
# one rule evaluation after the migration: wait for it (the host-side test
# says what it got if it never comes).
migq() { get 'http://127.0.0.1:9090/api/v1/query?query=apmwatch%3Aqps%3Aby_mig_state' >"$t/query.json" && grep -q '"mig_state":"MIGRATED"' "$t/query.json"; }
wait_for 150 migq || true
block query <"$t/query.json"
get http://127.0.0.1:9578/metrics | block scrape

apmwatch actuate rearm --pid "$pid" --qpn "$qpn" --device rxe0 >"$t/actuate.out" 2>"$t/actuate.err" || die "apmwatch actuate rearm failed"
resolved() { grep -q '"type":"resolution"' "$t/findings.jsonl"; }
wait_for 300 resolved || die "no resolution after the rearm"
get http://127.0.0.1:9578/metrics | block scrape-after
block findings <"$t/findings.jsonl"

kill "$prom" "$pair" 2>/dev/null
kill -TERM "$audit"
wait "$audit" || die "apmwatch audit exited $?"
