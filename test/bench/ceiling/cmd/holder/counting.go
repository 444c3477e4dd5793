package main

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/test/bench/ceiling"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// countingTransport counts the operations that package coordination asks of
// its transport, so a measurement can tell lease writes from reads. It
// passes the optional interfaces of the transport through, because
// coordination asserts them on the transport it is given: a wrapper that hid
// PartitionWaiter would make every standby poll instead of long-poll, one
// that hid EpochPreparer would make the first standby connect its producer
// after the resignation, and one that hid OpenWaitReader would make a
// standby wait a whole read bound on the transaction of a leader killed in
// the middle of a renewal: the failover and the handover would measure the
// wrapper.
type countingTransport struct {
	inner   coordination.Transport
	guarded coordination.GuardedWriter
	waiter  coordination.PartitionWaiter
	prep    coordination.EpochPreparer
	reader  coordination.OpenWaitReader

	mu     sync.Mutex
	counts map[string]int64
}

var (
	_ coordination.GuardedWriter   = (*countingTransport)(nil)
	_ coordination.PartitionWaiter = (*countingTransport)(nil)
	_ coordination.EpochPreparer   = (*countingTransport)(nil)
	_ coordination.OpenWaitReader  = (*countingTransport)(nil)
)

// newCountingTransport wraps a transport that implements GuardedWriter,
// PartitionWaiter, EpochPreparer and OpenWaitReader, as KafkaTransport does.
func newCountingTransport(inner coordination.Transport) (*countingTransport, error) {
	g, ok1 := inner.(coordination.GuardedWriter)
	w, ok2 := inner.(coordination.PartitionWaiter)
	p, ok3 := inner.(coordination.EpochPreparer)
	r, ok4 := inner.(coordination.OpenWaitReader)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return nil, fmt.Errorf("holder: transport %T lacks GuardedWriter, PartitionWaiter, EpochPreparer or OpenWaitReader", inner)
	}
	return &countingTransport{inner: inner, guarded: g, waiter: w, prep: p, reader: r, counts: map[string]int64{}}, nil
}

func (c *countingTransport) PrepareEpoch(ctx context.Context, role coordination.Role) error {
	c.add("PrepareEpoch")
	return c.prep.PrepareEpoch(ctx, role)
}

func (c *countingTransport) WaitPartition(ctx context.Context, partition coordination.TopicPartition, after int64) error {
	c.add("WaitPartition")
	return c.waiter.WaitPartition(ctx, partition, after)
}

func (c *countingTransport) add(op string) {
	c.mu.Lock()
	c.counts[ceiling.OpPrefix+op]++
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

func (c *countingTransport) ReadPartitionWaiting(ctx context.Context, partition coordination.TopicPartition, openWait time.Duration) ([]coordination.StateRecord, error) {
	c.add("ReadPartition")
	return c.reader.ReadPartitionWaiting(ctx, partition, openWait)
}

func (c *countingTransport) Append(ctx context.Context, partition coordination.TopicPartition, key, value []byte) error {
	c.add("Append")
	return c.inner.Append(ctx, partition, key, value)
}

func (c *countingTransport) WriteLease(ctx context.Context, partition coordination.TopicPartition, token coordination.FencingToken, key, value []byte) error {
	c.add("WriteLease")
	return c.inner.WriteLease(ctx, partition, token, key, value)
}

func (c *countingTransport) WriteGuarded(ctx context.Context, role coordination.Role, token coordination.FencingToken, records []coordination.GuardedRecord) (coordination.FencingToken, error) {
	c.add("WriteGuarded")
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
