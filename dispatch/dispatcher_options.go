package dispatch

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"

	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

const (
	// DefaultMaxBatchRecords is the default bound on the records of one
	// transaction of the command log. Commands and outcomes that arrive while
	// a transaction is in flight wait for the next one, up to this many
	// records. Change it with [WithMaxBatchRecords].
	//
	// It is set so high that [DefaultMaxBatchBytes] binds first: the Issued
	// record of a small command takes some 130 bytes, so 1 MiB holds about
	// 8,000 of them, and a batch grows under a backlog until its bytes fill
	// the bound. The
	// record bound used to be 500, which capped a transaction at some 244
	// commands (an Issued and an Outcome record each, plus the intake
	// record); a backlog of one role with a device that answers at once then
	// drained at 3,500 to 6,500 commands a second, and at some 25,000 with a
	// bound of 4,000 records. It stays above [DefaultMaxQueued], so under the
	// defaults the queue bound and the byte bound are the ones that bind.
	DefaultMaxBatchRecords = 16384

	// DefaultCommitLinger is the default longest wait of group commit, after
	// the first record queues, for more records to join its transaction. It
	// plays the part of the producer's linger.ms for the command log: a burst
	// of commands that submitters queue over a few milliseconds commits in
	// one transaction rather than in a small first one and the rest, and
	// the outcomes of a batch share a transaction with the commands that
	// follow them. The price is that a lone command waits up to this long
	// before its transaction starts, small beside the commit of a replicated
	// transaction (tens of milliseconds at acks=all).
	//
	// 3ms is measured: closed rounds of 100 commands on two cores, with
	// commits of 40ms, wrote 2.0 transactions per round without a linger,
	// about 1.25 with 2ms, and 1.05 to 1.2 with 3ms, where 5ms gained nothing
	// more; driving a round and submitting the next takes a few
	// milliseconds there. A batch at its record, byte or queue bound does not
	// wait. Change it with [WithCommitLinger]; zero turns lingering off.
	DefaultCommitLinger = 3 * time.Millisecond

	// DefaultCommitGap is the default shortest time between the end of one
	// transaction of the command log and the start of the next, unless the
	// queue is full. The gap overlaps the commit linger: a record waits for
	// whichever ends later, never for both in turn. Change it with
	// [WithCommitGap]; zero turns it off.
	//
	// The gap was chosen, at 2ms, when a transaction begun within some
	// milliseconds of a commit was held by its partition leader for the
	// brokers' add.partitions.to.txn.retry.backoff.ms (20 ms by default)
	// once more than one begun later: a raw transactional producer
	// committed the most commands a second with a pause of 1 to 2ms after
	// each commit, at every batch from 1 to 1,000. The transport now has
	// the coordinator complete each commit before the role's next
	// transaction begins (coordination.KafkaTransport.WriteGuarded), which
	// spares that hold itself; measured since (docs/OPERATIONS.md, "Commit
	// latency and the brokers"), 2ms is level with no gap or a little
	// ahead, and the default stays.
	DefaultCommitGap = 2 * time.Millisecond

	// DefaultOutcomeLinger is the default longest wait of outcome records
	// that have the queue to themselves for a transaction that is due
	// anyway: one with an Issued or Redispatched record or an intake mark,
	// which a dispatch or the intake position waits for. Outcomes gate no
	// dispatch; a transaction of outcomes alone, started just before the
	// next commands queue, makes those commands wait for its whole commit
	// before their own starts, so under load the outcomes of one burst ride
	// with the commands of the next instead. The linger counts from the
	// latest outcome, so a burst of them rides until it ends, and never
	// past one commit's time after the first. The price is that an outcome
	// with no command after it commits up to this much later, or up to
	// one commit's time when commits are faster than this or a
	// [Dispatcher.SubmitBatch] call is preparing its records. Where no
	// command follows outcomes (clients that wait for the outcome of each
	// command before they submit the next), the wait halves after each
	// transaction of outcomes alone that no command queued behind, down to
	// the commit gap, and is this long again after one that a command
	// queued behind. After [Dispatcher.StopIntake] outcomes no longer
	// wait. Change it with [WithOutcomeLinger]; zero makes outcomes start a
	// transaction like any other record.
	DefaultOutcomeLinger = 10 * time.Millisecond

	// DefaultMaxBatchBytes is the default bound on the encoded keys and
	// values of one transaction, 1 MiB, Kafka's default max.request.size.
	// A single record above it still goes, alone. Change it with
	// [WithMaxBatchBytes].
	DefaultMaxBatchBytes = 1 << 20

	// DefaultMaxQueued is the default bound on the commands and outcomes that
	// wait for a transaction. Submit and intake block while it is reached.
	// Change it with [WithMaxQueued].
	DefaultMaxQueued = 10000

	// DefaultMaxPending is the default bound on the commands accepted and
	// not yet settled: issued, queued for their device, or waiting for their
	// outcome to commit. Submit and intake wait while it is reached, so a
	// backlog in the requests topic stays in Kafka instead of in memory
	// when the devices are slower than intake; a pending command takes some
	// 700 bytes of heap, so the default bounds them at some 25 MiB. Change
	// it with [WithMaxPending].
	DefaultMaxPending = 32768

	// DefaultMaxParallelDevices is the default bound on the devices that the
	// dispatcher drives at once. Change it with [WithMaxParallelDevices].
	DefaultMaxParallelDevices = 64

	// DefaultMaxAttempts is the default number of Dispatch calls for one
	// command whose device keeps returning a retryable error. Change it with
	// [WithMaxAttempts].
	DefaultMaxAttempts = 5

	// DefaultRetryBackoff is the default wait before the first retry of a
	// retryable device error; each further retry waits twice as long, up to
	// [DefaultMaxRetryBackoff]. Change both with [WithRetryBackoff].
	DefaultRetryBackoff = 100 * time.Millisecond

	// DefaultMaxRetryBackoff is the default ceiling of the retry backoff.
	DefaultMaxRetryBackoff = 2 * time.Second

	// DefaultSafetyMargin is the default lease freshness below which the
	// dispatcher drives no device: it waits for a renewal to commit first,
	// and it cancels a device call in progress when the freshness falls to
	// it ([ErrFreshnessExpired]).
	// It must exceed the clock skew between members plus the time one
	// Dispatch call needs to reach the hardware. Change it with
	// [WithSafetyMargin].
	DefaultSafetyMargin = 2 * time.Second

	// DefaultCommandTimeout is the default time to live of a command that
	// arrives without a Deadline: its deadline becomes its submission time
	// plus this extent. Change it with [WithCommandTimeout].
	DefaultCommandTimeout = time.Minute

	// DefaultDedupWindow is how long command IDs are deduplicated, counted
	// from a command's SubmittedAt. A command submitted longer ago than the
	// window is refused ([ErrOutsideDedupWindow]); see [WithDedupWindow].
	DefaultDedupWindow = 7 * 24 * time.Hour

	// DedupClockSkew is the margin beyond the dedup window for which a
	// settled command's ID stays held, so that a successor whose clock runs
	// up to this far ahead of its predecessor's still finds every ID that
	// the predecessor would have refused as a duplicate.
	DedupClockSkew = time.Minute

	// DefaultCheckpointInterval is how many records of the role the
	// dispatcher commits between two checkpoints, and how many offsets of
	// its log partition (the records of every role that shares it) may pass
	// before it writes one even when it is idle. See [WithCheckpointInterval].
	DefaultCheckpointInterval = 20000
)

