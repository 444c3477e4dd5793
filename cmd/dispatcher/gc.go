package main

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The collector's slack. At a long history the dispatcher's state is
// mostly its dedup window: tens of megabytes of compact IDs in blocks with
// no pointer, which the collector never scans but which its pacer counts,
// so that under GOGC=100 the heap grows to twice them before each cycle,
// and the daemon's resident size with it. tuneGC lowers the collector's
// percentage as the live heap grows, so that the heap grows by about
// gcSlack between cycles, never by less than minGCPercent of the live heap
// and never by more than the percentage the process started with: a cycle
// over blocks without pointers costs little.
const (
	gcSlack      = 16 << 20
	minGCPercent = 25
	// gcTuneEvery is short enough that the percentage follows a takeover's
	// recovery before its first checkpoint is written.
	gcTuneEvery = 100 * time.Millisecond
	// gcTuneStep is the least change of the percentage that is set.
	gcTuneStep = 5
)

// gcPercentFor returns the percentage that gives a live heap of live bytes
// a slack of gcSlack, within minGCPercent and base.
func gcPercentFor(live uint64, base int) int {
	if live == 0 {
		return base
	}
	return max(minGCPercent, min(base, int(gcSlack*100/live)))
}

// tuneGC sets the collector's percentage from the live heap every
// gcTuneEvery until ctx ends, and then sets the percentage back. A process
// started at minGCPercent or less, or with the collector off (GOGC), is
// left as its operator set it.
func tuneGC(ctx context.Context) {
	base := debug.SetGCPercent(100)
	debug.SetGCPercent(base)
	if base <= minGCPercent {
		return
	}
	defer debug.SetGCPercent(base)
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	tick := time.NewTicker(gcTuneEvery)
	defer tick.Stop()
	set := base
	for {
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			if p := gcPercentFor(sample[0].Value.Uint64(), base); p != set && (p == base || p == minGCPercent || max(p-set, set-p) >= gcTuneStep) {
				debug.SetGCPercent(p)
				set = p
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
