package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"go.opentelemetry.io/otel/trace"
)

// item is one record that waits for a transaction of the command log, or a
// bare intake mark for a request that needs no record of its own.
type item struct {
	// key and value are encoded under a stand-in token; the transaction
	// writes its own token into value (see stampToken).
	key, value []byte
	headers    []coordination.Header

	// counted reports whether the item counts towards the queue bound.
	counted bool

	// rides reports a record that makes no transaction due by itself: an
	// outcome, which nothing waits for before a dispatch. It rides with
	// the next transaction that is due anyway, and waits at most the
	// outcome linger for one. An item with an intake mark never rides.
	rides bool

	// intake reports that the item covers the request before intakeNext.
	intake     bool
	intakeNext int64

	// committed applies the record's effect, under the dispatcher's lock,
	// once the transaction committed under token, at offset in the log
	// partition (-1 when the writer cannot tell).
	committed func(token coordination.FencingToken, offset int64)

	// checkpoint reports a checkpoint part, which does not count towards
	// the next checkpoint.
	checkpoint bool

	// span ends when the record commits.
	span trace.Span

	// kind, commandID and outcome describe the record to the
	// WithOnCommitted callback; outcome is set for an Outcome record alone.
	kind      EntryKind
	commandID string
	outcome   *Outcome
}

// encodeItem encodes e as a record of role written by member, under a
// stand-in token, with the trace context of span in its headers.
func encodeItem(role, member string, e Entry, span trace.SpanContext) (*item, error) {
	e.Role = role
	e.Member = member
	e.Token = standInToken()
	if e.At.IsZero() {
		e.At = time.Now()
	}
	key, value, err := EncodeEntry(e)
	if err != nil {
		return nil, err
	}
	it := &item{key: key, value: value, headers: traceHeaders(span), kind: e.Kind}
	switch {
	case e.Issued != nil:
		it.commandID = e.Issued.Command.ID
	case e.Redispatched != nil:
		it.commandID = e.Redispatched.CommandID
	case e.Outcome != nil:
		it.commandID, it.outcome = e.Outcome.CommandID, e.Outcome
	}
	return it, nil
}

// transactionWriter runs one guarded transaction of the command log; a [Leader] is
// one.
type transactionWriter interface {
	Write(ctx context.Context, build func(token coordination.FencingToken) ([]coordination.GuardedRecord, error)) (coordination.FencingToken, error)
}

// makesDue reports whether the item makes a transaction due: every item but
// one that rides.
func (it *item) makesDue() bool { return !it.rides || it.intake }

// commitBounds are the bounds of group commit (see the options that set
// them: WithMaxBatchRecords, WithMaxBatchBytes, WithMaxQueued,
// WithCommitLinger, WithCommitGap, WithOutcomeLinger).
type commitBounds struct {
	maxRecords, maxBytes, maxQueued int
	linger, gap, ride               time.Duration
}

// committedBatch is a batch of items whose transaction committed.
type committedBatch struct {
	items []*item
	// token is the token the transaction wrote under.
	token coordination.FencingToken
	// offsets[i] is the offset of the record of items[i] in the log
	// partition, or -1 for an item without a record or when the writer
	// cannot tell.
	offsets []int64
	// intake reports that the batch committed the intake position
	// intakeNext.
	intake     bool
	intakeNext int64
}

// committerConfig is what a committer is built from.
type committerConfig struct {
	writer transactionWriter
	bounds commitBounds

	// role and member sign the intake record; logTP is where every record
	// goes, and requestTP is the partition the intake position is of.
	role, member     string
	logTP, requestTP coordination.TopicPartition

	// retryBackoff is the wait before a failed transaction is tried again.
	retryBackoff time.Duration
	logger       *slog.Logger
	tel          *telemetry

	// halt ends the owner when the committer cannot go on; it may call
	// stop.
	halt func(error)

	// committed receives each committed batch, in commit order, on the
	// commit loop; the next transaction starts after it returns.
	committed func(committedBatch)

	// due reports whether lead has records to write; the loop asks it
	// while the queue is empty, and after a wake. lead returns the records
	// that go first in the next transaction, before its batch (the
	// checkpoints), or none; the loop asks it once the batch is taken, and
	// when due reports records while none are queued. Either may be nil.
	due  func() bool
	lead func() []*item
}

