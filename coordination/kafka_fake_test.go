package coordination_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
)

// TestKafkaTransportFake runs the transport suite against franz-go's
// in-process kfake cluster, as a quick check of the plumbing that needs no
// service: requests and encodings, partition pinning, several topics in one
// transaction, the abort of a failed write, reads to the last stable offset,
// and the long-poll wait.
//
// No fencing claim rests on this test. kfake does not fence like Kafka: it
// accepts an InitProducerId with a stale epoch, lets a fenced producer's abort
// succeed under transactions v2, opens a transaction on a stale produce,
// compacts past the last stable offset, and ignores min.insync.replicas. The
// fencing tests (invariants I1 to I4, crash, pause, resignation, a lost
// broker) run on the real cluster under the integration build tag.
func TestKafkaTransportFake(t *testing.T) {
	env, _ := fakeEnv(t)
	runTransportSuite(t, env)
}

// fakeEnv starts a kfake cluster and returns the environment of the suite on
// it, and the cluster, for a test that intercepts its requests.
func fakeEnv(t *testing.T) (kafkaEnv, *kfake.Cluster) {
	c := kafkatest.NewFake(t)
	return kafkaEnv{
		name:    "kfake",
		brokers: c.ListenAddrs(),
		bumps:   true,
		createTopic: func(t *testing.T, name string, partitions int) {
			kafkatest.CreateFakeTopic(t, c, name, partitions, nil)
		},
	}, c
}
