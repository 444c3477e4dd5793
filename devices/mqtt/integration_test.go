//go:build integration

package mqtt

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/dispatch/dispatchtest"
	"github.com/krabka-io/krabka-dispatch/test/mqtttest"
)

// The tests in this file run against Mosquitto: the shared broker that
// scripts/services/20-mosquitto.sh starts, and private brokers for the
// faults (down at start, restart) that would disturb other tests.

// topicFor returns a command topic template under a prefix no other test
// uses, with the matching reply template and subscription filters.
func topicsFor(t *testing.T) (cmd, reply, cmdFilter string) {
	p := mqtttest.Unique("it-") + "/"
	return p + "{device}/cmd", p + "{device}/reply", p + "+/cmd"
}

// respond answers every command under cmdFilter with the reply that
// decide returns, on the reply topic of the command's device.
func respond(t *testing.T, url, cmdFilter string, decide func(Envelope) (Reply, bool)) {
	c := mqtttest.Connect(t, url, nil)
	mqtttest.Subscribe(t, c, cmdFilter, func(c paho.Client, m paho.Message) {
		env, err := DecodeEnvelope(m.Payload())
		if err != nil {
			return
		}
		r, ok := decide(env)
		if !ok {
			return
		}
		r.ID = env.ID
		data, _ := EncodeReply(SignReply(testKeys, env.Device, r))
		replyTopic := m.Topic()[:len(m.Topic())-len("cmd")] + "reply"
		c.Publish(replyTopic, 1, false, data)
	})
}

func TestMosquittoAcknowledgedAtQoS1AndQoS2(t *testing.T) {
	sh := mqtttest.SharedBroker(t)
	cmdTopic, _, filter := topicsFor(t)
	got := make(chan Envelope, 4)
	sub := mqtttest.Connect(t, sh.URL, nil)
	mqtttest.Subscribe(t, sub, filter, func(_ paho.Client, m paho.Message) {
		if env, err := DecodeEnvelope(m.Payload()); err == nil {
			got <- env
		}
	})
	for _, qos := range []int{1, 2} {
		d := newTestDevice(t, sh.URL, func(c *Config) { c.QoS = qos; c.Topic = cmdTopic })
		waitConnected(t, d)
		authority := coordination.Authority{Term: coordination.Term(700 + qos), Token: mustToken(t, 4242, int16(qos))}
		cmd := testCommand(mqtttest.Unique("q"))
		if _, err := d.DispatchUnder(context.Background(), cmd, authority); err != nil {
			t.Fatalf("qos %d: %v", qos, err)
		}
		select {
		case env := <-got:
			if env.ID != cmd.ID || env.Authority() != authority || !env.Deadline.Equal(cmd.Deadline) {
				t.Fatalf("qos %d: subscriber got %+v", qos, env)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("qos %d: subscriber got nothing", qos)
		}
	}
}

func TestMosquittoReplyCorrelationAndTimeout(t *testing.T) {
	sh := mqtttest.SharedBroker(t)
	cmdTopic, replyTopic, filter := topicsFor(t)
	respond(t, sh.URL, filter, func(env Envelope) (Reply, bool) {
		switch env.Action {
		case "open":
			return Reply{Status: StatusOK, Detail: "opened " + env.Token.String()}, true
		case "stale":
			return Reply{Status: StatusRejected, Detail: "stale"}, true
		}
		return Reply{}, false
	})
	d := newTestDevice(t, sh.URL, func(c *Config) {
		c.Topic, c.ReplyTopic = cmdTopic, replyTopic
		c.ReplyTimeout = 500 * time.Millisecond
	})
	waitConnected(t, d)
	token := mustToken(t, 8, 8)
	for i := range 20 {
		res, err := d.Dispatch(context.Background(), testCommand(mqtttest.Unique("c")), token)
		if err != nil || res.Detail != "opened 8:8" {
			t.Fatalf("command %d: %+v, %v", i, res, err)
		}
	}
	cmd := testCommand(mqtttest.Unique("s"))
	cmd.Action = "stale"
	if _, err := d.Dispatch(context.Background(), cmd, token); !dispatch.IsRejected(err) {
		t.Fatalf("stale: %v, want rejected", err)
	}
	cmd = testCommand(mqtttest.Unique("t"))
	cmd.Action = "ignore"
	_, err := d.Dispatch(context.Background(), cmd, token)
	if !errors.Is(err, ErrReplyTimeout) || dispatch.IsRetryable(err) || dispatch.IsRejected(err) {
		t.Fatalf("no reply: %v, want an in-doubt ErrReplyTimeout", err)
	}
}

func TestMosquittoCancellationMidDispatchReturnsPromptly(t *testing.T) {
	sh := mqtttest.SharedBroker(t)
	cmdTopic, replyTopic, filter := topicsFor(t)
	arrived := make(chan struct{}, 1)
	respond(t, sh.URL, filter, func(Envelope) (Reply, bool) {
		arrived <- struct{}{}
		return Reply{}, false
	})
	d := newTestDevice(t, sh.URL, func(c *Config) {
		c.Topic, c.ReplyTopic = cmdTopic, replyTopic
		c.ReplyTimeout = time.Minute
	})
	waitConnected(t, d)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := d.Dispatch(ctx, testCommand(mqtttest.Unique("x")), mustToken(t, 1, 1))
		errc <- err
	}()
	<-arrived
	cancelled := time.Now()
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) || dispatch.IsRetryable(err) {
			t.Fatalf("Dispatch = %v, want in-doubt context.Canceled", err)
		}
		if el := time.Since(cancelled); el > 500*time.Millisecond {
			t.Fatalf("Dispatch returned %v after the cancel", el)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Dispatch ignored the cancel")
	}
}

