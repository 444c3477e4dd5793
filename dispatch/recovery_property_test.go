package dispatch

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"go.uber.org/goleak"
)

// The recovery properties: a new leader takes over any log, whatever the
// order of its records, without a panic and without dispatching what it must
// not. The logs come from two generators over one source of choices: an
// arbitrary one (every record well formed, in any order, as a broken or
// hostile writer could leave them) and a lawful one (the histories a sound
// dispatcher writes, which Verify finds clean).

// choices is a source of bounded choices: a seeded generator, or a fuzzer's
// bytes.
type choices interface {
	intn(n int) int
}

type randChoices struct{ r *rand.Rand }

func (c randChoices) intn(n int) int { return c.r.IntN(n) }

// byteChoices takes one choice a byte, and 0 once the bytes run out.
type byteChoices struct {
	data []byte
	off  int
}

func (c *byteChoices) intn(n int) int {
	if c.off >= len(c.data) {
		return 0
	}
	b := c.data[c.off]
	c.off++
	return int(b) % n
}

const (
	propRole      = "controller"
	propOtherRole = "other" // shares the log partition
	propIDs       = 5
)

// The devices of the generated commands: "safe" declares a redispatch safe,
// "unsafe" does not, and "gone" is not registered.
var propDevices = []string{"safe", "unsafe", "gone"}

// propCommand builds a command of role for a device; a past deadline makes it
// expire at takeover.
func propCommand(id, role, device string, past bool, now time.Time) Command {
	at, deadline := now, now.Add(time.Hour)
	if past {
		at, deadline = now.Add(-2*time.Hour), now.Add(-time.Hour)
	}
	return Command{ID: id, Role: role, Device: device, Action: "set", Payload: []byte(id), SubmittedAt: at, Deadline: deadline}
}

// arbitraryLog draws up to n well-formed entries in any order: any kind, any
// status and attempt the codec allows, for a few command IDs shared by the
// role and another one.
func arbitraryLog(c choices, n int, now time.Time) []Entry {
	var out []Entry
	intake := int64(0)
	for range n {
		role := propRole
		if c.intn(5) == 0 {
			role = propOtherRole
		}
		id := fmt.Sprintf("c%d", c.intn(propIDs))
		switch c.intn(4) {
		case 0:
			cmd := propCommand(id, role, propDevices[c.intn(len(propDevices))], c.intn(5) == 0, now)
			out = append(out, Entry{Kind: EntryIssued, Role: role, Issued: &Issued{Command: cmd}})
		case 1:
			out = append(out, Entry{Kind: EntryRedispatched, Role: role, Redispatched: &Redispatched{
				CommandID: id, Attempt: 2 + c.intn(4), Reason: RedispatchReason(1 + c.intn(2))}})
		case 2:
			o := Outcome{CommandID: id, Status: Status(1 + c.intn(6)), Attempt: 1 + c.intn(4), Reason: "generated"}
			if o.Status == StatusRejected && c.intn(2) == 0 {
				o.Attempt = NoAttempt
			}
			out = append(out, Entry{Kind: EntryOutcome, Role: role, Outcome: &o})
		default:
			from := intake + int64(c.intn(3)) - 1
			from = max(from, 0)
			intake = from + int64(c.intn(4))
			out = append(out, Entry{Kind: EntryIntake, Role: role, Intake: &IntakePosition{
				Topic: DefaultRequestsTopic, Partition: 12, FromOffset: from, NextOffset: intake}})
		}
	}
	return out
}

// lawfulLog draws up to n entries that a sound dispatcher could have written:
// each command walks its lifecycle (issued or rejected at intake, then an
// outcome of its latest attempt, and out of doubt by an operator's
// redispatch or cancel), and the intake positions are contiguous.
func lawfulLog(c choices, n int, now time.Time) []Entry {
	type walk struct {
		started, pending, inDoubt, terminal bool
		attempt                             int
	}
	walks := map[string]*walk{}
	var out []Entry
	intake := map[string]int64{} // by role
	for range n {
		role := propRole
		if c.intn(5) == 0 {
			role = propOtherRole
		}
		id := fmt.Sprintf("c%d", c.intn(propIDs))
		w, ok := walks[role+"/"+id]
		if !ok {
			w = &walk{}
			walks[role+"/"+id] = w
		}
		switch {
		case c.intn(6) == 0:
			from := intake[role]
			intake[role] += int64(c.intn(4))
			out = append(out, Entry{Kind: EntryIntake, Role: role, Intake: &IntakePosition{
				Topic: DefaultRequestsTopic, Partition: 12, FromOffset: from, NextOffset: intake[role]}})
		case !w.started && c.intn(8) == 0:
			w.started, w.terminal = true, true
			out = append(out, Entry{Kind: EntryOutcome, Role: role, Outcome: &Outcome{CommandID: id, Status: StatusRejected, Attempt: NoAttempt, Reason: "invalid"}})
		case !w.started:
			w.started, w.pending, w.attempt = true, true, FirstAttempt
			cmd := propCommand(id, role, propDevices[c.intn(len(propDevices))], c.intn(5) == 0, now)
			out = append(out, Entry{Kind: EntryIssued, Role: role, Issued: &Issued{Command: cmd}})
		case w.pending:
			status := Status(1 + c.intn(6))
			if status == StatusCancelled {
				status = StatusInDoubt
			}
			w.pending, w.inDoubt, w.terminal = false, status == StatusInDoubt, status != StatusInDoubt
			out = append(out, Entry{Kind: EntryOutcome, Role: role, Outcome: &Outcome{CommandID: id, Status: status, Attempt: w.attempt, Reason: "device"}})
		case w.inDoubt && c.intn(2) == 0:
			w.attempt++
			w.pending, w.inDoubt = true, false
			out = append(out, Entry{Kind: EntryRedispatched, Role: role, Redispatched: &Redispatched{CommandID: id, Attempt: w.attempt, Reason: RedispatchOperator}})
		case w.inDoubt:
			w.inDoubt, w.terminal = false, true
			out = append(out, Entry{Kind: EntryOutcome, Role: role, Outcome: &Outcome{CommandID: id, Status: StatusCancelled, Attempt: w.attempt, Reason: "operator"}})
		}
	}
	return out
}

// commitGenerated encodes the entries into log as earlier leaders of each
// role wrote them: every one must encode, or the generator is wrong.
func commitGenerated(t *testing.T, log *leaderLog, entries []Entry, now time.Time) {
	t.Helper()
	tokens := map[string]coordination.FencingToken{propRole: fakeToken(t, 3, 0), propOtherRole: fakeToken(t, 5, 0)}
	members := map[string]string{propRole: "node-0", propOtherRole: "node-9"}
	for i, e := range entries {
		e.Token, e.Member, e.At = tokens[e.Role], members[e.Role], now
		key, value, err := EncodeEntry(e)
		if err != nil {
			t.Fatalf("entry %d (%s) does not encode: %v", i, e.Kind, err)
		}
		log.append([]coordination.GuardedRecord{{Key: key, Value: value}})
	}
}

