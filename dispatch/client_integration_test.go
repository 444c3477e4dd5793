//go:build integration

package dispatch

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestLogOnRealCluster writes a command log as two successive leaders do,
// on the real cluster (transactions v2: every commit bumps the epoch), and
// reads, replays and verifies it: the token each record carries is the
// producer pair of the batch that holds it, the deposed leader's write does
// not land, and the timeline shows the handover.
func TestLogOnRealCluster(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	client := newTopicClient(t, brokers)

	role := kafkatest.UniqueName(t, "role")
	cmd := sampleCommand()
	cmd.Role = role
	cmd.SubmittedAt = time.Now().Truncate(time.Millisecond).UTC()
	cmd.Deadline = cmd.SubmittedAt.Add(time.Hour)
	if err := client.Submit(ctx, cmd); err != nil {
		t.Fatal(err)
	}
	rtp, _ := client.RequestsPartition(role)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{rtp.Topic: {int32(rtp.Partition): kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	fetches := cl.PollRecords(ctx, 1)
	if err := fetchError(fetches, false); err != nil || len(fetches.Records()) != 1 {
		t.Fatalf("request records %d, %v", len(fetches.Records()), err)
	}
	got, err := DecodeRequest(fetches.Records()[0].Value)
	if err != nil || !reflect.DeepEqual(got, cmd) {
		t.Fatalf("request %+v, %v; want %+v", got, err, cmd)
	}

	tp, _ := client.LogPartition(role)
	txnID := kafkatest.UniqueName(t, "txn")
	a := newLogWriter(t, brokers, tp, role, "node-1", txnID)
	a1 := a.write(ctx, true, issuedEntry("a"), issuedEntry("b"), Entry{Kind: EntryIntake,
		Intake: &IntakePosition{Topic: rtp.Topic, Partition: rtp.Partition, FromOffset: 0, NextOffset: 1}})
	a.write(ctx, false, outcomeEntry("a", StatusFailed, 1))
	a.write(ctx, true, outcomeEntry("a", StatusSucceeded, 1))

	// node-2 takes the role: its InitProducerId fences node-1.
	b := newLogWriter(t, brokers, tp, role, "node-2", txnID)
	b1 := b.write(ctx, true, Entry{Kind: EntryRedispatched, Redispatched: &Redispatched{CommandID: "b", Attempt: 2, Reason: RedispatchTakeover}})
	if _, err := a.tryWrite(ctx, true, outcomeEntry("b", StatusSucceeded, 1)); err == nil {
		t.Fatal("the deposed writer committed")
	}
	b.write(ctx, true, outcomeEntry("b", StatusSucceeded, 2))

	entries, err := client.ReadLog(ctx, role)
	if err != nil {
		t.Fatal(err)
	}
	if v := Verify(entries); len(v) != 0 {
		t.Fatalf("violations: %v", v)
	}
	if len(entries) != 6 {
		t.Fatalf("%d entries, want 6: %+v", len(entries), entries)
	}
	for _, e := range entries {
		if e.Batch == nil || e.Batch.ProducerEpoch != e.Token.ProducerEpoch() || e.Batch.ProducerID != e.Token.ProducerID() {
			t.Errorf("offset %d: token %s, batch %+v", e.Offset, e.Token, e.Batch)
		}
	}
	h := Replay(entries)
	if len(h.Leaderships) != 2 || h.Leaderships[0].Member != "node-1" || h.Leaderships[1].Member != "node-2" ||
		h.Leaderships[0].FirstToken != a1 || h.Leaderships[1].FirstToken != b1 || !b1.Supersedes(h.Leaderships[0].LastToken) {
		t.Errorf("timeline %+v", h.Leaderships)
	}
	st, err := client.Status(ctx, role, "b")
	if err != nil || st.Status != StatusSucceeded || len(st.Attempts) != 2 || st.Attempts[1].Token != b1 {
		t.Errorf("status of b: %+v, %v", st, err)
	}
	if o, err := client.Wait(ctx, role, "a"); err != nil || o.Status != StatusSucceeded {
		t.Errorf("wait for a: %+v, %v", o, err)
	}
	var mre *MalformedRecordError
	if errors.As(err, &mre) {
		t.Errorf("malformed record: %v", mre)
	}
}

// newTopicClient creates a log and a requests topic of three partitions,
// each of its own name, and returns a Client on them that is closed when the
// test ends.
func newTopicClient(t *testing.T, brokers []string) *Client {
	t.Helper()
	const partitions = 3
	logTopic := kafkatest.UniqueName(t, "dispatch.log")
	requestsTopic := kafkatest.UniqueName(t, "dispatch.requests")
	kafkatest.CreateTopic(t, brokers, logTopic, partitions, nil)
	kafkatest.CreateTopic(t, brokers, requestsTopic, partitions, nil)
	client, err := NewClient(brokers, WithClientLogTopic(logTopic, partitions), WithClientRequestsTopic(requestsTopic, partitions))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client
}
