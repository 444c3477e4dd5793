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
	kafka              []kgo.Opt
}

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
// parent of the command's trace.
func (c *Client) Submit(ctx context.Context, cmd Command) error {
	if cmd.Role == "" {
		return &InvalidCommandError{Field: "Role", Problem: "is empty: the client needs it to pick the partition"}
	}
	if cmd.SubmittedAt.IsZero() {
		cmd.SubmittedAt = time.Now()
	}
	value, err := EncodeRequest(cmd)
	if err != nil {
		return err
	}
	tp, err := c.RequestsPartition(cmd.Role)
	if err != nil {
		return err
	}
	rec := &kgo.Record{Topic: tp.Topic, Partition: int32(tp.Partition), Key: []byte(cmd.ID), Value: value}
	for _, h := range traceHeaders(trace.SpanContextFromContext(ctx)) {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.requestTimeout)
	defer cancel()
	if err := c.producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("dispatch: submit %q to %s-%d: %w", cmd.ID, tp.Topic, tp.Partition, err)
	}
	return nil
}

// Wait follows the log of role until an outcome of command id is recorded
// that is terminal or in doubt, and returns it. It reads the log from its
// start, so it finds an outcome recorded before the call; it blocks as long
// as ctx allows, and returns ctx's error when ctx ends first.
func (c *Client) Wait(ctx context.Context, role, id string) (Outcome, error) {
	tp, err := c.LogPartition(role)
	if err != nil {
		return Outcome{}, err
	}
	stream, err := c.reader.FollowLog(ctx, tp, 0)
	if err != nil {
		return Outcome{}, err
	}
	defer stream.Close()
	for e := range stream.Entries() {
		if e.Kind != EntryOutcome || e.Role != role || e.Outcome.CommandID != id {
			continue
		}
		if e.Outcome.Status.Terminal() || e.Outcome.Status == StatusInDoubt {
			return *e.Outcome, nil
		}
	}
	return Outcome{}, fmt.Errorf("dispatch: wait for %q: %w", id, stream.Err())
}

// Status reads the log of role as [KafkaLogReader.ReadLog] does and returns the
// history of command id: its status, attempts and outcomes so far. It
// returns an *UnknownCommandError when the log does not name the command.
func (c *Client) Status(ctx context.Context, role, id string) (*CommandHistory, error) {
	h, err := c.History(ctx, role)
	if err != nil {
		return nil, err
	}
	cmd, ok := h.Command(role, id)
	if !ok {
		return nil, &UnknownCommandError{ID: id}
	}
	return cmd, nil
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
