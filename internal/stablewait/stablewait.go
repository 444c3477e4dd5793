// Package stablewait accounts for a read that waits behind the last stable
// offset of a partition: a read that must pass a target offset (the high
// watermark taken when it began) while another producer's open transaction
// holds the last stable offset below it. It keeps the time waited, logs it at
// most once per [LogEvery], adds it to a counter, and says when the bound has
// passed. The reads of package coordination and of package dispatch both use
// it, and both report a wait past its bound as coordination's
// OpenTransactionError, which this package cannot import.
package stablewait

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

const (
	// LogEvery is the shortest gap between two log lines of one wait.
	LogEvery = 5 * time.Second

	// LogAfter is how long a read waits before its first log line, so a
	// transaction that commits within milliseconds, as a live producer's
	// does, logs nothing.
	LogAfter = time.Second
)

// NewCounter registers the counter of the seconds that reads spent waiting
// on an open transaction, named name, on the meter of scope.
func NewCounter(mp metric.MeterProvider, scope, name string) (metric.Float64Counter, error) {
	c, err := mp.Meter(scope).Float64Counter(name,
		metric.WithDescription("Time reads spent waiting for another producer's open transaction to end, by topic and partition."),
		metric.WithUnit("s"))
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return c, nil
}

// Wait is the account of one read. The zero value is not usable; build one
// with [New]. It is not safe for concurrent use: one read owns it.
type Wait struct {
	bound   time.Duration
	logger  *slog.Logger
	counter metric.Float64Counter
	topic   string
	part    int
	attrs   metric.MeasurementOption

	blocked bool      // the last observation found the read blocked
	last    time.Time // the last observation while blocked
	logged  time.Time // the last log line
	waited  time.Duration
}

// New returns the account of a read of topic's partition that may wait at
// most bound in all on open transactions. logger and counter may be nil.
func New(bound time.Duration, logger *slog.Logger, counter metric.Float64Counter, topic string, partition int) *Wait {
	return &Wait{
		bound: bound, logger: logger, counter: counter, topic: topic, part: partition,
		attrs: metric.WithAttributes(attribute.String("topic", topic), attribute.Int("partition", partition)),
	}
}

// Blocked records that, at now, the read sits at the last stable offset lso,
// below target, behind a transaction it does not own. It returns the time
// waited so far and whether it exceeds the bound.
func (w *Wait) Blocked(ctx context.Context, now time.Time, lso, target int64) (time.Duration, bool) {
	if !w.blocked {
		w.blocked, w.last = true, now
		// The first line of a stretch comes after LogAfter, and never
		// within LogEvery of the line before.
		if first := now.Add(LogAfter - LogEvery); first.After(w.logged) {
			w.logged = first
		}
	}
	if d := now.Sub(w.last); d > 0 {
		w.waited += d
		if w.counter != nil {
			w.counter.Add(ctx, d.Seconds(), w.attrs)
		}
	}
	w.last = now
	if w.logger != nil && now.Sub(w.logged) >= LogEvery {
		w.logged = now
		w.logger.Warn("waiting for another producer's open transaction to end before the read can pass it",
			"topic", w.topic, "partition", w.part, "last_stable_offset", lso,
			"target_high_watermark", target, "waited", w.waited.Round(time.Millisecond))
	}
	return w.waited, w.waited >= w.bound
}

// Moved records that the read advanced: the stretch of waiting ended.
func (w *Wait) Moved() { w.blocked = false }

// Remaining returns how much of the bound is left.
func (w *Wait) Remaining() time.Duration { return w.bound - w.waited }

// Waited returns the time waited so far.
func (w *Wait) Waited() time.Duration { return w.waited }
