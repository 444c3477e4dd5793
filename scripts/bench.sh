#!/usr/bin/env bash
# Measures the performance claims and rewrites docs/PERFORMANCE.md and the
# plots in docs/img/ (test/bench/ceiling/cmd/benchreport).
#
#   scripts/bench.sh                          every section, about forty minutes
#   scripts/bench.sh -quick                   every section, fewer trials
#   scripts/bench.sh -only failover,handover  some sections
#   scripts/bench.sh -history-only            the "Cost against history" section
#                                             alone, about sixteen minutes
#
# When test/bench/history exists, its cmd/benchhistory writes the markdown of
# the "Cost against history" section, which replaces what lies between the
# report's cost-against-history markers.
#
# It starts the Kafka cluster and Mosquitto when they are not running (and
# stops what it started at the end), as scripts/test.sh does, and builds the
# tool and cmd/holder into .run/bench/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

started=()
stop_started() {
	local rc=$?
	for ((i=${#started[@]}-1; i>=0; i--)); do
		bash "${started[$i]}" stop "$rc" || true
	done
	exit "$rc"
}
trap stop_started EXIT INT TERM

need_deps=1
if ! grep -q 'listening: yes' <<<"$(bash scripts/services/10-kafka.sh status)"; then
	bash scripts/deps.sh
	need_deps=0
	bash scripts/services/10-kafka.sh start
	started+=(scripts/services/10-kafka.sh)
fi
if ! bash scripts/services/20-mosquitto.sh status >/dev/null 2>&1; then
	[ "$need_deps" = 0 ] || bash scripts/deps.sh
	bash scripts/services/20-mosquitto.sh start
	started+=(scripts/services/20-mosquitto.sh)
fi
for envfile in "$root"/.run/kafka/env "$root"/.run/mosquitto/env; do
	# shellcheck disable=SC1090
	. "$envfile"
done

bin=$root/.run/bench
mkdir -p "$bin"
if [ "${1:-}" = -history-only ]; then
	shift
	[ -d test/bench/history ] || { echo "bench: no test/bench/history" >&2; exit 2; }
else
	# The tools live in the module of their own under test/bench.
	(cd test/bench && go build -o "$bin/holder" ./ceiling/cmd/holder && go build -o "$bin/benchreport" ./ceiling/cmd/benchreport)
	"$bin/benchreport" -holder-bin "$bin/holder" -out docs/PERFORMANCE.md -img docs/img "$@"
fi

if [ -d test/bench/history ]; then
	fragment=$bin/history.md
	rm -f "$fragment"
	history_args=()
	# A quick run measures the cost against a short history only; the full
	# run fills the role's partition with a million commands.
	for arg in "$@"; do
		[ "$arg" = -quick ] && history_args=(-sizes 0,20000 -further 20000 -samples 3 -warm-up 20000)
	done
	(cd test/bench && go run ./history/cmd/benchhistory -out "$fragment" "${history_args[@]}")
	if [ -s "$fragment" ]; then
		awk -v fragment="$fragment" '
			$0 == "<!-- cost-against-history:begin -->" { print; while ((getline line < fragment) > 0) if (line != "## Cost against history") print line; skip = 1; next }
			$0 == "<!-- cost-against-history:end -->" { skip = 0 }
			!skip { print }
		' docs/PERFORMANCE.md >"$bin/PERFORMANCE.md"
		mv "$bin/PERFORMANCE.md" docs/PERFORMANCE.md
	fi
fi
