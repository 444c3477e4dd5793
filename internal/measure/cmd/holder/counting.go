package main

import (
	"context"
	"errors"
	"maps"
	"sync"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/internal/measure"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// countingTransport counts the operations that package coordination asks of
// its transport, so a measurement can tell lease writes from reads.
type countingTransport struct {
	inner   coordination.Transport
	guarded coordination.GuardedWriter // nil when inner writes no guarded transactions

	mu     sync.Mutex
	counts map[string]int64
}

var _ coordination.GuardedWriter = (*countingTransport)(nil)

func newCountingTransport(inner coordination.Transport) *countingTransport {
	g, _ := inner.(coordination.GuardedWriter)
	return &countingTransport{inner: inner, guarded: g, counts: map[string]int64{}}
}

func (c *countingTransport) add(op string) {
	c.mu.Lock()
	c.counts[measure.OpPrefix+op]++
	c.mu.Unlock()
}

func (c *countingTransport) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

func (c *countingTransport) AcquireEpoch(ctx context.Context, role coordination.Role) (coordination.FencingToken, error) {
	c.add("AcquireEpoch")
	return c.inner.AcquireEpoch(ctx, role)
}

func (c *countingTransport) DescribeEpoch(ctx context.Context, role coordination.Role) (coordination.FencingToken, bool, error) {
	c.add("DescribeEpoch")
	return c.inner.DescribeEpoch(ctx, role)
}

func (c *countingTransport) ReadPartition(ctx context.Context, partition coordination.TopicPartition) ([]coordination.StateRecord, error) {
	c.add("ReadPartition")
	return c.inner.ReadPartition(ctx, partition)
}

func (c *countingTransport) Append(ctx context.Context, partition coordination.TopicPartition, key, value []byte) error {
	c.add("Append")
	return c.inner.Append(ctx, partition, key, value)
}

func (c *countingTransport) WriteLease(ctx context.Context, partition coordination.TopicPartition, token coordination.FencingToken, key, value []byte) error {
	c.add("WriteLease")
	return c.inner.WriteLease(ctx, partition, token, key, value)
}

// errNoGuarded reports a guarded write through a transport that has none;
// coordination never asks for one then, because it asserts the interface on
// the transport it is given, which is this wrapper.
var errNoGuarded = errors.New("holder: the transport writes no guarded transactions")

func (c *countingTransport) WriteGuarded(ctx context.Context, role coordination.Role, token coordination.FencingToken, records []coordination.GuardedRecord) (coordination.FencingToken, error) {
	c.add("WriteGuarded")
	if c.guarded == nil {
		return coordination.FencingToken{}, errNoGuarded
	}
	return c.guarded.WriteGuarded(ctx, role, token, records)
}

// requestCounter counts the requests every client of the transport writes
// to a broker, by request name. It is a kgo.HookBrokerWrite.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int64
}

var _ kgo.HookBrokerWrite = (*requestCounter)(nil)

// OnBrokerWrite implements kgo.HookBrokerWrite.
func (r *requestCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	r.mu.Lock()
	r.counts[kmsg.NameForKey(key)]++
	r.mu.Unlock()
}

func (r *requestCounter) snapshot() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.counts)
}
