package dispatch

import (
	"reflect"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// logBuilder writes a hand-built command log, one entry per call, with
// consecutive offsets.
type logBuilder struct {
	t       *testing.T
	role    string
	member  string
	token   coordination.FencingToken
	term    coordination.Term
	entries []Entry
}

func newLog(t *testing.T) *logBuilder {
	return &logBuilder{t: t, role: "plant-a", member: "node-1", token: mustToken(t, 10, 0)}
}

// as switches the writer of the following records.
func (b *logBuilder) as(member string, id int64, epoch int16) *logBuilder {
	b.member, b.token = member, mustToken(b.t, id, epoch)
	return b
}

// under switches the term of the following records.
func (b *logBuilder) under(term coordination.Term) *logBuilder {
	b.term = term
	return b
}

func (b *logBuilder) add(e Entry) *logBuilder {
	e.Offset = int64(len(b.entries))
	if e.Role == "" {
		e.Role = b.role
	}
	e.Member, e.Token, e.Term = b.member, b.token, b.term
	e.At = at.Add(time.Duration(len(b.entries)) * time.Millisecond)
	// Every hand-built entry must be one that the codec writes.
	if _, _, err := EncodeEntry(e); err != nil {
		b.t.Fatalf("entry %d does not encode: %v", e.Offset, err)
	}
	b.entries = append(b.entries, e)
	return b
}

func (b *logBuilder) issue(id string) *logBuilder {
	cmd := sampleCommand()
	cmd.ID, cmd.Role = id, ""
	return b.add(Entry{Kind: EntryIssued, Issued: &Issued{Command: cmd}})
}

func (b *logBuilder) redispatch(id string, attempt int, reason RedispatchReason) *logBuilder {
	return b.add(Entry{Kind: EntryRedispatched, Redispatched: &Redispatched{CommandID: id, Attempt: attempt, Reason: reason}})
}

func (b *logBuilder) outcome(id string, status Status, attempt int) *logBuilder {
	return b.add(Entry{Kind: EntryOutcome, Outcome: &Outcome{CommandID: id, Status: status, Attempt: attempt}})
}

func (b *logBuilder) intake(from, next int64) *logBuilder {
	return b.add(Entry{Kind: EntryIntake, Intake: &IntakePosition{Topic: DefaultRequestsTopic, Partition: 3, FromOffset: from, NextOffset: next}})
}

// soundLog is a log that breaks no invariant: two leaders under transactions
// v2 (the token rises with every commit), intake, a takeover that
// redispatches one command and puts another in doubt, an operator's resolve,
// a rejection at intake, and a second role sharing the partition.
func soundLog(t *testing.T) *logBuilder {
	b := newLog(t)
	b.issue("a").issue("b").issue("c").intake(0, 3)
	b.as("node-1", 10, 1).outcome("a", StatusSucceeded, 1)
	b.as("node-1", 10, 2).outcome("x", StatusRejected, NoAttempt).intake(3, 5)
	b.add(Entry{Role: "plant-b", Kind: EntryIssued, Issued: &Issued{Command: Command{ID: "a", Device: "d", SubmittedAt: at, Deadline: at.Add(time.Second)}}})
	b.as("node-2", 10, 5).redispatch("b", 2, RedispatchTakeover).outcome("c", StatusInDoubt, 1)
	b.as("node-2", 10, 6).outcome("b", StatusSucceeded, 2).intake(5, 9)
	b.as("node-2", 10, 7).redispatch("c", 2, RedispatchOperator)
	b.as("node-2", 10, 8).outcome("c", StatusFailed, 2)
	return b
}

func TestVerifySoundLog(t *testing.T) {
	if got := Verify(soundLog(t).entries); len(got) != 0 {
		t.Fatalf("violations in a sound log: %v", got)
	}
}

func TestVerifyViolations(t *testing.T) {
	cases := []struct {
		name   string
		build  func(b *logBuilder)
		offset int64
		id     string
		kind   ViolationKind
	}{
		{"token regressed", func(b *logBuilder) {
			b.issue("a").as("node-2", 10, 3).outcome("a", StatusSucceeded, 1).as("node-1", 10, 0).issue("b")
		}, 2, "", ViolationTokenRegressed},
		{"token regressed across producer ids", func(b *logBuilder) {
			b.as("node-1", 11, 0).issue("a").as("node-2", 10, 30000).issue("b")
		}, 1, "", ViolationTokenRegressed},
		{"token shared", func(b *logBuilder) {
			b.issue("a").as("node-2", 10, 0).issue("b")
		}, 1, "", ViolationTokenShared},
		{"not issued: outcome", func(b *logBuilder) {
			b.outcome("a", StatusInDoubt, 1).issue("a")
		}, 0, "a", ViolationNotIssued},
		{"not issued: redispatch", func(b *logBuilder) {
			b.redispatch("a", 2, RedispatchTakeover)
		}, 0, "a", ViolationNotIssued},
		{"issued twice", func(b *logBuilder) {
			b.issue("a").issue("b").issue("a")
		}, 2, "a", ViolationIssuedTwice},
		{"second terminal", func(b *logBuilder) {
			b.issue("a").outcome("a", StatusSucceeded, 1).outcome("a", StatusFailed, 1)
		}, 2, "a", ViolationSecondTerminal},
		{"redispatch after terminal", func(b *logBuilder) {
			b.issue("a").outcome("a", StatusExpired, 1).redispatch("a", 2, RedispatchOperator)
		}, 2, "a", ViolationAfterTerminal},
		{"in doubt after terminal", func(b *logBuilder) {
			b.issue("a").outcome("a", StatusSucceeded, 1).outcome("a", StatusInDoubt, 1)
		}, 2, "a", ViolationAfterTerminal},
		{"issued after rejection at intake", func(b *logBuilder) {
			b.outcome("a", StatusRejected, NoAttempt).issue("a")
		}, 1, "a", ViolationAfterTerminal},
		{"attempt skipped", func(b *logBuilder) {
			b.issue("a").redispatch("a", 3, RedispatchTakeover)
		}, 1, "a", ViolationAttemptSequence},
		{"outcome of an old attempt", func(b *logBuilder) {
			b.issue("a").outcome("a", StatusInDoubt, 1).redispatch("a", 2, RedispatchOperator).outcome("a", StatusSucceeded, 1)
		}, 3, "a", ViolationAttemptSequence},
		{"intake rejection of an issued command", func(b *logBuilder) {
			b.issue("a").outcome("a", StatusRejected, NoAttempt)
		}, 1, "a", ViolationAttemptSequence},
		{"intake gap", func(b *logBuilder) {
			b.intake(0, 4).intake(5, 6)
		}, 1, "", ViolationIntakeGap},
		{"intake overlap", func(b *logBuilder) {
			b.intake(0, 4).intake(4, 8).intake(6, 10)
		}, 2, "", ViolationIntakeOverlap},
		{"intake backwards", func(b *logBuilder) {
			b.intake(10, 20).intake(0, 5)
		}, 1, "", ViolationIntakeOverlap},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newLog(t)
			c.build(b)
			got := Verify(b.entries)
			want := []Violation{{Offset: c.offset, Role: b.role, CommandID: c.id, Kind: c.kind}}
			for i := range got {
				got[i].Message = "" // checked below
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %v\nwant %v", got, want)
			}
			if msg := Verify(b.entries)[0].Message; msg == "" {
				t.Error("the violation has no message")
			}
		})
	}
}

