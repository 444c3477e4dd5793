#!/usr/bin/env bash
# Installs the system packages the tests need, when they are missing.
set -euo pipefail
need=()
command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ] || need+=(mosquitto)
command -v socat >/dev/null 2>&1 || need+=(socat)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v mvn >/dev/null 2>&1 || need+=(maven)
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
# systemd-analyze verifies packaging/dispatcher@.service.
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
# nft cuts a broker from the others in the chaos run.
command -v nft >/dev/null 2>&1 || need+=(nftables)
# ip creates the chaos run's network namespaces and veth links.
command -v ip >/dev/null 2>&1 || need+=(iproute2)
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
updated=""
if [ ${#need[@]} -gt 0 ]; then
	echo "deps: installing ${need[*]}"
	$SUDO apt-get update -qq
	updated=1
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
# promtool checks docs/alerts/dispatcher.rules.yml. It comes out of Debian's
# prometheus package, unpacked rather than installed, so that no Prometheus
# server is set up or started beside the tests.
if ! command -v promtool >/dev/null 2>&1; then
	echo "deps: installing promtool from the prometheus package"
	[ -n "$updated" ] || $SUDO apt-get update -qq
	tmp=$(mktemp -d)
	(cd "$tmp" && apt-get download -qq prometheus 2>/dev/null && dpkg-deb -x prometheus_*.deb x)
	$SUDO install -m 0755 "$tmp/x/usr/bin/promtool" /usr/local/bin/promtool
	rm -rf "$tmp"
fi
