package coordination

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// campaign is the wait of one AcquireLeadership call: it registers, reads
// the partition of the role, and evaluates the succession rules until this
// member may take the epoch.
type campaign struct {
	transport Transport
	role      Role
	member    MemberID
	partition TopicPartition
	settings  *settings
	key       []byte // the registration key of the member

	waiter PartitionWaiter // nil when the transport cannot long-poll
	// reader is nil when the transport bounds its reads' wait on open
	// transactions alone.
	reader OpenWaitReader

	// preparer is nil when the transport cannot prepare an epoch. preparing
	// is closed when the preparation in flight ends, nil when none runs;
	// preparedAt is the clock's instant of the last one begun, if begun.
	preparer   EpochPreparer
	preparing  chan struct{}
	stopPrep   context.CancelFunc
	preparedAt int64
	begun      bool

	// spurious says that the last wake-up of the waiter was followed by a
	// read that showed nothing new; the next wait then takes the clock only,
	// so a waiter that answers too eagerly cannot spin the loop.
	spurious bool
	woken    bool // the last wait ended because the waiter saw a record

	registered     bool  // an Append of the registration succeeded
	lastRegistered int64 // the instant of the last registration, on the clock
	lastOffset     int64 // the highest offset of the partition seen so far

	// clearedOffset is the offset of the lease tombstone that cleared the
	// role's lease, as the last read showed it, or -1; clearedAt is the
	// instant of the first read that showed it (see staggerCleared).
	clearedOffset, clearedAt int64

	// actAt is the instant of the next evaluation that the last decision
	// named (Decision.WaitUntil), or 0 when it named none; foreignOpen says
	// that the last read stopped at another producer's open transaction.
	// Both set how long the next read waits on an open transaction (see
	// openWait).
	actAt       int64
	foreignOpen bool
}

// run registers and waits for the turn of the member. It returns the
// leadership, with its renewal goroutine started, or the reason it gave up.
func (c *campaign) run(ctx context.Context) (*Leadership, error) {
	clock := c.settings.clock
	if err := c.register(ctx); err != nil {
		return nil, err
	}
	defer c.endPrepare()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// The instant is taken before the read, so a read that was slow,
		// or a process paused with the answer in hand, judges the view at
		// an instant no later than the view: a lease it shows never looks
		// more expired than it was when the read began.
		now := clock.NowMillis()
		records, partial, err := c.read(ctx, c.openWait(now))
		if errors.Is(err, errReadAgain) {
			continue
		}
		if err != nil {
			return nil, c.cause(ctx, "read the partition", err)
		}
		changed := c.observe(records)
		c.spurious = c.woken && !changed
		c.woken = false
		state := c.fold(records)
		if partial {
			state = c.assumeRegistered(state)
		}
		clearedAt, cleared := c.clearedLease(records, now)
		decision := c.staggerCleared(state, clearedAt, cleared, now, Evaluate(state, c.member, now, c.settings.lease))
		if decision.Action == ActionHold {
			// A live lease names this member, but this call holds no epoch:
			// the lease is another incarnation's, which may be paused rather
			// than gone and may still act on its lease. Wait for its
			// deadline as a standby of rank 0 would; a resignation clears
			// the lease sooner. Nothing else proves the old incarnation gone,
			// because a paused process can fake any other sign.
			decision = Decision{Action: ActionWait, WaitUntil: state.Lease.Deadline}
		}
		c.actAt = 0
		if decision.Action == ActionWait {
			c.actAt = decision.WaitUntil
		}
		switch decision.Action {
		case ActionChallenge:
			l, err := c.challenge(ctx)
			if err == nil {
				return l, nil
			}
			if !errors.Is(err, ErrFenced) {
				return nil, err
			}
			// Another member minted a newer epoch after ours. Give its
			// first lease write the time to land, then wait for the turn
			// again.
			if err := c.wait(ctx, c.settings.pollInterval); err != nil {
				return nil, err
			}
		case ActionNotRegistered:
			// The registration is not in the roster: not yet visible, or
			// withdrawn by a tombstone. Register again, at most once per
			// poll interval, so a slow read does not push the member to the
			// tail over and over.
			since := millisBetween(c.lastRegistered, now)
			if since >= c.settings.pollInterval {
				if err := c.register(ctx); err != nil {
					return nil, err
				}
				continue
			}
			if changed {
				continue
			}
			if err := c.wait(ctx, c.settings.pollInterval-since); err != nil {
				return nil, err
			}
		case ActionWait:
			// A read that showed a change is followed by another read at
			// once: the transport may long-poll, and a standby should see a
			// resignation quickly. A read that showed nothing new is followed
			// by a wait until the next evaluation is due, or a poll interval.
			if rank, ok := state.RankOf(c.member); ok && rank == 0 && state.Lease != nil {
				c.prepare(ctx, now)
			}
			if changed {
				continue
			}
			// The wait runs from the clock's instant after the read, not
			// from now: a read that waited on an open transaction has spent
			// part of the way to the next evaluation already.
			wait := min(c.settings.pollInterval, millisBetween(clock.NowMillis(), decision.WaitUntil))
			if err := c.wait(ctx, wait); err != nil {
				return nil, err
			}
		}
	}
}

// prepare lets the transport get ready to take the epoch, in a goroutine of
// the campaign, when this member is the first in line behind a holder: the
// challenge after a resignation or a lapsed lease then pays for the
// InitProducerId, not for the connections of a new client. One preparation
// runs at a time, at most once per poll interval; its error is ignored,
// because the challenge works without it.
func (c *campaign) prepare(ctx context.Context, now int64) {
	if c.preparer == nil {
		return
	}
	if c.preparing != nil {
		select {
		case <-c.preparing:
			c.preparing = nil
		default:
			return
		}
	}
	if c.begun && millisBetween(c.preparedAt, now) < c.settings.pollInterval {
		return
	}
	c.preparedAt, c.begun = now, true
	prepCtx, cancel := context.WithTimeout(ctx, c.settings.lease.Duration())
	done := make(chan struct{})
	c.preparing, c.stopPrep = done, cancel
	go func() {
		defer close(done)
		defer cancel()
		_ = c.preparer.PrepareEpoch(prepCtx, c.role)
	}()
}

// endPrepare cancels the preparation in flight and waits for it to end.
func (c *campaign) endPrepare() {
	if c.preparing == nil {
		return
	}
	c.stopPrep()
	<-c.preparing
	c.preparing = nil
}

// clearedLease returns the instant of the first read that showed the lease
// tombstone which clears the role's lease in records, and false when the
// last lease record is not a tombstone. now is the instant taken before the
// read.
func (c *campaign) clearedLease(records []StateRecord, now int64) (int64, bool) {
	offset := int64(-1)
	tombstone := false
	for _, record := range records {
		key, err := DecodeKey(record.Key)
		if err != nil || key.Kind != KindLease || key.Role != c.role || record.Offset < offset {
			continue
		}
		offset, tombstone = record.Offset, IsTombstone(record.Value)
	}
	if !tombstone {
		c.clearedOffset = -1
		return 0, false
	}
	if offset != c.clearedOffset {
		c.clearedOffset, c.clearedAt = offset, now
	}
	return c.clearedAt, true
}

