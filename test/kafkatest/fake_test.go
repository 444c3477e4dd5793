package kafkatest_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
)

// TestNewFakeRoundTrip checks that a fake cluster serves the coordination
// topic it seeds and a topic a test creates.
func TestNewFakeRoundTrip(t *testing.T) {
	c := kafkatest.NewFake(t)
	topic := kafkatest.UniqueName(t, "t")
	kafkatest.CreateFakeTopic(t, c, topic, 2, nil)

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
			topic:                  {1: kgo.NewOffset().AtStart()},
			"__coordination_state": {15: kgo.NewOffset().AtStart()},
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx,
		&kgo.Record{Topic: topic, Partition: 1, Value: []byte("a")},
		&kgo.Record{Topic: "__coordination_state", Partition: 15, Value: []byte("b")},
	).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	got := map[string]string{}
	for len(got) < 2 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("fetch: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) { got[r.Topic] = string(r.Value) })
	}
	if got[topic] != "a" || got["__coordination_state"] != "b" {
		t.Fatalf("read back %v", got)
	}
}
