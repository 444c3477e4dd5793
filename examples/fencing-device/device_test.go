package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/devices/fence"
	"github.com/krabka-io/krabka-dispatch/devices/mqtt"
)

// testKeys is the device key of the tests; the key is valid, so
// NewVerifier cannot fail.
var testKeys, _ = fence.NewVerifier(fence.Key{ID: "k1", Secret: bytes.Repeat([]byte{0x42}, fence.MinKeyBytes)})

func envelope(t *testing.T, id string, term coordination.Term, producer int64, epoch int16, deadline time.Time) []byte {
	return signedEnvelope(t, testKeys, id, "open", nil, term, producer, epoch, deadline)
}

func signedEnvelope(t *testing.T, keys *fence.Verifier, id, action string, payload []byte, term coordination.Term, producer int64, epoch int16, deadline time.Time) []byte {
	t.Helper()
	tok, err := coordination.NewFencingToken(producer, epoch)
	if err != nil {
		t.Fatal(err)
	}
	env := mqtt.Envelope{ID: id, Device: "valve-1", Action: action, Payload: payload, Term: term, Token: tok, Deadline: deadline}
	env.KeyID, env.MAC = keys.Sign(env.Signed().AppendCanonical(nil))
	b, err := mqtt.EncodeEnvelope(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestHandleFencesDedupesAndChecksDeadlines(t *testing.T) {
	store, err := fence.Open(filepath.Join(t.TempDir(), "fence.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := config{device: "valve-1", keys: testKeys}
	recent := &recentIDs{limit: 10, reply: make(map[string]mqtt.Reply)}
	var out bytes.Buffer
	later := time.Now().Add(time.Hour)
	forger, err := fence.NewVerifier(fence.Key{ID: "k1", Secret: bytes.Repeat([]byte{0x66}, fence.MinKeyBytes)})
	if err != nil {
		t.Fatal(err)
	}

	steps := []struct {
		payload []byte
		status  string
		answer  bool
	}{
		{envelope(t, "a", 40, 5, 1, later), mqtt.StatusOK, true},
		{envelope(t, "b", 39, 9, 0, later), mqtt.StatusRejected, true},                        // earlier term, higher token
		{envelope(t, "c", 40, 3, 0, later), mqtt.StatusOK, true},                              // same term, rotated to a lower id
		{envelope(t, "a", 40, 5, 1, later), mqtt.StatusOK, true},                              // duplicate: not acted again
		{envelope(t, "d", 50, 6, 0, time.Now().Add(-time.Second)), mqtt.StatusRejected, true}, // past deadline
		{envelope(t, "e", coordination.NoTerm, 7, 0, later), mqtt.StatusRejected, true},       // no term
		{[]byte(`{"v":2}`), "", false},                                                        // malformed: no reply possible
		{signedEnvelope(t, forger, "f", "open", nil, 1<<62, 1, 0, later), "", false},          // forged: dropped, no reply
		{signedEnvelope(t, testKeys, "r", fence.ResetAction, []byte(`{"floor":3,"reason":"new cluster"}`), 3, 1, 0, later), mqtt.StatusOK, true},
		{envelope(t, "g", 3, 1, 0, later), mqtt.StatusOK, true}, // the new cluster's term 3, admitted after the reset
	}
	for i, st := range steps {
		r, ok := handle(cfg, store, recent, st.payload, &out)
		if ok != st.answer || r.Status != st.status {
			t.Fatalf("step %d: reply %+v, %v; want status %q, %v\n%s", i, r, ok, st.status, st.answer, out.String())
		}
	}
	if n := strings.Count(out.String(), "ACT "); n != 3 {
		t.Fatalf("acted %d times, want 3:\n%s", n, out.String())
	}
	if !strings.Contains(out.String(), `RESET id=r floor=3 reason="new cluster"`) {
		t.Fatalf("reset not reported:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "DUPLICATE id=a") {
		t.Fatalf("duplicate not reported:\n%s", out.String())
	}
	// The rejected past-deadline command and the forged one did not raise
	// the fence; the reset lowered it to 3.
	if h, _ := store.Highest("valve-1"); h.Term != 3 {
		t.Fatalf("highest %s, want term 3", h)
	}
}

func TestRecentIDsForgetsTheOldest(t *testing.T) {
	r := &recentIDs{limit: 2, reply: make(map[string]mqtt.Reply)}
	for _, id := range []string{"a", "b", "c"} {
		r.put(id, mqtt.Reply{ID: id})
	}
	if _, ok := r.get("a"); ok {
		t.Fatal("oldest id kept")
	}
	if _, ok := r.get("c"); !ok {
		t.Fatal("newest id forgotten")
	}
}
