package coordination

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// txnModes runs a test under both token behaviours of Kafka: the epoch stays
// put for a producer's life (transactions v1), or every commit bumps it (v2).
var txnModes = []struct {
	name string
	bump bool
}{{"v1", false}, {"v2", true}}

// holder acquires the role for member on a fresh cluster and clock, and
// returns them all.
func holder(t *testing.T, bump bool) (*memCluster, *memTransport, *ManualClock, *Leadership) {
	t.Helper()
	cluster := newMemCluster(t)
	cluster.bumpOnCommit = bump
	clock := NewManualClock(t0)
	transport := cluster.transport()
	l, err := AcquireLeadership(context.Background(), transport, mustRole(t, "controller"), mustMember(t, "node-1"), testOptions(clock)...)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	synctest.Wait() // the renewal goroutine waits on the clock now
	return cluster, transport, clock, l
}

// checkCoordinatorToken asserts invariant I3: the leadership shows the token
// the coordinator holds now.
func checkCoordinatorToken(t *testing.T, transport *memTransport, l *Leadership) {
	t.Helper()
	status, err := DescribeLeadership(context.Background(), transport, l.Role())
	if err != nil {
		t.Fatal(err)
	}
	if !status.Authoritative(l.Token()) {
		t.Fatalf("leadership shows %s, coordinator holds %s", l.Token(), status.Token)
	}
}

func TestAcquireLeadershipAlone(t *testing.T) {
	for _, mode := range txnModes {
		t.Run(mode.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cluster, transport, _, l := holder(t, mode.bump)
				defer resign(t, l)

				if l.Role().String() != "controller" || l.Member().String() != "node-1" {
					t.Fatalf("role %s member %s", l.Role(), l.Member())
				}
				want, err := RoleTopicPartition(l.Role())
				if err != nil {
					t.Fatal(err)
				}
				if l.Partition() != want || want.Partition != 12 {
					t.Fatalf("partition %+v, want %+v", l.Partition(), want)
				}
				lease := l.Lease()
				if lease.Member != l.Member() || lease.GrantedAt != t0 || lease.Deadline != t0+30_000 {
					t.Fatalf("first lease %+v", lease)
				}
				checkCoordinatorToken(t, transport, l)
				if l.Err() != nil || isClosed(l.Done()) {
					t.Fatalf("fresh leadership ended: %v", l.Err())
				}
				if got := l.ValidFor(); got != 30*time.Second {
					t.Fatalf("ValidFor %v, want 30s", got)
				}

				records := cluster.records(l.Partition())
				if len(records) != 2 {
					t.Fatalf("log holds %d records, want a registration and a lease", len(records))
				}
				key, err := DecodeKey(records[0].Key)
				if err != nil || key != RegistrationKey(l.Role(), l.Member()) {
					t.Fatalf("first record key %+v, %v", key, err)
				}
				written, err := DecodeLease(records[1].Value)
				if err != nil {
					t.Fatal(err)
				}
				// I4: the lease record carries the token of its transaction.
				if written.Token != records[1].token || written != lease {
					t.Fatalf("lease record %+v written under %s, leadership wrote %+v", written, records[1].token, lease)
				}
			})
		})
	}
}

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

func TestWrite(t *testing.T) {
	for _, mode := range txnModes {
		t.Run(mode.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cluster, transport, _, l := holder(t, mode.bump)
				defer resign(t, l)
				commands := TopicPartition{Topic: "dispatch.log", Partition: 12}

				for i := range 3 {
					before := l.Token()
					var built FencingToken
					written, err := l.Write(context.Background(), func(token FencingToken) ([]GuardedRecord, error) {
						built = token
						return []GuardedRecord{
							{Partition: commands, Key: []byte("cmd"), Value: []byte{byte(i)}, Headers: []Header{{Key: "token", Value: []byte(token.String())}}},
							{Partition: commands, Key: []byte("pos"), Value: []byte{byte(i)}},
						}, nil
					})
					if err != nil {
						t.Fatalf("write %d: %v", i, err)
					}
					if built != before || written != before {
						t.Fatalf("write %d: built under %s, returned %s, token before %s", i, built, written, before)
					}
					checkCoordinatorToken(t, transport, l)
					if mode.bump != l.Token().Supersedes(written) {
						t.Fatalf("write %d: token %s after a commit under %s", i, l.Token(), written)
					}
				}
				records := cluster.records(commands)
				if len(records) != 6 {
					t.Fatalf("%d records committed, want 6", len(records))
				}
				for _, r := range records {
					if r.Key[0] == 'c' && string(r.headers[0].Value) != r.token.String() {
						t.Fatalf("record at %d carries %s, written under %s", r.Offset, r.headers[0].Value, r.token)
					}
				}
				// A Write proves authority, and it does not extend the lease.
				if l.Lease().GrantedAt != t0 {
					t.Fatalf("a Write moved the lease: %+v", l.Lease())
				}
				// The renewal after Writes runs under the newest token.
				if err := l.Renew(context.Background()); err != nil {
					t.Fatal(err)
				}
				checkCoordinatorToken(t, transport, l)
			})
		})
	}
}

