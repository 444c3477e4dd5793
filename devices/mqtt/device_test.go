package mqtt

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/test/mqtttest"
)

// newTestDevice starts a Device on url with short timings; it is closed at
// the test's cleanup.
func newTestDevice(t *testing.T, url string, edit func(*Config)) *Device {
	t.Helper()
	cfg := Config{
		Brokers:              []string{url},
		Topic:                "devices/{device}/cmd",
		ConnectTimeout:       2 * time.Second,
		PublishTimeout:       2 * time.Second,
		ReplyTimeout:         2 * time.Second,
		ReconnectMinInterval: 10 * time.Millisecond,
		ReconnectMaxInterval: 100 * time.Millisecond,
		Verifier:             testKeys,
	}
	if edit != nil {
		edit(&cfg)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func waitConnected(t *testing.T, d *Device) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.WaitConnected(ctx); err != nil {
		t.Fatalf("WaitConnected: %v", err)
	}
}

func testCommand(id string) dispatch.Command {
	return dispatch.Command{
		ID:       id,
		Role:     "plant-a",
		Device:   "valve-1",
		Action:   "open",
		Payload:  []byte(`{"percent":40}`),
		Deadline: time.Now().Add(time.Minute),
	}
}

// inbox collects the envelopes a broker receives on a filter.
type inbox struct {
	mu   sync.Mutex
	got  []Envelope
	seen chan struct{}
}

func subscribeInbox(t *testing.T, b *mqtttest.InProcess, filter string) *inbox {
	in := &inbox{seen: make(chan struct{}, 100)}
	b.Subscribe(t, filter, func(_ string, payload []byte) {
		env, err := DecodeEnvelope(payload)
		if err != nil {
			return
		}
		in.mu.Lock()
		in.got = append(in.got, env)
		in.mu.Unlock()
		in.seen <- struct{}{}
	})
	return in
}

// TestDispatchAcknowledgedAtEachQoS publishes at QoS 1 through Dispatch,
// whose envelope carries no term, and at QoS 2 through DispatchUnder, whose
// envelope carries the term beside the token.
func TestDispatchAcknowledgedAtEachQoS(t *testing.T) {
	b := mqtttest.StartInProcess(t, "127.0.0.1:0")
	in := subscribeInbox(t, b, "devices/+/cmd")
	for _, qos := range []int{1, 2} {
		d := newTestDevice(t, b.URL(), func(c *Config) { c.QoS = qos })
		waitConnected(t, d)
		token := mustToken(t, 77, int16(qos))
		cmd := testCommand("ack-" + string(rune('0'+qos)))
		var (
			res  dispatch.Result
			err  error
			term = coordination.NoTerm
		)
		if qos == 1 {
			res, err = d.Dispatch(context.Background(), cmd, token)
		} else {
			term = 4096
			res, err = d.DispatchUnder(context.Background(), cmd, coordination.Authority{Term: term, Token: token})
		}
		if err != nil {
			t.Fatalf("qos %d: Dispatch: %v", qos, err)
		}
		if !strings.Contains(res.Detail, "acknowledged") {
			t.Fatalf("qos %d: detail %q", qos, res.Detail)
		}
		select {
		case <-in.seen:
		case <-time.After(5 * time.Second):
			t.Fatalf("qos %d: broker saw no envelope", qos)
		}
		in.mu.Lock()
		env := in.got[len(in.got)-1]
		in.mu.Unlock()
		if env.Term != term || env.Token != token || env.Device != "valve-1" || string(env.Payload) != `{"percent":40}` {
			t.Fatalf("qos %d: envelope %+v", qos, env)
		}
	}
}

// replier answers every command on devices/+/cmd with status on the reply
// topic of its device.
func replier(t *testing.T, b *mqtttest.InProcess, status func(Envelope) (Reply, bool)) {
	b.Subscribe(t, "devices/+/cmd", func(_ string, payload []byte) {
		env, err := DecodeEnvelope(payload)
		if err != nil {
			return
		}
		r, ok := status(env)
		if !ok {
			return
		}
		r.ID = env.ID
		out, err := EncodeReply(SignReply(testKeys, env.Device, r))
		if err != nil {
			return
		}
		go func() { _ = b.Publish("devices/"+env.Device+"/reply", out) }()
	})
}

func TestDispatchWaitsForTheCorrelatedReply(t *testing.T) {
	b := mqtttest.StartInProcess(t, "127.0.0.1:0")
	replier(t, b, func(env Envelope) (Reply, bool) {
		switch env.Action {
		case "open":
			// A stray reply for another command comes first.
			stray, _ := EncodeReply(Reply{ID: "someone-else", Status: StatusError})
			go func() { _ = b.Publish("devices/"+env.Device+"/reply", stray) }()
			return Reply{Status: StatusOK, Detail: "opened", Data: []byte(`{"percent":40}`)}, true
		case "stale":
			return Reply{Status: StatusRejected, Detail: "token below 9:9"}, true
		case "jam":
			return Reply{Status: StatusError, Detail: "valve jammed"}, true
		}
		return Reply{}, false
	})
	d := newTestDevice(t, b.URL(), func(c *Config) {
		c.ReplyTopic = "devices/{device}/reply"
		c.ReplyTimeout = 300 * time.Millisecond
	})
	waitConnected(t, d)
	token := mustToken(t, 5, 1)

	res, err := d.Dispatch(context.Background(), testCommand("r-ok"), token)
	if err != nil || res.Detail != "opened" || string(res.Data) != `{"percent":40}` {
		t.Fatalf("ok reply: %+v, %v", res, err)
	}

	cmd := testCommand("r-stale")
	cmd.Action = "stale"
	_, err = d.Dispatch(context.Background(), cmd, token)
	var re *ReplyError
	if !dispatch.IsRejected(err) || !errors.As(err, &re) || re.Detail != "token below 9:9" {
		t.Fatalf("rejected reply: %v, want rejected *ReplyError", err)
	}

	cmd = testCommand("r-jam")
	cmd.Action = "jam"
	_, err = d.Dispatch(context.Background(), cmd, token)
	if !errors.As(err, &re) || re.Status != StatusError || dispatch.IsRejected(err) || dispatch.IsRetryable(err) {
		t.Fatalf("error reply: %v, want an in-doubt *ReplyError", err)
	}

	cmd = testCommand("r-silent")
	cmd.Action = "ignore"
	start := time.Now()
	_, err = d.Dispatch(context.Background(), cmd, token)
	var te *TimeoutError
	if !errors.Is(err, ErrReplyTimeout) || !errors.As(err, &te) || dispatch.IsRetryable(err) || dispatch.IsRejected(err) {
		t.Fatalf("no reply: %v, want an in-doubt ErrReplyTimeout", err)
	}
	if el := time.Since(start); el < 300*time.Millisecond || el > 5*time.Second {
		t.Fatalf("reply timeout after %v, want about 300ms", el)
	}
}

func TestDispatchCancelledWhileAwaitingReplyReturnsAtOnce(t *testing.T) {
	b := mqtttest.StartInProcess(t, "127.0.0.1:0")
	arrived := make(chan struct{}, 1)
	replier(t, b, func(Envelope) (Reply, bool) {
		arrived <- struct{}{}
		return Reply{}, false
	})
	d := newTestDevice(t, b.URL(), func(c *Config) {
		c.ReplyTopic = "devices/{device}/reply"
		c.ReplyTimeout = time.Minute
	})
	waitConnected(t, d)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := d.Dispatch(ctx, testCommand("cancel-me"), mustToken(t, 1, 0))
		errc <- err
	}()
	<-arrived
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) || dispatch.IsRetryable(err) || dispatch.IsRejected(err) {
			t.Fatalf("Dispatch = %v, want an in-doubt context.Canceled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Dispatch did not return after cancel")
	}
	// The waiter is gone: a second command with that ID may wait again.
	d.waitMu.Lock()
	n := len(d.waiters)
	d.waitMu.Unlock()
	if n != 0 {
		t.Fatalf("%d reply waiters left", n)
	}
}

