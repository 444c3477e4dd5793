//go:build integration

package dispatch_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/devices/fence"
	"github.com/krabka-io/krabka-dispatch/devices/mqtt"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/test/mqtttest"
)

// timedDevice wraps a device and records when each call began and returned,
// with its error.
type timedDevice struct {
	dispatch.Device

	mu    sync.Mutex
	calls []timedCall
	done  chan timedCall
}

type timedCall struct {
	id              string
	began, returned time.Time
	err             error
}

func newTimedDevice(d dispatch.Device) *timedDevice {
	return &timedDevice{Device: d, done: make(chan timedCall, 8)}
}

func (d *timedDevice) Dispatch(ctx context.Context, cmd dispatch.Command, token coordination.FencingToken) (dispatch.Result, error) {
	began := time.Now()
	res, err := d.Device.Dispatch(ctx, cmd, token)
	call := timedCall{id: cmd.ID, began: began, returned: time.Now(), err: err}
	d.mu.Lock()
	d.calls = append(d.calls, call)
	d.mu.Unlock()
	d.done <- call
	return res, err
}

func (d *timedDevice) seen() []timedCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]timedCall(nil), d.calls...)
}

// stallProxy forwards TCP connections to a target until Stall; after it,
// it holds every byte in both directions, and no connection is closed: a
// broker that accepts and then never answers.
type stallProxy struct {
	l       net.Listener
	target  string
	stalled chan struct{}
	once    sync.Once

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func startStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{l: l, target: target, stalled: make(chan struct{})}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *stallProxy) url() string { return "tcp://" + p.l.Addr().String() }

func (p *stallProxy) stall() { p.once.Do(func() { close(p.stalled) }) }

func (p *stallProxy) accept() {
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(out, in) })
		p.wg.Go(func() { p.pipe(in, out) })
	}
}