// staggerCleared keeps the challenge stagger between the standbys after a
// resignation. With no lease, rule 3 of [Evaluate] anchors each member on its
// own registration instant, which is long past for every standby that has
// waited behind a holder: after the holder's tombstone every one of them
// would challenge at once, the later InitProducerId would fence the first
// challenger's new leadership, and the role would stand without a leader
// until the fenced lease ran out. So a standby of rank n that saw the lease
// cleared waits n staggers after the first read that showed the tombstone,
// as it would after a deadline; rank 0 still challenges at once. The anchor
// is the instant of that read, which later evaluations do not move.
func (c *campaign) staggerCleared(state RoleState, clearedAt int64, cleared bool, now int64, decision Decision) Decision {
	if !cleared || decision.Action != ActionChallenge || state.Lease != nil {
		return decision
	}
	rank, ok := state.RankOf(c.member)
	if !ok || rank == 0 {
		return decision
	}
	if at := addMillis(clearedAt, c.settings.lease.ChallengeDelay(rank)); now < at {
		return Decision{Action: ActionWait, WaitUntil: at}
	}
	return decision
}

// errReadAgain says that a read of the partition gave no view to decide on
// yet, and the campaign reads again.
var errReadAgain = errors.New("coordination: read the partition again")

// read reads the role's partition for a decision, within the read bound (a
// poll interval, a second at least), waiting at most openWait of it on an
// open transaction when the transport implements [OpenWaitReader].
//
// A transaction open on the partition hides every record committed after
// its first offset. When it is another producer's, the records it hides may
// be renewals of a healthy holder, so the campaign does not decide on the part
// before it and reads again: errReadAgain. When it is the role's own
// producer's, the holder itself began it: a renewal or a resignation that has
// not committed, or will never commit because the holder died. The view
// before it is the holder's latest committed word, and the campaign decides
// on it, as a read that stopped at the last stable offset would; a challenge
// at the deadline then aborts the transaction with its InitProducerId,
// rather than waiting for the transaction coordinator to time it out.
//
// The view before the holder's transaction is partial in one more way: the
// registrations appended after the transaction began are hidden too, this
// member's own among them, so partial reports it and the campaign takes
// itself for registered at the tail of the roster.
func (c *campaign) read(ctx context.Context, openWait time.Duration) (records []StateRecord, partial bool, err error) {
	readCtx, cancel := context.WithTimeout(ctx, c.readBound())
	defer cancel()
	if c.reader != nil {
		records, err = c.reader.ReadPartitionWaiting(readCtx, c.partition, openWait)
	} else {
		records, err = c.transport.ReadPartition(readCtx, c.partition)
	}
	c.foreignOpen = false
	if err == nil || ctx.Err() != nil {
		return records, false, err
	}
	var open *OpenTransactionError
	if !errors.As(err, &open) {
		if readCtx.Err() != nil {
			return nil, false, errReadAgain // a slow read; it goes on where it stopped
		}
		return nil, false, err
	}
	if held, ok, derr := c.transport.DescribeEpoch(ctx, c.role); derr == nil && ok && slices.Contains(open.Producers, held.ProducerID()) {
		return open.Records, true, nil
	}
	c.foreignOpen = true
	return nil, false, errReadAgain
}

// readBound is the bound of one read of the campaign.
func (c *campaign) readBound() time.Duration {
	return max(c.settings.pollInterval, time.Second)
}

// openWait returns how long a read that begins at now waits on an open
// transaction. The transaction of the holder's own producer hides only the
// holder's word since it began: a renewal that a dead holder left open,
// which the challenge's InitProducerId aborts, or one that committed and
// whose markers are still on their way. The read waits for the markers until
// one poll interval past the instant at which the campaign acts (the
// failover's bound allows a poll interval for the read that finds the lease
// expired), and no longer. Waiting the whole read bound at each read pushed
// the challenge after a dead holder one to two bounds past its deadline;
// waiting less challenges holders whose renewal had committed (in 20,000
// seeds of the simulator, no wait past the instant left 12,535 commands in
// doubt, this rule 7,481). Another producer's transaction may hide a renewal
// of the holder, and the read after one that stopped there waits the whole
// bound, as a read with no instant in view does.
func (c *campaign) openWait(now int64) time.Duration {
	full := c.readBound()
	if c.foreignOpen || c.actAt == 0 {
		return full
	}
	return min(full, millisBetween(now, addMillis(c.actAt, c.settings.pollInterval)))
}

