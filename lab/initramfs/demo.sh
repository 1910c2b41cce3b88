#!/bin/sh
# What `make demo` shows inside the 6.12 guest: only what exists in this tree.
step() { printf '\n=== %s\n' "$*"; }

step "RDMA devices (soft-RoCE on a veth pair)"
ibv_devices
step "rdma link"
rdma link

if command -v lab-pair >/dev/null && command -v lab-inject >/dev/null; then
	step "a connected RC QP pair rxe0<->rxe1 (lab-pair), armed"
	lab-pair --behavior rearm --duration 20s >/tmp/pair.out 2>&1 &
	pair=$!
	n=0
	until [ "$(grep -c '"ready":true' /tmp/pair.out)" -ge 2 ] || [ $n -ge 100 ]; do
		sleep 0.2
		n=$((n + 1))
	done
	cat /tmp/pair.out
	step "QPs as rdma netlink sees them"
	rdma resource show qp
	qpn=$(grep '"dev":"rxe0"' /tmp/pair.out | sed -n 's/.*"qpn":\([0-9]*\).*/\1/p' | head -n1)
	if [ -n "$qpn" ]; then
		seen=$(wc -l </tmp/pair.out)
		step "inject PATH_MIG on rxe0 QP $qpn (lab-inject --migrate), as an HCA would"
		lab-inject --dev rxe0 --qpn "$qpn" --event path_mig --migrate
		sleep 2
		step "what lab-pair saw and did (behaviour: rearm)"
		tail -n +$((seen + 1)) /tmp/pair.out
		step "QPs after the migration"
		rdma resource show qp
	fi
	kill "$pair" 2>/dev/null
	wait "$pair" 2>/dev/null
else
	step "lab-pair / lab-inject not built yet: no QP pair or migration to show"
fi

step "apmwatch"
if command -v apmwatch >/dev/null; then
	apmwatch version
else
	echo "bin/apmwatch not built"
fi
