#!/bin/sh
# Renders the DaemonSet template on stdout with the image pinned by digest:
#   deploy/render.sh IMAGE [METRICS]
# IMAGE is name@sha256:<64 hex digits> (a tag alone is refused: a tag can be
# moved to other bytes). METRICS is "loopback" (default: metrics only on the
# node's 127.0.0.1, for a node-local scraper and the readiness probe) or
# "node" (on the node's address, port 9578, with the prometheus.io
# annotations). Called by `make daemonset`.
set -eu
image=${1:-}
metrics=${2:-loopback}
here=$(dirname "$0")
if ! printf '%s\n' "$image" | grep -Eq '^[a-z0-9][a-z0-9._/:-]*@sha256:[0-9a-f]{64}$'; then
	echo "render: image must be pinned by digest (name@sha256:<64 hex>), got '$image'" >&2
	exit 2
fi
case $metrics in
loopback)
	addr='127.0.0.1:9578'
	probe='127.0.0.1'
	annotations='{}'
	ports='ports: []'
	;;
node)
	addr='$(NODE_IP):9578'
	probe=''
	annotations='{prometheus.io/scrape: "true", prometheus.io/port: "9578", prometheus.io/path: /metrics}'
	ports='ports: [{name: metrics, containerPort: 9578, protocol: TCP}]'
	;;
*)
	echo "render: METRICS must be loopback or node, got '$metrics'" >&2
	exit 2
	;;
esac
if [ -n "$probe" ]; then
	probe_sed="s|\"@PROBE_HOST@\"|\"$probe\"|"
else
	probe_sed='s|host: "@PROBE_HOST@", ||'
fi
sed -e "s|\"@IMAGE@\"|\"$image\"|" \
	-e "s|@METRICS_ADDR@|$addr|" \
	-e "$probe_sed" \
	-e "s|annotations:\$|annotations: $annotations|" \
	-e "/# @METRICS_ANNOTATIONS@/d" \
	-e "s|# @METRICS_PORTS@|$ports|" \
	"$here/apmwatch-audit-daemonset.yaml"