func TestDispatchRejectsWhatCannotBePublished(t *testing.T) {
	b := mqtttest.StartInProcess(t, "127.0.0.1:0")
	d := newTestDevice(t, b.URL(), func(c *Config) {
		c.MaxPayloadBytes = 1024
		c.PayloadEncoding = PayloadJSON
	})
	token := mustToken(t, 3, 3)

	big := testCommand("big")
	big.Payload = []byte(`"` + strings.Repeat("x", 2000) + `"`)
	_, err := d.Dispatch(context.Background(), big, token)
	var tl *PayloadTooLargeError
	if !dispatch.IsRejected(err) || !errors.As(err, &tl) || tl.Limit != 1024 || tl.Size < 2000 {
		t.Fatalf("oversized: %v", err)
	}

	bad := testCommand("bad")
	bad.Payload = []byte("{not json")
	if _, err := d.Dispatch(context.Background(), bad, token); !dispatch.IsRejected(err) || !errors.Is(err, ErrMalformedPayload) {
		t.Fatalf("malformed: %v", err)
	}

	slash := testCommand("slash")
	slash.Device = "valve/1"
	if _, err := d.Dispatch(context.Background(), slash, token); !dispatch.IsRejected(err) || !errors.Is(err, ErrInvalidTopicValue) {
		t.Fatalf("device with '/': %v", err)
	}

	if _, err := d.Dispatch(context.Background(), testCommand(""), token); !dispatch.IsRejected(err) {
		t.Fatalf("no id: %v", err)
	}
	if _, err := d.Dispatch(context.Background(), testCommand("bad\xffid"), token); !dispatch.IsRejected(err) || !errors.Is(err, ErrMalformedPayload) {
		t.Fatalf("id not UTF-8: %v", err)
	}
}

