package dispatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// txnWriter is a transactionWriter that keeps every committed transaction in
// memory, gives its records consecutive offsets, and takes each transaction
// took long; fail, when set, answers a transaction with an error instead.
type txnWriter struct {
	t    *testing.T
	took time.Duration

	mu    sync.Mutex
	fail  func(n int) error
	n     int
	next  int64
	txns  []writtenTxn
	token coordination.FencingToken
}

// writtenTxn is one committed transaction of a txnWriter.
type writtenTxn struct {
	start, end time.Time
	entries    []Entry
}

func (w *txnWriter) Write(ctx context.Context, build func(coordination.FencingToken) ([]coordination.GuardedRecord, error)) (coordination.FencingToken, error) {
	start := time.Now()
	w.mu.Lock()
	n := w.n
	w.n++
	fail := w.fail
	token := w.token
	w.mu.Unlock()
	records, err := build(token)
	if err != nil {
		return coordination.FencingToken{}, err
	}
	select {
	case <-time.After(w.took):
	case <-ctx.Done():
		return coordination.FencingToken{}, ctx.Err()
	}
	if fail != nil {
		if err := fail(n); err != nil {
			return coordination.FencingToken{}, err
		}
	}
	txn := writtenTxn{start: start, end: time.Now()}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range records {
		e, err := DecodeEntry(records[i].Key, records[i].Value)
		if err != nil {
			w.t.Errorf("transaction %d, record %d: %v", n, i, err)
		}
		txn.entries = append(txn.entries, e)
		records[i].Offset = w.next
		w.next++
	}
	w.txns = append(w.txns, txn)
	return token, nil
}

func (w *txnWriter) written() []writtenTxn {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.txns)
}

// committerRig runs a committer over a txnWriter and keeps the batches it
// hands on.
type committerRig struct {
	c      *committer
	w      *txnWriter
	mu     sync.Mutex
	got    []committedBatch
	halted error
	done   chan struct{}
}

func newCommitterRig(t *testing.T, bounds commitBounds, took time.Duration, tune func(*committerConfig)) *committerRig {
	t.Helper()
	tel, err := newTelemetry(tracenoop.NewTracerProvider(), metricnoop.NewMeterProvider(), "controller", "node-1")
	if err != nil {
		t.Fatal(err)
	}
	token, err := coordination.NewFencingToken(7, 3)
	if err != nil {
		t.Fatal(err)
	}
	r := &committerRig{w: &txnWriter{t: t, took: took, token: token}, done: make(chan struct{})}
	cfg := committerConfig{
		writer: r.w, bounds: bounds, role: "controller", member: "node-1",
		logTP:        coordination.TopicPartition{Topic: DefaultLogTopic, Partition: 0},
		requestTP:    coordination.TopicPartition{Topic: DefaultRequestsTopic, Partition: 0},
		retryBackoff: 100 * time.Millisecond,
		logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		tel:          tel,
		halt: func(err error) {
			r.mu.Lock()
			r.halted = err
			r.mu.Unlock()
			r.c.stop()
		},
		committed: func(b committedBatch) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.got = append(r.got, b)
		},
	}
	if tune != nil {
		tune(&cfg)
	}
	r.c = newCommitter(cfg)
	return r
}

func (r *committerRig) start(ctx context.Context) {
	go func() {
		defer close(r.done)
		r.c.run(ctx)
	}()
}

