#!/usr/bin/env bash
# Provides the headless browser of the status-page tests.
#
#   30-chromium.sh start          install Debian's chromium when it is missing,
#                                 check that it starts headless, and write
#                                 .run/chromium/env with KRABKA_CHROMIUM
#   30-chromium.sh stop [rc]      remove .run/chromium
#   30-chromium.sh status         exit 0 when the browser starts headless
#
# Nothing keeps running: each test starts its own browser process with a
# temporary profile and talks only to 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=$PWD/.run/chromium

browser() {
	command -v chromium 2>/dev/null || command -v chromium-browser 2>/dev/null
}

ensure_installed() {
	if ! browser >/dev/null; then
		local sudo=""
		[ "$(id -u)" -eq 0 ] || sudo=sudo
		echo "chromium: installing chromium"
		$sudo apt-get update -qq
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
	fi
}

check() {
	local profile
	profile=$(mktemp -d)
	# A blank page proves the binary and its libraries load headless.
	timeout 60 "$(browser)" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
		--disable-background-networking --disable-component-update --disable-sync \
		--disable-dev-shm-usage --user-data-dir="$profile" --dump-dom about:blank >/dev/null 2>&1
	local rc=$?
	rm -rf "$profile"
	return $rc
}

case "${1:-}" in
start)
	ensure_installed
	if ! check; then
		echo "chromium: $(browser) does not start headless" >&2
		exit 1
	fi
	mkdir -p "$dir"
	echo "export KRABKA_CHROMIUM=$(browser)" >"$dir/env"
	echo "chromium: $(browser) ready"
	;;
stop)
	rm -rf "$dir"
	;;
status)
	browser >/dev/null && check
	;;
*)
	echo "usage: $0 start|stop [rc]|status" >&2
	exit 2
	;;
esac
