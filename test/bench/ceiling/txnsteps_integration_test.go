//go:build integration

package ceiling

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
)

// TestProbeCommitSteps runs the probe on the real cluster: it times every
// transaction it was asked for, both steps of each, commits each one's
// record on the partitions in turn, and the broker setting it reads
// against is the cluster's.
func TestProbeCommitSteps(t *testing.T) {
	addrs := kafkatest.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic := kafkatest.UniqueName(t, "txnsteps")
	if err := CreateTopic(ctx, addrs, TopicSpec{Name: topic, Partitions: 3, Replication: 3, MinInsyncReplicas: 2}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = DeleteTopics(context.Background(), addrs, topic) }()

	const n = 6
	steps, err := ProbeCommitSteps(ctx, StepsProbe{Brokers: addrs, Topic: topic, TransactionalID: topic,
		Partitions: []int32{0, 1, 2}, Pause: 2 * time.Millisecond, Transactions: n})
	if err != nil {
		t.Fatal(err)
	}
	if steps.Produce.Count != n || steps.End.Count != n || steps.Produce.P50 <= 0 || steps.End.P50 <= 0 {
		t.Fatalf("steps %+v; want %d timed produces and EndTxns", steps, n)
	}
	// Three warm-up transactions and n timed ones, one record and one
	// commit marker each, in turn on partitions 0, 1 and 2.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 3; p++ {
		o, _ := ends.Lookup(topic, p)
		if want := int64(2 * (3 + n) / 3); o.Err != nil || o.Offset != want {
			t.Errorf("partition %d ends at %d (%v); want %d: a record and a marker for each of its transactions", p, o.Offset, o.Err, want)
		}
	}

	// A probe that waits for its reader before each transaction ends: the
	// reader reads each commit.
	if _, err := ProbeCommitSteps(ctx, StepsProbe{Brokers: addrs, Topic: topic, TransactionalID: topic + "-read",
		Partitions: []int32{0, 1, 2}, Transactions: 3, Reader: true, AfterRead: true}); err != nil {
		t.Fatalf("waiting for the reader: %v", err)
	}

	// A settled probe waits, before it returns, until the coordinator
	// answered that its last commit was complete; without the settle a
	// quiet cluster describes it as PrepareCommit still.
	settled := topic + "-settled"
	if _, err := ProbeCommitSteps(ctx, StepsProbe{Brokers: addrs, Topic: topic, TransactionalID: settled,
		Partitions: []int32{0}, Transactions: 3, Settle: true}); err != nil {
		t.Fatalf("settled: %v", err)
	}
	described, err := adm.DescribeTransactions(ctx, settled)
	if err != nil {
		t.Fatal(err)
	}
	if txn := described[settled]; txn.Err != nil || txn.State != "CompleteCommit" {
		t.Errorf("after a settled probe the coordinator describes its transaction as %q (%v); want CompleteCommit", txn.State, txn.Err)
	}

	// The cluster of the tests keeps Kafka's default of 20 ms unless its
	// start set the setting (scripts/services/10-kafka.sh: lines of
	// server.properties in KRABKA_KAFKA_BROKER_PROPERTIES).
	want := "20"
	for _, kv := range strings.Split(os.Getenv("KRABKA_KAFKA_BROKER_PROPERTIES"), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(kv), "="); ok && k == "add.partitions.to.txn.retry.backoff.ms" {
			want = v
		}
	}
	if backoff, err := BrokerConfig(ctx, addrs, "add.partitions.to.txn.retry.backoff.ms"); err != nil || backoff != want {
		t.Fatalf("the backoff read %q, %v; want %s", backoff, err, want)
	}
}