func TestVerifyBatchToken(t *testing.T) {
	b := newLog(t).issue("a").issue("b").issue("c")
	b.entries[0].Batch = &BatchInfo{ProducerID: 10, ProducerEpoch: 0, Transactional: true}
	b.entries[1].Batch = &BatchInfo{ProducerID: 10, ProducerEpoch: 1, Transactional: true}
	b.entries[2].Batch = &BatchInfo{ProducerID: 10, ProducerEpoch: 0, Transactional: false}
	got := Verify(b.entries)
	if len(got) != 2 || got[0].Offset != 1 || got[1].Offset != 2 ||
		got[0].Kind != ViolationTokenMismatch || got[1].Kind != ViolationTokenMismatch {
		t.Fatalf("got %v, want token mismatches at offsets 1 and 2", got)
	}
}

// TestVerifyRolesApart checks that two roles sharing a partition keep their
// own tokens, commands and intake.
func TestVerifyRolesApart(t *testing.T) {
	b := newLog(t).as("node-1", 50, 0).issue("a").intake(0, 2)
	b.role = "plant-b"
	b.as("node-9", 7, 0).issue("a").intake(0, 1)
	if got := Verify(b.entries); len(got) != 0 {
		t.Fatalf("violations across roles: %v", got)
	}
}

