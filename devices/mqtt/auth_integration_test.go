//go:build integration

package mqtt

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/devices/fence"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/test/mqtttest"
)

// The tests in this file run a private Mosquitto with a password file and
// an ACL, and a fencing device built on fence.Store.AdmitSigned, to show
// what a publisher without the device key can and cannot do.

const (
	aclCmdTopic   = "plant/{device}/cmd"
	aclReplyTopic = "plant/{device}/reply"
)

// aclUsers are the broker's users: the dispatcher publishes commands and
// reads replies, the device the reverse, rogue may publish commands and
// replies (a leaked credential or a too-wide ACL), nobody has no rights.
var aclUsers = []mqtttest.ACLUser{
	{Name: "dispatcher", Password: "pw-dispatcher", Topics: []string{"topic write plant/+/cmd", "topic read plant/+/reply"}},
	{Name: "device", Password: "pw-device", Topics: []string{"topic read plant/+/cmd", "topic write plant/+/reply"}},
	{Name: "rogue", Password: "pw-rogue", Topics: []string{"topic write plant/+/cmd", "topic write plant/+/reply"}},
	{Name: "nobody", Password: "pw-nobody"},
}

func login(user string) func(*paho.ClientOptions) {
	return func(o *paho.ClientOptions) {
		for _, u := range aclUsers {
			if u.Name == user {
				o.SetUsername(u.Name).SetPassword(u.Password)
			}
		}
	}
}

func keyOf(b byte) []byte { return bytes.Repeat([]byte{b}, fence.MinKeyBytes) }

