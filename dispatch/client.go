package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"
)

// Client submits commands to a cluster of dispatchers through the requests
// topic, and reads what became of them from the command log. It needs no
// leader: any dispatcher that leads the role takes the request in. A Client
// is safe for concurrent use.
//
// NewClient starts one franz-go producer, whose goroutines run until Close.
// Wait and Status run a reader of their own for the length of the call.
type Client struct {
	producer *kgo.Client
	reader   *KafkaLogReader
	cfg      clientConfig
}

type clientConfig struct {
	logTopic           string
	logPartitions      int
	requestsTopic      string
	requestsPartitions int
	requestTimeout     time.Duration
	lookupWindow       time.Duration
	lookupSkew         time.Duration
	kafka              []kgo.Opt
}

const (
	// DefaultLookupWindow is how far back from now [Client.Status] and
	// [Client.Wait] search the log for the role's newest checkpoint, and
	// for a command when the window holds no checkpoint, when the caller
	// gives no hint of where its records are: the dispatcher's dedup
	// window, 7 days.
	// The dispatcher deduplicates command IDs within that window and
	// rejects a command submitted before it, so a command that can still
	// be acted on has its records inside it. Change it with
	// [WithClientLookupWindow].
	DefaultLookupWindow = DefaultDedupWindow

	// DefaultLookupSkew is the margin a lookup by time starts before the
	// time it is given: the log's record timestamps are set by the leader's
	// clock (Kafka's CreateTime), which may run behind the submitter's.
	// Change it with [WithClientLookupSkew].
	DefaultLookupSkew = time.Minute
)

// ClientOption configures a [Client].
type ClientOption func(*clientConfig) error

// WithClientLogTopic names the command log topic and its partition count,
// overriding [DefaultLogTopic] and [DefaultTopicPartitions]. Pass what the
// dispatchers use, since the count picks the partition of a role.
func WithClientLogTopic(topic string, partitions int) ClientOption {
	return func(c *clientConfig) error {
		if topic == "" {
			return errors.New("dispatch: client: log topic is empty")
		}
		if err := positive("log partitions", partitions); err != nil {
			return err
		}
		c.logTopic, c.logPartitions = topic, partitions
		return nil
	}
}

// WithClientRequestsTopic names the requests topic and its partition count,
// overriding [DefaultRequestsTopic] and [DefaultTopicPartitions].
func WithClientRequestsTopic(topic string, partitions int) ClientOption {
	return func(c *clientConfig) error {
		if topic == "" {
			return errors.New("dispatch: client: requests topic is empty")
		}
		if err := positive("requests partitions", partitions); err != nil {
			return err
		}
		c.requestsTopic, c.requestsPartitions = topic, partitions
		return nil
	}
}

// WithClientRequestTimeout bounds each Kafka request other than a fetch,
// overriding [DefaultKafkaRequestTimeout]: the produce of Submit, and the
// offset lookups of Status. It also feeds franz-go's request timeout
// overhead (on top of Kafka's request.timeout.ms semantics).
func WithClientRequestTimeout(timeout time.Duration) ClientOption {
	return func(c *clientConfig) error {
		if err := positive("request timeout", timeout); err != nil {
			return err
		}
		c.requestTimeout = timeout
		return nil
	}
}

// WithClientLookupWindow sets how far back from now a lookup without a hint
// searches the log, overriding [DefaultLookupWindow]. Give the dispatchers'
// dedup window.
func WithClientLookupWindow(window time.Duration) ClientOption {
	return func(c *clientConfig) error {
		if err := positive("lookup window", window); err != nil {
			return err
		}
		c.lookupWindow = window
		return nil
	}
}

// WithClientLookupSkew sets how long before a given time a lookup by time
// starts, overriding [DefaultLookupSkew]: the largest difference expected
// between the submitter's clock and the leader's. Zero trusts both clocks.
func WithClientLookupSkew(skew time.Duration) ClientOption {
	return func(c *clientConfig) error {
		if skew < 0 {
			return fmt.Errorf("dispatch: client: lookup skew %s is negative", skew)
		}
		c.lookupSkew = skew
		return nil
	}
}

