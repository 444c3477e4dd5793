package dispatch

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

func TestOneTracePerCommand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spans := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
		log := &leaderLog{}
		h := newHarness(t, log, map[string]Device{"valve": &recordingDevice{log: log, t: t}}, WithTracerProvider(tp))
		h.start(t.Context())
		if _, err := h.d.Submit(t.Context(), newCommand("traced", "valve", time.Minute)); err != nil {
			t.Fatal(err)
		}
		h.stop()

		names := map[string]bool{}
		var trace string
		for _, s := range spans.Ended() {
			names[s.Name()] = true
			id := s.SpanContext().TraceID().String()
			if trace == "" {
				trace = id
			}
			if id != trace {
				t.Errorf("span %s is in trace %s, want %s", s.Name(), id, trace)
			}
		}
		for _, want := range []string{"dispatch.submit", "dispatch.issue", "dispatch.device", "dispatch.outcome"} {
			if !names[want] {
				t.Errorf("no %s span; spans %v", want, names)
			}
		}
		// The trace context travels in the headers of the command's records.
		for i, r := range log.records {
			found := false
			for _, hd := range r.Headers {
				if hd.Key == "traceparent" && len(hd.Value) > 36 && string(hd.Value[3:35]) == trace {
					found = true
				}
			}
			if !found {
				t.Errorf("record %d carries no traceparent of trace %s", i, trace)
			}
		}
	})
}

func TestMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		log := &leaderLog{}
		commitEntries(t, log, fakeToken(t, 3, 0), takeoverIssued(newCommand("left", "valve", time.Hour)))
		refuser := &recordingDevice{log: log, t: t, respond: func(context.Context, Command, int) (Result, error) {
			return Result{}, Rejected(errBadPayload)
		}}
		h := newHarness(t, log, map[string]Device{"valve": &recordingDevice{log: log, t: t}, "refuser": refuser}, WithMeterProvider(mp))
		h.start(t.Context())
		if _, err := h.d.Submit(t.Context(), newCommand("ok", "valve", time.Minute)); err != nil {
			t.Fatal(err)
		}
		if _, err := h.d.Submit(t.Context(), newCommand("bad", "refuser", time.Minute)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		histograms := map[string]uint64{}
		byDevice := map[string]uint64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				switch data := m.Data.(type) {
				case metricdata.Sum[int64]:
					for _, p := range data.DataPoints {
						status, _ := p.Attributes.Value("status")
						got[m.Name+"/"+status.AsString()] = p.Value
					}
				case metricdata.Gauge[int64]:
					for _, p := range data.DataPoints {
						got[m.Name] = p.Value
					}
				case metricdata.Histogram[float64]:
					for _, p := range data.DataPoints {
						histograms[m.Name] += p.Count
						if device, ok := p.Attributes.Value("device"); ok {
							byDevice[device.AsString()] += p.Count
						}
						if role, _ := p.Attributes.Value("role"); role.AsString() != h.d.role {
							t.Errorf("%s: a point without the role: %v", m.Name, p.Attributes.ToSlice())
						}
					}
				}
			}
		}
		want := map[string]int64{
			"dispatch.commands/succeeded": 1, "dispatch.commands/rejected": 1, "dispatch.commands/in-doubt": 1,
			"dispatch.pending": 0, "dispatch.in_doubt": 1,
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %d, want %d (all: %v)", k, got[k], v, got)
			}
		}
		// Two device calls: "ok", and "bad", which the device refused.
		if histograms["dispatch.commit.duration"] == 0 || histograms["dispatch.dispatch.duration"] != 2 {
			t.Errorf("histograms %v", histograms)
		}
		if byDevice["valve"] != 1 || byDevice["refuser"] != 1 || len(byDevice) != 2 {
			t.Errorf("device calls by device %v, want one each of valve and refuser", byDevice)
		}
		h.stop()
	})
}

// TestTraceContinuesAcrossTakeover submits a command under a parent span to
// a leader that dies while the device holds the command; the next leader
// reads the trace context from the Issued record's headers, and its
// takeover, Redispatched record and dispatch are spans of the submit's trace.
func TestTraceContinuesAcrossTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spans := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
		log := &leaderLog{}
		held := make(chan struct{})
		first := redispatchDevice{&recordingDevice{log: log, t: t, respond: func(ctx context.Context, _ Command, _ int) (Result, error) {
			close(held)
			<-ctx.Done()
			return Result{}, ctx.Err()
		}}}
		h1 := newHarness(t, log, map[string]Device{"valve": first}, WithTracerProvider(tp))
		h1.start(t.Context())
		ctx, parent := tp.Tracer("test").Start(t.Context(), "caller")
		submitted := make(chan error, 1)
		go func() {
			_, err := h1.d.Submit(ctx, newCommand("carried", "valve", time.Hour))
			submitted <- err
		}()
		<-held
		h1.leader.end(fmt.Errorf("test: %w", coordination.ErrFenced))
		<-h1.runErr
		<-submitted
		parent.End()
		want := parent.SpanContext().TraceID()

		second := redispatchDevice{&recordingDevice{log: log, t: t}}
		h2 := newHarness(t, log, map[string]Device{"valve": second}, WithTracerProvider(tp))
		h2.leader.token = fakeToken(t, 8, 0)
		h2.start(t.Context())
		synctest.Wait()
		if calls := second.seen(); len(calls) != 1 || calls[0].id != "carried" {
			t.Fatalf("successor's calls %+v, want one redispatch of carried", calls)
		}
		h2.stop()

		seen := map[string]bool{}
		for _, s := range spans.Ended() {
			switch s.Name() {
			case "dispatch.takeover", "dispatch.redispatch", "dispatch.device":
				seen[s.Name()] = true
				if got := s.SpanContext().TraceID(); got != want {
					t.Errorf("span %s is in trace %s, want the submit's %s", s.Name(), got, want)
				}
			}
		}
		for _, name := range []string{"dispatch.takeover", "dispatch.redispatch", "dispatch.device"} {
			if !seen[name] {
				t.Errorf("no %s span ended; seen %v", name, seen)
			}
		}
	})
}

