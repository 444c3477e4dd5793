#!/usr/bin/env bash
# Runs every test against real services: installs what is missing, starts each
# service script found under scripts/services/, runs the Go tests with the
# integration tag and the race detector, and stops the services on exit. Each
# service writes the variables its tests read to .run/<service>/env.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bash scripts/deps.sh

services=()
for s in scripts/services/*.sh; do
	[ -e "$s" ] && services+=("$s")
done

stop_all() {
	local rc=$?
	for ((i=${#services[@]}-1; i>=0; i--)); do
		bash "${services[$i]}" stop "$rc" || true
	done
	exit "$rc"
}
trap stop_all EXIT INT TERM

for s in "${services[@]}"; do
	bash "$s" start
done
for envfile in "$root"/.run/*/env; do
	# shellcheck disable=SC1090
	[ -e "$envfile" ] && . "$envfile"
done

# One package at a time: several packages kill and restart brokers or measure
# timings, and on a two-core machine they stay honest only when they do not
# compete with each other.
mkdir -p "$root/.run"
go test -race -tags integration -timeout 40m -count=1 -p 1 ./... 2>&1 | tee "$root/.run/test.log"
# The benchmarks and their report are a module of their own, which ./...
# above does not enter; their tests run the same way.
(cd test/bench && go test -race -tags integration -timeout 20m -count=1 -p 1 ./...) 2>&1 | tee -a "$root/.run/test.log"
