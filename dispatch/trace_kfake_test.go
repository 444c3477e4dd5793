package dispatch_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestTraceAcrossTakeoverKfake submits a command under a caller's span to a
// leader that resigns while the device holds it. The successor reads the
// command's trace context from the Issued record's traceparent header,
// through the Kafka log reader (DecodeRecord), and its takeover, Redispatched
// record and dispatch are spans of the caller's trace. Trace propagation is
// no fencing claim, so kfake serves.
func TestTraceAcrossTakeoverKfake(t *testing.T) {
	fake := kafkatest.NewFake(t)
	c := cluster{brokers: fake.ListenAddrs(), createTopic: func(t *testing.T, name string) {
		kafkatest.CreateFakeTopic(t, fake, name, 1, nil)
	}}
	tp := c.newTopics(t)
	role := testRole(t)
	spans := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	dev := &holdOnce{held: make(chan struct{})}
	registry := dispatch.NewRegistry()
	if err := registry.Register("valve", dev); err != nil {
		t.Fatal(err)
	}
	a := lead(t, c, tp, role, "a", registry, dispatch.WithTracerProvider(provider))
	ctx, caller := provider.Tracer("test").Start(context.Background(), "caller")
	want := caller.SpanContext().TraceID()
	submitted := make(chan error, 1)
	go func() {
		_, err := a.d.Submit(ctx, dispatch.Command{ID: "traced", Device: "valve", Action: "open"})
		submitted <- err
	}()
	<-dev.held
	rctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	_ = a.l.Resign(rctx)
	cancel()
	if err := <-submitted; !errors.Is(err, dispatch.ErrHalted) {
		t.Fatalf("Submit of the held command: %v, want ErrHalted", err)
	}
	caller.End()

	lead(t, c, tp, role, "b", registry, dispatch.WithTracerProvider(provider))
	outcomes, entries := waitSettled(t, c, tp, role.String(), []string{"traced"}, 30*time.Second)
	if o := outcomes["traced"]; o.Status != dispatch.StatusSucceeded || o.Attempt != 2 {
		t.Fatalf("outcome %+v, want succeeded at attempt 2", o)
	}
	for _, e := range entries {
		if e.Kind == dispatch.EntryIssued && e.Trace.TraceID() != want {
			t.Errorf("the Issued record reads back with trace %s, want the caller's %s", e.Trace.TraceID(), want)
		}
	}
	// A record's span ends just after its transaction commits, so the
	// outcome's may end a moment after waitSettled read it.
	var seen map[string]int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		seen = map[string]int{}
		for _, s := range spans.Ended() {
			if s.SpanContext().TraceID() == want {
				seen[s.Name()]++
			}
		}
		if seen["dispatch.outcome"] > 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, name := range []string{"dispatch.takeover", "dispatch.redispatch", "dispatch.outcome"} {
		if seen[name] == 0 {
			t.Errorf("no %s span in the caller's trace; spans in it: %v", name, seen)
		}
	}
	// Two dispatches, the held one and the redispatch, both in the trace.
	if seen["dispatch.device"] != 2 {
		t.Errorf("%d dispatch.device spans in the caller's trace, want 2: %v", seen["dispatch.device"], seen)
	}
}
