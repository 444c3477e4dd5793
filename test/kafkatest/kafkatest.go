// Package kafkatest gives tests of this module a Kafka cluster: the real
// three-broker cluster that scripts/services/10-kafka.sh runs, or an
// in-process fake.
//
// Tests that carry the integration build tag call [Brokers] for the real
// cluster, [CreateTopic] for a topic of their own, and, after [LockFaults],
// [KillBroker] and [RestartBroker] to take one broker away and bring it back.
// A [Partition] cuts one process's clients off the cluster instead, leaving
// the brokers up: it needs no fault lock.
// [TxnCoordinator] names the broker that coordinates a transactional id,
// [BumpEpoch] takes the id's epoch to the end of its range in seconds, and
// [RaiseProducerIDBlock] makes a rotation at another broker land on a lower
// producer id; [ElectPreferredLeaders] keeps a leader rebalance from moving a
// coordinator during such a test.
// The fault lock keeps a test that kills a broker apart from the tests of
// every other package, which `go test ./...` runs at the same time. The script
// writes the variables these read to .run/kafka/env; scripts/test.sh sources
// that file. Under the integration tag a missing variable fails the test: a
// skip would hide a missing cluster.
//
// Tests without the tag call [NewFake] for franz-go's kfake cluster. It speaks
// the protocol and runs in-process, so it is fast and needs nothing
// installed, but it does not fence like Kafka. It accepts an InitProducerId
// with a stale epoch, lets a fenced producer's abort succeed under
// transactions v2, opens a transaction on a stale produce, compacts past the
// last stable offset, and ignores min.insync.replicas. A kfake test checks the
// plumbing: requests, encodings, partition pinning, read to the end. No
// fencing claim may rest on one; those tests run on the real cluster.
package kafkatest

// Environment variables that scripts/services/10-kafka.sh writes to
// .run/kafka/env.
const (
	// EnvBrokers holds the comma-separated bootstrap addresses of the real
	// cluster, 127.0.0.1:19092,127.0.0.1:19093,127.0.0.1:19094.
	EnvBrokers = "KRABKA_KAFKA_BROKERS"

	// EnvScript holds the path of the cluster script, which kills and
	// restarts one broker for [KillBroker] and [RestartBroker].
	EnvScript = "KRABKA_KAFKA_SCRIPT"
)

// NumBrokers is the number of brokers of the real cluster. Broker numbers run
// from 1 to NumBrokers; broker n listens on 127.0.0.1:19091+n.
const NumBrokers = 3

// ReplicationFactor is the replication factor [CreateTopic] gives a topic on
// the real cluster, with min.insync.replicas 2, so a committed write is on
// two brokers and a test may take one broker away.
const ReplicationFactor = 3
