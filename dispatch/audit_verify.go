package dispatch

import (
	"fmt"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// ViolationKind names an invariant of the command log.
type ViolationKind string

const (
	// ViolationTermRegressed: a record's term is below a term that an
	// earlier record of the role carries. A later leadership had already
	// written, so a deposed leader wrote after its successor: the fence
	// failed.
	ViolationTermRegressed ViolationKind = "term-regressed"

	// ViolationTermShared: two members wrote records of one role under the
	// same term. A term is the offset of one leadership's first lease, so one
	// of them did not hold it.
	ViolationTermShared ViolationKind = "term-shared"

	// ViolationTokenRegressed: a record's token is below a token of the same
	// producer id that an earlier record of the same term carries (or, for
	// records that carry no term, below any token an earlier such record
	// carries). Tokens of different terms are not compared: the term orders
	// leaderships, and a token may rotate to a lower producer id within one.
	ViolationTokenRegressed ViolationKind = "token-regressed"

	// ViolationTokenShared: two members wrote records of one role under the
	// same token. A token is minted for one producer, so one of them did not
	// hold it.
	ViolationTokenShared ViolationKind = "token-shared"

	// ViolationTokenMismatch: the record batch that holds a record was
	// written by another producer than the record's token names, or outside
	// a transaction. A record must carry the token of the transaction that
	// wrote it. Only entries with Batch set are checked.
	ViolationTokenMismatch ViolationKind = "token-mismatch"

	// ViolationNotIssued: a Redispatched record, or an outcome of an attempt,
	// with no Issued record of the command before it. Only a request
	// rejected at intake (StatusRejected, NoAttempt) has an outcome without
	// one.
	ViolationNotIssued ViolationKind = "not-issued"

	// ViolationIssuedTwice: a second Issued record for a command ID. The ID
	// is the idempotency key, so the command could be dispatched twice.
	ViolationIssuedTwice ViolationKind = "issued-twice"

	// ViolationSecondTerminal: a terminal outcome of a command that already
	// has one.
	ViolationSecondTerminal ViolationKind = "second-terminal"

	// ViolationAfterTerminal: an Issued or Redispatched record, or an outcome
	// in doubt, after a terminal outcome of the command.
	ViolationAfterTerminal ViolationKind = "after-terminal"

	// ViolationAttemptSequence: a Redispatched record whose attempt is not
	// one more than the command's latest, or an outcome of another attempt
	// than the latest.
	ViolationAttemptSequence ViolationKind = "attempt-sequence"

	// ViolationIntakeGap: an intake record whose FromOffset is above the
	// NextOffset of the role's previous intake record of the same requests
	// partition: the requests in between were never taken in.
	ViolationIntakeGap ViolationKind = "intake-gap"

	// ViolationIntakeOverlap: an intake record whose FromOffset is below the
	// NextOffset of the role's previous intake record of the same requests
	// partition: requests were taken in twice, or intake went backwards.
	ViolationIntakeOverlap ViolationKind = "intake-overlap"

	// ViolationCheckpointMalformed: the parts of a checkpoint do not
	// assemble or decode.
	ViolationCheckpointMalformed ViolationKind = "checkpoint-malformed"

	// ViolationCheckpointMismatch: a checkpoint says other than the records
	// before it: a command's state, a compact ID's offsets, the intake
	// position, or a command missing that the checkpoint must hold.
	ViolationCheckpointMismatch ViolationKind = "checkpoint-mismatch"
)

// Violation is one broken invariant of the command log.
type Violation struct {
	// Offset is the offset of the record that breaks the invariant.
	Offset int64

	// Role is the role of that record.
	Role string

	// CommandID is the command the record is about; it is empty for the
	// invariants of tokens and intake.
	CommandID string

	// Kind names the invariant.
	Kind ViolationKind

	// Message explains the finding, naming the earlier records involved.
	Message string
}

// String writes the violation on one line.
func (v Violation) String() string {
	if v.CommandID != "" {
		return fmt.Sprintf("offset %d: %s: role %s command %q: %s", v.Offset, v.Kind, v.Role, v.CommandID, v.Message)
	}
	return fmt.Sprintf("offset %d: %s: role %s: %s", v.Offset, v.Kind, v.Role, v.Message)
}

// Verify checks the invariants of a command log, given in offset order, and
// returns every violation in log order; none for a sound log. The invariants,
// each checked per role (roles may share a partition):
//
//   - Terms never go backwards: no record carries a term below one an earlier
//     record carries ([ViolationTermRegressed]), and one term belongs to one
//     member ([ViolationTermShared]). Within a term, the epoch of one
//     producer id never goes backwards ([ViolationTokenRegressed]), one
//     token belongs to one member ([ViolationTokenShared]), and a record
//     carries the token of the batch that holds it
//     ([ViolationTokenMismatch]). Records that carry no term, written before
//     terms existed, are held to the older rule that tokens never go
//     backwards among them.
//   - Every Redispatched record and every outcome follows the command's
//     Issued record ([ViolationNotIssued]), and no command is issued twice
//     ([ViolationIssuedTwice]).
//   - No command has two terminal outcomes ([ViolationSecondTerminal]), and
//     nothing but that follows a terminal outcome ([ViolationAfterTerminal]).
//   - Attempts are numbered in order, and an outcome closes the latest
//     ([ViolationAttemptSequence]).
//   - Intake positions are contiguous: each intake record of a requests
//     partition starts where the previous one ended ([ViolationIntakeGap],
//     [ViolationIntakeOverlap]).
//   - Each checkpoint assembles ([ViolationCheckpointMalformed]) and says
//     what the records of its role before it say
//     ([ViolationCheckpointMismatch]): every command not settled, whole and
//     in its state; every settled command inside the checkpoint's dedup
//     window (with [DedupClockSkew], counted to the checkpoint's At), whole
//     or as a compact ID whose offsets are those of its first record and its
//     terminal outcome; and the intake position.
//
// A log that begins at a checkpoint of a role (no record of the role before
// the checkpoint's parts, as a read that starts at a checkpoint gives) is
// checked from it: the checkpoint's commands and intake position stand for
// the records before it, and a later Issued record whose ID hashes to one of
// its compact IDs is reported as issued twice.
func Verify(entries []Entry) []Violation {
	v := verifier{
		maxTerm:    make(map[string]termAt),
		termOwner:  make(map[roleTerm]string),
		maxToken:   make(map[roleTerm]tokenAt),
		tokenOwner: make(map[roleToken]string),
		commands:   make(map[commandKey]*CommandHistory),
		intake:     make(map[intakeKey]int64),
		roles:      make(map[string]*roleCheckpoints),
		firsts:     make(map[int64]commandKey),
	}
	for i := range entries {
		v.check(&entries[i])
	}
	return v.found
}

type tokenAt struct {
	token  coordination.FencingToken
	offset int64
}

type termAt struct {
	term   coordination.Term
	offset int64
}

type roleTerm struct {
	role string
	term coordination.Term
}

type roleToken struct {
	role  string
	token coordination.FencingToken
}

type intakeKey struct {
	role, topic string
	partition   int
}

type verifier struct {
	maxTerm    map[string]termAt
	termOwner  map[roleTerm]string
	maxToken   map[roleTerm]tokenAt
	tokenOwner map[roleToken]string
	commands   map[commandKey]*CommandHistory
	intake     map[intakeKey]int64
	found      []Violation

	// roles holds the checkpoint state of each role; firsts names the
	// command whose first record is at each offset.
	roles  map[string]*roleCheckpoints
	firsts map[int64]commandKey
}

func (v *verifier) report(e *Entry, id string, kind ViolationKind, format string, args ...any) {
	v.found = append(v.found, Violation{Offset: e.Offset, Role: e.Role, CommandID: id, Kind: kind, Message: fmt.Sprintf(format, args...)})
}

func (v *verifier) check(e *Entry) {
	if e.Kind == EntryCheckpoint && e.Checkpoint != nil {
		v.checkToken(e)
		v.checkCheckpointPart(e)
		return
	}
	if !hasBody(e) {
		return
	}
	v.role(e.Role).records = true
	v.checkToken(e)
	switch e.Kind {
	case EntryIssued:
		v.checkIssued(e)
	case EntryRedispatched:
		v.checkRedispatched(e)
	case EntryOutcome:
		v.checkOutcome(e)
	case EntryIntake:
		v.checkIntake(e)
	}
}

func (v *verifier) checkToken(e *Entry) {
	rt := roleTerm{e.Role, e.Term}
	if e.Term != coordination.NoTerm {
		if max, ok := v.maxTerm[e.Role]; ok && e.Term < max.term {
			v.report(e, "", ViolationTermRegressed, "term %s is below term %s of offset %d, which superseded it", e.Term, max.term, max.offset)
		} else if !ok || e.Term > max.term {
			v.maxTerm[e.Role] = termAt{e.Term, e.Offset}
		}
		if owner, ok := v.termOwner[rt]; !ok {
			v.termOwner[rt] = e.Member
		} else if owner != e.Member {
			v.report(e, "", ViolationTermShared, "member %s wrote under term %s, which member %s wrote under before", e.Member, e.Term, owner)
		}
	}
	max, ok := v.maxToken[rt]
	switch {
	case !ok:
		v.maxToken[rt] = tokenAt{e.Token, e.Offset}
	case e.Term != coordination.NoTerm && e.Token.ProducerID() != max.token.ProducerID():
		// The producer id rotated within the leadership: its epoch ran out.
		v.maxToken[rt] = tokenAt{e.Token, e.Offset}
	case e.Token.Compare(max.token) < 0:
		v.report(e, "", ViolationTokenRegressed, "token %s is below token %s of offset %d, which superseded it", e.Token, max.token, max.offset)
	default:
		v.maxToken[rt] = tokenAt{e.Token, e.Offset}
	}
	k := roleToken{e.Role, e.Token}
	if owner, ok := v.tokenOwner[k]; !ok {
		v.tokenOwner[k] = e.Member
	} else if owner != e.Member {
		v.report(e, "", ViolationTokenShared, "member %s wrote under token %s, which member %s wrote under before", e.Member, e.Token, owner)
	}
	if b := e.Batch; b != nil {
		switch {
		case !b.Transactional:
			v.report(e, "", ViolationTokenMismatch, "the record was written outside a transaction")
		case b.ProducerID != e.Token.ProducerID() || b.ProducerEpoch != e.Token.ProducerEpoch():
			v.report(e, "", ViolationTokenMismatch, "the record carries token %s, its batch producer %d:%d", e.Token, b.ProducerID, b.ProducerEpoch)
		}
	}
}

func (v *verifier) command(e *Entry, id string) *CommandHistory {
	k := commandKey{e.Role, id}
	c, ok := v.commands[k]
	if !ok {
		c = &CommandHistory{Role: e.Role, ID: id}
		v.commands[k] = c
		v.firsts[e.Offset] = k
		if at, held := v.role(e.Role).seededIDs[IDHash(id)]; held {
			v.report(e, id, ViolationIssuedTwice, "the ID's hash matches the settled command at offset %d that the checkpoint the log begins with holds: the command is named again, unless two IDs share the hash", at)
		}
	}
	return c
}

func (v *verifier) checkIssued(e *Entry) {
	id := e.Issued.Command.ID
	c := v.command(e, id)
	switch {
	case c.terminal():
		v.report(e, id, ViolationAfterTerminal, "issued after the terminal outcome at offset %d", terminalOffset(c))
	case c.Issued != nil:
		v.report(e, id, ViolationIssuedTwice, "issued again; first issued at offset %d", c.Issued.Offset)
	}
	if c.Issued == nil {
		issued := *e
		c.Issued = &issued
		c.Attempts = append(c.Attempts, Attempt{Number: FirstAttempt, Offset: e.Offset})
	}
}

func (v *verifier) checkRedispatched(e *Entry) {
	d := e.Redispatched
	c := v.command(e, d.CommandID)
	switch {
	case c.Issued == nil:
		v.report(e, d.CommandID, ViolationNotIssued, "attempt %d redispatched with no Issued record before it", d.Attempt)
	case c.terminal():
		v.report(e, d.CommandID, ViolationAfterTerminal, "attempt %d redispatched after the terminal outcome at offset %d", d.Attempt, terminalOffset(c))
	case d.Attempt != c.attempt()+1:
		v.report(e, d.CommandID, ViolationAttemptSequence, "attempt %d redispatched after attempt %d", d.Attempt, c.attempt())
	}
	c.Attempts = append(c.Attempts, Attempt{Number: d.Attempt, Offset: e.Offset})
}

func (v *verifier) checkOutcome(e *Entry) {
	o := e.Outcome
	c := v.command(e, o.CommandID)
	atIntake := o.Status == StatusRejected && o.Attempt == NoAttempt
	switch {
	case c.Issued == nil && !atIntake:
		v.report(e, o.CommandID, ViolationNotIssued, "outcome %s of attempt %d with no Issued record before it", o.Status, o.Attempt)
	case c.terminal() && o.Status.Terminal():
		v.report(e, o.CommandID, ViolationSecondTerminal, "outcome %s after the terminal outcome at offset %d", o.Status, terminalOffset(c))
	case c.terminal():
		v.report(e, o.CommandID, ViolationAfterTerminal, "outcome %s after the terminal outcome at offset %d", o.Status, terminalOffset(c))
	case c.Issued != nil && o.Attempt != c.attempt():
		v.report(e, o.CommandID, ViolationAttemptSequence, "outcome %s of attempt %d, the latest attempt is %d", o.Status, o.Attempt, c.attempt())
	}
	c.Outcomes = append(c.Outcomes, *e)
}

func terminalOffset(c *CommandHistory) int64 {
	for _, o := range c.Outcomes {
		if o.Outcome.Status.Terminal() {
			return o.Offset
		}
	}
	return -1
}

func (v *verifier) checkIntake(e *Entry) {
	p := e.Intake
	k := intakeKey{e.Role, p.Topic, p.Partition}
	prev, ok := v.intake[k]
	switch {
	case !ok:
	case p.FromOffset > prev:
		v.report(e, "", ViolationIntakeGap, "intake of %s-%d covers from offset %d, the previous intake ended at %d: %d requests never taken in",
			p.Topic, p.Partition, p.FromOffset, prev, p.FromOffset-prev)
	case p.FromOffset < prev:
		v.report(e, "", ViolationIntakeOverlap, "intake of %s-%d covers from offset %d, the previous intake ended at %d: %d requests taken in again",
			p.Topic, p.Partition, p.FromOffset, prev, prev-p.FromOffset)
	}
	if p.NextOffset > prev || !ok {
		v.intake[k] = p.NextOffset
	}
}