// WithClientKafkaOptions adds franz-go options, such as TLS or SASL, to the
// client's producer and readers. They come after the client's defaults; the
// client always sets the seed brokers, the manual partitioner, acks=all with
// idempotent writes, and read_committed.
func WithClientKafkaOptions(opts ...kgo.Opt) ClientOption {
	return func(c *clientConfig) error {
		c.kafka = append(c.kafka, opts...)
		return nil
	}
}

// NewClient returns a client of the cluster at brokers. It checks every
// option before it starts anything, so a failed call leaks nothing.
func NewClient(brokers []string, options ...ClientOption) (*Client, error) {
	if len(brokers) == 0 {
		return nil, errors.New("dispatch: client: no brokers")
	}
	cfg := clientConfig{
		logTopic:           DefaultLogTopic,
		logPartitions:      DefaultTopicPartitions,
		requestsTopic:      DefaultRequestsTopic,
		requestsPartitions: DefaultTopicPartitions,
		requestTimeout:     DefaultKafkaRequestTimeout,
		lookupWindow:       DefaultLookupWindow,
		lookupSkew:         DefaultLookupSkew,
	}
	for _, option := range options {
		if option == nil {
			continue
		}
		if err := option(&cfg); err != nil {
			return nil, err
		}
	}
	reader, err := NewKafkaLogReader(brokers, cfg.kafka...)
	if err != nil {
		return nil, err
	}
	reader.requestTimeout = cfg.requestTimeout
	opts := append([]kgo.Opt{
		kgo.ProducerLinger(0),
		kgo.RequestTimeoutOverhead(cfg.requestTimeout),
	}, cfg.kafka...)
	opts = append(opts,
		kgo.SeedBrokers(brokers...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(cfg.requestTimeout),
	)
	producer, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("dispatch: client: %w", err)
	}
	// The lookups list offsets through the producer's client, which is
	// connected already, rather than a client of their own each time.
	reader.lister = producer
	return &Client{producer: producer, reader: reader, cfg: cfg}, nil
}

// Close stops the producer and waits for its goroutines. Calls after Close
// fail.
func (c *Client) Close() { c.producer.Close() }

// LogPartition returns the partition of the command log that holds the
// records of role.
func (c *Client) LogPartition(role string) (coordination.TopicPartition, error) {
	return rolePartition(role, c.cfg.logTopic, c.cfg.logPartitions)
}

// RequestsPartition returns the partition of the requests topic that the
// leader of role takes requests from.
func (c *Client) RequestsPartition(role string) (coordination.TopicPartition, error) {
	return rolePartition(role, c.cfg.requestsTopic, c.cfg.requestsPartitions)
}

func rolePartition(name, topic string, partitions int) (coordination.TopicPartition, error) {
	role, err := coordination.NewRole(name)
	if err != nil {
		return coordination.TopicPartition{}, fmt.Errorf("dispatch: %w", err)
	}
	p, err := coordination.RolePartition(role, partitions)
	if err != nil {
		return coordination.TopicPartition{}, fmt.Errorf("dispatch: %w", err)
	}
	return coordination.TopicPartition{Topic: topic, Partition: p}, nil
}

// Submit writes cmd to the requests topic, at the partition of cmd.Role,
// and returns once the record is durable (acks=all). The leader of the role
// takes it in; [Client.Wait] tells what became of it.
//
// cmd.Role is required, since it picks the partition; a zero SubmittedAt is
// set to now, and a zero Deadline is left for the dispatcher to set from its
// command timeout. Submit returns an *InvalidCommandError for a command the
// dispatcher would reject. Submitting the same command again is safe: the
// dispatcher issues a command ID once. The span of ctx, if any, becomes the
// parent of the command's trace. [Client.Send] does the same and tells where
// the request was written.
func (c *Client) Submit(ctx context.Context, cmd Command) error {
	_, err := c.Send(ctx, cmd)
	return err
}

