package ceiling

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// RunClosedLoop does the latency section's work on a raw producer that
// commits greedily: each of clients queues a command's Issued record and
// waits until w, a read_committed reader of the producer's partition, has
// read the command's Outcome record. The producer commits all that is
// queued in one transaction, pauses, and queues the Outcome records of the
// Issued ones it just committed (a device that acts at once) for the next.
// It has none of the dispatcher's scheduling (no commit gap or linger, no
// outcome that waits to ride), so it measures what that scheduling buys;
// it is no floor. Each latency runs from the queueing to the read. Every
// command is written once, so the producer needs more encoded commands than
// the run takes; it fails when they would repeat.
func (p *RawProducer) RunClosedLoop(ctx context.Context, w *OutcomeWatcher, clients int, pause, duration time.Duration) (Summary, error) {
	if clients < 1 {
		return Summary{}, errors.New("ceiling: a closed loop needs a client")
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	loop := &closedLoop{wake: make(chan struct{}, 1)}
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < duration && ctx.Err() == nil {
				c, err := loop.submit(p)
				if err != nil {
					cancel(err)
					return
				}
				wctx, stop := context.WithTimeout(ctx, time.Minute)
				seen, err := w.Wait(wctx, c.ID)
				stop()
				if err != nil {
					cancel(err)
					return
				}
				loop.note(seen.Sub(c.queued))
			}
		}()
	}
	clientsDone := make(chan struct{})
	go func() { wg.Wait(); close(clientsDone) }()

	var due []*queuedCommand // Issued committed, Outcome not yet written
	for {
		issued := loop.take()
		if len(issued) == 0 && len(due) == 0 {
			select {
			case <-loop.wake:
				continue
			case <-clientsDone:
				if err := context.Cause(ctx); err != nil {
					return Summary{}, err
				}
				return Summarize(loop.samples, time.Since(start)), nil
			case <-ctx.Done():
				<-clientsDone
				return Summary{}, context.Cause(ctx)
			}
		}
		records := make([]*kgo.Record, 0, len(due)+len(issued))
		for _, c := range due {
			records = append(records, p.record(c.CommandRecords, 1))
		}
		for _, c := range issued {
			records = append(records, p.record(c.CommandRecords, 0))
		}
		if _, err := p.transact(ctx, records); err != nil {
			cancel(err)
			<-clientsDone
			return Summary{}, err
		}
		due = issued
		if pause > 0 {
			select {
			case <-time.After(pause):
			case <-ctx.Done():
			}
		}
	}
}

// queuedCommand is a command of the closed loop and the instant its client
// queued it.
type queuedCommand struct {
	*CommandRecords
	queued time.Time
}

// closedLoop is the queue between the clients of RunClosedLoop and its
// producer.
type closedLoop struct {
	mu      sync.Mutex
	queue   []*queuedCommand
	samples []time.Duration
	wake    chan struct{}
}

// submit queues the next command of p and wakes the producer.
func (l *closedLoop) submit(p *RawProducer) (*queuedCommand, error) {
	l.mu.Lock()
	if p.next >= len(p.commands) {
		l.mu.Unlock()
		return nil, fmt.Errorf("ceiling: %d encoded commands are too few for the closed loop; their outcomes would repeat", len(p.commands))
	}
	c := &queuedCommand{CommandRecords: &p.commands[p.next], queued: time.Now()}
	p.next++
	l.queue = append(l.queue, c)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return c, nil
}

// take returns the queued commands and empties the queue.
func (l *closedLoop) take() []*queuedCommand {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queue
	l.queue = nil
	return q
}

// note records one latency.
func (l *closedLoop) note(d time.Duration) {
	l.mu.Lock()
	l.samples = append(l.samples, d)
	l.mu.Unlock()
}
