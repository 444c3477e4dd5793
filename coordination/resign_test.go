package coordination

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
)

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

// TestResignOneTransaction checks that Resign clears the lease and the
// member's registration in one transaction, so that no read of the partition
// shows the lease cleared while the resigned member still heads the roster,
// and that the first standby challenges on the commit itself.
func TestResignOneTransaction(t *testing.T) {
	for _, mode := range txnModes {
		t.Run(mode.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cluster, transport, clock, l := holder(t, mode.bump)
				role, first, second := l.Role(), mustMember(t, "node-2"), mustMember(t, "node-3")
				standby := startContender(waitingTransport{cluster.transport()}, role, first, testOptions(clock)...)
				synctest.Wait()
				other := startContender(waitingTransport{cluster.transport()}, role, second, testOptions(clock)...)
				defer func() {
					other.stop(t)
					standby.stop(t)
				}()
				synctest.Wait()
				if _, ok := standby.poll(); ok {
					t.Fatal("the standby won against a live lease")
				}
				before := len(cluster.records(l.Partition()))
				appends := transport.callCount("Append")

				if err := l.Resign(context.Background()); err != nil {
					t.Fatalf("Resign: %v", err)
				}

				records := cluster.records(l.Partition())
				if len(records) < before+2 {
					t.Fatalf("Resign wrote %d records, want 2", len(records)-before)
				}
				lease, reg := records[before], records[before+1]
				if !bytes.Equal(lease.Key, EncodeKey(LeaseKey(role))) || !IsTombstone(lease.Value) {
					t.Fatalf("first record of Resign: key %q value %q, want the lease tombstone", lease.Key, lease.Value)
				}
				if !bytes.Equal(reg.Key, EncodeKey(RegistrationKey(role, l.Member()))) || !IsTombstone(reg.Value) {
					t.Fatalf("second record of Resign: key %q value %q, want the registration tombstone", reg.Key, reg.Value)
				}
				if lease.txn == 0 || lease.txn != reg.txn {
					t.Fatalf("the tombstones committed in transactions %d and %d, want one", lease.txn, reg.txn)
				}
				if got := transport.callCount("Append"); got != appends {
					t.Fatalf("Resign appended %d records outside the transaction", got-appends)
				}

				// The read that ends at Resign's commit shows the lease cleared,
				// ranks the first standby 0 and lets it challenge now. A read of
				// committed records ends at a transaction's boundary, so no read
				// ends between the two tombstones. The standbys run while Resign
				// commits, so records after the two may already be a standby's
				// challenge: only the prefix up to Resign's commit is checked.
				prefix := make([]StateRecord, before+2)
				for i, r := range records[:before+2] {
					prefix[i] = r.StateRecord
				}
				state, err := BuildRoleState(role, prefix)
				if err != nil {
					t.Fatal(err)
				}
				if state.Lease != nil {
					t.Fatalf("the read that ends at Resign's commit shows the lease %+v", state.Lease)
				}
				if rank, ok := state.RankOf(first); !ok || rank != 0 {
					t.Fatalf("the read that ends at Resign's commit ranks the first standby %d (registered %t), want 0", rank, ok)
				}
				if d := Evaluate(state, first, clock.NowMillis(), l.config); d.Action != ActionChallenge {
					t.Fatalf("the read that ends at Resign's commit: the first standby gets %v, want a challenge", d.Action)
				}

				// The standby long-polls, so it wins on the commit, with no
				// time passing on the role's clock; the second standby waits.
				synctest.Wait()
				r, ok := standby.poll()
				if !ok || r.err != nil {
					t.Fatalf("standby after a resignation: done %t, err %v", ok, r.err)
				}
				if r.leadership.Lease().GrantedAt != t0 {
					t.Fatalf("standby lease %+v, want one granted at %d", r.leadership.Lease(), t0)
				}
				if _, ok := other.poll(); ok {
					t.Fatal("the second standby took the role too")
				}
			})
		})
	}
}

