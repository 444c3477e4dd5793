#!/usr/bin/env bash
# Runs a three-broker Apache Kafka cluster (KRaft, each node broker and
# controller) on 127.0.0.1 for the integration tests.
#
#   10-kafka.sh start            format (first time) and start the cluster, create
#                                __coordination_state, write .run/kafka/env
#   10-kafka.sh stop [rc]        stop every broker; rc != 0 keeps .run/kafka/ (logs)
#   10-kafka.sh stop [rc] force  stop even when another start is still using it
#   10-kafka.sh status           say which brokers run
#   10-kafka.sh kill-broker N    SIGKILL broker N (1, 2 or 3)
#   10-kafka.sh restart-broker N SIGKILL broker N if it runs, start it again on its
#                                data, and wait until it logs that it started
#
# Brokers listen on 127.0.0.1:19092-19094, controllers on 127.0.0.1:19192-19194,
# and a SASL_PLAINTEXT listener (SCRAM-SHA-512, SCRAM-SHA-256, PLAIN; one test
# user) on 127.0.0.1:19292-19294 for the authentication tests.
# The jars come from test/kafkacluster/pom.xml (Maven, cached in ~/.m2).
# Everything the cluster writes lives under .run/kafka/: node-N/data (log dirs),
# node-N/server.log (broker output), node-N/pid, and env, which the tests source:
#   export KRABKA_KAFKA_BROKERS=127.0.0.1:19092,127.0.0.1:19093,127.0.0.1:19094
#   export KRABKA_KAFKA_SCRIPT=<this script>   (kill-broker / restart-broker)
#   export KRABKA_KAFKA_DIR=<.run/kafka>       (faults.lock: a flock(1) lock that
#                                               a fault injector holds exclusive
#                                               and every other test shared)
#   export KRABKA_KAFKA_SASL_BROKERS=...  KRABKA_KAFKA_SASL_USER=...
#   export KRABKA_KAFKA_SASL_PASSWORD=... KRABKA_KAFKA_SASL_MECHANISM=SCRAM-SHA-512
# A start that finds the cluster running borrows it: the stop that pairs with
# it leaves the cluster running for whoever started it (counted in
# .run/kafka/borrowed), so a test run on a developer machine does not take the
# cluster away from the others that use it.
# Broker settings are tuned for tests on a small machine: small heaps, a small
# cleaner buffer, no controlled shutdown (teardown never hangs), fast fencing
# of a dead broker (so a test that kills one sees the ISR shrink in seconds).
# KRABKA_KAFKA_BROKER_PROPERTIES, when set at a fresh start, holds more
# server.properties lines for every node, which override these, for a
# measurement under other broker settings, e.g.
#   KRABKA_KAFKA_BROKER_PROPERTIES=add.partitions.to.txn.retry.backoff.ms=2 make bench
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
self="$root/scripts/services/10-kafka.sh"
run="$root/.run/kafka"
pomdir="$root/test/kafkacluster"
libdir="$pomdir/target/lib"
nodes=(1 2 3)
brokers="127.0.0.1:19092,127.0.0.1:19093,127.0.0.1:19094"
sasl_brokers="127.0.0.1:19292,127.0.0.1:19293,127.0.0.1:19294"
voters="1@127.0.0.1:19192,2@127.0.0.1:19193,3@127.0.0.1:19194"
start_timeout=${KRABKA_KAFKA_START_TIMEOUT:-120} # seconds, per wait
stop_timeout=10                                  # seconds before SIGKILL
heap=${KRABKA_KAFKA_HEAP:--Xmx512m -Xms256m}

log() { echo "kafka: $*" >&2; }

broker_port() { echo $((19091 + $1)); }
controller_port() { echo $((19191 + $1)); }
sasl_port() { echo $((19291 + $1)); }

# The SASL listener's user, for the authentication tests: SCRAM credentials
# are written at format time, PLAIN ones live in the listener's JAAS line.
sasl_user=krabka
sasl_password=krabka-secret

# fetch_jars resolves the broker jars into $libdir once.
fetch_jars() {
	if [ -f "$libdir/.complete" ]; then
		return
	fi
	log "resolving Kafka jars with Maven"
	rm -rf "$libdir"
	mvn -q -B -f "$pomdir/pom.xml" dependency:copy-dependencies >&2
	touch "$libdir/.complete"
}

classpath() { echo "$libdir/*"; }