// Receipt tells where a request was written: pass it to [LookupAfter] so
// that a lookup of the command starts there.
type Receipt struct {
	// Role and ID name the command.
	Role, ID string
	// Requests is the partition of the requests topic the request went to,
	// and Offset its offset there.
	Requests coordination.TopicPartition
	Offset   int64
	// SubmittedAt is the command's SubmittedAt.
	SubmittedAt time.Time
}

// Send submits cmd as [Client.Submit] does and returns where the request
// was written.
func (c *Client) Send(ctx context.Context, cmd Command) (Receipt, error) {
	if cmd.Role == "" {
		return Receipt{}, &InvalidCommandError{Field: "Role", Problem: "is empty: the client needs it to pick the partition"}
	}
	if cmd.SubmittedAt.IsZero() {
		cmd.SubmittedAt = time.Now()
	}
	value, err := EncodeRequest(cmd)
	if err != nil {
		return Receipt{}, err
	}
	tp, err := c.RequestsPartition(cmd.Role)
	if err != nil {
		return Receipt{}, err
	}
	rec := &kgo.Record{Topic: tp.Topic, Partition: int32(tp.Partition), Key: []byte(cmd.ID), Value: value}
	for _, h := range traceHeaders(trace.SpanContextFromContext(ctx)) {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.requestTimeout)
	defer cancel()
	res := c.producer.ProduceSync(ctx, rec)
	if err := res.FirstErr(); err != nil {
		return Receipt{}, fmt.Errorf("dispatch: submit %q to %s-%d: %w", cmd.ID, tp.Topic, tp.Partition, err)
	}
	return Receipt{Role: cmd.Role, ID: cmd.ID, Requests: tp, Offset: res[0].Record.Offset, SubmittedAt: cmd.SubmittedAt}, nil
}

// LookupOption tells [Client.Wait] and [Client.Status] where in the log a
// command's records are, so that they read from there instead of searching
// the lookup window ([DefaultLookupWindow]) back from the end. The last
// option given wins.
type LookupOption func(*lookup)

type lookup struct {
	since   time.Time
	offset  int64
	hasOff  bool
	receipt *Receipt
}

// LookupSince starts the lookup at the records written at or after t, less
// the client's skew margin ([DefaultLookupSkew]): give the command's
// SubmittedAt, or any earlier time. Kafka maps the time to an offset
// (ListOffsets by timestamp). A time before the lookup window reaches
// records the window would not.
func LookupSince(t time.Time) LookupOption {
	return func(l *lookup) { *l = lookup{since: t} }
}

// LookupFromOffset starts the lookup at offset of the role's partition of
// the command log; records before it are not read.
func LookupFromOffset(offset int64) LookupOption {
	return func(l *lookup) { *l = lookup{offset: max(offset, 0), hasOff: true} }
}

// LookupAfter starts the lookup where the request of r was written, as
// [LookupSince] of its SubmittedAt does. [Client.Wait] given it also knows
// when the leader took the request in: when the transaction that took it in
// holds no record of the command (a second submission of a command that the
// dispatcher already holds), it finds the command's earlier records as a
// lookup without a hint does: where the role's newest checkpoint points,
// or in the lookup window when the role has none there.
func LookupAfter(r Receipt) LookupOption {
	return func(l *lookup) { *l = lookup{since: r.SubmittedAt, receipt: &r} }
}

// OutsideLookupWindowError reports a command of which the lookup window holds no
// record: it was never submitted, or it was submitted before the window, and
// a command that old is rejected by the dispatcher. A lookup with
// [LookupSince] or [LookupFromOffset] reaches further back. It unwraps to an
// *UnknownCommandError.
type OutsideLookupWindowError struct {
	// ID is the command asked for.
	ID string
	// Since is where the search began: now less Window, at the time of the
	// lookup.
	Since  time.Time
	Window time.Duration
}

