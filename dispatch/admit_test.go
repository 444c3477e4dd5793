package dispatch

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// validatingDevice is a recordingDevice that knows one action, "set", whose
// payload must not be "bad".
type validatingDevice struct{ *recordingDevice }

var errBadPayload = errors.New("payload: want anything but bad")

func (validatingDevice) ValidateCommand(cmd Command) error {
	if cmd.Action != "set" {
		return errors.New("unknown action " + cmd.Action)
	}
	if string(cmd.Payload) == "bad" {
		return errBadPayload
	}
	return nil
}

func TestCommandSameAs(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	base := Command{ID: "a", Role: "r", Device: "d", Action: "set", Payload: []byte("1"), SubmittedAt: now, Deadline: now.Add(time.Minute)}
	retry := base
	retry.SubmittedAt = now.Add(3 * time.Second)
	retry.Deadline = now.Add(3*time.Second + time.Minute) // the same timeout, later
	if d := base.Differences(retry); d != nil {
		t.Errorf("a retry with the same time to live differs in %v", d)
	}
	absolute := base
	absolute.SubmittedAt = now.Add(time.Second) // same absolute deadline
	if !base.SameAs(absolute) {
		t.Error("the same absolute deadline differs")
	}
	// A retry that computed its deadline from its own clock reading.
	jitter := base
	jitter.SubmittedAt = now.Add(5 * time.Second)
	jitter.Deadline = jitter.SubmittedAt.Add(time.Minute - 7*time.Millisecond)
	if !base.SameAs(jitter) {
		t.Error("a retry with the same timeout, read from the clock a moment apart, differs")
	}
	longer := base
	longer.SubmittedAt = now.Add(5 * time.Second)
	longer.Deadline = now.Add(5*time.Second + time.Minute + SameDeadlineTolerance)
	if d := base.Differences(longer); !slices.Equal(d, []string{FieldDeadline}) {
		t.Errorf("a timeout longer by the tolerance: differences %v, want deadline", d)
	}
	other := base
	other.Device, other.Payload, other.Deadline = "e", []byte("2"), now.Add(time.Hour)
	other.Attributes = map[string]string{"by": "ops"}
	want := []string{FieldDevice, FieldPayload, FieldDeadline, FieldAttributes}
	if d := base.Differences(other); !slices.Equal(d, want) {
		t.Errorf("differences %v, want %v", d, want)
	}
	act := base
	act.Action = "open"
	if d := base.Differences(act); !slices.Equal(d, []string{FieldAction}) {
		t.Errorf("differences %v, want action", d)
	}
	empty := base
	empty.Attributes = map[string]string{}
	if !base.SameAs(empty) {
		t.Error("nil and empty attributes differ")
	}
}

func TestSubmitReusedIDConflicts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		dev := &recordingDevice{log: log, t: t}
		h := newHarness(t, log, map[string]Device{"valve": dev, "pump": dev})
		h.start(t.Context())
		first := newCommand("k1", "valve", time.Minute)
		if out, err := h.d.Submit(t.Context(), first); err != nil || out.Status != StatusSucceeded {
			t.Fatalf("first: %+v %v", out, err)
		}
		// The same command again: the first's outcome, not a second dispatch.
		again := first
		again.SubmittedAt = first.SubmittedAt.Add(time.Second)
		again.Deadline = first.Deadline.Add(time.Second)
		if out, err := h.d.Submit(t.Context(), again); err != nil || out.Status != StatusSucceeded {
			t.Errorf("same command again: %+v %v", out, err)
		}
		// The ID reused for another command: a conflict naming what differs.
		other := newCommand("k1", "pump", time.Minute)
		other.Payload = []byte("other")
		_, err := h.d.Submit(t.Context(), other)
		var conflict *IDConflictError
		if !errors.As(err, &conflict) || conflict.ID != "k1" || !slices.Equal(conflict.Differs, []string{FieldDevice, FieldPayload}) {
			t.Fatalf("reused ID: %v, want *IDConflictError on device and payload", err)
		}
		if err := h.d.Check(other); !errors.As(err, &conflict) {
			t.Errorf("Check of the reused ID: %v, want *IDConflictError", err)
		}
		if err := h.d.Check(again); err != nil {
			t.Errorf("Check of the same command: %v", err)
		}
		if n := len(dev.seen()); n != 1 {
			t.Errorf("%d dispatches, want 1", n)
		}
		h.stop()
		if n := countIssued(t, log, "k1"); n != 1 {
			t.Errorf("%d Issued records of k1, want 1", n)
		}
	})
}

