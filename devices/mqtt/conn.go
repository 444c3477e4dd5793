package mqtt

import (
	"context"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v5"
	paho "github.com/eclipse/paho.mqtt.golang"
)

// The connection is owned by one goroutine, supervise, started by New and
// ended by Close. It connects, subscribes to the reply topic, waits for the
// connection to drop, and connects again after an exponential backoff.
//
// paho's own automatic reconnect is off on purpose. With it, paho keeps a
// publish that was in flight when the connection dropped and sends it again
// after the reconnect, possibly long after Dispatch gave up on it and after
// the leadership that issued it ended. Here every connection starts a clean
// session with an empty outbound store, so a command is published only
// during the Dispatch call that carries it.

// connState is what Dispatch and CheckHealth read about the connection.
type connState struct {
	ready   bool
	lastErr error
	changed chan struct{}
}

// state returns whether the connection is ready, a channel that closes at
// the next change, and the last connection error.
func (d *Device) state() (bool, <-chan struct{}, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.conn.ready, d.conn.changed, d.conn.lastErr
}

func (d *Device) setState(ready bool, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.conn.ready = ready
	if err != nil || ready {
		d.conn.lastErr = err
	}
	close(d.conn.changed)
	d.conn.changed = make(chan struct{})
}

// notConnected builds the error for a missing connection.
func notConnected(last error) error {
	if last == nil {
		return ErrNotConnected
	}
	return fmt.Errorf("%w: %w", ErrNotConnected, last)
}

// awaitReady waits until the connection is ready, for at most the connect
// timeout. Its errors all mean that nothing was published.
func (d *Device) awaitReady(ctx context.Context) error {
	ready, changed, last := d.state()
	if ready {
		return nil
	}
	timer := time.NewTimer(d.cfg.ConnectTimeout)
	defer timer.Stop()
	for {
		select {
		case <-changed:
		case <-timer.C:
			return notConnected(last)
		case <-ctx.Done():
			return fmt.Errorf("mqtt: waiting for a connection: %w", context.Cause(ctx))
		case <-d.closing:
			return ErrClosed
		}
		ready, changed, last = d.state()
		if ready {
			return nil
		}
	}
}

// WaitConnected waits until the Device has a broker connection (and, with a
// reply topic, its reply subscription). When ctx ends first it returns the
// last connection failure, such as a *ConnectError matching
// ErrNotAuthorized, wrapped with ErrNotConnected.
func (d *Device) WaitConnected(ctx context.Context) error {
	for {
		ready, changed, last := d.state()
		if ready {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return notConnected(last)
		case <-d.closing:
			return ErrClosed
		}
	}
}

// CheckHealth reports whether the Device is connected now. It does not wait:
// without a connection it returns ErrNotConnected wrapped with the last
// connection failure.
func (d *Device) CheckHealth(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ready, _, last := d.state()
	if ready {
		return nil
	}
	return notConnected(last)
}

// supervise owns the connection until Close.
func (d *Device) supervise() {
	defer close(d.done)
	waits := reconnectWaits(d.cfg.ReconnectMinInterval, d.cfg.ReconnectMaxInterval)
	for {
		err := d.connect()
		if err == nil {
			waits.Reset()
			d.setState(true, nil)
			d.log.Info("mqtt connected", "brokers", d.cfg.Brokers, "client_id", d.clientID)
			select {
			case lostErr := <-d.lost:
				d.setState(false, &ConnectError{Brokers: d.cfg.Brokers, Err: fmt.Errorf("connection lost: %w", lostErr)})
				d.log.Warn("mqtt connection lost", "error", lostErr)
				// Reconnect at once after a drop; back off only from
				// failed attempts.
				continue
			case <-d.closing:
				d.setState(false, ErrClosed)
				d.client.Disconnect(250)
				return
			}
		}
		d.setState(false, err)
		wait := waits.NextBackOff()
		d.log.Warn("mqtt connect failed", "error", err, "retry_in", wait)
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-d.closing:
			timer.Stop()
			return
		}
	}
}

// reconnectWaits returns the waits between two failed connection attempts:
// from min, doubling, up to max, each spread over 0.8 to 1.2 times itself so
// that clients that lost one broker do not return in step.
func reconnectWaits(min, max time.Duration) *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{InitialInterval: min, RandomizationFactor: 0.2, Multiplier: 2, MaxInterval: max}
}

// connect makes one connection attempt and subscribes to the reply topic.
func (d *Device) connect() error {
	// A loss reported for the previous connection is stale now.
	select {
	case <-d.lost:
	default:
	}
	tok := d.client.Connect()
	select {
	case <-tok.Done():
	case <-d.closing:
		// The attempt ends by itself within the connect timeout per
		// broker; wait for it so that the client is idle at exit.
		<-tok.Done()
		if tok.Error() == nil {
			d.client.Disconnect(0)
		}
		return ErrClosed
	}
	if err := tok.Error(); err != nil {
		return classifyConnect(d.cfg.Brokers, err)
	}
	if d.reply == nil {
		return nil
	}
	sub := d.client.Subscribe(d.replyFilter, 1, d.onReply)
	timer := time.NewTimer(d.cfg.ConnectTimeout)
	defer timer.Stop()
	var err error
	select {
	case <-sub.Done():
		err = sub.Error()
		if err == nil {
			if st, ok := sub.(*paho.SubscribeToken); ok {
				if code, ok := st.Result()[d.replyFilter]; ok && code >= 0x80 {
					err = fmt.Errorf("broker refused the subscription to %q", d.replyFilter)
				}
			}
		}
	case <-timer.C:
		err = fmt.Errorf("no SUBACK for %q within %v", d.replyFilter, d.cfg.ConnectTimeout)
	case <-d.closing:
		err = ErrClosed
	}
	if err != nil {
		d.client.Disconnect(0)
		return &ConnectError{Brokers: d.cfg.Brokers, Err: fmt.Errorf("subscribe to replies: %w", err)}
	}
	return nil
}

// onReply routes a reply to the Dispatch waiting for it. It runs on paho's
// router and never blocks.
func (d *Device) onReply(_ paho.Client, m paho.Message) {
	r, err := DecodeReply(m.Payload())
	if err != nil {
		d.log.Warn("mqtt reply dropped", "topic", m.Topic(), "error", err)
		return
	}
	d.waitMu.Lock()
	w, ok := d.waiters[r.ID]
	d.waitMu.Unlock()
	if !ok {
		d.log.Debug("mqtt reply for no waiting command", "topic", m.Topic(), "id", r.ID)
		return
	}
	if d.keys != nil {
		// A reply that does not verify settles nothing: anyone who may
		// publish to the reply topic could have sent it.
		if err := d.keys.Verify(r.KeyID, r.Signed(w.device).AppendCanonical(nil), r.MAC); err != nil {
			d.refused.Add(1)
			d.log.Warn("mqtt reply refused: not authenticated", "topic", m.Topic(), "id", r.ID, "device", w.device, "error", err)
			return
		}
	}
	select {
	case w.ch <- r:
	default: // a duplicate delivery; the first one counts
	}
}
