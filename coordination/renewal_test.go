package coordination

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

func TestRenewalLoop(t *testing.T) {
	for _, mode := range txnModes {
		t.Run(mode.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cluster, transport, clock, l := holder(t, mode.bump)
				defer resign(t, l)
				first := l.Token()

				clock.Advance(9999 * time.Millisecond)
				synctest.Wait()
				if got := l.Lease().GrantedAt; got != t0 {
					t.Fatalf("renewed before the renew interval: granted at %d", got)
				}
				if got := l.ValidFor(); got != 30*time.Second-9999*time.Millisecond {
					t.Fatalf("ValidFor %v before the renewal", got)
				}
				clock.Advance(time.Millisecond)
				synctest.Wait()
				if got := l.Lease(); got.GrantedAt != t0+10_000 || got.Deadline != t0+40_000 {
					t.Fatalf("lease after one renew interval %+v", got)
				}
				if got := l.ValidFor(); got != 30*time.Second {
					t.Fatalf("ValidFor %v after the renewal, want 30s", got)
				}
				checkCoordinatorToken(t, transport, l)
				if mode.bump != l.Token().Supersedes(first) {
					t.Fatalf("token %s after a renewal, first %s", l.Token(), first)
				}

				clock.Advance(10 * time.Second)
				synctest.Wait()
				checkCoordinatorToken(t, transport, l)
				for _, r := range cluster.records(l.Partition()) {
					key, _ := DecodeKey(r.Key)
					if key.Kind != KindLease {
						continue
					}
					lease, err := DecodeLease(r.Value)
					if err != nil {
						t.Fatal(err)
					}
					if lease.Token != r.token {
						t.Fatalf("lease at offset %d carries %s, written under %s", r.Offset, lease.Token, r.token)
					}
				}
				if n := transport.callCount("WriteGuarded"); n != 3 {
					t.Fatalf("%d lease writes, want the grant and two renewals", n)
				}
			})
		})
	}
}

func TestRenewalWithoutGuardedWriter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster := newMemCluster(t)
		clock := NewManualClock(t0)
		transport := cluster.transport()
		l, err := AcquireLeadership(context.Background(), plainTransport{transport}, mustRole(t, "controller"), mustMember(t, "node-1"), testOptions(clock)...)
		if err != nil {
			t.Fatal(err)
		}
		defer resign(t, l)
		clock.Advance(10 * time.Second)
		synctest.Wait()
		if transport.callCount("WriteLease") != 2 || transport.callCount("WriteGuarded") != 0 {
			t.Fatalf("lease writes: %d WriteLease, %d WriteGuarded", transport.callCount("WriteLease"), transport.callCount("WriteGuarded"))
		}
		if l.Lease().GrantedAt != t0+10_000 {
			t.Fatalf("lease %+v", l.Lease())
		}
		_, err = l.Write(context.Background(), func(FencingToken) ([]GuardedRecord, error) {
			t.Fatal("build called without a GuardedWriter")
			return nil, nil
		})
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("Write without a GuardedWriter: %v", err)
		}
		if l.Err() != nil {
			t.Fatalf("unsupported Write ended the leadership: %v", l.Err())
		}
	})
}

func TestRenewalRetriesWithinPollInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, transport, clock, l := holder(t, false)
		defer resign(t, l)

		transport.down.Store(true)
		clock.Advance(10 * time.Second)
		synctest.Wait()
		if l.Err() != nil || l.Lease().GrantedAt != t0 {
			t.Fatalf("a failed renewal changed the leadership: %v, %+v", l.Err(), l.Lease())
		}
		transport.down.Store(false)
		clock.Advance(999 * time.Millisecond)
		synctest.Wait()
		if l.Lease().GrantedAt != t0 {
			t.Fatal("retried before the poll interval")
		}
		clock.Advance(time.Millisecond)
		synctest.Wait()
		if got := l.Lease().GrantedAt; got != t0+11_000 {
			t.Fatalf("retry granted at %d, want one poll interval after the failure", got)
		}
		// The schedule then follows the new grant.
		clock.Advance(10 * time.Second)
		synctest.Wait()
		if got := l.Lease().GrantedAt; got != t0+21_000 {
			t.Fatalf("next renewal granted at %d", got)
		}
	})
}

func TestRenewFenced(t *testing.T) {
	for _, mode := range txnModes {
		t.Run(mode.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cluster, transport, _, l := holder(t, mode.bump)
				held := l.Token()

				successor, err := cluster.transport().AcquireEpoch(context.Background(), l.Role())
				if err != nil {
					t.Fatal(err)
				}
				if !successor.Supersedes(held) {
					t.Fatalf("minted %s, not above %s", successor, held)
				}
				err = l.Renew(context.Background())
				if !errors.Is(err, ErrFenced) {
					t.Fatalf("Renew after a successor: %v", err)
				}
				synctest.Wait()
				if !isClosed(l.Done()) {
					t.Fatal("Done open after a fence")
				}
				if !errors.Is(l.Err(), ErrFenced) {
					t.Fatalf("Err %v", l.Err())
				}
				if l.ValidFor() != 0 {
					t.Fatalf("ValidFor %v after the end", l.ValidFor())
				}
				status, err := DescribeLeadership(context.Background(), transport, l.Role())
				if err != nil {
					t.Fatal(err)
				}
				if status.Authoritative(l.Token()) {
					t.Fatal("a deposed member is authoritative")
				}

				writes := transport.callCount("WriteGuarded")
				if _, err := l.Write(context.Background(), func(FencingToken) ([]GuardedRecord, error) {
					return []GuardedRecord{{Partition: l.Partition(), Key: []byte("k"), Value: []byte("v")}}, nil
				}); !errors.Is(err, ErrNotHeld) {
					t.Fatalf("Write after the end: %v", err)
				}
				if err := l.Renew(context.Background()); !errors.Is(err, ErrNotHeld) {
					t.Fatalf("Renew after the end: %v", err)
				}
				if err := l.Resign(context.Background()); !errors.Is(err, ErrNotHeld) {
					t.Fatalf("Resign after the end: %v", err)
				}
				if got := transport.callCount("WriteGuarded"); got != writes {
					t.Fatalf("%d transport writes after the end", got-writes)
				}
			})
		})
	}
}

