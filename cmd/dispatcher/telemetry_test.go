package main

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestTracesFollowTheStandardVariables(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}, false},
	} {
		for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED"} {
			t.Setenv(k, c.env[k])
		}
		if got := tracesEnabled(); got != c.want {
			t.Errorf("%v: traces enabled %v, want %v", c.env, got, c.want)
		}
	}
}

func TestMetricsEndpointServesTheMeters(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_SERVICE_NAME", "dispatcher-test")
	tel, err := newTelemetry(context.Background(), "controller", "node-1")
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	counter, err := tel.meters.Meter("test").Int64Counter("dispatch.test.things")
	if err != nil {
		t.Fatal(err)
	}
	counter.Add(context.Background(), 3)
	rec := httptest.NewRecorder()
	tel.metrics.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{"dispatch_test_things_total", `service_name="dispatcher-test"`, "go_goroutines"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