// assumeRegistered adds this member at the tail of a roster read from a
// partial view, when its registration committed but the view cannot show it.
func (c *campaign) assumeRegistered(state RoleState) RoleState {
	if !c.registered {
		return state
	}
	if _, ok := state.Entry(c.member); ok {
		return state
	}
	state.Roster = append(state.Roster, RosterEntry{Member: c.member, Offset: math.MaxInt64, RegisteredAt: c.lastRegistered})
	return state
}

// register appends the registration record of the member.
func (c *campaign) register(ctx context.Context) error {
	now := c.settings.clock.NowMillis()
	value, err := encodeRegistration(Registration{Member: c.member, RegisteredAt: now})
	if err != nil {
		return c.cause(ctx, "register", err)
	}
	if err := c.transport.Append(ctx, c.partition, c.key, value); err != nil {
		return c.cause(ctx, "register", err)
	}
	c.registered = true
	c.lastRegistered = now
	return nil
}

// challenge mints the epoch of the role, outwaits the freshness of the
// holder it fenced, and writes the first lease under the epoch. A fenced
// first write means another member minted a newer epoch in the meantime; the
// error then wraps ErrFenced.
func (c *campaign) challenge(ctx context.Context) (*Leadership, error) {
	token, err := c.transport.AcquireEpoch(ctx, c.role)
	if err != nil {
		return nil, c.cause(ctx, "acquire the epoch", err)
	}
	if err := c.outwait(ctx, startStopwatch(c.settings.clock)); err != nil {
		return nil, c.cause(ctx, "outwait the lease fenced by token "+token.String(), err)
	}
	l := newLeadership(c.transport, c.role, c.member, c.partition, c.settings, token)
	start := time.Now()
	now := l.clock.NowMillis()
	lease := l.config.Grant(c.member, token, now)
	value, err := encodeLease(lease)
	if err != nil {
		return nil, c.cause(ctx, "write the first lease under token "+token.String(), err)
	}
	next, offset, err := l.writeLeaseRecord(ctx, token, value)
	if err != nil {
		return nil, c.cause(ctx, "write the first lease under token "+token.String(), err)
	}
	// The first lease record carries no term header: its own offset is the
	// term, and every later record of the leadership repeats it.
	if offset > 0 {
		l.term = Term(offset)
	}
	l.adoptToken(next)
	l.lease = lease
	l.fresh = freshness{mono: start, millis: now}
	l.start(ctx)
	return l, nil
}

// outwait returns once no member that the new epoch fenced can still find
// its lease fresh, or when ctx ends.
//
// The view that led to the challenge may be stale. The transaction markers
// of a renewal that already committed may land after the read, so the view
// before the holder's transaction hid a newer lease; or the challenger was
// paused between its read and its challenge while the holder renewed; or a
// holder paused past its deadline woke and committed one more renewal just
// before the InitProducerId. In each case the holder still finds its lease
// fresh, and it would drive the devices that check no token beside the new
// leader. The epoch fences its writes to the log, not its device calls.
//
// After AcquireEpoch the earlier epochs can commit nothing more: the
// coordinator aborted an open transaction, and it answered the
// InitProducerId only once a committing transaction was complete, with its
// markers written. So a read of the partition that reaches the high
// watermark now shows the newest committed lease of any member, and that
// lease is the last one a fenced holder will ever have. When it is still
// live on this member's clock, the wait lasts until its deadline; the
// holder's freshness, which its monotonic clock measures from just before
// it began writing that lease, ends by then within the skew that the
// dispatcher's safety margin covers.
//
// A read that cannot show the whole partition (another producer's
// transaction holds the last stable offset back past the read bound, or the
// read fails) proves nothing, and the campaign reads again every poll
// interval. Every wait ends at the latest one lease duration after fenced,
// the instant just after AcquireEpoch returned, measured by the stopwatch:
// a lease that a fenced holder committed was committed before the
// coordinator handled the fencing InitProducerId, and its freshness started
// before the holder began that write, so it ends within one lease duration
// of that instant on any clock that runs at the right rate, whatever the
// skew. The instant just before the AcquireEpoch call would not do: the
// call may wait and retry, a renewal that began after it may commit before
// the InitProducerId lands, and that lease is fresh past the bound.
//
// Another member may fence this one during the wait; the first lease write
// then fails with ErrFenced.
func (c *campaign) outwait(ctx context.Context, fenced stopwatch) error {
	full := c.settings.lease.duration
	for {
		left := full - fenced.elapsed()
		if left <= 0 {
			return nil
		}
		readCtx, cancel := context.WithTimeout(ctx, c.readBound())
		records, err := c.transport.ReadPartition(readCtx, c.partition)
		cancel()
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		if err == nil {
			state := c.fold(records)
			now := c.settings.clock.NowMillis()
			if state.Lease == nil || !c.settings.lease.Timing(*state.Lease).LiveAt(now) {
				return nil
			}
			return c.sleep(ctx, min(full-fenced.elapsed(), millisBetween(now, state.Lease.Deadline)))
		}
		// An incomplete view: read again after a poll interval, and stop
		// at the full lease duration.
		if err := c.sleep(ctx, min(c.settings.pollInterval, full-fenced.elapsed())); err != nil {
			return err
		}
	}
}

