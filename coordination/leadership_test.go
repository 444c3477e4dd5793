package coordination

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

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

// TestAcquireLeadershipWaitsOutOwnLease checks that a lease naming this
// member, left by another incarnation that may only be paused, is never taken
// over before its deadline: the new incarnation waits like a standby of rank
// 0, then a new epoch and a new term fence the earlier incarnation.
func TestAcquireLeadershipWaitsOutOwnLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster, transport, clock, first := holder(t, false)
		deadline := first.Lease().Deadline

		type result struct {
			l   *Leadership
			err error
		}
		acquired := make(chan result, 1)
		go func() {
			l, err := AcquireLeadership(context.Background(), cluster.transport(), first.Role(), first.Member(), testOptions(clock)...)
			acquired <- result{l, err}
		}()

		// The earlier incarnation is cut off: its renewals fail from now on,
		// as those of a paused process would never be written.
		transport.down.Store(true)
		for clock.NowMillis()+time.Second.Milliseconds() < deadline {
			clock.Advance(time.Second)
			synctest.Wait()
			select {
			case r := <-acquired:
				t.Fatalf("the new incarnation took the role at %d, before the deadline %d of the live lease: %v", clock.NowMillis(), deadline, r.err)
			default:
			}
		}
		clock.Set(deadline)
		synctest.Wait()
		r := <-acquired
		if r.err != nil {
			t.Fatal(r.err)
		}
		again := r.l
		defer resign(t, again)
		if again.Term().Compare(first.Term()) <= 0 {
			t.Fatalf("new incarnation's term %s, earlier %s", again.Term(), first.Term())
		}
		// Its next renewal is fenced, whether its own loop or this call
		// makes it first.
		transport.down.Store(false)
		if err := first.Renew(context.Background()); !errors.Is(err, ErrFenced) && !errors.Is(err, ErrNotHeld) {
			t.Fatalf("earlier incarnation renews: %v", err)
		}
		<-first.Done()
		if !errors.Is(first.Err(), ErrFenced) {
			t.Fatalf("the earlier incarnation ended with %v, want a fence", first.Err())
		}
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
		wantLedFrom(t, c, t0+30_000)
		c.stop(t)
	})
}

// TestCampaignWaitsFromTheEndOfASlowRead: a read that took part of the way
// to the holder's deadline (it waited on an open transaction) is followed by
// a wait for the rest of the way, not for the whole of it again, so the
// standby challenges at the deadline.
func TestCampaignWaitsFromTheEndOfASlowRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster, holderTransport, clock, l := holder(t, false)
		defer resign(t, l)
		holderTransport.down.Store(true) // the lease stays at t0 + 30s
		clock.Set(t0 + 28_000)
		synctest.Wait()

		recorder := &recordingClock{ManualClock: clock}
		standby := cluster.transport()
		var slow atomic.Bool
		standby.setFault(func(_ context.Context, op string) (error, bool) {
			if op == "ReadPartition" && slow.Swap(false) {
				clock.Advance(700 * time.Millisecond)
			}
			return nil, true
		})
		c := startContender(standby, l.Role(), mustMember(t, "node-2"), testOptions(recorder)...)
		synctest.Wait()
		recorder.takeWaits()
		slow.Store(true)
		clock.Advance(time.Second) // the next read begins at 29s and ends at 29.7s
		synctest.Wait()
		if waits := recorder.takeWaits(); len(waits) != 1 || waits[0] != 300*time.Millisecond {
			t.Fatalf("waits %v after the slow read, want one of 300ms until the deadline", waits)
		}
		clock.Advance(300 * time.Millisecond)
		synctest.Wait()
		wantLedFrom(t, c, t0+30_000)
		c.stop(t)
	})
}

// openWaitTransport records the bound on the wait for open transactions that
// each read of a campaign asks for.
type openWaitTransport struct {
	*memTransport
	waits durationLog
}

func (o *openWaitTransport) ReadPartitionWaiting(ctx context.Context, tp TopicPartition, openWait time.Duration) ([]StateRecord, error) {
	o.waits.add(openWait)
	return o.ReadPartition(ctx, tp)
}

