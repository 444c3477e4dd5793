package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultRequestTimeout bounds each request of the harness's own clients.
const DefaultRequestTimeout = 10 * time.Second

// LogReader reads a partition of the command log, read_committed, from its
// start to its last stable offset. It implements dispatch.LogReader. Unlike
// dispatch.KafkaLogReader, which the members recover with and the checker
// reads with, it does not stop at a record that does not decode: it keeps an
// entry of kind zero at its offset, so the checker can report it.
type LogReader struct {
	// Brokers are the bootstrap addresses.
	Brokers []string
}

var _ dispatch.LogReader = LogReader{}

// ReadLog implements dispatch.LogReader.
func (r LogReader) ReadLog(ctx context.Context, tp coordination.TopicPartition) ([]dispatch.Entry, error) {
	var entries []dispatch.Entry
	err := readCommitted(ctx, r.Brokers, tp, func(rec *kgo.Record) {
		e, err := dispatch.DecodeRecord(rec)
		if err != nil {
			// A record the codec refuses is itself a finding; keep its
			// offset so the checker reports it.
			entries = append(entries, dispatch.Entry{Offset: rec.Offset})
			return
		}
		e.Offset = rec.Offset
		e.Batch = &dispatch.BatchInfo{ProducerID: rec.ProducerID, ProducerEpoch: rec.ProducerEpoch, Transactional: rec.Attrs.IsTransactional()}
		entries = append(entries, e)
	})
	return entries, err
}

// readCommitted calls each for every committed data record of tp, in
// offset order, from the partition's start to its last stable offset.
func readCommitted(ctx context.Context, brokers []string, tp coordination.TopicPartition, each func(*kgo.Record)) error {
	admCl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RequestTimeoutOverhead(DefaultRequestTimeout))
	if err != nil {
		return err
	}
	ends, err := kadm.NewClient(admCl).ListCommittedOffsets(ctx, tp.Topic)
	admCl.Close()
	if err != nil {
		return fmt.Errorf("chaos: last stable offset of %s: %w", tp.Topic, err)
	}
	end, ok := ends.Lookup(tp.Topic, int32(tp.Partition))
	if !ok || end.Err != nil {
		return fmt.Errorf("chaos: last stable offset of %s/%d: %v", tp.Topic, tp.Partition, end.Err)
	}
	lso := end.Offset
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tp.Topic: {int32(tp.Partition): kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.RequestTimeoutOverhead(DefaultRequestTimeout),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	next := int64(0)
	for next < lso {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fetches.EachError(func(_ string, _ int32, err error) { ferr = errors.Join(ferr, err) })
		if ferr != nil {
			return fmt.Errorf("chaos: read %s/%d: %w", tp.Topic, tp.Partition, ferr)
		}
		fetches.EachRecord(func(rec *kgo.Record) {
			next = rec.Offset + 1
			if rec.Attrs.IsControl() || rec.Offset >= lso {
				return
			}
			each(rec)
		})
	}
	return nil
}
