package dispatch

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// checkpointRecords returns the records of a checkpoint of n compact IDs of
// role plant-a and the offset after them; the first lies at offset first.
func checkpointRecords(tb testing.TB, n int) (recs []coordination.GuardedRecord, first int64) {
	tb.Helper()
	r := rand.New(rand.NewPCG(3, 4))
	ids := make([]compactID, n)
	off := int64(0)
	base := time.Now().Add(-time.Hour).UnixMilli()
	for i := range ids {
		off += 2 + int64(r.IntN(4))
		ids[i] = compactID{hash: r.Uint64(), first: off, outcome: off + 1 + int64(r.IntN(3)), submitted: base + int64(i)/8}
	}
	sortByHash(ids)
	parts, err := encodeWindowCheckpoint("plant-a", 1, Checkpoint{Window: DefaultDedupWindow}, blocksOf(ids))
	if err != nil {
		tb.Fatal(err)
	}
	tok := mustToken(tb, 1, 1)
	for i := range parts {
		key, value, err := EncodeEntry(Entry{Kind: EntryCheckpoint, Role: "plant-a", Token: tok, Member: "node-1", At: at, Checkpoint: &parts[i]})
		if err != nil {
			tb.Fatal(err)
		}
		recs = append(recs, coordination.GuardedRecord{Key: key, Value: value})
	}
	return recs, off + 1
}

// heapPeak samples the heap and the memory the runtime holds from the OS
// until stop is called, which returns their peaks in bytes.
func heapPeak() (stop func() (heap, held uint64)) {
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var heap, held uint64
	wg.Go(func() {
		tick := time.NewTicker(200 * time.Microsecond)
		defer tick.Stop()
		for {
			metrics.Read(samples)
			heap = max(heap, samples[0].Value.Uint64())
			held = max(held, samples[1].Value.Uint64()-samples[2].Value.Uint64())
			select {
			case <-tick.C:
			case <-done:
				return
			}
		}
	})
	return func() (uint64, uint64) {
		close(done)
		wg.Wait()
		return heap, held
	}
}

// BenchmarkCheckpointRecovery runs what a recovery does with the newest
// checkpoint of a million compact IDs once its records are read: it finds
// and assembles the checkpoint, folds the records and loads the dedup
// window. It reports the peak of the heap and of the memory the runtime
// holds, and the heap that stays live.
func BenchmarkCheckpointRecovery(b *testing.B) {
	const n = 1_000_000
	recs, first := checkpointRecords(b, n)
	end := first + int64(len(recs))
	// A read decodes the records afresh, as a read of the log does.
	read := func(_ context.Context, from, to int64) ([]Entry, int, error) {
		var out []Entry
		for i, rec := range recs {
			if o := first + int64(i); o >= from && o < to {
				e, err := DecodeEntry(rec.Key, rec.Value)
				if err != nil {
					return nil, 0, err
				}
				e.Offset = o
				out = append(out, e)
			}
		}
		return out, len(out), nil
	}
	cutoff := time.Now().Add(-DefaultDedupWindow - DedupClockSkew)
	requests := coordination.TopicPartition{Topic: DefaultRequestsTopic}
	var w *idWindow
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	var peak, held uint64
	for range b.N {
		w = nil
		runtime.GC()
		stop := heapPeak()
		st, _, err := recoverState(context.Background(), "plant-a", requests, 0, end, DefaultCheckpointInterval, read, nil, false)
		if err != nil {
			b.Fatal(err)
		}
		w = newIDWindow()
		if err := w.load(st.ids, cutoff); err != nil {
			b.Fatal(err)
		}
		h, r := stop()
		peak, held = max(peak, h), max(held, r)
	}
	b.StopTimer()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if w.len() != n {
		b.Fatalf("the window holds %d IDs, want %d", w.len(), n)
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(held)/(1<<20), "peak-held-MiB")
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "live-MiB")
	runtime.KeepAlive(recs)
}

// BenchmarkWindowGrowth adds a million compact IDs to a window that holds
// a million, as a leader does that settles a million further commands, and
// writes a checkpoint of it whenever one is due, as the leader does: it
// reports the peak of the heap and of the memory the runtime holds.
func BenchmarkWindowGrowth(b *testing.B) {
	for _, held := range []int{0, 1_000_000} {
		b.Run(fmt.Sprintf("from-%d", held), func(b *testing.B) { benchmarkWindowGrowth(b, held) })
	}
}

func benchmarkWindowGrowth(b *testing.B, from int) {
	const n = 1_000_000
	r := rand.New(rand.NewPCG(5, 6))
	base := time.Now().Add(-time.Hour).UnixMilli()
	loaded := make([]compactID, from)
	for i := range loaded {
		loaded[i] = compactID{hash: r.Uint64(), first: int64(4 * i), outcome: int64(4*i + 1), submitted: base}
	}
	sortByHash(loaded)
	tok := mustToken(b, 1, 1)
	var peak, held uint64
	b.ReportAllocs()
	for range b.N {
		w := newIDWindow()
		if err := w.load(blocksOf(loaded), time.Time{}); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		stop := heapPeak()
		since := 0
		for i := range n {
			o := int64(4*from + 4*i)
			w.add(CheckpointID{Hash: r.Uint64(), First: o, Outcome: o + 1, SubmittedAt: time.UnixMilli(base)})
			if since++; since < w.len()/checkpointDivisor {
				continue
			}
			since = 0
			// Each part goes into its record as it is written, as the
			// dispatcher's checkpointItems does.
			var values [][]byte
			err := eachWindowCheckpointPart("plant-a", 1, Checkpoint{Window: DefaultDedupWindow}, w.share(), func(p CheckpointPart) error {
				_, v, err := EncodeEntry(Entry{Kind: EntryCheckpoint, Role: "plant-a", Token: tok, Member: "node-1", At: at, Checkpoint: &p})
				values = append(values, v)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			w.release()
			runtime.KeepAlive(values)
		}
		h, hd := stop()
		peak, held = max(peak, h), max(held, hd)
		if w.len() < from+n-1000 {
			b.Fatalf("the window holds %d", w.len())
		}
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(held)/(1<<20), "peak-held-MiB")
}

// BenchmarkOverlay lays a delta of 80,000 compact IDs over a base of a
// million, as a recovery from a prefetched base does at a million commands
// (the delta holds the IDs since the base: up to a quarter of the window).
func BenchmarkOverlay(b *testing.B) {
	now := time.Now().UnixMilli()
	ids := func(n int, prefix string) []compactID {
		out := make([]compactID, n)
		for i := range out {
			out[i] = compactID{hash: IDHash(fmt.Sprintf("%s-%d", prefix, i)), first: int64(i), outcome: int64(i) + 1, submitted: now}
		}
		sortByHash(out)
		return out
	}
	base, delta := ids(1_000_000, "base"), ids(80_000, "delta")
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		// overlay lets go of the base blocks it adds to.
		bb, db := blocksOf(base), blocksOf(delta)
		b.StartTimer()
		if got := overlay(bb, db); got.count() != len(base)+len(delta) {
			b.Fatalf("the overlay holds %d IDs, want %d", got.count(), len(base)+len(delta))
		}
	}
}
