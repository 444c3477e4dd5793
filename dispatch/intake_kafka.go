package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultIntakeFetchMaxWait is the default long-poll wait of a fetch of the
// requests topic, Kafka's fetch.max.wait.ms. A request that arrives during
// the wait is returned at once; the wait only bounds an idle fetch. Change it
// with a kgo.FetchMaxWait option to [NewKafkaRequestSource].
const DefaultIntakeFetchMaxWait = 500 * time.Millisecond

// KafkaRequestSource is a [RequestSource] over a Kafka cluster. It consumes
// one partition with a franz-go client, read_committed, with no consumer
// group: the position lives in the command log.
//
// It reads in offset order from the position that recovery found in the
// log, which [KafkaLogReader.ReadLog] reads past every open transaction, so
// that position is the one the predecessor committed. A transaction another
// producer holds open on the requests partition only delays the requests
// behind it: read_committed delivers them, in order, when it ends, and none
// is skipped.
//
// The client is created at the first ReadRequests, and again when the
// dispatcher asks for another partition or offset; its goroutines run until
// Close.
type KafkaRequestSource struct {
	brokers []string
	opts    []kgo.Opt

	mu     sync.Mutex
	client *kgo.Client
	tp     coordination.TopicPartition
	next   int64
}

// NewKafkaRequestSource returns a source that reads from brokers. opts are
// passed to kgo.NewClient after the source's own, so they may override the
// fetch settings; the source always sets the seed brokers, read_committed
// and the partition to consume.
func NewKafkaRequestSource(brokers []string, opts ...kgo.Opt) (*KafkaRequestSource, error) {
	if len(brokers) == 0 {
		return nil, errors.New("dispatch: request source: no brokers")
	}
	return &KafkaRequestSource{brokers: brokers, opts: opts}, nil
}

// ReadRequests implements [RequestSource].
func (s *KafkaRequestSource) ReadRequests(ctx context.Context, partition coordination.TopicPartition, from int64) ([]RequestRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client == nil || s.tp != partition || s.next != from {
		if s.client != nil {
			s.client.Close()
		}
		opts := append([]kgo.Opt{
			kgo.SeedBrokers(s.brokers...),
			kgo.FetchMaxWait(DefaultIntakeFetchMaxWait),
		}, s.opts...)
		opts = append(opts,
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
				partition.Topic: {int32(partition.Partition): kgo.NewOffset().At(from)},
			}),
		)
		client, err := kgo.NewClient(opts...)
		if err != nil {
			s.client = nil
			return nil, fmt.Errorf("dispatch: request source: %w", err)
		}
		s.client, s.tp, s.next = client, partition, from
	}
	for {
		fetches := s.client.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var records []RequestRecord
		var ferr error
		fetches.EachError(func(topic string, p int32, err error) {
			if ferr == nil && !errors.Is(err, context.Canceled) {
				ferr = fmt.Errorf("dispatch: fetch %s/%d: %w", topic, p, err)
			}
		})
		var hwm int64
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			hwm = max(hwm, p.HighWatermark)
		})
		fetches.EachRecord(func(r *kgo.Record) {
			rec := RequestRecord{Offset: r.Offset, Key: r.Key, Value: r.Value, HighWatermark: hwm}
			for _, h := range r.Headers {
				rec.Headers = append(rec.Headers, coordination.Header{Key: h.Key, Value: h.Value})
			}
			records = append(records, rec)
		})
		if len(records) > 0 {
			s.next = records[len(records)-1].Offset + 1
			return records, nil
		}
		if ferr != nil {
			return nil, ferr
		}
	}
}

// Close closes the client, if one is open. The source opens a new one at the
// next ReadRequests.
func (s *KafkaRequestSource) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		s.client.Close()
		s.client = nil
	}
}
