package dispatch

import (
	"context"
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
	parts, err := encodeWindowCheckpoint("plant-a", 1, Checkpoint{Window: DefaultDedupWindow}, ids)
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
		st, _, err := recoverState(context.Background(), "plant-a", requests, 0, end, DefaultCheckpointInterval, read)
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
