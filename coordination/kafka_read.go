package coordination

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/krabka-io/krabka-dispatch/internal/stablewait"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch settings of the partition reads.
const (
	// kafkaFetchMaxBytes bounds one fetch response. Kafka returns at least
	// one whole batch whatever the bound, so a read always advances.
	kafkaFetchMaxBytes = 4 << 20
)

// partitionReader is the read state of one partition: the records read so
// far, kept the way log compaction keeps them (the last record of every
// key), and the offset to fetch next. A reader continues where the last read
// ended, so a read of an unchanged partition costs one fetch.
//
// The reader sends its own Fetch requests and parses them with
// kgo.ProcessFetchPartition, because the position after a read is what tells
// that the read reached the last stable offset: aborted batches, control
// records, and offsets that compaction removed leave no record to look at.
type partitionReader struct {
	partition TopicPartition
	slot      chan struct{} // one read at a time

	next    int64                  // the offset to fetch next
	records map[string]StateRecord // by key: the record of the highest offset

	leader  int32 // the partition leader, -1 when unknown
	topicID [16]byte
}

func newPartitionReader(partition TopicPartition) *partitionReader {
	return &partitionReader{
		partition: partition,
		slot:      make(chan struct{}, 1),
		records:   make(map[string]StateRecord),
		leader:    -1,
	}
}

// reader returns the reader of a partition, created at its first use.
func (t *KafkaTransport) reader(partition TopicPartition) (*partitionReader, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, errTransportClosed
	}
	r := t.readers[partition]
	if r == nil {
		r = newPartitionReader(partition)
		t.readers[partition] = r
	}
	return r, nil
}

// ReadPartition returns the committed records of the partition from its
// first offset to the high watermark it finds when the call begins, oldest
// first. It reads with read_committed isolation, so a record of an aborted or
// still open transaction never shows.
//
// Roles share the partitions of the state topic, so another producer may
// hold a transaction open on the partition while the role's holder commits
// its renewals after that transaction's first offset. Kafka's last stable
// offset stays at that first offset until the transaction ends, and a read
// that stopped there would miss the renewals and take a healthy holder for a
// dead one. ReadPartition therefore reads past the last stable offset: it
// keeps fetching (long-poll fetches, which the broker answers the moment the
// last stable offset moves) until it has passed the high watermark taken when
// it began, so every transaction begun before the call has ended and every
// record committed before the call is in the result. It waits on open
// transactions for at most the bound set by [KafkaTransport.SetReadWait] (the
// lease duration by default), and then returns an *[OpenTransactionError];
// it logs the wait and counts it in a metric while it waits.
//
// The transport remembers what it read: a later call fetches only what came
// after, and it returns the last record of every key, which is what log
// compaction keeps, so the result folds to the same state as a read of the
// whole log. It retries a leader move or a lost broker within the bound of
// the call.
func (t *KafkaTransport) ReadPartition(ctx context.Context, partition TopicPartition) ([]StateRecord, error) {
	return t.ReadPartitionWaiting(ctx, partition, math.MaxInt64) // the transport's bound alone
}

