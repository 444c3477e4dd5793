package ceiling

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TailReader fetches partitions of a topic from their end for as long as
// it runs and drops what it reads, as a reader of a deployment's log does
// (an auditor, a watcher of outcomes). On Kafka 4.1 a reader spares some
// transactions of its partition the hold at their first produce, and not
// others (OPERATIONS.md, "Commit latency and the brokers"), so a
// comparison that gives one side's partition a reader gives the other
// side's one too.
type TailReader struct {
	client *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	next map[int32]int64 // the offset after the last record read, by partition
	read chan struct{}   // closed and replaced after each poll
}

// StartTailReader starts a reader of the partitions of topic. Close stops it.
func StartTailReader(brokers []string, topic string, partitions ...int32) (*TailReader, error) {
	offsets := map[int32]kgo.Offset{}
	for _, p := range partitions {
		offsets[p] = kgo.NewOffset().AtEnd()
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(100*time.Millisecond),
		kgo.RequestTimeoutOverhead(DefaultRequestTimeout),
	)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &TailReader{client: cl, cancel: cancel, done: make(chan struct{}), next: map[int32]int64{}, read: make(chan struct{})}
	go func() {
		defer close(r.done)
		for ctx.Err() == nil {
			fetches := r.client.PollFetches(ctx)
			r.mu.Lock()
			fetches.EachRecord(func(rec *kgo.Record) { r.next[rec.Partition] = max(r.next[rec.Partition], rec.Offset+1) })
			close(r.read)
			r.read = make(chan struct{})
			r.mu.Unlock()
		}
	}()
	return r, nil
}

// WaitRead waits until the reader has read the record at offset of
// partition, or ctx ends.
func (r *TailReader) WaitRead(ctx context.Context, partition int32, offset int64) error {
	for {
		r.mu.Lock()
		done, read := r.next[partition] > offset, r.read
		r.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-read:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close stops the reader and waits for its goroutine.
func (r *TailReader) Close() {
	r.cancel()
	<-r.done
	r.client.Close()
}