// writeRetryBackoff is the wait before a transaction of the command log that
// failed without ending the leadership is tried again, and the first wait
// before a failed read of the log or the requests is.
const writeRetryBackoff = 200 * time.Millisecond

// Option configures a [Dispatcher]. Each option checks its own value; a
// rejected option names the bad value and NewDispatcher returns its error.
type Option func(*config) error

type config struct {
	logTopic           string
	logPartitions      int
	requestsTopic      string
	requestsPartitions int
	requests           RequestSource
	maxBatchRecords    int
	maxBatchBytes      int
	commitLinger       time.Duration
	commitGap          time.Duration
	outcomeLinger      time.Duration
	onCommitted        func([]CommittedRecord)
	maxQueued          int
	maxPending         int
	maxParallelDevices int
	maxAttempts        int
	retryBackoff       time.Duration
	maxRetryBackoff    time.Duration
	safetyMargin       time.Duration
	commandTimeout     time.Duration
	dedupWindow        time.Duration
	checkpointInterval int
	standby            *Standby
	clock              coordination.Clock
	writeRetryBackoff  time.Duration
	tracerProvider     trace.TracerProvider
	meterProvider      metric.MeterProvider
	logger             *slog.Logger
}

func newConfig(options []Option) (*config, error) {
	c := &config{
		logTopic:           DefaultLogTopic,
		logPartitions:      DefaultTopicPartitions,
		requestsTopic:      DefaultRequestsTopic,
		requestsPartitions: DefaultTopicPartitions,
		maxBatchRecords:    DefaultMaxBatchRecords,
		maxBatchBytes:      DefaultMaxBatchBytes,
		commitLinger:       DefaultCommitLinger,
		commitGap:          DefaultCommitGap,
		outcomeLinger:      DefaultOutcomeLinger,
		maxQueued:          DefaultMaxQueued,
		maxPending:         DefaultMaxPending,
		maxParallelDevices: DefaultMaxParallelDevices,
		maxAttempts:        DefaultMaxAttempts,
		retryBackoff:       DefaultRetryBackoff,
		maxRetryBackoff:    DefaultMaxRetryBackoff,
		safetyMargin:       DefaultSafetyMargin,
		commandTimeout:     DefaultCommandTimeout,
		dedupWindow:        DefaultDedupWindow,
		checkpointInterval: DefaultCheckpointInterval,
		clock:              coordination.SystemClock{},
		writeRetryBackoff:  writeRetryBackoff,
		tracerProvider:     tracenoop.NewTracerProvider(),
		meterProvider:      metricnoop.NewMeterProvider(),
		logger:             slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, option := range options {
		if option == nil {
			continue
		}
		if err := option(c); err != nil {
			return nil, err
		}
	}
	if c.maxRetryBackoff < c.retryBackoff {
		return nil, fmt.Errorf("dispatch: max retry backoff %v is below the retry backoff %v", c.maxRetryBackoff, c.retryBackoff)
	}
	return c, nil
}

var errNotPositive = errors.New("must be positive")

func positive[T int | time.Duration](what string, v T) error {
	if v <= 0 {
		return fmt.Errorf("dispatch: %s %v: %w", what, v, errNotPositive)
	}
	return nil
}

// WithLogTopic names the command log topic and its partition count,
// overriding [DefaultLogTopic] and [DefaultTopicPartitions]. The records of
// the role go to its RolePartition of this topic.
func WithLogTopic(topic string, partitions int) Option {
	return func(c *config) error {
		if topic == "" {
			return errors.New("dispatch: log topic is empty")
		}
		if err := positive("log partitions", partitions); err != nil {
			return err
		}
		c.logTopic, c.logPartitions = topic, partitions
		return nil
	}
}

// WithRequestsTopic names the requests topic and its partition count,
// overriding [DefaultRequestsTopic] and [DefaultTopicPartitions]. Intake reads
// the RolePartition of the role.
func WithRequestsTopic(topic string, partitions int) Option {
	return func(c *config) error {
		if topic == "" {
			return errors.New("dispatch: requests topic is empty")
		}
		if err := positive("requests partitions", partitions); err != nil {
			return err
		}
		c.requestsTopic, c.requestsPartitions = topic, partitions
		return nil
	}
}

// WithRequestSource turns on intake from the requests topic through source.
// Without it the dispatcher takes commands from [Dispatcher.Submit] only.
// [NewKafkaRequestSource] reads a Kafka cluster.
func WithRequestSource(source RequestSource) Option {
	return func(c *config) error {
		c.requests = source
		return nil
	}
}

// WithMaxBatchRecords bounds the records of one log transaction, overriding
// [DefaultMaxBatchRecords].
func WithMaxBatchRecords(n int) Option {
	return func(c *config) error {
		if err := positive("max batch records", n); err != nil {
			return err
		}
		c.maxBatchRecords = n
		return nil
	}
}

// WithMaxBatchBytes bounds the encoded bytes of one log transaction,
// overriding [DefaultMaxBatchBytes]. Keep it at or below the producer's
// max.request.size.
func WithMaxBatchBytes(n int) Option {
	return func(c *config) error {
		if err := positive("max batch bytes", n); err != nil {
			return err
		}
		c.maxBatchBytes = n
		return nil
	}
}

// WithCommitLinger sets how long group commit waits, after the first record
// that makes a transaction due queues (any record but an outcome, see
// [WithOutcomeLinger]), for more records before it starts a transaction of
// the command log, overriding [DefaultCommitLinger]. Zero starts a transaction as soon as
// anything is queued. The wait ends early when the batch reaches
// [WithMaxBatchRecords], [WithMaxBatchBytes] or [WithMaxQueued], and when the
// dispatcher halts. Records that queued while the previous transaction was in
// flight for longer than d go as soon as it commits.
func WithCommitLinger(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("dispatch: commit linger %v is negative", d)
		}
		c.commitLinger = d
		return nil
	}
}