// sleep blocks on the clock for the extent, or until ctx ends.
func (c *campaign) sleep(ctx context.Context, extent time.Duration) error {
	if extent <= 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.settings.clock.After(extent):
		return nil
	}
}

// wait blocks on the clock for the extent, or until ctx ends. With a
// PartitionWaiter it also returns as soon as the partition shows a record
// that no read has shown yet. The waiter runs in a goroutine that wait
// cancels and joins before it returns.
func (c *campaign) wait(ctx context.Context, extent time.Duration) error {
	timer := c.settings.clock.After(extent)
	if c.waiter == nil || c.spurious {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer:
			return nil
		}
	}
	waitCtx, cancel := context.WithCancel(ctx)
	woke := make(chan error, 1)
	go func() { woke <- c.waiter.WaitPartition(waitCtx, c.partition, c.lastOffset) }()
	defer func() {
		cancel()
		if woke != nil {
			<-woke
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer:
			return nil
		case err := <-woke:
			woke = nil
			if err == nil {
				c.woken = true
				return nil
			}
			// The waiter failed; the clock still bounds the wait.
		}
	}
}

// observe records the highest offset of a read and reports whether the read
// showed a record that no earlier read showed.
func (c *campaign) observe(records []StateRecord) bool {
	changed := false
	for _, record := range records {
		if record.Offset > c.lastOffset {
			c.lastOffset = record.Offset
			changed = true
		}
	}
	return changed
}

// fold builds the state of the role. A record that does not decode is
// skipped: it may come from a newer version of the layout, and one bad record
// must not stop every member of the role from competing.
func (c *campaign) fold(records []StateRecord) RoleState {
	b := NewRoleStateBuilder(c.role)
	for _, record := range records {
		_ = b.Apply(record)
	}
	return b.Build()
}

// withdraw writes a tombstone on the registration of a member that gave up,
// so its rank does not delay the standbys behind it. It is best effort and
// bounded: the caller is already on its way out with an error.
func (c *campaign) withdraw(ctx context.Context) {
	if !c.registered {
		return
	}
	bound := max(c.settings.pollInterval, time.Second)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	defer cancel()
	_ = c.transport.Append(ctx, c.partition, c.key, nil)
}

// cause wraps a transport error with the step that failed. When ctx ended,
// the error wraps the context error too, so errors.Is finds it whatever the
// transport returned.
func (c *campaign) cause(ctx context.Context, step string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		return fmt.Errorf("%s: %w: %w", step, ctxErr, err)
	}
	return fmt.Errorf("%s: %w", step, err)
}
