package coordination

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// opLog records the operations of one transport in order, through its fault
// hook, and lets a test run something just before one of them.
type opLog struct {
	mu  sync.Mutex
	ops []string
}

func (o *opLog) add(op string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ops = append(o.ops, op)
}

// after returns the operations recorded after the first one named op.
func (o *opLog) after(op string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, got := range o.ops {
		if got == op {
			return append([]string(nil), o.ops[i+1:]...)
		}
	}
	return nil
}

// outwaitScene is a leader whose transport has failed, so that its
// renewals fail from then on, and a standby that contends for its role
// through a transport with the given fault hook, which the scene is passed
// to.
type outwaitScene struct {
	holderTransport *memTransport
	clock           *ManualClock
	first           *Leadership
	deadline        int64 // of the holder's last lease
	cluster         *memCluster
	standby         *contender
}

func newOutwaitScene(t *testing.T, bump bool, fault func(s *outwaitScene, ctx context.Context, op string) (error, bool)) *outwaitScene {
	t.Helper()
	cluster, holderTransport, clock, first := holder(t, bump)
	t.Cleanup(func() { resign(t, first) })
	holderTransport.down.Store(true)
	s := &outwaitScene{holderTransport: holderTransport, clock: clock, first: first,
		deadline: first.Lease().Deadline, cluster: cluster}
	transport := cluster.transport()
	transport.setFault(func(ctx context.Context, op string) (error, bool) { return fault(s, ctx, op) })
	s.standby = startContender(transport, first.Role(), mustMember(t, "node-2"), testOptions(clock)...)
	t.Cleanup(func() { s.standby.stop(t) })
	synctest.Wait()
	return s
}

// neverLedBefore advances the clock to end-1 in steps of at most a second,
// and fails the test if the standby leads on the way; why says what made
// that wrong.
func (s *outwaitScene) neverLedBefore(t *testing.T, end int64, why func() string) {
	t.Helper()
	for s.clock.NowMillis() < end-1 {
		s.clock.Advance(min(time.Second, time.Duration(end-1-s.clock.NowMillis())*time.Millisecond))
		synctest.Wait()
		if r, ok := s.standby.poll(); ok {
			t.Fatalf("the standby led at %d, %s: %v", s.clock.NowMillis(), why(), r.err)
		}
	}
}

// TestChallengerOutwaitsLateRenewal: the standby read the holder's lease as
// expired and challenged, but the holder (paused past its deadline, or whose
// markers were late) committed a renewal just before the InitProducerId. The
// holder finds that lease fresh for a whole lease duration, so the new
// leader must not write its first lease, and so must not lead, before the
// renewed deadline.
func TestChallengerOutwaitsLateRenewal(t *testing.T) {
	for _, mode := range txnModes {
		t.Run(mode.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var renewed atomic.Bool
				sc := newOutwaitScene(t, mode.bump, func(sc *outwaitScene, ctx context.Context, op string) (error, bool) {
					if op == "AcquireEpoch" && !renewed.Swap(true) {
						// The holder's late renewal commits just before the
						// InitProducerId fences it.
						sc.holderTransport.down.Store(false)
						if err := sc.first.Renew(ctx); err != nil {
							t.Errorf("late renewal: %v", err)
						}
						sc.holderTransport.down.Store(true)
					}
					return nil, true
				})
				clock, first, c := sc.clock, sc.first, sc.standby
				clock.Set(sc.deadline)
				synctest.Wait()
				if !renewed.Load() {
					t.Fatal("the standby did not challenge at the deadline")
				}
				deadline := sc.deadline
				late := first.Lease()
				if late.GrantedAt != deadline || first.ValidFor() != 30*time.Second {
					t.Fatalf("late renewal %+v, holder fresh for %v", late, first.ValidFor())
				}

				// The standby holds the new epoch and waits for the renewed
				// deadline, with no lease of its own written.
				sc.neverLedBefore(t, late.Deadline, func() string {
					return fmt.Sprintf("while the fenced holder was fresh for %v more", first.ValidFor())
				})
				if state := sc.cluster.state(first.Partition(), first.Role()); state.Lease == nil || *state.Lease != late {
					t.Fatalf("lease %+v during the wait, want the holder's late renewal %+v", state.Lease, late)
				}
				clock.Set(late.Deadline)
				synctest.Wait()
				r, ok := c.poll()
				if !ok || r.err != nil {
					t.Fatalf("standby at the renewed deadline: %t, %v", ok, r.err)
				}
				if got := r.leadership.Lease().GrantedAt; got != late.Deadline {
					t.Fatalf("the new leader's first lease granted at %d, want %d", got, late.Deadline)
				}
				if v := first.ValidFor(); v != 0 {
					t.Fatalf("the fenced holder is fresh for %v when the new leader leads", v)
				}
			})
		})
	}
}

