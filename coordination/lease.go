package coordination

import (
	"fmt"
	"math"
	"time"
)

// The default timings of a lease. Change one with [WithLeaseDuration],
// [WithRenewInterval], or [WithChallengeStagger].
const (
	// DefaultLeaseDuration is the default extent of a lease.
	DefaultLeaseDuration = 30 * time.Second

	// DefaultRenewInterval is the default gap between two renewals by the
	// holder.
	DefaultRenewInterval = 10 * time.Second

	// DefaultChallengeStagger is the default extra delay that one rank of
	// succession adds.
	DefaultChallengeStagger = 5 * time.Second
)

// LeaseConfig holds the three timings of one role. The timings are
// independent of the record layout, so one process holds several roles with
// different timings.
//
// The lease adds no safety. It decides when a standby challenges a quiet
// holder, and nothing else. A wrong timing makes a failover early or late. A
// wrong timing never makes two members authoritative.
//
// Build a value with [NewLeaseConfig] or take [DefaultLeaseConfig].
type LeaseConfig struct {
	duration         time.Duration
	renewInterval    time.Duration
	challengeStagger time.Duration
}

// NewLeaseConfig builds a lease policy from three extents. It rejects an
// extent at or below zero, and it rejects a renew interval at or above the
// lease duration, because the holder then never renews in time.
//
// A caller should set renewInterval to at most a third of duration. The
// holder then keeps two more attempts before the deadline. This constructor
// accepts a larger value. Ask [LeaseConfig.RenewsWithMargin] which side of
// that bound a value is on.
func NewLeaseConfig(duration, renewInterval, challengeStagger time.Duration) (LeaseConfig, error) {
	switch {
	case duration <= 0:
		return LeaseConfig{}, fmt.Errorf("coordination: lease duration %v is not positive", duration)
	case renewInterval <= 0:
		return LeaseConfig{}, fmt.Errorf("coordination: renew interval %v is not positive", renewInterval)
	case challengeStagger <= 0:
		return LeaseConfig{}, fmt.Errorf("coordination: challenge stagger %v is not positive", challengeStagger)
	case renewInterval >= duration:
		return LeaseConfig{}, fmt.Errorf("coordination: renew interval %v is not below the lease duration %v", renewInterval, duration)
	}
	return LeaseConfig{duration: duration, renewInterval: renewInterval, challengeStagger: challengeStagger}, nil
}

// DefaultLeaseConfig returns the config of [DefaultLeaseDuration],
// [DefaultRenewInterval], and [DefaultChallengeStagger].
func DefaultLeaseConfig() LeaseConfig {
	return LeaseConfig{
		duration:         DefaultLeaseDuration,
		renewInterval:    DefaultRenewInterval,
		challengeStagger: DefaultChallengeStagger,
	}
}

// Duration returns the extent of a lease that a member takes now.
func (c LeaseConfig) Duration() time.Duration { return c.duration }

// RenewInterval returns the gap between two renewals by the holder.
func (c LeaseConfig) RenewInterval() time.Duration { return c.renewInterval }

// ChallengeStagger returns the extra delay that one rank of succession adds.
func (c LeaseConfig) ChallengeStagger() time.Duration { return c.challengeStagger }

// RenewsWithMargin reports whether the renew interval leaves the holder two
// spare attempts. The interval this package recommends is at most a third of
// the lease duration. A config outside that bound still works, and the holder
// then loses the role after fewer missed renewals.
func (c LeaseConfig) RenewsWithMargin() bool {
	return c.renewInterval <= c.duration/3
}

// ChallengeDelay returns the extra delay that a challenger of this rank takes.
// Rank 0 takes none. The value saturates, so a very large rank does not wrap
// the instant that a caller adds it to.
func (c LeaseConfig) ChallengeDelay(rank int) time.Duration {
	if rank <= 0 || c.challengeStagger <= 0 {
		return 0
	}
	if int64(rank) > math.MaxInt64/int64(c.challengeStagger) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(rank) * c.challengeStagger
}

// Grant builds the lease record that a member writes after it mints token. A
// renewal writes the same record with the same token and a later nowMillis,
// so this one method covers a first grant and a renewal.
func (c LeaseConfig) Grant(member MemberID, token FencingToken, nowMillis int64) Lease {
	return Lease{
		Member:    member,
		Token:     token,
		GrantedAt: nowMillis,
		Deadline:  addMillis(nowMillis, c.duration),
	}
}

// Timing binds a lease record to this policy and answers the clock questions
// about it.
func (c LeaseConfig) Timing(lease Lease) LeaseTiming { return NewLeaseTiming(lease, c) }

// LeaseTiming is the lease clock of one lease record under one policy.
//
// Every method takes and returns milliseconds since the Unix epoch, because a
// deadline is a coordinate and not an extent. [LeaseTiming.RemainingAt] is the
// one exception, and it returns the extent that is left.
type LeaseTiming struct {
	lease  Lease
	config LeaseConfig
}

// NewLeaseTiming binds a lease record to a policy.
func NewLeaseTiming(lease Lease, config LeaseConfig) LeaseTiming {
	return LeaseTiming{lease: lease, config: config}
}

// Lease returns the lease record behind this clock.
func (t LeaseTiming) Lease() Lease { return t.lease }

// ExpiresAt returns the instant the lease expires, in milliseconds since the
// Unix epoch.
func (t LeaseTiming) ExpiresAt() int64 { return t.lease.Deadline }

// LiveAt reports whether the lease is live at this instant. The lease is live
// before its deadline and expired from the deadline on. The rank 0 challenger
// challenges at exactly the deadline, so the two tests leave no gap and no
// overlap.
func (t LeaseTiming) LiveAt(nowMillis int64) bool { return nowMillis < t.lease.Deadline }

// RemainingAt returns the extent that is left before the deadline, and zero
// after the deadline.
func (t LeaseTiming) RemainingAt(nowMillis int64) time.Duration {
	if nowMillis >= t.lease.Deadline {
		return 0
	}
	return millisBetween(nowMillis, t.lease.Deadline)
}

// ChallengeAt returns the instant at which a challenger of this rank
// challenges. Rank 0 challenges at the deadline, and each later rank adds one
// challenge stagger. The stagger saves epoch churn and gives no safety.
func (t LeaseTiming) ChallengeAt(rank int) int64 {
	return addMillis(t.lease.Deadline, t.config.ChallengeDelay(rank))
}

// RenewAt returns the instant at which the holder writes its next renewal. The
// value is the grant instant plus the renew interval, and it never passes the
// deadline. A holder that follows it always writes before it loses the lease.
func (t LeaseTiming) RenewAt() int64 {
	return min(addMillis(t.lease.GrantedAt, t.config.renewInterval), t.lease.Deadline)
}

// RenewDueAt reports whether the holder writes a renewal at this instant.
func (t LeaseTiming) RenewDueAt(nowMillis int64) bool { return nowMillis >= t.RenewAt() }

// addMillis adds an extent to an instant in milliseconds and saturates at the
// bounds of int64 instead of wrapping. A negative extent counts as zero.
func addMillis(instant int64, extent time.Duration) int64 {
	ms := extent.Milliseconds()
	if ms <= 0 {
		return instant
	}
	if instant > math.MaxInt64-ms {
		return math.MaxInt64
	}
	return instant + ms
}

// millisBetween returns the extent from one instant to a later one, and
// saturates at the largest time.Duration.
func millisBetween(from, to int64) time.Duration {
	if to <= from {
		return 0
	}
	diff := uint64(to) - uint64(from)
	if diff > uint64(math.MaxInt64/int64(time.Millisecond)) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(diff) * time.Millisecond
}
