package ceiling

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// readHistory reads every committed record of one partition of the
// coordination topic, from its start to its last stable offset, in offset
// order. Unlike a StateReader, which folds the partition to the latest
// record of each key, it keeps the history: every lease a holder renewed.
func readHistory(ctx context.Context, brokers []string, tp coordination.TopicPartition) ([]coordination.StateRecord, error) {
	admCl, err := adminClient(brokers)
	if err != nil {
		return nil, err
	}
	ends, err := kadm.NewClient(admCl).ListCommittedOffsets(ctx, tp.Topic)
	admCl.Close()
	if err != nil {
		return nil, err
	}
	end, ok := ends.Lookup(tp.Topic, int32(tp.Partition))
	if !ok || end.Err != nil {
		return nil, fmt.Errorf("last stable offset of %s/%d: %v", tp.Topic, tp.Partition, end.Err)
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tp.Topic: {int32(tp.Partition): kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.RequestTimeoutOverhead(DefaultRequestTimeout),
	)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []coordination.StateRecord
	next := int64(0)
	for next < end.Offset {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var ferr error
		fetches.EachError(func(_ string, _ int32, err error) { ferr = errors.Join(ferr, err) })
		if ferr != nil {
			return nil, ferr
		}
		fetches.EachRecord(func(rec *kgo.Record) {
			next = rec.Offset + 1
			if !rec.Attrs.IsControl() && rec.Offset < end.Offset {
				out = append(out, coordination.StateRecord{Offset: rec.Offset, Key: rec.Key, Value: rec.Value})
			}
		})
	}
	return out, nil
}