func TestDispatchWithoutBrokerIsRetryable(t *testing.T) {
	b := mqtttest.StartInProcess(t, "127.0.0.1:0")
	addr := b.Addr
	b.Close() // nothing listens there now

	start := time.Now()
	d := newTestDevice(t, "tcp://"+addr, func(c *Config) { c.ConnectTimeout = 300 * time.Millisecond })
	if el := time.Since(start); el > time.Second {
		t.Fatalf("New took %v with the broker down", el)
	}
	_, err := d.Dispatch(context.Background(), testCommand("down"), mustToken(t, 1, 1))
	if !dispatch.IsRetryable(err) || !errors.Is(err, ErrNotConnected) {
		t.Fatalf("Dispatch = %v, want retryable ErrNotConnected", err)
	}
	var ce *ConnectError
	if !errors.As(err, &ce) {
		t.Fatalf("Dispatch = %v, want the last *ConnectError wrapped", err)
	}
	if err := d.CheckHealth(context.Background()); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("CheckHealth = %v", err)
	}

	// The broker comes up: the device connects by itself.
	mqtttest.StartInProcess(t, addr)
	waitConnected(t, d)
	if err := d.CheckHealth(context.Background()); err != nil {
		t.Fatalf("CheckHealth after connect = %v", err)
	}
	if _, err := d.Dispatch(context.Background(), testCommand("up"), mustToken(t, 1, 1)); err != nil {
		t.Fatalf("Dispatch after connect: %v", err)
	}
}

func TestDispatchCancelledBeforeConnectionIsRetryable(t *testing.T) {
	b := mqtttest.StartInProcess(t, "127.0.0.1:0")
	addr := b.Addr
	b.Close()
	d := newTestDevice(t, "tcp://"+addr, func(c *Config) { c.ConnectTimeout = time.Minute })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := d.Dispatch(ctx, testCommand("c"), mustToken(t, 1, 1))
	if !dispatch.IsRetryable(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dispatch = %v, want retryable DeadlineExceeded", err)
	}
}

