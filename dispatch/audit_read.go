package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/internal/stablewait"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/metric"
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

	// DefaultOpenTransactionWait bounds how long [KafkaLogReader.ReadLog]
	// waits, in all, for other producers' open transactions on the partition
	// to end. It is Kafka's default transaction.max.timeout.ms (15 minutes),
	// the longest transaction timeout a broker grants any producer, plus
	// Kafka's default transaction.abort.timed.out.transaction.cleanup.interval.ms
	// (10 seconds), the period at which the coordinator aborts the
	// transactions that timed out: the log partition is shared with other
	// roles and with any producer an operator runs, whose transaction
	// timeouts the reader cannot know, and a recovery that gave up sooner
	// would only read the whole log again. Change it with
	// [KafkaLogReader.SetReadWait].
	DefaultOpenTransactionWait = 15*time.Minute + 10*time.Second

	// OpenTransactionWaitMetric names the counter, in seconds, of the time
	// that [KafkaLogReader.ReadLog] spent waiting for another producer's open
	// transaction to end, with the attributes "topic" and "partition".
	OpenTransactionWaitMetric = "dispatch.log.open_transaction_wait"

	// openTransactionPoll is how long one poll of ReadLog waits for records
	// before the reader asks the partition leader for the last stable
	// offset, to tell an open transaction from a slow fetch.
	openTransactionPoll = time.Second
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
// KafkaLogReader holds no connection and needs no Close. (The reader of a
// [Client] lists offsets through the Client's connections, which
// Client.Close closes.)
type KafkaLogReader struct {
	brokers        []string
	opts           []kgo.Opt
	requestTimeout time.Duration

	// lister, when set, is a client of the same cluster that the reader's
	// owner keeps open and closes, which lists offsets in place of a client
	// started for each request: a lookup lists offsets two or three times.
	lister *kgo.Client

	mu   sync.Mutex
	wait logReadWait

	// read counts the records fetched by every read, control records
	// included.
	read atomic.Int64
}

// RecordsRead returns how many records of the log the reader has fetched
// since it was made, over all its reads, control records included: the cost
// of its reads, which a lookup that starts where its records were written
// keeps independent of the log's length.
func (r *KafkaLogReader) RecordsRead() int64 { return r.read.Load() }

// LogReadWait configures how [KafkaLogReader.ReadLog] waits for the open
// transactions of other producers. Pass it to [KafkaLogReader.SetReadWait].
type LogReadWait struct {
	// Bound is the longest a read waits, in all, for the last stable offset
	// to move past open transactions before it returns an
	// *coordination.OpenTransactionError. Zero means
	// [DefaultOpenTransactionWait].
	Bound time.Duration

	// Logger receives a line, at most every few seconds, while a read waits.
	// Nil discards them.
	Logger *slog.Logger

	// MeterProvider provides the meter of [OpenTransactionWaitMetric]. Nil
	// records nothing.
	MeterProvider metric.MeterProvider
}

type logReadWait struct {
	bound   time.Duration
	logger  *slog.Logger
	counter metric.Float64Counter
}

