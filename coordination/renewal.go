package coordination

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// freshness is the instant just before the write of the last committed grant
// or renewal began, on the monotonic clock and on the Clock of the handle.
type freshness struct {
	mono   time.Time
	millis int64
}

// ValidFor returns the local freshness of the lease: the lease duration minus
// the time that passed since the instant just before the write of the last
// committed grant or renewal began. It is never negative, and it is zero once
// the leadership ended.
//
// With [SystemClock] the extent is measured on the monotonic clock of the
// host, so a step of the wall clock does not move it; with any other Clock it
// is measured on that clock. A [Leadership.Write] proves authority at its
// commit but does not extend the lease, so it leaves ValidFor alone, unless
// it carries a renewal ([WithRenewalsInWrites]).
//
// A caller that acts outside the cluster, where no broker fences a deposed
// leader, acts only while ValidFor exceeds a safety margin. A leader that was
// paused past its lease then finds ValidFor at zero on waking, and it waits
// for a renewal to commit, which fails with [ErrFenced] if a successor took
// the role.
func (l *Leadership) ValidFor() time.Duration {
	l.mu.Lock()
	ended := l.err != nil || l.done == nil
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

	r, err := l.grantNow(token)
	if err != nil {
		return fmt.Errorf("coordination: renew lease of role %s as %s under token %s: %w", l.role, l.member, token, err)
	}
	next, _, err := l.writeLeaseRecord(ctx, token, r.value)
	if err != nil {
		err = fmt.Errorf("coordination: renew lease of role %s as %s under token %s: %w", l.role, l.member, token, err)
		if endsLeadership(err) {
			l.end(err)
			return err
		}
		// An abort under transactions v2 moves the epoch on; adopt it.
		l.adoptToken(next)
		return err
	}
	l.adoptToken(next)
	l.renewed(r.lease, r.fresh)
	return nil
}

// renewed records a committed renewal: lease is the record it wrote, and
// fresh the instant just before its write began.
func (l *Leadership) renewed(lease Lease, fresh freshness) {
	l.mu.Lock()
	l.lease = lease
	l.fresh = fresh
	l.renewals++
	l.mu.Unlock()
}

// renewalCount returns the number of committed renewals so far.
func (l *Leadership) renewalCount() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewals
}

// renewal is a lease record about to be written, and the instant just
// before its write began.
type renewal struct {
	lease Lease
	value []byte
	fresh freshness
}

// dueRenewal returns the renewal that a Write under token starting now
// carries, and false when the renew instant lies more than the renewal lead
// ahead or no Write carries renewals.
func (l *Leadership) dueRenewal(token FencingToken) (renewal, bool, error) {
	if l.renewalLead <= 0 || millisBetween(l.clock.NowMillis(), l.config.Timing(l.Lease()).RenewAt()) > l.renewalLead {
		return renewal{}, false, nil
	}
	r, err := l.grantNow(token)
	return r, err == nil, err
}

