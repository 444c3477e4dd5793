package dispatch

import (
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"go.opentelemetry.io/otel/trace"
)

// The state machine of one command, shared by the live dispatcher, which
// applies each record once its transaction commits, and by recovery, which
// applies the records an earlier leader committed. Both go through the same
// two transitions below, so a successor rebuilds exactly the state its
// predecessor had, whatever the log holds. The rules:
//
//   - A terminal outcome is final. The first terminal outcome of a command
//     settles it for good: a later Issued or Redispatched record, an outcome
//     in doubt, or a second terminal outcome changes nothing. A settled
//     command is never dispatched again and never resolved again.
//   - An outcome in doubt, of any attempt, puts a command that is not settled
//     in doubt, where it stays until an operator resolves it: a Redispatched
//     record or a terminal outcome moves it on, nothing else does.
//   - A Redispatched record of a command that is not settled makes it pending
//     again, under the record's attempt and token. A new leader that finds it
//     pending dispatches it again under a Redispatched record of its own when
//     the device declares that safe, and records it in doubt otherwise.
//   - The first Issued record of an ID stands; a second one changes nothing.
//   - A command that has no Issued record (an outcome or a Redispatched
//     record named it first) has nothing that could be dispatched. Its ID is
//     kept, so it is never issued anew; a terminal outcome settles it, and an
//     outcome in doubt or a Redispatched record leaves it for an operator (a
//     pending one is recorded in doubt at takeover, as a redispatch of it is
//     when it reaches its device).
//
// A well-formed log, the one [Verify] finds clean, never reaches the odd
// cases; the rules exist so that no log, however it came about, makes a
// leader dispatch a settled command twice or lose one in doubt.

// phase is where a command stands in this dispatcher.
type phase int

const (
	phaseQueued   phase = iota // its Issued record waits for a transaction
	phaseIssued                // a record committed under which it may be dispatched
	phaseInDoubt               // recorded in doubt; an operator resolves it
	phaseTerminal              // a terminal outcome committed
)

// command is the state of one command ID that the log holds or will hold.
type command struct {
	cmd Command
	// issued reports that the log holds, or will hold, the command's Issued
	// record; without one, cmd holds no more than the ID.
	issued  bool
	phase   phase
	attempt int
	token   coordination.FencingToken
	outcome Outcome
	// settled is closed when the command reaches phaseInDoubt or
	// phaseTerminal; a resolve replaces it.
	settled chan struct{}
	// span is the command's trace, carried into every record about it.
	span     trace.SpanContext
	issuedAt time.Time
	// resolving reports an operator's resolve whose record is queued.
	resolving bool

	// first is the offset of the first record that names the command, and
	// outcomeAt the offset of its terminal outcome; -1 until known. A
	// settled command whose offsets are known is held as a compact ID.
	first, outcomeAt int64
	// seen is when the first record of a command without an Issued record
	// was written; the dedup window counts from it.
	seen time.Time
}

// pending reports whether the command waits for a dispatch or its outcome.
func (p phase) pending() bool { return p == phaseQueued || p == phaseIssued }

// redispatched applies a committed Redispatched record that opens attempt
// under token. It reports false, and changes nothing, for a settled command.
func (c *command) redispatched(attempt int, token coordination.FencingToken) bool {
	if c.phase == phaseTerminal {
		return false
	}
	c.phase = phaseIssued
	c.attempt = max(c.attempt, attempt)
	c.token = token
	return true
}

// recorded applies a committed outcome. It reports false, and changes
// nothing, for a command that a terminal outcome settled before.
func (c *command) recorded(o Outcome) bool {
	if c.phase == phaseTerminal {
		return false
	}
	c.outcome = o
	if o.Status == StatusInDoubt {
		c.phase = phaseInDoubt
	} else {
		c.phase = phaseTerminal
	}
	return true
}
