package coordination

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
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