// committer writes the command log for a dispatcher: it owns the queue of
// records waiting for a transaction, takes them in batches within the batch
// bounds, runs one transaction at a time through the leadership, and hands
// each committed batch to one callback, which applies its effects. It keeps
// the committed intake position, which each transaction with intake marks
// moves.
//
// It has its own lock, and calls none of its callbacks while holding it, so
// that a caller may hold its own lock while it calls the committer: the
// dispatcher's lock is always taken first.
//
// The encoding of records happens before they reach the committer; under
// its lock it only moves them.
type committer struct {
	cfg committerConfig

	mu     sync.Mutex
	halted bool
	queue  []*item // records waiting for a transaction
	queued int     // counted items in queue, bounded by maxQueued
	// records and bytes are what the whole queue would write, its intake
	// record included, to tell a full batch without a walk of the queue.
	records, bytes int
	hasIntake      bool
	// due reports that the queue holds an item that makes a transaction
	// due. lingerFrom is when the commit linger of the next transaction
	// started, when the first such item queued, or zero for no linger;
	// ridesFrom is when the first item that rides queued, and ridesLast
	// when the latest one did.
	due                              bool
	lingerFrom, ridesFrom, ridesLast time.Time
	// hurried reports that nothing more will make a transaction due
	// (intake stopped), so that riding records do not wait.
	hurried bool
	intake  int64 // the committed intake position
	// held counts the holds in force (see hold): while there is one, no
	// transaction starts unless the queue is full.
	held int
	// coming counts the announcements in force (see announce): while there
	// is one, riding records wait up to a transaction's time for it.
	coming int
	// ride is how long riding records wait for a record that makes a
	// transaction due, the outcome linger or less (see adaptRide).
	ride time.Duration
	wake chan struct{}
	room chan struct{} // closed and replaced when the queue shrinks

	// committedAt is when the last transaction ended, and commitTook a
	// moving average of how long a transaction takes from its start to
	// its commit (zero before the first); only the commit loop touches
	// them.
	committedAt time.Time
	commitTook  time.Duration

	// leadFrom is when take first found the queue empty while due
	// reported records, or zero; only the commit loop touches it.
	leadFrom time.Time
}

// newCommitter returns a committer that starts nothing: call run.
func newCommitter(cfg committerConfig) *committer {
	return &committer{cfg: cfg, ride: cfg.bounds.ride, wake: make(chan struct{}, 1), room: make(chan struct{})}
}

// setIntake sets the committed intake position that recovery found.
func (c *committer) setIntake(next int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.intake = next
}

// intakePosition returns the committed intake position.
func (c *committer) intakePosition() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.intake
}

// enqueue appends items to the queue and wakes the commit loop. After stop
// it drops them.
func (c *committer) enqueue(items ...*item) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.halted {
		return
	}
	// The loop waits for a deadline that only an empty queue, a first
	// record that makes a transaction due, or a full batch or queue moves;
	// any other record needs no wake.
	wasEmpty, wasDue, wasFull := len(c.queue) == 0, c.due, c.fullLocked()
	now := time.Now()
	for _, it := range items {
		if it.counted {
			c.queued++
		}
		c.count(it)
		due := it.makesDue() || c.cfg.bounds.ride <= 0
		switch {
		case due && !c.due:
			c.due, c.lingerFrom = true, now
		case !due:
			if c.ridesFrom.IsZero() {
				c.ridesFrom = now
			}
			c.ridesLast = now
		}
	}
	c.queue = append(c.queue, items...)
	if wasEmpty || c.due != wasDue || c.fullLocked() != wasFull {
		c.poke()
	}
}