func TestDeviceReconnectsAfterBrokerRestart(t *testing.T) {
	b := mqtttest.StartInProcess(t, "127.0.0.1:0")
	d := newTestDevice(t, b.URL(), nil)
	waitConnected(t, d)
	if _, err := d.Dispatch(context.Background(), testCommand("before"), mustToken(t, 2, 0)); err != nil {
		t.Fatal(err)
	}
	addr := b.Addr
	b.Close()
	b2 := mqtttest.StartInProcess(t, addr)
	in := subscribeInbox(t, b2, "devices/+/cmd")
	// Until the device notices the drop, a command may be lost with the old
	// connection (in doubt) or refused by paho (retryable); then Dispatch
	// waits for the reconnection within the connect timeout.
	var err error
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		_, err = d.Dispatch(context.Background(), testCommand("after"), mustToken(t, 2, 0))
		if err == nil || dispatch.IsRejected(err) {
			break
		}
	}
	if err != nil {
		t.Fatalf("Dispatch after restart: %v", err)
	}
	select {
	case <-in.seen:
	case <-time.After(5 * time.Second):
		t.Fatal("restarted broker saw no envelope")
	}
}

func TestCloseEndsWaitingDispatchAndIsIdempotent(t *testing.T) {
	b := mqtttest.StartInProcess(t, "127.0.0.1:0")
	arrived := make(chan struct{}, 1)
	replier(t, b, func(Envelope) (Reply, bool) { arrived <- struct{}{}; return Reply{}, false })
	d := newTestDevice(t, b.URL(), func(c *Config) {
		c.ReplyTopic = "devices/{device}/reply"
		c.ReplyTimeout = time.Minute
	})
	waitConnected(t, d)
	errc := make(chan error, 1)
	go func() {
		_, err := d.Dispatch(context.Background(), testCommand("closing"), mustToken(t, 1, 0))
		errc <- err
	}()
	<-arrived
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrClosed) || dispatch.IsRetryable(err) {
		t.Fatalf("Dispatch = %v, want in-doubt ErrClosed", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Dispatch(context.Background(), testCommand("late"), mustToken(t, 1, 0)); !dispatch.IsRetryable(err) || !errors.Is(err, ErrClosed) {
		t.Fatalf("Dispatch after Close = %v, want retryable ErrClosed", err)
	}
}

func TestRedispatchSafeFollowsConfig(t *testing.T) {
	for _, safe := range []bool{false, true} {
		d := newTestDevice(t, "tcp://127.0.0.1:1", func(c *Config) { c.RedispatchSafe = safe })
		if got := d.RedispatchSafe(testCommand("x")); got != safe {
			t.Fatalf("RedispatchSafe = %v, want %v", got, safe)
		}
	}
}

// TestNewDoesNotWaitForAHungBroker points the Device at a listener that
// accepts connections and never answers: New returns at once, and Dispatch
// gives up when its ctx ends, retryable, as nothing was published.
func TestNewDoesNotWaitForAHungBroker(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // held open, never answered
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-accepted
		for _, c := range conns {
			c.Close()
		}
	})

	start := time.Now()
	d := newTestDevice(t, "tcp://"+l.Addr().String(), func(c *Config) { c.ConnectTimeout = 500 * time.Millisecond })
	if el := time.Since(start); el > time.Second {
		t.Fatalf("New took %v against a hung broker", el)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = d.Dispatch(ctx, testCommand("hung"), mustToken(t, 1, 1))
	if !dispatch.IsRetryable(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dispatch = %v, want retryable DeadlineExceeded", err)
	}
	// Without a ctx deadline the connect timeout ends the wait.
	_, err = d.Dispatch(context.Background(), testCommand("hung"), mustToken(t, 1, 1))
	if !dispatch.IsRetryable(err) || !errors.Is(err, ErrNotConnected) {
		t.Fatalf("Dispatch = %v, want retryable ErrNotConnected", err)
	}
}
