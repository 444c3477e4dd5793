package kafkatest

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Defaults of [NewFake].
const (
	// FakeBrokers is the number of brokers of a fake cluster.
	FakeBrokers = 3

	// coordinationTopic and coordinationPartitions mirror
	// coordination.StateTopic and coordination.DefaultPartitions; this
	// package does not import coordination, so that its own tests may
	// import this package.
	coordinationTopic      = "__coordination_state"
	coordinationPartitions = 16
)

// NewFake starts an in-process kfake cluster of [FakeBrokers] brokers that
// already holds __coordination_state with 16 partitions, and closes it at the
// end of the test. opts come after those defaults, so a test may override
// them, and add topics with kfake.SeedTopics. The addresses are
// cluster.ListenAddrs().
//
// kfake does not fence like Kafka; see the package documentation for what it
// gets wrong. Use it for fast tests of plumbing, never for a fencing claim.
func NewFake(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	all := append([]kfake.Opt{
		kfake.NumBrokers(FakeBrokers),
		kfake.SeedTopics(coordinationPartitions, coordinationTopic),
	}, opts...)
	c, err := kfake.NewCluster(all...)
	if err != nil {
		t.Fatalf("kafkatest: start a kfake cluster: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// CreateFakeTopic creates a topic on a fake cluster, with replication 1
// (kfake keeps one copy whatever it is asked).
func CreateFakeTopic(t testing.TB, c *kfake.Cluster, name string, partitions int, configs map[string]string) {
	t.Helper()
	createTopic(t, c.ListenAddrs(), name, partitions, 1, configs)
}
