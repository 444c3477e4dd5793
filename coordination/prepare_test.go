package coordination

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// preparingTransport is a waitingTransport that also implements
// EpochPreparer and counts its calls. With block, a preparation waits for
// its context to end.
type preparingTransport struct {
	waitingTransport
	block bool

	mu        sync.Mutex
	calls     int
	cancelled int
}

func (p *preparingTransport) PrepareEpoch(ctx context.Context, role Role) error {
	p.mu.Lock()
	p.calls++
	p.mu.Unlock()
	if !p.block {
		return nil
	}
	<-ctx.Done()
	p.mu.Lock()
	p.cancelled++
	p.mu.Unlock()
	return ctx.Err()
}

func (p *preparingTransport) counts() (calls, cancelled int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls, p.cancelled
}

// TestFirstStandbyPreparesEpoch: the standby first in line behind a holder
// asks its transport to prepare the epoch, at most once per poll interval,
// and the standby behind it does not. A preparation that hangs delays
// neither the challenge after a resignation nor the next preparation's
// turn past its own end, and the campaign that won cancels it and waits
// for it.
func TestFirstStandbyPreparesEpoch(t *testing.T) {
	for _, block := range []bool{false, true} {
		t.Run(fmt.Sprintf("hanging=%t", block), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cluster, _, clock, l := holder(t, false)
				first := &preparingTransport{waitingTransport: waitingTransport{cluster.transport()}, block: block}
				second := &preparingTransport{waitingTransport: waitingTransport{cluster.transport()}, block: block}
				c1 := startContender(first, l.Role(), mustMember(t, "node-2"), testOptions(clock)...)
				synctest.Wait()
				c2 := startContender(second, l.Role(), mustMember(t, "node-3"), testOptions(clock)...)
				synctest.Wait()
				const polls = 4
				for range polls {
					clock.Advance(time.Second)
					synctest.Wait()
				}

				calls, _ := first.counts()
				switch {
				case block && calls != 1:
					t.Fatalf("%d preparations begun while the first one hangs, want 1", calls)
				case !block && (calls < 2 || calls > polls+1):
					t.Fatalf("%d preparations over %d poll intervals, want one per interval", calls, polls)
				}
				if calls, _ := second.counts(); calls != 0 {
					t.Fatalf("the second standby in line prepared %d times", calls)
				}

				if err := l.Resign(context.Background()); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				r, ok := c1.poll()
				if !ok || r.err != nil {
					t.Fatalf("first standby after a resignation, clock unmoved: %t, %v", ok, r.err)
				}
				if got, now := r.leadership.Lease().GrantedAt, clock.NowMillis(); got != now {
					t.Fatalf("took the role at %d, want at once (%d)", got, now)
				}
				if _, cancelled := first.counts(); block && cancelled != 1 {
					t.Fatalf("the hanging preparation was cancelled %d times when the campaign won, want 1", cancelled)
				}
				c2.stop(t)
				c1.stop(t)
			})
		})
	}
}