func TestWriteErrors(t *testing.T) {
	oneRecord := func(tp TopicPartition) func(FencingToken) ([]GuardedRecord, error) {
		return func(FencingToken) ([]GuardedRecord, error) {
			return []GuardedRecord{{Partition: tp, Key: []byte("k"), Value: []byte("v")}}, nil
		}
	}
	t.Run("build error", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, transport, _, l := holder(t, false)
			defer resign(t, l)
			boom := errors.New("boom")
			token, err := l.Write(context.Background(), func(FencingToken) ([]GuardedRecord, error) { return nil, boom })
			if !errors.Is(err, boom) || token != NoEpoch {
				t.Fatalf("Write with a failing build: %s, %v", token, err)
			}
			if transport.callCount("WriteGuarded") != 1 || l.Err() != nil {
				t.Fatal("a failing build reached the transport or ended the leadership")
			}
		})
	})
	t.Run("no records", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, transport, _, l := holder(t, true)
			defer resign(t, l)
			before := l.Token()
			token, err := l.Write(context.Background(), func(FencingToken) ([]GuardedRecord, error) { return nil, nil })
			if err != nil || token != before || l.Token() != before {
				t.Fatalf("empty Write: %s, %v", token, err)
			}
			if transport.callCount("WriteGuarded") != 1 {
				t.Fatal("an empty Write reached the transport")
			}
		})
	})
	t.Run("nil build", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, _, _, l := holder(t, false)
			defer resign(t, l)
			if _, err := l.Write(context.Background(), nil); err == nil {
				t.Fatal("Write with a nil build succeeded")
			}
		})
	})
	t.Run("cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, _, _, l := holder(t, false)
			defer resign(t, l)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if _, err := l.Write(ctx, oneRecord(l.Partition())); !errors.Is(err, context.Canceled) {
				t.Fatalf("Write with a cancelled context: %v", err)
			}
		})
	})
	for _, tt := range []struct {
		name  string
		err   error
		apply bool
		ends  bool
	}{
		{"clean abort", errors.New("produce failed, aborted"), false, false},
		{"fenced", fmt.Errorf("produce: %w", ErrFenced), false, true},
		{"outcome unknown", fmt.Errorf("end txn: %w", ErrOutcomeUnknown), true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, transport, _, l := holder(t, false)
				defer resign(t, l)
				before := l.Token()
				transport.setFault(func(context.Context, string) (error, bool) { return tt.err, tt.apply })
				token, err := l.Write(context.Background(), oneRecord(TopicPartition{Topic: "dispatch.log"}))
				transport.setFault(nil)
				if !errors.Is(err, tt.err) || token != before {
					t.Fatalf("Write: %s, %v", token, err)
				}
				synctest.Wait()
				if tt.ends != isClosed(l.Done()) || tt.ends != (l.Err() != nil) {
					t.Fatalf("after %v: done %t, err %v", tt.err, isClosed(l.Done()), l.Err())
				}
				if tt.ends && !errors.Is(l.Err(), tt.err) {
					t.Fatalf("Err %v does not wrap %v", l.Err(), tt.err)
				}
			})
		})
	}
}

