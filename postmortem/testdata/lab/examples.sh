#!/bin/sh
# Runs inside the lab guest (make examples): records each scenario with
# `apmwatch record` and prints every recording base64-encoded between
# "=== BEGIN NAME ===" and "=== END NAME ===" lines (the guest's stdout is
# the only way out); postmortem/testdata/unpack.sh writes them back.
set -u
out=/tmp/examples
mkdir -p "$out"

# start_rec NAME [apmwatch record flags]: record in the background until stop_recs
start_rec() {
	name=$1; shift
	apmwatch record -w "$out/$name.rec" --ready-file "$out/$name.ready" "$@" 2>"$out/$name.log" &
	echo $! >>"$out/recs"
	i=0
	while [ ! -e "$out/$name.ready" ]; do
		i=$((i + 1)); [ $i -gt 300 ] && { echo "apmwatch record $name did not start" >&2; cat "$out/$name.log" >&2; exit 1; }
		sleep 0.1
	done
}

# stop_recs: SIGINT every recorder and wait for it; one still running after
# 15 s is killed (its file then ends at its last timed flush, and a replay
# warns that it was cut).
stop_recs() {
	for p in $(cat "$out/recs"); do kill -INT "$p"; done
	for p in $(cat "$out/recs"); do
		i=0
		while kill -0 "$p" 2>/dev/null && [ $i -lt 150 ]; do i=$((i + 1)); sleep 0.1; done
		if kill -0 "$p" 2>/dev/null; then
			echo "examples: apmwatch record (pid $p) did not stop on SIGINT in 15 s: killed" >&2
			kill -9 "$p"
		fi
		wait "$p"
	done
	rm -f "$out/recs"
}

# pair BEHAVIOR: start lab-pair, wait for both ready lines, set q0 and q1
pair() {
	lab-pair --behavior "$1" --duration 60s >"$out/pair.out" &
	pp=$!
	i=0
	while [ "$(grep -c '"ready":true' "$out/pair.out")" -lt 2 ]; do
		i=$((i + 1)); [ $i -gt 300 ] && { echo "lab-pair did not get ready" >&2; exit 1; }
		sleep 0.1
	done
	q0=$(grep '"ready":true' "$out/pair.out" | grep '"dev":"rxe0"' | sed 's/.*"qpn":\([0-9]*\).*/\1/')
	q1=$(grep '"ready":true' "$out/pair.out" | grep '"dev":"rxe1"' | sed 's/.*"qpn":\([0-9]*\).*/\1/')
}

endpair() {
	kill -TERM "$pp"; wait "$pp"
}

emit() {
	for f in "$@"; do
		echo "=== BEGIN $(basename "$f") ==="
		base64 "$f"
		echo "=== END $(basename "$f") ==="
	done
}

# correct rearm: both sides migrate (injected), lab-pair rearms each at once
start_rec correct-rearm
pair rearm
lab-inject --dev rxe0 --qpn "$q0" --event path_mig --migrate >/dev/null
lab-inject --dev rxe1 --qpn "$q1" --event path_mig --migrate >/dev/null
sleep 1; endpair; stop_recs

# missed rearm: nobody rearms; 3 s > the 2 s rearm deadline
start_rec missed-rearm
pair never-rearm
lab-inject --dev rxe0 --qpn "$q0" --event path_mig --migrate >/dev/null
sleep 3; endpair; stop_recs

# steps 2 and 3 swapped: rearm, then the alternate load. On InfiniBand the
# late load is a lap-race; on RoCE the load is refused (EINVAL), so the lab
# cannot show a lap-race at all: apm/lap_race_test.go covers it.
start_rec rearm-then-alt
pair rearm-then-alt
lab-inject --dev rxe0 --qpn "$q0" --event path_mig --migrate >/dev/null
sleep 3; endpair; stop_recs

# PATH_MIG while the QP is still armed (no migrate),
# twice, without a rearm in between
start_rec mig-state-mismatch
pair never-rearm
lab-inject --dev rxe0 --qpn "$q0" --event path_mig >/dev/null
sleep 0.5
lab-inject --dev rxe0 --qpn "$q0" --event path_mig >/dev/null
sleep 3; endpair; stop_recs

# two hosts: one apmwatch per device stands in for each host; only rxe0's
# QP migrates and rearms, rxe1's never rearms (one-sided-rearm)
start_rec pair-rxe0 --device rxe0
start_rec pair-rxe1 --device rxe1
pair rearm
lab-inject --dev rxe0 --qpn "$q0" --event path_mig --migrate >/dev/null
sleep 3; endpair; stop_recs

# InfiniBand (the simulated HCA, ibsim0 <-> ibsim1): the alternate loads
# succeed and a port failure migrates both ends once their requests'
# retries run out (about 0.54 s at lab-ibpair's timeout 14, retry_cnt 7).

