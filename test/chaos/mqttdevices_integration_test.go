//go:build integration

package chaos

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/devices/fence"
	"github.com/krabka-io/krabka-dispatch/devices/mqtt"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// TestMQTTDevicesRecordAndFence drives the run's devices through Mosquitto
// with the dispatcher's own MQTT device, as a member does: the fencing
// device obeys term 5, refuses term 4 after it, and refuses a replay of a
// command it admitted in term 5; the non-fencing device obeys term 4; every
// call is recorded with its member, role, term, token and verdict.
func TestMQTTDevicesRecordAndFence(t *testing.T) {
	broker := os.Getenv("KRABKA_MQTT_URL")
	if broker == "" {
		t.Fatal("KRABKA_MQTT_URL must be set: source .run/mosquitto/env")
	}
	const key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	dir := t.TempDir()
	prefix := fmt.Sprintf("kd/test-%d", time.Now().UnixNano())
	devs, err := StartMQTTDevices(MQTTDevicesConfig{Broker: broker, Prefix: prefix, Key: key, KeyID: "k1", Dir: dir, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer devs.Close()
	secret, err := fence.ParseKey(key)
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := fence.NewVerifier(fence.Key{ID: "k1", Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := mqtt.New(mqtt.Config{Brokers: []string{broker}, QoS: 1, Verifier: verifier,
		Topic: prefix + "/m1/{role}/{device}/cmd", ReplyTopic: prefix + "/m1/{role}/{device}/reply", ReplyTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := dev.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	tok, err := coordination.NewFencingToken(11, 2)
	if err != nil {
		t.Fatal(err)
	}
	call := func(id, device string, term coordination.Term) error {
		cmd := dispatch.Command{ID: id, Role: "r", Device: device, Action: "set", Payload: []byte(`"x"`),
			SubmittedAt: time.Now(), Deadline: time.Now().Add(time.Minute)}
		_, err := dev.DispatchUnder(ctx, cmd, coordination.Authority{Term: term, Token: tok})
		return err
	}
	if err := call("c1", FencedDevice, 5); err != nil {
		t.Fatalf("term 5 at the fencing device: %v", err)
	}
	if err := call("c2", FencedDevice, 4); !dispatch.IsRejected(err) {
		t.Fatalf("term 4 after term 5 at the fencing device: %v, want a rejection", err)
	}
	if err := call("c1", FencedDevice, 5); !dispatch.IsRejected(err) {
		t.Fatalf("a replay of c1 in term 5: %v, want a rejection", err)
	}
	if err := call("c3", PlainDevice, 4); err != nil {
		t.Fatalf("term 4 at the non-fencing device: %v", err)
	}
	fenced, err := ReadCalls(dir, FencedDevice)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := ReadCalls(dir, PlainDevice)
	if err != nil {
		t.Fatal(err)
	}
	want := []Call{
		{Device: FencedDevice, Role: "r", ID: "c1", Term: 5, Token: tok.String(), Member: "m1", Verdict: VerdictObeyed},
		{Device: FencedDevice, Role: "r", ID: "c2", Term: 4, Token: tok.String(), Member: "m1", Verdict: VerdictRefused},
		{Device: FencedDevice, Role: "r", ID: "c1", Term: 5, Token: tok.String(), Member: "m1", Verdict: VerdictRefused},
		{Device: PlainDevice, Role: "r", ID: "c3", Term: 4, Token: tok.String(), Member: "m1", Verdict: VerdictObeyed},
	}
	got := append(fenced, plain...)
	if len(got) != len(want) {
		t.Fatalf("recorded %d calls, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i].At == 0 {
			t.Errorf("call %d has no arrival time", i)
		}
		got[i].At = 0
		if got[i] != want[i] {
			t.Errorf("call %d recorded as %+v, want %+v", i, got[i], want[i])
		}
	}
}
