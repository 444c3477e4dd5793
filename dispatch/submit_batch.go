package dispatch

import (
	"context"
	"runtime"
	"sync"

	"go.opentelemetry.io/otel/trace"
)

// SubmitResult is what [Dispatcher.SubmitBatch] reports for one of its
// commands: what [Dispatcher.Submit] would have returned for it alone.
type SubmitResult struct {
	Outcome Outcome
	Err     error
}

// SubmitBatch records cmds in the command log and waits for the outcome of
// each, as [Dispatcher.Submit] does for one command; result i is that of
// cmds[i]. Every rule of Submit holds for each command: the fields filled
// in, the errors of a command that is refused or not recorded, a repeated
// ID. A command refused does not hold back the others.
//
// What a batch adds is that the Issued records of its new commands queue
// together, in the order of cmds, so that they commit in as few
// transactions as the batch bounds allow ([WithMaxBatchRecords],
// [WithMaxBatchBytes]), without waiting out the commit linger, and reach
// each device in that order. Concurrent Submit calls queue one at a time,
// and a burst of them can straddle a transaction that began before the last
// one arrived. The bounds on pending and queued commands ([WithMaxPending],
// [WithMaxQueued]) hold for a batch as for single commands: a batch beyond
// them waits for room part way, and commits in several transactions.
//
// When the dispatcher halts, ctx ends, or intake stops, the commands still
// waiting get the error Submit would return; those already settled keep
// their outcomes.
func (d *Dispatcher) SubmitBatch(ctx context.Context, cmds []Command) []SubmitResult {
	results := make([]SubmitResult, len(cmds))
	spans := make([]trace.Span, len(cmds))
	for i, cmd := range cmds {
		_, spans[i] = d.tel.startSubmit(ctx, cmd)
	}
	defer func() {
		for i, span := range spans {
			if results[i].Err != nil {
				span.RecordError(results[i].Err)
			}
			span.End()
		}
	}()
	fail := func(err error, todo []int) []SubmitResult {
		for _, i := range todo {
			results[i].Err = err
		}
		return results
	}

	if err := d.gate.open(); err != nil {
		for i := range results {
			results[i].Err = err
		}
		return results
	}
	// Preparing a large batch takes milliseconds before its first record
	// queues: outcomes riding the queue meanwhile wait for it, rather than
	// leave in a transaction of their own that the batch would wait for.
	d.commits.announce()
	announced := true
	arrived := func() {
		if announced {
			announced = false
			d.commits.arrived()
		}
	}
	defer arrived()
	todo := make([]int, 0, len(cmds))
	batch := make([]Command, len(cmds))
	now := d.now()
	for i, cmd := range cmds {
		batch[i], results[i].Err = d.prepare(ctx, cmd, now)
		if results[i].Err == nil {
			todo = append(todo, i)
		}
	}
	if err := d.awaitClosed(ctx, d.ready); err != nil {
		return fail(err, todo)
	}

	accepted := make([]*command, len(cmds))
	err := d.guard("SubmitBatch", func() error {
		d.acceptBatch(ctx, batch, spans, todo, accepted, results)
		return nil
	})
	if err != nil {
		return fail(err, todo)
	}
	arrived()
	for _, i := range todo {
		if accepted[i] == nil {
			continue
		}
		results[i].Outcome, results[i].Err = d.await(ctx, accepted[i])
	}
	return results
}

// acceptBatch accepts the commands of batch that todo names, as accept does
// each: it encodes their Issued records first, and then registers and
// queues every one it can under one hold of d.mu. A command whose ID a
// compact ID may hold goes through accept on its own afterwards, since
// telling it apart reads the log without d.mu. It sets accepted[i] or
// results[i].Err of every i in todo.
func (d *Dispatcher) acceptBatch(ctx context.Context, batch []Command, spans []trace.Span, todo []int, accepted []*command, results []SubmitResult) {
	items := make([]encodedIssued, len(batch))
	admitted := make([]int, 0, len(todo))
	for _, i := range todo {
		// A device's validator runs here, before the hold below: it is not
		// the dispatcher's code, and may take its time.
		if err := d.admit(batch[i]); err != nil {
			results[i].Err = err
			continue
		}
		admitted = append(admitted, i)
	}

	// The commit loop waits until the whole batch is queued, or until a
	// command must wait for room, which only a commit makes: a transaction
	// of outcomes alone, begun while the batch is encoded, would make the
	// batch wait for its commit. The hold ends by defer, so that a panic
	// leaves the commit loop free.
	held := true
	d.commits.hold()
	defer func() {
		if held {
			d.commits.release(false)
		}
	}()
	d.encodeIssued(batch, spans, admitted, items)

	var alone []int
	func() {
		// By defer, so that a panic leaves d.mu free for the halt.
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, i := range admitted {
			if held && d.mustWaitLocked() {
				d.commits.release(false)
				held = false
			}
			c, hit, err := d.acceptLocked(ctx, batch[i], spans[i].SpanContext(), nil, -1, items[i].issued, items[i].err)
			switch {
			case err != nil:
				results[i].Err = err
			case hit != nil:
				alone = append(alone, i)
			default:
				accepted[i] = c
			}
		}
	}()
	if held {
		// The whole batch is queued: it need not linger for more.
		d.commits.release(true)
		held = false
	}

	for _, i := range alone {
		accepted[i], results[i].Err = d.accept(ctx, batch[i], spans[i].SpanContext(), nil)
	}
}

// mustWaitLocked reports whether a new command would wait for room: in the
// commit queue or among the pending commands. The caller holds d.mu, under
// which neither fills but by the caller's own hand.
func (d *Dispatcher) mustWaitLocked() bool {
	if _, full := d.commits.full(); full || d.loadingWindow() {
		return true
	}
	return d.pending >= d.cfg.maxPending && !d.halted
}

// encodedIssued is the Issued record of a command of a batch, or why it
// could not be encoded.
type encodedIssued struct {
	issued *item
	err    error
}

// parallelEncodeMin is the fewest Issued records that one goroutine of
// encodeIssued takes on: below it, starting a goroutine costs more than
// it spares.
const parallelEncodeMin = 256

// encodeIssued encodes the Issued record of every command of batch that
// admitted names into items. The records are independent of each other, and
// each command of a batch waits for all of them before its transaction can
// start (a thousand take a few milliseconds), so a large batch is split
// over up to GOMAXPROCS goroutines, each with parallelEncodeMin records or
// more. A panic in one of them is raised again on the caller's goroutine,
// where the dispatcher's guard catches it, once all have returned.
func (d *Dispatcher) encodeIssued(batch []Command, spans []trace.Span, admitted []int, items []encodedIssued) {
	encode := func(part []int) {
		for _, i := range part {
			issued, err := d.newItem(Entry{Kind: EntryIssued, Issued: &Issued{Command: batch[i]}}, spans[i].SpanContext())
			items[i] = encodedIssued{issued, err}
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(admitted)/parallelEncodeMin)
	if workers <= 1 {
		encode(admitted)
		return
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		fault any // the first panic's value; never nil for a panic
	)
	size := (len(admitted) + workers - 1) / workers
	for from := 0; from < len(admitted); from += size {
		part := admitted[from:min(from+size, len(admitted))]
		wg.Go(func() {
			defer func() {
				if v := recover(); v != nil {
					mu.Lock()
					if fault == nil {
						fault = v
					}
					mu.Unlock()
				}
			}()
			encode(part)
		})
	}
	wg.Wait()
	if fault != nil {
		panic(fault)
	}
}
