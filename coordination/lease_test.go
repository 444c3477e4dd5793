package coordination

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestNewLeaseConfig(t *testing.T) {
	tests := []struct {
		duration, renew, stagger time.Duration
		want                     string // empty when accepted
	}{
		{30 * time.Second, 10 * time.Second, 5 * time.Second, ""},
		{30 * time.Second, 29 * time.Second, time.Nanosecond, ""},
		{0, time.Second, time.Second, "lease duration 0s"},
		{-time.Second, time.Second, time.Second, "lease duration -1s"},
		{time.Minute, 0, time.Second, "renew interval 0s"},
		{time.Minute, time.Second, -time.Millisecond, "challenge stagger -1ms"},
		{time.Minute, time.Minute, time.Second, "renew interval 1m0s is not below the lease duration 1m0s"},
		{time.Minute, 2 * time.Minute, time.Second, "renew interval 2m0s"},
	}
	for _, tt := range tests {
		config, err := NewLeaseConfig(tt.duration, tt.renew, tt.stagger)
		if tt.want == "" {
			if err != nil || config.Duration() != tt.duration || config.RenewInterval() != tt.renew || config.ChallengeStagger() != tt.stagger {
				t.Errorf("NewLeaseConfig(%v, %v, %v) = %+v, %v", tt.duration, tt.renew, tt.stagger, config, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewLeaseConfig(%v, %v, %v): error %v, want %q", tt.duration, tt.renew, tt.stagger, err, tt.want)
		}
	}
}

func TestDefaultLeaseConfig(t *testing.T) {
	config := DefaultLeaseConfig()
	if config.Duration() != DefaultLeaseDuration || config.RenewInterval() != DefaultRenewInterval || config.ChallengeStagger() != DefaultChallengeStagger {
		t.Fatalf("%+v", config)
	}
	if !config.RenewsWithMargin() {
		t.Fatal("the default config renews without margin")
	}
	if mustConfig(t, 30*time.Second, 10*time.Second+time.Nanosecond, time.Second).RenewsWithMargin() {
		t.Fatal("a renew interval above a third has margin")
	}
}

func TestChallengeDelaySaturates(t *testing.T) {
	config := DefaultLeaseConfig()
	tests := map[int]time.Duration{
		-5:                 0,
		0:                  0,
		1:                  5 * time.Second,
		7:                  35 * time.Second,
		math.MaxInt:        math.MaxInt64,
		math.MaxInt64 / 10: math.MaxInt64,
	}
	for rank, want := range tests {
		if got := config.ChallengeDelay(rank); got != want {
			t.Errorf("ChallengeDelay(%d) = %v, want %v", rank, got, want)
		}
	}
	if got := (LeaseConfig{}).ChallengeDelay(3); got != 0 {
		t.Errorf("zero config: %v", got)
	}
	timing := config.Timing(Lease{Deadline: math.MaxInt64 - 10})
	if got := timing.ChallengeAt(math.MaxInt); got != math.MaxInt64 {
		t.Fatalf("ChallengeAt of a huge rank wrapped to %d", got)
	}
}

func TestLeaseTiming(t *testing.T) {
	config := mustConfig(t, 30*time.Second, 10*time.Second, 5*time.Second)
	member := mustMember(t, "node-1")
	token := mustToken(t, 11, 1)
	lease := config.Grant(member, token, 1000)
	if lease != (Lease{Member: member, Token: token, GrantedAt: 1000, Deadline: 31_000}) {
		t.Fatalf("Grant %+v", lease)
	}
	timing := config.Timing(lease)
	if timing != NewLeaseTiming(lease, config) || timing.Lease() != lease || timing.ExpiresAt() != 31_000 {
		t.Fatalf("timing %+v", timing)
	}
	// LiveAt: live before the deadline, expired exactly at it.
	if !timing.LiveAt(30_999) || timing.LiveAt(31_000) || timing.LiveAt(40_000) {
		t.Fatal("LiveAt at the deadline edge")
	}
	// The rank-0 challenger challenges exactly where LiveAt turns false.
	if timing.ChallengeAt(0) != 31_000 || timing.ChallengeAt(2) != 41_000 {
		t.Fatalf("ChallengeAt %d %d", timing.ChallengeAt(0), timing.ChallengeAt(2))
	}
	for now, want := range map[int64]time.Duration{0: 31 * time.Second, 30_999: time.Millisecond, 31_000: 0, 99_000: 0} {
		if got := timing.RemainingAt(now); got != want {
			t.Errorf("RemainingAt(%d) = %v, want %v", now, got, want)
		}
	}
	if timing.RenewAt() != 11_000 || timing.RenewDueAt(10_999) || !timing.RenewDueAt(11_000) {
		t.Fatalf("RenewAt %d", timing.RenewAt())
	}
}

func TestRenewAtNeverPassesDeadline(t *testing.T) {
	config := mustConfig(t, 30*time.Second, 29*time.Second, time.Second)
	// A lease record whose deadline is closer than the renew interval, as a
	// holder with another config writes.
	lease := Lease{GrantedAt: 0, Deadline: 5000}
	timing := config.Timing(lease)
	if got := timing.RenewAt(); got != 5000 {
		t.Fatalf("RenewAt %d past the deadline 5000", got)
	}
	for _, granted := range []int64{math.MinInt64, -1, 0, math.MaxInt64 - 1} {
		lease := config.Grant(MemberID{}, NoEpoch, granted)
		timing := config.Timing(lease)
		if timing.RenewAt() > timing.ExpiresAt() || lease.Deadline < lease.GrantedAt {
			t.Fatalf("granted at %d: renew at %d, deadline %d", granted, timing.RenewAt(), timing.ExpiresAt())
		}
	}
}

func TestRemainingAtSaturates(t *testing.T) {
	timing := DefaultLeaseConfig().Timing(Lease{Deadline: math.MaxInt64})
	if got := timing.RemainingAt(math.MinInt64); got != math.MaxInt64 {
		t.Fatalf("RemainingAt over the whole int64 range: %v", got)
	}
}