// fullLocked reports whether the queue holds a full batch or is at its
// bound. The caller holds c.mu.
func (c *committer) fullLocked() bool {
	b := c.cfg.bounds
	return c.records >= b.maxRecords || c.bytes >= b.maxBytes || c.queued >= b.maxQueued
}

// count adds the record of it to the queue's totals. The caller holds c.mu.
func (c *committer) count(it *item) {
	if it.key != nil {
		c.records++
	}
	if it.intake && !c.hasIntake {
		c.records++ // the intake record of the batch
		c.hasIntake = true
	}
	c.bytes += len(it.key) + len(it.value)
}

// hold keeps the commit loop from starting a transaction, unless the queue
// holds a full batch or is at its bound, until the matching release. A
// caller that queues many records with one enqueue each holds the loop
// meanwhile, so that they commit together rather than the first few alone.
// It must release before it waits for anything that a commit brings about.
func (c *committer) hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held++
}

// release ends a hold and wakes the commit loop. With flush, what is queued
// goes without the rest of the commit linger once no hold is left: the
// holder queued a whole burst, which the linger exists to gather. The
// commit gap still applies.
func (c *committer) release(flush bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held--
	if flush && c.held == 0 && c.due {
		c.lingerFrom = time.Time{}
	}
	c.poke()
}

// announce tells the commit loop that records which make a transaction
// due are on their way: a caller that is about to prepare a large batch
// (a thousand Issued records take milliseconds) announces it first, so
// that outcomes riding the queue do not leave in a transaction of their own
// a moment before the batch arrives, which the batch would then wait for.
// While an announcement is in force, riding records wait up to one
// transaction's time (the moving average), the most that such a
// transaction would cost the batch, instead of the outcome linger alone.
// Unlike hold, it delays no record that makes a transaction due. Each
// announce needs a matching arrived.
func (c *committer) announce() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.coming++
	c.poke()
}

// arrived ends an announcement: its records are queued, or none will come.
func (c *committer) arrived() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.coming--
	c.poke()
}

// hurry makes riding records go without waiting for a transaction that is
// due anyway: the caller knows that none will come.
func (c *committer) hurry() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hurried = true
	c.poke()
}

// notify wakes the commit loop, so that it asks due again.
func (c *committer) notify() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.poke()
}

// poke wakes the commit loop. The caller holds c.mu.
func (c *committer) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// full reports whether the queue is at its bound, and returns a channel
// that closes when it shrinks or the committer stops. A caller that must
// not pass the bound checks it and enqueues under a lock of its own that
// every enqueuer holds.
func (c *committer) full() (room <-chan struct{}, full bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.room, c.queued >= c.cfg.bounds.maxQueued && !c.halted
}

// stop drops the queue, releases every waiter of full, and ends the commit
// loop. It is idempotent.
func (c *committer) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.halted {
		return
	}
	c.halted = true
	c.queue = nil
	c.queued = 0
	c.records, c.bytes, c.hasIntake = 0, 0, false
	close(c.room)
	c.poke()
}

// run is the commit loop. It runs one transaction at a time, each with
// every record that queued while the one before was in flight, up to the
// batch bounds. It starts the next transaction the commit gap after the one
// before ended, or later when the first record queued less than the commit
// linger ago (see lingerFor). What lead returns goes first in the next
// transaction, before its batch, or alone when no record queued within a
// transaction's time (see leadWait): a checkpoint thus costs no transaction
// of its own under load. After a transaction of riding records alone, it
// sets how long the next ones ride (see adaptRide). It returns after stop,
// or when ctx ends; ctx bounds every transaction.
func (c *committer) run(ctx context.Context) {
	for {
		batch := c.take(ctx)
		if batch == nil {
			return
		}
		alone := len(batch) > 0 && !slices.ContainsFunc(batch, (*item).makesDue)
		if c.cfg.lead != nil {
			// Asked after take, with the effects of every transaction
			// before applied and none of the batch's committed.
			if items := c.cfg.lead(); len(items) > 0 {
				batch = append(items, batch...)
			}
		}
		if len(batch) > 0 {
			c.commit(ctx, batch)
		}
		if alone {
			c.adaptRide()
		}
	}
}

