//go:build integration

package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/devices/fence"
	"github.com/krabka-io/krabka-dispatch/devices/mqtt"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/test/mqtttest"
)

// syncBuffer is a bytes.Buffer that run may write while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startDevice runs the example until the returned stop is called.
func startDevice(t *testing.T, cfg config, out *syncBuffer) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, cfg, out, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-errc:
		cancel()
		t.Fatalf("fencing-device exited: %v", err)
	case <-time.After(15 * time.Second):
		cancel()
		t.Fatal("fencing-device not ready")
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Errorf("fencing-device: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// TestFencingDeviceRefusesAnEarlierTermAcrossRestarts drives the example
// through the MQTT Device, as a dispatcher would: a successor's term is
// admitted, also after its producer id rotated to a lower one, the deposed
// leader's earlier term is refused although its token is higher, and still
// refused after the device restarts from its state file.
func TestFencingDeviceRefusesAnEarlierTermAcrossRestarts(t *testing.T) {
	sh := mqtttest.SharedBroker(t)
	prefix := mqtttest.Unique("fence-") + "/"
	cfg := config{
		broker:         sh.URL,
		device:         "valve-1",
		state:          filepath.Join(t.TempDir(), "fence.json"),
		topic:          prefix + "{device}/cmd",
		replyTopic:     prefix + "{device}/reply",
		connectTimeout: 5 * time.Second,
		keys:           testKeys,
	}
	out := &syncBuffer{}
	stop := startDevice(t, cfg, out)

	dev, err := mqtt.New(mqtt.Config{
		Brokers:      []string{sh.URL},
		Topic:        cfg.topic,
		ReplyTopic:   cfg.replyTopic,
		ReplyTimeout: 5 * time.Second,
		Verifier:     testKeys,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := dev.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}

	send := func(id string, term coordination.Term, producer int64, epoch int16) error {
		tok, err := coordination.NewFencingToken(producer, epoch)
		if err != nil {
			t.Fatal(err)
		}
		_, err = dev.DispatchUnder(ctx, dispatch.Command{
			ID: id, Role: "plant-a", Device: "valve-1", Action: "open",
			Payload: []byte(`{"percent":40}`), Deadline: time.Now().Add(time.Minute),
		}, coordination.Authority{Term: term, Token: tok})
		return err
	}
	wantRejected := func(err error, what string) {
		t.Helper()
		var re *mqtt.ReplyError
		if !dispatch.IsRejected(err) || !errors.As(err, &re) || !strings.Contains(re.Detail, "below") {
			t.Fatalf("%s: %v, want a rejected reply naming the higher term", what, err)
		}
	}

	// The successor holds term 20 with producer id 5; the deposed leader
	// held term 12 with producer id 9.
	if err := send("new-leader-1", 20, 5, 1); err != nil {
		t.Fatalf("successor's command: %v", err)
	}
	wantRejected(send("old-leader-1", 12, 9, 4), "deposed leader's command")
	// The successor's producer id rotates to a lower one within its term.
	if err := send("new-leader-2", 20, 2, 0); err != nil {
		t.Fatalf("successor's command after a rotation: %v", err)
	}

	stop()
	out2 := &syncBuffer{}
	startDevice(t, cfg, out2)
	wantRejected(send("old-leader-2", 12, 9, 4), "deposed leader's command after the restart")
	if err := send("next-leader-1", 31, 1, 0); err != nil {
		t.Fatalf("next leader's command: %v", err)
	}

	// An operator moves the role to a new cluster, whose terms start low:
	// a reset, sent as an ordinary command of the new cluster's leader and
	// signed with the device key, sets the fence's floor to its term.
	if err := send("next-cluster-1", 2, 77, 0); err == nil {
		t.Fatal("the new cluster's term 2 admitted before the reset")
	}
	tok, err := coordination.NewFencingToken(77, 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := dev.DispatchUnder(ctx, dispatch.Command{
		ID: "reset-1", Role: "plant-a", Device: "valve-1", Action: fence.ResetAction,
		Payload: []byte(`{"floor":2,"reason":"move plant-a to cluster b"}`), Deadline: time.Now().Add(time.Minute),
	}, coordination.Authority{Term: 2, Token: tok})
	if err != nil || !strings.Contains(res.Detail, "fence reset to term 2") {
		t.Fatalf("reset: %+v, %v", res, err)
	}
	if err := send("next-cluster-2", 2, 77, 0); err != nil {
		t.Fatalf("the new cluster's command after the reset: %v", err)
	}

	acted := out.String() + out2.String()
	for _, id := range []string{"new-leader-1", "new-leader-2", "next-leader-1", "next-cluster-2"} {
		if !strings.Contains(acted, "ACT id="+id+" ") {
			t.Fatalf("%s not acted on:\n%s", id, acted)
		}
	}
	for _, id := range []string{"old-leader-1", "old-leader-2", "next-cluster-1"} {
		if strings.Contains(acted, "ACT id="+id+" ") {
			t.Fatalf("%s acted on:\n%s", id, acted)
		}
	}
}
