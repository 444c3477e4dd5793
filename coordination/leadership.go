package coordination

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Leadership is the live leadership of one member over one role.
//
// The handle carries the epoch that the transaction coordinator minted, and
// the caller passes that epoch to every guarded write. The broker fences a
// write of an older epoch, so the caller proves its authority with the write
// itself and asks no question first.
//
// The handle renews the lease in the background. The renewal keeps the
// standbys from a challenge, and it adds no safety. [Leadership.Done] closes
// when the leadership ends, and [Leadership.Err] then says why. A caller
// watches Done and stops the work of the role at once.
//
// One goroutine, started by [AcquireLeadership], renews the lease. It is the
// only goroutine of the handle, it owns the Done channel, and it exits when
// the leadership ends: on a fence, on an unknown outcome, or on
// [Leadership.Resign]. Resign returns only after it exited.
//
// The role has one transactional producer, so the handle runs one transaction
// at a time: a renewal, a [Leadership.Write], and the tombstone of Resign
// wait for one another.
//
// A Leadership is safe for concurrent use.
type Leadership struct {
	transport Transport
	guarded   GuardedWriter // nil when the transport writes no guarded transactions
	role      Role
	member    MemberID
	partition TopicPartition
	config    LeaseConfig
	clock     Clock
	poll      time.Duration
	leaseKey  []byte
	regKey    []byte
	monotonic bool // the clock is the host clock, so freshness reads the monotonic clock

	// writeSlot holds one token while a transaction of the role's producer
	// runs. A channel rather than a mutex, so a wait for it honours a context.
	writeSlot chan struct{}

	mu    sync.Mutex
	token FencingToken
	lease Lease
	fresh freshness
	err   error

	stop   chan struct{}      // closed by end, under mu, exactly once
	cancel context.CancelFunc // cancels the context of the renewal goroutine
	done   chan struct{}      // closed by the renewal goroutine when it exits
}

// freshness is the instant just before the write of the last committed grant
// or renewal began, on the monotonic clock and on the Clock of the handle.
type freshness struct {
	mono   time.Time
	millis int64
}

// AcquireLeadership competes for a role, and it returns when this member
// holds the role.
//
// The call registers the member, waits for its turn under the succession
// rules, mints the epoch of the role, and writes the first lease record. It
// returns a *[Leadership] that renews the lease in the background. Every write
// that the caller guards with [Leadership.Token] is fenced by the broker.
//
// The call reads the coordination topic in a loop, so the caller bounds the
// wait with the context. It returns the context error when the deadline
// passes before this member wins the role. While it waits it evaluates the
// role again on every read that shows a new record, and at the instant that
// [Decision.WaitUntil] names at the latest; a read that shows nothing new is
// followed by a wait of at most the poll interval, which a transport that
// implements [PartitionWaiter] ends as soon as a new record commits.
//
// A role state that names this member takes the same path as a challenge. The
// record came from an earlier incarnation of the member, because this call
// holds no epoch yet. The new epoch fences that earlier incarnation, and it
// costs one epoch.
//
// A challenge that loses the race for the epoch learns it from the fence on
// its first lease write. The call then waits one poll interval, reads the
// role again, and waits for its turn like any standby.
//
// The call checks every option before it reaches the cluster. It starts no
// goroutine until it wins. When it fails or the context ends, it writes a
// tombstone on its registration, bounded by the poll interval and at least a
// second, so a member that gave up does not hold a rank that slows the
// standbys behind it. The returned leadership outlives ctx: the context
// bounds the wait, and not the leadership.
func AcquireLeadership(ctx context.Context, transport Transport, role Role, member MemberID, options ...Option) (*Leadership, error) {
	switch {
	case ctx == nil:
		return nil, errNilContext
	case transport == nil:
		return nil, errors.New("coordination: transport is nil")
	case role.name == "":
		return nil, errors.New("coordination: role is empty")
	case member.name == "":
		return nil, errors.New("coordination: member id is empty")
	}
	s, err := newSettings(options)
	if err != nil {
		return nil, err
	}
	partition, err := s.topicPartition(role)
	if err != nil {
		return nil, err
	}
	c := &campaign{
		transport:  transport,
		role:       role,
		member:     member,
		partition:  partition,
		settings:   s,
		key:        EncodeKey(RegistrationKey(role, member)),
		lastOffset: -1,
	}
	c.waiter, _ = transport.(PartitionWaiter)
	l, err := c.run(ctx)
	if err != nil {
		c.withdraw(ctx)
		return nil, fmt.Errorf("coordination: acquire role %s as %s: %w", role, member, err)
	}
	return l, nil
}

