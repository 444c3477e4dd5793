package dispatch

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// checkpointedLog runs a leader that writes checkpoints and returns its log.
func checkpointedLog(t *testing.T) []Entry {
	t.Helper()
	log := &leaderLog{}
	r := startLeader(t, log, &rangeLog{leaderLog: log}, 0, map[string]Device{"dev": &countingDevice{}}, WithCheckpointInterval(50))
	for round := range 4 {
		submitMany(t, r.d, fmt.Sprintf("v%d", round), 40, time.Now())
	}
	r.stop(t)
	return log.entries(t)
}

// lastCheckpoint returns the parts of the log's last checkpoint and the
// index of its first part.
func lastCheckpoint(t *testing.T, entries []Entry) ([]Entry, int) {
	t.Helper()
	for i := len(entries) - 1; i >= 0; i-- {
		if entries[i].Kind == EntryCheckpoint && entries[i].Checkpoint.Part == 0 {
			n := entries[i].Checkpoint.Parts
			return entries[i : i+n], i
		}
	}
	t.Fatal("the log holds no checkpoint")
	return nil, 0
}

// appendCheckpoint returns entries with cp after them, encoded as the next
// checkpoint of the one that part belongs to, each part a copy of part.
func appendCheckpoint(t *testing.T, entries []Entry, part Entry, cp Checkpoint) []Entry {
	t.Helper()
	ps, err := EncodeCheckpoint(part.Role, part.Checkpoint.Sequence+1, cp)
	if err != nil {
		t.Fatal(err)
	}
	out := slices.Clone(entries)
	for _, p := range ps {
		e := part
		e.Offset = out[len(out)-1].Offset + 1
		e.Checkpoint = &p
		out = append(out, e)
	}
	return out
}

func kinds(vs []Violation) []ViolationKind {
	var out []ViolationKind
	for _, v := range vs {
		out = append(out, v.Kind)
	}
	return out
}

// TestVerifyCheckpoints checks that Verify finds a dispatcher's checkpoints
// sound, checks a log that begins at one from it, and reports a checkpoint
// that says other than its records, or whose parts do not belong together.
func TestVerifyCheckpoints(t *testing.T) {
	entries := checkpointedLog(t)
	if vs := Verify(entries); len(vs) > 0 {
		t.Fatalf("the dispatcher's log: %v", vs)
	}

	// A read that begins at a checkpoint is checked from it.
	parts, at := lastCheckpoint(t, entries)
	if vs := Verify(entries[at:]); len(vs) > 0 {
		t.Fatalf("the log from its last checkpoint: %v", vs)
	}
	// From there, an Issued record of an ID the checkpoint holds is a
	// second one.
	var issued Entry
	for _, e := range entries {
		if e.Kind == EntryIssued {
			issued = e
			break
		}
	}
	again := issued
	again.Offset = entries[len(entries)-1].Offset + 1
	if vs := Verify(append(slices.Clone(entries[at:]), again)); !slices.Contains(kinds(vs), ViolationIssuedTwice) {
		t.Fatalf("an Issued record of an ID the starting checkpoint holds: %v", vs)
	}

	var data []CheckpointPart
	for _, p := range parts {
		data = append(data, *p.Checkpoint)
	}
	cp, err := AssembleCheckpoint(parts[0].Role, data)
	if err != nil {
		t.Fatal(err)
	}
	// append re-encodes a changed checkpoint right after the last one, as a
	// writer that got its state wrong would.
	upTo := entries[:at+len(parts)]
	append := func(cp Checkpoint) []Entry { return appendCheckpoint(t, upTo, parts[0], cp) }
	if vs := Verify(append(cp)); len(vs) > 0 {
		t.Fatalf("the same checkpoint again: %v", vs)
	}
	for name, change := range map[string]func(*Checkpoint){
		"intake moved":      func(cp *Checkpoint) { cp.IntakeTopic, cp.IntakeNext = DefaultRequestsTopic, 99 },
		"ID missing":        func(cp *Checkpoint) { cp.IDs = cp.IDs[1:] },
		"outcome elsewhere": func(cp *Checkpoint) { cp.IDs[0].Outcome++ },
		"command invented": func(cp *Checkpoint) {
			cp.Commands = slices.Insert(cp.Commands, 0, CheckpointCommand{Command: issued.Issued.Command, Issued: true,
				Status: StatusPending, Attempt: FirstAttempt, Token: issued.Token, First: issued.Offset})
			cp.Commands[0].Command.ID = "never-issued"
		},
	} {
		changed := cp
		changed.IDs = slices.Clone(cp.IDs)
		changed.Commands = slices.Clone(cp.Commands)
		change(&changed)
		if vs := Verify(append(changed)); !slices.Contains(kinds(vs), ViolationCheckpointMismatch) {
			t.Errorf("%s: Verify found %v, want a checkpoint mismatch", name, vs)
		}
	}

	// A checkpoint whose parts do not belong together is malformed.
	torn := slices.Clone(entries)
	first := parts[0]
	first.Offset = torn[len(torn)-1].Offset + 1
	first.Checkpoint = &CheckpointPart{Sequence: 90, Part: 0, Parts: 2, Data: []byte{1}}
	second := first
	second.Offset++
	second.Checkpoint = &CheckpointPart{Sequence: 91, Part: 1, Parts: 2, Data: []byte{2}}
	if vs := Verify(slices.Insert(torn, len(torn), first, second)); !slices.Contains(kinds(vs), ViolationCheckpointMalformed) {
		t.Fatalf("a torn checkpoint: %v", vs)
	}
}