// TestCampaignReadWaitsOnOpenTransactionsUntilItActs: a standby's read waits
// on an open transaction until one poll interval past the instant at which
// the standby acts, and no longer, so a transaction that the dead holder
// left open delays the challenge at its deadline by a poll interval at most.
// A read that stopped at another producer's transaction, which may hide a
// renewal, is followed by one that waits the whole read bound.
func TestCampaignReadWaitsOnOpenTransactionsUntilItActs(t *testing.T) {
	for _, tt := range []struct {
		name     string
		own      bool // the holder's producer holds the transaction open
		wantWait []time.Duration
	}{
		{"holders-own", true, []time.Duration{200 * time.Millisecond}},
		{"another-producers", false, []time.Duration{200 * time.Millisecond, time.Second}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cluster, holderTransport, clock, l := holder(t, false)
				defer resign(t, l)
				holderTransport.down.Store(true) // the lease stays at t0 + 30s
				clock.Set(t0 + 29_800)
				synctest.Wait()

				standby := &openWaitTransport{memTransport: cluster.transport()}
				var open atomic.Bool
				standby.setFault(func(_ context.Context, op string) (error, bool) {
					if op != "ReadPartition" || !open.Swap(false) {
						return nil, true
					}
					producer := int64(4242)
					if tt.own {
						producer = l.Token().ProducerID()
					}
					var view []StateRecord
					for _, r := range cluster.records(l.Partition()) {
						view = append(view, r.StateRecord)
					}
					return &OpenTransactionError{Partition: l.Partition(), StableOffset: 9, Target: 10,
						Producers: []int64{producer}, Records: view}, false
				})
				options := append(testOptions(clock), WithPollInterval(200*time.Millisecond))
				c := startContender(standby, l.Role(), mustMember(t, "node-2"), options...)
				synctest.Wait()
				// The first read knows no instant yet and waits the whole
				// bound (a second); the second waits until a poll interval
				// past the holder's deadline.
				if waits := standby.waits.take(); !slices.Equal(waits, []time.Duration{time.Second, 400 * time.Millisecond}) {
					t.Fatalf("reads waited %v on open transactions, want [1s 400ms]", waits)
				}
				open.Store(true)
				clock.Advance(200 * time.Millisecond)
				synctest.Wait()
				if waits := standby.waits.take(); !slices.Equal(waits, tt.wantWait) {
					t.Fatalf("reads at the deadline waited %v on open transactions, want %v", waits, tt.wantWait)
				}
				wantLedFrom(t, c, t0+30_000)
				c.stop(t)
			})
		})
	}
}

// TestCampaignOpenWaitSaturates: an instant at the end of time, as a lease
// record with an absurd deadline gives, leaves the read its whole bound; the
// poll interval added to it does not wrap around to a wait of nothing.
func TestCampaignOpenWaitSaturates(t *testing.T) {
	s, err := newSettings([]Option{WithPollInterval(200 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	c := &campaign{settings: s}
	for _, tt := range []struct {
		actAt int64
		want  time.Duration
	}{
		{0, time.Second},
		{t0 + 100, 300 * time.Millisecond},
		{math.MaxInt64 - 50, time.Second},
		{math.MaxInt64, time.Second},
	} {
		c.actAt = tt.actAt
		if got := c.openWait(t0); got != tt.want {
			t.Errorf("openWait with the instant at %d = %v, want %v", tt.actAt, got, tt.want)
		}
	}
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

// TestZeroLeadership: a Leadership that AcquireLeadership did not build
// answers every call with an error, and panics on none.
func TestZeroLeadership(t *testing.T) {
	var l Leadership
	ctx := context.Background()
	if err := l.Renew(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Renew: %v", err)
	}
	if err := l.Resign(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Resign: %v", err)
	}
	if _, err := l.Write(ctx, func(FencingToken) ([]GuardedRecord, error) { return nil, nil }); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Write: %v", err)
	}
	if l.ValidFor() != 0 || l.Err() != nil || l.Token() != (FencingToken{}) {
		t.Error("accessors of the zero Leadership")
	}
}

func TestNilContexts(t *testing.T) {
	transport := newMemCluster(t).transport()
	role := mustRole(t, "controller")
	//lint:ignore SA1012 a nil context is bad input that must not panic
	if _, err := DescribeRoleState(nil, transport, role); err == nil {
		t.Error("DescribeRoleState with a nil context")
	}
	//lint:ignore SA1012 a nil context is bad input that must not panic
	if _, err := DescribeLeadership(nil, transport, role); err == nil {
		t.Error("DescribeLeadership with a nil context")
	}
}