// WithCommitGap sets the shortest time between the end of one transaction
// of the command log and the start of the next, overriding
// [DefaultCommitGap]. Zero starts the next transaction as soon as the one
// before ends. The gap is skipped while the queue is at [WithMaxQueued],
// when submitters wait for room, and it ends early when the dispatcher
// halts. A record that lingers waits for the later of the linger and the
// gap, not for their sum.
func WithCommitGap(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("dispatch: commit gap %v is negative", d)
		}
		c.commitGap = d
		return nil
	}
}

// WithOutcomeLinger sets how long outcome records that have the queue to
// themselves wait for a transaction that is due anyway before they start
// one of their own, overriding [DefaultOutcomeLinger]; the wait counts from
// the latest of them, so that a burst of outcomes rides until it ends. They
// never wait less than the commit gap, nor once their batch is full or the
// queue is at its bound, nor after [Dispatcher.StopIntake]. Nor do they
// wait longer than a transaction of the log takes (a moving average of the
// recent ones) after the first of them: their own transaction would cost
// the next commands no more than that. While a [Dispatcher.SubmitBatch]
// call prepares its records, they wait up to that long for them. The wait
// halves after each transaction of outcomes alone that no record queued
// behind while it was in flight (nothing came that riding would have
// spared a wait), down to the commit gap, and is d again after one that a
// record queued behind. Zero makes an outcome start a transaction like any
// other record, after the commit linger. The wait never reorders the log:
// an outcome goes in the same transaction as the records queued before it,
// or a later one.
func WithOutcomeLinger(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("dispatch: outcome linger %v is negative", d)
		}
		c.outcomeLinger = d
		return nil
	}
}

