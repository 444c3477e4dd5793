package dispatch

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// instrumentationName names the tracer and the meter of this package.
const instrumentationName = "github.com/krabka-io/krabka-dispatch/dispatch"

// telemetry holds the dispatcher's tracer and instruments. The metrics, each
// with the attributes "role" and "member":
//
//	dispatch.commands          counter, by "status": outcomes committed
//	dispatch.commit.duration   histogram, seconds: one log transaction
//	dispatch.dispatch.duration histogram, seconds, by "device": one Dispatch call
//	dispatch.fenced_writes     counter: log transactions refused with coordination.ErrFenced
//	dispatch.pending           gauge: commands issued or queued, no outcome yet
//	dispatch.in_doubt          gauge: commands recorded in doubt, unresolved
//	dispatch.intake.lag        gauge: requests partition high watermark less the intake position
//
// The Prometheus exporter names them dispatch_commands_total,
// dispatch_commit_duration_seconds, dispatch_dispatch_duration_seconds,
// dispatch_fenced_writes_total, dispatch_pending, dispatch_in_doubt and
// dispatch_intake_lag.
type telemetry struct {
	tracer   trace.Tracer
	outcomes metric.Int64Counter
	commit   metric.Float64Histogram
	dispatch metric.Float64Histogram
	fenced   metric.Int64Counter
	gauges   metric.Registration
	// owner holds the attributes "role" and "member" of every measurement.
	owner attribute.Set

	// The measurement options are built once: an attribute set costs a
	// sort and an allocation per measurement otherwise, on every command.
	// ownerOpt carries owner; byStatus owner and each status; byDevice
	// (device name to []metric.RecordOption) owner and each device, added
	// as devices are first driven. The last two are held as the slices
	// that Add and Record take, so that a measurement on the hot path
	// allocates no slice for its options.
	ownerOpt metric.MeasurementOption
	byStatus [StatusCancelled + 1][]metric.AddOption
	byDevice sync.Map

	// tracing is false when the tracer provider is the no-op one: the spans
	// are then started without attributes, which nothing would read.
	tracing bool
	// noSpan is the no-op span, for a call that no trace reaches.
	noSpan trace.Span
	// The span kinds, as start options built once.
	kindServer, kindClient, kindConsumer, kindProducer trace.SpanStartOption

	pending atomic.Int64
	inDoubt atomic.Int64
	// intakeEnd is the latest high watermark of the requests partition that
	// intake saw, intakeAt the committed intake position; hasIntake
	// reports whether the dispatcher reads requests at all.
	intakeEnd atomic.Int64
	intakeAt  atomic.Int64
	hasIntake atomic.Bool
}

// DurationBuckets returns the bucket boundaries, in seconds, of the
// package's duration histograms: 1 ms to 10 s. Without them the SDK's
// defaults, meant for milliseconds, would put every duration in seconds in
// the bucket of 5.
func DurationBuckets() []float64 {
	return []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
}

