package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// TestLogPrintsTerms builds the audit of a log in which node-1's producer id
// rotated to a lower one within term 40 and node-2 then led in term 57 with
// a lower token still: every record shows its term, the leaderships show
// theirs, and the log verifies.
func TestLogPrintsTerms(t *testing.T) {
	tok := func(id int64, epoch int16) coordination.FencingToken {
		tk, err := coordination.NewFencingToken(id, epoch)
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	at := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	issued := func(off int64, member string, term coordination.Term, token coordination.FencingToken, id string) dispatch.Entry {
		return dispatch.Entry{Offset: off, Kind: dispatch.EntryIssued, Role: "r", Term: term, Token: token, Member: member, At: at,
			Issued: &dispatch.Issued{Command: dispatch.Command{ID: id, Role: "r", Device: "valve-1", Action: "open"}}}
	}
	outcome := func(off int64, member string, term coordination.Term, token coordination.FencingToken, id string) dispatch.Entry {
		return dispatch.Entry{Offset: off, Kind: dispatch.EntryOutcome, Role: "r", Term: term, Token: token, Member: member, At: at,
			Outcome: &dispatch.Outcome{CommandID: id, Status: dispatch.StatusSucceeded, Attempt: dispatch.FirstAttempt}}
	}
	entries := []dispatch.Entry{
		issued(0, "node-1", 40, tok(900, 3), "c1"),
		outcome(1, "node-1", 40, tok(2, 0), "c1"),
		issued(2, "node-2", 57, tok(1, 0), "c2"),
		outcome(3, "node-2", 57, tok(1, 1), "c2"),
	}
	a := buildAudit("r", coordination.TopicPartition{Topic: "dispatch.log", Partition: 3}, entries)
	if !a.Clean {
		t.Fatalf("violations %+v", a.Violations)
	}
	if len(a.Leaderships) != 2 || a.Leaderships[0].FirstTerm != 40 || a.Leaderships[0].LastTerm != 40 ||
		a.Leaderships[1].FirstTerm != 57 {
		t.Fatalf("leaderships %+v", a.Leaderships)
	}
	for i, want := range []coordination.Term{40, 40, 57, 57} {
		if r := record(entries[i]); r.Term != want {
			t.Errorf("record %d: term %s, want %s", i, r.Term, want)
		}
	}
	row := strings.Join(recordRow(record(entries[1])), "  ")
	if !strings.Contains(row, "node-1  40  2:0  outcome") {
		t.Errorf("row %q lacks the term beside the token", row)
	}
	old := issued(4, "node-2", coordination.NoTerm, tok(1, 1), "c3")
	if row := recordRow(record(old)); row[3] != "-" {
		t.Errorf("a record without a term shows %q", row[3])
	}

	var out bytes.Buffer
	writeAuditText(&LogOptions{Streams: Streams{Out: &out}}, a)
	for _, want := range []string{"node-1       term 40  tokens 900:3 .. 2:0", "node-2       term 57  tokens 1:0 .. 1:1", "verify: clean"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("audit text lacks %q:\n%s", want, out.String())
		}
	}
}

// TestLogSummarisesCheckpoints prints a checkpoint of two parts: each part
// shows its sequence and place, and the last one what the whole holds, in
// the table and in JSON; a range that starts at the last part shows the
// part alone.
func TestLogSummarisesCheckpoints(t *testing.T) {
	tok, err := coordination.NewFencingToken(7, 0)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	cp := dispatch.Checkpoint{Window: dispatch.DefaultDedupWindow, IntakeTopic: "dispatch.requests", IntakePartition: 3, IntakeNext: 42,
		Commands: []dispatch.CheckpointCommand{{Command: dispatch.Command{ID: "p1", Role: "r", SubmittedAt: at},
			Status: dispatch.StatusPending, Attempt: dispatch.NoAttempt, Token: tok, First: 9}}}
	const ids = 80_000 // more than one part holds
	for i := range ids {
		cp.IDs = append(cp.IDs, dispatch.CheckpointID{Hash: uint64(i) * 0x9e3779b97f4a7c15, First: int64(2 * i), Outcome: int64(2*i + 1), SubmittedAt: at})
	}
	parts, err := dispatch.EncodeCheckpoint("r", 5, cp)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 2 {
		t.Fatalf("%d parts, want 2", len(parts))
	}
	var entries []dispatch.Entry
	for i := range parts {
		entries = append(entries, dispatch.Entry{Offset: int64(200_000 + i), Kind: dispatch.EntryCheckpoint, Role: "r", Token: tok,
			Member: "node-1", At: at, Checkpoint: &parts[i]})
	}

	recs := records(entries)
	if c := recs[0].Checkpoint; c == nil || c.Sequence != 5 || c.Part != 1 || c.Parts != 2 || c.State != nil {
		t.Errorf("first part: %+v", c)
	}
	want := LogCheckpointState{Pending: 1, Whole: 1, CompactIDs: ids, IntakeTopic: "dispatch.requests", IntakePartition: 3, IntakeNext: 42}
	if c := recs[1].Checkpoint; c == nil || c.Part != 2 || c.State == nil || *c.State != want {
		t.Errorf("last part: %+v", c)
	}
	js, err := json.Marshal(recs[1])
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`"kind":"checkpoint"`, `"sequence":5`, `"part":2`, `"parts":2`, `"pending":1`, `"compact_ids":80000`, `"intake_next":42`} {
		if !strings.Contains(string(js), w) {
			t.Errorf("JSON %s lacks %s", js, w)
		}
	}

	rows := recordsTable(entries).rows
	if got := rows[0][len(rows[0])-1]; got != "checkpoint 5 part 1/2" {
		t.Errorf("first row %q", got)
	}
	if got, w := rows[1][len(rows[1])-1], "checkpoint 5 part 2/2: 1 pending, 0 in doubt, 1 whole, 80000 compact IDs, intake dispatch.requests-3@42"; got != w {
		t.Errorf("last row %q, want %q", got, w)
	}
	if c := records(entries[1:])[0].Checkpoint; c == nil || c.Part != 2 || c.State != nil {
		t.Errorf("a last part without the first: %+v", c)
	}

	// A delta names its base.
	cp.IDs = cp.IDs[:2]
	cp.Base = &dispatch.CheckpointBase{Token: tok, Sequence: 5, First: 200_000, Last: 200_001}
	parts, err = dispatch.EncodeCheckpoint("r", 6, cp)
	if err != nil {
		t.Fatal(err)
	}
	delta := []dispatch.Entry{{Offset: 210_000, Kind: dispatch.EntryCheckpoint, Role: "r", Token: tok, Member: "node-1", At: at, Checkpoint: &parts[0]}}
	if b := records(delta)[0].Checkpoint.State.Base; b == nil || *b != (LogCheckpointBase{Sequence: 5, Token: tok.String(), First: 200_000, Last: 200_001}) {
		t.Errorf("the delta's base: %+v", b)
	}
	w := "checkpoint 6 part 1/1: 1 pending, 0 in doubt, 1 whole, 2 compact IDs added since checkpoint 5 (" + tok.String() +
		") at offsets 200000-200001, intake dispatch.requests-3@42"
	if got := recordsTable(delta).rows[0]; got[len(got)-1] != w {
		t.Errorf("the delta's row %q, want %q", got[len(got)-1], w)
	}
}