// TestRenewalWaitsForWrite checks that a renewal and a Write never run at
// once: the role has one transactional producer.
func TestRenewalWaitsForWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, transport, clock, l := holder(t, true)
		defer resign(t, l)

		release := make(chan struct{})
		building := make(chan struct{})
		written := make(chan error, 1)
		go func() {
			_, err := l.Write(context.Background(), func(FencingToken) ([]GuardedRecord, error) {
				close(building)
				<-release
				return []GuardedRecord{{Partition: TopicPartition{Topic: "dispatch.log"}, Value: []byte("v")}}, nil
			})
			written <- err
		}()
		<-building
		clock.Advance(10 * time.Second) // the renewal is due now
		synctest.Wait()
		if n := transport.callCount("WriteGuarded"); n != 1 {
			t.Fatalf("a renewal ran during a Write: %d guarded writes", n)
		}
		close(release)
		if err := <-written; err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := transport.callCount("WriteGuarded"); n != 3 {
			t.Fatalf("%d guarded writes, want the grant, the Write, and the renewal after it", n)
		}
		if l.Lease().GrantedAt != t0+10_000 {
			t.Fatalf("lease %+v", l.Lease())
		}
		checkCoordinatorToken(t, transport, l)
	})
}

func TestResign(t *testing.T) {
	for _, mode := range txnModes {
		t.Run(mode.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cluster, _, clock, l := holder(t, mode.bump)
				standby := startContender(cluster.transport(), l.Role(), mustMember(t, "node-2"), testOptions(clock)...)
				synctest.Wait()
				if _, ok := standby.poll(); ok {
					t.Fatal("the standby won against a live lease")
				}

				if err := l.Resign(context.Background()); err != nil {
					t.Fatalf("Resign: %v", err)
				}
				if !isClosed(l.Done()) || !errors.Is(l.Err(), ErrNotHeld) {
					t.Fatalf("after Resign: done %t, err %v", isClosed(l.Done()), l.Err())
				}
				if l.ValidFor() != 0 {
					t.Fatal("ValidFor after Resign")
				}
				if state := cluster.state(l.Partition(), l.Role()); state.Lease != nil {
					t.Fatalf("lease after Resign: %+v", state.Lease)
				}
				if err := l.Resign(context.Background()); !errors.Is(err, ErrNotHeld) {
					t.Fatalf("second Resign: %v", err)
				}

				// The standby finds the tombstone on its next read, a poll
				// interval later at most, and not at the deadline.
				clock.Advance(time.Second)
				synctest.Wait()
				r, ok := standby.poll()
				if !ok || r.err != nil {
					t.Fatalf("standby after a resignation: done %t, err %v", ok, r.err)
				}
				if r.leadership.Lease().GrantedAt != t0+1000 {
					t.Fatalf("standby lease %+v", r.leadership.Lease())
				}
				standby.stop(t)
			})
		})
	}
}

func TestResignWriteFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster, transport, _, l := holder(t, false)
		transport.setFault(func(context.Context, string) (error, bool) { return errUnreachable, false })
		if err := l.Resign(context.Background()); !errors.Is(err, errUnreachable) {
			t.Fatalf("Resign with a failing write: %v", err)
		}
		if !isClosed(l.Done()) || !errors.Is(l.Err(), ErrNotHeld) {
			t.Fatal("a failed tombstone left the leadership holding")
		}
		if state := cluster.state(l.Partition(), l.Role()); state.Lease == nil {
			t.Fatal("a failed tombstone cleared the lease")
		}
	})
}

func TestResignBoundedByDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, transport, clock, l := holder(t, false)
		clock.Advance(25 * time.Second)
		transport.down.Store(true) // renewals fail from now on
		synctest.Wait()
		transport.down.Store(false)
		start := time.Now()
		transport.setFault(func(ctx context.Context, op string) (error, bool) {
			if op != "WriteGuarded" {
				return nil, true
			}
			<-ctx.Done()
			return ctx.Err(), false
		})
		err := l.Resign(context.Background())
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Resign with a hung write: %v", err)
		}
		// Five seconds of the lease were left.
		if waited := time.Since(start); waited != 5*time.Second {
			t.Fatalf("Resign waited %v for the tombstone", waited)
		}
	})
}

func TestResignAfterExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, transport, clock, l := holder(t, false)
		transport.down.Store(true)
		clock.Advance(30 * time.Second)
		synctest.Wait()
		transport.down.Store(false)
		writes := transport.callCount("WriteGuarded")
		if err := l.Resign(context.Background()); err != nil {
			t.Fatalf("Resign after the deadline: %v", err)
		}
		if transport.callCount("WriteGuarded") != writes {
			t.Fatal("Resign wrote a tombstone for an expired lease")
		}
		if !isClosed(l.Done()) {
			t.Fatal("Done open")
		}
	})
}

func TestResignCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, _, _, l := holder(t, false)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := l.Resign(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Resign with a cancelled context: %v", err)
		}
		<-l.Done()
		if !errors.Is(l.Err(), ErrNotHeld) {
			t.Fatalf("Err %v", l.Err())
		}
		//lint:ignore SA1012 a nil context is bad input that must not panic
		if err := l.Resign(nil); err == nil {
			t.Fatal("Resign with a nil context succeeded")
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

func TestAcquireLeadershipRejectsBadInput(t *testing.T) {
	role := mustRole(t, "controller")
	member := mustMember(t, "node-1")
	tests := []struct {
		name    string
		ctx     context.Context
		role    Role
		member  MemberID
		nilTr   bool
		options []Option
		want    string
	}{
		{name: "nil context", role: role, member: member, want: "context is nil"},
		{name: "nil transport", ctx: context.Background(), role: role, member: member, nilTr: true, want: "transport is nil"},
		{name: "zero role", ctx: context.Background(), member: member, want: "role is empty"},
		{name: "zero member", ctx: context.Background(), role: role, want: "member id is empty"},
		{name: "renew at lease", ctx: context.Background(), role: role, member: member, options: []Option{WithRenewInterval(30 * time.Second)}, want: "renew interval 30s is not below the lease duration 30s"},
		{name: "lease below renew", ctx: context.Background(), role: role, member: member, options: []Option{WithLeaseDuration(5 * time.Second)}, want: "renew interval 10s is not below the lease duration 5s"},
		{name: "partitions", ctx: context.Background(), role: role, member: member, options: []Option{WithPartitions(0)}, want: "partition count 0"},
		{name: "poll", ctx: context.Background(), role: role, member: member, options: []Option{WithPollInterval(-time.Second)}, want: "poll interval -1s"},
		{name: "topic", ctx: context.Background(), role: role, member: member, options: []Option{WithTopic("bad topic")}, want: `topic "bad topic"`},
		{name: "clock", ctx: context.Background(), role: role, member: member, options: []Option{WithClock(nil)}, want: "clock is nil"},
		{name: "lease config", ctx: context.Background(), role: role, member: member, options: []Option{WithLeaseConfig(LeaseConfig{})}, want: "zero value"},
		{name: "stagger", ctx: context.Background(), role: role, member: member, options: []Option{WithChallengeStagger(0)}, want: "challenge stagger 0s"},
		{name: "lease", ctx: context.Background(), role: role, member: member, options: []Option{WithLeaseDuration(0)}, want: "lease duration 0s"},
		{name: "renew", ctx: context.Background(), role: role, member: member, options: []Option{WithRenewInterval(-1)}, want: "renew interval -1ns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			transport := newMemCluster(t).transport()
			var tr Transport = transport
			if tt.nilTr {
				tr = nil
			}
			l, err := AcquireLeadership(tt.ctx, tr, tt.role, tt.member, tt.options...)
			if err == nil || l != nil {
				t.Fatalf("accepted: %v", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not name %q", err, tt.want)
			}
			transport.mu.Lock()
			calls := len(transport.calls)
			transport.mu.Unlock()
			if calls != 0 {
				t.Fatalf("bad input reached the transport: %v", transport.calls)
			}
		})
	}
}

func TestAcquireLeadershipCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster, _, clock, l := holder(t, false)
		defer resign(t, l)
		standby := cluster.transport()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := AcquireLeadership(ctx, standby, l.Role(), mustMember(t, "node-2"), testOptions(clock)...)
			done <- err
		}()
		synctest.Wait()
		if state := cluster.state(l.Partition(), l.Role()); len(state.Roster) != 2 {
			t.Fatalf("roster while waiting %+v", state.Roster)
		}
		time.Sleep(3 * time.Second) // fake time of the bubble: the context deadline
		err := <-done
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("AcquireLeadership past its deadline: %v", err)
		}
		// The member withdrew, so it slows no standby behind it.
		if state := cluster.state(l.Partition(), l.Role()); len(state.Roster) != 1 || state.Roster[0].Member != l.Member() {
			t.Fatalf("roster after a cancelled campaign %+v", state.Roster)
		}
	})
}