func (r *committerRig) batches() []committedBatch {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// outcomeOf returns the encoded Outcome record of the command id.
func outcomeOf(t *testing.T, id string) *item {
	t.Helper()
	it, err := encodeItem("controller", "node-1", Entry{Kind: EntryOutcome, Outcome: &Outcome{CommandID: id, Status: StatusSucceeded, Attempt: FirstAttempt}}, trace.SpanContext{})
	if err != nil {
		t.Fatal(err)
	}
	return it
}

// issuedOf returns the encoded Issued record of the command id, counted
// towards the queue bound as the dispatcher counts it.
func issuedOf(t *testing.T, id string) *item {
	t.Helper()
	now := time.UnixMilli(1_700_000_000_000)
	it, err := encodeItem("controller", "node-1", Entry{Kind: EntryIssued, Issued: &Issued{Command: Command{
		ID: id, Role: "controller", Device: "valve", Action: "open", SubmittedAt: now, Deadline: now.Add(time.Hour),
	}}}, trace.SpanContext{})
	if err != nil {
		t.Fatal(err)
	}
	it.counted = true
	return it
}

// idsOf returns the command IDs of a transaction's records, "intake" for an
// intake record.
func idsOf(entries []Entry) []string {
	var ids []string
	for _, e := range entries {
		switch {
		case e.Issued != nil:
			ids = append(ids, e.Issued.Command.ID)
		case e.Outcome != nil:
			ids = append(ids, "out:"+e.Outcome.CommandID)
		case e.Intake != nil:
			ids = append(ids, fmt.Sprintf("intake:%d-%d", e.Intake.FromOffset, e.Intake.NextOffset))
		case e.Checkpoint != nil:
			ids = append(ids, "checkpoint")
		}
	}
	return ids
}

var wideBounds = commitBounds{maxRecords: DefaultMaxBatchRecords, maxBytes: DefaultMaxBatchBytes, maxQueued: DefaultMaxQueued}

func TestCommitterGroupsWhatQueuesDuringACommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newCommitterRig(t, wideBounds, 10*time.Millisecond, nil)
		r.start(t.Context())
		r.c.enqueue(issuedOf(t, "a"))
		synctest.Wait() // the first transaction is in flight
		r.c.enqueue(issuedOf(t, "b"))
		r.c.enqueue(outcomeOf(t, "x"), issuedOf(t, "c"))
		time.Sleep(time.Second)

		txns := r.w.written()
		var got [][]string
		for _, txn := range txns {
			got = append(got, idsOf(txn.entries))
		}
		want := [][]string{{"a"}, {"b", "out:x", "c"}}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("transactions %v, want %v", got, want)
		}
		batches := r.batches()
		if len(batches) != 2 {
			t.Fatalf("%d batches handed on, want 2", len(batches))
		}
		// The callback gets every item in queue order, with the token and
		// the offset the transaction wrote it at.
		second := batches[1]
		if len(second.items) != 3 || second.items[1].commandID != "x" || !slices.Equal(second.offsets, []int64{1, 2, 3}) {
			t.Errorf("second batch: %d items, offsets %v", len(second.items), second.offsets)
		}
		if second.token != r.w.token {
			t.Errorf("token %s, want %s", second.token, r.w.token)
		}
		for _, txn := range txns {
			for _, e := range txn.entries {
				if e.Token != r.w.token || e.Member != "node-1" {
					t.Errorf("record written under %s by %q, want %s by node-1", e.Token, e.Member, r.w.token)
				}
			}
		}
		r.c.stop()
		<-r.done
	})
}

func TestCommitterBatchBounds(t *testing.T) {
	one := issuedOf(t, "size")
	size := len(one.key) + len(one.value)
	cases := []struct {
		name   string
		bounds commitBounds
		want   []int // items per transaction
	}{
		{"records", commitBounds{maxRecords: 2, maxBytes: DefaultMaxBatchBytes, maxQueued: DefaultMaxQueued}, []int{2, 2, 1}},
		{"bytes", commitBounds{maxRecords: DefaultMaxBatchRecords, maxBytes: 3 * size, maxQueued: DefaultMaxQueued}, []int{3, 2}},
		{"a record above the byte bound goes alone", commitBounds{maxRecords: DefaultMaxBatchRecords, maxBytes: 1, maxQueued: DefaultMaxQueued}, []int{1, 1, 1, 1, 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newCommitterRig(t, tc.bounds, 10*time.Millisecond, nil)
				for i := range 5 {
					r.c.enqueue(issuedOf(t, fmt.Sprintf("c%d", i)))
				}
				r.start(t.Context())
				time.Sleep(time.Second)
				var got []int
				var order []string
				for _, txn := range r.w.written() {
					got = append(got, len(txn.entries))
					order = append(order, idsOf(txn.entries)...)
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("records per transaction %v, want %v", got, tc.want)
				}
				if want := []string{"c0", "c1", "c2", "c3", "c4"}; !slices.Equal(order, want) {
					t.Errorf("log order %v, want %v", order, want)
				}
				r.c.stop()
				<-r.done
			})
		})
	}
}

