package dispatch

import (
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// History is what a command log tells, replayed in log order: every command
// with its attempts and outcomes, and who led the role when. The log alone
// holds all of it; [Replay] builds it.
//
// A partition of the log may hold several roles (roles whose RolePartition
// is the same), so every part of a History names its role.
type History struct {
	// Commands lists every command that the log names, in the order of its
	// first record.
	Commands []*CommandHistory

	// Leaderships is the timeline of the log's writers: one span for each
	// run of consecutive records of one role by one member. Under Kafka
	// transactions v2 the token rises with every commit, so a span covers a
	// range of tokens.
	Leaderships []LeadershipSpan

	// Intake lists the intake records, in log order.
	Intake []Entry

	index map[commandKey]*CommandHistory
	lead  map[string]int // role → index of its latest span in Leaderships
}

type commandKey struct{ role, id string }

// CommandHistory is the life of one command in the log.
type CommandHistory struct {
	// Role and ID name the command.
	Role string
	ID   string

	// Issued is the command's Issued record. It is nil for a request that
	// was rejected at intake, which has an outcome and no Issued record.
	Issued *Entry

	// Attempts are the dispatch attempts the log opened, in order: the
	// first from the Issued record, each later one from a Redispatched
	// record.
	Attempts []Attempt

	// Outcomes are the command's outcome records, in log order.
	Outcomes []Entry

	// Status is the status of the latest outcome when it closes the latest
	// attempt, and StatusPending otherwise: an issued command with no
	// outcome yet, or one dispatched again after an outcome in doubt.
	Status Status
}

// Command returns the issued command, or a Command with only ID and Role
// for a request that was rejected at intake.
func (c *CommandHistory) Command() Command {
	if c.Issued != nil && c.Issued.Issued != nil {
		return c.Issued.Issued.Command
	}
	return Command{ID: c.ID, Role: c.Role}
}

// Outcome returns the latest outcome of the command, and false when it has
// none.
func (c *CommandHistory) Outcome() (Outcome, bool) {
	if len(c.Outcomes) == 0 {
		return Outcome{}, false
	}
	return *c.Outcomes[len(c.Outcomes)-1].Outcome, true
}

// attempt returns the number of the latest attempt, or NoAttempt.
func (c *CommandHistory) attempt() int {
	if len(c.Attempts) == 0 {
		return NoAttempt
	}
	return c.Attempts[len(c.Attempts)-1].Number
}

// terminal reports whether a terminal outcome was recorded.
func (c *CommandHistory) terminal() bool {
	for _, o := range c.Outcomes {
		if o.Outcome.Status.Terminal() {
			return true
		}
	}
	return false
}

// Attempt is one dispatch attempt of a command, as the record that opened it
// tells: the device received that record's token.
type Attempt struct {
	// Number is FirstAttempt for the Issued record, and one more for each
	// Redispatched record.
	Number int

	// Reason says why the command was dispatched again; it is zero for the
	// first attempt.
	Reason RedispatchReason

	// Offset, Token, Member and At are those of the record that opened the
	// attempt.
	Offset int64
	Token  coordination.FencingToken
	Member string
	At     time.Time
}

// LeadershipSpan is a run of consecutive records of one role by one member.
type LeadershipSpan struct {
	// Role and Member name the writer.
	Role   string
	Member string

	// FirstToken and LastToken are the tokens of the span's first and last
	// records.
	FirstToken coordination.FencingToken
	LastToken  coordination.FencingToken

	// FirstOffset and LastOffset are the offsets of those records.
	FirstOffset int64
	LastOffset  int64

	// From and To are the times those records were written.
	From time.Time
	To   time.Time

	// Records counts the span's records.
	Records int
}

// Replay folds a command log, in offset order, into its History. It takes
// the log as it is: a record that breaks an invariant is replayed all the
// same (an outcome without an Issued record opens a command with no Issued
// record), and [Verify] reports it. Entries without the body their Kind names
// are skipped.
func Replay(entries []Entry) History {
	h := History{index: make(map[commandKey]*CommandHistory), lead: make(map[string]int)}
	for i := range entries {
		h.apply(&entries[i])
	}
	return h
}

// Command returns the history of the command id of role, and false when
// the log does not name it.
func (h History) Command(role, id string) (*CommandHistory, bool) {
	c, ok := h.index[commandKey{role, id}]
	return c, ok
}

// Pending returns the commands whose latest attempt has no outcome, in the
// order of their first record.
func (h History) Pending() []*CommandHistory { return h.withStatus(StatusPending) }

// InDoubt returns the commands in doubt, in the order of their first record.
func (h History) InDoubt() []*CommandHistory { return h.withStatus(StatusInDoubt) }

func (h History) withStatus(s Status) []*CommandHistory {
	var out []*CommandHistory
	for _, c := range h.Commands {
		if c.Status == s && (c.Issued != nil || s != StatusPending) {
			out = append(out, c)
		}
	}
	return out
}

// command returns the history of the entry's command, opening it on its first
// record.
func (h *History) command(role, id string) *CommandHistory {
	k := commandKey{role, id}
	c, ok := h.index[k]
	if !ok {
		c = &CommandHistory{Role: role, ID: id}
		h.index[k] = c
		h.Commands = append(h.Commands, c)
	}
	return c
}

func (h *History) apply(e *Entry) {
	if e.Kind == EntryCheckpoint && e.Checkpoint != nil {
		// A checkpoint commits under its writer's token like every record
		// of the leadership, often as a new leader's first: it extends the
		// timeline and names no command.
		h.follow(e)
		return
	}
	if !hasBody(e) {
		return
	}
	h.follow(e)
	switch e.Kind {
	case EntryIssued:
		c := h.command(e.Role, e.Issued.Command.ID)
		if c.Issued != nil {
			return // a second Issued record: Verify reports it
		}
		issued := *e
		c.Issued = &issued
		c.Attempts = append(c.Attempts, Attempt{Number: FirstAttempt, Offset: e.Offset, Token: e.Token, Member: e.Member, At: e.At})
		c.Status = StatusPending
	case EntryRedispatched:
		c := h.command(e.Role, e.Redispatched.CommandID)
		c.Attempts = append(c.Attempts, Attempt{Number: e.Redispatched.Attempt, Reason: e.Redispatched.Reason,
			Offset: e.Offset, Token: e.Token, Member: e.Member, At: e.At})
		c.Status = StatusPending
	case EntryOutcome:
		c := h.command(e.Role, e.Outcome.CommandID)
		c.Outcomes = append(c.Outcomes, *e)
		if e.Outcome.Attempt == c.attempt() {
			c.Status = e.Outcome.Status
		}
	case EntryIntake:
		h.Intake = append(h.Intake, *e)
	}
}

// follow extends the leadership timeline with e. Records of other roles in
// between do not split a role's span.
func (h *History) follow(e *Entry) {
	if i, ok := h.lead[e.Role]; ok && h.Leaderships[i].Member == e.Member {
		s := &h.Leaderships[i]
		s.LastToken, s.LastOffset, s.To = e.Token, e.Offset, e.At
		s.Records++
		return
	}
	h.Leaderships = append(h.Leaderships, LeadershipSpan{Role: e.Role, Member: e.Member,
		FirstToken: e.Token, LastToken: e.Token, FirstOffset: e.Offset, LastOffset: e.Offset,
		From: e.At, To: e.At, Records: 1})
	h.lead[e.Role] = len(h.Leaderships) - 1
}

// hasBody reports whether e carries the body its Kind names.
func hasBody(e *Entry) bool {
	switch e.Kind {
	case EntryIssued:
		return e.Issued != nil
	case EntryRedispatched:
		return e.Redispatched != nil
	case EntryOutcome:
		return e.Outcome != nil
	case EntryIntake:
		return e.Intake != nil
	}
	return false
}