// CommittedRecord is a record of a command that a transaction of the
// command log committed, as [WithOnCommitted] reports it.
type CommittedRecord struct {
	// Kind is EntryIssued, EntryRedispatched or EntryOutcome.
	Kind EntryKind

	// CommandID names the command.
	CommandID string

	// Outcome is the outcome an EntryOutcome record holds, and nil for
	// the other kinds. The callback must not change it.
	Outcome *Outcome

	// Offset is the record's offset in the log partition, or -1 when the
	// writer cannot tell.
	Offset int64

	// Token is the fencing token of the transaction that wrote the record.
	Token coordination.FencingToken
}

// WithOnCommitted sets a function that the dispatcher calls once for each
// transaction of the command log that commits, with the Issued,
// Redispatched and Outcome records it held, in log order, after their
// effects applied: a command whose Outcome record is reported is settled.
// Intake and checkpoint records are not reported, and a transaction with
// none of the three kinds makes no call. The function runs on the commit
// loop, which starts no transaction until it returns; it must be quick and
// must not call the dispatcher back. By default no function is called.
func WithOnCommitted(f func([]CommittedRecord)) Option {
	return func(c *config) error {
		c.onCommitted = f
		return nil
	}
}

// WithMaxQueued bounds the records waiting for a transaction, overriding
// [DefaultMaxQueued].
func WithMaxQueued(n int) Option {
	return func(c *config) error {
		if err := positive("max queued", n); err != nil {
			return err
		}
		c.maxQueued = n
		return nil
	}
}

// WithMaxPending bounds the commands accepted and not yet settled,
// overriding [DefaultMaxPending]. A new command waits in Submit, and intake
// stops reading the requests topic, while the bound is reached; a command
// whose ID the dispatcher holds, a request refused at intake and an outcome
// never wait for it. Commands in doubt do not count: an operator settles
// them. A command still waiting when intake stops ([Dispatcher.StopIntake])
// is not recorded, and Submit returns [ErrIntakeStopped].
func WithMaxPending(n int) Option {
	return func(c *config) error {
		if err := positive("max pending", n); err != nil {
			return err
		}
		c.maxPending = n
		return nil
	}
}

// WithMaxParallelDevices bounds the devices driven at once, overriding
// [DefaultMaxParallelDevices]. One device always receives one command at a
// time.
func WithMaxParallelDevices(n int) Option {
	return func(c *config) error {
		if err := positive("max parallel devices", n); err != nil {
			return err
		}
		c.maxParallelDevices = n
		return nil
	}
}

// WithMaxAttempts bounds the Dispatch calls for one command whose device
// returns retryable errors, overriding [DefaultMaxAttempts]. 1 turns retries
// off.
func WithMaxAttempts(n int) Option {
	return func(c *config) error {
		if err := positive("max attempts", n); err != nil {
			return err
		}
		c.maxAttempts = n
		return nil
	}
}

// WithRetryBackoff sets the first and the largest wait between two attempts
// of a command, overriding [DefaultRetryBackoff] and
// [DefaultMaxRetryBackoff]. The wait doubles from first up to max.
func WithRetryBackoff(first, max time.Duration) Option {
	return func(c *config) error {
		if err := positive("retry backoff", first); err != nil {
			return err
		}
		if err := positive("max retry backoff", max); err != nil {
			return err
		}
		c.retryBackoff, c.maxRetryBackoff = first, max
		return nil
	}
}

