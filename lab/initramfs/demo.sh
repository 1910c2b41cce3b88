#!/bin/sh
# What `make demo` shows inside the 6.12 guest: apmwatch watching a real
# kernel's QPs on two simulated InfiniBand HCAs through a port failure (one
# application rearms, one does not and dies on the next failure, unless the
# actuator steps in), then the RoCE half (soft-RoCE, the lab module raising
# a migration). The traces print -o wide: one row an event, for the greps below.
step() { printf '\n=== %s\n' "$*"; }
# wait_for FILE PATTERN COUNT: until FILE has COUNT lines matching PATTERN (20 s at most).
wait_for() {
	n=0
	until [ "$(grep -c "$2" "$1" 2>/dev/null || true)" -ge "$3" ] 2>/dev/null || [ $n -ge 100 ]; do
		sleep 0.2
		n=$((n + 1))
	done
}

# ibqps FILE DEV: the QPNs of DEV in a lab-ibpair output
ibqps() { grep '"ready":true' "$1" | grep "\"dev\":\"$2\"" | sed 's/.*"qpn":\([0-9]*\).*/\1/' | tr '\n' ' '; }
# reacted FILE N: until FILE has N after_react lines
reacted() { wait_for "$1" '"after_react"' "$2"; }
# wait_file FILE: until FILE exists (60 s at most)
wait_file() { n=0; until [ -e "$1" ] || [ $n -ge 300 ]; do sleep 0.2; n=$((n + 1)); done; }
# rcqps: the driver's view of the RC QPs
rcqps() { lab-ib show | grep '"type":"RC"' | cut -c1-170; }

step "InfiniBand: two hosts' HCAs, simulated (ibsim0, ibsim1; ports 1 and 2, LIDs 1-4); every line above the driver is Debian's $(uname -r)"
lab-ib show | grep '"lid"'

step "apmwatch trace on both HCAs (findings only)"
apmwatch trace -o wide --device ibsim0,ibsim1 --kind finding --ready-file /tmp/ibready >/tmp/ibtrace.out 2>/tmp/ibtrace.err &
ibtrace=$!
wait_file /tmp/ibready

step "two applications, one RC QP pair each, armed (alternate path through port 2): 'good' does the three steps after each migration, 'bad' never rearms"
lab-ibpair --behavior rearm --duration 120s >/tmp/good.out 2>&1 &
good=$!
lab-ibpair --behavior never-rearm --duration 120s >/tmp/bad.out 2>&1 &
bad=$!
wait_for /tmp/good.out '"ready":true' 2
wait_for /tmp/bad.out '"ready":true' 2
echo "good: ibsim0 QP $(ibqps /tmp/good.out ibsim0)<-> ibsim1 QP $(ibqps /tmp/good.out ibsim1)"
echo "bad:  ibsim0 QP $(ibqps /tmp/bad.out ibsim0)<-> ibsim1 QP $(ibqps /tmp/bad.out ibsim1)"

step "port 1 of ibsim0 fails: each QP's requests go unanswered; when their retries run out (timeout 14, retry_cnt 7: 0.54 s) the HCAs migrate every QP to its alternate, on both hosts (PATH_MIG)"
lab-ib port --dev ibsim0 --port 1 down
reacted /tmp/good.out 2
sleep 3
rcqps
step "what apmwatch saw: nothing about 'good', a missed rearm on both ends of 'bad'"
cat /tmp/ibtrace.out | cut -c1-220

step "port 1 comes back, then port 2 fails: 'good' migrates back; 'bad' has no armed alternate and dies"
lab-ib port --dev ibsim0 --port 1 up
lab-ib port --dev ibsim0 --port 2 down
sleep 3
rcqps
kill "$ibtrace"; wait "$ibtrace" 2>/dev/null
step "apmwatch trace: unprotected-failure for 'bad' (critical: its cause, the missed rearm, and how long it ran unprotected)"
grep -E 'unprotected-failure|UNPROTECTED' /tmp/ibtrace.out | cut -c1-300
kill "$good" "$bad" 2>/dev/null; wait "$good" "$bad" 2>/dev/null
for d in ibsim0 ibsim1; do for p in 1 2; do lab-ib port --dev $d --port $p up >/dev/null; done; done

step "the actuator steps in: apmwatch audit --enforce, with an alternates table"
cat >/tmp/policy.json <<'POLICY'
{"mode": "enforce", "allow": {"devices": ["ibsim0", "ibsim1"], "comms": ["lab-ibpair"]},
 "rate_limit": {"max": 10, "per": "1m", "owner_max": 10},
 "alternates": [{"device": "ibsim0", "port": 2, "alt": {"port": 1, "dlid": 3}},
                {"device": "ibsim1", "port": 2, "alt": {"port": 1, "dlid": 1}}]}