// ReadPartitionWaiting is [KafkaTransport.ReadPartition] with a bound of the
// caller's on the wait for open transactions, which the bound set by
// [KafkaTransport.SetReadWait] still caps. A bound of zero returns an
// *[OpenTransactionError] on the first fetch that finds the read blocked. It
// implements [OpenWaitReader].
func (t *KafkaTransport) ReadPartitionWaiting(ctx context.Context, partition TopicPartition, bound time.Duration) ([]StateRecord, error) {
	if err := checkPartition(partition); err != nil {
		return nil, fmt.Errorf("coordination: read partition: %w", err)
	}
	r, err := t.reader(partition)
	if err != nil {
		return nil, err
	}
	rw := t.readWaitSettings()
	rw.bound = max(min(rw.bound, bound), 0)
	ctx, cancel := t.bound(ctx)
	defer cancel()
	select {
	case r.slot <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("coordination: read %s[%d]: %w", partition.Topic, partition.Partition, ctx.Err())
	}
	defer func() { <-r.slot }()

	target := int64(-1) // the high watermark when the read began
	var wait *stablewait.Wait
	var lso int64
	var maxWait time.Duration
	for {
		fp, next, err := t.fetch(ctx, r, r.next, maxWait)
		if err != nil {
			if wait != nil && ctx.Err() != nil {
				return nil, t.openTransaction(r, lso, target, wait.Waited(), ctx.Err())
			}
			return nil, fmt.Errorf("coordination: read %s[%d] at offset %d: %w", partition.Topic, partition.Partition, r.next, err)
		}
		if next < 0 {
			// The offset fell out of the log: retention or DeleteRecords
			// moved its start, or the topic was truncated or recreated. Read
			// it again from its start.
			start, err := t.logStart(ctx, partition)
			if err != nil {
				return nil, fmt.Errorf("coordination: read %s[%d]: find the start of the log: %w", partition.Topic, partition.Partition, err)
			}
			r.next, r.records = start, make(map[string]StateRecord)
			continue
		}
		if target < 0 {
			// The first fetch answers with the high watermark of the
			// partition leader, which is the one a ListOffsets for the
			// latest offset would return, without a round trip of its own.
			target = fp.HighWatermark
		}
		for _, rec := range fp.Records {
			if rec.Attrs.IsControl() {
				continue
			}
			r.records[string(rec.Key)] = stateRecordOf(rec)
		}
		advanced := next > r.next
		r.next = max(r.next, next)
		if r.next >= target {
			break
		}
		maxWait = 0
		if advanced || fp.LastStableOffset > r.next {
			if wait != nil {
				wait.Moved()
			}
			continue
		}
		// The last stable offset sits at the position, below the target: a
		// transaction that began there is open. Long-poll until it moves.
		lso = fp.LastStableOffset
		if wait == nil {
			wait = stablewait.New(rw.bound, rw.logger, rw.counter, partition.Topic, partition.Partition)
		}
		waited, over := wait.Blocked(ctx, time.Now(), lso, target)
		if over {
			return nil, t.openTransaction(r, lso, target, waited, nil)
		}
		maxWait = min(kafkaMaxFetchWait, wait.Remaining())
		if deadline, ok := ctx.Deadline(); ok {
			maxWait = min(maxWait, time.Until(deadline))
		}
		maxWait = max(maxWait, time.Millisecond)
	}
	return r.snapshot(), nil
}

// snapshot returns the last record of every key read so far, oldest first.
func (r *partitionReader) snapshot() []StateRecord {
	out := make([]StateRecord, 0, len(r.records))
	for _, rec := range r.records {
		out = append(out, rec)
	}
	slices.SortFunc(out, func(a, b StateRecord) int { return cmp.Compare(a.Offset, b.Offset) })
	return out
}

// openTransaction builds the error of a read that an open transaction held
// at the last stable offset lso, with what the read saw before it and the
// producers whose transaction is open there. The caller's context may have
// ended, so the look-up of the producers has a bound of its own.
func (t *KafkaTransport) openTransaction(r *partitionReader, lso, target int64, waited time.Duration, cause error) *OpenTransactionError {
	e := &OpenTransactionError{Partition: r.partition, StableOffset: lso, Target: target, Waited: waited, Err: cause, Records: r.snapshot()}
	ctx, cancel := context.WithTimeout(context.Background(), describeProducersTimeout)
	defer cancel()
	described, err := t.admin.DescribeProducers(ctx, kadm.TopicsSet{r.partition.Topic: {int32(r.partition.Partition): {}}})
	if err != nil {
		return e
	}
	described.EachProducer(func(p kadm.DescribedProducer) {
		if int(p.Partition) == r.partition.Partition && p.CurrentTxnStartOffset >= 0 && p.CurrentTxnStartOffset <= lso {
			e.Producers = append(e.Producers, p.ProducerID)
		}
	})
	slices.Sort(e.Producers)
	return e
}