# write_config writes the server.properties of node $1.
write_config() {
	local n=$1 dir="$run/node-$1"
	mkdir -p "$dir/data"
	cat >"$dir/server.properties" <<EOF
process.roles=broker,controller
node.id=$n
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$(broker_port "$n"),SASL_PLAINTEXT://127.0.0.1:$(sasl_port "$n"),CONTROLLER://127.0.0.1:$(controller_port "$n")
advertised.listeners=PLAINTEXT://127.0.0.1:$(broker_port "$n"),SASL_PLAINTEXT://127.0.0.1:$(sasl_port "$n")
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256,PLAIN
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$sasl_user="$sasl_password";
log.dirs=$dir/data
auto.create.topics.enable=false
num.partitions=1
default.replication.factor=3
min.insync.replicas=2
unclean.leader.election.enable=false
offsets.topic.replication.factor=3
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
transaction.state.log.num.partitions=10
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
group.initial.rebalance.delay.ms=0
transaction.max.timeout.ms=900000
transaction.abort.timed.out.transaction.cleanup.interval.ms=1000
controlled.shutdown.enable=false
broker.heartbeat.interval.ms=500
broker.session.timeout.ms=3000
replica.lag.time.max.ms=5000
log.cleaner.threads=1
log.cleaner.dedupe.buffer.size=4194304
log.cleaner.io.buffer.size=65536
num.network.threads=2
num.io.threads=4
num.replica.fetchers=1
background.threads=4
log.flush.interval.messages=9223372036854775807
EOF
	if [ -n "${KRABKA_KAFKA_BROKER_PROPERTIES:-}" ]; then
		printf '%s\n' "$KRABKA_KAFKA_BROKER_PROPERTIES" >>"$dir/server.properties"
	fi
	cat >"$dir/log4j2.properties" <<'EOF'
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = OUT
logger.cleaner.name = kafka.log.LogCleaner
logger.cleaner.level = warn
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.statechange.name = state.change.logger
logger.statechange.level = warn
EOF
}

pid_of() {
	local f="$run/node-$1/pid"
	[ -f "$f" ] && cat "$f"
}