// TestResignWithoutGuardedWriter checks the path of a transport that writes
// no guarded transactions: a lease write of the tombstone, then an append of
// the registration tombstone.
func TestResignWithoutGuardedWriter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster := newMemCluster(t)
		clock := NewManualClock(t0)
		inner := cluster.transport()
		l, err := AcquireLeadership(context.Background(), plainTransport{inner}, mustRole(t, "controller"), mustMember(t, "node-1"), testOptions(clock)...)
		if err != nil {
			t.Fatalf("acquire: %v", err)
		}
		synctest.Wait()
		leases, appends := inner.callCount("WriteLease"), inner.callCount("Append")
		if err := l.Resign(context.Background()); err != nil {
			t.Fatalf("Resign: %v", err)
		}
		if inner.callCount("WriteLease") != leases+1 || inner.callCount("Append") != appends+1 {
			t.Fatalf("Resign wrote %d leases and appended %d records, want one of each",
				inner.callCount("WriteLease")-leases, inner.callCount("Append")-appends)
		}
		state := cluster.state(l.Partition(), l.Role())
		if state.Lease != nil {
			t.Fatalf("lease after Resign: %+v", state.Lease)
		}
		if _, ok := state.RankOf(l.Member()); ok {
			t.Fatal("the resigned member is still in the roster")
		}
	})
}

// TestResignTransactionFails checks that a failed transaction of the two
// tombstones still takes the member off the roster with an append.
func TestResignTransactionFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster, transport, _, l := holder(t, false)
		transport.setFault(func(_ context.Context, op string) (error, bool) {
			if op == "WriteGuarded" {
				return errUnreachable, false
			}
			return nil, true
		})
		if err := l.Resign(context.Background()); !errors.Is(err, errUnreachable) {
			t.Fatalf("Resign with a failing transaction: %v", err)
		}
		state := cluster.state(l.Partition(), l.Role())
		if state.Lease == nil {
			t.Fatal("an aborted transaction cleared the lease")
		}
		if _, ok := state.RankOf(l.Member()); ok {
			t.Fatal("the resigned member is still in the roster after the append")
		}
	})
}

// TestKafkaResignOneTransactionFake checks the same on the Kafka transport
// against an in-process kfake cluster: the two tombstones are written by the
// role's transactional producer, in one transaction at adjacent offsets, and
// the standby takes the role. (kfake does not fence like Kafka; the handover
// timing on a real cluster is TestKafkaResignHandover's.)
func TestKafkaResignOneTransactionFake(t *testing.T) {
	c := kafkatest.NewFake(t)
	lease, err := NewLeaseConfig(3*time.Second, time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	newTransport := func() *KafkaTransport {
		tr, err := NewKafkaTransport(lease, c.ListenAddrs()...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tr.Close)
		return tr
	}
	options := []Option{WithLeaseConfig(lease), WithPollInterval(100 * time.Millisecond)}
	role, member := mustRole(t, "resign-fake"), mustMember(t, "node-1")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	l, err := AcquireLeadership(ctx, newTransport(), role, member, options...)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	standbyTransport := newTransport()
	standby := startContender(standbyTransport, role, mustMember(t, "node-2"), options...)
	defer standby.stop(t)
	for {
		records, err := standbyTransport.ReadPartition(ctx, l.Partition())
		if err != nil {
			t.Fatal(err)
		}
		state, err := BuildRoleState(role, records)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := state.RankOf(mustMember(t, "node-2")); ok {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the standby did not register")
		case <-time.After(10 * time.Millisecond):
		}
	}
	token := l.Token()
	if err := l.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}

	select {
	case r := <-standby.result:
		standby.result <- r
		if r.err != nil {
			t.Fatalf("standby after a resignation: %v", r.err)
		}
	case <-ctx.Done():
		t.Fatal("the standby did not take the role after the resignation")
	}

	// Read the raw records: the tombstones carry the producer of the role.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{l.Partition().Topic: {int32(l.Partition().Partition): kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	leaseKey, regKey := EncodeKey(LeaseKey(role)), EncodeKey(RegistrationKey(role, member))
	var leaseTomb, regTomb *kgo.Record
	for regTomb == nil || leaseTomb == nil {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("the tombstones were not found: %v", err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			switch {
			case IsTombstone(r.Value) && bytes.Equal(r.Key, leaseKey) && leaseTomb == nil:
				leaseTomb = r
			case IsTombstone(r.Value) && bytes.Equal(r.Key, regKey):
				regTomb = r
			}
		})
	}
	if regTomb.Offset != leaseTomb.Offset+1 {
		t.Errorf("tombstones at offsets %d and %d, want adjacent", leaseTomb.Offset, regTomb.Offset)
	}
	for _, r := range []*kgo.Record{leaseTomb, regTomb} {
		if r.ProducerID != token.ProducerID() || r.ProducerEpoch != token.ProducerEpoch() {
			t.Errorf("tombstone at offset %d by producer %d epoch %d, want the role's %s", r.Offset, r.ProducerID, r.ProducerEpoch, token)
		}
	}
}