// SetReadWait sets how ReadLog waits for other producers' open
// transactions; reads that already began keep the setting they began with.
func (r *KafkaLogReader) SetReadWait(w LogReadWait) error {
	if w.Bound < 0 {
		return fmt.Errorf("dispatch: log reader: read wait bound %s is negative", w.Bound)
	}
	rw := logReadWait{bound: w.Bound, logger: w.Logger}
	if rw.bound == 0 {
		rw.bound = DefaultOpenTransactionWait
	}
	if w.MeterProvider != nil {
		c, err := stablewait.NewCounter(w.MeterProvider, instrumentationName, OpenTransactionWaitMetric)
		if err != nil {
			return fmt.Errorf("dispatch: log reader: %w", err)
		}
		rw.counter = c
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.wait = rw
	return nil
}

func (r *KafkaLogReader) readWait() logReadWait {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wait
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
	return &KafkaLogReader{brokers: brokers, opts: opts, requestTimeout: DefaultKafkaRequestTimeout,
		wait: logReadWait{bound: DefaultOpenTransactionWait}}, nil
}

// client starts a franz-go client that consumes partition from offset, and
// keeps the control records when keepControl is set.
func (r *KafkaLogReader) client(partition coordination.TopicPartition, from kgo.Offset, keepControl bool, extra ...kgo.Opt) (*kgo.Client, error) {
	opts := append([]kgo.Opt{
		kgo.FetchMaxWait(DefaultLogFetchMaxWait),
		kgo.RequestTimeoutOverhead(r.requestTimeout),
	}, extra...)
	opts = append(opts, r.opts...)
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

// listClient returns the client for the requests that list offsets, and
// done to call when they are over: the lister, when the reader has one, or
// a client started for them that consumes nothing (a consuming client
// would begin to fetch the partition as it starts, for nothing), which
// done closes.
func (r *KafkaLogReader) listClient() (cl *kgo.Client, done func(), err error) {
	if r.lister != nil {
		return r.lister, func() {}, nil
	}
	opts := append([]kgo.Opt{kgo.RequestTimeoutOverhead(r.requestTimeout)}, r.opts...)
	if cl, err = kgo.NewClient(append(opts, kgo.SeedBrokers(r.brokers...))...); err != nil {
		return nil, nil, fmt.Errorf("dispatch: log reader: %w", err)
	}
	return cl, cl.Close, nil
}

// ReadLog returns every committed entry of the partition, from its start to
// the high watermark at the time of the call, in offset order, each with its
// Offset and Batch set. It reads control records too, to know where it is:
// franz-go never returns an empty fetch.
//
// Roles share the partitions of the log, so another producer may hold a
// transaction open on the partition while records are committed after its
// first offset; read_committed shows none of them until it ends, and a read
// that stopped at the last stable offset would miss them. A new leader that
// missed its predecessor's last commands would issue them again. ReadLog
// therefore reads until it has passed the high watermark taken when it
// began, so every transaction begun before the call has ended and every
// record committed before the call is read. It waits for the open
// transactions of others for at most the bound of [KafkaLogReader.SetReadWait]
// ([DefaultOpenTransactionWait] by default), logging the wait and counting
// it in [OpenTransactionWaitMetric], and past the bound it returns an error
// that wraps a *coordination.OpenTransactionError; so does a ctx that ends
// during such a wait.
//
// When records do not decode, it returns every entry that did, and an error
// that joins a *MalformedRecordError for each record that did not; a caller
// that must not act on part of the log (a new leader) treats any error as
// failure. A cancelled ctx ends the read with ctx's error.
func (r *KafkaLogReader) ReadLog(ctx context.Context, partition coordination.TopicPartition) ([]Entry, error) {
	return r.ReadRange(ctx, partition, LogRange{From: 0, Until: LogEnd})
}

// LogEnd, as [LogRange.Until], reads up to the high watermark at the time of
// the call.
const LogEnd int64 = math.MaxInt64

// LogRange is a part of a partition of the command log: the offsets from
// From up to, not including, Until. From is raised to the log start offset
// and Until lowered to the high watermark at the time of the read, so 0 and
// [LogEnd] name the whole partition. Limit, when above zero, ends the read
// after that many entries.
type LogRange struct {
	From, Until int64
	Limit       int
}

// The fetch limit of a read of a bounded range: rangeFetchBytes per offset
// of the range, within rangeFetchMin and franz-go's default of 1 MiB.
const (
	rangeFetchBytes = 256
	rangeFetchMin   = 16 << 10
	rangeFetchMax   = 1 << 20
)

// rangeFetchLimit bounds the bytes a fetch of the offsets from up to until
// asks for. Kafka answers a fetch with whole record batches from the offset
// asked for up to the partition's limit, so a read of the few records of
// one command would otherwise fetch, decompress and count up to a
// megabyte of the records after them. A batch above the limit still comes
// whole.
func rangeFetchLimit(from, until int64) []kgo.Opt {
	if until == LogEnd || until <= from {
		return nil
	}
	n := min(max((until-from)*rangeFetchBytes, rangeFetchMin), rangeFetchMax)
	return []kgo.Opt{kgo.FetchMaxPartitionBytes(int32(n))}
}

// grownFetchMax bounds the bytes of one fetch of a read whose records are
// as large as its fetch limit (see grownFetchLimit): 4 MiB, five parts of
// a checkpoint. Past the range's end a fetch brings what follows, up to
// its limit, and franz-go decompresses and parses all of it. The offsets
// left of a range are often the small records of other roles: the 20
// parts of a base checkpoint of a million IDs lay among 4,900 offsets, and
// at 32 MiB the read ran 177,000 records past them, 216 ms of a 240 ms
// read. Cold starts of `dispatcher run` on that log: about 180 ms to ready
// at 2 or 4 MiB, 260-300 ms at 8, 280-310 ms at 32.
const grownFetchMax = 4 << 20

// grownFetchLimit returns the fetch limit for the rest of a read, left
// offsets, that met a record of biggest bytes while its limit was limit, or
// 0 to keep the limit. When two such records do not fit in one fetch, each
// fetch brings one: the parts of a large checkpoint, of up to
// MaxCheckpointPartLen each, would take a round trip to the broker each,
// some forty of them for a window of a million IDs. The limit then makes
// room for left records of that size, up to grownFetchMax and whole, the
// client's limit of a whole fetch.
func grownFetchLimit(limit, whole int32, biggest int, left int64) int32 {
	if biggest == 0 || int64(biggest)*2 <= int64(limit) || left <= 1 {
		return 0
	}
	n := min(left*int64(biggest), grownFetchMax, int64(whole))
	if n <= int64(limit) {
		return 0
	}
	return int32(n)
}

// fetchLimits returns the limits of one fetch of cl, as a whole and of one
// partition.
func fetchLimits(cl *kgo.Client) (whole, partition int32) {
	whole, partition = 50<<20, 1<<20 // franz-go's defaults
	if v := reflect.ValueOf(cl.OptValue(kgo.FetchMaxBytes)); v.CanInt() {
		whole = int32(v.Int())
	}
	if v := reflect.ValueOf(cl.OptValue(kgo.FetchMaxPartitionBytes)); v.CanInt() {
		partition = int32(v.Int())
	}
	return whole, partition
}

// ReadRange returns the committed entries of the partition within rng, in
// offset order, as [KafkaLogReader.ReadLog] does for the whole partition:
// it waits for the open transactions of other producers the same way, and
// returns the entries that decoded with an error joining a
// *MalformedRecordError for each record that did not. A range that starts
// after the log's start holds outcomes whose Issued records lie before it:
// check it with [VerifyFrom], not [Verify].
func (r *KafkaLogReader) ReadRange(ctx context.Context, partition coordination.TopicPartition, rng LogRange) ([]Entry, error) {
	entries, _, err := r.readRange(ctx, partition, rng, "", nil)
	return entries, err
}

// readRoleRange is ReadRange of the records of role alone: a record whose
// key names another role is counted and skipped without its value being
// decoded, so that a recovery does not decode the records of every role
// that shares the partition. A record whose key does not decode is decoded
// whole, and fails as in ReadRange. It returns the entries with the count
// of the records of every role it read within rng.
func (r *KafkaLogReader) readRoleRange(ctx context.Context, partition coordination.TopicPartition, rng LogRange, role string) ([]Entry, int, error) {
	return r.readRange(ctx, partition, rng, role, nil)
}

// streamRoleRange is readRoleRange that hands the entries of each fetch to
// each, in offset order, as they come, and keeps none of them.
func (r *KafkaLogReader) streamRoleRange(ctx context.Context, partition coordination.TopicPartition, rng LogRange, role string, each func([]Entry)) (int, error) {
	_, n, err := r.readRange(ctx, partition, rng, role, each)
	return n, err
}

// readRange is ReadRange, of the records of role alone unless role is
// empty, and the count of the records of every role it read within rng.
// When each is not nil, the entries of each fetch go to it as they come,
// and none are returned.
func (r *KafkaLogReader) readRange(ctx context.Context, partition coordination.TopicPartition, rng LogRange, role string, each func([]Entry)) ([]Entry, int, error) {
	rw := r.readWait()
	from := max(rng.From, 0)
	cl, err := r.client(partition, kgo.NewOffset().At(from), true, rangeFetchLimit(from, rng.Until)...)
	if err != nil {
		return nil, 0, err
	}
	defer cl.Close()
	start, target, err := r.bounds(ctx, cl, partition)
	if err != nil {
		return nil, 0, err
	}
	start = max(start, from)
	target = min(target, rng.Until)
	fetchMax, fetchLimit := fetchLimits(cl)
	var entries []Entry
	var malformed []error
	read := 0
	var wait *stablewait.Wait
	next, lso := start, start
	for next < target && (rng.Limit <= 0 || len(entries) < rng.Limit) {
		pollCtx, cancel := context.WithTimeout(ctx, openTransactionPoll)
		fetches := cl.PollFetches(pollCtx)
		polled := pollCtx.Err() != nil
		cancel()
		if err := ctx.Err(); err != nil {
			if wait != nil && wait.Waited() > 0 {
				err = &coordination.OpenTransactionError{Partition: partition, StableOffset: lso, Target: target, Waited: wait.Waited(), Err: err}
			}
			return nil, 0, fmt.Errorf("dispatch: read %s-%d: %w", partition.Topic, partition.Partition, err)
		}
		if err := fetchError(fetches, polled); err != nil {
			return nil, 0, fmt.Errorf("dispatch: read %s-%d: %w", partition.Topic, partition.Partition, err)
		}
		if fetches.NumRecords() == 0 {
			// Nothing came within a poll: a fetch still on its way, or the
			// last stable offset held at next by an open transaction.
			if lso, err = r.listOffset(ctx, cl, partition, (*kadm.Client).ListCommittedOffsets, "last stable offset"); err != nil {
				return nil, 0, err
			}
			if lso > next {
				continue
			}
			if wait == nil {
				wait = stablewait.New(rw.bound, rw.logger, rw.counter, partition.Topic, partition.Partition)
			}
			if waited, over := wait.Blocked(ctx, time.Now(), lso, target); over {
				return nil, 0, fmt.Errorf("dispatch: read %s-%d: %w", partition.Topic, partition.Partition,
					&coordination.OpenTransactionError{Partition: partition, StableOffset: lso, Target: target, Waited: waited})
			}
			continue
		}
		if wait != nil {
			wait.Moved()
		}
		r.read.Add(int64(fetches.NumRecords()))
		biggest := 0
		fetches.EachRecord(func(rec *kgo.Record) {
			if rec.Offset+1 > next {
				next = rec.Offset + 1
			}
			biggest = max(biggest, len(rec.Key)+len(rec.Value))
			if rec.Attrs.IsControl() || rec.Offset < start || rec.Offset >= target || (rng.Limit > 0 && len(entries) >= rng.Limit) {
				return
			}
			read++
			if role != "" {
				if kr, ok := keyRole(rec.Key); ok && string(kr) != role {
					return
				}
			}
			e, err := DecodeRecord(rec)
			if err != nil {
				malformed = append(malformed, &MalformedRecordError{Partition: partition, Offset: rec.Offset, Err: err})
				return
			}
			entries = append(entries, e)
		})
		if each != nil && len(entries) > 0 {
			each(entries)
			entries = nil
		}
		if n := grownFetchLimit(fetchLimit, fetchMax, biggest, target-next); n > 0 {
			// The fetches after the next one, which may be under way, bring
			// more than one record each.
			fetchLimit = n
			cl.UpdateFetchMaxBytes(fetchMax, fetchLimit)
		}
	}
	return entries, read, errors.Join(malformed...)
}

// OffsetAt returns the first offset of the partition whose record was
// written at or after t (Kafka's ListOffsets by timestamp, on the records'
// timestamps, which the dispatcher's clock sets), or the high watermark
// when no record is that recent.
func (r *KafkaLogReader) OffsetAt(ctx context.Context, partition coordination.TopicPartition, t time.Time) (int64, error) {
	cl, done, err := r.listClient()
	if err != nil {
		return 0, err
	}
	defer done()
	millis := t.UnixMilli()
	return r.listOffset(ctx, cl, partition, func(c *kadm.Client, ctx context.Context, topics ...string) (kadm.ListedOffsets, error) {
		return c.ListOffsetsAfterMilli(ctx, millis, topics...)
	}, "offset at "+t.UTC().Format(time.RFC3339))
}

// Bounds returns the log start offset and the high watermark of the
// partition.
func (r *KafkaLogReader) Bounds(ctx context.Context, partition coordination.TopicPartition) (start, end int64, err error) {
	cl, done, err := r.listClient()
	if err != nil {
		return 0, 0, err
	}
	defer done()
	return r.bounds(ctx, cl, partition)
}

// bounds returns the log start offset and the high watermark of the
// partition.
func (r *KafkaLogReader) bounds(ctx context.Context, cl *kgo.Client, partition coordination.TopicPartition) (start, end int64, err error) {
	// The two requests go at once: a recovery asks for them first.
	var errStart error
	var wg sync.WaitGroup
	wg.Go(func() {
		start, errStart = r.listOffset(ctx, cl, partition, (*kadm.Client).ListStartOffsets, "log start offset")
	})
	end, err = r.listOffset(ctx, cl, partition, (*kadm.Client).ListEndOffsets, "high watermark")
	wg.Wait()
	if err = errors.Join(errStart, err); err != nil {
		return 0, 0, err
	}
	return start, end, nil
}

// listOffset asks the partition leader for one offset of the partition.
func (r *KafkaLogReader) listOffset(ctx context.Context, cl *kgo.Client, partition coordination.TopicPartition,
	list func(*kadm.Client, context.Context, ...string) (kadm.ListedOffsets, error), what string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, r.requestTimeout)
	defer cancel()
	listed, err := list(kadm.NewClient(cl), ctx, partition.Topic)
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

// DecodeRecord decodes a fetched record of the command log into an entry
// with its offset, its term, its trace context and its batch. The Data of a
// checkpoint part is a slice of rec.Value, not a copy, so a caller that
// recycles fetched records (kgo.Record.Recycle) must copy it first; the
// other fields share no memory with rec.
func DecodeRecord(rec *kgo.Record) (Entry, error) {
	e, err := decodeEntry(rec.Key, rec.Value, true)
	if err != nil {
		return Entry{}, err
	}
	// The trace context is extracted only from a record that carries one:
	// without its traceparent header there is none to extract.
	for _, h := range rec.Headers {
		if h.Key != traceparentHeader {
			continue
		}
		headers := make([]coordination.Header, 0, len(rec.Headers))
		for _, h := range rec.Headers {
			headers = append(headers, coordination.Header{Key: h.Key, Value: h.Value})
		}
		e.Trace = traceFromHeaders(headers)
		break
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

// fetchError joins the errors of fetches. With pollEnded, it leaves out the
// error that franz-go reports for the end of the poll's own context.
func fetchError(fetches kgo.Fetches, pollEnded bool) error {
	var errs []error
	fetches.EachError(func(_ string, p int32, err error) {
		if pollEnded && p == -1 && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
			return
		}
		errs = append(errs, err)
	})
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
	read    *atomic.Int64
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
	s := &LogStream{entries: make(chan Entry), done: make(chan struct{}), cancel: cancel, read: &r.read}
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
		if err := fetchError(fetches, false); err != nil {
			s.err = fmt.Errorf("dispatch: follow %s-%d: %w", partition.Topic, partition.Partition, err)
			return
		}
		s.read.Add(int64(fetches.NumRecords()))
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

// VerifyFrom checks a part of a command log that starts after the log's
// start, as [KafkaLogReader.ReadRange] returns it, against the invariants of
// [Verify]. The range holds Redispatched records and outcomes of commands
// whose Issued records lie before it, which Verify would report as
// [ViolationNotIssued]; VerifyFrom leaves those out for every command that
// has no Issued record in the range, and reports everything else as Verify
// does. An Issued record after an outcome of the command in the range is
// still reported: it is either out of order or a second Issued record. What
// VerifyFrom cannot see is an invariant whose first record lies before the
// range: a command issued twice across the range's start, a token or term
// that regressed against a record before it, and an intake gap at its start.
func VerifyFrom(entries []Entry) []Violation {
	issued := make(map[commandKey]bool)
	for i := range entries {
		if e := &entries[i]; e.Kind == EntryIssued && e.Issued != nil {
			issued[commandKey{e.Role, e.Issued.Command.ID}] = true
		}
	}
	var found []Violation
	for _, v := range Verify(entries) {
		if v.Kind == ViolationNotIssued && !issued[commandKey{v.Role, v.CommandID}] {
			continue
		}
		found = append(found, v)
	}
	return found
}
