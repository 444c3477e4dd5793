package mqtt

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/test/mqtttest"
)

// hungBroker accepts connections and never answers. stop closes them, and
// runs at the test's cleanup too.
func hungBroker(t *testing.T) (url string, stop func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns := make(chan net.Conn, 16)
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns <- c
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			l.Close()
			<-accepted
			close(conns)
			for c := range conns {
				c.Close()
			}
		})
	}
	t.Cleanup(stop)
	return "tcp://" + l.Addr().String(), stop
}

// The dispatcher ends a call's context without a deadline, with cause
// dispatch.ErrFreshnessExpired, when its lease's freshness runs out. Each
// wait of Dispatch ends with it, however long its own timeout, and the
// error carries the cause: the connection wait (retryable: nothing was
// published) and the reply wait (in doubt).
func TestFreshnessEndEndsMQTTWaits(t *testing.T) {
	t.Run("connect", func(t *testing.T) {
		url, stop := hungBroker(t)
		d := newTestDevice(t, url, func(c *Config) { c.ConnectTimeout = time.Minute })
		// Close lets a connection attempt finish: the broker goes first.
		t.Cleanup(stop)
		ctx, cut := context.WithCancelCause(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := d.Dispatch(ctx, testCommand("c"), mustToken(t, 1, 1))
			errc <- err
		}()
		cut(dispatch.ErrFreshnessExpired)
		select {
		case err := <-errc:
			if !dispatch.IsRetryable(err) || !errors.Is(err, dispatch.ErrFreshnessExpired) {
				t.Errorf("Dispatch = %v, want retryable with the freshness cause", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("the connection wait did not end with ctx")
		}
	})
	t.Run("reply", func(t *testing.T) {
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
		ctx, cut := context.WithCancelCause(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := d.Dispatch(ctx, testCommand("r"), mustToken(t, 1, 1))
			errc <- err
		}()
		<-arrived
		cut(dispatch.ErrFreshnessExpired)
		select {
		case err := <-errc:
			if dispatch.IsRetryable(err) || dispatch.IsRejected(err) || !errors.Is(err, dispatch.ErrFreshnessExpired) {
				t.Errorf("Dispatch = %v, want in doubt with the freshness cause", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("the reply wait did not end with ctx")
		}
	})
}
