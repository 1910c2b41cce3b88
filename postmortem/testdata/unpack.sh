#!/bin/sh
# unpack.sh DIR < lab-output: writes each "=== BEGIN NAME ===" ...
# "=== END NAME ===" base64 block of the lab's output to DIR/NAME.
set -eu
dir=$1
mkdir -p "$dir"
awk -v dir="$dir" '
/^=== BEGIN .* ===$/ { name = $3; file = dir "/" name ".b64"; printf "" > file; next }
/^=== END .* ===$/   { close(file); print file; name = ""; next }
name != ""          { print >> file }
' | while read -r f; do
	base64 -d "$f" >"${f%.b64}"
	rm -f "$f"
	echo "examples: ${f%.b64}"
done
