package ceiling

import (
	"errors"
	"fmt"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// DefaultMQTTTimeout bounds the connect and every publish of the raw MQTT
// ceiling.
const DefaultMQTTTimeout = 10 * time.Second

// RawMQTT is the MQTT ceiling: paho publishing straight to the broker, one
// message at a time, as a device dispatches one command at a time.
type RawMQTT struct {
	client mqtt.Client
}

// DialMQTT connects a raw client to the broker at url, such as
// tcp://127.0.0.1:1883.
func DialMQTT(url string) (*RawMQTT, error) {
	opts := mqtt.NewClientOptions().
		AddBroker(url).
		SetClientID(fmt.Sprintf("krabka-bench-raw-%d", time.Now().UnixNano())).
		SetCleanSession(true).
		SetAutoReconnect(false).
		SetConnectTimeout(DefaultMQTTTimeout)
	cl := mqtt.NewClient(opts)
	if tok := cl.Connect(); !tok.WaitTimeout(DefaultMQTTTimeout) {
		return nil, fmt.Errorf("connect %s: timed out", url)
	} else if err := tok.Error(); err != nil {
		return nil, fmt.Errorf("connect %s: %w", url, err)
	}
	return &RawMQTT{client: cl}, nil
}

// Publish publishes one message and waits for the broker's acknowledgement
// (PUBACK for QoS 1).
func (m *RawMQTT) Publish(topic string, qos byte, payload []byte) error {
	tok := m.client.Publish(topic, qos, false, payload)
	if !tok.WaitTimeout(DefaultMQTTTimeout) {
		return errors.New("publish: timed out")
	}
	if err := tok.Error(); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	return nil
}

// Close disconnects.
func (m *RawMQTT) Close() { m.client.Disconnect(250) }