func TestCommitterWritesTheIntakePosition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newCommitterRig(t, wideBounds, 10*time.Millisecond, nil)
		r.c.setIntake(40)
		mark := func(next int64) *item { return &item{intake: true, intakeNext: next, counted: true} }
		issued := issuedOf(t, "a")
		issued.intake, issued.intakeNext = true, 42
		// A bare mark, a request's Issued record, another bare mark: one
		// intake record, from the committed position to the last mark's.
		r.c.enqueue(mark(41), issued, mark(43))
		r.start(t.Context())
		time.Sleep(time.Second)
		r.c.enqueue(mark(44))
		time.Sleep(time.Second)

		var got [][]string
		for _, txn := range r.w.written() {
			got = append(got, idsOf(txn.entries))
		}
		want := [][]string{{"a", "intake:40-43"}, {"intake:43-44"}}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("transactions %v, want %v", got, want)
		}
		if p := r.c.intakePosition(); p != 44 {
			t.Errorf("committed intake position %d, want 44", p)
		}
		b := r.batches()
		if len(b) != 2 || !b[0].intake || b[0].intakeNext != 43 || !slices.Equal(b[0].offsets, []int64{-1, 0, -1}) {
			t.Errorf("first batch: %+v", b[0])
		}
		r.c.stop()
		<-r.done
	})
}

func TestCommitterRetriesUntilTheLeadershipEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newCommitterRig(t, wideBounds, 10*time.Millisecond, nil)
		r.w.fail = func(n int) error {
			switch n {
			case 0:
				return errors.New("the coordinator is loading")
			case 2:
				return fmt.Errorf("write: %w", coordination.ErrFenced)
			}
			return nil
		}
		r.start(t.Context())
		start := time.Now()
		r.c.enqueue(issuedOf(t, "a"))
		time.Sleep(time.Second)
		txns := r.w.written()
		// The first try failed and the retry waited the backoff.
		if len(txns) != 1 || txns[0].start.Sub(start) != 10*time.Millisecond+r.c.cfg.retryBackoff {
			t.Fatalf("transactions %+v, want one retry after the backoff", txns)
		}
		r.c.enqueue(issuedOf(t, "b"))
		time.Sleep(time.Second)
		// A fenced write is not tried again and hands nothing on: its
		// records are in doubt, for the next leader to read.
		if n := len(r.w.written()); n != 1 {
			t.Errorf("%d transactions committed after the fence, want 1", n)
		}
		if b := r.batches(); len(b) != 1 || b[0].items[0].commandID != "a" {
			t.Errorf("batches handed on: %d", len(b))
		}
		r.w.mu.Lock()
		tries := r.w.n
		r.w.mu.Unlock()
		if tries != 3 {
			t.Errorf("%d writes, want 3 (a failed, a, b fenced)", tries)
		}
		r.c.stop()
		<-r.done
	})
}

func TestCommitterQueueBoundAndStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bounds := commitBounds{maxRecords: DefaultMaxBatchRecords, maxBytes: DefaultMaxBatchBytes, maxQueued: 2}
		r := newCommitterRig(t, bounds, 10*time.Millisecond, nil)
		// An uncounted record (an outcome) does not count towards the
		// bound.
		r.c.enqueue(issuedOf(t, "a"), outcomeOf(t, "x"))
		if _, full := r.c.full(); full {
			t.Fatal("full with one counted record of two allowed")
		}
		r.c.enqueue(issuedOf(t, "b"))
		room, full := r.c.full()
		if !full {
			t.Fatal("not full with two counted records of two allowed")
		}
		r.start(t.Context())
		synctest.Wait()
		select {
		case <-room:
		default:
			t.Fatal("taking the batch did not make room")
		}
		// A full queue starts its transaction without a gap or a linger.
		r.c.enqueue(issuedOf(t, "c"), issuedOf(t, "d"))
		room, full = r.c.full()
		if !full {
			t.Fatal("not full again")
		}
		r.c.stop()
		select {
		case <-room:
		default:
			t.Fatal("stop did not release the waiters for room")
		}
		if _, full := r.c.full(); full {
			t.Error("full after stop")
		}
		<-r.done
		r.c.enqueue(issuedOf(t, "e"))
		time.Sleep(time.Second)
		for _, txn := range r.w.written() {
			if ids := idsOf(txn.entries); !slices.Equal(ids, []string{"a", "out:x", "b"}) {
				t.Errorf("transaction %v; the records queued at the stop are dropped", ids)
			}
		}
		if n := len(r.batches()); n != 0 {
			t.Errorf("%d batches handed on after the stop, want none", n)
		}
	})
}

func TestCommitterWritesCheckpointsFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		due := true
		part := func() *item {
			it, err := encodeItem("controller", "node-1", Entry{Kind: EntryCheckpoint, Checkpoint: &CheckpointPart{Sequence: 1, Part: 0, Parts: 1, Data: []byte{1}}}, trace.SpanContext{})
			if err != nil {
				t.Fatal(err)
			}
			it.checkpoint = true
			return it
		}
		setDue := func() {
			mu.Lock()
			due = true
			mu.Unlock()
		}
		r := newCommitterRig(t, wideBounds, 10*time.Millisecond, func(c *committerConfig) {
			c.due = func() bool {
				mu.Lock()
				defer mu.Unlock()
				return due
			}
			c.lead = func() []*item {
				mu.Lock()
				defer mu.Unlock()
				if !due {
					return nil
				}
				due = false
				return []*item{part()}
			}
		})
		r.start(t.Context())
		time.Sleep(time.Second)
		r.c.enqueue(issuedOf(t, "a"))
		time.Sleep(time.Second)
		// Due when a record queues: it leads that record's transaction.
		setDue()
		r.c.enqueue(issuedOf(t, "b"))
		time.Sleep(time.Second)
		// Due while idle after a commit: it waits up to a transaction's
		// time (10ms here) for a record to lead.
		setDue()
		r.c.notify()
		time.Sleep(5 * time.Millisecond)
		r.c.enqueue(issuedOf(t, "c"))
		time.Sleep(time.Second)
		setDue()
		r.c.notify()
		woken := time.Now()
		time.Sleep(time.Second)
		// Once intake stopped, nothing is coming for it to lead: it goes at
		// once, as a drain's closing checkpoint must.
		r.c.hurry()
		setDue()
		r.c.notify()
		hurried := time.Now()
		time.Sleep(time.Second)
		txns := r.w.written()
		var got [][]string
		for _, txn := range txns {
			got = append(got, idsOf(txn.entries))
		}
		// Due while idle before any commit: written at once, alone; then
		// the batch; then two that lead the next batch; then, woken while
		// idle with nothing queueing, alone again.
		want := [][]string{{"checkpoint"}, {"a"}, {"checkpoint", "b"}, {"checkpoint", "c"}, {"checkpoint"}, {"checkpoint"}}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("transactions %v, want %v", got, want)
		}
		if waited := txns[4].start.Sub(woken); waited != 10*time.Millisecond {
			t.Errorf("the lone checkpoint started %v after it was due, want a transaction's time, 10ms", waited)
		}
		if waited := txns[5].start.Sub(hurried); waited != 0 {
			t.Errorf("the checkpoint due after intake stopped started %v after it was due, want at once", waited)
		}
		// The batch handed on holds the checkpoint first too, so that its
		// effects apply in log order.
		if batches := r.batches(); len(batches) != 6 || len(batches[2].items) != 2 || !batches[2].items[0].checkpoint ||
			batches[2].offsets[0] >= batches[2].offsets[1] {
			t.Errorf("the third batch handed on is not the checkpoint, then b: %+v", batches)
		}
		r.c.stop()
		<-r.done
	})
}

