package history

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// fillMember is the member id under which the fillers lead.
const fillMember = "filler"

// noopDevice drives nothing: the filler's dispatcher settles each command
// at once, and writes what it writes for any device.
type noopDevice struct{}

func (noopDevice) Dispatch(context.Context, dispatch.Command, coordination.FencingToken) (dispatch.Result, error) {
	return dispatch.Result{Detail: "filled"}, nil
}

// topics names the topics of one size.
type topics struct {
	coordination, log, requests string
	partitions                  int
}

// fill leads role with a real dispatcher and a device that does nothing,
// sends it n commands through the requests topic in large asynchronous
// batches, and waits until every one settled. It then calls filled (also
// when it fails) and leads on, as a member beside its neighbours does, until
// all is closed: the other role's filler is done too. Then it drains, as a
// member stopped in turn does, and resigns. The log then holds what a
// dispatcher writes for n commands, under the role's own leadership, among
// the other role's records.
func fill(ctx context.Context, c *Config, t topics, role string, n int, filled func(), all <-chan struct{}) error {
	var once sync.Once
	done := func() { once.Do(filled) }
	defer done()
	lease, err := coordination.NewLeaseConfig(c.Lease, c.Renew, c.Stagger)
	if err != nil {
		return err
	}
	transport, err := coordination.NewKafkaTransport(lease, c.Brokers...)
	if err != nil {
		return err
	}
	defer transport.Close()
	r, err := coordination.NewRole(role)
	if err != nil {
		return err
	}
	member, _ := coordination.NewMemberID(fillMember)
	l, err := coordination.AcquireLeadership(ctx, transport, r, member,
		coordination.WithTopic(t.coordination), coordination.WithPartitions(t.partitions),
		coordination.WithLeaseConfig(lease), coordination.WithPollInterval(c.Poll))
	if err != nil {
		return fmt.Errorf("fill %s: lead: %w", role, err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = l.Resign(rctx)
	}()
	registry := dispatch.NewRegistry()
	if err := registry.Register(deviceName, noopDevice{}); err != nil {
		return err
	}
	reader, err := dispatch.NewKafkaLogReader(c.Brokers)
	if err != nil {
		return err
	}
	source, err := dispatch.NewKafkaRequestSource(c.Brokers)
	if err != nil {
		return err
	}
	defer source.Close()
	d, err := dispatch.NewDispatcher(l, registry, reader,
		dispatch.WithLogTopic(t.log, t.partitions), dispatch.WithRequestsTopic(t.requests, t.partitions),
		dispatch.WithRequestSource(source), dispatch.WithCommandTimeout(time.Hour))
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- d.Run(runCtx) }()
	defer func() {
		stop()
		<-ran
	}()
	if err := settle(ctx, c, t, role, n, d, ran); err != nil {
		return err
	}
	done()
	select {
	case <-all:
	case <-ctx.Done():
		return ctx.Err()
	}
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := d.Drain(dctx); err != nil {
		return fmt.Errorf("fill %s: drain: %w", role, err)
	}
	return nil
}

// settle sends n commands of role through the requests topic to d, and
// waits until every one settled.
func settle(ctx context.Context, c *Config, t topics, role string, n int, d *dispatch.Dispatcher, ran chan error) error {
	if n == 0 {
		return nil
	}
	last, err := sendRequests(ctx, c.Brokers, t, role, "fill", n)
	if err != nil {
		return err
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if out, ok := d.Lookup(last); ok && out.Status != dispatch.StatusPending {
			if out.Status != dispatch.StatusSucceeded {
				return fmt.Errorf("fill %s: the last command %s", role, out.Status)
			}
			break
		}
		select {
		case <-tick.C:
		case err := <-ran:
			ran <- err
			return fmt.Errorf("fill %s: the dispatcher stopped: %w", role, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// Outcomes commit in order: once this one's is recorded, every
	// earlier one is.
	end := command(role, "fill-end", 0, time.Now())
	if out, err := d.Submit(ctx, end); err != nil || out.Status != dispatch.StatusSucceeded {
		return fmt.Errorf("fill %s: the closing command: %v, %v", role, out.Status, err)
	}
	return nil
}

// command builds the i-th command of a series.
func command(role, series string, i int, now time.Time) dispatch.Command {
	return dispatch.Command{
		ID: fmt.Sprintf("%s-%s-%d", series, role, i), Role: role, Device: deviceName, Action: "set",
		Payload: []byte(fmt.Sprintf(`{"setpoint":%d}`, i%100)), SubmittedAt: now, Deadline: now.Add(time.Hour),
	}
}

// sendRequests writes n commands of role to its partition of the requests
// topic, in large asynchronous batches, and returns the last one's ID.
func sendRequests(ctx context.Context, brokers []string, t topics, role, series string, n int) (string, error) {
	r, err := coordination.NewRole(role)
	if err != nil {
		return "", err
	}
	p, err := coordination.RolePartition(r, t.partitions)
	if err != nil {
		return "", err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(20*time.Millisecond), kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	var mu sync.Mutex
	var firstErr error
	now := time.Now()
	last := ""
	for i := range n {
		cmd := command(role, series, i, now)
		value, err := dispatch.EncodeRequest(cmd)
		if err != nil {
			return "", err
		}
		last = cmd.ID
		cl.Produce(ctx, &kgo.Record{Topic: t.requests, Partition: int32(p), Key: []byte(cmd.ID), Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				firstErr = errors.Join(firstErr, err)
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return "", err
	}
	mu.Lock()
	defer mu.Unlock()
	return last, firstErr
}