// newLeadership builds the handle for a freshly minted token. It starts
// nothing.
func newLeadership(transport Transport, role Role, member MemberID, partition TopicPartition, s *settings, token FencingToken) *Leadership {
	l := &Leadership{
		transport: transport,
		role:      role,
		member:    member,
		partition: partition,
		config:    s.lease,
		clock:     s.clock,
		poll:      s.pollInterval,
		leaseKey:  EncodeKey(LeaseKey(role)),
		regKey:    EncodeKey(RegistrationKey(role, member)),
		writeSlot: make(chan struct{}, 1),
		token:     token,
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	l.guarded, _ = transport.(GuardedWriter)
	switch s.clock.(type) {
	case SystemClock, *SystemClock:
		l.monotonic = true
	}
	return l
}

// start launches the renewal goroutine. The leadership then no longer
// depends on ctx, only on its values.
func (l *Leadership) start(ctx context.Context) {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.cancel = cancel
	go l.run(runCtx)
}

// Role returns the role that this member holds.
func (l *Leadership) Role() Role { return l.role }

// Member returns the member that holds the role.
func (l *Leadership) Member() MemberID { return l.member }

// Partition returns the partition of the coordination topic that holds every
// record of the role.
func (l *Leadership) Partition() TopicPartition { return l.partition }

// Token returns the quorum-minted proof of this leadership. The caller passes
// it to every guarded write.
//
// While the leadership holds, the token is the one that the transaction
// coordinator holds for the role now. A coordinator that bumps the epoch on
// every commit, as Kafka's transactions v2 do, moves it forward on every
// renewal and every [Leadership.Write], so read it again for each write.
func (l *Leadership) Token() FencingToken {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.token
}

// Lease returns the lease record that this member wrote last.
func (l *Leadership) Lease() Lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lease
}

// Done returns a channel that closes when the leadership ends. A fence closes
// it, and [Leadership.Resign] closes it. [Leadership.Err] says which.
func (l *Leadership) Done() <-chan struct{} { return l.done }

// Err returns the reason the leadership ended, and nil while it holds. The
// error of a fence wraps [ErrFenced], and the error of a resignation wraps
// [ErrNotHeld]. The error of a write whose outcome is unknown wraps
// [ErrOutcomeUnknown]. Err is set before Done closes.
func (l *Leadership) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// ValidFor returns the local freshness of the lease: the lease duration minus
// the time that passed since the instant just before the write of the last
// committed grant or renewal began. It is never negative, and it is zero once
// the leadership ended.
//
// With [SystemClock] the extent is measured on the monotonic clock of the
// host, so a step of the wall clock does not move it; with any other Clock it
// is measured on that clock. A [Leadership.Write] proves authority at its
// commit but does not extend the lease, so it leaves ValidFor alone.
//
// A caller that acts outside the cluster, where no broker fences a deposed
// leader, acts only while ValidFor exceeds a safety margin. A leader that was
// paused past its lease then finds ValidFor at zero on waking, and it waits
// for a renewal to commit, which fails with [ErrFenced] if a successor took
// the role.
func (l *Leadership) ValidFor() time.Duration {
	l.mu.Lock()
	ended := l.err != nil
	l.mu.Unlock()
	if ended {
		return 0
	}
	return l.remaining()
}

// remaining is ValidFor without the check for the end of the leadership.
func (l *Leadership) remaining() time.Duration {
	l.mu.Lock()
	fresh := l.fresh
	l.mu.Unlock()
	var elapsed time.Duration
	if l.monotonic {
		elapsed = time.Since(fresh.mono)
	} else {
		elapsed = millisBetween(fresh.millis, l.clock.NowMillis())
	}
	if elapsed < 0 || elapsed >= l.config.duration {
		return 0
	}
	return l.config.duration - elapsed
}

// Renew writes a fresh lease record under the same epoch. The background
// loop calls it at every renew interval, and a caller that drives its own
// schedule calls it too.
//
// A renewal that the broker fences ends the leadership. Renew then returns an
// error that wraps [ErrFenced], and [Leadership.Done] closes. A renewal whose
// outcome is unknown ends the leadership the same way, with an error that
// wraps [ErrOutcomeUnknown]. Any other failure leaves the leadership holding,
// and the caller may try again. After the leadership ended, Renew returns an
// error that wraps [ErrNotHeld] and writes nothing.
//
// When the transport implements [GuardedWriter], the renewal is a guarded
// write of the one lease record, so the token follows an epoch that the
// coordinator bumps on every commit. The lease record carries the token of
// the transaction that writes it.
func (l *Leadership) Renew(ctx context.Context) error {
	if err := l.acquireSlot(ctx); err != nil {
		return fmt.Errorf("coordination: renew lease of role %s: %w", l.role, err)
	}
	defer l.releaseSlot()
	return l.renewLocked(ctx)
}

