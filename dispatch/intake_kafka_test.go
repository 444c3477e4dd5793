package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaRequestSourceReadsCommittedOnly checks that the source skips the
// records of an aborted transaction and resumes where it is asked to.
func TestKafkaRequestSourceReadsCommittedOnly(t *testing.T) {
	fake := kafkatest.NewFake(t)
	topic := "requests"
	kafkatest.CreateFakeTopic(t, fake, topic, 1, nil)
	producer, err := kgo.NewClient(kgo.SeedBrokers(fake.ListenAddrs()...), kgo.TransactionalID("submitter"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	write := func(commit bool, values ...string) {
		t.Helper()
		if err := producer.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := producer.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	write(false, "aborted-1", "aborted-2")
	write(true, "kept-1", "kept-2")

	source, err := dispatch.NewKafkaRequestSource(fake.ListenAddrs())
	if err != nil {
		t.Fatal(err)
	}
	defer source.Close()
	tp := coordination.TopicPartition{Topic: topic, Partition: 0}
	var got []dispatch.RequestRecord
	for next := int64(0); len(got) < 2; {
		recs, err := source.ReadRequests(ctx, tp, next)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, recs...)
		next = recs[len(recs)-1].Offset + 1
	}
	if len(got) != 2 || string(got[0].Value) != "kept-1" || string(got[1].Value) != "kept-2" {
		t.Fatalf("read %+v, want the committed records only", got)
	}
	// Asked again from the second record's offset, a fresh reader starts
	// there.
	recs, err := source.ReadRequests(ctx, tp, got[1].Offset)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Offset != got[1].Offset {
		t.Errorf("from %d: read %+v", got[1].Offset, recs)
	}
}
