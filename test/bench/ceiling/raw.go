package ceiling

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/twmb/franz-go/pkg/kgo"
)

// pending is one command waiting for the raw side's next transaction.
type pending struct {
	records []*kgo.Record
	at      time.Time
	done    chan time.Time
}

// runRaw is the ceiling: a transactional franz-go producer that commits the
// records of every command that queued while the transaction before was in
// flight, up to Batch records, one transaction at a time.
func runRaw(ctx context.Context, cfg Config) (Side, error) {
	logTopic, _, drop, err := topicSet(ctx, cfg.Brokers, "bench-raw")
	if err != nil {
		return Side{}, err
	}
	defer drop()
	// The producer takes the options that the dispatcher's transport gives
	// the producer of a role, so the two sides cannot drift apart.
	lease, err := benchLease()
	if err != nil {
		return Side{}, err
	}
	transport, err := coordination.NewKafkaTransport(lease, cfg.Brokers...)
	if err != nil {
		return Side{}, err
	}
	defer transport.Close()
	client, err := kgo.NewClient(transport.ProducerOptions(logTopic)...)
	if err != nil {
		return Side{}, err
	}
	defer client.Close()

	queue := make(chan *pending, cfg.Submitters)
	var txns, records int
	var mu sync.Mutex // guards txns, records
	measuring := make(chan struct{})
	var commitErr error
	committerDone := make(chan struct{})
	cctx, stopCommitter := context.WithCancel(ctx)
	go func() {
		defer close(committerDone)
		for {
			var batch []*pending
			var first *pending
			select {
			case first = <-queue:
			case <-cctx.Done():
				return
			}
			batch = append(batch, first)
			n := len(first.records)
		fill:
			for n < cfg.Batch {
				select {
				case p := <-queue:
					batch = append(batch, p)
					n += len(p.records)
				default:
					break fill
				}
			}
			if err := commitRaw(cctx, client, batch); err != nil {
				commitErr = err
				stopCommitter()
				return
			}
			now := time.Now()
			select {
			case <-measuring:
				mu.Lock()
				txns++
				records += n
				mu.Unlock()
			default:
			}
			for _, p := range batch {
				p.done <- now
			}
		}
	}()

	submit := func(i int) (time.Duration, error) {
		recs, err := rawRecords(logTopic, i, cfg.Payload)
		if err != nil {
			return 0, err
		}
		p := &pending{records: recs, at: time.Now(), done: make(chan time.Time, 1)}
		select {
		case queue <- p:
		case <-cctx.Done():
			return 0, errors.Join(cctx.Err(), commitErr)
		}
		select {
		case at := <-p.done:
			return at.Sub(p.at), nil
		case <-cctx.Done():
			return 0, errors.Join(cctx.Err(), commitErr)
		}
	}
	latencies, elapsed, err := closedLoop(ctx, cfg, measuring, submit)
	stopCommitter()
	<-committerDone
	if err != nil {
		return Side{}, err
	}
	return summarize("raw-transactional", latencies, elapsed, txns, records), nil
}

// commitRaw writes batch in one transaction and commits it, or aborts on any
// produce error.
func commitRaw(ctx context.Context, client *kgo.Client, batch []*pending) error {
	if err := client.BeginTransaction(); err != nil {
		return err
	}
	var mu sync.Mutex
	var produceErr error
	for _, p := range batch {
		for _, r := range p.records {
			client.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					produceErr = errors.Join(produceErr, err)
					mu.Unlock()
				}
			})
		}
	}
	if err := client.Flush(ctx); err != nil {
		return err
	}
	end := kgo.TryCommit
	if produceErr != nil {
		end = kgo.TryAbort
	}
	if err := client.EndTransaction(ctx, end); err != nil {
		return err
	}
	return produceErr
}

// rawRecords encodes the Issued and Outcome entries of command i, as the
// dispatcher writes them.
func rawRecords(topic string, i, payload int) ([]*kgo.Record, error) {
	token, _ := coordination.NewFencingToken(0, 0)
	now := time.Now()
	cmd := benchCommand(i, payload, now)
	cmd.Role = benchRole
	entries := []dispatch.Entry{
		{Kind: dispatch.EntryIssued, Issued: &dispatch.Issued{Command: cmd}},
		{Kind: dispatch.EntryOutcome, Outcome: &dispatch.Outcome{CommandID: cmd.ID, Status: dispatch.StatusSucceeded, Attempt: dispatch.FirstAttempt}},
	}
	out := make([]*kgo.Record, 0, len(entries))
	for _, e := range entries {
		e.Role, e.Member, e.Token, e.At = benchRole, benchMember, token, now
		key, value, err := dispatch.EncodeEntry(e)
		if err != nil {
			return nil, fmt.Errorf("bench: encode: %w", err)
		}
		out = append(out, &kgo.Record{Topic: topic, Partition: 0, Key: key, Value: value})
	}
	return out, nil
}

const (
	benchRole   = "bench"
	benchMember = "bench"
	benchDevice = "noop"
)

// benchCommand is command i of a run.
func benchCommand(i, payload int, now time.Time) dispatch.Command {
	return dispatch.Command{
		ID: fmt.Sprintf("cmd-%08d", i), Device: benchDevice, Action: "noop",
		Payload: make([]byte, payload), SubmittedAt: now, Deadline: now.Add(time.Minute),
	}
}

// closedLoop runs Warmup and then Commands submits from Submitters
// goroutines, and returns the latencies of the measured ones and the span
// from the first measured submit to the last completion. It closes measuring
// when the measurement starts.
func closedLoop(ctx context.Context, cfg Config, measuring chan struct{}, submit func(i int) (time.Duration, error)) ([]time.Duration, time.Duration, error) {
	run := func(from, n int) ([]time.Duration, error) {
		var mu sync.Mutex
		latencies := make([]time.Duration, 0, n)
		next := from
		var firstErr error
		var wg sync.WaitGroup
		for range cfg.Submitters {
			wg.Go(func() {
				for {
					mu.Lock()
					if next >= from+n || firstErr != nil {
						mu.Unlock()
						return
					}
					i := next
					next++
					mu.Unlock()
					lat, err := submit(i)
					mu.Lock()
					if err != nil && firstErr == nil {
						firstErr = err
					}
					latencies = append(latencies, lat)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return latencies, firstErr
	}
	if _, err := run(0, cfg.Warmup); err != nil {
		return nil, 0, err
	}
	close(measuring)
	start := time.Now()
	latencies, err := run(cfg.Warmup, cfg.Commands)
	return latencies, time.Since(start), err
}
