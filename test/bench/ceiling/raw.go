package ceiling

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// DefaultPauses are the pauses after each commit that the ceiling sweeps.
// A transaction begun before its coordinator completed the one before is
// held by its partition leader; the raw producer settles each commit, as
// the transport does (settle.go), and a pause may still spare a question
// or two, as the dispatcher's own commit gap and linger do. The sweep steps
// by a millisecond near the dispatcher's wait after a commit (2 to 3 ms):
// a sweep of 0, 2, 5 and 10 ms alone once left the dispatcher above its
// ceiling at rounds of 100 (1.02, 1.00 to 1.06).
var DefaultPauses = []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond}

// ProducerOptions returns the franz-go options of the producer that a
// coordination.KafkaTransport opens for a role
// ((*coordination.KafkaTransport).ProducerOptions): the transport's defaults,
// the settings its rules require, the transactional id and, as the
// transaction timeout, the lease duration. Taking them from the transport
// keeps the raw producer from drifting when the transport's options change.
func ProducerOptions(brokers []string, transactionalID string, lease time.Duration) ([]kgo.Opt, error) {
	config, err := coordination.NewLeaseConfig(lease, lease/3, time.Second)
	if err != nil {
		return nil, err
	}
	transport, err := coordination.NewKafkaTransport(config, brokers...)
	if err != nil {
		return nil, err
	}
	defer transport.Close()
	return transport.ProducerOptions(transactionalID), nil
}

// CommandRecords is the encoded records that a dispatcher writes for one
// command: its Issued and its Outcome entry, with the headers the
// dispatcher and the leadership put on them (token, member, term).
type CommandRecords struct {
	// ID is the command's ID.
	ID         string
	Key, Value [2][]byte
	Headers    []kgo.RecordHeader
}

// EncodeCommands encodes the records of n commands with the real dispatch
// codec, for a ceiling that writes what the dispatcher writes without
// encoding inside its timed loop.
func EncodeCommands(role string, n int) ([]CommandRecords, error) {
	token, _ := coordination.NewFencingToken(1<<20, 3)
	term := coordination.TermHeaderOf(1)
	headers := []kgo.RecordHeader{
		{Key: dispatch.HeaderToken, Value: []byte(token.String())},
		{Key: dispatch.HeaderMember, Value: []byte("bench")},
		{Key: term.Key, Value: term.Value},
	}
	now := time.Now()
	out := make([]CommandRecords, n)
	for i := range out {
		cmd := BenchCommand(role, "raw", i, now)
		entries := [2]dispatch.Entry{
			{Kind: dispatch.EntryIssued, Issued: &dispatch.Issued{Command: cmd}},
			{Kind: dispatch.EntryOutcome, Outcome: &dispatch.Outcome{CommandID: cmd.ID, Status: dispatch.StatusSucceeded, Attempt: dispatch.FirstAttempt}},
		}
		for j, e := range entries {
			e.Role, e.Member, e.Token, e.At = role, "bench", token, now
			key, value, err := dispatch.EncodeEntry(e)
			if err != nil {
				return nil, fmt.Errorf("encode command %d: %w", i, err)
			}
			out[i].Key[j], out[i].Value[j] = key, value
		}
		out[i].ID = cmd.ID
		out[i].Headers = headers
	}
	return out, nil
}

// Bytes returns the bytes of the command's two records: keys, values and
// headers, as RecordBytes counts them.
func (c CommandRecords) Bytes() int64 {
	var n int64
	for j := range c.Key {
		n += int64(len(c.Key[j]) + len(c.Value[j]))
		for _, h := range c.Headers {
			n += int64(len(h.Key) + len(h.Value))
		}
	}
	return n
}

// RawProducer is the ceiling of the dispatcher's group commit: a
// transactional franz-go producer with the transport's options, writing
// pre-encoded command records to one partition, a batch of commands per
// transaction, one transaction after another.
type RawProducer struct {
	// Retries counts the CONCURRENT_TRANSACTIONS answers the producer met.
	Retries *ConcurrentTxns

	// keepSteps is set by KeepSteps; produce and end then hold the time of
	// each transaction's produce (its records sent and acknowledged) and of
	// its EndTxn, until TakeSteps.
	keepSteps    bool
	produce, end []time.Duration

	// settle, when set, settles each commit before the next transaction
	// begins (settle.go); its wait counts in the next transaction's time.
	settle *settler

	client    *kgo.Client
	topic     string
	partition int32
	commands  []CommandRecords
	next      int
}

// NewRawProducer creates the producer and mints its producer id, as a
// leader does once before its first write.
func NewRawProducer(ctx context.Context, brokers []string, topic, transactionalID string, lease time.Duration, commands []CommandRecords) (*RawProducer, error) {
	if len(commands) == 0 {
		return nil, errors.New("ceiling: a raw producer needs encoded commands")
	}
	retries := &ConcurrentTxns{}
	opts, err := ProducerOptions(brokers, transactionalID, lease)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(opts, kgo.WithLogger(retries))...)
	if err != nil {
		return nil, err
	}
	if _, _, err := cl.ProducerID(ctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("init producer id: %w", err)
	}
	return &RawProducer{Retries: retries, client: cl, topic: topic, commands: commands, settle: &settler{client: cl, id: transactionalID}}, nil
}