// WithSafetyMargin sets the lease freshness below which no device is driven
// and at which a device call in progress is cancelled, overriding
// [DefaultSafetyMargin]. It must be below the lease duration minus
// the renew interval, or the dispatcher waits for a renewal before every
// command.
func WithSafetyMargin(margin time.Duration) Option {
	return func(c *config) error {
		if err := positive("safety margin", margin); err != nil {
			return err
		}
		c.safetyMargin = margin
		return nil
	}
}

// WithCommandTimeout sets the time to live of a command that arrives without
// a deadline, overriding [DefaultCommandTimeout].
func WithCommandTimeout(timeout time.Duration) Option {
	return func(c *config) error {
		if err := positive("command timeout", timeout); err != nil {
			return err
		}
		c.commandTimeout = timeout
		return nil
	}
}

// WithDedupWindow sets how long command IDs are deduplicated, overriding
// [DefaultDedupWindow]. The rule: an ID is deduplicated exactly while its
// command's SubmittedAt is within the window of now, so a duplicate Submit
// or request returns the status of the command that holds the ID and is
// never dispatched. A command whose SubmittedAt is older than the window is
// refused, with [ErrOutsideDedupWindow] from Submit and a rejected outcome
// for a request from the requests topic, because the dispatcher no longer
// holds every ID that old and cannot prove it is not a duplicate. A retry
// carries its original SubmittedAt, so a retry of a command whose ID left
// the window is itself outside it and is never dispatched twice. A settled
// command's ID is held for the window plus [DedupClockSkew], and only as a
// 64-bit hash with the offsets of its records: memory grows with the
// commands of one window, not with the log.
func WithDedupWindow(window time.Duration) Option {
	return func(c *config) error {
		if err := positive("dedup window", window); err != nil {
			return err
		}
		c.dedupWindow = window
		return nil
	}
}

// WithCheckpointInterval sets how many records of the role the dispatcher
// commits between two checkpoints of its state, and how far, in offsets of
// the shared log partition, the partition may move past its last checkpoint
// before an idle dispatcher writes another, overriding
// [DefaultCheckpointInterval]. A recovery reads about this many records
// before it finds the newest checkpoint, plus the records after it.
func WithCheckpointInterval(records int) Option {
	return func(c *config) error {
		if err := positive("checkpoint interval", records); err != nil {
			return err
		}
		c.checkpointInterval = records
		return nil
	}
}

// WithStandby gives the dispatcher the [Standby] of its member: its
// recovery builds on the Standby's search for the newest checkpoint and
// reads only the offsets after it, and takes the IDs of the base checkpoint
// that the Standby read ahead, when they are those of the base it needs,
// rather than reading them after the lease was taken. The Standby must be
// of the dispatcher's role and log partition.
func WithStandby(s *Standby) Option {
	return func(c *config) error {
		if s == nil {
			return errors.New("dispatch: standby is nil")
		}
		c.standby = s
		return nil
	}
}

// WithClock sets the clock that the dedup window is measured on, overriding
// the system clock. Tests pass a [coordination.ManualClock].
func WithClock(clock coordination.Clock) Option {
	return func(c *config) error {
		if clock == nil {
			return errors.New("dispatch: clock is nil")
		}
		c.clock = clock
		return nil
	}
}

// WithTracerProvider sets the source of the dispatcher's tracer, overriding
// the no-op provider. Every command gets one trace across intake, commit and
// dispatch; the trace context travels in the headers of its log records.
func WithTracerProvider(provider trace.TracerProvider) Option {
	return func(c *config) error {
		if provider == nil {
			return errors.New("dispatch: tracer provider is nil")
		}
		c.tracerProvider = provider
		return nil
	}
}

// WithMeterProvider sets the source of the dispatcher's meter, overriding the
// no-op provider. See the package doc for the instruments.
func WithMeterProvider(provider metric.MeterProvider) Option {
	return func(c *config) error {
		if provider == nil {
			return errors.New("dispatch: meter provider is nil")
		}
		c.meterProvider = provider
		return nil
	}
}

// WithLogger sets the logger of the dispatcher, overriding one that discards
// everything.
func WithLogger(logger *slog.Logger) Option {
	return func(c *config) error {
		if logger == nil {
			return errors.New("dispatch: logger is nil")
		}
		c.logger = logger
		return nil
	}
}