// TestResignKeepsStaggerBetweenStandbys checks that the standbys behind a
// resigned holder keep their order: rank 0 challenges at once, and rank 1,
// registered long before, waits a stagger rather than challenging beside it
// and fencing the new leadership.
func TestResignKeepsStaggerBetweenStandbys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster, _, clock, l := holder(t, false)
		first := startContender(waitingTransport{cluster.transport()}, l.Role(), mustMember(t, "node-2"), testOptions(clock)...)
		synctest.Wait()
		second := startContender(waitingTransport{cluster.transport()}, l.Role(), mustMember(t, "node-3"), testOptions(clock)...)
		synctest.Wait()
		// Both registrations are long past when the holder resigns.
		clock.Advance(20 * time.Second)
		synctest.Wait()
		acquired := cluster.acquireCount()

		resign(t, l)
		synctest.Wait()
		r, ok := first.poll()
		if !ok || r.err != nil {
			t.Fatalf("rank 0 after the resignation: done %t, err %v", ok, r.err)
		}
		if _, ok := second.poll(); ok {
			t.Fatal("rank 1 acquired the role beside rank 0")
		}
		if got := cluster.acquireCount() - acquired; got != 1 {
			t.Fatalf("%d epochs minted after the resignation, want rank 0's alone", got)
		}

		// A stagger later rank 1 finds rank 0's lease and waits for it.
		clock.Advance(5 * time.Second)
		synctest.Wait()
		if got := cluster.acquireCount() - acquired; got != 1 {
			t.Fatalf("%d epochs minted a stagger after the resignation, want 1: rank 1 challenged a live lease", got)
		}
		if err := r.leadership.Err(); err != nil {
			t.Fatalf("the new leadership ended: %v", err)
		}
		resign(t, r.leadership)
		second.stop(t)
	})
}

// TestResignRank1TakesOverWhenRank0IsGone checks that the stagger after a
// resignation does not strand the role: with rank 0 gone, rank 1 challenges
// one stagger after it saw the lease cleared.
func TestResignRank1TakesOverWhenRank0IsGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster, _, clock, l := holder(t, false)
		// node-2 registers and dies without a tombstone: it keeps rank 0.
		if err := cluster.transport().Append(context.Background(), l.Partition(), EncodeKey(RegistrationKey(l.Role(), mustMember(t, "node-2"))),
			EncodeRegistration(Registration{Member: mustMember(t, "node-2"), RegisteredAt: t0})); err != nil {
			t.Fatal(err)
		}
		second := startContender(waitingTransport{cluster.transport()}, l.Role(), mustMember(t, "node-3"), testOptions(clock)...)
		synctest.Wait()
		clock.Advance(20 * time.Second)
		synctest.Wait()

		resign(t, l)
		synctest.Wait()
		clock.Advance(5*time.Second - time.Millisecond)
		synctest.Wait()
		if _, ok := second.poll(); ok {
			t.Fatal("rank 1 acquired the role before its stagger")
		}
		clock.Advance(time.Millisecond)
		synctest.Wait()
		r, ok := second.poll()
		if !ok || r.err != nil {
			t.Fatalf("rank 1 a stagger after the resignation: done %t, err %v", ok, r.err)
		}
		resign(t, r.leadership)
	})
}
