package dispatch

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// BenchmarkSubmitBurst measures the dispatcher's own cost of a command, from
// Submit to its outcome committed, in bursts of concurrent submitters as the
// end-to-end benchmark sends them, over an in-memory log whose commits cost
// nothing, and a device that acts at once: what is left is the CPU that the real path adds to Kafka's.
func BenchmarkSubmitBurst(b *testing.B) {
	for _, burst := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("burst=%d", burst), func(b *testing.B) {
			h, ctx := benchDispatcher(b, 4*burst)
			b.ReportAllocs()
			b.ResetTimer()
			n := 0
			for n < b.N {
				var wg sync.WaitGroup
				for range min(burst, b.N-n) {
					cmd := newCommand(fmt.Sprintf("c%d", n), "valve", time.Hour)
					n++
					wg.Go(func() {
						if out, err := h.d.Submit(ctx, cmd); err != nil || out.Status != StatusSucceeded {
							b.Errorf("Submit: %+v, %v", out, err)
						}
					})
				}
				wg.Wait()
			}
			b.StopTimer()
			h.stop()
		})
	}
}

// BenchmarkSubmitBatch measures the dispatcher's own cost of a command
// submitted in a batch of 1,000 with SubmitBatch, as the end-to-end
// benchmark's rounds do, from the call until every outcome is known, over an
// in-memory log whose commits cost nothing, and a device that acts at once.
func BenchmarkSubmitBatch(b *testing.B) {
	const batch = 1000
	h, ctx := benchDispatcher(b, 4*batch)
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; {
		cmds := make([]Command, min(batch, b.N-n))
		for i := range cmds {
			cmds[i] = newCommand(fmt.Sprintf("c%d", n), "valve", time.Hour)
			n++
		}
		for _, r := range h.d.SubmitBatch(ctx, cmds) {
			if r.Err != nil || r.Outcome.Status != StatusSucceeded {
				b.Fatalf("SubmitBatch: %+v, %v", r.Outcome, r.Err)
			}
		}
	}
	b.StopTimer()
	h.stop()
}

// benchDispatcher starts a dispatcher over an in-memory log, with a device
// "valve" that acts at once and a queue bound of maxQueued, and returns it
// once it recovered, with the context it runs under, which ends when b does.
func benchDispatcher(b *testing.B, maxQueued int) (*harness, context.Context) {
	h := newHarness(b, &leaderLog{}, map[string]Device{"valve": idleDevice{}}, WithMaxQueued(maxQueued))
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	h.start(ctx)
	<-h.d.Ready()
	return h, ctx
}
