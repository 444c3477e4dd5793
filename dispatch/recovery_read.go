package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/internal/stablewait"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// LogRangeReader is an optional interface of a [LogReader] that reads part
// of a partition. [KafkaLogReader] implements it. With it a dispatcher
// writes checkpoints, recovers from the newest one and the records after
// it instead of the whole partition, and holds a settled command as a
// compact ID whose records it reads back by offset; without it, it reads
// the whole partition at takeover and holds every command whole.
type LogRangeReader interface {
	LogReader

	// LogBounds returns the log start offset and the high watermark of the
	// partition.
	LogBounds(ctx context.Context, partition coordination.TopicPartition) (start, end int64, err error)

	// ReadRange returns the committed entries at offsets from up to, not
	// including, to, in offset order, each with its Offset set. Like
	// ReadLog it reads until it has passed to, waiting for any transaction
	// that holds the last stable offset below it, and it fails on a record
	// that does not decode.
	ReadRange(ctx context.Context, partition coordination.TopicPartition, from, to int64) ([]Entry, error)
}

// LogBounds returns the log start offset and the high watermark of the
// partition.
func (r *KafkaLogReader) LogBounds(ctx context.Context, partition coordination.TopicPartition) (start, end int64, err error) {
	cl, err := r.client(partition, kgo.NewOffset().AtStart(), true)
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()
	return r.bounds(ctx, cl, partition)
}

// ReadRange returns the committed entries of the partition at offsets from
// up to, not including, to, as [LogRangeReader] describes; it waits for the
// open transactions of others as [KafkaLogReader.ReadLog] does. Records that
// do not decode are returned as a join of *MalformedRecordError, beside the
// entries that did.
func (r *KafkaLogReader) ReadRange(ctx context.Context, partition coordination.TopicPartition, from, to int64) ([]Entry, error) {
	if from < 0 || to < from {
		return nil, fmt.Errorf("dispatch: read %s-%d: range %d..%d is invalid", partition.Topic, partition.Partition, from, to)
	}
	if from == to {
		return nil, nil
	}
	rw := r.readWait()
	cl, err := r.client(partition, kgo.NewOffset().At(from), true)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var entries []Entry
	var malformed []error
	var wait *stablewait.Wait
	next, lso := from, from
	for next < to {
		pollCtx, cancel := context.WithTimeout(ctx, openTransactionPoll)
		fetches := cl.PollFetches(pollCtx)
		polled := pollCtx.Err() != nil
		cancel()
		if err := ctx.Err(); err != nil {
			if wait != nil && wait.Waited() > 0 {
				err = &coordination.OpenTransactionError{Partition: partition, StableOffset: lso, Target: to, Waited: wait.Waited(), Err: err}
			}
			return nil, fmt.Errorf("dispatch: read %s-%d: %w", partition.Topic, partition.Partition, err)
		}
		if err := fetchError(fetches, polled); err != nil {
			return nil, fmt.Errorf("dispatch: read %s-%d: %w", partition.Topic, partition.Partition, err)
		}
		if fetches.NumRecords() == 0 {
			if lso, err = r.listOffset(ctx, cl, partition, (*kadm.Client).ListCommittedOffsets, "last stable offset"); err != nil {
				return nil, err
			}
			if lso > next {
				continue
			}
			if wait == nil {
				wait = stablewait.New(rw.bound, rw.logger, rw.counter, partition.Topic, partition.Partition)
			}
			if waited, over := wait.Blocked(ctx, time.Now(), lso, to); over {
				return nil, fmt.Errorf("dispatch: read %s-%d: %w", partition.Topic, partition.Partition,
					&coordination.OpenTransactionError{Partition: partition, StableOffset: lso, Target: to, Waited: waited})
			}
			continue
		}
		if wait != nil {
			wait.Moved()
		}
		fetches.EachRecord(func(rec *kgo.Record) {
			if rec.Offset+1 > next {
				next = rec.Offset + 1
			}
			if rec.Attrs.IsControl() || rec.Offset < from || rec.Offset >= to {
				return
			}
			e, err := DecodeRecord(rec)
			if err != nil {
				malformed = append(malformed, &MalformedRecordError{Partition: partition, Offset: rec.Offset, Err: err})
				return
			}
			entries = append(entries, e)
		})
	}
	return entries, errors.Join(malformed...)
}
