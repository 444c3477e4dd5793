#!/usr/bin/env bash
# Runs the chaos harness (internal/chaos) against the three-broker cluster:
# three dispatcher members killed, paused and restarted at random while
# brokers are killed and restarted one at a time, then the checker.
#
#   scripts/chaos.sh                      two minutes of faults (DURATION=2m)
#   DURATION=30m scripts/chaos.sh         a longer run
#   SEED=1234 scripts/chaos.sh            replay the fault choices of a run
#   scripts/chaos.sh -rate 50             more flags for the chaos command
#
# It starts the cluster when no broker runs (and stops it again at the end),
# builds the member and the harness into .run/chaos/bin, and writes the
# device records, the members' logs and report.json to .run/chaos/<time>/.
# It exits 1 when any guarantee broke, 2 when the run itself failed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
duration=${DURATION:-2m}

started=0
if grep -q 'listening: yes' <<<"$(bash scripts/services/10-kafka.sh status)"; then
	:
else
	started=1
	bash scripts/deps.sh
	bash scripts/services/10-kafka.sh start
fi
stop_cluster() {
	local rc=$?
	if [ "$started" = 1 ]; then
		bash scripts/services/10-kafka.sh stop "$rc" || true
	fi
	exit "$rc"
}
trap stop_cluster EXIT INT TERM
# shellcheck disable=SC1091
. "$root/.run/kafka/env"

bin=$root/.run/chaos/bin
mkdir -p "$bin"
go build -o "$bin/chaosmember" ./internal/chaos/cmd/chaosmember
go build -o "$bin/chaos" ./internal/chaos/cmd/chaos
dir=$root/.run/chaos/$(date -u +%Y%m%dT%H%M%SZ)
seed=()
[ -n "${SEED:-}" ] && seed=(-seed "$SEED")
"$bin/chaos" -duration "$duration" -member-bin "$bin/chaosmember" -dir "$dir" "${seed[@]}" "$@"
