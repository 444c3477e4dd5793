package dispatch

import (
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// roleCheckpoints is what Verify keeps of one role's checkpoints.
type roleCheckpoints struct {
	// records reports that a record of the role other than a checkpoint
	// part came before.
	records bool

	// parts are the parts of the checkpoint being read, first seen at
	// offset from, under token and sequence.
	parts []CheckpointPart
	token coordination.FencingToken
	from  int64

	// seededIDs are the compact IDs of the checkpoint that the log begins
	// with, by hash, with their First offset. When that checkpoint is a
	// delta, whose base lies before the log, the IDs that begin before
	// seededBefore are not checked either.
	seededIDs    map[uint64]int64
	seededBefore int64

	// base is the role's newest full checkpoint, which a delta builds on:
	// where its parts are, or nil before the first; baseIDs are its IDs.
	base    *CheckpointBase
	baseIDs []CheckpointID
}

func (v *verifier) role(role string) *roleCheckpoints {
	r, ok := v.roles[role]
	if !ok {
		r = &roleCheckpoints{seededBefore: -1}
		v.roles[role] = r
	}
	return r
}

// checkCheckpointPart gathers the parts of a checkpoint, and checks the
// checkpoint once it has them all.
func (v *verifier) checkCheckpointPart(e *Entry) {
	r := v.role(e.Role)
	p := *e.Checkpoint
	if len(r.parts) > 0 && (e.Token != r.token || p.Sequence != r.parts[0].Sequence || p.Parts != r.parts[0].Parts) {
		v.report(e, "", ViolationCheckpointMalformed, "a checkpoint part of sequence %d follows %d of the %d parts of sequence %d that began at offset %d",
			p.Sequence, len(r.parts), r.parts[0].Parts, r.parts[0].Sequence, r.from)
		r.parts = nil
	}
	if len(r.parts) == 0 {
		r.token, r.from = e.Token, e.Offset
	}
	r.parts = append(r.parts, p)
	if len(r.parts) < p.Parts {
		return
	}
	parts := r.parts
	r.parts = nil
	cp, err := AssembleCheckpoint(e.Role, parts)
	if err != nil {
		v.report(e, "", ViolationCheckpointMalformed, "the checkpoint that began at offset %d: %v", r.from, err)
		return
	}
	from := r.from
	if cp.Base == nil {
		defer func() {
			r.base = &CheckpointBase{Token: e.Token, Sequence: p.Sequence, First: from, Last: e.Offset}
			r.baseIDs = cp.IDs
		}()
	}
	if !r.records {
		v.seed(e, cp)
		return
	}
	if cp.Base != nil {
		if r.base == nil || *cp.Base != *r.base {
			if r.seededBefore >= 0 && cp.Base.Last <= r.seededBefore {
				// The base lies before the log, as the delta the log
				// began with: the IDs it holds cannot be checked.
				v.compare(e, cp)
				return
			}
			v.report(e, "", ViolationCheckpointMalformed, "the delta checkpoint that began at offset %d builds on checkpoint %d at offsets %d to %d under token %s, not on the role's newest full checkpoint before it",
				from, cp.Base.Sequence, cp.Base.First, cp.Base.Last, cp.Base.Token)
			return
		}
		cp.IDs = overlayIDs(r.baseIDs, cp.IDs)
	}
	v.compare(e, cp)
}

// overlayIDs returns base with the IDs of delta in place of any of the
// same hash, both in hash order.
func overlayIDs(base, delta []CheckpointID) []CheckpointID {
	out := make([]CheckpointID, 0, len(base)+len(delta))
	i, j := 0, 0
	for i < len(base) || j < len(delta) {
		switch {
		case j == len(delta) || (i < len(base) && base[i].Hash < delta[j].Hash):
			out = append(out, base[i])
			i++
		default:
			if i < len(base) && base[i].Hash == delta[j].Hash {
				i++
			}
			out = append(out, delta[j])
			j++
		}
	}
	return out
}

// seed starts the role's checks from cp, the checkpoint the log begins
// with.
func (v *verifier) seed(e *Entry, cp Checkpoint) {
	r := v.role(e.Role)
	r.records = true
	r.seededBefore = -1
	if cp.Base != nil {
		r.seededBefore = cp.Base.Last
	}
	r.seededIDs = make(map[uint64]int64, len(cp.IDs))
	for _, id := range cp.IDs {
		r.seededIDs[id.Hash] = id.First
	}
	if cp.IntakeTopic != "" {
		v.intake[intakeKey{e.Role, cp.IntakeTopic, cp.IntakePartition}] = cp.IntakeNext
	}
	for _, cc := range cp.Commands {
		h := &CommandHistory{Role: e.Role, ID: cc.Command.ID}
		if cc.Issued {
			issued := Entry{Offset: cc.First, Kind: EntryIssued, Role: e.Role, Token: cc.Token, Term: coordination.NoTerm,
				Issued: &Issued{Command: cc.Command}}
			h.Issued = &issued
		}
		if cc.Attempt != NoAttempt {
			h.Attempts = append(h.Attempts, Attempt{Number: cc.Attempt, Offset: cc.First, Token: cc.Token})
		}
		if cc.Status != StatusPending {
			o := cc.Outcome
			// The offset of the outcome lies before the log: -1.
			h.Outcomes = append(h.Outcomes, Entry{Offset: -1, Kind: EntryOutcome, Role: e.Role, Term: coordination.NoTerm, Outcome: &o})
		}
		v.commands[commandKey{e.Role, cc.Command.ID}] = h
		if cc.First >= 0 {
			v.firsts[cc.First] = commandKey{e.Role, cc.Command.ID}
		}
	}
}

// status returns the state of a command as its records tell it.
func historyStatus(h *CommandHistory) Status {
	for _, o := range h.Outcomes {
		if o.Outcome.Status.Terminal() {
			return o.Outcome.Status
		}
	}
	if o, ok := h.Outcome(); ok && o.Status == StatusInDoubt && o.Attempt >= h.attempt() {
		return StatusInDoubt
	}
	return StatusPending
}

// compare checks cp, a checkpoint of the role that e ends, against the
// records of the role before it.
func (v *verifier) compare(e *Entry, cp Checkpoint) {
	role := e.Role
	mismatch := func(id, format string, args ...any) {
		v.report(e, id, ViolationCheckpointMismatch, format, args...)
	}
	if cp.IntakeTopic != "" {
		if next, ok := v.intake[intakeKey{role, cp.IntakeTopic, cp.IntakePartition}]; (ok && next != cp.IntakeNext) || (!ok && cp.IntakeNext != 0) {
			mismatch("", "the checkpoint resumes intake of %s-%d at %d, the intake records at %d", cp.IntakeTopic, cp.IntakePartition, cp.IntakeNext, next)
		}
	}
	held := make(map[string]bool, len(cp.Commands))
	for _, cc := range cp.Commands {
		id := cc.Command.ID
		held[id] = true
		h, ok := v.commands[commandKey{role, id}]
		if !ok {
			mismatch(id, "the checkpoint holds a command that no record before it names")
			continue
		}
		if s := historyStatus(h); s != cc.Status {
			mismatch(id, "the checkpoint holds it %s, its records %s", cc.Status, s)
		}
		if cc.Issued != (h.Issued != nil) {
			mismatch(id, "the checkpoint says issued %t, the records %t", cc.Issued, h.Issued != nil)
		} else if cc.Issued && !cc.Command.SameAs(h.Command()) {
			mismatch(id, "the checkpoint holds another command than its Issued record")
		}
		if cc.Status != StatusInDoubt || cc.Issued {
			if a := h.attempt(); cc.Attempt != a && h.Issued != nil {
				mismatch(id, "the checkpoint holds attempt %d, the records %d", cc.Attempt, a)
			}
		}
	}
	compact := make(map[commandKey]bool, len(cp.IDs))
	seeded := v.role(role).seededIDs
	for _, id := range cp.IDs {
		if first, ok := seeded[id.Hash]; ok && first == id.First {
			continue // held by the checkpoint the log begins with
		}
		if id.First <= v.role(role).seededBefore {
			continue // held by the base of the delta the log begins with
		}
		k, ok := v.firsts[id.First]
		if !ok || k.role != role {
			mismatch("", "compact ID %016x names offset %d, where no command of the role begins", id.Hash, id.First)
			continue
		}
		compact[k] = true
		h := v.commands[k]
		switch {
		case IDHash(k.id) != id.Hash:
			mismatch(k.id, "compact ID %016x at offset %d; the command there hashes to %016x", id.Hash, id.First, IDHash(k.id))
		case !h.terminal():
			mismatch(k.id, "compact ID at offset %d of a command that is not settled", id.First)
		case terminalOffset(h) >= 0 && terminalOffset(h) != id.Outcome:
			mismatch(k.id, "compact ID says the outcome is at offset %d, the records %d", id.Outcome, terminalOffset(h))
		}
	}
	for k, h := range v.commands {
		if k.role != role || held[k.id] || compact[k] {
			continue
		}
		if !h.terminal() {
			mismatch(k.id, "the checkpoint does not hold a command that is not settled")
			continue
		}
		at := h.Command().SubmittedAt
		if h.Issued == nil && len(h.Outcomes) > 0 {
			at = h.Outcomes[0].At
		}
		if !at.IsZero() && e.At.Sub(at) < cp.Window-time.Second {
			mismatch(k.id, "the checkpoint does not hold a settled command submitted %s before it, inside its window of %s", e.At.Sub(at), cp.Window)
		}
	}
}
