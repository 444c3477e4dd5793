package demo

import (
	"context"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// newMetrics returns a meter provider read by a Prometheus exporter into a
// registry of the node's own, and the handler of /metrics that serves it,
// as `dispatcher run` does.
func newMetrics() (*sdkmetric.MeterProvider, http.Handler, error) {
	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry))
	if err != nil {
		return nil, nil, err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	return mp, promhttp.HandlerFor(registry, promhttp.HandlerOpts{}), nil
}

// shutdownMetrics stops a node's meter provider; idempotent.
func shutdownMetrics(mp *sdkmetric.MeterProvider) {
	if mp != nil {
		_ = mp.Shutdown(context.Background())
	}
}