// TestChallengerWaitsFullLeaseOnBlockedRead: when the read after the fence
// cannot reach the high watermark, because another producer's transaction
// holds the last stable offset back, it proves nothing about the holder's
// newest lease, and the new leader writes its first lease one full lease
// duration after the fence, or sooner once a read shows the whole partition.
func TestChallengerWaitsFullLeaseOnBlockedRead(t *testing.T) {
	for _, tc := range []struct {
		name    string
		blocked time.Duration // how long the transaction stays open after the fence
		want    time.Duration // the wait from the fence to the first lease
	}{
		{"stays-open", time.Hour, 30 * time.Second},
		{"ends-after-5s", 5 * time.Second, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var fencedAt atomic.Int64
				sc := newOutwaitScene(t, false, func(sc *outwaitScene, _ context.Context, op string) (error, bool) {
					now := sc.clock.NowMillis()
					switch {
					case op == "AcquireEpoch" && fencedAt.Load() == 0:
						fencedAt.Store(now)
					case op == "ReadPartition" && fencedAt.Load() != 0 && now < fencedAt.Load()+tc.blocked.Milliseconds():
						return &OpenTransactionError{Partition: sc.first.Partition(), StableOffset: 1, Target: 5, Producers: []int64{4242}}, false
					}
					return nil, true
				})
				clock, c, deadline := sc.clock, sc.standby, sc.deadline
				clock.Set(deadline + 10_000) // the holder's lease is long expired
				synctest.Wait()
				fenced := fencedAt.Load()
				if fenced == 0 {
					t.Fatal("the standby did not challenge")
				}
				end := fenced + tc.want.Milliseconds()
				sc.neverLedBefore(t, end, func() string {
					return fmt.Sprintf("%v after the fence, on a view it could not complete", time.Duration(clock.NowMillis()-fenced)*time.Millisecond)
				})
				clock.Set(end)
				synctest.Wait()
				r, ok := c.poll()
				if !ok || r.err != nil {
					t.Fatalf("standby %v after the fence: %t, %v", tc.want, ok, r.err)
				}
				if got := r.leadership.Lease().GrantedAt; got != end {
					t.Fatalf("first lease granted at %d, want %d", got, end)
				}
			})
		})
	}
}

// TestChallengerAfterExpiryDoesNotWait: in the ordinary failover the holder's
// newest lease expired before the challenge; the challenger reads the
// partition once after the fence, sees that, and writes its first lease at
// once.
func TestChallengerAfterExpiryDoesNotWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ops opLog
		sc := newOutwaitScene(t, false, func(_ *outwaitScene, _ context.Context, op string) (error, bool) {
			ops.add(op)
			return nil, true
		})
		clock, c, deadline := sc.clock, sc.standby, sc.deadline
		expired := deadline + 60_000
		clock.Set(expired)
		synctest.Wait()
		r, ok := c.poll()
		if !ok || r.err != nil {
			t.Fatalf("standby after the expiry: %t, %v", ok, r.err)
		}
		if got := r.leadership.Lease().GrantedAt; got != expired {
			t.Fatalf("first lease granted at %d, want %d: the challenge waited", got, expired)
		}
		if got := ops.after("AcquireEpoch"); len(got) != 2 || got[0] != "ReadPartition" || got[1] != "WriteGuarded" {
			t.Fatalf("after the fence: %v, want one read and the first lease", got)
		}
	})
}

// TestChallengerWaitCancelled: a context that ends while the challenger
// waits out a fenced holder's lease ends the campaign; no lease is written
// and the registration is withdrawn.
func TestChallengerWaitCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fenced atomic.Bool
		sc := newOutwaitScene(t, false, func(_ *outwaitScene, _ context.Context, op string) (error, bool) {
			if op == "ReadPartition" && fenced.Load() {
				return errors.New("broker away"), false
			}
			if op == "AcquireEpoch" {
				fenced.Store(true)
			}
			return nil, true
		})
		clock, c, first := sc.clock, sc.standby, sc.first
		clock.Set(sc.deadline)
		synctest.Wait()
		if !fenced.Load() {
			t.Fatal("the standby did not challenge")
		}
		clock.Advance(10 * time.Second)
		synctest.Wait()
		r := c.stop(t)
		if !errors.Is(r.err, context.Canceled) || r.leadership != nil {
			t.Fatalf("cancelled wait: %v, %v", r.leadership, r.err)
		}
		state := sc.cluster.state(first.Partition(), first.Role())
		if state.Lease == nil || state.Lease.Member != first.Member() {
			t.Fatalf("lease %+v, want the fenced holder's", state.Lease)
		}
		if _, ok := state.Entry(mustMember(t, "node-2")); ok {
			t.Fatal("the cancelled challenger is still registered")
		}
	})
}
