package mqtttest

import (
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// Unique returns prefix followed by random hex, for topic levels and client
// ids that no other test uses.
func Unique(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// Connect connects a plain paho client to url, for a test's own
// subscriptions and replies; it is disconnected at the test's cleanup.
// edit, when not nil, adjusts the options first.
func Connect(t testing.TB, url string, edit func(*paho.ClientOptions)) paho.Client {
	t.Helper()
	opts := paho.NewClientOptions().
		AddBroker(url).
		SetClientID(Unique("mqtttest-")).
		SetCleanSession(true).
		SetConnectTimeout(5 * time.Second).
		SetOrderMatters(false)
	if edit != nil {
		edit(opts)
	}
	c := paho.NewClient(opts)
	tok := c.Connect()
	if !tok.WaitTimeout(10 * time.Second) {
		t.Fatalf("mqtttest: connect %s: timed out", url)
	}
	if err := tok.Error(); err != nil {
		t.Fatalf("mqtttest: connect %s: %v", url, err)
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return c
}

// Subscribe subscribes c to filter at QoS 1 and waits for the SUBACK.
func Subscribe(t testing.TB, c paho.Client, filter string, fn paho.MessageHandler) {
	t.Helper()
	tok := c.Subscribe(filter, 1, fn)
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("mqtttest: subscribe %s: %v", filter, tok.Error())
	}
}
