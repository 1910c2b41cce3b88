#!/bin/sh
# apmwatch's pre-removal script, the .deb's prerm and the .rpm's %preun
# (nfpm): on removal (not an upgrade) the daemons stop while their binary
# is still there. Arguments: the .deb's "remove" (or "upgrade", ...), the
# .rpm's count of versions left (0: erase, 1: upgrade). Without a running
# systemd it does nothing.
set -e

case "${1:-}" in
remove | 0) ;;
*) exit 0 ;;
esac

[ -d "${DPKG_ROOT:-}/run/systemd/system" ] || exit 0
systemctl stop apmwatch-audit.service apmwatch-fleet.service || :
exit 0
