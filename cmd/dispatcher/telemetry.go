package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// telemetry is the OpenTelemetry setup of one process: metrics always (read
// by the Prometheus exporter into a registry of its own, served on
// /metrics), traces when an OTLP endpoint is configured.
//
// The standard variables are honoured through the SDK: OTEL_SERVICE_NAME
// and OTEL_RESOURCE_ATTRIBUTES by the resource, OTEL_TRACES_SAMPLER and
// OTEL_BSP_* by the trace provider, OTEL_EXPORTER_OTLP_* by the OTLP
// exporter. Traces are exported when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set and OTEL_TRACES_EXPORTER is not
// "none"; OTEL_SDK_DISABLED=true turns everything off but /metrics.
type telemetry struct {
	meters     metric.MeterProvider
	tracers    trace.TracerProvider
	propagator propagation.TextMapPropagator
	metrics    http.Handler
	shutdown   []func(context.Context) error
}

// newTelemetry builds the providers for one member.
func newTelemetry(ctx context.Context, role, member string) (*telemetry, error) {
	res, err := resource.New(ctx,
		resource.WithAttributes(
			attribute.String("service.name", "dispatcher"),
			attribute.String("dispatch.role", role),
			attribute.String("dispatch.member", member),
		),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, err
	}
	t := &telemetry{
		tracers:    tracenoop.NewTracerProvider(),
		propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry))
	if err != nil {
		return nil, err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter), sdkmetric.WithResource(res))
	t.meters = mp
	t.shutdown = append(t.shutdown, mp.Shutdown)
	t.metrics = promhttp.HandlerFor(registry, promhttp.HandlerOpts{})

	if tracesEnabled() {
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, err
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		t.tracers = tp
		t.shutdown = append(t.shutdown, tp.Shutdown)
	}
	return t, nil
}

// tracesEnabled reads the standard variables that decide whether traces are
// exported at all.
func tracesEnabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	if strings.EqualFold(os.Getenv("OTEL_TRACES_EXPORTER"), "none") {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Shutdown flushes and stops the providers.
func (t *telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	for _, f := range t.shutdown {
		errs = append(errs, f(ctx))
	}
	return errors.Join(errs...)
}