// describeProducersTimeout bounds the look-up of the producers that hold a
// transaction open on a partition.
const describeProducersTimeout = 5 * time.Second

// WaitPartition blocks until the partition holds a committed record at an
// offset above after, and returns nil then; it returns the error of ctx when
// ctx ends first. While another producer's transaction is open on the
// partition, a committed record after its first offset shows only when it
// ends; the long poll wakes the moment it does. The wait is a long-poll fetch (Kafka's fetch.max.wait.ms),
// so the broker answers the moment a transaction commits a record: a standby
// that waits here between two reads of [KafkaTransport.ReadPartition] sees a
// resignation within a round trip, where a sleep would cost a whole poll
// interval. Pass -1 to wait for the first record of an empty partition.
func (t *KafkaTransport) WaitPartition(ctx context.Context, partition TopicPartition, after int64) error {
	if err := checkPartition(partition); err != nil {
		return fmt.Errorf("coordination: wait on partition: %w", err)
	}
	if err := t.open(); err != nil {
		return err
	}
	r := newPartitionReader(partition)
	offset := max(after+1, 0)
	for {
		wait := kafkaMaxFetchWait
		if deadline, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(deadline))
		}
		if wait <= 0 {
			<-ctx.Done()
			return ctx.Err()
		}
		fp, next, err := t.fetch(ctx, r, offset, wait)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return ctxErr
			}
			return fmt.Errorf("coordination: wait on %s[%d] after offset %d: %w", partition.Topic, partition.Partition, after, err)
		}
		if next < 0 {
			// The offset fell out of the log; wait from its start.
			start, err := t.logStart(ctx, partition)
			if err != nil {
				if ctxErr := ctx.Err(); ctxErr != nil {
					return ctxErr
				}
				return fmt.Errorf("coordination: wait on %s[%d]: find the start of the log: %w", partition.Topic, partition.Partition, err)
			}
			offset = start
			continue
		}
		for _, rec := range fp.Records {
			if !rec.Attrs.IsControl() && rec.Offset > after {
				return nil
			}
		}
		offset = max(offset, next)
	}
}

// fetch sends one read_committed Fetch for one offset of the reader's
// partition to its leader, and parses the answer. maxWait is the long-poll
// bound. It returns the partition and the offset to fetch next, or next -1
// when the offset is out of range. A leader move, a lost broker, or a topic
// that is still being created is retried within ctx.
func (t *KafkaTransport) fetch(ctx context.Context, r *partitionReader, offset int64, maxWait time.Duration) (kgo.FetchPartition, int64, error) {
	type fetched struct {
		fp   kgo.FetchPartition
		next int64
	}
	got, err := retryRead(ctx, retriableFetchErr, func() (fetched, error) {
		fp, next, err := t.fetchOnce(ctx, r, offset, maxWait)
		if err != nil {
			r.leader = -1
		}
		return fetched{fp, next}, err
	})
	if err != nil {
		return kgo.FetchPartition{}, 0, err
	}
	return got.fp, got.next, nil
}

// logStart returns the first offset of the log of a partition.
func (t *KafkaTransport) logStart(ctx context.Context, partition TopicPartition) (int64, error) {
	return retryRead(ctx, retriableErr, func() (int64, error) {
		listed, err := t.admin.ListStartOffsets(ctx, partition.Topic)
		if err != nil {
			return 0, err
		}
		o, ok := listed.Lookup(partition.Topic, int32(partition.Partition))
		switch {
		case !ok:
			return 0, kerr.UnknownTopicOrPartition
		case o.Err != nil:
			return 0, o.Err
		}
		return o.Offset, nil
	})
}

// errNoLeader reports a partition without a leader in the metadata.
var errNoLeader = errors.New("the partition has no leader")

// retriableFetchErr is retriableErr, plus the errors of a leader move that
// Kafka does not mark retriable.
func retriableFetchErr(err error) bool {
	return retriableErr(err) || errors.Is(err, kerr.UnknownTopicID) || errors.Is(err, kerr.FencedLeaderEpoch)
}

