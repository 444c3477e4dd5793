package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ElectPreferredLeaders moves the leader of every partition of the topics to
// its preferred replica, the first of its assignment, and returns when the
// metadata shows it there. It waits first until every replica is in sync.
//
// A broker that [RestartBroker] brought back leads none of its partitions at
// first; the controller hands them back at its next leader rebalance, which
// Kafka runs every five minutes (leader.imbalance.check.interval.seconds). A
// test that needs to know which broker leads a partition for its whole run,
// such as a transaction coordinator that it is going to stop, calls this
// first under the fault lock ([LockFaults]), so no rebalance moves the leader
// under it.
func ElectPreferredLeaders(t testing.TB, brokers []string, topics ...string) {
	t.Helper()
	adm := Admin(t, brokers)
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if err := waitInSync(ctx, adm, ReplicationFactor, topics...); err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
	var last error
	for {
		last = electPreferred(ctx, adm, topics)
		if last == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("kafkatest: elect the preferred leaders of %v: %v (last: %v)", topics, ctx.Err(), last)
		case <-time.After(pollInterval):
		}
	}
}

// electPreferred runs one preferred election over the topics and reports
// nil once every partition is led by its preferred replica.
func electPreferred(ctx context.Context, adm *kadm.Client, topics []string) error {
	m, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return err
	}
	results, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, m.Topics.TopicsSet())
	if err != nil {
		return err
	}
	for _, partitions := range results {
		for _, r := range partitions {
			if r.Err != nil && !errors.Is(r.Err, kerr.ElectionNotNeeded) {
				return fmt.Errorf("%s[%d]: %w", r.Topic, r.Partition, r.Err)
			}
		}
	}
	if m, err = adm.Metadata(ctx, topics...); err != nil {
		return err
	}
	for _, topic := range topics {
		for _, p := range m.Topics[topic].Partitions {
			if len(p.Replicas) == 0 || p.Leader != p.Replicas[0] {
				return fmt.Errorf("%s[%d]: leader %d, replicas %v", topic, p.Partition, p.Leader, p.Replicas)
			}
		}
	}
	return nil
}