// Error names the command and the window.
func (e *OutsideLookupWindowError) Error() string {
	return fmt.Sprintf("dispatch: the log holds no command %q since %s (the lookup window, %s): it was never submitted, or it is older than the window",
		e.ID, e.Since.UTC().Format(time.RFC3339), e.Window)
}

// Unwrap returns the *UnknownCommandError of the command.
func (e *OutsideLookupWindowError) Unwrap() error { return &UnknownCommandError{ID: e.ID} }

// RecordsRead returns how many records of the log the client's lookups have
// read since NewClient: the cost of [Client.Wait] and [Client.Status],
// which depends on how far back they start, not on the log's length.
func (c *Client) RecordsRead() int64 { return c.reader.RecordsRead() }

// start resolves the first offset of a lookup in tp. It reports whether
// the caller gave a hint; without one it resolves nothing.
func (c *Client) start(ctx context.Context, tp coordination.TopicPartition, opts []LookupOption) (from int64, l lookup, hinted bool, err error) {
	for _, o := range opts {
		if o != nil {
			o(&l)
		}
	}
	switch {
	case l.hasOff:
		return l.offset, l, true, nil
	case !l.since.IsZero():
		from, err = c.reader.OffsetAt(ctx, tp, l.since.Add(-c.cfg.lookupSkew))
		return from, l, true, err
	default:
		return 0, l, false, nil
	}
}

// Wait follows the log of role until an outcome of command id is recorded
// that is terminal or in doubt, and returns it. It blocks as long as ctx
// allows, and returns ctx's error when ctx ends first.
//
// It reads from where opts say the command's records are ([LookupAfter] the
// receipt of [Client.Send] is the usual hint). Without a hint it looks the
// command up in the role's newest checkpoint, found by reading back from
// the end of the partition: a settled command's outcome is read at the
// offsets the checkpoint holds for it, and otherwise the log is followed
// from the end after the records since the checkpoint are looked at. Only a
// role with no checkpoint in the lookup window ([DefaultLookupWindow]) has
// the window read. Either way it finds an outcome recorded before the call,
// and its cost does not grow with the log's history.
func (c *Client) Wait(ctx context.Context, role, id string, opts ...LookupOption) (Outcome, error) {
	tp, err := c.LogPartition(role)
	if err != nil {
		return Outcome{}, err
	}
	from, l, hinted, err := c.start(ctx, tp, opts)
	if err != nil {
		return Outcome{}, err
	}
	if !hinted {
		out, done, end, err := c.waitStart(ctx, tp, role, id)
		if err != nil || done {
			return out, err
		}
		from = end
	}
	stream, err := c.reader.FollowLog(ctx, tp, from)
	if err != nil {
		return Outcome{}, err
	}
	defer stream.Close()
	seen := false
	for e := range stream.Entries() {
		if e.Role != role {
			continue
		}
		if e.CommandID() == id {
			seen = true
			if e.Kind == EntryOutcome && (e.Outcome.Status.Terminal() || e.Outcome.Status == StatusInDoubt) {
				return *e.Outcome, nil
			}
			continue
		}
		if l.receipt == nil || seen || !covers(e, *l.receipt) {
			continue
		}
		// The intake record is the last of its transaction: the request
		// was taken in with no record of the command, so the command's
		// records, if any, came before.
		out, done, err := c.earlier(ctx, tp, role, id, e.Offset)
		if err != nil || done {
			return out, err
		}
		seen = true
	}
	return Outcome{}, fmt.Errorf("dispatch: wait for %q: %w", id, stream.Err())
}

// covers reports whether e is the intake record that took in the request of
// r.
func covers(e Entry, r Receipt) bool {
	in := e.Intake
	return e.Kind == EntryIntake && in != nil && in.Topic == r.Requests.Topic && in.Partition == r.Requests.Partition &&
		in.FromOffset <= r.Offset && r.Offset < in.NextOffset
}