// checkTakeover runs a new leader over the generated log and checks the
// recovery properties. With lawful set, the log and what the leader adds to
// it must pass Verify.
func checkTakeover(t *testing.T, entries []Entry, lawful bool) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		log := &leaderLog{}
		commitGenerated(t, log, entries, now)
		input := log.entries(t)
		if lawful {
			for _, v := range Verify(input) {
				t.Fatalf("the lawful generator wrote a log that Verify refuses: %s", v)
			}
		}
		safe := redispatchDevice{&recordingDevice{log: log, t: t}}
		unsafe := &recordingDevice{log: log, t: t}
		h := newHarness(t, log, map[string]Device{"safe": safe, "unsafe": unsafe})
		h.start(t.Context())
		synctest.Wait()
		select {
		case err := <-h.runErr:
			t.Fatalf("Run returned during the takeover: %v", err)
		default:
		}

		final := log.entries(t)
		added := final[len(input):]
		calls := map[string][]deviceCall{}
		for _, call := range append(safe.seen(), unsafe.seen()...) {
			calls[call.id] = append(calls[call.id], call)
		}
		inDoubt := h.d.InDoubt()
		newToken := fakeToken(t, 7, 0)

		for i := range propIDs {
			id := fmt.Sprintf("c%d", i)
			var mine []Entry // the role's records of id in the input
			for _, e := range input {
				if e.Role == propRole && e.CommandID() == id {
					mine = append(mine, e)
				}
			}
			var fresh []Entry // what the new leader wrote about id
			for _, e := range added {
				if e.Role != propRole {
					t.Errorf("%s: the new leader wrote a record of role %s", id, e.Role)
				}
				if e.CommandID() == id {
					fresh = append(fresh, e)
				}
			}
			if len(mine) == 0 {
				if len(fresh) > 0 || len(calls[id]) > 0 {
					t.Errorf("%s: the role's log does not name it, yet the new leader wrote %d records and dispatched it %d times", id, len(fresh), len(calls[id]))
				}
				continue
			}
			var firstTerminal *Outcome
			var issued *Command
			sawInDoubt := false
			for _, e := range mine {
				switch {
				case e.Kind == EntryIssued && issued == nil:
					issued = &e.Issued.Command
				case e.Kind == EntryOutcome && e.Outcome.Status.Terminal() && firstTerminal == nil:
					firstTerminal = e.Outcome
				case e.Kind == EntryOutcome && e.Outcome.Status == StatusInDoubt:
					sawInDoubt = true
				}
			}
			last := mine[len(mine)-1]

			switch {
			case firstTerminal != nil:
				// Settled for good: never dispatched again, nothing written,
				// never offered for a resolve, and the first outcome stands.
				if len(calls[id]) > 0 || len(fresh) > 0 {
					t.Errorf("%s: settled by %s, yet dispatched %d times and %d records written", id, firstTerminal.Status, len(calls[id]), len(fresh))
				}
				if slices.Contains(inDoubt, id) {
					t.Errorf("%s: settled by %s, yet listed in doubt", id, firstTerminal.Status)
				}
				if out, ok := h.d.Lookup(id); !ok || out.Status != firstTerminal.Status {
					t.Errorf("%s: Lookup %+v %v, want the first terminal outcome %s", id, out, ok, firstTerminal.Status)
				}
				var notInDoubt *NotInDoubtError
				if _, err := h.d.Resolve(t.Context(), id, ResolveCancel); !errors.As(err, &notInDoubt) || !notInDoubt.Settled() {
					t.Errorf("%s: a resolve of a settled command gave %v, want a settled *NotInDoubtError", id, err)
				}

			case last.Kind == EntryIssued || last.Kind == EntryRedispatched:
				checkPendingTakenOver(t, id, issued, sawInDoubt, fresh, calls[id], inDoubt, newToken, now)

			case last.Kind == EntryOutcome && last.Outcome.Status == StatusInDoubt:
				// In doubt stays in doubt, for an operator.
				if len(calls[id]) > 0 || len(fresh) > 0 {
					t.Errorf("%s: in doubt, yet dispatched %d times and %d records written", id, len(calls[id]), len(fresh))
				}
				if !slices.Contains(inDoubt, id) {
					t.Errorf("%s: in doubt in the log, not in InDoubt %v", id, inDoubt)
				}
			}
		}

		if lawful {
			for _, v := range Verify(final) {
				t.Errorf("Verify after the takeover: %s", v)
			}
		}
		// The leader is alive: it takes a new command and dispatches it.
		out, err := h.d.Submit(t.Context(), newCommand("fresh-command", "safe", time.Hour))
		if err != nil || out.Status != StatusSucceeded {
			t.Errorf("a new command after the takeover: %+v %v", out, err)
		}
		synctest.Wait()
		checkLiveAgreesWithRecovery(t, h.d, log.entries(t))
		h.leader.end(fmt.Errorf("test over: %w", coordination.ErrNotHeld))
		if err := <-h.runErr; !errors.Is(err, coordination.ErrNotHeld) {
			t.Errorf("Run returned %v, want the leadership's end", err)
		}
		if err := goleak.Find(h.before); err != nil {
			t.Errorf("goroutines left after Run returned: %v", err)
		}
	})
}

// checkPendingTakenOver checks a command whose last record is Issued or
// Redispatched and that no terminal outcome settled: the new leader
// dispatched it again under a Redispatched record of its own (only when the
// log holds its Issued record, the device declares a redispatch safe, and
// its deadline has not passed), or recorded it expired (deadline passed), or
// it is in doubt, recorded as such by the new leader unless an outcome in
// doubt already put it there.
func checkPendingTakenOver(t *testing.T, id string, issued *Command, sawInDoubt bool, fresh []Entry, calls []deviceCall, inDoubt []string, newToken coordination.FencingToken, now time.Time) {
	t.Helper()
	var redispatched []Entry
	var outcomes []Outcome
	for _, e := range fresh {
		switch e.Kind {
		case EntryRedispatched:
			redispatched = append(redispatched, e)
		case EntryOutcome:
			outcomes = append(outcomes, *e.Outcome)
		default:
			t.Errorf("%s: the new leader wrote a %s record", id, e.Kind)
		}
	}
	switch {
	case len(calls) > 0:
		if issued == nil || issued.Device != "safe" || !now.Before(issued.Deadline) {
			t.Errorf("%s: dispatched again, yet issued %+v", id, issued)
		}
		if len(calls) != 1 || len(redispatched) != 1 || redispatched[0].Redispatched.Reason != RedispatchTakeover ||
			calls[0].token != redispatched[0].Token || calls[0].token != newToken {
			t.Errorf("%s: calls %+v after Redispatched records %+v, want one call under the one takeover record's token %s", id, calls, redispatched, newToken)
		}
	case len(outcomes) == 1 && outcomes[0].Status == StatusExpired:
		if issued == nil || now.Before(issued.Deadline) {
			t.Errorf("%s: recorded expired, yet issued %+v", id, issued)
		}
	default:
		if len(redispatched) > 0 {
			t.Errorf("%s: Redispatched records %+v without a dispatch", id, redispatched)
		}
		if !slices.Contains(inDoubt, id) {
			t.Errorf("%s: neither dispatched again nor in doubt; InDoubt %v, new outcomes %+v", id, inDoubt, outcomes)
		}
		recorded := len(outcomes) == 1 && outcomes[0].Status == StatusInDoubt
		if !recorded && (!sawInDoubt || len(outcomes) > 0) {
			t.Errorf("%s: in doubt with new outcomes %+v; an outcome in doubt before: %v", id, outcomes, sawInDoubt)
		}
		if issued != nil && issued.Device == "safe" && now.Before(issued.Deadline) && !sawInDoubt {
			t.Errorf("%s: a safe redispatch of a pending command was recorded in doubt", id)
		}
	}
}

