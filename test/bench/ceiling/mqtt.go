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

// RawPublish describes the MQTT ceiling: publishes with paho straight to the
// broker, one at a time, as a device dispatches one command at a time.
type RawPublish struct {
	// URL is the broker, such as tcp://127.0.0.1:1883.
	URL string

	// Topic receives the messages.
	Topic string

	// QoS is the quality of service of every publish (1 or 2).
	QoS byte

	// Duration is how long publishes are started.
	Duration time.Duration

	// Payload builds the payload of the i-th message; pass the size the
	// dispatcher's envelope has.
	Payload func(i int) []byte
}

// MeasureRawPublish publishes back to back for Duration and returns one
// latency per message, from the publish call until the broker acknowledged
// it (PUBACK for QoS 1).
func MeasureRawPublish(cfg RawPublish) (Summary, error) {
	if cfg.Payload == nil {
		return Summary{}, errors.New("ceiling: RawPublish needs Payload")
	}
	opts := mqtt.NewClientOptions().
		AddBroker(cfg.URL).
		SetClientID(fmt.Sprintf("krabka-bench-raw-%d", time.Now().UnixNano())).
		SetCleanSession(true).
		SetAutoReconnect(false).
		SetConnectTimeout(DefaultMQTTTimeout)
	cl := mqtt.NewClient(opts)
	if tok := cl.Connect(); !tok.WaitTimeout(DefaultMQTTTimeout) {
		return Summary{}, fmt.Errorf("connect %s: timed out", cfg.URL)
	} else if err := tok.Error(); err != nil {
		return Summary{}, fmt.Errorf("connect %s: %w", cfg.URL, err)
	}
	defer cl.Disconnect(250)

	var samples []time.Duration
	start := time.Now()
	for i := 0; time.Since(start) < cfg.Duration; i++ {
		began := time.Now()
		tok := cl.Publish(cfg.Topic, cfg.QoS, false, cfg.Payload(i))
		if !tok.WaitTimeout(DefaultMQTTTimeout) {
			return Summary{}, errors.New("publish: timed out")
		}
		if err := tok.Error(); err != nil {
			return Summary{}, fmt.Errorf("publish: %w", err)
		}
		samples = append(samples, time.Since(began))
	}
	return Summarize(samples, time.Since(start)), nil
}