// earlier finds, before offset until, the history of a command whose
// request was taken in with no record of its own: where the role's newest
// checkpoint points, or in the lookup window when the role has no
// checkpoint there. It returns the outcome and true when the history
// settled it, false when the command is still open, and an error when the
// log holds no record of it.
func (c *Client) earlier(ctx context.Context, tp coordination.TopicPartition, role, id string, until int64) (Outcome, bool, error) {
	s, err := c.searchLog(ctx, tp, role)
	if err != nil {
		return Outcome{}, false, err
	}
	h, ok, err := c.commandHistory(ctx, tp, role, id, &s, until)
	if err != nil {
		return Outcome{}, false, err
	}
	if !ok {
		return Outcome{}, false, fmt.Errorf("dispatch: wait for %q: the leader took its request in with no record of it: %w",
			id, &OutsideLookupWindowError{ID: id, Since: s.since, Window: c.cfg.lookupWindow})
	}
	for i := len(h.Outcomes) - 1; i >= 0; i-- {
		if o := h.Outcomes[i].Outcome; o.Status.Terminal() || o.Status == StatusInDoubt {
			return *o, true, nil
		}
	}
	return Outcome{}, false, nil
}

// Status returns the history of command id: its status, attempts and
// outcomes so far. It reads the role's partition of the log from where opts
// say the command's records are up to the high watermark at the time of the
// call. Without a hint it first reads the last few dozen offsets, which
// hold a command written moments ago whole (from its Issued record on);
// failing that, it finds the role's newest checkpoint by reading
// back from the high watermark and reads the command's records from the
// offset the checkpoint holds for it (up to its outcome for a settled
// command, to the end for one not settled), or, for a command the
// checkpoint does not hold, only the records after the checkpoint; a
// command ID whose hash another command shares is told apart by reading its
// records. A delta checkpoint's base is read only for a command that neither
// the delta nor the records after it name. Only a role with no checkpoint
// in the lookup window ([DefaultLookupWindow]) has the whole window read.
// It returns an
// *UnknownCommandError when the log does not name the command there: an
// *OutsideLookupWindowError when the lookup had no hint.
func (c *Client) Status(ctx context.Context, role, id string, opts ...LookupOption) (*CommandHistory, error) {
	tp, err := c.LogPartition(role)
	if err != nil {
		return nil, err
	}
	from, _, hinted, err := c.start(ctx, tp, opts)
	if err != nil {
		return nil, err
	}
	if !hinted {
		return c.statusWithoutHint(ctx, tp, role, id)
	}
	entries, err := c.reader.ReadRange(ctx, tp, LogRange{From: from, Until: LogEnd})
	if err != nil {
		return nil, err
	}
	if cmd, ok := Replay(entries).Command(role, id); ok {
		return cmd, nil
	}
	return nil, &UnknownCommandError{ID: id}
}

// History reads the log of role as [KafkaLogReader.ReadLog] does and
// replays it.
// The history holds every role that shares the partition.
func (c *Client) History(ctx context.Context, role string) (History, error) {
	entries, err := c.ReadLog(ctx, role)
	if err != nil {
		return History{}, err
	}
	return Replay(entries), nil
}

// ReadLog reads the partition of the command log that holds role, as
// [KafkaLogReader.ReadLog] does.
func (c *Client) ReadLog(ctx context.Context, role string) ([]Entry, error) {
	tp, err := c.LogPartition(role)
	if err != nil {
		return nil, err
	}
	return c.reader.ReadLog(ctx, tp)
}

// FollowLog follows the partition of the command log that holds role from
// offset from, as [KafkaLogReader.FollowLog] does.
func (c *Client) FollowLog(ctx context.Context, role string, from int64) (*LogStream, error) {
	tp, err := c.LogPartition(role)
	if err != nil {
		return nil, err
	}
	return c.reader.FollowLog(ctx, tp, from)
}
