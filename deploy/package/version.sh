#!/bin/sh
# Prints the package version of the checkout, from its nearest release tag:
#   on tag v1.2.3                    1.2.3
#   5 commits after it               1.2.3+git5.<commit>
#   on tag v1.3.0-rc1 (pre-release)  1.3.0~rc1 (dpkg and rpm sort it before 1.3.0)
#   no release tag at all            0.0.0+git<commits>.<commit>
# Usage: version.sh [DESCRIBE], DESCRIBE being what
#   git describe --tags --long --match 'v[0-9]*'
# prints (the tests give it); without it the script asks git.
set -eu
die() { echo "version: $*" >&2; exit 1; }

if [ $# -gt 0 ]; then
	d=$1
elif ! d=$(git describe --tags --long --match 'v[0-9]*' 2>/dev/null); then
	n=$(git rev-list --count HEAD 2>/dev/null) && c=$(git rev-parse --short HEAD) ||
		die "not a git checkout with a commit: give PKG_VERSION"
	echo "0.0.0+git$n.$c"
	exit 0
fi

# v<X.Y.Z>[-<pre-release>]-<commits since>-g<commit>; the pre-release goes
# last so that an empty one leaves three fields.
# shellcheck disable=SC2046
set -- $(printf '%s\n' "$d" |
	sed -nE 's/^v([0-9]+\.[0-9]+\.[0-9]+)(-([0-9A-Za-z.]+))?-([0-9]+)-g([0-9a-f]+)$/\1 \4 \5 \3/p')
[ $# -ge 3 ] || die "tag of \"$d\" is not a release tag vX.Y.Z or vX.Y.Z-<pre-release>"
v=$1
[ $# -lt 4 ] || v="$v~$4"
[ "$2" = 0 ] || v="$v+git$2.$3"
echo "$v"