func TestCommitterLingerAndGap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bounds := wideBounds
		bounds.linger, bounds.gap = 3*time.Millisecond, 5*time.Millisecond
		r := newCommitterRig(t, bounds, 10*time.Millisecond, nil)
		r.start(t.Context())
		start := time.Now()
		r.c.enqueue(issuedOf(t, "a"))
		time.Sleep(time.Millisecond)
		r.c.enqueue(issuedOf(t, "b"))
		time.Sleep(100 * time.Millisecond)
		r.c.enqueue(issuedOf(t, "c"))
		time.Sleep(time.Second)
		txns := r.w.written()
		if len(txns) != 2 {
			t.Fatalf("%d transactions, want 2", len(txns))
		}
		// a lingers 3ms and b joins it; c, long after the gap, lingers
		// alone.
		if got := txns[0].start.Sub(start); got != bounds.linger || len(txns[0].entries) != 2 {
			t.Errorf("first transaction at %v with %d records, want at %v with 2", got, len(txns[0].entries), bounds.linger)
		}
		if got := txns[1].start.Sub(start); got != 101*time.Millisecond+bounds.linger {
			t.Errorf("second transaction at %v, want %v", got, 101*time.Millisecond+bounds.linger)
		}
		r.c.stop()
		<-r.done
	})
}