func verifierOf(t *testing.T, keys ...fence.Key) *fence.Verifier {
	t.Helper()
	v, err := fence.NewVerifier(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// deviceEvent is what the fencing device did with one message.
type deviceEvent struct {
	id      string
	outcome string // acted, forged, replayed, stale, expired
	raw     []byte
}

// fencedDevice is device firmware in Go: AdmitSigned, then act and reply
// signed, or refuse.
type fencedDevice struct {
	store  *fence.Store
	keys   atomic.Pointer[fence.Verifier]
	events chan deviceEvent
}

func startFencedDevice(t *testing.T, url string, keys *fence.Verifier) *fencedDevice {
	t.Helper()
	store, err := fence.Open(filepath.Join(t.TempDir(), "fence.json"))
	if err != nil {
		t.Fatal(err)
	}
	d := &fencedDevice{store: store, events: make(chan deviceEvent, 64)}
	d.keys.Store(keys)
	forger := verifierOf(t, fence.Key{ID: keys.KeyID(), Secret: keyOf(0x66)})
	c := mqtttest.Connect(t, url, login("device"))
	mqtttest.Subscribe(t, c, "plant/+/cmd", func(c paho.Client, m paho.Message) {
		env, err := DecodeEnvelope(m.Payload())
		if err != nil {
			return
		}
		replyTopic := m.Topic()[:len(m.Topic())-len("cmd")] + "reply"
		reply := func(r Reply, with *fence.Verifier) {
			r.ID = env.ID
			if with != nil {
				r = SignReply(with, env.Device, r)
			}
			data, _ := EncodeReply(r)
			c.Publish(replyTopic, 1, false, data)
		}
		ev := deviceEvent{id: env.ID, raw: append([]byte(nil), m.Payload()...)}
		keys := d.keys.Load()
		_, err = d.store.AdmitSigned(keys, env.Signed(), env.KeyID, env.MAC, time.Now())
		switch {
		case errors.Is(err, fence.ErrUnauthenticated):
			ev.outcome = "forged" // no reply: a forger learns nothing
		case errors.Is(err, fence.ErrReplayed):
			ev.outcome = "replayed"
		case errors.Is(err, fence.ErrStaleTerm):
			ev.outcome = "stale"
			reply(Reply{Status: StatusRejected, Detail: err.Error()}, keys)
		case err != nil:
			ev.outcome = "error: " + err.Error()
		case env.Action == "forge-only":
			ev.outcome = "acted"
			reply(Reply{Status: StatusOK, Detail: "forged"}, forger)
			reply(Reply{Status: StatusOK, Detail: "unsigned"}, nil)
		case env.Action == "forge-first":
			ev.outcome = "acted"
			reply(Reply{Status: StatusOK, Detail: "forged"}, forger)
			reply(Reply{Status: StatusOK, Detail: "done " + env.Action}, keys)
		default:
			ev.outcome = "acted"
			reply(Reply{Status: StatusOK, Detail: "done " + env.Action}, keys)
		}
		d.events <- ev
	})
	return d
}

func (d *fencedDevice) next(t *testing.T) deviceEvent {
	t.Helper()
	select {
	case ev := <-d.events:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("the device saw no message within 10s")
		return deviceEvent{}
	}
}

// dispatcherOn starts a Device logged in as the dispatcher with keys.
func dispatcherOn(t *testing.T, url string, keys *fence.Verifier) *Device {
	d := newTestDevice(t, url, func(c *Config) {
		c.Username, c.Password = "dispatcher", "pw-dispatcher"
		c.Topic, c.ReplyTopic = aclCmdTopic, aclReplyTopic
		c.ReplyTimeout = time.Second
		c.Verifier = keys
	})
	waitConnected(t, d)
	return d
}

func authority(t *testing.T, term int64) coordination.Authority {
	return coordination.Authority{Term: coordination.Term(term), Token: mustToken(t, 1001, 3)}
}

// forgedEnvelope is a well-formed envelope signed with a key that is not
// the device's.
func forgedEnvelope(t *testing.T, id string, term int64) []byte {
	env := Envelope{
		ID: id, Role: "plant-a", Device: "valve-1", Action: "open",
		Term: coordination.Term(term), Token: mustToken(t, 1001, 3), Deadline: time.Now().Add(time.Minute),
	}
	forger := verifierOf(t, fence.Key{ID: "k1", Secret: keyOf(0x66)})
	env.KeyID, env.MAC = forger.Sign(env.Signed().AppendCanonical(nil))
	data, err := EncodeEnvelope(env)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func publish(t *testing.T, c paho.Client, topic string, data []byte) {
	t.Helper()
	tok := c.Publish(topic, 1, false, data)
	if !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("publish to %s: %v", topic, tok.Error())
	}
}

func TestMosquittoACLKeepsPublishersWithoutRightsOffTheDevice(t *testing.T) {
	sh := mqtttest.SharedBroker(t)
	m := mqtttest.StartMosquittoACL(t, sh.Bin, aclUsers)
	keys := verifierOf(t, fence.Key{ID: "k1", Secret: keyOf(0x11)})
	dev := startFencedDevice(t, m.URL(), keys)
	d := dispatcherOn(t, m.URL(), keys)

	nobody := mqtttest.Connect(t, m.URL(), login("nobody"))
	// Mosquitto acknowledges the publish and drops it: MQTT 3.1.1 cannot
	// say no. The broker handles the publish before the dispatcher's, so
	// had it been routed the device would see it first.
	publish(t, nobody, "plant/valve-1/cmd", forgedEnvelope(t, "from-nobody", math.MaxInt64))
	// Mosquitto grants the subscription but delivers nothing the ACL does
	// not let the user read.
	var overheard atomic.Int64
	mqtttest.Subscribe(t, nobody, "plant/+/cmd", func(paho.Client, paho.Message) { overheard.Add(1) })

	cmd := testCommand("c1")
	if res, err := d.DispatchUnder(context.Background(), cmd, authority(t, 5)); err != nil || res.Detail != "done open" {
		t.Fatalf("dispatch = %+v, %v", res, err)
	}
	if ev := dev.next(t); ev.id != "c1" || ev.outcome != "acted" {
		t.Fatalf("the device's first message: %+v, want c1 acted (the publish without rights must not arrive)", ev)
	}
	if _, err := d.DispatchUnder(context.Background(), testCommand("c2"), authority(t, 5)); err != nil {
		t.Fatal(err)
	}
	dev.next(t)
	if n := overheard.Load(); n != 0 {
		t.Fatalf("a user without rights read %d commands", n)
	}
}

func TestMosquittoForgedAndReplayedEnvelopesRefused(t *testing.T) {
	sh := mqtttest.SharedBroker(t)
	m := mqtttest.StartMosquittoACL(t, sh.Bin, aclUsers)
	keys := verifierOf(t, fence.Key{ID: "k1", Secret: keyOf(0x11)})
	dev := startFencedDevice(t, m.URL(), keys)
	d := dispatcherOn(t, m.URL(), keys)
	rogue := mqtttest.Connect(t, m.URL(), login("rogue"))

	if _, err := d.DispatchUnder(context.Background(), testCommand("c1"), authority(t, 5)); err != nil {
		t.Fatal(err)
	}
	first := dev.next(t)
	if first.outcome != "acted" {
		t.Fatalf("c1: %+v", first)
	}
	before, err := os.ReadFile(dev.store.Path())
	if err != nil {
		t.Fatal(err)
	}

	for i, term := range []int64{6, math.MaxInt64} {
		publish(t, rogue, "plant/valve-1/cmd", forgedEnvelope(t, "forged-"+string(rune('a'+i)), term))
		if ev := dev.next(t); ev.outcome != "forged" {
			t.Fatalf("forged term %d: %+v", term, ev)
		}
	}
	after, err := os.ReadFile(dev.store.Path())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatalf("forged envelopes changed the fence's state file:\n%s\n---\n%s", before, after)
	}
	// The real leader is still admitted, and its successor.
	if res, err := d.DispatchUnder(context.Background(), testCommand("c2"), authority(t, 5)); err != nil || res.Detail != "done open" {
		t.Fatalf("real leader after forgeries: %+v, %v", res, err)
	}
	dev.next(t)
	if _, err := d.DispatchUnder(context.Background(), testCommand("c3"), authority(t, 7)); err != nil {
		t.Fatalf("successor after forgeries: %v", err)
	}
	dev.next(t)

	// A replay of c1's exact bytes is refused, and c1 is not acted again.
	publish(t, rogue, "plant/valve-1/cmd", first.raw)
	if ev := dev.next(t); ev.id != "c1" || ev.outcome != "stale" && ev.outcome != "replayed" {
		t.Fatalf("replayed c1: %+v, want refused", ev)
	}
	// A replay within the term is refused as a replay.
	if _, err := d.DispatchUnder(context.Background(), testCommand("c4"), authority(t, 7)); err != nil {
		t.Fatal(err)
	}
	c4 := dev.next(t)
	publish(t, rogue, "plant/valve-1/cmd", c4.raw)
	if ev := dev.next(t); ev.id != "c4" || ev.outcome != "replayed" {
		t.Fatalf("replayed c4: %+v, want replayed", ev)
	}
	// The deposed leader is still refused by term.
	_, err = d.DispatchUnder(context.Background(), testCommand("c5"), authority(t, 5))
	if !dispatch.IsRejected(err) {
		t.Fatalf("deposed leader: %v, want rejected", err)
	}
}

func TestMosquittoForgedReplyDoesNotSettleTheCommand(t *testing.T) {
	sh := mqtttest.SharedBroker(t)
	m := mqtttest.StartMosquittoACL(t, sh.Bin, aclUsers)
	keys := verifierOf(t, fence.Key{ID: "k1", Secret: keyOf(0x11)})
	startFencedDevice(t, m.URL(), keys)
	d := dispatcherOn(t, m.URL(), keys)

	cmd := testCommand("f1")
	cmd.Action = "forge-only"
	_, err := d.DispatchUnder(context.Background(), cmd, authority(t, 5))
	var te *TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, ErrReplyTimeout) || dispatch.IsRetryable(err) {
		t.Fatalf("only forged replies: %v, want an in-doubt reply timeout", err)
	}
	if n := d.RefusedReplies(); n != 2 {
		t.Fatalf("RefusedReplies = %d, want 2 (one under a wrong key, one unsigned)", n)
	}

	cmd = testCommand("f2")
	cmd.Action = "forge-first"
	res, err := d.DispatchUnder(context.Background(), cmd, authority(t, 5))
	if err != nil || res.Detail != "done forge-first" {
		t.Fatalf("forged then real reply: %+v, %v, want the real reply", res, err)
	}
	if n := d.RefusedReplies(); n != 3 {
		t.Fatalf("RefusedReplies = %d, want 3", n)
	}
}