// pipe copies from src to dst until the stall, then reads and drops.
func (p *stallProxy) pipe(dst io.Writer, src io.Reader) {
	buf := make([]byte, 4096)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		select {
		case <-p.stalled:
			continue // held: never delivered
		default:
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

func (p *stallProxy) close() {
	p.l.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// checkCallCut checks a device call cut by the freshness end of pl: it
// returned by then plus the slack, with an error that carries
// ErrFreshnessExpired, and no call began after it.
func checkCallCut(t *testing.T, pl *partitionedLeader, dev *timedDevice, cutAt time.Time) timedCall {
	t.Helper()
	var call timedCall
	select {
	case call = <-dev.done:
	case <-time.After(pl.lease + 5*time.Second):
		t.Fatal("the device call did not return after the cut")
	}
	want := pl.freshnessEnd()
	t.Logf("cut %v before the freshness end; Dispatch returned %v after it: %v", want.Sub(cutAt), call.returned.Sub(want), call.err)
	if !errors.Is(call.err, dispatch.ErrFreshnessExpired) {
		t.Errorf("Dispatch returned %v, want ErrFreshnessExpired beneath", call.err)
	}
	if call.returned.Before(want.Add(-time.Millisecond)) {
		t.Errorf("Dispatch returned %v before the freshness end", want.Sub(call.returned))
	}
	if late := call.returned.Sub(want); late > cutSlack {
		t.Errorf("Dispatch returned %v after the freshness end, above the %v slack", late, cutSlack)
	}
	awaitQuiet(t, pl, want)
	for _, c := range dev.seen() {
		if c.began.After(want) {
			t.Errorf("call %s began %v after the freshness end", c.id, c.began.Sub(want))
		}
	}
	return call
}

// TestPartitionedLeaderMQTTConnectWaitEndsWithFreshness: the MQTT device's
// broker accepts the connection and never answers CONNACK, and the connect
// timeout is far beyond the lease. The leader is cut from Kafka while
// Dispatch waits for the connection: the wait ends at the freshness end,
// retryable, as nothing was published, and the retry is never made, as no
// renewal commits.
func TestPartitionedLeaderMQTTConnectWaitEndsWithFreshness(t *testing.T) {
	c := realCluster(t)
	tp := c.newTopics(t)
	role := testRole(t)
	hung := startStallProxy(t, strings.TrimPrefix(mqtttest.SharedBroker(t).URL, "tcp://"))
	hung.stall() // accepted, never answered
	device, err := mqtt.New(mqtt.Config{
		Brokers:        []string{hung.url()},
		Topic:          mqtttest.Unique("cut-") + "/{device}/cmd",
		ConnectTimeout: time.Minute,
		PublishTimeout: time.Minute,
		Verifier:       cutKeys(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	// Close lets a connection attempt finish; closing the proxy first
	// ends the attempt that waits for CONNACK.
	t.Cleanup(func() { hung.close(); device.Close() })
	dev := newTimedDevice(device)
	registry := dispatch.NewRegistry()
	if err := registry.Register("valve", dev); err != nil {
		t.Fatal(err)
	}
	pl := leadPartitioned(t, c, tp, role, registry)

	go func() {
		_, _ = pl.d.Submit(context.Background(), dispatch.Command{ID: "connect-wait", Device: "valve", Action: "open", Deadline: time.Now().Add(time.Minute)})
	}()
	awaitIssued(t, c, tp, "connect-wait")
	pl.partition.Cut()
	call := checkCallCut(t, pl, dev, time.Now())
	if !dispatch.IsRetryable(call.err) {
		t.Errorf("Dispatch returned %v, want retryable: nothing was published", call.err)
	}
	if n := len(dev.seen()); n != 1 {
		t.Errorf("%d Dispatch calls, want 1: no retry without a committed renewal", n)
	}
}

// TestPartitionedLeaderMQTTAckWaitEndsWithFreshness: the MQTT device is
// connected to Mosquitto through a proxy that stalls after the connection,
// so the publish leaves and no PUBACK comes back. The leader is cut from
// Kafka during that wait: it ends at the freshness end, in doubt, as the
// broker may have the command.
func TestPartitionedLeaderMQTTAckWaitEndsWithFreshness(t *testing.T) {
	c := realCluster(t)
	tp := c.newTopics(t)
	role := testRole(t)
	proxy := startStallProxy(t, strings.TrimPrefix(mqtttest.SharedBroker(t).URL, "tcp://"))
	device, err := mqtt.New(mqtt.Config{
		Brokers:        []string{proxy.url()},
		Topic:          mqtttest.Unique("cut-") + "/{device}/cmd",
		ConnectTimeout: time.Minute,
		PublishTimeout: time.Minute,
		KeepAlive:      time.Minute,
		Verifier:       cutKeys(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.close(); device.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := device.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	dev := newTimedDevice(device)
	registry := dispatch.NewRegistry()
	if err := registry.Register("valve", dev); err != nil {
		t.Fatal(err)
	}
	pl := leadPartitioned(t, c, tp, role, registry)

	proxy.stall()
	go func() {
		_, _ = pl.d.Submit(context.Background(), dispatch.Command{ID: "ack-wait", Device: "valve", Action: "open", Deadline: time.Now().Add(time.Minute)})
	}()
	awaitIssued(t, c, tp, "ack-wait")
	pl.partition.Cut()
	call := checkCallCut(t, pl, dev, time.Now())
	if dispatch.IsRetryable(call.err) || dispatch.IsRejected(call.err) {
		t.Errorf("Dispatch returned %v, want in doubt: the publish had left", call.err)
	}
	if n := len(dev.seen()); n != 1 {
		t.Errorf("%d Dispatch calls, want 1", n)
	}
}

// cutKeys is the device key of the cut tests' MQTT devices: authentication
// is on, as it is by default.
func cutKeys(t *testing.T) *fence.Verifier {
	t.Helper()
	keys, err := fence.NewVerifier(fence.Key{ID: "cut", Secret: bytes.Repeat([]byte{0x3c}, fence.MinKeyBytes)})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}
