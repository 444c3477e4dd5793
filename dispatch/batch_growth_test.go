package dispatch

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// TestBatchGrowsToByteBoundUnderBacklog queues a backlog behind a held
// transaction and checks that, under the default bounds, the next
// transaction takes records until its bytes reach DefaultMaxBatchBytes: the
// record bound does not bind first.
func TestBatchGrowsToByteBoundUnderBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		h := newHarness(t, log, map[string]Device{"valve": gatedDevice(t, log)})
		release := make(chan struct{})
		var mu sync.Mutex
		var counts, sizes []int
		h.leader.beforeWrite = func(records []coordination.GuardedRecord) error {
			size := 0
			for _, r := range records {
				size += len(r.Key) + len(r.Value)
			}
			mu.Lock()
			n := len(counts)
			counts, sizes = append(counts, len(records)), append(sizes, size)
			mu.Unlock()
			if n == 0 {
				<-release
			}
			return nil
		}
		h.start(t.Context())
		synctest.Wait()

		// The first command's transaction is held while the backlog queues:
		// more commands than the byte bound holds, fewer than the queue bound.
		// It is submitted alone, so that its transaction holds it alone.
		go h.d.Submit(t.Context(), newCommand("command-first", "valve", 2*time.Hour))
		synctest.Wait()
		mu.Lock()
		held := slices.Clone(counts)
		mu.Unlock()
		if len(held) != 1 || held[0] != 1 {
			t.Fatalf("transactions before the backlog hold %v records, want the first command's alone", held)
		}
		const backlog = 8000
		for i := range backlog {
			go h.d.Submit(t.Context(), newCommand(fmt.Sprintf("command-%05d", i), "valve", 2*time.Hour))
		}
		synctest.Wait()
		close(release)
		synctest.Wait()

		mu.Lock()
		defer mu.Unlock()
		if len(counts) < 3 {
			t.Fatalf("%d transactions (records %v), want the held one and the backlog in at least two", len(counts), counts)
		}
		one := sizes[0] / counts[0] // the size of one Issued record
		if counts[1] <= 500 {
			t.Errorf("the first batch of the backlog holds %d records, want more than the old bound of 500", counts[1])
		}
		if sizes[1] > DefaultMaxBatchBytes || sizes[1] < DefaultMaxBatchBytes-2*one {
			t.Errorf("the first batch of the backlog holds %d bytes in %d records, want the byte bound %d within two records of %d bytes",
				sizes[1], counts[1], DefaultMaxBatchBytes, one)
		}
		if counts[1] >= DefaultMaxBatchRecords {
			t.Errorf("the record bound %d binds at %d records", DefaultMaxBatchRecords, counts[1])
		}
		t.Logf("an Issued record takes %d bytes; the backlog's transactions hold %v records, %v bytes", one, counts[1:], sizes[1:])
		h.stop()
	})
}
