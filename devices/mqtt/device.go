package mqtt

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/devices/fence"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// Device publishes commands to an MQTT broker. It implements
// [dispatch.Device], [dispatch.HealthChecker], [dispatch.Redispatcher] and
// io.Closer. One Device may serve many device names through the {device}
// placeholder; its methods are safe for concurrent use.
type Device struct {
	cfg         Config
	clientID    string
	topic       template
	reply       *template
	replyFilter string
	ackDetail   string
	client      paho.Client
	log         *slog.Logger
	// keys signs envelopes and verifies replies; nil when
	// Config.Authenticate is false.
	keys *fence.Verifier

	mu   sync.Mutex
	conn connState

	waitMu  sync.Mutex
	waiters map[string]waiter

	// refused counts replies dropped because their MAC did not verify.
	refused atomic.Uint64

	lost      chan error
	closing   chan struct{}
	closeOnce sync.Once
	done      chan struct{}
}

var (
	_ dispatch.Device          = (*Device)(nil)
	_ dispatch.AuthorityDevice = (*Device)(nil)
	_ dispatch.HealthChecker   = (*Device)(nil)
	_ dispatch.Redispatcher    = (*Device)(nil)
)

// New validates cfg, loads its certificate files, and starts connecting in
// the background. It does not wait for the broker: a broker that is down at
// start delays no caller, and a Dispatch in the meantime waits up to the
// connect timeout for the connection before it fails with a retryable
// ErrNotConnected. Call [Device.WaitConnected] to wait for the first
// connection. Configuration errors are *ConfigError values matching
// ErrInvalidConfig.
func New(cfg Config, opts ...Option) (*Device, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	tlsCfg, err := buildTLS(cfg.TLS)
	if err != nil {
		return nil, err
	}
	o := buildOptions(opts)
	var keys *fence.Verifier
	switch {
	case !cfg.Authenticates():
	case cfg.Verifier != nil:
		keys = cfg.Verifier
	default:
		if keys, err = LoadVerifier(cfg.Keys); err != nil {
			return nil, err
		}
	}
	d := &Device{
		cfg:      cfg,
		clientID: cfg.ClientID,
		log:      o.logger,
		keys:     keys,
		waiters:  make(map[string]waiter),
		lost:     make(chan error, 1),
		closing:  make(chan struct{}),
		done:     make(chan struct{}),
	}
	d.conn.changed = make(chan struct{})
	d.ackDetail = fmt.Sprintf("acknowledged by the broker at qos %d", cfg.QoS)
	d.topic, _ = parseTemplate(cfg.Topic, false)
	if cfg.ReplyTopic != "" {
		t, _ := parseTemplate(cfg.ReplyTopic, true)
		d.reply = &t
		d.replyFilter = t.filter()
	}
	if d.clientID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		d.clientID = "krabka-" + hex.EncodeToString(b[:])
	}

	po := paho.NewClientOptions()
	for _, b := range cfg.Brokers {
		po.AddBroker(b)
	}
	po.SetClientID(d.clientID)
	po.SetUsername(cfg.Username)
	po.SetPassword(cfg.Password)
	if tlsCfg != nil {
		po.SetTLSConfig(tlsCfg)
	}
	po.SetProtocolVersion(4)
	po.SetCleanSession(true)
	po.SetAutoReconnect(false)
	po.SetConnectRetry(false)
	po.SetConnectTimeout(cfg.ConnectTimeout)
	po.SetDialer(&net.Dialer{Timeout: cfg.ConnectTimeout})
	po.SetKeepAlive(cfg.KeepAlive)
	po.SetPingTimeout(min(cfg.KeepAlive, 10*time.Second))
	po.SetWriteTimeout(cfg.PublishTimeout)
	po.SetConnectionLostHandler(func(_ paho.Client, err error) {
		select {
		case d.lost <- err:
		default:
		}
	})
	d.client = paho.NewClient(po)

	go d.supervise()
	return d, nil
}

// ClientID returns the MQTT client id in use, the configured one or the
// random one New chose.
func (d *Device) ClientID() string { return d.clientID }

// Dispatch publishes cmd in an [Envelope] that carries token and no term
// (coordination.NoTerm, which a fencing device refuses); the dispatcher
// calls DispatchUnder instead. See DispatchUnder for the rest.
func (d *Device) Dispatch(ctx context.Context, cmd dispatch.Command, token coordination.FencingToken) (dispatch.Result, error) {
	return d.DispatchUnder(ctx, cmd, coordination.Authority{Term: coordination.NoTerm, Token: token})
}