func TestReplay(t *testing.T) {
	h := Replay(soundLog(t).entries)

	b, ok := h.Command("plant-a", "b")
	if !ok {
		t.Fatal("command b is missing")
	}
	if b.Status != StatusSucceeded || len(b.Attempts) != 2 || b.Attempts[1].Reason != RedispatchTakeover ||
		b.Attempts[1].Member != "node-2" || b.Attempts[1].Token != mustToken(t, 10, 5) || b.Attempts[0].Offset != 1 {
		t.Errorf("command b: %+v", b)
	}
	c, _ := h.Command("plant-a", "c")
	if c.Status != StatusFailed || len(c.Outcomes) != 2 || c.Outcomes[0].Outcome.Status != StatusInDoubt {
		t.Errorf("command c: %+v", c)
	}
	x, _ := h.Command("plant-a", "x")
	if x.Issued != nil || x.Status != StatusRejected || x.Command().ID != "x" {
		t.Errorf("command x, rejected at intake: %+v", x)
	}
	if other, ok := h.Command("plant-b", "a"); !ok || other.Status != StatusPending {
		t.Errorf("plant-b's command a: %+v, %v", other, ok)
	}
	if _, ok := h.Command("plant-a", "nope"); ok {
		t.Error("an unknown command was found")
	}
	if got := ids(h.Pending()); !reflect.DeepEqual(got, []string{"plant-b/a"}) {
		t.Errorf("pending %v", got)
	}
	if len(h.Intake) != 3 {
		t.Errorf("%d intake records, want 3", len(h.Intake))
	}

	want := []LeadershipSpan{
		{Role: "plant-a", Member: "node-1", FirstToken: mustToken(t, 10, 0), LastToken: mustToken(t, 10, 2), FirstOffset: 0, LastOffset: 6, Records: 7},
		{Role: "plant-b", Member: "node-1", FirstToken: mustToken(t, 10, 2), LastToken: mustToken(t, 10, 2), FirstOffset: 7, LastOffset: 7, Records: 1},
		{Role: "plant-a", Member: "node-2", FirstToken: mustToken(t, 10, 5), LastToken: mustToken(t, 10, 8), FirstOffset: 8, LastOffset: 13, Records: 6},
	}
	for i := range h.Leaderships {
		h.Leaderships[i].From, h.Leaderships[i].To = time.Time{}, time.Time{}
	}
	if !reflect.DeepEqual(h.Leaderships, want) {
		t.Errorf("leaderships\n%+v\nwant\n%+v", h.Leaderships, want)
	}
}

// TestReplayInDoubtThenRedispatched checks that a redispatch after an
// outcome in doubt makes the command pending again.
func TestReplayInDoubtThenRedispatched(t *testing.T) {
	b := newLog(t).issue("a").outcome("a", StatusInDoubt, 1)
	if c, _ := Replay(b.entries).Command("plant-a", "a"); c.Status != StatusInDoubt {
		t.Fatalf("status %s, want in doubt", c.Status)
	}
	b.redispatch("a", 2, RedispatchOperator)
	h := Replay(b.entries)
	if c, _ := h.Command("plant-a", "a"); c.Status != StatusPending {
		t.Fatalf("status %s after the redispatch, want pending", c.Status)
	}
	if len(h.InDoubt()) != 0 || len(h.Pending()) != 1 {
		t.Errorf("in doubt %v, pending %v", ids(h.InDoubt()), ids(h.Pending()))
	}
}

func ids(cs []*CommandHistory) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Role+"/"+c.ID)
	}
	return out
}

