#!/bin/sh
# apmwatch's post-install script, the .deb's postinst and the .rpm's %post
# (nfpm): systemd re-reads the units the package installed, and on an
# upgrade the daemons that run restart into the new binary (try-restart: a
# stopped one stays stopped; nothing is enabled or started on a first
# install). Arguments: the .deb's "configure [OLD-VERSION]", the .rpm's
# count of installed versions (1: install, 2 or more: upgrade). Without a
# running systemd (a container, an image build, dpkg --root) it does
# nothing; DPKG_ROOT is the root dpkg installs into ("" for /).
set -e

upgrade=no
case "${1:-}" in
configure) [ -z "${2:-}" ] || upgrade=yes ;;
[0-9]*) [ "$1" -lt 2 ] || upgrade=yes ;;
esac

[ -d "${DPKG_ROOT:-}/run/systemd/system" ] || exit 0
systemctl daemon-reload || :
if [ "$upgrade" = yes ]; then
	systemctl try-restart apmwatch-audit.service apmwatch-fleet.service || :
fi
exit 0