func TestAcquireLeadershipTransportErrors(t *testing.T) {
	for _, op := range []string{"Append", "ReadPartition", "AcquireEpoch", "WriteGuarded"} {
		t.Run(op, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cluster := newMemCluster(t)
				transport := cluster.transport()
				boom := errors.New("boom")
				transport.setFault(func(_ context.Context, got string) (error, bool) {
					if got == op {
						return boom, false
					}
					return nil, true
				})
				l, err := AcquireLeadership(context.Background(), transport, mustRole(t, "controller"), mustMember(t, "node-1"), testOptions(NewManualClock(t0))...)
				if !errors.Is(err, boom) || l != nil {
					t.Fatalf("AcquireLeadership with a failing %s: %v", op, err)
				}
				if !strings.Contains(err.Error(), "controller") || !strings.Contains(err.Error(), "node-1") {
					t.Fatalf("error %q names neither role nor member", err)
				}
				tp, _ := RoleTopicPartition(mustRole(t, "controller"))
				state := cluster.state(tp, mustRole(t, "controller"))
				if len(state.Roster) != 0 {
					t.Fatalf("roster after a failed campaign %+v", state.Roster)
				}
			})
		})
	}
}

// TestAcquireLeadershipReclaimsOwnLease checks that a lease naming this
// member, left by an earlier incarnation, takes the path of a challenge: a
// new epoch fences the earlier incarnation.
func TestAcquireLeadershipReclaimsOwnLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster, _, clock, first := holder(t, false)
		again, err := AcquireLeadership(context.Background(), cluster.transport(), first.Role(), first.Member(), testOptions(clock)...)
		if err != nil {
			t.Fatal(err)
		}
		defer resign(t, again)
		if !again.Token().Supersedes(first.Token()) {
			t.Fatalf("new incarnation %s, earlier %s", again.Token(), first.Token())
		}
		if err := first.Renew(context.Background()); !errors.Is(err, ErrFenced) {
			t.Fatalf("earlier incarnation renews: %v", err)
		}
		<-first.Done()
	})
}

// TestAcquireLeadershipLosesRace: two challengers mint epochs at once; the
// one that minted first is fenced on its first lease write, and waits again.
func TestAcquireLeadershipLosesRace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster := newMemCluster(t)
		clock := NewManualClock(t0)
		role := mustRole(t, "controller")
		tp, _ := RoleTopicPartition(role)
		rivalMember := mustMember(t, "node-2")
		loser := cluster.transport()
		rival := cluster.transport()
		var raced atomic.Bool
		loser.setFault(func(ctx context.Context, op string) (error, bool) {
			if op != "WriteGuarded" || raced.Swap(true) {
				return nil, true
			}
			// The rival challenges between our AcquireEpoch and our first
			// lease write, and writes its lease first.
			token, err := rival.AcquireEpoch(ctx, role)
			if err != nil {
				t.Errorf("rival: %v", err)
				return nil, true
			}
			lease := DefaultLeaseConfig().Grant(rivalMember, token, clock.NowMillis())
			if _, err := rival.WriteGuarded(ctx, role, token, []GuardedRecord{{Partition: tp, Key: EncodeKey(LeaseKey(role)), Value: EncodeLease(lease)}}); err != nil {
				t.Errorf("rival lease: %v", err)
			}
			return nil, true
		})
		c := startContender(loser, role, mustMember(t, "node-1"), testOptions(clock)...)
		synctest.Wait()
		if !raced.Load() {
			t.Fatal("the rival did not run")
		}
		if _, ok := c.poll(); ok {
			t.Fatal("the fenced challenger returned")
		}
		if n := loser.callCount("AcquireEpoch"); n != 1 {
			t.Fatalf("the fenced challenger minted %d epochs before it waited", n)
		}
		clock.Advance(time.Second)
		synctest.Wait()
		if _, ok := c.poll(); ok {
			t.Fatal("the fenced challenger took the role from a live lease")
		}
		if n := cluster.acquireCount(); n != 2 {
			t.Fatalf("%d epochs minted, want 2", n)
		}
		if state := cluster.state(tp, role); state.Lease == nil || state.Lease.Member != rivalMember {
			t.Fatalf("lease %+v, want the rival's", state.Lease)
		}
		if r := c.stop(t); !errors.Is(r.err, context.Canceled) {
			t.Fatalf("stopped campaign: %v", r.err)
		}
	})
}

