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

	// renewalLead is how long before the renew instant a Write starts to
	// carry the renewal; zero when no Write does (WithRenewalsInWrites).
	renewalLead time.Duration

	// writeSlot holds one token while a transaction of the role's producer
	// runs. A channel rather than a mutex, so a wait for it honours a context.
	writeSlot chan struct{}

	mu    sync.Mutex
	token FencingToken
	term  Term
	lease Lease
	fresh freshness
	err   error

	// renewals counts the committed renewals, folded ones included, so the
	// loop can tell that a Write renewed while it waited.
	renewals uint64

	stop   chan struct{}      // closed by end, under mu, exactly once
	cancel context.CancelFunc // cancels the context of the renewal goroutine
	done   chan struct{}      // closed by the renewal goroutine when it exits
}

// AcquireLeadership competes for a role, and it returns when this member
// holds the role.
//
// The call registers the member, waits for its turn under the succession
// rules, mints the epoch of the role, outwaits the lease of the holder it
// fenced, and writes the first lease record. It
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
// A live lease that names this member came from another incarnation of the
// member, because this call holds no epoch yet. That incarnation may be
// paused rather than gone, so the call waits for the deadline of the lease
// like a standby of rank 0, and only then challenges; the new epoch fences
// the earlier incarnation. A lease that the earlier incarnation cleared by
// resigning ends the wait at once.
//
// Between the epoch and the first lease record the call reads the role once
// more, and when a fenced holder's newest lease is still live it waits for
// that lease's deadline, so the fenced holder's [Leadership.ValidFor] has run
// out when this member starts to lead. A read that cannot show the whole
// partition makes it wait up to one lease duration; see the package
// documentation.
//
// A challenge that loses the race for the epoch learns it from the fence on
// its first lease write. The call then waits up to one poll interval for the
// lease of the winner, reads the role again, and waits for its turn like any
// standby.
//
// The call checks every option before it reaches the cluster. It leaves no
// goroutine behind until it wins: a wait on a [PartitionWaiter] runs in a
// goroutine that the wait cancels and joins. When it fails or the context ends, it writes a
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

		clearedOffset: -1,
	}
	c.waiter, _ = transport.(PartitionWaiter)
	c.preparer, _ = transport.(EpochPreparer)
	c.reader, _ = transport.(OpenWaitReader)
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
		transport:   transport,
		role:        role,
		member:      member,
		partition:   partition,
		config:      s.lease,
		clock:       s.clock,
		poll:        s.pollInterval,
		renewalLead: s.renewalLead,
		leaseKey:    EncodeKey(LeaseKey(role)),
		regKey:      EncodeKey(RegistrationKey(role, member)),
		writeSlot:   make(chan struct{}, 1),
		token:       token,
		term:        NoTerm,
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
	}
	l.guarded, _ = transport.(GuardedWriter)
	l.monotonic = onHostClock(s.clock)
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

// Term returns the term of this leadership: the offset of its first lease
// record in the role's partition of the coordination topic. Terms order the
// leaderships of a role where tokens cannot, because a token may rotate to a
// lower producer id; see [Term]. The term never changes during a
// leadership. It is [NoTerm] when the transport implements no
// [GuardedWriter], which reports the offset.
func (l *Leadership) Term() Term {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.term
}

// Authority returns the term and the current token of this leadership.
func (l *Leadership) Authority() Authority {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Authority{Term: l.term, Token: l.token}
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

// end ends the leadership with err, and reports whether this call ended it.
// The first reason wins.
func (l *Leadership) end(err error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil || l.stop == nil {
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
	if l.writeSlot == nil {
		return errZeroLeadership
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

// errZeroLeadership is the error of a call on a Leadership that
// AcquireLeadership did not build.
var errZeroLeadership = fmt.Errorf("coordination: the Leadership was not built by AcquireLeadership: %w", ErrNotHeld)
