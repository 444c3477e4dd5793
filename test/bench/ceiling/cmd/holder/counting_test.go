package main

import (
	"context"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/test/bench/ceiling"
)

// recordingTransport records which of its methods a wrapper called, and the
// open-transaction bound of a bounded read.
type recordingTransport struct {
	calls    []string
	openWait time.Duration
}

func (r *recordingTransport) AcquireEpoch(context.Context, coordination.Role) (coordination.FencingToken, error) {
	r.calls = append(r.calls, "AcquireEpoch")
	return coordination.FencingToken{}, nil
}

func (r *recordingTransport) DescribeEpoch(context.Context, coordination.Role) (coordination.FencingToken, bool, error) {
	r.calls = append(r.calls, "DescribeEpoch")
	return coordination.FencingToken{}, false, nil
}

func (r *recordingTransport) ReadPartition(context.Context, coordination.TopicPartition) ([]coordination.StateRecord, error) {
	r.calls = append(r.calls, "ReadPartition")
	return nil, nil
}

func (r *recordingTransport) ReadPartitionWaiting(_ context.Context, _ coordination.TopicPartition, openWait time.Duration) ([]coordination.StateRecord, error) {
	r.calls = append(r.calls, "ReadPartitionWaiting")
	r.openWait = openWait
	return nil, nil
}

func (r *recordingTransport) Append(context.Context, coordination.TopicPartition, []byte, []byte) error {
	r.calls = append(r.calls, "Append")
	return nil
}

func (r *recordingTransport) WriteLease(context.Context, coordination.TopicPartition, coordination.FencingToken, []byte, []byte) error {
	r.calls = append(r.calls, "WriteLease")
	return nil
}

func (r *recordingTransport) WriteGuarded(_ context.Context, _ coordination.Role, token coordination.FencingToken, _ []coordination.GuardedRecord) (coordination.FencingToken, error) {
	r.calls = append(r.calls, "WriteGuarded")
	return token, nil
}

func (r *recordingTransport) WaitPartition(context.Context, coordination.TopicPartition, int64) error {
	r.calls = append(r.calls, "WaitPartition")
	return nil
}

func (r *recordingTransport) PrepareEpoch(context.Context, coordination.Role) error {
	r.calls = append(r.calls, "PrepareEpoch")
	return nil
}

// TestCountingTransportPassesTheOptionalInterfacesThrough: each call of the
// wrapper reaches the same call of the transport it wraps. A bounded read
// that reached the plain ReadPartition would lose its bound, and a standby
// of the failover bench would wait a whole read bound on the transaction of
// a leader killed in the middle of a renewal.
func TestCountingTransportPassesTheOptionalInterfacesThrough(t *testing.T) {
	inner := &recordingTransport{}
	c, err := newCountingTransport(inner)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tp := coordination.TopicPartition{Topic: "state", Partition: 0}
	for _, tt := range []struct {
		op   string
		call func() error
	}{
		{"ReadPartitionWaiting", func() error { _, err := c.ReadPartitionWaiting(ctx, tp, 250*time.Millisecond); return err }},
		{"ReadPartition", func() error { _, err := c.ReadPartition(ctx, tp); return err }},
		{"WaitPartition", func() error { return c.WaitPartition(ctx, tp, 7) }},
		{"PrepareEpoch", func() error { return c.PrepareEpoch(ctx, coordination.Role{}) }},
		{"WriteGuarded", func() error {
			_, err := c.WriteGuarded(ctx, coordination.Role{}, coordination.FencingToken{}, nil)
			return err
		}},
	} {
		inner.calls = nil
		if err := tt.call(); err != nil {
			t.Fatalf("%s: %v", tt.op, err)
		}
		if len(inner.calls) != 1 || inner.calls[0] != tt.op {
			t.Errorf("the wrapper's %s called %v of the transport, want [%s]", tt.op, inner.calls, tt.op)
		}
	}
	if inner.openWait != 250*time.Millisecond {
		t.Errorf("the bounded read reached the transport with a bound of %v, want 250ms", inner.openWait)
	}
	if got := c.snapshot()[ceiling.OpPrefix+"ReadPartition"]; got != 2 {
		t.Errorf("counted %d reads, want 2 (a bounded read counts as a read)", got)
	}
}

// TestCountingTransportRefusesAnIncompleteTransport: a transport that lacks
// an optional interface is refused, rather than measured without it.
func TestCountingTransportRefusesAnIncompleteTransport(t *testing.T) {
	type plain struct{ coordination.Transport }
	if _, err := newCountingTransport(plain{&recordingTransport{}}); err == nil {
		t.Fatal("newCountingTransport accepted a transport with none of the optional interfaces")
	}
}