alive() {
	local pid
	pid=$(pid_of "$1") || return 1
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$(broker_port "$1")") 2>/dev/null; }

# launch starts node $1 in its own session and records its pid.
launch() {
	local n=$1 dir="$run/node-$1"
	touch "$dir/server.log"
	echo "--- start $(date -u +%FT%TZ)" >>"$dir/server.log"
	# shellcheck disable=SC2086
	setsid java $heap -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExitOnOutOfMemoryError \
		-Djava.awt.headless=true \
		-Dlog4j2.configurationFile="$dir/log4j2.properties" \
		-cp "$(classpath)" kafka.Kafka "$dir/server.properties" \
		>>"$dir/server.log" 2>&1 </dev/null &
	echo $! >"$dir/pid"
}

# wait_started waits until node $1 logs "Kafka Server started" after byte
# offset $2 of its log.
wait_started() {
	local n=$1 from=$2 dir="$run/node-$1" deadline=$((SECONDS + start_timeout))
	while ! tail -c +"$((from + 1))" "$dir/server.log" | grep -q "Kafka Server started"; do
		if ! alive "$n"; then
			log "broker $n exited during startup; last lines of $dir/server.log:"
			tail -n 40 "$dir/server.log" >&2
			return 1
		fi
		if [ $SECONDS -ge $deadline ]; then
			log "broker $n did not start within ${start_timeout}s; last lines of $dir/server.log:"
			tail -n 40 "$dir/server.log" >&2
			return 1
		fi
		sleep 0.2
	done
}

log_size() { stat -c %s "$run/node-$1/server.log" 2>/dev/null || echo 0; }

# setup creates the coordination topic and warms the coordinators.
setup() {
	mkdir -p "$run/bin"
	(cd "$root" && go build -o "$run/bin/kafkacluster" ./test/kafkacluster)
	"$run/bin/kafkacluster" -brokers "$brokers" -timeout "${start_timeout}s"
}

write_env() {
	cat >"$run/env" <<EOF
export KRABKA_KAFKA_BROKERS=$brokers
export KRABKA_KAFKA_SCRIPT=$self
export KRABKA_KAFKA_DIR=$run
export KRABKA_KAFKA_SASL_BROKERS=$sasl_brokers
export KRABKA_KAFKA_SASL_USER=$sasl_user
export KRABKA_KAFKA_SASL_PASSWORD=$sasl_password
export KRABKA_KAFKA_SASL_MECHANISM=SCRAM-SHA-512
EOF
}

all_alive() {
	local n
	for n in "${nodes[@]}"; do
		alive "$n" || return 1
	done
}

start() {
	fetch_jars
	if all_alive; then
		log "already running; borrowing it"
		borrow 1
		setup
		write_env
		return
	fi
	local n
	if [ -f "$run/cluster.id" ] && ls "$run"/node-*/pid >/dev/null 2>&1; then
		# Partly up: bring the missing brokers back on their own data.
		for n in "${nodes[@]}"; do
			alive "$n" || restart_broker "$n"
		done
	else
		fresh_start
	fi
	setup
	write_env
	log "ready at $brokers (env in $run/env)"
}

fresh_start() {
	local n id
	stop_all
	rm -rf "$run"
	mkdir -p "$run"
	id=$(java -cp "$(classpath)" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)
	echo "$id" >"$run/cluster.id"
	for n in "${nodes[@]}"; do
		write_config "$n"
		java -Dlog4j2.configurationFile="$run/node-$n/log4j2.properties" -cp "$(classpath)" \
			kafka.tools.StorageTool format -t "$id" -c "$run/node-$n/server.properties" \
			--add-scram "SCRAM-SHA-512=[name=$sasl_user,password=$sasl_password]" \
			--add-scram "SCRAM-SHA-256=[name=$sasl_user,password=$sasl_password]" \
			>"$run/node-$n/format.log" 2>&1 ||
			{
				log "format of node $n failed:"
				cat "$run/node-$n/format.log" >&2
				return 1
			}
	done
	for n in "${nodes[@]}"; do
		launch "$n"
	done
	for n in "${nodes[@]}"; do
		wait_started "$n" 0
	done
}

# stop_node sends SIGTERM to node $1, then SIGKILL after $stop_timeout.
stop_node() {
	local n=$1 pid deadline
	pid=$(pid_of "$n") || return 0
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		deadline=$((SECONDS + stop_timeout))
		while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do
			sleep 0.2
		done
		if kill -0 "$pid" 2>/dev/null; then
			log "broker $n ignored SIGTERM for ${stop_timeout}s; SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	rm -f "$run/node-$n/pid"
}

stop_all() {
	local n
	for n in "${nodes[@]}"; do
		stop_node "$n" &
	done
	wait
}

# borrow adds $1 to the borrow count and prints the count before.
borrow() {
	(
		flock 9
		local n=0
		[ -f "$run/borrowed" ] && n=$(cat "$run/borrowed")
		echo $((n + $1 < 0 ? 0 : n + $1)) >"$run/borrowed"
		echo "$n"
	) 9>"$run/.lock"
}

stop() {
	local rc=${1:-0} force=${2:-}
	if [ -z "$force" ] && [ -d "$run" ] && [ "$(borrow -1)" -gt 0 ]; then
		log "left running for the start that owns it (stop $rc force stops it anyway)"
		return
	fi
	stop_all
	rm -f "$run/env"
	if [ "$rc" != 0 ] && [ -d "$run" ]; then
		log "tests failed (rc $rc); broker logs kept in $run/node-{1,2,3}/server.log"
	else
		rm -rf "$run"
	fi
}

check_node() {
	case "${1:-}" in
	1 | 2 | 3) ;;
	*)
		log "want a broker number 1, 2 or 3, got '${1:-}'"
		exit 2
		;;
	esac
}

kill_broker() {
	local pid
	check_node "$1"
	pid=$(pid_of "$1") || return 0
	kill -KILL "$pid" 2>/dev/null || true
	while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
	rm -f "$run/node-$1/pid"
}

restart_broker() {
	local from
	check_node "$1"
	kill_broker "$1"
	from=$(log_size "$1")
	launch "$1"
	wait_started "$1" "$from"
}

status() {
	local n
	for n in "${nodes[@]}"; do
		if alive "$n"; then
			echo "broker $n: running (pid $(pid_of "$n")), listening: $(listening "$n" && echo yes || echo no)"
		else
			echo "broker $n: stopped"
		fi
	done
}

case "${1:-}" in
start) start ;;
stop) stop "${2:-0}" "${3:-}" ;;
status) status ;;
kill-broker) kill_broker "${2:-}" ;;
restart-broker)
	fetch_jars
	restart_broker "${2:-}"
	;;
*)
	echo "usage: $0 start | stop [rc] | status | kill-broker N | restart-broker N" >&2
	exit 2
	;;
esac
