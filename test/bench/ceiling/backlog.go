package ceiling

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// BacklogResult is how fast one role drained a backlog of requests.
type BacklogResult struct {
	// Commands is the size of the backlog.
	Commands int

	// ToDevice is from the dispatcher's start (leadership held) to the
	// device's last act; ToOutcomes to the arrival of the last outcome at a
	// read_committed reader of the log.
	ToDevice, ToOutcomes time.Duration

	// Transactions is the number of log transactions the dispatcher wrote.
	Transactions int64
}

// Rate returns the commands per second to the last outcome committed.
func (b BacklogResult) Rate() float64 { return Ratio(float64(b.Commands), b.ToOutcomes.Seconds()) }

// MeasureBacklog writes n requests to partition 0 of requestsTopic, then
// starts a dispatcher of role with a device that does nothing and intake
// from that topic, and times until it has dispatched every command and
// every outcome committed. Options go to the dispatcher.
func MeasureBacklog(ctx context.Context, brokers []string, role, logTopic, requestsTopic string, n int, options ...dispatch.Option) (BacklogResult, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(requestsTopic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequestTimeoutOverhead(DefaultRequestTimeout),
		kgo.MaxBufferedRecords(max(10_000, n)))
	if err != nil {
		return BacklogResult{}, err
	}
	now := time.Now()
	for i := range n {
		cmd := BenchCommand(role, "backlog", i, now)
		cmd.Deadline = now.Add(10 * time.Minute)
		value, err := dispatch.EncodeRequest(cmd)
		if err != nil {
			cl.Close()
			return BacklogResult{}, err
		}
		cl.Produce(ctx, &kgo.Record{Key: []byte(cmd.ID), Value: value, Partition: 0}, nil)
	}
	err = cl.Flush(ctx)
	cl.Close()
	if err != nil {
		return BacklogResult{}, fmt.Errorf("write the backlog: %w", err)
	}
	w, err := WatchOutcomes(brokers, logTopic)
	if err != nil {
		return BacklogResult{}, err
	}
	defer w.Close()
	d, err := StartDispatcher(ctx, DispatcherSetup{
		Brokers: brokers, Role: role, LogTopic: logTopic, RequestsTopic: requestsTopic, Intake: true,
		Options: append([]dispatch.Option{dispatch.WithMaxQueued(max(dispatch.DefaultMaxQueued, 2*n))}, options...),
	})
	if err != nil {
		return BacklogResult{}, err
	}
	defer d.Close()
	start := time.Now()
	deadline := start.Add(5 * time.Minute)
	for d.Device.Count() < n || w.Outcomes.Count() < n {
		if time.Now().After(deadline) {
			return BacklogResult{}, fmt.Errorf("backlog of %d: %d dispatched and %d outcomes read after 5 minutes", n, d.Device.Count(), w.Outcomes.Count())
		}
		select {
		case <-ctx.Done():
			return BacklogResult{}, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	_, lastDev := d.Device.arrivals.Span()
	_, lastOut := w.Outcomes.Span()
	return BacklogResult{Commands: n, ToDevice: lastDev.Sub(start), ToOutcomes: lastOut.Sub(start), Transactions: d.Transactions()}, nil
}