// Close closes the client.
func (p *RawProducer) Close() {
	p.client.Close()
	p.settle.wait()
}

// CommitSteps is the time of the two steps of a producer's transactions:
// Produce, from the begin to the acknowledgement of every record, and End,
// the EndTxn that commits.
type CommitSteps struct {
	Produce, End Summary
}

// KeepSteps makes the producer keep the time of both steps of each
// transaction it commits from now on, for TakeSteps; a producer whose
// steps nobody takes keeps none.
func (p *RawProducer) KeepSteps() { p.keepSteps = true }

// TakeSteps returns the steps of the transactions committed since
// KeepSteps, one sample a transaction, and stops keeping them.
func (p *RawProducer) TakeSteps() CommitSteps {
	s := CommitSteps{Produce: Summarize(p.produce, 0), End: Summarize(p.end, 0)}
	p.keepSteps, p.produce, p.end = false, nil, nil
	return s
}

// Run commits transactions of batch commands for duration, pausing after
// each commit, and returns one latency per command: from the start of its
// transaction to the return of the commit, the instant a dispatcher could
// drive a device.
func (p *RawProducer) Run(ctx context.Context, batch int, pause, duration time.Duration) (Summary, error) {
	if batch < 1 {
		return Summary{}, errors.New("ceiling: batch below 1")
	}
	var samples []time.Duration
	start := time.Now()
	for time.Since(start) < duration {
		took, err := p.commit(ctx, batch)
		if err != nil {
			return Summary{}, err
		}
		for range batch {
			samples = append(samples, took)
		}
		if pause > 0 {
			select {
			case <-time.After(pause):
			case <-ctx.Done():
				return Summary{}, ctx.Err()
			}
		}
	}
	return Summarize(samples, time.Since(start)), nil
}

// RunSeen is Run, but each latency ends when w, a read_committed reader of
// the producer's partition, has read the transaction's last Outcome record:
// the instant any reader of the log learns that the transaction committed,
// the same end as the dispatcher's "to outcome committed" latency. The
// next transaction starts after that. Each command's Outcome record must
// be written once in the run, so the producer needs more encoded commands
// than the run writes; it fails when they would repeat.
func (p *RawProducer) RunSeen(ctx context.Context, w *OutcomeWatcher, batch int, pause, duration time.Duration) (Summary, error) {
	if batch < 1 {
		return Summary{}, errors.New("ceiling: batch below 1")
	}
	var samples []time.Duration
	start := time.Now()
	for time.Since(start) < duration {
		if p.next+batch > len(p.commands) {
			return Summary{}, fmt.Errorf("ceiling: %d encoded commands are too few for the run; their outcomes would repeat", len(p.commands))
		}
		last := p.commands[p.next+batch-1].ID
		began := time.Now()
		if _, err := p.commit(ctx, batch); err != nil {
			return Summary{}, err
		}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		seen, err := w.Wait(wctx, last)
		cancel()
		if err != nil {
			return Summary{}, err
		}
		for range batch {
			samples = append(samples, seen.Sub(began))
		}
		if pause > 0 {
			select {
			case <-time.After(pause):
			case <-ctx.Done():
				return Summary{}, ctx.Err()
			}
		}
	}
	return Summarize(samples, time.Since(start)), nil
}

// commit writes and commits one transaction of batch commands, as the
// transport's WriteGuarded does: begin, produce and wait for every result,
// commit, read the token after the commit.
func (p *RawProducer) commit(ctx context.Context, batch int) (time.Duration, error) {
	records := make([]*kgo.Record, 0, 2*batch)
	for range batch {
		c := &p.commands[p.next%len(p.commands)]
		p.next++
		records = append(records, p.record(c, 0), p.record(c, 1))
	}
	return p.transact(ctx, records)
}

// record returns record j of command c, its Issued (0) or its Outcome (1),
// for the producer's partition.
func (p *RawProducer) record(c *CommandRecords, j int) *kgo.Record {
	return &kgo.Record{Topic: p.topic, Partition: p.partition, Key: c.Key[j], Value: c.Value[j], Headers: c.Headers}
}

// transact writes and commits one transaction of records, as the
// transport's WriteGuarded does, and returns its time.
func (p *RawProducer) transact(ctx context.Context, records []*kgo.Record) (time.Duration, error) {
	began := time.Now()
	p.settle.wait()
	if err := p.client.BeginTransaction(); err != nil {
		return 0, fmt.Errorf("begin transaction: %w", err)
	}
	if err := p.client.ProduceSync(ctx, records...).FirstErr(); err != nil {
		_ = p.client.EndTransaction(context.WithoutCancel(ctx), kgo.TryAbort)
		return 0, fmt.Errorf("produce: %w", err)
	}
	produced := time.Now()
	if err := p.client.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	p.settle.start()
	if p.keepSteps {
		p.produce = append(p.produce, produced.Sub(began))
		p.end = append(p.end, time.Since(produced))
	}
	if _, _, err := p.client.ProducerID(ctx); err != nil {
		return 0, fmt.Errorf("producer id after the commit: %w", err)
	}
	return time.Since(began), nil
}