// TestDurationHistogramsResolveMilliseconds wants the duration histograms to
// carry the boundaries of DurationBuckets, so a commit of a few milliseconds
// lands in a low bucket rather than in the SDK's default bucket of 5.
func TestDurationHistogramsResolveMilliseconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		log := &leaderLog{}
		h := newHarness(t, log, map[string]Device{"valve": &recordingDevice{log: log, t: t}}, WithMeterProvider(mp))
		h.start(t.Context())
		if _, err := h.d.Submit(t.Context(), newCommand("timed", "valve", time.Minute)); err != nil {
			t.Fatal(err)
		}
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		h.stop()
		seen := 0
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				data, ok := m.Data.(metricdata.Histogram[float64])
				if !ok {
					continue
				}
				for _, p := range data.DataPoints {
					seen++
					if !slices.Equal(p.Bounds, DurationBuckets()) {
						t.Errorf("%s bounds %v, want %v", m.Name, p.Bounds, DurationBuckets())
					}
					// Under synctest no time passes: every duration is 0 s,
					// in the first bucket (at most 1 ms).
					if p.Count == 0 || p.BucketCounts[0] != p.Count {
						t.Errorf("%s buckets %v of %d", m.Name, p.BucketCounts, p.Count)
					}
					role, _ := p.Attributes.Value("role")
					member, _ := p.Attributes.Value("member")
					if role.AsString() != "controller" || member.AsString() != "node-1" {
						t.Errorf("%s attributes %v, want role and member", m.Name, p.Attributes.ToSlice())
					}
				}
			}
		}
		if seen < 2 {
			t.Errorf("%d histogram points, want the commit and the dispatch durations", seen)
		}
	})
}

// TestFencedWritesCounted fences the leader under a queued command and wants
// dispatch.fenced_writes to count the refused transaction.
func TestFencedWritesCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		log := &leaderLog{}
		h := newHarness(t, log, map[string]Device{"valve": &recordingDevice{log: log, t: t}}, WithMeterProvider(mp))
		h.start(t.Context())
		synctest.Wait()
		h.leader.mu.Lock()
		h.leader.beforeWrite = func([]coordination.GuardedRecord) error {
			return fmt.Errorf("write: %w", coordination.ErrFenced)
		}
		h.leader.mu.Unlock()
		submitted := make(chan error, 1)
		go func() {
			_, err := h.d.Submit(t.Context(), newCommand("refused", "valve", time.Minute))
			submitted <- err
		}()
		// The refused transaction ends nothing by itself: the leadership's
		// end halts the dispatcher.
		synctest.Wait()
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		var fenced int64
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if data, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "dispatch.fenced_writes" {
					for _, p := range data.DataPoints {
						fenced += p.Value
					}
				}
			}
		}
		if fenced != 1 {
			t.Errorf("dispatch.fenced_writes = %d, want 1", fenced)
		}
		h.leader.end(fmt.Errorf("test: %w", coordination.ErrFenced))
		<-h.runErr
		if err := <-submitted; err == nil {
			t.Error("a submit under a fenced leadership succeeded")
		}
	})
}

// TestNoopTracerPassesTheCallersTrace checks the shortcut past the no-op
// tracer: a submit or a device call that no trace reaches gets the no-op
// span and its context unchanged, and one that a caller's trace reaches
// still carries that trace, so a device or a tracer further down sees it.
func TestNoopTracerPassesTheCallersTrace(t *testing.T) {
	tel, err := newTelemetry(tracenoop.NewTracerProvider(), metricnoop.NewMeterProvider(), "controller", "node-1")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	parent := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{1, 2, 3},
		SpanID:     trace.SpanID{4, 5, 6},
		TraceFlags: trace.FlagsSampled,
		Remote:     true,
	})
	token := coordination.FencingToken{}

	got, span := tel.startSubmit(ctx, sampleCommand())
	if got != ctx || span != tel.noSpan || span.SpanContext().IsValid() {
		t.Errorf("submit outside a trace: context changed %v, span %v", got != ctx, span.SpanContext())
	}
	got, _ = tel.startDispatch(ctx, trace.SpanContext{}, sampleCommand(), token, 1)
	if got != ctx {
		t.Error("device call outside a trace: the context changed")
	}

	got, span = tel.startSubmit(trace.ContextWithSpanContext(ctx, parent), sampleCommand())
	if !span.SpanContext().Equal(parent) {
		t.Errorf("submit in a trace: span %v, want the caller's %v", span.SpanContext(), parent)
	}
	if sc := trace.SpanContextFromContext(got); sc.TraceID() != parent.TraceID() {
		t.Errorf("submit in a trace: context carries %v, want the caller's trace", sc)
	}
	got, _ = tel.startDispatch(ctx, parent, sampleCommand(), token, 1)
	if sc := trace.SpanContextFromContext(got); sc.TraceID() != parent.TraceID() {
		t.Errorf("device call of a traced command: context carries %v, want the command's trace", sc)
	}
}
