package ceiling

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	var lat []time.Duration
	for i := 100; i >= 1; i-- {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	s := summarize("x", lat, 2*time.Second, 10, 950)
	if s.Commands != 100 || s.PerSecond != 50 || s.P50 != 51*time.Millisecond || s.P99 != 100*time.Millisecond || s.RecordsPerTransaction != 95 {
		t.Errorf("summary %+v", s)
	}
}

func TestClosedLoopRunsEveryCommandOnce(t *testing.T) {
	cfg := Config{Brokers: []string{"127.0.0.1:1"}, Commands: 250, Warmup: 50, Submitters: 7}
	if err := cfg.fill(); err != nil {
		t.Fatal(err)
	}
	seen := make([]atomic.Int32, cfg.Warmup+cfg.Commands)
	measuring := make(chan struct{})
	var measured atomic.Int32
	lat, _, err := closedLoop(context.Background(), cfg, measuring, func(i int) (time.Duration, error) {
		seen[i].Add(1)
		select {
		case <-measuring:
			measured.Add(1)
		default:
		}
		return time.Millisecond, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(lat) != cfg.Commands || int(measured.Load()) != cfg.Commands {
		t.Errorf("%d latencies, %d measured, want %d", len(lat), measured.Load(), cfg.Commands)
	}
	for i := range seen {
		if n := seen[i].Load(); n != 1 {
			t.Errorf("command %d submitted %d times", i, n)
		}
	}
}

func TestRawRecordsAreTheDispatcherEntries(t *testing.T) {
	recs, err := rawRecords("log", 7, 64)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Topic != "log" || len(recs[0].Value) < 64 {
		t.Errorf("records %+v", recs)
	}
}