POLICY
cat /tmp/policy.json
apmwatch audit --policy /tmp/policy.json --enforce --findings /tmp/audit.jsonl --metrics-addr '' \
	--ready-file /tmp/auditready 2>/tmp/audit.err &
audit=$!
wait_file /tmp/auditready
lab-ibpair --behavior never-rearm --duration 120s >/tmp/bad.out 2>&1 &
bad=$!
wait_for /tmp/bad.out '"ready":true' 2
echo "bad again: ibsim0 QP $(ibqps /tmp/bad.out ibsim0)<-> ibsim1 QP $(ibqps /tmp/bad.out ibsim1)"
lab-ib port --dev ibsim0 --port 1 down
wait_for /tmp/bad.out '"event":"PATH_MIG"' 2 # the retries ran out: both migrated
lab-ib port --dev ibsim0 --port 1 up
wait_for /tmp/audit.jsonl '"kind":"actuated"' 2
sleep 1
step "audit rearmed both ends onto port 1 (the actuated findings, before/after):"
grep '"kind":"actuated"' /tmp/audit.jsonl | grep -o '"device":"[^"]*","qpn":[0-9]*\|"what":"\(before\|after\): [^"]*"'
rcqps
step "port 2 fails: 'bad' migrates cleanly back to port 1, no unprotected-failure"
lab-ib port --dev ibsim0 --port 2 down
sleep 3
rcqps
echo "unprotected-failure findings: $(grep -c unprotected-failure /tmp/audit.jsonl)"
kill "$audit" "$bad" 2>/dev/null; wait "$audit" "$bad" 2>/dev/null
for d in ibsim0 ibsim1; do for p in 1 2; do lab-ib port --dev $d --port $p up >/dev/null; done; done

step "The RoCE half: on soft-RoCE APM is refused (InfiniBand-only); the lab module raises the events"
step "RDMA devices: soft-RoCE on a veth pair, Debian's $(uname -r)"
rdma link

step "apmwatch probes: the hooks this kernel has, and how each attaches (the lab module's handler by --event-hook)"
apmwatch probes --event-hook apmlab:qp_event | grep -v ' missing '

step "apmwatch trace, recording to /tmp/demo.rec (the model runs inside it)"
apmwatch trace -o wide --rearm-deadline 1s --record /tmp/demo.rec --ready-file /tmp/ready \
	>/tmp/trace.out 2>/tmp/trace.err &
trace=$!
wait_for /tmp/ready . 1

step "lab-pair: an RC QP pair rxe0<->rxe1 through libibverbs, armed; it never rearms"
lab-pair --behavior never-rearm --duration 60s >/tmp/pair.out 2>&1 &
pair=$!
wait_for /tmp/pair.out '"ready":true' 2
grep '"ready":true' /tmp/pair.out
qpn=$(grep '"dev":"rxe0"' /tmp/pair.out | sed -n 's/.*"qpn":\([0-9]*\).*/\1/p' | head -n1)
pid=$(grep '"ready":true' /tmp/pair.out | sed -n 's/.*"pid":\([0-9]*\).*/\1/p' | head -n1)

step "the HCA migrates rxe0 QP $qpn to its alternate path (lab-inject --migrate raises PATH_MIG)"
lab-inject --dev rxe0 --qpn "$qpn" --event path_mig --migrate
sleep 2

step "nobody rearmed it: apmwatch qp list shows the kernel's own view"
apmwatch qp list --device rxe0

step "the actuator rearms it through the owner's borrowed uverbs file (lab: no alternate path on RoCE)"
apmwatch actuate rearm --pid "$pid" --qpn "$qpn" --device rxe0
sleep 1.5

kill "$trace" 2>/dev/null
wait "$trace" 2>/dev/null
kill "$pair" 2>/dev/null
wait "$pair" 2>/dev/null

step "what apmwatch trace printed (QP $qpn: modifies, the event, the finding, its resolution)"
grep -E "rxe0 .*\b$qpn\b|FINDING|RESOLVED" /tmp/trace.out | cut -c1-200
step "trace summary"
cat /tmp/trace.err

step "apmwatch postmortem /tmp/demo.rec: the same findings, replayed from the recording"
apmwatch postmortem --rearm-deadline 1s --qpn "$qpn" /tmp/demo.rec | head -n 40
