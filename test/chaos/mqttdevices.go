package chaos

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/krabka-io/krabka-dispatch/devices/fence"
	"github.com/krabka-io/krabka-dispatch/devices/mqtt"
)

// MQTTDevices is the hardware of a run of the dispatcher binary: a client
// of Mosquitto, on the host, that plays every device of every role and
// member. The members publish their commands, signed with the run's device
// key, to <prefix>/<member>/<role>/<device>/cmd, as the topic template of
// their configuration files says, and wait for the reply on .../reply.
//
// The fencing device of each role admits a command with
// fence.Store.AdmitSigned, as firmware does: it verifies the MAC, refuses a
// command past its deadline, a command ID it already admitted in the
// highest term, and a term below the highest; the non-fencing device only
// verifies the MAC. Every command that arrives is recorded, with its
// verdict, to <dir>/<device>.jsonl, in arrival order.
//
// A device answers after a delay that Slow draws, and a delay beyond the
// members' reply timeout leaves the command in doubt: a slow device.
type MQTTDevices struct {
	client   paho.Client
	prefix   string
	verifier *fence.Verifier
	slow     func() time.Duration

	mu      sync.Mutex
	fences  map[string]*fence.Store // by role
	dir     string
	files   map[string]*os.File
	closed  bool
	counts  map[string]int
	replies sync.WaitGroup
	quit    chan struct{}
}

// MQTTDevicesConfig configures StartMQTTDevices.
type MQTTDevicesConfig struct {
	// Broker is Mosquitto's URL on the host, tcp://127.0.0.1:port.
	Broker string
	// Prefix is the run's topic prefix.
	Prefix string
	// Key is the device key, in the text form fence.ParseKey reads, under
	// KeyID.
	Key, KeyID string
	// Dir receives the record files and the fences' state.
	Dir string
	// Seed seeds the delays.
	Seed uint64
	// SlowShare is the share of calls answered after a delay of up to 2 s,
	// and StuckShare the share answered after StuckDelay (beyond the
	// members' reply timeout); the rest are answered at once.
	SlowShare, StuckShare float64
	StuckDelay            time.Duration
}

// StartMQTTDevices connects to the broker and subscribes to every command
// topic of the run.
func StartMQTTDevices(cfg MQTTDevicesConfig) (*MQTTDevices, error) {
	secret, err := fence.ParseKey(cfg.Key)
	if err != nil {
		return nil, err
	}
	verifier, err := fence.NewVerifier(fence.Key{ID: cfg.KeyID, Secret: secret})
	if err != nil {
		return nil, err
	}
	d := &MQTTDevices{prefix: cfg.Prefix, verifier: verifier, fences: map[string]*fence.Store{}, dir: cfg.Dir,
		files: map[string]*os.File{}, counts: map[string]int{}, quit: make(chan struct{})}
	for _, name := range []string{FencedDevice, PlainDevice} {
		f, err := os.OpenFile(filepath.Join(cfg.Dir, name+".jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			d.closeFiles()
			return nil, err
		}
		d.files[name] = f
	}
	var rmu sync.Mutex
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x736c6f77))
	d.slow = func() time.Duration {
		rmu.Lock()
		defer rmu.Unlock()
		switch p := rng.Float64(); {
		case p < cfg.StuckShare:
			return cfg.StuckDelay
		case p < cfg.StuckShare+cfg.SlowShare:
			return time.Duration(rng.Int64N(int64(2 * time.Second)))
		}
		return 0
	}
	topic := cfg.Prefix + "/+/+/+/cmd"
	subscribed := make(chan error, 1)
	opts := paho.NewClientOptions().
		AddBroker(cfg.Broker).
		SetClientID(strings.ReplaceAll(cfg.Prefix, "/", "-") + "-devices").
		SetCleanSession(true).
		SetAutoReconnect(true).
		SetMaxReconnectInterval(time.Second).
		SetConnectTimeout(5 * time.Second).
		SetOnConnectHandler(func(c paho.Client) {
			tok := c.Subscribe(topic, 1, d.receive)
			go func() {
				tok.Wait()
				select {
				case subscribed <- tok.Error():
				default:
				}
			}()
		})
	d.client = paho.NewClient(opts)
	tok := d.client.Connect()
	if !tok.WaitTimeout(10 * time.Second) {
		d.closeFiles()
		return nil, fmt.Errorf("devices: connect to %s: no answer", cfg.Broker)
	}
	if err := tok.Error(); err != nil {
		d.closeFiles()
		return nil, fmt.Errorf("devices: connect to %s: %w", cfg.Broker, err)
	}
	select {
	case err := <-subscribed:
		if err != nil {
			d.client.Disconnect(0)
			d.closeFiles()
			return nil, fmt.Errorf("devices: subscribe %s: %w", topic, err)
		}
	case <-time.After(10 * time.Second):
		d.client.Disconnect(0)
		d.closeFiles()
		return nil, errors.New("devices: the subscription was not acknowledged")
	}
	return d, nil
}

