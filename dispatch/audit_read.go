package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	// DefaultLogFetchMaxWait is the long-poll wait of a fetch of the command
	// log, Kafka's fetch.max.wait.ms: a record that commits during the wait
	// is returned at once, so it bounds only an idle fetch. Change it with a
	// kgo.FetchMaxWait option to [NewKafkaLogReader] or [NewClient].
	DefaultLogFetchMaxWait = 250 * time.Millisecond

	// DefaultKafkaRequestTimeout bounds each Kafka request other than a
	// fetch (listing offsets, producing a request record), on top of the
	// caller's context. Change it with [WithClientRequestTimeout].
	DefaultKafkaRequestTimeout = 10 * time.Second
)

// MalformedRecordError reports a record of the command log that
// [DecodeEntry] refuses.
type MalformedRecordError struct {
	// Partition and Offset locate the record.
	Partition coordination.TopicPartition
	Offset    int64

	// Err is the *LogFormatError.
	Err error
}

// Error names the record and the fault.
func (e *MalformedRecordError) Error() string {
	return fmt.Sprintf("dispatch: record %s-%d@%d: %v", e.Partition.Topic, e.Partition.Partition, e.Offset, e.Err)
}

// Unwrap returns the *LogFormatError.
func (e *MalformedRecordError) Unwrap() error { return e.Err }

// KafkaLogReader reads the command log from a Kafka cluster,
// read_committed, with no consumer group. It implements [LogReader]. Each
// call runs its own franz-go client and closes it before it returns, so a
// KafkaLogReader holds no connection and needs no Close.
type KafkaLogReader struct {
	brokers        []string
	opts           []kgo.Opt
	requestTimeout time.Duration
}

// NewKafkaLogReader returns a reader of the cluster at brokers. opts are
// passed to kgo.NewClient after the reader's defaults (such as
// [DefaultLogFetchMaxWait]), so they may override them and add TLS or SASL;
// the reader always sets the seed brokers, read_committed, the partition and
// the start offset.
func NewKafkaLogReader(brokers []string, opts ...kgo.Opt) (*KafkaLogReader, error) {
	if len(brokers) == 0 {
		return nil, errors.New("dispatch: log reader: no brokers")
	}
	return &KafkaLogReader{brokers: brokers, opts: opts, requestTimeout: DefaultKafkaRequestTimeout}, nil
}

// client starts a franz-go client that consumes partition from offset, and
// keeps the control records when keepControl is set.
func (r *KafkaLogReader) client(partition coordination.TopicPartition, from kgo.Offset, keepControl bool) (*kgo.Client, error) {
	opts := append([]kgo.Opt{
		kgo.FetchMaxWait(DefaultLogFetchMaxWait),
		kgo.RequestTimeoutOverhead(r.requestTimeout),
	}, r.opts...)
	opts = append(opts,
		kgo.SeedBrokers(r.brokers...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{partition.Topic: {int32(partition.Partition): from}}),
	)
	if keepControl {
		opts = append(opts, kgo.KeepControlRecords())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("dispatch: log reader: %w", err)
	}
	return cl, nil
}