// adaptRide sets how long riding records wait from now on, after a
// transaction of them alone ended. When a record that makes a transaction
// due queued while it was in flight, that record waited behind it, which a
// ride as long as the outcome linger exists to spare: the ride is the
// outcome linger again. When none did, the wait before it spared nothing
// and cost the outcomes their time, as where each client waits for the
// outcome of its command before it submits the next: the ride halves, down
// to the commit gap alone, which the loop waits anyway. Once intake
// stopped, riding records do not wait, and nothing changes. Only the
// commit loop calls it.
func (c *committer) adaptRide() {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.hurried:
	case c.due:
		c.ride = c.cfg.bounds.ride
	default:
		c.ride /= 2
	}
}

// take waits for queued records, and for the commit linger, and takes the
// next batch. It returns an empty batch when the queue stayed empty while
// due reported records for as long as leadWait says, and nil when the
// committer stopped or ctx ended.
func (c *committer) take(ctx context.Context) []*item {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		c.mu.Lock()
		if c.halted || ctx.Err() != nil {
			c.mu.Unlock()
			return nil
		}
		empty, hurried := len(c.queue) == 0, c.hurried
		var linger <-chan time.Time
		if !empty && c.held > 0 && !c.fullLocked() {
			// Records are still queueing under a hold: wait for all of
			// them, or for a full batch.
			c.mu.Unlock()
			select {
			case <-c.wake:
			case <-ctx.Done():
			}
			continue
		}
		if !empty {
			wait := c.lingerFor()
			if wait <= 0 {
				batch := c.takeLocked()
				c.mu.Unlock()
				c.leadFrom = time.Time{}
				return batch
			}
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			linger = timer.C
		}
		c.mu.Unlock()
		if empty && c.cfg.due != nil && c.cfg.due() {
			wait := c.leadWait()
			if wait <= 0 || hurried {
				c.leadFrom = time.Time{}
				return []*item{}
			}
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			linger = timer.C
		}
		select {
		case <-c.wake:
		case <-linger:
		case <-ctx.Done():
		}
	}
}

// leadWait returns how much longer the records that due reports wait, while
// none are queued, for a record that makes a transaction due anyway, so
// that they lead its transaction rather than take one of their own that the
// record would then wait for: a transaction's time (the moving average of
// the recent ones) from when take first found them due, as riding outcomes
// wait, and nothing before the first commit. Once intake stopped (see
// hurry), take does not wait: no such record is coming, and a drain waits
// for its closing checkpoint. Only the commit loop calls it.
func (c *committer) leadWait() time.Duration {
	if c.leadFrom.IsZero() {
		c.leadFrom = time.Now()
	}
	return c.commitTook - time.Since(c.leadFrom)
}

// takeLocked takes the next batch off the queue. The caller holds c.mu.
func (c *committer) takeLocked() []*item {
	n, _, _ := c.batchSize()
	batch := c.queue[:n:n]
	c.queue = c.queue[n:]
	c.records, c.bytes, c.hasIntake = 0, 0, false
	c.ridesFrom, c.ridesLast = time.Time{}, time.Time{}
	if len(c.queue) == 0 {
		c.queue = nil
		c.due, c.lingerFrom = false, time.Time{}
	} else {
		// What is left waited as long as the batch; it goes next, with no
		// linger of its own.
		c.due, c.lingerFrom = true, time.Time{}
		for _, it := range c.queue {
			c.count(it)
		}
	}
	for _, it := range batch {
		if it.counted {
			c.queued--
		}
	}
	close(c.room)
	c.room = make(chan struct{})
	return batch
}