// receive handles one command message: it admits or refuses it, records
// it, and answers after the device's delay.
func (d *MQTTDevices) receive(_ paho.Client, m paho.Message) {
	now := time.Now()
	parts := strings.Split(strings.TrimPrefix(m.Topic(), d.prefix+"/"), "/")
	if len(parts) != 4 {
		return
	}
	member, role, device := parts[0], parts[1], parts[2]
	if device != FencedDevice && device != PlainDevice {
		return
	}
	call := Call{Device: device, Role: role, Member: member, At: now.UnixNano(), Verdict: VerdictObeyed}
	env, err := mqtt.DecodeEnvelope(m.Payload())
	if err == nil {
		call.ID, call.Term, call.Token = env.ID, int64(env.Term), env.Token.String()
		if device == FencedDevice {
			d.mu.Lock()
			store, ok := d.fences[role]
			if !ok {
				store, err = fence.Open(filepath.Join(d.dir, "fence-"+role+".state"))
				if err == nil {
					d.fences[role] = store
				}
			}
			d.mu.Unlock()
			if err == nil {
				_, err = store.AdmitSigned(d.verifier, env.Signed(), env.KeyID, env.MAC, now)
			}
		} else {
			err = d.verifier.Verify(env.KeyID, env.Signed().AppendCanonical(nil), env.MAC)
		}
	}
	reply := mqtt.Reply{ID: call.ID, Status: mqtt.StatusOK, Detail: "done"}
	if err != nil {
		call.Verdict = VerdictRefused
		reply.Status, reply.Detail = mqtt.StatusRejected, err.Error()
	}
	line, _ := json.Marshal(call)
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	_, _ = d.files[device].Write(append(line, '\n'))
	delay := d.slow()
	switch {
	case delay > 2*time.Second:
		d.counts[FaultStuckDevice]++
	case delay > 0:
		d.counts[FaultSlowDevice]++
	}
	d.replies.Add(1)
	d.mu.Unlock()
	if call.ID == "" {
		d.replies.Done()
		return
	}
	replyTopic := strings.TrimSuffix(m.Topic(), "/cmd") + "/reply"
	go func() {
		defer d.replies.Done()
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-d.quit:
				return
			}
		}
		data, err := mqtt.EncodeReply(mqtt.SignReply(d.verifier, device, reply))
		if err != nil {
			return
		}
		d.client.Publish(replyTopic, 1, false, data).WaitTimeout(5 * time.Second)
	}()
}

// Counts returns how many calls each kind of slowness hit.
func (d *MQTTDevices) Counts() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]int{}
	for k, v := range d.counts {
		out[k] = v
	}
	return out
}

// Close disconnects, drops the replies still waiting, and closes the
// record files.
func (d *MQTTDevices) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	close(d.quit)
	d.mu.Unlock()
	d.replies.Wait()
	d.client.Disconnect(250)
	return d.closeFiles()
}

func (d *MQTTDevices) closeFiles() error {
	var err error
	for _, f := range d.files {
		err = errors.Join(err, f.Close())
	}
	return err
}
