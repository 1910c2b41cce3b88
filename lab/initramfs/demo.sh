#!/bin/sh
# What `make demo` shows inside the 6.12 guest: apmwatch watching a real
# kernel's QPs while the test module plays the HCA and raises a migration.
step() { printf '\n=== %s\n' "$*"; }
# wait_for FILE PATTERN COUNT: until FILE has COUNT lines matching PATTERN (20 s at most).
wait_for() {
	n=0
	until [ "$(grep -c "$2" "$1" 2>/dev/null)" -ge "$3" ] || [ $n -ge 100 ]; do
		sleep 0.2
		n=$((n + 1))
	done
}

step "RDMA devices: soft-RoCE on a veth pair, Debian's $(uname -r)"
rdma link

step "apmwatch probes: the hooks this kernel has, and how each attaches (the lab module's handler by --event-hook)"
apmwatch probes --event-hook apmlab:qp_event | grep -v ' missing '

step "apmwatch trace, recording to /tmp/demo.rec (the model runs inside it)"
apmwatch trace --rearm-deadline 1s --record /tmp/demo.rec --ready-file /tmp/ready \
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