func TestBackgroundRenewalFenced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster, _, clock, l := holder(t, false)
		if _, err := cluster.transport().AcquireEpoch(context.Background(), l.Role()); err != nil {
			t.Fatal(err)
		}
		clock.Advance(10 * time.Second)
		synctest.Wait()
		if !isClosed(l.Done()) || !errors.Is(l.Err(), ErrFenced) {
			t.Fatalf("background renewal after a fence: done %t, err %v", isClosed(l.Done()), l.Err())
		}
	})
}

func TestRenewEndings(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		apply bool
		ends  error // nil when the leadership keeps holding
	}{
		{"outcome unknown, committed", fmt.Errorf("commit: %w", ErrOutcomeUnknown), true, ErrOutcomeUnknown},
		{"outcome unknown, aborted", fmt.Errorf("commit: %w", ErrOutcomeUnknown), false, ErrOutcomeUnknown},
		{"clean abort", errors.New("request timed out, aborted"), false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, transport, _, l := holder(t, false)
				defer resign(t, l)
				transport.setFault(func(context.Context, string) (error, bool) { return tt.err, tt.apply })
				err := l.Renew(context.Background())
				transport.setFault(nil)
				if !errors.Is(err, tt.err) {
					t.Fatalf("Renew: %v", err)
				}
				synctest.Wait()
				if tt.ends == nil {
					if l.Err() != nil || isClosed(l.Done()) {
						t.Fatalf("a clean abort ended the leadership: %v", l.Err())
					}
					if err := l.Renew(context.Background()); err != nil {
						t.Fatalf("Renew after a clean abort: %v", err)
					}
					return
				}
				if !errors.Is(l.Err(), tt.ends) || !isClosed(l.Done()) {
					t.Fatalf("leadership after %v: done %t, err %v", tt.err, isClosed(l.Done()), l.Err())
				}
			})
		})
	}
}

func TestRenewHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, _, _, l := holder(t, false)
		defer resign(t, l)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := l.Renew(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Renew with a cancelled context: %v", err)
		}
		//lint:ignore SA1012 a nil context is bad input that must not panic
		if err := l.Renew(nil); err == nil {
			t.Fatal("Renew with a nil context succeeded")
		}
		if l.Err() != nil {
			t.Fatalf("a cancelled Renew ended the leadership: %v", l.Err())
		}
	})
}

func TestValidFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, transport, clock, l := holder(t, false)
		defer resign(t, l)
		clock.Advance(7 * time.Second)
		if got := l.ValidFor(); got != 23*time.Second {
			t.Fatalf("ValidFor %v, want 23s", got)
		}
		if _, err := l.Write(context.Background(), func(FencingToken) ([]GuardedRecord, error) {
			return []GuardedRecord{{Partition: TopicPartition{Topic: "dispatch.log"}, Value: []byte("v")}}, nil
		}); err != nil {
			t.Fatal(err)
		}
		if got := l.ValidFor(); got != 23*time.Second {
			t.Fatalf("ValidFor %v after a Write, want 23s", got)
		}
		transport.down.Store(true)
		clock.Advance(40 * time.Second)
		synctest.Wait()
		if got := l.ValidFor(); got != 0 {
			t.Fatalf("ValidFor %v past the deadline, want 0", got)
		}
		transport.down.Store(false)
		if err := l.Renew(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := l.ValidFor(); got != 30*time.Second {
			t.Fatalf("ValidFor %v after a renewal, want 30s", got)
		}
		clock.Set(t0) // a clock that steps back gives no more than a lease
		if got := l.ValidFor(); got != 30*time.Second {
			t.Fatalf("ValidFor %v after the clock stepped back", got)
		}
	})
}

func TestValidForSystemClock(t *testing.T) {
	cluster := newMemCluster(t)
	options := []Option{WithLeaseDuration(time.Hour), WithRenewInterval(time.Minute)}
	l, err := AcquireLeadership(context.Background(), cluster.transport(), mustRole(t, "controller"), mustMember(t, "node-1"), options...)
	if err != nil {
		t.Fatal(err)
	}
	defer resign(t, l)
	if !l.monotonic {
		t.Fatal("the default clock does not read the monotonic clock")
	}
	if got := l.ValidFor(); got <= 0 || got > time.Hour {
		t.Fatalf("ValidFor %v", got)
	}
	// The anchor is taken before the write began, so it never passes the
	// wall-clock grant instant by more than a millisecond of truncation.
	if l.fresh.mono.UnixMilli() < l.Lease().GrantedAt {
		t.Fatalf("freshness anchor %v after the grant %d", l.fresh.mono, l.Lease().GrantedAt)
	}
}