# ibpair BEHAVIOR: start lab-ibpair, wait for both ready lines, set q0 and q1
ibpair() {
	lab-ibpair --behavior "$1" --duration 60s >"$out/ibpair.out" &
	pp=$!
	i=0
	while [ "$(grep -c '"ready":true' "$out/ibpair.out")" -lt 2 ]; do
		i=$((i + 1)); [ $i -gt 300 ] && { echo "lab-ibpair did not get ready" >&2; exit 1; }
		sleep 0.1
	done
}

# reacted N: wait until lab-ibpair printed N after_react lines
reacted() {
	i=0
	while [ "$(grep -c '"after_react"' "$out/ibpair.out")" -lt "$1" ]; do
		i=$((i + 1)); [ $i -gt 300 ] && { echo "lab-ibpair did not react" >&2; exit 1; }
		sleep 0.1
	done
}

fabric_up() {
	for d in ibsim0 ibsim1; do for p in 1 2; do lab-ib port --dev $d --port $p up >/dev/null; done; done
	lab-ib traffic on >/dev/null
}

# a correct application: new alternate and rearm on both ends: no finding
start_rec ib-correct
ibpair rearm
lab-ib port --dev ibsim0 --port 1 down >/dev/null
reacted 2
sleep 3; endpair; fabric_up; stop_recs

# nobody rearms; the next failure (port 2) kills both connections
start_rec ib-unprotected-failure
ibpair never-rearm
lab-ib port --dev ibsim0 --port 1 down >/dev/null
sleep 3
lab-ib port --dev ibsim0 --port 2 down >/dev/null
sleep 3; endpair; fabric_up; stop_recs

# rearm before the alternate load, on both ends
start_rec ib-lap-race
ibpair rearm-then-alt
lab-ib port --dev ibsim0 --port 1 down >/dev/null
reacted 2
sleep 3; endpair; fabric_up; stop_recs

# two hosts, one recording per device: only ibsim0 rearms
start_rec ib-pair-ibsim0 --device ibsim0
start_rec ib-pair-ibsim1 --device ibsim1
ibpair one-side
lab-ib port --dev ibsim0 --port 1 down >/dev/null
reacted 1
sleep 3; endpair; fabric_up; stop_recs

# Open MPI's own APM (docs/lab.md, "Open MPI's APM, observed"): two ranks,
# one per HCA, openib with the APM of $mpi_apm (over ports unless set);
# FAIL, a lab-ib command, runs 5 s in.
# mpi_job NAME FAIL [env for each rank]
mpi_apm="--mca btl_openib_enable_apm_over_ports 1"
mpi_job() {
	name=$1; fail=$2; shift 2
	start_rec "$name"
	# shellcheck disable=SC2086 # $mpi_apm is a list of arguments
	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --mca plm isolated \
		--mca btl openib,self --mca btl_openib_allow_ib 1 $mpi_apm \
		--mca btl_openib_warn_no_device_params_found 0 --mca btl_openib_ib_timeout 14 \
		-np 1 env OMPI_MCA_btl_openib_if_include=ibsim0 "$@" lab-mpi --seconds 15 : \
		-np 1 env OMPI_MCA_btl_openib_if_include=ibsim1 "$@" lab-mpi --seconds 15 >"$out/$name.mpi" 2>&1 &
	mp=$!
	sleep 5
	# shellcheck disable=SC2086 # $fail is a lab-ib command line
	lab-ib $fail >/dev/null
	wait "$mp"
	sleep 3; fabric_up; stop_recs
}

# as shipped: its alternate load is refused by ib_uverbs (never reaches the
# verbs layer), so the failure kills the job: an apm-modify-failed per QP
# whose load was refused, naming the address vector's port
mpi_job openmpi-port-failure "port --dev ibsim0 --port 1 down"
# its alternate load corrected (lab-altport.so): the QPs migrate, the job
# completes, Open MPI never rearms: a missed-rearm for each migrated QP
mpi_job openmpi-altport-fixed "port --dev ibsim0 --port 1 down" LD_PRELOAD=/usr/local/bin/lab-altport.so
# APM over LMC, every port answering two LIDs (ibsim0 port 1: 2 and 3), on
# an HCA whose query reads port 1 for an alternate never loaded (mlx4):
# port 1's QPs load their LMC path and port 2's are refused; the switch
# stops routing to LID 2: port 1's QPs migrate, nobody rearms
lab-ib lmc 1 >/dev/null
lab-ib knob unloaded-alt-port 1 >/dev/null
mpi_apm="--mca btl_openib_enable_apm_over_lmc 1 --mca btl_openib_max_lmc 0"
mpi_job openmpi-lmc "link --lid 2 down"
lab-ib knob unloaded-alt-port 0 >/dev/null
lab-ib lmc 0 >/dev/null

emit "$out"/*.rec
