package stablewait

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// TestWaitAccountsBoundsAndThrottles drives one wait with explicit instants:
// the time blocked adds up (and only while blocked), the bound is reported
// once reached, the counter holds the time waited, and the log has one line
// per LogEvery, the first after LogAfter.
func TestWaitAccountsBoundsAndThrottles(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	counter, err := NewCounter(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), "test", "wait")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	w := New(20*time.Second, slog.New(slog.NewTextHandler(&logs, nil)), counter, "log", 3)
	ctx := context.Background()
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	if waited, over := w.Blocked(ctx, at(0), 7, 9); waited != 0 || over {
		t.Fatalf("first observation: waited %v over %v", waited, over)
	}
	if logs.Len() != 0 {
		t.Fatalf("a log line at once: %q", logs.String())
	}
	w.Blocked(ctx, at(500*time.Millisecond), 7, 9)
	if logs.Len() != 0 {
		t.Fatalf("a log line before LogAfter: %q", logs.String())
	}
	w.Blocked(ctx, at(LogAfter), 7, 9)
	w.Blocked(ctx, at(LogAfter+time.Second), 7, 9)
	if n := strings.Count(logs.String(), "\n"); n != 1 {
		t.Fatalf("%d log lines after %v, want 1: %q", n, LogAfter+time.Second, logs.String())
	}
	for _, want := range []string{"topic=log", "partition=3", "last_stable_offset=7", "target_high_watermark=9", "waited=1s"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log line lacks %q: %q", want, logs.String())
		}
	}
	// The read advances; the time until it blocks again is not waiting.
	w.Moved()
	if waited, _ := w.Blocked(ctx, at(10*time.Second), 8, 9); waited != 2*time.Second {
		t.Fatalf("after a move: waited %v, want 2s", waited)
	}
	w.Blocked(ctx, at(LogAfter+LogEvery+10*time.Second), 8, 9)
	if n := strings.Count(logs.String(), "\n"); n != 2 {
		t.Fatalf("%d log lines, want 2: %q", n, logs.String())
	}
	if waited, over := w.Blocked(ctx, at(27*time.Second), 8, 9); waited != 19*time.Second || over || w.Remaining() != time.Second {
		t.Fatalf("waited %v over %v remaining %v, want 19s, false, 1s", waited, over, w.Remaining())
	}
	if waited, over := w.Blocked(ctx, at(28*time.Second), 8, 9); waited != 20*time.Second || !over {
		t.Fatalf("waited %v over %v, want the bound reached", waited, over)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			for _, p := range m.Data.(metricdata.Sum[float64]).DataPoints {
				sum += p.Value
			}
		}
	}
	if sum != 20 {
		t.Errorf("the counter holds %vs, want 20s", sum)
	}
}