// renewLocked writes one renewal. The caller holds the write slot.
func (l *Leadership) renewLocked(ctx context.Context) error {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return l.notHeld("renew")
	}
	token := l.token
	l.mu.Unlock()

	start := time.Now()
	now := l.clock.NowMillis()
	lease := l.config.Grant(l.member, token, now)
	next, err := l.writeLeaseRecord(ctx, token, EncodeLease(lease))
	if err != nil {
		err = fmt.Errorf("coordination: renew lease of role %s as %s under token %s: %w", l.role, l.member, token, err)
		if endsLeadership(err) {
			l.end(err)
		}
		return err
	}
	l.mu.Lock()
	l.lease = lease
	l.token = laterToken(token, next)
	l.fresh = freshness{mono: start, millis: now}
	l.mu.Unlock()
	return nil
}

// Write runs one guarded transaction under the epoch of the role, and it
// returns the token that the records were written under.
//
// Write waits for the transaction before it, calls build with the current
// token, and passes the records to [GuardedWriter.WriteGuarded] of the
// transport. The records commit all together or not at all. build runs while
// the write slot is held, so it must not call Write, Renew, or Resign. A build
// that returns no records writes nothing. On success the leadership takes the
// token that the coordinator holds after the commit, which is a newer one when
// the coordinator bumps the epoch on every commit, so [Leadership.Token]
// stays the token of the coordinator.
//
// An error that wraps [ErrFenced] or [ErrOutcomeUnknown] ends the leadership:
// [Leadership.Err] wraps it and [Leadership.Done] closes. Any other error of
// the transport means the transaction aborted cleanly, and the leadership
// keeps holding. Write returns the token it tried with such an error, and
// [NoEpoch] with an error that came before the transport was called.
//
// Write returns an error that wraps errors.ErrUnsupported when the transport
// implements no GuardedWriter, and an error that wraps [ErrNotHeld] without a
// call to the transport after the leadership ended. A Write does not extend
// the lease; see [Leadership.ValidFor].
func (l *Leadership) Write(ctx context.Context, build func(token FencingToken) ([]GuardedRecord, error)) (FencingToken, error) {
	if build == nil {
		return NoEpoch, errors.New("coordination: guarded write with a nil build function")
	}
	if l.guarded == nil {
		return NoEpoch, fmt.Errorf("coordination: guarded write to role %s: transport %T implements no GuardedWriter: %w", l.role, l.transport, errors.ErrUnsupported)
	}
	if err := l.acquireSlot(ctx); err != nil {
		return NoEpoch, fmt.Errorf("coordination: guarded write to role %s: %w", l.role, err)
	}
	defer l.releaseSlot()

	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return NoEpoch, l.notHeld("write")
	}
	token := l.token
	l.mu.Unlock()

	records, err := build(token)
	if err != nil {
		return NoEpoch, fmt.Errorf("coordination: build guarded write to role %s: %w", l.role, err)
	}
	if len(records) == 0 {
		return token, nil
	}
	next, err := l.guarded.WriteGuarded(ctx, l.role, token, records)
	if err != nil {
		err = fmt.Errorf("coordination: guarded write to role %s under token %s: %w", l.role, token, err)
		if endsLeadership(err) {
			l.end(err)
		}
		return token, err
	}
	l.mu.Lock()
	l.token = laterToken(token, next)
	l.mu.Unlock()
	return token, nil
}

// Resign gives the role up. It stops the renewal loop and writes a tombstone
// on the lease key, so the first standby challenges at once instead of at the
// deadline. It ends the leadership, whatever the write does.
//
// Resign takes no epoch back. The member keeps the epoch it minted until
// another member mints a newer one, and the broker still accepts a write of
// the resigned member until then. A caller that resigns stops its own guarded
// writes.
//
// The leadership ends first: [Leadership.Err] wraps [ErrNotHeld] and
// [Leadership.Done] closes before any write, and Resign waits for the renewal
// goroutine to exit. The tombstone of the lease is bounded by ctx and by the
// lease deadline, because a standby challenges at the deadline anyway, so a
// lease that already expired gets no tombstone. Resign then writes a
// tombstone on the registration of the member, bounded by ctx and by the poll
// interval (a second at least): the member leaves the roster, so the first
// standby takes rank 0 and challenges at once. A member that competes again
// registers again, at the tail of the roster.
//
// Resign returns the errors of the two writes, and an error that wraps
// ErrNotHeld when the leadership had already ended.
func (l *Leadership) Resign(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	if !l.end(fmt.Errorf("coordination: member %s resigned role %s: %w", l.member, l.role, ErrNotHeld)) {
		return l.notHeld("resign")
	}
	select {
	case <-l.done:
	case <-ctx.Done():
		return fmt.Errorf("coordination: resign role %s: %w", l.role, ctx.Err())
	}
	var errs []error
	if remaining := l.remaining(); remaining > 0 {
		if err := l.clearLease(ctx, remaining); err != nil {
			errs = append(errs, err)
		}
	}
	registerCtx, cancel := context.WithTimeout(ctx, max(l.poll, time.Second))
	defer cancel()
	if err := l.transport.Append(registerCtx, l.partition, l.regKey, nil); err != nil {
		errs = append(errs, fmt.Errorf("coordination: deregister %s from role %s: %w", l.member, l.role, err))
	}
	return errors.Join(errs...)
}