// grantNow grants the lease under token from now, the instant just before
// its write begins, and encodes it.
func (l *Leadership) grantNow(token FencingToken) (renewal, error) {
	start := time.Now()
	now := l.clock.NowMillis()
	lease := l.config.Grant(l.member, token, now)
	value, err := encodeLease(lease)
	if err != nil {
		return renewal{}, err
	}
	return renewal{lease: lease, value: value, fresh: freshness{mono: start, millis: now}}, nil
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
// goroutine to exit. Resign then clears the lease and takes the member off
// the roster, so the first standby takes rank 0 and challenges at once. A
// member that competes again registers again, at the tail of the roster.
//
// When the transport implements [GuardedWriter], the tombstone of the lease
// and the tombstone of the member's registration go in one transaction of the
// role's producer, under the epoch that is still this member's. A standby
// then sees both with one commit, and it takes rank 0 on the read that shows
// the lease cleared; with two writes it would wait for the second. The
// transaction is bounded by ctx and by the lease deadline, because a standby
// challenges at the deadline anyway. When it fails, or the lease already
// expired (another member may hold a newer epoch by then, so no guarded write
// is tried), the registration tombstone is appended on its own, as a
// candidate registers. Without a GuardedWriter, the lease tombstone is a
// [LeaseWriter.WriteLease] bounded the same way, and the registration
// tombstone follows as an append. An append is bounded by ctx and by the poll
// interval, a second at least.
//
// Resign returns the errors of the writes, and an error that wraps ErrNotHeld
// when the leadership had already ended.
func (l *Leadership) Resign(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	if l.done == nil {
		return errZeroLeadership
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
	deregistered := false
	if remaining := l.remaining(); remaining > 0 {
		var err error
		deregistered, err = l.clearLease(ctx, remaining)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if !deregistered {
		registerCtx, cancel := context.WithTimeout(ctx, max(l.poll, time.Second))
		defer cancel()
		if err := l.transport.Append(registerCtx, l.partition, l.regKey, nil); err != nil {
			errs = append(errs, fmt.Errorf("coordination: deregister %s from role %s: %w", l.member, l.role, err))
		}
	}
	return errors.Join(errs...)
}

// clearLease writes the tombstone of the lease, bounded by the extent left.
// With a GuardedWriter the same transaction carries the tombstone of the
// member's registration, and deregistered reports that it committed.
func (l *Leadership) clearLease(ctx context.Context, remaining time.Duration) (deregistered bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, remaining)
	defer cancel()
	if err := l.acquireSlot(ctx); err != nil {
		return false, fmt.Errorf("coordination: clear lease of role %s: %w", l.role, err)
	}
	defer l.releaseSlot()
	token := l.Token()
	var next FencingToken
	if l.guarded != nil {
		headers := withTerm(nil, l.Term())
		next, err = l.guarded.WriteGuarded(ctx, l.role, token, []GuardedRecord{
			l.leaseRecord(nil, headers),
			{Partition: l.partition, Key: l.regKey, Headers: headers, Offset: -1},
		})
		deregistered = err == nil
	} else {
		next, _, err = l.writeLeaseRecord(ctx, token, nil)
	}
	l.adoptToken(next)
	if err != nil {
		return false, fmt.Errorf("coordination: clear lease of role %s under token %s: %w", l.role, token, err)
	}
	return deregistered, nil
}

// writeLeaseRecord writes one record on the lease key, a lease or a
// tombstone, with the term of the leadership in its headers. It returns the
// token the coordinator holds after the commit, and the offset the record
// took, or -1 when the transport cannot tell.
func (l *Leadership) writeLeaseRecord(ctx context.Context, token FencingToken, value []byte) (FencingToken, int64, error) {
	if l.guarded != nil {
		records := []GuardedRecord{l.leaseRecord(value, withTerm(nil, l.Term()))}
		next, err := l.guarded.WriteGuarded(ctx, l.role, token, records)
		return next, records[0].Offset, err
	}
	if err := l.transport.WriteLease(ctx, l.partition, token, l.leaseKey, value); err != nil {
		return token, -1, err
	}
	return token, -1, nil
}

// leaseRecord is the guarded record of value on the lease key, a lease or
// a tombstone, with headers.
func (l *Leadership) leaseRecord(value []byte, headers []Header) GuardedRecord {
	return GuardedRecord{Partition: l.partition, Key: l.leaseKey, Value: value, Headers: headers, Offset: -1}
}

// run is the renewal goroutine. It renews at the renew instant of the last
// lease, retries a failed renewal within the poll interval, and closes done
// when the leadership ends.
func (l *Leadership) run(ctx context.Context) {
	defer close(l.done)
	retry := false
	for {
		seen := l.renewalCount()
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
		err := l.renewInBackground(ctx, seen)
		// A renewal that failed for another reason than the end of the
		// leadership is retried within the poll interval.
		retry = err != nil && !errors.Is(err, ErrNotHeld) && ctx.Err() == nil
	}
}

// renewInBackground is one renewal of the loop, bounded by the lease
// duration so a hung transport cannot hold the loop for ever. It writes
// nothing when a renewal committed since the loop counted seen: a Write
// carried it, and the loop waits for the renew instant of that lease.
func (l *Leadership) renewInBackground(ctx context.Context, seen uint64) error {
	ctx, cancel := context.WithTimeout(ctx, l.config.duration)
	defer cancel()
	if err := l.acquireSlot(ctx); err != nil {
		return err
	}
	defer l.releaseSlot()
	if l.renewalCount() != seen {
		return nil
	}
	return l.renewLocked(ctx)
}

// untilRenew returns the extent until the renew instant of the last lease.
func (l *Leadership) untilRenew() time.Duration {
	lease := l.Lease()
	return millisBetween(l.clock.NowMillis(), l.config.Timing(lease).RenewAt())
}
