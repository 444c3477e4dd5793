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

func envelope(t *testing.T, id string, term coordination.Term, producer int64, epoch int16, deadline time.Time) []byte {
	t.Helper()
	tok, err := coordination.NewFencingToken(producer, epoch)
	if err != nil {
		t.Fatal(err)
	}
	b, err := mqtt.EncodeEnvelope(mqtt.Envelope{ID: id, Device: "valve-1", Action: "open", Term: term, Token: tok, Deadline: deadline})
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
	cfg := config{device: "valve-1"}
	recent := &recentIDs{limit: 10, reply: make(map[string]mqtt.Reply)}
	var out bytes.Buffer
	later := time.Now().Add(time.Hour)

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
	}
	for i, st := range steps {
		r, ok := handle(cfg, store, recent, st.payload, &out)
		if ok != st.answer || r.Status != st.status {
			t.Fatalf("step %d: reply %+v, %v; want status %q, %v\n%s", i, r, ok, st.status, st.answer, out.String())
		}
	}
	if n := strings.Count(out.String(), "ACT "); n != 2 {
		t.Fatalf("acted %d times, want 2:\n%s", n, out.String())
	}
	if !strings.Contains(out.String(), "DUPLICATE id=a") {
		t.Fatalf("duplicate not reported:\n%s", out.String())
	}
	// The rejected past-deadline command did not raise the fence.
	if h, _ := store.Highest("valve-1"); h.Term != 40 || h.Token.String() != "5:1" {
		t.Fatalf("highest %s, want term 40 token 5:1", h)
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