// lingerFor returns how much longer the queued records wait before their
// transaction starts.
//
// A queue with a record that makes a transaction due waits for the later of
// the commit linger after the first such record queued and the commit gap
// after the last transaction ended. The linger ends once the batch is full.
//
// A queue of riding records alone (outcomes) waits for a record that makes
// a transaction due, so that they share its transaction instead of taking
// one of their own, which the next Issued records would have to wait for:
// until the ride passed without another of them queueing, and at least the
// commit gap. The ride is the outcome linger, or less where no record came
// to share the recent transactions of outcomes alone (see adaptRide). A
// burst of outcomes (a device that works through a batch of commands) thus
// rides until it ends, when its client is likely to submit again. A full
// batch of them, or one after intake stopped, waits for the gap alone.
//
// The ride is also no longer than a transaction takes (the moving average
// of the recent ones), counted from the first riding record: riding spares
// the next Issued records the wait for a transaction of outcomes alone, at
// most one commit, and a longer ride would cost the outcomes more than it
// can spare the commands. Where commits are fast, outcomes without
// commands after them commit soon. While a batch is announced (see
// announce), the ride lasts that transaction's time: the batch is known to
// come, and would wait that long behind outcomes that left alone. Before
// the first commit, the ride counts from the first riding record.
//
// Nothing waits while the queue is at its bound, where submitters wait for
// room. The caller holds c.mu, and the queue is not empty.
func (c *committer) lingerFor() time.Duration {
	b := c.cfg.bounds
	if c.queued >= b.maxQueued {
		return 0
	}
	var gap time.Duration
	if b.gap > 0 && !c.committedAt.IsZero() {
		gap = b.gap - time.Since(c.committedAt)
	}
	var wait time.Duration
	switch {
	case !c.due && !c.hurried:
		switch first := time.Since(c.ridesFrom); {
		case c.commitTook <= 0:
			wait = c.ride - first
		case c.coming > 0 || c.commitTook < c.ride:
			wait = c.commitTook - first
		default:
			wait = min(c.ride-time.Since(c.ridesLast), c.commitTook-first)
		}
	case c.due && b.linger > 0 && !c.lingerFrom.IsZero():
		wait = b.linger - time.Since(c.lingerFrom)
	}
	if wait <= gap || c.fullLocked() {
		return gap
	}
	return wait
}

// batchSize returns how many queued items the next transaction takes, and the
// records and encoded bytes they come to, within the batch bounds. The
// caller holds c.mu.
func (c *committer) batchSize() (n, records, bytes int) {
	b := c.cfg.bounds
	intake := false
	for _, it := range c.queue {
		add := 0
		if it.key != nil {
			add = 1
		}
		if it.intake && !intake {
			add++ // the intake record of the batch
		}
		size := len(it.key) + len(it.value)
		if n > 0 && (records+add > b.maxRecords || bytes+size > b.maxBytes) {
			break
		}
		records += add
		bytes += size
		intake = intake || it.intake
		n++
	}
	return n, records, bytes
}

