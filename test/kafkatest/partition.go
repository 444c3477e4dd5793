package kafkatest

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrPartitioned is the error of a dial through a [Partition] that was cut.
var ErrPartitioned = errors.New("kafkatest: the network is partitioned")

// Partition cuts the connections of the Kafka clients that dial through it,
// as a network partition does: after [Partition.Cut], every connection stays
// open but carries nothing more. Writes are swallowed, reads return nothing
// until the deadline the client set passes, bytes that arrive after the cut
// are dropped, and a new dial fails with [ErrPartitioned]. No connection is
// closed, so the client sees no reset, only silence. This is the fault of a
// leader cut off from the cluster whom no successor has fenced yet.
//
// Give every client of the process under test [Partition.Option]. A
// Partition is safe for concurrent use; its zero value is not ready, build
// one with [NewPartition].
type Partition struct {
	dialer net.Dialer

	mu  sync.Mutex
	cut chan struct{} // closed by Cut
}

// NewPartition returns a Partition whose connections flow.
func NewPartition() *Partition {
	return &Partition{cut: make(chan struct{})}
}

// Option returns the kgo.Dialer option that routes a client's connections
// through p.
func (p *Partition) Option() kgo.Opt { return kgo.Dialer(p.Dial) }

// Dial connects to address, unless p was cut.
func (p *Partition) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	if p.isCut() {
		return nil, &net.OpError{Op: "dial", Net: network, Err: ErrPartitioned}
	}
	conn, err := p.dialer.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	return &partitionConn{Conn: conn, p: p, closed: make(chan struct{})}, nil
}

// Cut stops every connection of p, now and later. It is idempotent.
func (p *Partition) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.cut:
	default:
		close(p.cut)
	}
}

func (p *Partition) isCut() bool {
	select {
	case <-p.cut:
		return true
	default:
		return false
	}
}

// partitionConn is one connection through a Partition.
type partitionConn struct {
	net.Conn
	p *Partition

	mu           sync.Mutex
	readDeadline time.Time

	closeOnce sync.Once
	closed    chan struct{}
}

// Read returns what the peer sent before the cut; after it, nothing until
// the read deadline passes or the connection is closed.
func (c *partitionConn) Read(b []byte) (int, error) {
	if !c.p.isCut() {
		n, err := c.Conn.Read(b)
		if !c.p.isCut() {
			return n, err
		}
		// The bytes arrived after the cut: the partition lost them.
	}
	return 0, c.silence()
}

// silence blocks until the read deadline passes or the connection closes.
// The deadline may move while it waits, so it checks again at each tick.
func (c *partitionConn) silence() error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-c.closed:
			return net.ErrClosed
		default:
		}
		c.mu.Lock()
		deadline := c.readDeadline
		c.mu.Unlock()
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return &net.OpError{Op: "read", Net: "tcp", Err: timeoutError{}}
		}
		select {
		case <-c.closed:
			return net.ErrClosed
		case <-tick.C:
		}
	}
}

// Write sends b before the cut and swallows it after, as a socket buffer
// does while the peer is unreachable.
func (c *partitionConn) Write(b []byte) (int, error) {
	if c.p.isCut() {
		select {
		case <-c.closed:
			return 0, net.ErrClosed
		default:
			return len(b), nil
		}
	}
	return c.Conn.Write(b)
}

func (c *partitionConn) SetDeadline(t time.Time) error {
	c.setReadDeadline(t)
	return c.Conn.SetDeadline(t)
}

func (c *partitionConn) SetReadDeadline(t time.Time) error {
	c.setReadDeadline(t)
	return c.Conn.SetReadDeadline(t)
}

func (c *partitionConn) setReadDeadline(t time.Time) {
	c.mu.Lock()
	c.readDeadline = t
	c.mu.Unlock()
}

func (c *partitionConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// timeoutError is the error of a read whose deadline passed in silence; like
// os.ErrDeadlineExceeded, it reports a timeout.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout (partitioned)" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }
