package dispatch

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// TestCheckReadsBackCompactIDs settles a command, which the dispatcher then
// holds only as a compact ID, and checks that Check compares another
// command under its ID with the command read back from the log: a repeat
// passes, a different command is an *IDConflictError naming what differs,
// as Submit finds it. A new ID submitted before the dedup window is an
// *OutsideWindowError, one inside it passes.
func TestCheckReadsBackCompactIDs(t *testing.T) {
	const window = time.Hour
	clock := coordination.NewManualClock(time.Now().UnixMilli())
	now := func() time.Time { return time.UnixMilli(clock.NowMillis()) }
	log := &leaderLog{}
	r := startLeader(t, log, &rangeLog{leaderLog: log}, 0, map[string]Device{"dev": &countingDevice{}},
		WithDedupWindow(window), WithClock(clock))
	defer r.stop(t)

	at := now()
	cmd := Command{ID: "a", Device: "dev", Action: "set", Payload: []byte("p"), SubmittedAt: at, Deadline: at.Add(2 * time.Hour)}
	if o, err := r.d.Submit(context.Background(), cmd); err != nil || o.Status != StatusSucceeded {
		t.Fatalf("Submit: %+v, %v", o, err)
	}
	if got := r.d.Retained(); got.Whole != 0 || got.Compact != 1 {
		t.Fatalf("the dispatcher holds %+v, want the settled command as a compact ID alone", got)
	}
	if err := r.d.Check(cmd); err != nil {
		t.Errorf("Check of a repeat: %v", err)
	}

	other := cmd
	other.Payload = []byte("q")
	var conflict *IDConflictError
	if err := r.d.Check(other); !errors.As(err, &conflict) || conflict.ID != "a" || !slices.Equal(conflict.Differs, []string{FieldPayload}) {
		t.Errorf("Check of another command under a settled command's ID: %v, want an *IDConflictError on the payload", err)
	}
	if _, err := r.d.Submit(context.Background(), other); !errors.As(err, &conflict) {
		t.Errorf("Submit of another command under a settled command's ID: %v, want an *IDConflictError", err)
	}

	old := Command{ID: "new", Device: "dev", Action: "set", SubmittedAt: now().Add(-window - time.Second), Deadline: now().Add(time.Hour)}
	var outside *OutsideWindowError
	if err := r.d.Check(old); !errors.As(err, &outside) || !errors.Is(err, ErrOutsideDedupWindow) {
		t.Errorf("Check of a new ID submitted before the window: %v, want an *OutsideWindowError", err)
	}
	fresh := old
	fresh.SubmittedAt = now()
	if err := r.d.Check(fresh); err != nil {
		t.Errorf("Check of a new ID inside the window: %v", err)
	}
}
