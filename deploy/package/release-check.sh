#!/bin/sh
# make release's checks, run at the repository's top: the tree is clean,
# HEAD is on a release tag vX.Y.Z (or vX.Y.Z-<pre-release>), and CHANGELOG.md
# has that release's section, "## [X.Y.Z] - YYYY-MM-DD". Prints the package
# version (deploy/package/version.sh).
set -eu
die() { echo "release: $*" >&2; exit 1; }

[ -z "$(git status --porcelain)" ] || die "the tree has changes or untracked files (git status): commit or remove them"
tag=$(git describe --tags --exact-match --match 'v[0-9]*' HEAD 2>/dev/null) ||
	die "HEAD is not on a release tag vX.Y.Z (git tag -a vX.Y.Z)"
v=$("$(dirname "$0")/version.sh")
awk -v s="## [${tag#v}] - " 'index($0, s) == 1 && $NF ~ /^[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]$/ { f = 1 } END { exit !f }' CHANGELOG.md 2>/dev/null ||
	die "CHANGELOG.md has no section \"## [${tag#v}] - YYYY-MM-DD\""
echo "$v"