// propSeeds is how many seeds each generator runs in a normal test run.
const propSeeds = 200

func TestRecoveryTakesOverArbitraryLogs(t *testing.T) {
	for seed := range uint64(propSeeds) {
		c := randChoices{rand.New(rand.NewPCG(seed, 0x5eed))}
		entries := arbitraryLog(c, 1+c.intn(40), time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
		t.Run(fmt.Sprint("seed-", seed), func(t *testing.T) { checkTakeover(t, entries, false) })
		if t.Failed() {
			return
		}
	}
}

func TestRecoveryTakesOverLawfulLogs(t *testing.T) {
	for seed := range uint64(propSeeds) {
		c := randChoices{rand.New(rand.NewPCG(seed, 0x1a3f))}
		entries := lawfulLog(c, 1+c.intn(40), time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
		t.Run(fmt.Sprint("seed-", seed), func(t *testing.T) { checkTakeover(t, entries, true) })
		if t.Failed() {
			return
		}
	}
}

// FuzzRecovery draws the log from the fuzzer's bytes: the first byte picks
// the generator, each later byte one choice.
func FuzzRecovery(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte{1})
	// In doubt, then cancelled: the log that `dispatcher resolve <id>
	// cancel` leaves.
	f.Add([]byte{1, 5, 0, 5, 1, 5, 0, 5, 0, 0, 5, 0, 5, 0, 0})
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 2, 5, 4, 1, 0, 2, 2, 5, 0, 1, 0, 2, 0, 2, 1, 0, 2, 1, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		c := &byteChoices{data: data[1:]}
		start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
		var entries []Entry
		n := 1 + len(data)/3 // about the choices one entry takes
		if data[0]%2 == 0 {
			entries = arbitraryLog(c, n, start)
		} else {
			entries = lawfulLog(c, n, start)
		}
		checkTakeover(t, entries, data[0]%2 == 1)
	})
}

// checkLiveAgreesWithRecovery checks that the state the live dispatcher
// reached, by recovering and then committing its own records, is the state
// that a recovery of the whole log rebuilds: a successor sees what its
// predecessor saw.
func checkLiveAgreesWithRecovery(t *testing.T, d *Dispatcher, entries []Entry) {
	t.Helper()
	type view struct {
		issued  bool
		phase   phase
		attempt int
		token   coordination.FencingToken
		status  Status
	}
	viewOf := func(c *command) view {
		return view{c.issued, c.phase, c.attempt, c.token, c.outcome.Status}
	}
	rebuilt := foldLog(d.role, d.requestTP, entries)
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(rebuilt.order) != len(d.commands) {
		t.Errorf("the live dispatcher knows %d commands, a recovery of its log %d", len(d.commands), len(rebuilt.order))
	}
	for _, c := range rebuilt.order {
		live, ok := d.commands[c.cmd.ID]
		if !ok {
			t.Errorf("%s: recovered, unknown to the live dispatcher", c.cmd.ID)
			continue
		}
		if got, want := viewOf(live), viewOf(c); got != want {
			t.Errorf("%s: live %+v, recovered %+v", c.cmd.ID, got, want)
		}
	}
	if rebuilt.intake != d.commits.intakePosition() {
		t.Errorf("intake: live %d, recovered %d", d.commits.intakePosition(), rebuilt.intake)
	}
}