// DispatchUnder implements [dispatch.AuthorityDevice]: it publishes cmd in
// an [Envelope] that carries the authority's term and token, and waits for
// the broker's acknowledgement (PUBACK at QoS 1, PUBCOMP at QoS 2) or, with
// a reply topic, for the device's reply with the command's ID.
//
// The error classes follow the dispatch contract:
//   - rejected: an envelope over MaxPayloadBytes (*PayloadTooLargeError), a
//     payload that PayloadJSON cannot carry (ErrMalformedPayload), a command
//     field that cannot fill the topic (*TopicValueError), a missing ID or
//     token, and a reply with status rejected (*ReplyError);
//   - retryable: no connection within the connect timeout, or a connection
//     that dropped before the publish left (ErrNotConnected), a ctx that
//     ended before the publish, a Device closed before it;
//   - in doubt, every error after the publish left: ctx ended, no
//     acknowledgement or reply in time (*TimeoutError), the connection lost
//     while waiting, a reply with status error.
//
// A ctx that ends ends the wait at once. The one wait it cannot end is
// inside paho's Publish call, which returns when paho's writer takes the
// packet: at once on a healthy connection, and within PublishTimeout on one
// whose socket stalls (paho's write timeout, after which the command is in
// doubt). Running that call on a goroutine of its own would lift the limit
// at the price of a goroutine hand-off per command, which cost 10% of the
// throughput on a loaded two-core machine.
func (d *Device) DispatchUnder(ctx context.Context, cmd dispatch.Command, authority coordination.Authority) (dispatch.Result, error) {
	if err := ctx.Err(); err != nil {
		return dispatch.Result{}, dispatch.Retryable(fmt.Errorf("mqtt: dispatch %s: %w", cmd.ID, context.Cause(ctx)))
	}
	topic, payload, err := d.prepare(cmd, authority)
	if err != nil {
		return dispatch.Result{}, dispatch.Rejected(fmt.Errorf("mqtt: dispatch %s: %w", cmd.ID, err))
	}
	if err := d.awaitReady(ctx); err != nil {
		return dispatch.Result{}, dispatch.Retryable(fmt.Errorf("mqtt: dispatch %s: %w", cmd.ID, err))
	}
	var replies chan Reply
	if d.reply != nil {
		if replies, err = d.register(cmd.ID, cmd.Device); err != nil {
			return dispatch.Result{}, dispatch.Retryable(fmt.Errorf("mqtt: dispatch %s: %w", cmd.ID, err))
		}
		defer d.unregister(cmd.ID)
	}

	if err := ctx.Err(); err != nil {
		return dispatch.Result{}, dispatch.Retryable(fmt.Errorf("mqtt: dispatch %s: %w", cmd.ID, context.Cause(ctx)))
	}
	pub := d.client.Publish(topic, byte(d.cfg.QoS), false, payload)
	timer := time.NewTimer(d.cfg.PublishTimeout)
	defer timer.Stop()
	select {
	case r := <-replies:
		// The device answered before paho saw the acknowledgement; the
		// reply proves delivery. (replies is nil without a reply topic.)
		return replyResult(r)
	case <-pub.Done():
		if err := pub.Error(); err != nil {
			if errors.Is(err, paho.ErrNotConnected) {
				// paho refuses before it stores or sends anything.
				return dispatch.Result{}, dispatch.Retryable(fmt.Errorf("mqtt: dispatch %s: %w", cmd.ID, notConnected(err)))
			}
			return dispatch.Result{}, fmt.Errorf("mqtt: dispatch %s: publish to %s: %w", cmd.ID, topic, err)
		}
	case <-ctx.Done():
		return dispatch.Result{}, fmt.Errorf("mqtt: dispatch %s: published to %s, gave up awaiting the acknowledgement: %w",
			cmd.ID, topic, context.Cause(ctx))
	case <-timer.C:
		return dispatch.Result{}, fmt.Errorf("mqtt: dispatch %s: published to %s: %w",
			cmd.ID, topic, &TimeoutError{Wait: ErrAckTimeout, After: d.cfg.PublishTimeout})
	case <-d.closing:
		return dispatch.Result{}, fmt.Errorf("mqtt: dispatch %s: published to %s: %w", cmd.ID, topic, ErrClosed)
	}
	if replies == nil {
		return dispatch.Result{Detail: d.ackDetail}, nil
	}

	timer.Reset(d.cfg.ReplyTimeout)
	select {
	case r := <-replies:
		return replyResult(r)
	case <-ctx.Done():
		return dispatch.Result{}, fmt.Errorf("mqtt: dispatch %s: acknowledged, gave up awaiting the reply: %w",
			cmd.ID, context.Cause(ctx))
	case <-timer.C:
		return dispatch.Result{}, fmt.Errorf("mqtt: dispatch %s: acknowledged: %w",
			cmd.ID, &TimeoutError{Wait: ErrReplyTimeout, After: d.cfg.ReplyTimeout})
	case <-d.closing:
		return dispatch.Result{}, fmt.Errorf("mqtt: dispatch %s: acknowledged: %w", cmd.ID, ErrClosed)
	}
}