func TestCommitterOutcomesRideWithTheNextDueTransaction(t *testing.T) {
	bounds := wideBounds
	bounds.linger, bounds.gap, bounds.ride = 3*time.Millisecond, 5*time.Millisecond, 20*time.Millisecond
	t.Run("an Issued record within the outcome linger", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newCommitterRig(t, bounds, 10*time.Millisecond, nil)
			r.start(t.Context())
			start := time.Now()
			x := outcomeOf(t, "x")
			x.rides = true
			r.c.enqueue(x)
			time.Sleep(8 * time.Millisecond)
			r.c.enqueue(issuedOf(t, "a"))
			time.Sleep(time.Second)
			txns := r.w.written()
			if len(txns) != 1 || !slices.Equal(idsOf(txns[0].entries), []string{"out:x", "a"}) {
				t.Fatalf("transactions %v, want the outcome and the Issued record in one, in queue order", txns)
			}
			// The linger counts from the Issued record, which made the
			// transaction due, not from the outcome before it.
			if got, want := txns[0].start.Sub(start), 8*time.Millisecond+bounds.linger; got != want {
				t.Errorf("transaction at %v, want %v", got, want)
			}
			r.c.stop()
			<-r.done
		})
	})
	t.Run("no Issued record", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newCommitterRig(t, bounds, 10*time.Millisecond, nil)
			r.start(t.Context())
			start := time.Now()
			for _, id := range []string{"x", "y"} {
				it := outcomeOf(t, id)
				it.rides = true
				r.c.enqueue(it)
				time.Sleep(time.Millisecond)
			}
			time.Sleep(time.Second)
			txns := r.w.written()
			if len(txns) != 1 || txns[0].start.Sub(start) != bounds.ride || len(txns[0].entries) != 2 {
				t.Fatalf("transactions %+v, want both outcomes in one at %v", txns, bounds.ride)
			}
			r.c.stop()
			<-r.done
		})
	})
	t.Run("commits faster than the outcome linger", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			const took = 4 * time.Millisecond
			r := newCommitterRig(t, bounds, took, nil)
			r.start(t.Context())
			r.c.enqueue(issuedOf(t, "a"))
			time.Sleep(50 * time.Millisecond)
			queued := time.Now()
			x := outcomeOf(t, "x")
			x.rides = true
			r.c.enqueue(x)
			time.Sleep(time.Second)
			txns := r.w.written()
			// The outcome waits as long as a transaction takes, not the
			// whole outcome linger: a transaction of its own costs the
			// next commands no more than that.
			if len(txns) != 2 || txns[1].start.Sub(queued) != took {
				t.Fatalf("transactions %+v, want the outcome %v after it queued", txns, took)
			}
			r.c.stop()
			<-r.done
		})
	})
	t.Run("a full batch of outcomes", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			full := bounds
			full.maxRecords = 2
			r := newCommitterRig(t, full, 10*time.Millisecond, nil)
			r.start(t.Context())
			start := time.Now()
			var items []*item
			for _, id := range []string{"x", "y", "z"} {
				it := outcomeOf(t, id)
				it.rides = true
				items = append(items, it)
			}
			// All three queue at once: queued one by one, the loop could
			// take x and y before z queued, and z would then wait the
			// outcome linger of its own, as it should.
			r.c.enqueue(items...)
			time.Sleep(time.Second)
			txns := r.w.written()
			// The first two fill a batch and go at once; z, left over, goes
			// the gap after their commit.
			if len(txns) != 2 || txns[0].start != start || txns[1].start.Sub(txns[0].end) != full.gap {
				t.Fatalf("transactions %+v, want a full batch at once and the rest after the gap", txns)
			}
			r.c.stop()
			<-r.done
		})
	})
	t.Run("after intake stopped", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newCommitterRig(t, bounds, 10*time.Millisecond, nil)
			r.start(t.Context())
			start := time.Now()
			x := outcomeOf(t, "x")
			x.rides = true
			r.c.enqueue(x)
			time.Sleep(time.Millisecond)
			r.c.hurry()
			time.Sleep(time.Second)
			txns := r.w.written()
			if len(txns) != 1 || txns[0].start.Sub(start) != time.Millisecond {
				t.Fatalf("transactions %+v, want the outcome at once when hurried", txns)
			}
			r.c.stop()
			<-r.done
		})
	})
	t.Run("an outcome with an intake mark", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newCommitterRig(t, bounds, 10*time.Millisecond, nil)
			r.start(t.Context())
			start := time.Now()
			x := outcomeOf(t, "x")
			x.rides, x.intake, x.intakeNext = true, true, 1
			r.c.enqueue(x)
			time.Sleep(time.Second)
			txns := r.w.written()
			if len(txns) != 1 || txns[0].start.Sub(start) != bounds.linger {
				t.Fatalf("transactions %+v, want the rejection at intake after the commit linger alone", txns)
			}
			r.c.stop()
			<-r.done
		})
	})
	t.Run("outcome linger off", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			off := bounds
			off.ride = 0
			r := newCommitterRig(t, off, 10*time.Millisecond, nil)
			r.start(t.Context())
			start := time.Now()
			x := outcomeOf(t, "x")
			x.rides = true
			r.c.enqueue(x)
			time.Sleep(time.Second)
			txns := r.w.written()
			if len(txns) != 1 || txns[0].start.Sub(start) != off.linger {
				t.Fatalf("transactions %+v, want the outcome after the commit linger", txns)
			}
			r.c.stop()
			<-r.done
		})
	})
}

