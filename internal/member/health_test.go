package member

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// switchDevice succeeds at once and answers its health check with down
// while down is set.
type switchDevice struct {
	okDevice
	down atomic.Pointer[error]
}

func (d *switchDevice) CheckHealth(context.Context) error {
	if err := d.down.Load(); err != nil {
		return *err
	}
	return nil
}

// points collects the member's metrics, keyed by name and the attributes a
// test asks about.
func points(t *testing.T, reader *sdkmetric.ManualReader) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch data := m.Data.(type) {
			case metricdata.Gauge[int64]:
				for _, p := range data.DataPoints {
					name := m.Name
					if v, ok := p.Attributes.Value("device"); ok {
						name += "/" + v.AsString()
					}
					out[name] = float64(p.Value)
				}
			case metricdata.Gauge[float64]:
				for _, p := range data.DataPoints {
					out[m.Name] = p.Value
				}
			case metricdata.Sum[int64]:
				for _, p := range data.DataPoints {
					name := m.Name
					if v, ok := p.Attributes.Value("reason"); ok {
						name += "/" + v.AsString()
					}
					out[name] += float64(p.Value)
				}
			}
		}
	}
	return out
}

// waitFor polls cond until it holds or 30 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDeviceHealthEverywhere runs a leader with a device whose health check
// fails, and wants the failure in the leadership view, in readiness (the
// member is configured to demand its devices), in the device-reachable
// metric, and a submit to it refused at once with a
// *dispatch.DeviceUnavailableError; once the device is back, all of them
// clear. It also reads the leadership metrics of the member.
func TestDeviceHealthEverywhere(t *testing.T) {
	brokers := fakeCluster(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	dev := &switchDevice{okDevice: okDevice{tokens: map[string]coordination.FencingToken{}}}
	unreachable := errors.New("broker at 192.0.2.1:1883 unreachable")
	dev.down.Store(&unreachable)
	events := make(chan Event, 16)
	a := startMemberWith(t, brokers, "a", nil, events, func(c *Config) {
		c.HealthInterval = 20 * time.Millisecond
		c.ReadyRequiresDevices = true
		c.MeterProvider = mp
	}, dev)
	elected := waitEvent(t, events, EventElected)

	waitFor(t, "the leadership view shows the device down", func() bool {
		d := a.m.Leadership().Devices
		return len(d) == 1 && d[0].Device == "dev" && !d[0].Reachable && d[0].Error == unreachable.Error()
	})
	// Once the leader recovered, only the device keeps it from being ready.
	waitFor(t, "the leader recovered", func() bool { return errors.Is(a.m.Ready(), unreachable) })
	start := time.Now()
	_, err := a.m.Submit(context.Background(), dispatch.Command{ID: "refused", Device: "dev", Action: "go"}, 10*time.Second)
	var unavailable *dispatch.DeviceUnavailableError
	if !errors.As(err, &unavailable) || unavailable.Device != "dev" {
		t.Fatalf("Submit to a device down: %v, want a *dispatch.DeviceUnavailableError", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("the refusal took %s", took)
	}
	got := points(t, reader)
	if got[MetricLeading] != 1 || got[MetricDeviceReachable+"/dev"] != 0 || got[MetricElections] != 1 ||
		got[MetricTerm] != float64(elected.Term) || got[MetricLeaseRemaining] <= 0 {
		t.Errorf("metrics with the device down: %v", got)
	}
	if _, ok := got[MetricDeviceReachable+"/dev"]; !ok {
		t.Errorf("no %s for dev: %v", MetricDeviceReachable, got)
	}

	dev.down.Store(nil)
	waitFor(t, "the member is ready with the device back", func() bool { return a.m.Ready() == nil })
	st, err := a.m.Submit(context.Background(), dispatch.Command{ID: "back", Device: "dev", Action: "go"}, 10*time.Second)
	if err != nil || st.State != dispatch.StatusSucceeded.String() {
		t.Fatalf("Submit with the device back: %+v %v", st, err)
	}
	if got := points(t, reader); got[MetricDeviceReachable+"/dev"] != 1 {
		t.Errorf("%s/dev = %v with the device back", MetricDeviceReachable, got[MetricDeviceReachable+"/dev"])
	}

	a.stop(t)
	waitEvent(t, events, EventResigned)
	if got := points(t, reader); got[MetricLeadershipLosses+"/"+lossResigned] != 1 {
		t.Errorf("losses after a resignation: %v", got)
	}
}

// TestReadyIgnoresDevicesByDefault wants a leader with a device down ready
// when ReadyRequiresDevices is off.
func TestReadyIgnoresDevicesByDefault(t *testing.T) {
	brokers := fakeCluster(t)
	dev := &switchDevice{okDevice: okDevice{tokens: map[string]coordination.FencingToken{}}}
	unreachable := errors.New("unreachable")
	dev.down.Store(&unreachable)
	events := make(chan Event, 16)
	a := startMemberWith(t, brokers, "a", nil, events, func(c *Config) { c.HealthInterval = 20 * time.Millisecond }, dev)
	waitEvent(t, events, EventElected)
	waitFor(t, "the device is checked", func() bool { return len(a.m.Leadership().Devices) == 1 })
	waitFor(t, "the leader recovered", func() bool { return a.m.Ready() == nil })
	if d := a.m.Leadership().Devices; d[0].Reachable {
		t.Errorf("devices %+v, want dev unreachable", d)
	}
}

func TestLossReason(t *testing.T) {
	for _, c := range []struct {
		cause error
		want  string
	}{
		{fmt.Errorf("renew: %w", coordination.ErrFenced), lossFenced},
		{fmt.Errorf("write: %w", coordination.ErrOutcomeUnknown), lossOutcomeUnknown},
		{fmt.Errorf("resigned: %w", coordination.ErrNotHeld), lossNotHeld},
		{errors.New("transport closed"), lossOther},
	} {
		if got := lossReason(c.cause); got != c.want {
			t.Errorf("lossReason(%v) = %s, want %s", c.cause, got, c.want)
		}
	}
}
