#!/bin/sh
# Regenerates the fixtures of this directory with Debian's packages
# ibsim-utils (OFA's fabric simulator, not the lab's verbs HCA),
# opensm and infiniband-diags. Run it here: sh gen.sh
set -eu
sim=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so
tmp=$(mktemp -d)
ibsim -s -n fattree.net >"$tmp/ibsim.log" 2>&1 &
pid=$!
trap 'kill $pid; rm -rf "$tmp"' EXIT
sleep 2
export OSM_TMP_DIR="$tmp" OSM_CACHE_DIR="$tmp" SIM_HOST=H1
LD_PRELOAD=$sim opensm -l 1 -o -e -f "$tmp/osm.log" -D 0x43 --dump_files_dir "$tmp" >/dev/null
LD_PRELOAD=$sim ibnetdiscover >ibnetdiscover.out
LD_PRELOAD=$sim dump_lfts >dump_lfts.out
LD_PRELOAD=$sim ibroute 6 >ibroute-leaf1.out
cp "$tmp/opensm-lfts.dump" opensm-lfts.dump
