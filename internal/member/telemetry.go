package member

import (
	"context"
	"errors"
	"fmt"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// instrumentationName names the member's meter.
const instrumentationName = "github.com/krabka-io/krabka-dispatch/internal/member"

// The member's metrics, as OpenTelemetry names them; each carries the
// attributes "role" and "member". The Prometheus exporter names them
// dispatcher_leading, dispatcher_lease_remaining_seconds, dispatcher_term,
// dispatcher_elections_total, dispatcher_leadership_losses_total and
// dispatcher_device_reachable.
const (
	// MetricLeading is a gauge: 1 while the member leads its role, else 0.
	MetricLeading = "dispatcher.leading"
	// MetricLeaseRemaining is a gauge, in seconds: the lease left to the
	// role's holder as the member sees it; 0 when no lease is live.
	MetricLeaseRemaining = "dispatcher.lease.remaining"
	// MetricTerm is a gauge: the term of the role's holder as the member
	// sees it; 0 when the role has none.
	MetricTerm = "dispatcher.term"
	// MetricElections is a counter of the leaderships the member won.
	MetricElections = "dispatcher.elections"
	// MetricLeadershipLosses is a counter of the member's leaderships that
	// ended, by "reason": fenced, outcome-unknown, not-held, other,
	// dispatcher-stopped, resigned, abandoned.
	MetricLeadershipLosses = "dispatcher.leadership.losses"
	// MetricDeviceReachable is a gauge by "device": 1 when the device's
	// last health check passed (or it has none), 0 when it failed.
	MetricDeviceReachable = "dispatcher.device.reachable"
)

// The reasons of MetricLeadershipLosses.
const (
	lossFenced            = "fenced"
	lossOutcomeUnknown    = "outcome-unknown"
	lossNotHeld           = "not-held"
	lossOther             = "other"
	lossDispatcherStopped = "dispatcher-stopped"
	lossResigned          = "resigned"
	lossAbandoned         = "abandoned"
)

// telemetry holds the member's instruments.
type telemetry struct {
	owner     attribute.Set
	elections metric.Int64Counter
	losses    metric.Int64Counter
	gauges    metric.Registration
}

// newTelemetry registers the member's instruments on mp (nothing when nil).
// The gauges read m when a reader collects.
func newTelemetry(mp metric.MeterProvider, m *Member) (*telemetry, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	meter := mp.Meter(instrumentationName)
	t := &telemetry{owner: attribute.NewSet(
		attribute.String("role", m.cfg.Role.String()),
		attribute.String("member", m.cfg.Member.String()))}
	var err error
	wrap := func(err error) error { return fmt.Errorf("member: metrics: %w", err) }
	if t.elections, err = meter.Int64Counter(MetricElections,
		metric.WithDescription("Leaderships of the role that the member won.")); err != nil {
		return nil, wrap(err)
	}
	if t.losses, err = meter.Int64Counter(MetricLeadershipLosses,
		metric.WithDescription("Leaderships of the member that ended, by reason.")); err != nil {
		return nil, wrap(err)
	}
	// The counters are exported at 0 from the start, so that an alert on
	// their rates sees the first increase.
	t.elections.Add(context.Background(), 0, metric.WithAttributeSet(t.owner))
	for _, reason := range []string{lossFenced, lossOutcomeUnknown, lossNotHeld, lossOther, lossDispatcherStopped, lossResigned, lossAbandoned} {
		t.losses.Add(context.Background(), 0, metric.WithAttributeSet(t.owner),
			metric.WithAttributes(attribute.String("reason", reason)))
	}
	leading, err := meter.Int64ObservableGauge(MetricLeading,
		metric.WithDescription("1 while the member leads its role, else 0."))
	if err != nil {
		return nil, wrap(err)
	}
	lease, err := meter.Float64ObservableGauge(MetricLeaseRemaining,
		metric.WithDescription("Lease left to the role's holder, as the member sees it."),
		metric.WithUnit("s"))
	if err != nil {
		return nil, wrap(err)
	}
	term, err := meter.Int64ObservableGauge(MetricTerm,
		metric.WithDescription("Term of the role's holder, as the member sees it."))
	if err != nil {
		return nil, wrap(err)
	}
	reachable, err := meter.Int64ObservableGauge(MetricDeviceReachable,
		metric.WithDescription("1 when the device's last health check passed, 0 when it failed."))
	if err != nil {
		return nil, wrap(err)
	}
	t.gauges, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		view := m.Leadership()
		owner := metric.WithAttributeSet(t.owner)
		o.ObserveInt64(leading, boolGauge(view.Leader), owner)
		o.ObserveFloat64(lease, float64(view.LeaseRemainingMS)/1000, owner)
		o.ObserveInt64(term, int64(view.Term), owner)
		for _, h := range m.cfg.Registry.Health() {
			o.ObserveInt64(reachable, boolGauge(h.Err == nil), owner,
				metric.WithAttributes(attribute.String("device", h.Device)))
		}
		return nil
	}, leading, lease, term, reachable)
	if err != nil {
		return nil, wrap(err)
	}
	return t, nil
}

func boolGauge(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func (t *telemetry) elected() {
	t.elections.Add(context.Background(), 1, metric.WithAttributeSet(t.owner))
}

func (t *telemetry) lost(reason string) {
	t.losses.Add(context.Background(), 1, metric.WithAttributeSet(t.owner),
		metric.WithAttributes(attribute.String("reason", reason)))
}

// lossReason names why a leadership ended, from the error it ended with.
func lossReason(cause error) string {
	switch {
	case errors.Is(cause, coordination.ErrFenced):
		return lossFenced
	case errors.Is(cause, coordination.ErrOutcomeUnknown):
		return lossOutcomeUnknown
	case errors.Is(cause, coordination.ErrNotHeld):
		return lossNotHeld
	}
	return lossOther
}

// close stops the gauges' callback.
func (t *telemetry) close() {
	if t.gauges != nil {
		_ = t.gauges.Unregister()
	}
}