// TestCommitterOutcomesWaitForAnAnnouncedBatch: while a batch is announced,
// outcomes ride past the outcome linger, up to a transaction's time, and
// leave with the batch's first Issued record; an announcement that brings
// nothing holds them no longer than that, and without one they leave at
// the outcome linger.
func TestCommitterOutcomesWaitForAnAnnouncedBatch(t *testing.T) {
	bounds := wideBounds
	bounds.linger, bounds.gap, bounds.ride = 0, 0, 10*time.Millisecond
	const took = 30 * time.Millisecond // longer than the ride
	for _, tc := range []struct {
		name     string
		announce bool
		arrives  time.Duration // after the outcome, or 0 for never
		want     [][]string
		wantAt   time.Duration // the second transaction's start, after the outcome queued
	}{
		{"announced, arrives", true, 25 * time.Millisecond, [][]string{{"a"}, {"out:x", "b"}}, 25 * time.Millisecond},
		{"announced, never arrives", true, 0, [][]string{{"a"}, {"out:x"}}, took},
		{"not announced", false, 25 * time.Millisecond, [][]string{{"a"}, {"out:x"}, {"b"}}, bounds.ride},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := startedAfterOneCommit(t, bounds, took)
				if tc.announce {
					r.c.announce()
				}
				queued := time.Now()
				x := outcomeOf(t, "x")
				x.rides = true
				r.c.enqueue(x)
				if tc.arrives > 0 {
					time.Sleep(tc.arrives)
					r.c.enqueue(issuedOf(t, "b"))
				}
				if tc.announce && tc.arrives > 0 {
					r.c.arrived()
				}
				time.Sleep(time.Second)
				if tc.announce && tc.arrives == 0 {
					r.c.arrived()
				}
				txns := r.w.written()
				var got [][]string
				for _, txn := range txns {
					got = append(got, idsOf(txn.entries))
				}
				if !slices.EqualFunc(got, tc.want, slices.Equal[[]string]) {
					t.Fatalf("transactions %v, want %v", got, tc.want)
				}
				if at := txns[1].start.Sub(queued); at != tc.wantAt {
					t.Errorf("second transaction %v after the outcome queued, want %v", at, tc.wantAt)
				}
				r.c.stop()
				<-r.done
			})
		})
	}
}

// TestCommitterOutcomeBurstRidesUntilItEnds: outcomes that keep queueing
// ride until the outcome linger passes without another one, so the Issued
// records that follow a burst carry all of it; a burst that goes on leaves
// a transaction's time after its first outcome.
func TestCommitterOutcomeBurstRidesUntilItEnds(t *testing.T) {
	bounds := wideBounds
	bounds.linger, bounds.gap, bounds.ride = 0, 0, 10*time.Millisecond
	const (
		took  = 30 * time.Millisecond
		every = 4 * time.Millisecond
	)
	for _, tc := range []struct {
		name     string
		outcomes int
		issuedAt time.Duration // after the first outcome
		want     int           // transactions after the first
		wantAt   time.Duration // the second transaction's start, after the first outcome
	}{
		{"a burst, then commands", 6, 27 * time.Millisecond, 1, 27 * time.Millisecond},
		// Outcomes 0-28ms leave at 30ms, 32-60ms at 62ms, 64-76ms when that
		// commit ends, and the command on its own.
		{"a burst longer than a commit", 20, 100 * time.Millisecond, 4, took},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := startedAfterOneCommit(t, bounds, took)
				first := time.Now()
				go func() {
					for i := range tc.outcomes {
						x := outcomeOf(t, fmt.Sprint("x", i))
						x.rides = true
						r.c.enqueue(x)
						time.Sleep(every)
					}
				}()
				time.Sleep(tc.issuedAt)
				r.c.enqueue(issuedOf(t, "b"))
				time.Sleep(time.Second)
				txns := r.w.written()
				if got := len(txns) - 1; got != tc.want {
					t.Fatalf("%d transactions after the first, want %d", got, tc.want)
				}
				if at := txns[1].start.Sub(first); at != tc.wantAt {
					t.Errorf("second transaction %v after the first outcome, want %v", at, tc.wantAt)
				}
				if tc.want == 1 && len(txns[1].entries) != tc.outcomes+1 {
					t.Errorf("the commands' transaction carried %d records, want the %d outcomes and the command", len(txns[1].entries), tc.outcomes)
				}
				r.c.stop()
				<-r.done
			})
		})
	}
}

// startedAfterOneCommit returns a running committer rig that has committed
// one Issued record, "a", so the moving average of its commits is took. The
// caller is inside a synctest bubble.
func startedAfterOneCommit(t *testing.T, bounds commitBounds, took time.Duration) *committerRig {
	t.Helper()
	r := newCommitterRig(t, bounds, took, nil)
	r.start(t.Context())
	r.c.enqueue(issuedOf(t, "a"))
	time.Sleep(time.Second)
	return r
}