// TestCampaignReadsAndWaits checks the read pattern of a standby: a read that
// shows a change is followed by a read at once, a read that shows nothing new
// by a wait of min(poll interval, until the next evaluation is due).
func TestCampaignReadsAndWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster, holderTransport, clock, l := holder(t, false)
		defer resign(t, l)
		holderTransport.down.Store(true) // the lease stays at t0 + 30s
		clock.Set(t0 + 29_700)
		synctest.Wait()

		recorder := &recordingClock{ManualClock: clock}
		standby := cluster.transport()
		c := startContender(standby, l.Role(), mustMember(t, "node-2"), testOptions(recorder)...)
		synctest.Wait()
		if n := standby.callCount("ReadPartition"); n != 2 {
			t.Fatalf("%d reads, want one that saw the registration and one that saw nothing new", n)
		}
		if waits := recorder.takeWaits(); len(waits) != 1 || waits[0] != 300*time.Millisecond {
			t.Fatalf("waits %v, want one of 300ms until the deadline", waits)
		}
		clock.Advance(300 * time.Millisecond)
		synctest.Wait()
		r, ok := c.poll()
		if !ok || r.err != nil {
			t.Fatalf("standby at the deadline: %t, %v", ok, r.err)
		}
		if r.leadership.Lease().GrantedAt != t0+30_000 {
			t.Fatalf("took the role at %d", r.leadership.Lease().GrantedAt)
		}
		c.stop(t)
	})
}

// TestCampaignReregisters: a registration that does not show in the roster
// is written again, at most once per poll interval.
func TestCampaignReregisters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster := newMemCluster(t)
		clock := NewManualClock(t0)
		transport := cluster.transport()
		lost := true
		transport.setFault(func(_ context.Context, op string) (error, bool) {
			if op == "Append" && lost {
				lost = false
				return nil, false // acknowledged, and lost
			}
			return nil, true
		})
		c := startContender(transport, mustRole(t, "controller"), mustMember(t, "node-1"), testOptions(clock)...)
		synctest.Wait()
		if _, ok := c.poll(); ok {
			t.Fatal("won without a registration")
		}
		clock.Advance(time.Second)
		synctest.Wait()
		r, ok := c.poll()
		if !ok || r.err != nil {
			t.Fatalf("after a second registration: %t, %v", ok, r.err)
		}
		if n := transport.callCount("Append"); n != 2 {
			t.Fatalf("%d registrations", n)
		}
		c.stop(t)
	})
}

// TestStandbyWakesOnChange: with a PartitionWaiter, a standby sees a
// resignation at once, without a poll interval of delay.
func TestStandbyWakesOnChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster, _, clock, l := holder(t, false)
		standby := waitingTransport{cluster.transport()}
		c := startContender(standby, l.Role(), mustMember(t, "node-2"), testOptions(clock)...)
		synctest.Wait()
		if _, ok := c.poll(); ok {
			t.Fatal("the standby won against a live lease")
		}
		if err := l.Resign(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		r, ok := c.poll()
		if !ok || r.err != nil {
			t.Fatalf("standby after a resignation, clock unmoved: %t, %v", ok, r.err)
		}
		if got := r.leadership.Lease().GrantedAt; got != t0 {
			t.Fatalf("took the role at %d, want at once", got)
		}
		c.stop(t)
	})
}

// TestStandbyWaiterFaults: a waiter that fails leaves the clock in charge,
// and a waiter that answers without a new record cannot spin the loop.
func TestStandbyWaiterFaults(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
	}{{"failing", errUnreachable}, {"eager", nil}} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cluster, _, clock, l := holder(t, false)
				defer resign(t, l)
				inner := cluster.transport()
				inner.setFault(func(_ context.Context, op string) (error, bool) {
					if op == "WaitPartition" {
						return tt.err, false
					}
					return nil, true
				})
				c := startContender(waitingTransport{inner}, l.Role(), mustMember(t, "node-2"), testOptions(clock)...)
				synctest.Wait()
				reads := inner.callCount("ReadPartition")
				if reads > 3 || inner.callCount("WaitPartition") > 2 {
					t.Fatalf("%d reads and %d waits with an unmoved clock", reads, inner.callCount("WaitPartition"))
				}
				clock.Advance(time.Second)
				synctest.Wait()
				if got := inner.callCount("ReadPartition"); got <= reads || got > reads+3 {
					t.Fatalf("%d reads after one poll interval, %d before", got, reads)
				}
				if r := c.stop(t); !errors.Is(r.err, context.Canceled) {
					t.Fatalf("campaign: %v", r.err)
				}
			})
		})
	}
}
