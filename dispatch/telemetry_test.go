package dispatch

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
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
		h.stop()
	})
}