// commit writes batch in one transaction, retrying a failure that leaves the
// leadership in place, and hands it to the committed callback once it
// committed. A failure that ends the leadership leaves the batch in doubt:
// the next leader reads what committed.
func (c *committer) commit(ctx context.Context, batch []*item) {
	intakeNext, hasIntake := int64(0), false
	for _, it := range batch {
		if it.intake {
			intakeNext, hasIntake = it.intakeNext, true
		}
	}
	var intakeValue, intakeKey []byte
	if hasIntake {
		it, err := encodeItem(c.cfg.role, c.cfg.member, Entry{Kind: EntryIntake, Intake: &IntakePosition{
			Topic: c.cfg.requestTP.Topic, Partition: c.cfg.requestTP.Partition,
			FromOffset: c.intakePosition(), NextOffset: intakeNext,
		}}, trace.SpanContext{})
		if err != nil {
			c.cfg.logger.Error("dispatch: cannot encode the intake position", "err", err)
			c.cfg.halt(fmt.Errorf("dispatch: encode intake position: %w", err))
			return
		}
		intakeKey, intakeValue = it.key, it.value
	}

	// written and at keep the records of the last build, whose offsets the
	// writer sets once they commit, and the record of each item in batch.
	var written []coordination.GuardedRecord
	at := make([]int, len(batch))
	build := func(token coordination.FencingToken) ([]coordination.GuardedRecord, error) {
		common := []coordination.Header{
			{Key: HeaderToken, Value: []byte(token.String())},
			{Key: HeaderMember, Value: []byte(c.cfg.member)},
		}
		records := make([]coordination.GuardedRecord, 0, len(batch)+1)
		// The headers of every record in one allocation, each record's
		// capped so that nothing appends into the next one's.
		nh := 0
		for _, it := range batch {
			nh += len(common) + len(it.headers)
		}
		headers := make([]coordination.Header, 0, nh)
		for i, it := range batch {
			at[i] = -1
			if it.key == nil {
				continue
			}
			at[i] = len(records)
			stampToken(it.value, token)
			from := len(headers)
			headers = append(append(headers, common...), it.headers...)
			records = append(records, coordination.GuardedRecord{
				Partition: c.cfg.logTP, Key: it.key, Value: it.value,
				Headers: headers[from:len(headers):len(headers)],
			})
		}
		if hasIntake {
			stampToken(intakeValue, token)
			records = append(records, coordination.GuardedRecord{
				Partition: c.cfg.logTP, Key: intakeKey, Value: intakeValue, Headers: common,
			})
		}
		written = records
		return records, nil
	}

	start := time.Now()
	var token coordination.FencingToken
	for {
		var err error
		token, err = c.cfg.writer.Write(ctx, build)
		if err == nil {
			break
		}
		if errors.Is(err, coordination.ErrFenced) {
			c.cfg.tel.countFenced()
		}
		if ctx.Err() != nil || errors.Is(err, coordination.ErrFenced) || errors.Is(err, coordination.ErrOutcomeUnknown) || errors.Is(err, coordination.ErrNotHeld) {
			// The leadership ends with these; the dispatcher's halt
			// watcher stops the rest. The records are in doubt and the next
			// leader reads what committed.
			endSpans(batch, err)
			return
		}
		c.cfg.logger.Warn("dispatch: a log transaction failed; trying again", "records", len(batch), "err", err)
		select {
		case <-time.After(c.cfg.retryBackoff):
		case <-ctx.Done():
			endSpans(batch, err)
			return
		}
	}
	c.committedAt = time.Now()
	c.noteCommit(c.committedAt.Sub(start))
	endSpans(batch, nil)

	c.mu.Lock()
	if c.halted {
		c.mu.Unlock()
		return
	}
	if hasIntake {
		c.intake = intakeNext
	}
	c.mu.Unlock()
	if hasIntake {
		c.cfg.tel.intakeCommitted(intakeNext)
	}
	offsets := make([]int64, len(batch))
	for i := range batch {
		offsets[i] = -1
		if at[i] >= 0 && at[i] < len(written) {
			offsets[i] = written[at[i]].Offset
		}
	}
	if c.cfg.committed != nil {
		c.cfg.committed(committedBatch{items: batch, token: token, offsets: offsets, intake: hasIntake, intakeNext: intakeNext})
	}
}

// noteCommit records that a transaction took took, from its start to its
// commit. Only the commit loop calls it.
func (c *committer) noteCommit(took time.Duration) {
	c.cfg.tel.commitLatency(took)
	if c.commitTook == 0 {
		c.commitTook = took
		return
	}
	// A quarter of each new commit: one slow commit moves the average,
	// and a few fast ones bring it back.
	c.commitTook += (took - c.commitTook) / 4
}

// endSpans ends the span of every item of batch, recording err when set.
func endSpans(batch []*item, err error) {
	for _, it := range batch {
		if it.span != nil {
			if err != nil {
				it.span.RecordError(err)
			}
			it.span.End()
		}
	}
}
