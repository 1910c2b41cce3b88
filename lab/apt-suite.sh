#!/usr/bin/env bash
# apt-get / apt-cache against another Debian suite (bullseye for the 5.10 lab
# kernel, sid for 7.2) with private package lists under $CACHE/apt/<suite>/:
# the host's own apt sources, lists and state are left as they are.
#   lab/apt-suite.sh SUITE update            fetch the suite's package lists
#   lab/apt-suite.sh SUITE get ARGS...       apt-get ARGS (download only)
#   lab/apt-suite.sh SUITE cache ARGS...     apt-cache ARGS
# get and cache fetch the lists first when they were never fetched.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
CACHE=${CACHE:-$(cd "$here/.." && pwd)/.cache}
suite=${1:-}
verb=${2:-}
[ $# -ge 2 ] || { echo "apt-suite.sh: usage: apt-suite.sh bullseye|sid update|get|cache [ARGS...]" >&2; exit 2; }
shift 2
keys=/usr/share/keyrings/debian-archive-keyring.gpg
case "$suite" in
bullseye)
	sources="deb [signed-by=$keys] http://deb.debian.org/debian bullseye main
deb [signed-by=$keys] http://deb.debian.org/debian-security bullseye-security main" ;;
sid)
	sources="deb [signed-by=$keys] http://deb.debian.org/debian sid main" ;;
*) echo "apt-suite.sh: unknown suite '$suite' (want bullseye or sid)" >&2; exit 2 ;;
esac
dir="$CACHE/apt/$suite"
mkdir -p "$dir/lists/partial" "$dir/archives/partial"
[ "$(cat "$dir/sources.list" 2>/dev/null)" = "$sources" ] || printf '%s\n' "$sources" >"$dir/sources.list"
[ -e "$dir/status" ] || : >"$dir/status"
o=(-o Dir::Etc::SourceList="$dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
	-o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null
	-o Dir::State::Lists="$dir/lists" -o Dir::State::status="$dir/status"
	-o Dir::Cache="$dir" -o Dir::Cache::archives="$dir/archives"
	-o APT::Architectures::=amd64 -o APT::Sandbox::User=root -o Debug::NoLocking=1)
update() {
	apt-get -q "${o[@]}" update >&2 || { echo "apt-suite.sh: apt-get update of $suite failed" >&2; exit 1; }
	touch "$dir/updated"
}
case "$verb" in
update) update ;;
get) [ -e "$dir/updated" ] || update; exec apt-get "${o[@]}" "$@" ;;
cache) [ -e "$dir/updated" ] || update; exec apt-cache "${o[@]}" "$@" ;;
*) echo "apt-suite.sh: unknown verb '$verb' (want update, get or cache)" >&2; exit 2 ;;
esac
