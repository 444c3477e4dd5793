#!/usr/bin/env bash
# Runs the chaos harness (test/chaos) against the three-broker cluster and
# Mosquitto: five `dispatcher run` processes of two roles sharing a log
# partition, each in a network namespace of its own, killed, paused,
# restarted, cut from Kafka or from their devices, with skewed clocks and slow
# devices, while brokers are killed or cut from the others one at a time and
# an operator resolves commands in doubt; then the checker.
#
#   scripts/chaos.sh                      two minutes of faults (DURATION=2m)
#   DURATION=30m scripts/chaos.sh         a longer run
#   SEED=1234 scripts/chaos.sh            replay the fault choices of a run
#   scripts/chaos.sh -rate 20             more flags for the chaos command
#
# It needs root (network namespaces, veth links, nftables). With the variables
# of a running cluster's .run/kafka/env and .run/mosquitto/env in its
# environment it uses those services; otherwise it starts the cluster and
# Mosquitto when they do not run (and stops what it started at the end). It
# takes the cluster's fault lock, builds the dispatcher and the harness
# into .run/chaos/bin, and writes the members' configuration files and logs,
# the device records, report.json and run.md to .run/chaos/<time>/.
# It exits 1 when any guarantee broke, 2 when the run itself failed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
duration=${DURATION:-2m}

# The run needs nft and ip even where the services run already (started by
# their scripts, which install neither); deps.sh installs only what is
# missing.
bash scripts/deps.sh
started_kafka=0
started_mqtt=0
if [ -z "${KRABKA_KAFKA_BROKERS:-}" ] && ! grep -q 'listening: yes' <<<"$(bash scripts/services/10-kafka.sh status)"; then
	started_kafka=1
	bash scripts/services/10-kafka.sh start
fi
if [ -z "${KRABKA_MQTT_URL:-}" ] && ! bash scripts/services/20-mosquitto.sh status >/dev/null 2>&1; then
	started_mqtt=1
	bash scripts/services/20-mosquitto.sh start
fi
stop_services() {
	local rc=$?
	if [ "$started_mqtt" = 1 ]; then
		bash scripts/services/20-mosquitto.sh stop "$rc" || true
	fi
	if [ "$started_kafka" = 1 ]; then
		bash scripts/services/10-kafka.sh stop "$rc" || true
	fi
	exit "$rc"
}
trap stop_services EXIT INT TERM
if [ -z "${KRABKA_KAFKA_BROKERS:-}" ]; then
	# shellcheck disable=SC1091
	. "$root/.run/kafka/env"
fi
if [ -z "${KRABKA_MQTT_URL:-}" ]; then
	# shellcheck disable=SC1091
	. "$root/.run/mosquitto/env"
fi
export KRABKA_KAFKA_BROKERS KRABKA_KAFKA_SCRIPT KRABKA_MQTT_URL

bin=$root/.run/chaos/bin
mkdir -p "$bin"
go build -o "$bin/dispatcher" ./cmd/dispatcher
go build -o "$bin/chaos" ./test/chaos/cmd/chaos
dir=$root/.run/chaos/$(date -u +%Y%m%dT%H%M%SZ)
seed=()
[ -n "${SEED:-}" ] && seed=(-seed "$SEED")
# The run kills and cuts brokers: it waits until no test uses the cluster.
# -o keeps the lock out of the processes it starts: a broker it restarts
# would hold it for ever.
flock -o "${KRABKA_KAFKA_DIR:-$root/.run/kafka}/faults.lock" \
	"$bin/chaos" -duration "$duration" -dispatcher-bin "$bin/dispatcher" -dir "$dir" "${seed[@]}" "$@"