func TestMosquittoKeyRotation(t *testing.T) {
	sh := mqtttest.SharedBroker(t)
	m := mqtttest.StartMosquittoACL(t, sh.Bin, aclUsers)
	old := fence.Key{ID: "2026-05", Secret: keyOf(0x11)}
	next := fence.Key{ID: "2026-11", Secret: keyOf(0x22)}

	// 1. The device learns the new key but still signs with the old one.
	dev := startFencedDevice(t, m.URL(), verifierOf(t, old, next))
	oldDispatcher := dispatcherOn(t, m.URL(), verifierOf(t, old))
	if _, err := oldDispatcher.DispatchUnder(context.Background(), testCommand("r1"), authority(t, 5)); err != nil {
		t.Fatalf("old key, device holding both: %v", err)
	}
	dev.next(t)
	// 2. The dispatchers sign with the new key and verify both.
	rotating := dispatcherOn(t, m.URL(), verifierOf(t, next, old))
	if _, err := rotating.DispatchUnder(context.Background(), testCommand("r2"), authority(t, 5)); err != nil {
		t.Fatalf("new key, device holding both: %v", err)
	}
	dev.next(t)
	// 3. The device drops the old key: it signs with the new one, and a
	// command under the old key is refused.
	dev.keys.Store(verifierOf(t, next))
	if _, err := rotating.DispatchUnder(context.Background(), testCommand("r3"), authority(t, 5)); err != nil {
		t.Fatalf("new key after rotation: %v", err)
	}
	dev.next(t)
	_, err := oldDispatcher.DispatchUnder(context.Background(), testCommand("r4"), authority(t, 5))
	if !errors.Is(err, ErrReplyTimeout) {
		t.Fatalf("old key after rotation: %v, want no reply", err)
	}
	if ev := dev.next(t); ev.id != "r4" || ev.outcome != "forged" {
		t.Fatalf("old key after rotation: device %+v, want refused as not authenticated", ev)
	}
}
