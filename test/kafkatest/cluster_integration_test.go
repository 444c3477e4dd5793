//go:build integration

package kafkatest_test

import (
	"context"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
)

// TestCreateTopicReplicated checks that a topic of the real cluster has three
// in-sync replicas and min.insync.replicas 2.
func TestCreateTopicReplicated(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.UniqueName(t, "t")
	kafkatest.CreateTopic(t, brokers, topic, 3, nil)

	adm := kafkatest.Admin(t, brokers)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Topics[topic].Partitions {
		if len(p.Replicas) != kafkatest.ReplicationFactor || len(p.ISR) != kafkatest.ReplicationFactor {
			t.Errorf("partition %d: replicas %v, in sync %v", p.Partition, p.Replicas, p.ISR)
		}
	}
	rc, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rc.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range c.Configs {
		if kv.Key == "min.insync.replicas" && kv.MaybeValue() != "2" {
			t.Errorf("min.insync.replicas = %q, want 2", kv.MaybeValue())
		}
	}
}