func (t *KafkaTransport) fetchOnce(ctx context.Context, r *partitionReader, offset int64, maxWait time.Duration) (kgo.FetchPartition, int64, error) {
	if r.leader < 0 {
		if err := t.locate(ctx, r); err != nil {
			return kgo.FetchPartition{}, 0, err
		}
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(maxWait.Milliseconds())
	req.MinBytes = 1
	req.MaxBytes = kafkaFetchMaxBytes
	req.IsolationLevel = 1 // read_committed
	req.SessionID = 0
	req.SessionEpoch = -1 // a full fetch, outside any fetch session
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = r.partition.Topic
	rt.TopicID = r.topicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = int32(r.partition.Partition)
	rp.FetchOffset = offset
	rp.CurrentLeaderEpoch = -1
	rp.LastFetchedEpoch = -1
	rp.LogStartOffset = -1
	rp.PartitionMaxBytes = kafkaFetchMaxBytes
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	kresp, err := t.plain.Broker(int(r.leader)).Request(ctx, req)
	if err != nil {
		return kgo.FetchPartition{}, 0, err
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return kgo.FetchPartition{}, 0, err
	}
	for i := range resp.Topics {
		topic := &resp.Topics[i]
		if topic.Topic != r.partition.Topic && topic.TopicID != r.topicID {
			continue
		}
		for j := range topic.Partitions {
			part := &topic.Partitions[j]
			if part.Partition != int32(r.partition.Partition) {
				continue
			}
			err := kerr.ErrorForCode(part.ErrorCode)
			switch {
			case errors.Is(err, kerr.OffsetOutOfRange):
				return kgo.FetchPartition{}, -1, nil
			case err != nil:
				return kgo.FetchPartition{}, 0, err
			}
			fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
				KeepControlRecords: true,
				Offset:             offset,
				IsolationLevel:     kgo.ReadCommitted(),
				Topic:              r.partition.Topic,
				Partition:          int32(r.partition.Partition),
			}, part, kgo.DefaultDecompressor(), nil)
			if fp.Err != nil {
				return kgo.FetchPartition{}, 0, fp.Err
			}
			return fp, max(next, offset), nil
		}
	}
	return kgo.FetchPartition{}, 0, fmt.Errorf("the fetch response holds no %s[%d]: %w", r.partition.Topic, r.partition.Partition, kerr.UnknownTopicOrPartition)
}

// locate finds the leader and the topic id of the reader's partition.
func (t *KafkaTransport) locate(ctx context.Context, r *partitionReader) error {
	m, err := t.admin.Metadata(ctx, r.partition.Topic)
	if err != nil {
		return err
	}
	td, ok := m.Topics[r.partition.Topic]
	switch {
	case !ok:
		return kerr.UnknownTopicOrPartition
	case td.Err != nil:
		return td.Err
	}
	pd, ok := td.Partitions[int32(r.partition.Partition)]
	switch {
	case !ok:
		return fmt.Errorf("%s has %d partitions, not %d: %w", r.partition.Topic, len(td.Partitions), r.partition.Partition+1, kerr.UnknownTopicOrPartition)
	case pd.Err != nil && !errors.Is(pd.Err, kerr.ReplicaNotAvailable):
		return pd.Err
	case pd.Leader < 0:
		return fmt.Errorf("%s[%d]: %w: %w", r.partition.Topic, r.partition.Partition, errNoLeader, kerr.LeaderNotAvailable)
	}
	r.leader = pd.Leader
	r.topicID = td.ID
	return nil
}

// stateRecordOf converts a fetched record.
func stateRecordOf(rec *kgo.Record) StateRecord {
	out := StateRecord{Offset: rec.Offset, Key: rec.Key, Value: rec.Value}
	for _, h := range rec.Headers {
		out.Headers = append(out.Headers, Header{Key: h.Key, Value: h.Value})
	}
	return out
}