func TestSubmitRefusesBadCommandsBeforeWriting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		dev := validatingDevice{&recordingDevice{log: log, t: t}}
		h := newHarness(t, log, map[string]Device{"valve": dev})
		h.start(t.Context())
		unknownDevice := newCommand("u1", "nowhere", time.Minute)
		var unknown *UnknownDeviceError
		if err := h.d.Check(unknownDevice); !errors.As(err, &unknown) {
			t.Errorf("Check unknown device: %v", err)
		}
		if _, err := h.d.Submit(t.Context(), unknownDevice); !errors.As(err, &unknown) {
			t.Errorf("Submit unknown device: %v, want *UnknownDeviceError", err)
		}
		badAction := newCommand("u2", "valve", time.Minute)
		badAction.Action = "explode"
		var unsupported *UnsupportedCommandError
		if _, err := h.d.Submit(t.Context(), badAction); !errors.As(err, &unsupported) || unsupported.Action != "explode" {
			t.Errorf("Submit unknown action: %v, want *UnsupportedCommandError", err)
		}
		badPayload := newCommand("u3", "valve", time.Minute)
		badPayload.Payload = []byte("bad")
		if _, err := h.d.Submit(t.Context(), badPayload); !errors.Is(err, errBadPayload) || !errors.As(err, &unsupported) {
			t.Errorf("Submit bad payload: %v, want *UnsupportedCommandError wrapping the device's error", err)
		}
		if out, err := h.d.Submit(t.Context(), newCommand("ok", "valve", time.Minute)); err != nil || out.Status != StatusSucceeded {
			t.Errorf("good command: %+v %v", out, err)
		}
		h.stop()
		for _, id := range []string{"u1", "u2", "u3"} {
			if _, ok := log.issued(t, id); ok {
				t.Errorf("%s was written to the log", id)
			}
			if o := log.outcomes(t)[id]; len(o) > 0 {
				t.Errorf("%s has outcomes %+v", id, o)
			}
		}
	})
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
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

func TestIntakeRefusesReusedIDAndBadPayload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &leaderLog{}
		dev := validatingDevice{&recordingDevice{log: log, t: t}}
		reqs := newFakeRequests()
		first := newCommand("r0", "valve", time.Minute)
		reused := newCommand("r0", "valve", time.Minute)
		reused.Payload = []byte("something else")
		bad := newCommand("r1", "valve", time.Minute)
		bad.Payload = []byte("bad")
		reqs.add(t,
			mustEncodeRequest(t, first),
			mustEncodeRequest(t, reused),
			mustEncodeRequest(t, bad),
			mustEncodeRequest(t, newCommand("r2", "valve", time.Minute)),
		)
		var logs syncBuffer
		h := newHarness(t, log, map[string]Device{"valve": dev}, WithRequestSource(reqs),
			WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		h.start(t.Context())
		synctest.Wait()
		calls := dev.seen()
		if len(calls) != 2 || calls[0].id != "r0" || calls[1].id != "r2" {
			t.Errorf("calls %+v, want r0 and r2", calls)
		}
		h.stop()
		issued, _ := log.issued(t, "r0")
		if !bytes.Equal(issued.Issued.Command.Payload, first.Payload) {
			t.Errorf("r0 holds payload %q, want the first request's", issued.Issued.Command.Payload)
		}
		if o := log.outcomes(t)["r0"]; len(o) != 1 || o[0].Status != StatusSucceeded {
			t.Errorf("r0 outcomes %+v, want the first's success alone", o)
		}
		if o := log.outcomes(t)["r1"]; len(o) != 1 || o[0].Status != StatusRejected || !strings.Contains(o[0].Reason, errBadPayload.Error()) {
			t.Errorf("r1 outcomes %+v, want rejected for its payload", o)
		}
		if s := logs.String(); !strings.Contains(s, "reuses a command ID") || !strings.Contains(s, "id=r0") || !strings.Contains(s, "payload") {
			t.Errorf("no warning names the reused ID and what differs:\n%s", s)
		}
	})
}

func countIssued(t *testing.T, log *leaderLog, id string) int {
	n := 0
	for _, e := range log.entries(t) {
		if e.Kind == EntryIssued && e.Issued.Command.ID == id {
			n++
		}
	}
	return n
}
