package ceiling

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// noopDevice does nothing, and notes when each command reached it.
type noopDevice struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (d *noopDevice) Dispatch(_ context.Context, cmd dispatch.Command, _ coordination.FencingToken) (dispatch.Result, error) {
	now := time.Now()
	d.mu.Lock()
	d.at[cmd.ID] = now
	d.mu.Unlock()
	return dispatch.Result{}, nil
}

func (d *noopDevice) reachedAt(id string) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.at[id]
	return t, ok
}

// countingLeader counts the transactions and records of a leadership while
// measuring is closed.
type countingLeader struct {
	*coordination.Leadership
	measuring <-chan struct{}

	mu      sync.Mutex
	txns    int
	records int
}

func (l *countingLeader) Write(ctx context.Context, build func(coordination.FencingToken) ([]coordination.GuardedRecord, error)) (coordination.FencingToken, error) {
	n := 0
	token, err := l.Leadership.Write(ctx, func(t coordination.FencingToken) ([]coordination.GuardedRecord, error) {
		recs, err := build(t)
		n = len(recs)
		return recs, err
	})
	select {
	case <-l.measuring:
		if err == nil {
			l.mu.Lock()
			l.txns++
			l.records += n
			l.mu.Unlock()
		}
	default:
	}
	return token, err
}

// runDispatcher runs the dispatcher side: a leadership of a fresh role over
// the Kafka transport, a Dispatcher with the no-op device, and Submit.
func runDispatcher(ctx context.Context, cfg Config) (Side, error) {
	logTopic, requestsTopic, drop, err := topicSet(ctx, cfg.Brokers, "bench-dispatch")
	if err != nil {
		return Side{}, err
	}
	defer drop()
	lease, err := benchLease()
	if err != nil {
		return Side{}, err
	}
	transport, err := coordination.NewKafkaTransport(lease, cfg.Brokers...)
	if err != nil {
		return Side{}, err
	}
	defer transport.Close()
	role, err := coordination.NewRole(logTopic)
	if err != nil {
		return Side{}, err
	}
	member, _ := coordination.NewMemberID(benchMember)
	actx, cancel := context.WithTimeout(ctx, time.Minute)
	l, err := coordination.AcquireLeadership(actx, transport, role, member,
		coordination.WithLeaseConfig(lease), coordination.WithPollInterval(100*time.Millisecond))
	cancel()
	if err != nil {
		return Side{}, fmt.Errorf("acquire the role: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = l.Resign(rctx)
		cancel()
	}()
	measuring := make(chan struct{})
	leader := &countingLeader{Leadership: l, measuring: measuring}
	device := &noopDevice{at: make(map[string]time.Time)}
	registry := dispatch.NewRegistry()
	if err := registry.Register(benchDevice, device); err != nil {
		return Side{}, err
	}
	logReader, err := dispatch.NewKafkaLogReader(cfg.Brokers)
	if err != nil {
		return Side{}, err
	}
	d, err := dispatch.NewDispatcher(leader, registry, logReader,
		dispatch.WithLogTopic(logTopic, 1), dispatch.WithRequestsTopic(requestsTopic, 1),
		dispatch.WithMaxBatchRecords(cfg.Batch), dispatch.WithMaxQueued(4*cfg.Submitters))
	if err != nil {
		return Side{}, err
	}
	runCtx, stop := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- d.Run(runCtx) }()
	defer func() {
		stop()
		<-runErr
	}()

	submit := func(i int) (time.Duration, error) {
		cmd := benchCommand(i, cfg.Payload, time.Now())
		start := time.Now()
		out, err := d.Submit(ctx, cmd)
		if err != nil {
			return 0, err
		}
		if out.Status != dispatch.StatusSucceeded {
			return 0, fmt.Errorf("command %s: %s: %s", cmd.ID, out.Status, out.Reason)
		}
		at, ok := device.reachedAt(cmd.ID)
		if !ok {
			return 0, fmt.Errorf("command %s succeeded without reaching the device", cmd.ID)
		}
		return at.Sub(start), nil
	}
	latencies, elapsed, err := closedLoop(ctx, cfg, measuring, submit)
	if err != nil {
		return Side{}, err
	}
	leader.mu.Lock()
	defer leader.mu.Unlock()
	return summarize("dispatcher", latencies, elapsed, leader.txns, leader.records), nil
}
