package dispatch_test

import (
	"fmt"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// A deposed leader that wrote after its successor breaks the first invariant
// of the log; Verify names the record and what superseded it.
func ExampleVerify() {
	oldToken, _ := coordination.NewFencingToken(7, 3)
	newToken, _ := coordination.NewFencingToken(7, 4)
	at := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	cmd := dispatch.Command{ID: "open-valve-7", Device: "valve-7", Action: "open",
		SubmittedAt: at, Deadline: at.Add(time.Minute)}
	entries := []dispatch.Entry{
		{Offset: 0, Kind: dispatch.EntryIssued, Role: "plant-a", Token: oldToken, Member: "node-1", At: at,
			Issued: &dispatch.Issued{Command: cmd}},
		{Offset: 1, Kind: dispatch.EntryRedispatched, Role: "plant-a", Token: newToken, Member: "node-2", At: at,
			Redispatched: &dispatch.Redispatched{CommandID: cmd.ID, Attempt: 2, Reason: dispatch.RedispatchTakeover}},
		{Offset: 2, Kind: dispatch.EntryOutcome, Role: "plant-a", Token: oldToken, Member: "node-1", At: at,
			Outcome: &dispatch.Outcome{CommandID: cmd.ID, Status: dispatch.StatusSucceeded, Attempt: 1}},
	}
	for _, v := range dispatch.Verify(entries) {
		fmt.Println(v)
	}
	// Output:
	// offset 2: token-regressed: role plant-a: token 7:3 is below token 7:4 of offset 1, which superseded it
	// offset 2: attempt-sequence: role plant-a command "open-valve-7": outcome succeeded of attempt 1, the latest attempt is 2
}

// Replay tells who led when and what became of each command.
func ExampleReplay() {
	at := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	token := func(epoch int16) coordination.FencingToken {
		t, _ := coordination.NewFencingToken(7, epoch)
		return t
	}
	cmd := dispatch.Command{ID: "c1", Device: "relay-1", SubmittedAt: at, Deadline: at.Add(time.Minute)}
	entries := []dispatch.Entry{
		{Offset: 10, Kind: dispatch.EntryIssued, Role: "plant-a", Token: token(0), Member: "node-1", At: at,
			Issued: &dispatch.Issued{Command: cmd}},
		{Offset: 12, Kind: dispatch.EntryOutcome, Role: "plant-a", Token: token(2), Member: "node-2", At: at.Add(time.Second),
			Outcome: &dispatch.Outcome{CommandID: "c1", Status: dispatch.StatusInDoubt, Attempt: 1}},
		{Offset: 14, Kind: dispatch.EntryRedispatched, Role: "plant-a", Token: token(3), Member: "node-2", At: at.Add(2 * time.Second),
			Redispatched: &dispatch.Redispatched{CommandID: "c1", Attempt: 2, Reason: dispatch.RedispatchOperator}},
		{Offset: 16, Kind: dispatch.EntryOutcome, Role: "plant-a", Token: token(4), Member: "node-2", At: at.Add(3 * time.Second),
			Outcome: &dispatch.Outcome{CommandID: "c1", Status: dispatch.StatusSucceeded, Attempt: 2}},
	}
	h := dispatch.Replay(entries)
	for _, s := range h.Leaderships {
		fmt.Printf("%s led %s with tokens %s..%s at offsets %d..%d\n", s.Member, s.Role, s.FirstToken, s.LastToken, s.FirstOffset, s.LastOffset)
	}
	c, _ := h.Command("plant-a", "c1")
	for _, a := range c.Attempts {
		fmt.Printf("attempt %d under token %s\n", a.Number, a.Token)
	}
	fmt.Println("status:", c.Status)
	// Output:
	// node-1 led plant-a with tokens 7:0..7:0 at offsets 10..10
	// node-2 led plant-a with tokens 7:2..7:4 at offsets 12..16
	// attempt 1 under token 7:0
	// attempt 2 under token 7:3
	// status: succeeded
}