// ReadLog returns every committed entry of the partition, from its start to
// its last stable offset at the time of the call, in offset order, each with
// its Offset and Batch set. It reads control records too, to know that it
// reached the end: franz-go never returns an empty fetch.
//
// When records do not decode, it returns every entry that did, and an error
// that joins a *MalformedRecordError for each record that did not; a caller
// that must not act on part of the log (a new leader) treats any error as
// failure. A cancelled ctx ends the read with ctx's error.
func (r *KafkaLogReader) ReadLog(ctx context.Context, partition coordination.TopicPartition) ([]Entry, error) {
	cl, err := r.client(partition, kgo.NewOffset().AtStart(), true)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	start, end, err := r.bounds(ctx, cl, partition)
	if err != nil {
		return nil, err
	}
	var entries []Entry
	var malformed []error
	next := start
	for next < end {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("dispatch: read %s-%d: %w", partition.Topic, partition.Partition, err)
		}
		if err := fetchError(fetches); err != nil {
			return nil, fmt.Errorf("dispatch: read %s-%d: %w", partition.Topic, partition.Partition, err)
		}
		fetches.EachRecord(func(rec *kgo.Record) {
			if rec.Offset+1 > next {
				next = rec.Offset + 1
			}
			if rec.Attrs.IsControl() || rec.Offset >= end {
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

// bounds returns the log start offset and the last stable offset of the
// partition.
func (r *KafkaLogReader) bounds(ctx context.Context, cl *kgo.Client, partition coordination.TopicPartition) (start, end int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, r.requestTimeout)
	defer cancel()
	adm := kadm.NewClient(cl)
	lookup := func(list func(context.Context, ...string) (kadm.ListedOffsets, error), what string) (int64, error) {
		listed, err := list(ctx, partition.Topic)
		if err == nil {
			err = listed.Error()
		}
		if err != nil {
			return 0, fmt.Errorf("dispatch: %s of %s-%d: %w", what, partition.Topic, partition.Partition, err)
		}
		o, ok := listed.Lookup(partition.Topic, int32(partition.Partition))
		if !ok {
			return 0, fmt.Errorf("dispatch: %s of %s-%d: the partition does not exist", what, partition.Topic, partition.Partition)
		}
		return o.Offset, nil
	}
	if start, err = lookup(adm.ListStartOffsets, "log start offset"); err != nil {
		return 0, 0, err
	}
	if end, err = lookup(adm.ListCommittedOffsets, "last stable offset"); err != nil {
		return 0, 0, err
	}
	return start, end, nil
}

// DecodeRecord decodes a fetched record of the command log into an entry
// with its offset, its term and its batch.
func DecodeRecord(rec *kgo.Record) (Entry, error) {
	e, err := DecodeEntry(rec.Key, rec.Value)
	if err != nil {
		return Entry{}, err
	}
	for _, h := range rec.Headers {
		if h.Key != coordination.TermHeader {
			continue
		}
		term, _, err := coordination.TermFromHeaders([]coordination.Header{{Key: h.Key, Value: h.Value}})
		if err != nil {
			return Entry{}, newFormatError("term header", err)
		}
		e.Term = term
	}
	e.Offset = rec.Offset
	e.Batch = &BatchInfo{ProducerID: rec.ProducerID, ProducerEpoch: rec.ProducerEpoch, Transactional: rec.Attrs.IsTransactional()}
	return e, nil
}

func fetchError(fetches kgo.Fetches) error {
	var errs []error
	fetches.EachError(func(_ string, _ int32, err error) { errs = append(errs, err) })
	return errors.Join(errs...)
}

// LogStream is a running read of the command log that follows new records
// as they commit. [KafkaLogReader.FollowLog] starts it; the caller's ctx, or
// Close, ends it.
type LogStream struct {
	entries chan Entry
	done    chan struct{}
	cancel  context.CancelFunc
	err     error
}

// FollowLog streams the committed entries of the partition from offset from
// (0, or an offset that retention removed, starts at the log's start) and
// then every entry as it commits, until ctx ends or [LogStream.Close] is
// called. One goroutine reads the partition and sends on the channel of
// [LogStream.Entries]; it closes the channel when it ends, and then
// [LogStream.Err] tells why. A record that does not decode ends the stream
// with an error that wraps a *MalformedRecordError.
func (r *KafkaLogReader) FollowLog(ctx context.Context, partition coordination.TopicPartition, from int64) (*LogStream, error) {
	cl, err := r.client(partition, kgo.NewOffset().At(from), false)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &LogStream{entries: make(chan Entry), done: make(chan struct{}), cancel: cancel}
	go s.run(ctx, cl, partition)
	return s, nil
}

func (s *LogStream) run(ctx context.Context, cl *kgo.Client, partition coordination.TopicPartition) {
	defer func() {
		cl.Close()
		// done closes first: a receiver that sees the channel closed finds
		// Err set.
		close(s.done)
		close(s.entries)
	}()
	for {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			s.err = err
			return
		}
		if err := fetchError(fetches); err != nil {
			s.err = fmt.Errorf("dispatch: follow %s-%d: %w", partition.Topic, partition.Partition, err)
			return
		}
		for it := fetches.RecordIter(); !it.Done(); {
			rec := it.Next()
			e, err := DecodeRecord(rec)
			if err != nil {
				s.err = &MalformedRecordError{Partition: partition, Offset: rec.Offset, Err: err}
				return
			}
			select {
			case s.entries <- e:
			case <-ctx.Done():
				s.err = ctx.Err()
				return
			}
		}
	}
}

// Entries returns the channel of entries, in offset order. It is closed when
// the stream ends.
func (s *LogStream) Entries() <-chan Entry { return s.entries }

// Err reports why the stream ended: the context's error when ctx ended or
// Close was called, or the failure that ended it. It is nil while the stream
// runs; read it after the channel of Entries is closed.
func (s *LogStream) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Close ends the stream and waits for its goroutine to exit. It may be
// called more than once.
func (s *LogStream) Close() {
	s.cancel()
	<-s.done
}