func newTelemetry(tp trace.TracerProvider, mp metric.MeterProvider, role, member string) (*telemetry, error) {
	_, quiet := tp.(tracenoop.TracerProvider)
	t := &telemetry{tracer: tp.Tracer(instrumentationName),
		owner:        attribute.NewSet(attribute.String("role", role), attribute.String("member", member)),
		tracing:      !quiet,
		noSpan:       trace.SpanFromContext(context.Background()),
		kindServer:   trace.WithSpanKind(trace.SpanKindServer),
		kindClient:   trace.WithSpanKind(trace.SpanKindClient),
		kindConsumer: trace.WithSpanKind(trace.SpanKindConsumer),
		kindProducer: trace.WithSpanKind(trace.SpanKindProducer),
	}
	t.ownerOpt = metric.WithAttributeSet(t.owner)
	for s := range t.byStatus {
		t.byStatus[s] = []metric.AddOption{t.with(attribute.String("status", Status(s).String()))}
	}
	meter := mp.Meter(instrumentationName)
	var err error
	if t.outcomes, err = meter.Int64Counter("dispatch.commands",
		metric.WithDescription("Command outcomes committed to the log, by status."),
		metric.WithUnit("{command}")); err != nil {
		return nil, fmt.Errorf("dispatch: metrics: %w", err)
	}
	if t.commit, err = meter.Float64Histogram("dispatch.commit.duration",
		metric.WithDescription("Duration of one transaction of the command log."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(DurationBuckets()...)); err != nil {
		return nil, fmt.Errorf("dispatch: metrics: %w", err)
	}
	if t.dispatch, err = meter.Float64Histogram("dispatch.dispatch.duration",
		metric.WithDescription("Duration of one Dispatch call of a device."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(DurationBuckets()...)); err != nil {
		return nil, fmt.Errorf("dispatch: metrics: %w", err)
	}
	if t.fenced, err = meter.Int64Counter("dispatch.fenced_writes",
		metric.WithDescription("Log transactions that the cluster refused because a newer leader fenced this one."),
		metric.WithUnit("{transaction}")); err != nil {
		return nil, fmt.Errorf("dispatch: metrics: %w", err)
	}
	// The counter is exported at 0 from the start, so that an alert on
	// its rate sees the first fence.
	t.fenced.Add(context.Background(), 0, t.ownerOpt)
	pending, err := meter.Int64ObservableGauge("dispatch.pending",
		metric.WithDescription("Commands accepted with no outcome yet."),
		metric.WithUnit("{command}"))
	if err != nil {
		return nil, fmt.Errorf("dispatch: metrics: %w", err)
	}
	inDoubt, err := meter.Int64ObservableGauge("dispatch.in_doubt",
		metric.WithDescription("Commands recorded in doubt and not resolved."),
		metric.WithUnit("{command}"))
	if err != nil {
		return nil, fmt.Errorf("dispatch: metrics: %w", err)
	}
	lag, err := meter.Int64ObservableGauge("dispatch.intake.lag",
		metric.WithDescription("Requests on the requests partition that intake has not taken yet: its high watermark, as of the last fetch, less the intake position."),
		metric.WithUnit("{request}"))
	if err != nil {
		return nil, fmt.Errorf("dispatch: metrics: %w", err)
	}
	t.gauges, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(pending, t.pending.Load(), t.ownerOpt)
		o.ObserveInt64(inDoubt, t.inDoubt.Load(), t.ownerOpt)
		if t.hasIntake.Load() {
			o.ObserveInt64(lag, max(0, t.intakeEnd.Load()-t.intakeAt.Load()), t.ownerOpt)
		}
		return nil
	}, pending, inDoubt, lag)
	if err != nil {
		return nil, fmt.Errorf("dispatch: metrics: %w", err)
	}
	return t, nil
}

// close stops the gauges' callback.
func (t *telemetry) close() {
	if t.gauges != nil {
		_ = t.gauges.Unregister()
	}
}

func (t *telemetry) pendingDelta(n int64) { t.pending.Add(n) }
func (t *telemetry) inDoubtDelta(n int64) { t.inDoubt.Add(n) }

// intakeSeen records the high watermark of a fetch of the requests
// partition.
func (t *telemetry) intakeSeen(hwm int64) {
	t.hasIntake.Store(true)
	for {
		old := t.intakeEnd.Load()
		if hwm <= old || t.intakeEnd.CompareAndSwap(old, hwm) {
			return
		}
	}
}

// intakeCommitted records the committed intake position.
func (t *telemetry) intakeCommitted(next int64) { t.intakeAt.Store(next) }

// with returns the measurement option of the owner's attributes and kv.
func (t *telemetry) with(kv attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(append(t.owner.ToSlice(), kv)...))
}

func (t *telemetry) countOutcome(s Status) {
	if int(s) < len(t.byStatus) {
		t.outcomes.Add(context.Background(), 1, t.byStatus[s]...)
		return
	}
	t.outcomes.Add(context.Background(), 1, t.with(attribute.String("status", s.String())))
}

func (t *telemetry) commitLatency(d time.Duration) {
	t.commit.Record(context.Background(), d.Seconds(), t.ownerOpt)
}

func (t *telemetry) dispatchLatency(d time.Duration, device string) {
	opt, ok := t.byDevice.Load(device)
	if !ok {
		opt, _ = t.byDevice.LoadOrStore(device, []metric.RecordOption{t.with(attribute.String("device", device))})
	}
	t.dispatch.Record(context.Background(), d.Seconds(), opt.([]metric.RecordOption)...)
}

func (t *telemetry) countFenced() {
	t.fenced.Add(context.Background(), 1, t.ownerOpt)
}

