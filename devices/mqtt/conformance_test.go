package mqtt

import (
	"net"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/dispatch/dispatchtest"
	"github.com/krabka-io/krabka-dispatch/test/mqtttest"
)

// conformanceTarget builds the dispatchtest target on the broker at url: a
// Device with a reply topic, and a responder that records the token of
// every command and replies ok unless stalled.
func conformanceTarget(t *testing.T, url string) dispatchtest.Target {
	prefix := mqtttest.Unique("conformance-") + "/"
	var (
		mu        sync.Mutex
		delivered = make(map[string]coordination.FencingToken)
		stalled   bool
	)
	responder := mqtttest.Connect(t, url, nil)
	mqtttest.Subscribe(t, responder, prefix+"+/cmd", func(c paho.Client, m paho.Message) {
		env, err := DecodeEnvelope(m.Payload())
		if err != nil {
			return
		}
		mu.Lock()
		delivered[env.ID] = env.Token
		quiet := stalled
		mu.Unlock()
		if quiet {
			return
		}
		data, err := EncodeReply(SignReply(testKeys, env.Device, Reply{ID: env.ID, Status: StatusOK, Detail: "done"}))
		if err == nil {
			c.Publish(prefix+env.Device+"/reply", 1, false, data)
		}
	})
	dev := newTestDevice(t, url, func(c *Config) {
		c.Topic, c.ReplyTopic = prefix+"{device}/cmd", prefix+"{device}/reply"
		c.ReplyTimeout = time.Minute
	})
	waitConnected(t, dev)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "tcp://" + l.Addr().String()
	l.Close() // nothing listens there: connections are refused
	unreachable := newTestDevice(t, refused, func(c *Config) {
		c.Topic = prefix + "{device}/cmd"
		c.ConnectTimeout = 200 * time.Millisecond
	})

	command := func(id string) dispatch.Command {
		return dispatch.Command{ID: id, Role: "plant-a", Device: "valve-1", Action: "open", Payload: []byte(`{"percent":40}`)}
	}
	return dispatchtest.Target{
		Device:  dev,
		Command: command,
		Delivered: func(id string) (coordination.FencingToken, bool) {
			mu.Lock()
			defer mu.Unlock()
			tok, ok := delivered[id]
			return tok, ok
		},
		Stall: func() func() {
			mu.Lock()
			stalled = true
			mu.Unlock()
			return func() {
				mu.Lock()
				stalled = false
				mu.Unlock()
			}
		},
		Unreachable: unreachable,
		Invalid: func(id string) dispatch.Command {
			cmd := command(id)
			cmd.Device = "valve/1" // cannot fill {device}: rejected unpublished
			return cmd
		},
	}
}

func TestConformanceInProcess(t *testing.T) {
	b := mqtttest.StartInProcess(t, "127.0.0.1:0")
	dispatchtest.Run(t, conformanceTarget(t, b.URL()))
}