func TestMosquittoDownAtStart(t *testing.T) {
	sh := mqtttest.SharedBroker(t)
	m := mqtttest.NewMosquitto(t, sh.Bin) // prepared, not started
	start := time.Now()
	d := newTestDevice(t, m.URL(), func(c *Config) { c.ConnectTimeout = 500 * time.Millisecond })
	if el := time.Since(start); el > time.Second {
		t.Fatalf("New took %v with the broker down", el)
	}
	_, err := d.Dispatch(context.Background(), testCommand("down"), mustToken(t, 1, 1))
	if !dispatch.IsRetryable(err) || !errors.Is(err, ErrNotConnected) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Dispatch with the broker down = %v, want retryable ErrNotConnected (connection refused)", err)
	}
	m.Start(t)
	waitConnected(t, d)
	if _, err := d.Dispatch(context.Background(), testCommand("up"), mustToken(t, 1, 1)); err != nil {
		t.Fatalf("Dispatch once the broker is up: %v", err)
	}
}

func TestMosquittoRestartedMidStream(t *testing.T) {
	sh := mqtttest.SharedBroker(t)
	m := mqtttest.StartMosquitto(t, sh.Bin)
	d := newTestDevice(t, m.URL(), func(c *Config) {
		c.ConnectTimeout = 300 * time.Millisecond
		c.PublishTimeout = 500 * time.Millisecond
	})
	waitConnected(t, d)

	type outcome struct {
		at  time.Time
		err error
	}
	var (
		mu       sync.Mutex
		outcomes []outcome
	)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_, err := d.Dispatch(context.Background(), testCommand(mqtttest.Unique("s")), mustToken(t, 3, 0))
			mu.Lock()
			outcomes = append(outcomes, outcome{time.Now(), err})
			mu.Unlock()
		}
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(outcomes) }
	waitFor := func(what string, cond func() bool) {
		deadline := time.Now().Add(15 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond) // polling a real broker's effect
		}
	}
	waitFor("commands before the restart", func() bool { return count() > 20 })
	m.Stop(t)
	restartedAt := time.Now()
	m.Start(t)
	waitFor("commands after the restart", func() bool {
		mu.Lock()
		defer mu.Unlock()
		ok := 0
		for _, o := range outcomes {
			if o.at.After(restartedAt) && o.err == nil {
				ok++
			}
		}
		return ok > 20
	})
	close(stop)
	<-done
	for _, o := range outcomes {
		if o.err == nil {
			continue
		}
		// During the outage a command either never left (retryable) or
		// was lost in flight (in doubt); none is refused.
		if dispatch.IsRejected(o.err) {
			t.Fatalf("command rejected during the restart: %v", o.err)
		}
		t.Logf("during the restart: retryable=%v %v", dispatch.IsRetryable(o.err), o.err)
	}
}

