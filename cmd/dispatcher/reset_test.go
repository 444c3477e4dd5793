package main

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/devices/fence"
	"github.com/krabka-io/krabka-dispatch/devices/mqtt"
	"github.com/krabka-io/krabka-dispatch/test/mqtttest"
)

// TestSubmitSendsAFenceReset sends a fence reset with `dispatcher submit`,
// as docs/OPERATIONS.md tells an operator to: it goes through the log like
// any command, the MQTT device signs it with the device key, and a fence
// store holding a far higher term applies it.
func TestSubmitSendsAFenceReset(t *testing.T) {
	_, brokers := newFakeCluster(t)
	broker := mqtttest.StartInProcess(t, "127.0.0.1:0")
	ctx := context.Background()
	if code, out, errOut := runCLI(t, ctx, "topics", "--brokers", brokers); code != 0 {
		t.Fatalf("topics: %d\n%s%s", code, out, errOut)
	}
	// The firmware holds the key writeConfig gives the member, and a term
	// from an old cluster.
	keys, err := fence.NewVerifier(fence.Key{ID: "k1", Secret: bytes.Repeat([]byte{0x5a}, fence.MinKeyBytes)})
	if err != nil {
		t.Fatal(err)
	}
	store, err := fence.Open(filepath.Join(t.TempDir(), "fence.json"))
	if err != nil {
		t.Fatal(err)
	}
	old, err := mqtt.DecodeEnvelope([]byte(`{"v":2,"id":"x","device":"valve-1","term":900000,"token":"1:1","producer_id":1,"producer_epoch":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Admit("valve-1", old.Authority()); err != nil {
		t.Fatal(err)
	}
	admitted := make(chan fence.Admission, 4)
	refused := make(chan error, 4)
	broker.Subscribe(t, "devices/+/cmd", func(_ string, payload []byte) {
		env, err := mqtt.DecodeEnvelope(payload)
		if err != nil {
			refused <- err
			return
		}
		adm, err := store.AdmitSigned(keys, env.Signed(), env.KeyID, env.MAC, time.Now())
		if err != nil {
			refused <- err
			return
		}
		admitted <- adm
	})

	cfg := writeConfig(t, brokers, "node-1", broker.URL(), "")
	addr, logs, _ := startRun(t, cfg)
	waitHTTP(t, "http://"+addr+"/leaderz", http.StatusOK)

	code, out, errOut := runCLI(t, ctx, "submit", "--brokers", brokers, "--role", "controller", "--device", "valve-1",
		"--action", fence.ResetAction, "--payload", `{"floor":1,"reason":"move to cluster b"}`, "--id", "reset-1", "--wait", "--timeout", "20s")
	if code != 0 || !strings.Contains(out, "succeeded") {
		t.Fatalf("submit the reset: exit %d\n%s\n%s\n%s", code, out, errOut, logs)
	}
	select {
	case adm := <-admitted:
		if !adm.Reset || adm.Floor != 1 || adm.Reason != "move to cluster b" {
			t.Fatalf("admission %+v, want the reset", adm)
		}
	case err := <-refused:
		t.Fatalf("the firmware refused the reset: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the reset never reached the firmware")
	}
	if h, _ := store.Highest("valve-1"); h.Term != 1 {
		t.Fatalf("highest term %s after the reset, want 1", h.Term)
	}
	// The reset is on record.
	code, out, _ = runCLI(t, ctx, "log", "--brokers", brokers, "--role", "controller")
	if code != 0 || !strings.Contains(out, "reset-1") {
		t.Fatalf("log: exit %d\n%s", code, out)
	}
}