// startSubmit opens the root span of a command submitted in process.
func (t *telemetry) startSubmit(ctx context.Context, cmd Command) (context.Context, trace.Span) {
	if !t.tracing {
		if !trace.SpanContextFromContext(ctx).IsValid() {
			// The no-op tracer would add a span that carries nothing.
			return ctx, t.noSpan
		}
		return t.tracer.Start(ctx, "dispatch.submit", t.kindServer)
	}
	return t.tracer.Start(ctx, "dispatch.submit", t.kindServer,
		trace.WithAttributes(commandAttributes(cmd)...))
}

// startIntake opens the span of a command read from the requests topic, as a
// child of the trace context in the request's headers, if any.
func (t *telemetry) startIntake(headers []coordination.Header, cmd Command, offset int64) trace.Span {
	ctx := propagation.TraceContext{}.Extract(context.Background(), headerCarrier{headers: &headers})
	if !t.tracing {
		_, span := t.tracer.Start(ctx, "dispatch.intake", t.kindConsumer)
		return span
	}
	_, span := t.tracer.Start(ctx, "dispatch.intake", t.kindConsumer,
		trace.WithAttributes(append(commandAttributes(cmd), attribute.Int64("dispatch.request.offset", offset))...))
	return span
}

// startRecord opens the span of one record of a command, from its queueing
// to its commit. It returns nil under the no-op tracer: an item's span may
// be nil, and a record span carries nothing that the command's own span
// does not.
func (t *telemetry) startRecord(parent trace.SpanContext, name string) trace.Span {
	if !t.tracing {
		return nil
	}
	ctx := trace.ContextWithSpanContext(context.Background(), parent)
	_, span := t.tracer.Start(ctx, name, t.kindProducer)
	return span
}

// startTakeover opens the span of a new leader's settling of a command that
// an earlier leader left pending: a child of the command's trace, from its
// Issued record, when the record carries one.
func (t *telemetry) startTakeover(issued trace.SpanContext, cmd Command) trace.Span {
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), issued)
	_, span := t.tracer.Start(ctx, "dispatch.takeover", trace.WithAttributes(commandAttributes(cmd)...))
	return span
}

// startDispatch opens the span of one Dispatch call.
func (t *telemetry) startDispatch(ctx context.Context, parent trace.SpanContext, cmd Command, token coordination.FencingToken, try int) (context.Context, trace.Span) {
	if !t.tracing && !parent.IsValid() {
		// The no-op tracer would add a span that carries nothing.
		return ctx, t.noSpan
	}
	ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	if !t.tracing {
		return t.tracer.Start(ctx, "dispatch.device", t.kindClient)
	}
	return t.tracer.Start(ctx, "dispatch.device", t.kindClient,
		trace.WithAttributes(
			attribute.String("dispatch.device", cmd.Device),
			attribute.String("dispatch.command.id", cmd.ID),
			attribute.String("dispatch.token", token.String()),
			attribute.Int("dispatch.try", try)))
}

func commandAttributes(cmd Command) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("dispatch.command.id", cmd.ID),
		attribute.String("dispatch.device", cmd.Device),
		attribute.String("dispatch.action", cmd.Action),
	}
}

// traceHeaders returns the W3C trace context of span as record headers.
func traceHeaders(span trace.SpanContext) []coordination.Header {
	if !span.IsValid() {
		return nil
	}
	var headers []coordination.Header
	ctx := trace.ContextWithSpanContext(context.Background(), span)
	propagation.TraceContext{}.Inject(ctx, headerCarrier{headers: &headers})
	return headers
}

// traceparentHeader is the header of the W3C trace context: without it,
// record headers carry no trace context.
const traceparentHeader = "traceparent"

// traceFromHeaders returns the W3C trace context that record headers carry,
// or the zero SpanContext.
func traceFromHeaders(headers []coordination.Header) trace.SpanContext {
	ctx := propagation.TraceContext{}.Extract(context.Background(), headerCarrier{headers: &headers})
	return trace.SpanContextFromContext(ctx)
}

// headerCarrier adapts record headers to the propagation API.
type headerCarrier struct {
	headers *[]coordination.Header
}

func (c headerCarrier) Get(key string) string {
	for _, h := range *c.headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func (c headerCarrier) Set(key, value string) {
	for i, h := range *c.headers {
		if h.Key == key {
			(*c.headers)[i].Value = []byte(value)
			return
		}
	}
	*c.headers = append(*c.headers, coordination.Header{Key: key, Value: []byte(value)})
}

func (c headerCarrier) Keys() []string {
	keys := make([]string, len(*c.headers))
	for i, h := range *c.headers {
		keys[i] = h.Key
	}
	return keys
}
