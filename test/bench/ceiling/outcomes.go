package ceiling

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// OutcomeWatcher reads a role's partition of the command log read_committed
// and notes the instant each Outcome record arrives: the instant a reader
// of the log learns that the command's outcome committed.
type OutcomeWatcher struct {
	// Outcomes holds the arrival of every outcome, by command id.
	Outcomes Arrivals

	client *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

// WatchOutcomes starts a watcher of partition 0 of topic, from its start.
// Close stops it.
func WatchOutcomes(brokers []string, topic string) (*OutcomeWatcher, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(100*time.Millisecond),
		kgo.RequestTimeoutOverhead(DefaultRequestTimeout),
	)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &OutcomeWatcher{client: cl, cancel: cancel, done: make(chan struct{})}
	go w.run(ctx)
	return w, nil
}

// run polls until ctx ends; it is the watcher's one goroutine.
func (w *OutcomeWatcher) run(ctx context.Context) {
	defer close(w.done)
	for {
		fetches := w.client.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		fetches.EachRecord(func(rec *kgo.Record) {
			e, err := dispatch.DecodeRecord(rec)
			if err == nil && e.Kind == dispatch.EntryOutcome && e.Outcome != nil {
				w.Outcomes.Note(e.Outcome.CommandID, now)
			}
		})
	}
}

// Wait returns the instant the outcome of a command arrived.
func (w *OutcomeWatcher) Wait(ctx context.Context, id string) (time.Time, error) {
	at, err := w.Outcomes.Wait(ctx, id)
	if err != nil {
		return at, errors.Join(errors.New("outcome of "+id+" not read from the log"), err)
	}
	return at, nil
}

// Close stops the watcher and closes its client.
func (w *OutcomeWatcher) Close() {
	w.cancel()
	<-w.done
	w.client.Close()
}