// TestVerifyOrdersLeadershipsByTerm checks the term rules: a producer id that
// rotates to a lower one within a term is sound, a term that goes backwards
// is not, whatever the tokens say, and one term belongs to one member.
func TestVerifyOrdersLeadershipsByTerm(t *testing.T) {
	rotated := newLog(t).under(40).as("node-1", 2001, 32766).issue("a").outcome("a", StatusSucceeded, FirstAttempt).
		as("node-1", 1, 0).issue("b").outcome("b", StatusSucceeded, FirstAttempt).
		under(90).as("node-2", 1, 1).issue("c")
	if got := Verify(rotated.entries); len(got) != 0 {
		t.Fatalf("a rotation to a lower producer id within a term: %v", got)
	}

	regressed := newLog(t).under(90).as("node-2", 1, 1).issue("a").
		under(40).as("node-1", 2001, 32766).issue("b")
	checkKinds(t, Verify(regressed.entries), ViolationTermRegressed)

	shared := newLog(t).under(40).as("node-1", 5, 0).issue("a").
		as("node-2", 6, 0).issue("b")
	checkKinds(t, Verify(shared.entries), ViolationTermShared)

	epochBack := newLog(t).under(40).as("node-1", 5, 3).issue("a").
		as("node-1", 5, 2).issue("b")
	checkKinds(t, Verify(epochBack.entries), ViolationTokenRegressed)
}

func checkKinds(t *testing.T, found []Violation, want ...ViolationKind) {
	t.Helper()
	var got []ViolationKind
	for _, v := range found {
		got = append(got, v.Kind)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("violations %v, want kinds %v", found, want)
	}
}

// checkpoint adds the parts of a checkpoint of the builder's role holding
// the commands given whole.
func (b *logBuilder) checkpoint(seq int64, cmds ...CheckpointCommand) *logBuilder {
	parts, err := EncodeCheckpoint(b.role, seq, Checkpoint{Window: DefaultDedupWindow, Commands: cmds})
	if err != nil {
		b.t.Fatal(err)
	}
	for i := range parts {
		b.add(Entry{Kind: EntryCheckpoint, Checkpoint: &parts[i]})
	}
	return b
}

// TestReplayCheckpoints checks that checkpoint records, which a leader
// writes between its batches and as the first record after its recovery,
// take their place in the leadership timeline under their writer and name
// no command: a command they hold whole keeps the history its own records
// give it.
func TestReplayCheckpoints(t *testing.T) {
	b := newLog(t).issue("a")
	cmd := b.entries[0].Issued.Command
	cmd.Role = "plant-a"
	a := CheckpointCommand{Command: cmd, Issued: true, Status: StatusPending, Attempt: FirstAttempt, Token: mustToken(t, 10, 0), First: 0}
	b.checkpoint(0, a)
	b.as("node-2", 11, 0).checkpoint(0, a).outcome("a", StatusSucceeded, FirstAttempt)
	h := Replay(b.entries)
	want := []LeadershipSpan{
		{Role: "plant-a", Member: "node-1", FirstToken: mustToken(t, 10, 0), LastToken: mustToken(t, 10, 0), FirstOffset: 0, LastOffset: 1, Records: 2},
		{Role: "plant-a", Member: "node-2", FirstToken: mustToken(t, 11, 0), LastToken: mustToken(t, 11, 0), FirstOffset: 2, LastOffset: 3, Records: 2},
	}
	for i := range h.Leaderships {
		h.Leaderships[i].From, h.Leaderships[i].To = time.Time{}, time.Time{}
	}
	if !reflect.DeepEqual(h.Leaderships, want) {
		t.Errorf("leaderships\n%+v\nwant\n%+v", h.Leaderships, want)
	}
	if len(h.Commands) != 1 {
		t.Fatalf("%d commands, want a alone", len(h.Commands))
	}
	got, ok := h.Command("plant-a", "a")
	if !ok || got.Status != StatusSucceeded || len(got.Attempts) != 1 || len(got.Outcomes) != 1 {
		t.Errorf("command a: %+v", got)
	}
}
