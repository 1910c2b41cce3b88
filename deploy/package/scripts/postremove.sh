#!/bin/sh
# apmwatch's post-removal script, the .deb's postrm and the .rpm's %postun
# (nfpm): systemd forgets the removed units; the .deb's purge also removes
# what the daemons wrote (finding logs, flight recorder, incident bundles,
# the fleet's store) and the units' enablement links. Arguments: the .deb's
# "remove", "purge", "upgrade", ...; the .rpm's count of versions left (0:
# erase, which keeps the data as rpm does). DPKG_ROOT is the root dpkg
# installs into ("" for /).
set -e

root=${DPKG_ROOT:-}
if [ "${1:-}" = purge ]; then
	# The daemons' directories (systemd's StateDirectory and LogsDirectory;
	# the fleet's DynamicUser keeps its own under private/).
	rm -rf "$root/var/lib/apmwatch" "$root/var/log/apmwatch" \
		"$root/var/lib/apmwatch-fleet" "$root/var/log/apmwatch-fleet" \
		"$root/var/lib/private/apmwatch-fleet" "$root/var/log/private/apmwatch-fleet"
	rm -f "$root"/etc/systemd/system/*.wants/apmwatch-audit.service \
		"$root"/etc/systemd/system/*.wants/apmwatch-fleet.service
	# dpkg removes the conffiles of /etc/apmwatch; the directory goes when
	# nothing of the operator's (a policy.json) is left in it.
	rmdir "$root/etc/apmwatch" 2>/dev/null || :
fi

case "${1:-}" in
remove | purge | 0) ;;
*) exit 0 ;;
esac
[ -d "$root/run/systemd/system" ] || exit 0
systemctl daemon-reload || :
exit 0