func TestMosquittoCredentials(t *testing.T) {
	sh := mqtttest.SharedBroker(t)
	wrong := newTestDevice(t, sh.AuthURL, func(c *Config) {
		c.Username, c.Password = sh.User, "not-the-password"
		c.ConnectTimeout = 500 * time.Millisecond
	})
	_, err := wrong.Dispatch(context.Background(), testCommand("w"), mustToken(t, 1, 1))
	var ce *ConnectError
	if !dispatch.IsRetryable(err) || !errors.Is(err, ErrNotAuthorized) || !errors.As(err, &ce) {
		t.Fatalf("wrong password: %v, want retryable ErrNotAuthorized in a *ConnectError", err)
	}
	if err := wrong.CheckHealth(context.Background()); !errors.Is(err, ErrNotAuthorized) {
		t.Fatalf("CheckHealth with the wrong password = %v", err)
	}

	anonymous := newTestDevice(t, sh.AuthURL, func(c *Config) { c.ConnectTimeout = 500 * time.Millisecond })
	if _, err := anonymous.Dispatch(context.Background(), testCommand("a"), mustToken(t, 1, 1)); !errors.Is(err, ErrNotAuthorized) {
		t.Fatalf("no credentials: %v, want ErrNotAuthorized", err)
	}

	right := newTestDevice(t, sh.AuthURL, func(c *Config) { c.Username, c.Password = sh.User, sh.Password })
	waitConnected(t, right)
	if _, err := right.Dispatch(context.Background(), testCommand("r"), mustToken(t, 1, 1)); err != nil {
		t.Fatalf("right password: %v", err)
	}
}

func TestMosquittoTLS(t *testing.T) {
	sh := mqtttest.SharedBroker(t)
	good := &TLSConfig{CAFile: sh.CA, CertFile: sh.ClientCert, KeyFile: sh.ClientKey}

	d := newTestDevice(t, sh.TLSURL, func(c *Config) { c.TLS = good })
	waitConnected(t, d)
	if _, err := d.Dispatch(context.Background(), testCommand("tls"), mustToken(t, 1, 1)); err != nil {
		t.Fatalf("TLS dispatch: %v", err)
	}

	otherCA := writeSelfSignedCA(t)
	cases := []struct {
		name  string
		tls   *TLSConfig
		check func(error) bool
	}{
		{"unknown CA", &TLSConfig{CAFile: otherCA, CertFile: sh.ClientCert, KeyFile: sh.ClientKey}, func(err error) bool {
			var ve *tls.CertificateVerificationError
			var ua x509.UnknownAuthorityError
			return errors.As(err, &ve) && errors.As(err, &ua)
		}},
		{"wrong server name", &TLSConfig{CAFile: sh.CA, CertFile: sh.ClientCert, KeyFile: sh.ClientKey, ServerName: "other.example"}, func(err error) bool {
			var he x509.HostnameError
			return errors.As(err, &he)
		}},
		{"no client certificate", &TLSConfig{CAFile: sh.CA}, func(err error) bool {
			var ce *ConnectError
			return errors.As(err, &ce)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newTestDevice(t, sh.TLSURL, func(c *Config) { c.TLS = tc.tls; c.ConnectTimeout = 500 * time.Millisecond })
			_, err := d.Dispatch(context.Background(), testCommand("bad-tls"), mustToken(t, 1, 1))
			if !dispatch.IsRetryable(err) || !errors.Is(err, ErrNotConnected) || !tc.check(err) {
				t.Fatalf("Dispatch = %v", err)
			}
		})
	}
}

func TestMosquittoOversizedAndMalformedRejected(t *testing.T) {
	sh := mqtttest.SharedBroker(t)
	cmdTopic, _, _ := topicsFor(t)
	d := newTestDevice(t, sh.URL, func(c *Config) { c.Topic = cmdTopic; c.PayloadEncoding = PayloadJSON })
	waitConnected(t, d)
	big := testCommand("big")
	big.Payload = []byte(`"` + string(make([]byte, 0)) + string(bytesOf('x', DefaultMaxPayloadBytes)) + `"`)
	if _, err := d.Dispatch(context.Background(), big, mustToken(t, 1, 1)); !dispatch.IsRejected(err) || !errors.Is(err, ErrPayloadTooLarge) {
		t.Fatalf("oversized: %v", err)
	}
	bad := testCommand("bad")
	bad.Payload = []byte{0xff, 0x00}
	if _, err := d.Dispatch(context.Background(), bad, mustToken(t, 1, 1)); !dispatch.IsRejected(err) || !errors.Is(err, ErrMalformedPayload) {
		t.Fatalf("malformed: %v", err)
	}
	// The connection is unharmed.
	if _, err := d.Dispatch(context.Background(), testCommand("fine"), mustToken(t, 1, 1)); err != nil {
		t.Fatalf("after the rejections: %v", err)
	}
}

func bytesOf(b byte, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = b
	}
	return out
}

// writeSelfSignedCA writes a CA certificate that signed nothing the broker
// presents.
func writeSelfSignedCA(t *testing.T) string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "impostor CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "impostor-ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestMosquittoConformance(t *testing.T) {
	sh := mqtttest.SharedBroker(t)
	dispatchtest.Run(t, conformanceTarget(t, sh.URL))
}
