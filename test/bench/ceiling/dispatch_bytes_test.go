package ceiling

import (
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// TestCheckpointBytesAreToldApart: the counting leader tells a record's
// kind, a checkpoint part's, an Issued or an Outcome, by its key alone, and
// counts the same bytes for a command that the ceiling counts for its
// records.
func TestCheckpointBytesAreToldApart(t *testing.T) {
	token, err := coordination.NewFencingToken(7, 1)
	if err != nil {
		t.Fatal(err)
	}
	at := time.UnixMilli(1_700_000_000_000)
	part := dispatch.CheckpointPart{Sequence: 1, Part: 0, Parts: 1, Data: []byte("ids")}
	cmd := BenchCommand("bench-role", "b", 1, at)
	for _, e := range []dispatch.Entry{
		{Kind: dispatch.EntryCheckpoint, Checkpoint: &part},
		{Kind: dispatch.EntryIssued, Issued: &dispatch.Issued{Command: cmd}},
		{Kind: dispatch.EntryOutcome, Outcome: &dispatch.Outcome{CommandID: cmd.ID, Status: dispatch.StatusSucceeded, Attempt: dispatch.FirstAttempt}},
	} {
		e.Role, e.Member, e.Token, e.At = "bench-role", "bench", token, at
		key, _, err := dispatch.EncodeEntry(e)
		if err != nil {
			t.Fatalf("%s: %v", e.Kind, err)
		}
		if got := keyKind(key); got != e.Kind {
			t.Errorf("keyKind of a %s record = %s", e.Kind, got)
		}
	}
	if got := keyKind([]byte{0, 1, 0}); got != 0 {
		t.Errorf("keyKind of a key of three bytes = %s, want none", got)
	}

	commands, err := EncodeCommands("bench-role", 1)
	if err != nil {
		t.Fatal(err)
	}
	c := commands[0]
	var headers []coordination.Header
	for _, h := range c.Headers {
		headers = append(headers, coordination.Header{Key: h.Key, Value: h.Value})
	}
	want := RecordBytes(c.Key[0], c.Value[0], headers) + RecordBytes(c.Key[1], c.Value[1], headers)
	if got := c.Bytes(); got != want || got == 0 {
		t.Errorf("the ceiling counts %d bytes for a command, the counting leader %d", got, want)
	}
}