// prepare renders the topic and encodes the envelope. Its errors all mean
// the command can never be published as it is.
func (d *Device) prepare(cmd dispatch.Command, authority coordination.Authority) (string, []byte, error) {
	if cmd.ID == "" {
		return "", nil, errors.New("mqtt: command has no id")
	}
	if authority.Token.Compare(coordination.NoEpoch) == 0 {
		return "", nil, ErrNoToken
	}
	topic, err := d.topic.render(topicValues{device: cmd.Device, role: cmd.Role, action: cmd.Action})
	if err != nil {
		return "", nil, err
	}
	if d.reply != nil {
		// The reply must be able to come back on the reply topic.
		if _, err := d.reply.render(topicValues{device: cmd.Device, role: cmd.Role, action: cmd.Action}); err != nil {
			return "", nil, err
		}
	}
	env := Envelope{
		ID:          cmd.ID,
		Role:        cmd.Role,
		Device:      cmd.Device,
		Action:      cmd.Action,
		Payload:     wirePayload(cmd.Payload, d.cfg.PayloadEncoding),
		Term:        authority.Term,
		Token:       authority.Token,
		Deadline:    cmd.Deadline,
		SubmittedAt: cmd.SubmittedAt,
		Attributes:  cmd.Attributes,
	}
	if d.keys != nil {
		env.KeyID, env.MAC = d.keys.Sign(env.Signed().AppendCanonical(make([]byte, 0, 128+len(env.Payload))))
	}
	payload, err := encodeEnvelope(env, d.cfg.PayloadEncoding)
	if errors.Is(err, errPayloadNotJSON) {
		return "", nil, fmt.Errorf("%w: payload_encoding is json and the payload is not valid JSON", ErrMalformedPayload)
	}
	if err != nil {
		return "", nil, fmt.Errorf("%w: %w", ErrMalformedPayload, err)
	}
	if len(payload) > d.cfg.MaxPayloadBytes {
		return "", nil, &PayloadTooLargeError{Size: len(payload), Limit: d.cfg.MaxPayloadBytes}
	}
	return topic, payload, nil
}

func replyResult(r Reply) (dispatch.Result, error) {
	switch r.Status {
	case StatusOK:
		detail := r.Detail
		if detail == "" {
			detail = "device replied ok"
		}
		return dispatch.Result{Detail: detail, Data: r.Data}, nil
	case StatusRejected:
		return dispatch.Result{Data: r.Data}, dispatch.Rejected(&ReplyError{ID: r.ID, Status: r.Status, Detail: r.Detail})
	default:
		return dispatch.Result{Data: r.Data}, &ReplyError{ID: r.ID, Status: r.Status, Detail: r.Detail}
	}
}

// wirePayload returns the payload as a device decodes it from the
// envelope: a payload embedded as a JSON value loses the white space around
// it, and the MAC must cover what the device sees.
func wirePayload(p []byte, encoding string) []byte {
	if encoding == PayloadBase64 || !json.Valid(p) {
		return p
	}
	return bytes.Trim(p, " \t\r\n")
}

// waiter is a Dispatch awaiting the reply to one command.
type waiter struct {
	ch     chan Reply
	device string
}

func (d *Device) register(id, device string) (chan Reply, error) {
	d.waitMu.Lock()
	defer d.waitMu.Unlock()
	if _, ok := d.waiters[id]; ok {
		return nil, ErrCommandInFlight
	}
	ch := make(chan Reply, 1)
	d.waiters[id] = waiter{ch: ch, device: device}
	return ch, nil
}

// RefusedReplies returns how many replies the Device dropped because their
// MAC did not verify under the device keys: each is a forged or altered
// reply, or one from firmware with the wrong key.
func (d *Device) RefusedReplies() uint64 { return d.refused.Load() }

func (d *Device) unregister(id string) {
	d.waitMu.Lock()
	defer d.waitMu.Unlock()
	delete(d.waiters, id)
}

// RedispatchSafe reports Config.RedispatchSafe: whether the operator
// declared that the device firmware deduplicates by command ID.
func (d *Device) RedispatchSafe(dispatch.Command) bool { return d.cfg.RedispatchSafe }

// Close disconnects from the broker and ends the connection goroutine. It
// returns within the connect timeout per broker (an attempt in progress is
// let finish) plus a quarter second for the disconnect. A Dispatch still
// waiting ends with ErrClosed. Close is idempotent.
func (d *Device) Close() error {
	d.closeOnce.Do(func() { close(d.closing) })
	<-d.done
	return nil
}
