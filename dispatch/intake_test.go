package dispatch

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// fakeRequests is a RequestSource over an in-memory partition.
type fakeRequests struct {
	mu      sync.Mutex
	records []RequestRecord
	more    chan struct{} // closed and replaced on append
	froms   []int64
}

func newFakeRequests() *fakeRequests { return &fakeRequests{more: make(chan struct{})} }

func (f *fakeRequests) add(t *testing.T, values ...[]byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, v := range values {
		off := int64(len(f.records))
		if off > 0 {
			off = f.records[len(f.records)-1].Offset + 1
		}
		f.records = append(f.records, RequestRecord{Offset: off, Value: v})
	}
	close(f.more)
	f.more = make(chan struct{})
}

func (f *fakeRequests) ReadRequests(ctx context.Context, _ coordination.TopicPartition, from int64) ([]RequestRecord, error) {
	f.mu.Lock()
	f.froms = append(f.froms, from)
	f.mu.Unlock()
	for {
		f.mu.Lock()
		var out []RequestRecord
		for _, r := range f.records {
			if r.Offset >= from {
				out = append(out, r)
			}
		}
		more := f.more
		f.mu.Unlock()
		if len(out) > 0 {
			return out, nil
		}
		select {
		case <-more:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func mustEncodeRequest(t *testing.T, cmd Command) []byte {
	t.Helper()
	v, err := EncodeRequest(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestIntakeExactlyOnceWithPosition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		dev := &recordingDevice{log: log, t: t}
		reqs := newFakeRequests()
		poison := newCommand("poison", "valve", time.Minute)
		poison.Deadline = poison.SubmittedAt // invalid: not after SubmittedAt
		poisonValue := encodeRequestUnchecked(poison)
		foreign := newCommand("foreign", "valve", time.Minute)
		foreign.Role = "other"
		reqs.add(t,
			mustEncodeRequest(t, newCommand("r0", "valve", time.Minute)),
			[]byte{0xff, 0x01}, // malformed
			poisonValue,
			mustEncodeRequest(t, newCommand("r0", "valve", time.Minute)), // duplicate
			mustEncodeRequest(t, foreign),
			mustEncodeRequest(t, newCommand("r1", "valve", time.Minute)),
		)
		h := newHarness(t, log, map[string]Device{"valve": dev}, WithRequestSource(reqs))
		h.start(t.Context())
		synctest.Wait()

		calls := dev.seen()
		if len(calls) != 2 || calls[0].id != "r0" || calls[1].id != "r1" {
			t.Fatalf("calls %+v, want r0 and r1 once each", calls)
		}
		outs := log.outcomes(t)
		if p := outs["poison"]; len(p) != 1 || p[0].Status != StatusRejected || p[0].Attempt != NoAttempt {
			t.Errorf("poison outcomes %+v", p)
		}
		if _, ok := log.issued(t, "foreign"); ok {
			t.Error("a request of another role was issued")
		}
		// Every transaction with Issued records carries the intake position
		// that covers them, and the positions are contiguous up to the end.
		next := int64(0)
		for _, w := range h.leader.writes {
			var issued, intake int
			for _, r := range w {
				e, err := DecodeEntry(r.Key, r.Value)
				if err != nil {
					t.Fatal(err)
				}
				switch e.Kind {
				case EntryIssued:
					issued++
				case EntryIntake:
					intake++
					if e.Intake.FromOffset != next {
						t.Errorf("intake from %d, want %d", e.Intake.FromOffset, next)
					}
					next = e.Intake.NextOffset
				}
			}
			if issued > 0 && intake != 1 {
				t.Errorf("a transaction with %d Issued records has %d intake records", issued, intake)
			}
		}
		if next != 6 {
			t.Errorf("intake position %d, want 6", next)
		}
		h.stop()

		// A new leader resumes right after the last committed position.
		reqs.add(t, mustEncodeRequest(t, newCommand("r2", "valve", time.Minute)))
		h2 := newHarness(t, log, map[string]Device{"valve": dev}, WithRequestSource(reqs))
		h2.leader.token = fakeToken(t, 8, 0)
		h2.start(t.Context())
		synctest.Wait()
		reqs.mu.Lock()
		froms := reqs.froms
		reqs.mu.Unlock()
		if got := froms[len(froms)-2]; got != 6 {
			t.Errorf("the new leader read from %d, want 6", got)
		}
		calls = dev.seen()
		if len(calls) != 3 || calls[2].id != "r2" {
			t.Errorf("calls %+v, want r2 once more", calls)
		}
		h2.stop()
	})
}

// encodeRequestUnchecked encodes a command that Validate refuses, as a
// careless producer would.
func encodeRequestUnchecked(cmd Command) []byte {
	w := wireWriter{}
	w.int16(requestVersion)
	writeCommand(&w, cmd)
	return w.buf
}

func TestIntakeGivesARequestWithoutDeadlineOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		dev := &recordingDevice{log: log, t: t}
		reqs := newFakeRequests()
		value, err := EncodeRequest(Command{ID: "open-ended", Device: "valve", SubmittedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		reqs.add(t, value)
		h := newHarness(t, log, map[string]Device{"valve": dev}, WithRequestSource(reqs), WithCommandTimeout(42*time.Second))
		h.start(t.Context())
		synctest.Wait()
		e, ok := log.issued(t, "open-ended")
		if !ok {
			t.Fatal("the request was not issued")
		}
		if got := e.Issued.Command.Deadline.Sub(e.Issued.Command.SubmittedAt); got != 42*time.Second {
			t.Errorf("deadline %v after submission, want the command timeout", got)
		}
		if len(dev.seen()) != 1 {
			t.Errorf("dispatches %+v", dev.seen())
		}
		h.stop()
	})
}

// TestIntakeLag wants dispatch.intake.lag to be the requests partition's
// high watermark, as the last fetch reported it, less the committed intake
// position.
func TestIntakeLag(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		log := &leaderLog{}
		reqs := newFakeRequests()
		reqs.add(t, mustEncodeRequest(t, newCommand("r0", "valve", time.Minute)), mustEncodeRequest(t, newCommand("r1", "valve", time.Minute)))
		// The fetch reports a partition that holds ten records, eight of
		// them beyond what this fetch returned.
		reqs.mu.Lock()
		for i := range reqs.records {
			reqs.records[i].HighWatermark = 10
		}
		reqs.mu.Unlock()
		h := newHarness(t, log, map[string]Device{"valve": &recordingDevice{log: log, t: t}}, WithRequestSource(reqs), WithMeterProvider(mp))
		h.start(t.Context())
		synctest.Wait()
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		lag := int64(-1)
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if data, ok := m.Data.(metricdata.Gauge[int64]); ok && m.Name == "dispatch.intake.lag" {
					for _, p := range data.DataPoints {
						lag = p.Value
					}
				}
			}
		}
		if lag != 8 {
			t.Errorf("dispatch.intake.lag = %d, want 10 - 2 = 8", lag)
		}
		h.stop()
	})
}
