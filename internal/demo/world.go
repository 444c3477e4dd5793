package demo

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/devices/fence"
	"github.com/krabka-io/krabka-dispatch/devices/mqtt"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/internal/modbussim"
)

// world is everything the members run against: the Kafka cluster, the MQTT
// broker with the valve's firmware behind it, and the Modbus unit.
type world struct {
	cluster *kfake.Cluster
	brokers []string

	mqtt    *mochi.Server
	mqttURL string
	valve   *firmware
	// valveKeys holds valve-1's device key, made at start: the members
	// sign with it and the firmware verifies.
	valveKeys *fence.Verifier

	sim    *modbussim.Sim
	modbus *modbussim.TCPServer
}

// Topic settings of the demo's cluster.
const (
	partitions = 16
	// cmdTopic is where the MQTT device publishes; the firmware listens.
	cmdTopic = "devices/{device}/cmd"
)

// startWorld starts the cluster, the broker and the unit. stateDir holds the
// firmware's fence file.
func startWorld(ctx context.Context, tl *timeline, stateDir string) (_ *world, err error) {
	w := &world{}
	defer func() {
		if err != nil {
			w.close()
		}
	}()

	w.cluster, err = kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	w.brokers = w.cluster.ListenAddrs()
	if err := createTopics(ctx, w.brokers); err != nil {
		return nil, err
	}
	tl.print("kafka", "3 brokers (kfake, in process) at %s; topics %s, %s, %s",
		strings.Join(w.brokers, ","), coordination.StateTopic, dispatch.DefaultLogTopic, dispatch.DefaultRequestsTopic)

	store, err := fence.Open(stateDir + "/valve-fence.json")
	if err != nil {
		return nil, err
	}
	secret := make([]byte, fence.MinKeyBytes)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	if w.valveKeys, err = fence.NewVerifier(fence.Key{ID: "demo", Secret: secret}); err != nil {
		return nil, err
	}
	w.valve = &firmware{store: store, keys: w.valveKeys, tl: tl}
	w.mqtt = mochi.New(&mochi.Options{InlineClient: true, Logger: slog.New(slog.DiscardHandler)})
	if err := w.mqtt.AddHook(new(auth.AllowHook), nil); err != nil {
		return nil, err
	}
	ln := listeners.NewTCP(listeners.Config{ID: "demo", Address: "127.0.0.1:0"})
	if err := w.mqtt.AddListener(ln); err != nil {
		return nil, fmt.Errorf("mqtt: %w", err)
	}
	if err := w.mqtt.Serve(); err != nil {
		return nil, fmt.Errorf("mqtt: %w", err)
	}
	w.mqttURL = "tcp://" + ln.Address()
	if err := w.mqtt.Subscribe("devices/+/cmd", 1, func(_ *mochi.Client, _ packets.Subscription, pk packets.Packet) {
		w.valve.receive(pk.Payload)
	}); err != nil {
		return nil, err
	}
	tl.print("mqtt", "broker (mochi, in process) at %s; valve-1's firmware listens on devices/valve-1/cmd, verifies each command's MAC under its device key (made at start, id %q) and fences by term", w.mqttURL, w.valveKeys.KeyID())

	w.sim = modbussim.New()
	w.modbus, err = w.sim.ListenTCP("")
	if err != nil {
		return nil, fmt.Errorf("modbus: %w", err)
	}
	w.sim.SetFence(1, 100)
	tl.print("modbus", "unit 1 (simulator) at %s; pump-1's fence registers are 100-108 (term, then token), and it refuses an earlier term", w.modbus.Addr())
	return w, nil
}

func (w *world) close() {
	if w.modbus != nil {
		_ = w.modbus.Close()
	}
	if w.mqtt != nil {
		_ = w.mqtt.Close()
	}
	if w.cluster != nil {
		w.cluster.Close()
	}
}

// createTopics creates the three topics on the cluster.
func createTopics(ctx context.Context, brokers []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	compact, del, forever := "compact", "delete", "-1"
	for _, t := range []struct {
		name    string
		configs map[string]*string
	}{
		{coordination.StateTopic, map[string]*string{"cleanup.policy": &compact}},
		{dispatch.DefaultLogTopic, map[string]*string{"cleanup.policy": &del, "retention.ms": &forever}},
		{dispatch.DefaultRequestsTopic, map[string]*string{"cleanup.policy": &del}},
	} {
		resp, err := adm.CreateTopic(ctx, partitions, 3, t.configs, t.name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			return fmt.Errorf("kafka: create topic %s: %w", t.name, err)
		}
	}
	return nil
}

// firmware is the valve's side of MQTT: it admits a command only when its
// MAC verifies under the device key and its term is at least the highest
// it has seen, as devices/fence prescribes.
type firmware struct {
	store   *fence.Store
	keys    *fence.Verifier
	tl      *timeline
	acted   atomic.Int64
	refused atomic.Int64 // authentic, but stale (or expired, or replayed)
	forged  atomic.Int64 // not authenticated
}

func (f *firmware) receive(payload []byte) {
	env, err := mqtt.DecodeEnvelope(payload)
	if err != nil {
		f.tl.print("valve-1", "ignored a message that is not a command envelope: %v", err)
		return
	}
	if _, err := f.store.AdmitSigned(f.keys, env.Signed(), env.KeyID, env.MAC, time.Now()); err != nil {
		if errors.Is(err, fence.ErrUnauthenticated) {
			f.forged.Add(1)
		} else {
			f.refused.Add(1)
		}
		f.tl.print(env.Device, "REFUSED %s %q under %s: %v", env.ID, env.Action, env.Authority(), err)
		return
	}
	f.acted.Add(1)
	f.tl.print(env.Device, "acted on %s %q (%s admitted)", env.ID, env.Action, env.Authority())
}