// clearLease writes the tombstone of the lease, bounded by the extent left.
func (l *Leadership) clearLease(ctx context.Context, remaining time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, remaining)
	defer cancel()
	if err := l.acquireSlot(ctx); err != nil {
		return fmt.Errorf("coordination: clear lease of role %s: %w", l.role, err)
	}
	defer l.releaseSlot()
	token := l.Token()
	next, err := l.writeLeaseRecord(ctx, token, nil)
	if err != nil {
		return fmt.Errorf("coordination: clear lease of role %s under token %s: %w", l.role, token, err)
	}
	l.mu.Lock()
	l.token = laterToken(token, next)
	l.mu.Unlock()
	return nil
}

// writeLeaseRecord writes one record on the lease key, a lease or a
// tombstone, and returns the token the coordinator holds after the commit.
func (l *Leadership) writeLeaseRecord(ctx context.Context, token FencingToken, value []byte) (FencingToken, error) {
	if l.guarded != nil {
		return l.guarded.WriteGuarded(ctx, l.role, token, []GuardedRecord{{
			Partition: l.partition,
			Key:       l.leaseKey,
			Value:     value,
		}})
	}
	if err := l.transport.WriteLease(ctx, l.partition, token, l.leaseKey, value); err != nil {
		return token, err
	}
	return token, nil
}

// run is the renewal goroutine. It renews at the renew instant of the last
// lease, retries a failed renewal within the poll interval, and closes done
// when the leadership ends.
func (l *Leadership) run(ctx context.Context) {
	defer close(l.done)
	retry := false
	for {
		wait := l.poll
		if !retry {
			wait = l.untilRenew()
		}
		select {
		case <-l.stop:
			return
		case <-l.clock.After(wait):
		}
		select {
		case <-l.stop:
			return
		default:
		}
		err := l.renewInBackground(ctx)
		// A renewal that failed for another reason than the end of the
		// leadership is retried within the poll interval.
		retry = err != nil && !errors.Is(err, ErrNotHeld) && ctx.Err() == nil
	}
}

// renewInBackground is one renewal of the loop, bounded by the lease
// duration so a hung transport cannot hold the loop for ever.
func (l *Leadership) renewInBackground(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, l.config.duration)
	defer cancel()
	if err := l.acquireSlot(ctx); err != nil {
		return err
	}
	defer l.releaseSlot()
	return l.renewLocked(ctx)
}

// untilRenew returns the extent until the renew instant of the last lease.
func (l *Leadership) untilRenew() time.Duration {
	lease := l.Lease()
	return millisBetween(l.clock.NowMillis(), l.config.Timing(lease).RenewAt())
}

// end ends the leadership with err, and reports whether this call ended it.
// The first reason wins.
func (l *Leadership) end(err error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return false
	}
	l.err = err
	close(l.stop)
	if l.cancel != nil {
		l.cancel()
	}
	return true
}

// notHeld is the error of a call after the leadership ended.
func (l *Leadership) notHeld(op string) error {
	return fmt.Errorf("coordination: %s role %s as %s: %w", op, l.role, l.member, ErrNotHeld)
}

// acquireSlot waits for the write slot, or for the end of ctx.
func (l *Leadership) acquireSlot(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	select {
	case l.writeSlot <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// releaseSlot frees the write slot for the next transaction.
func (l *Leadership) releaseSlot() { <-l.writeSlot }

// errNilContext is the error of a blocking call that got a nil context.
var errNilContext = errors.New("coordination: context is nil")

// endsLeadership reports whether a write error ends the leadership: the
// broker fenced the token, or the producer cannot tell whether it committed
// and is closed.
func endsLeadership(err error) bool {
	return errors.Is(err, ErrFenced) || errors.Is(err, ErrOutcomeUnknown)
}

// laterToken returns the later of the token a write ran under and the token
// the transport reports after it. Tokens only grow, so a transport that
// reports an older or a zero token leaves the leadership's token in place.
func laterToken(current, reported FencingToken) FencingToken {
	if reported.Supersedes(current) {
		return reported
	}
	return current
}
