package ceiling

import (
	"slices"
	"sync"
	"time"
)

// RoundPhases is where one round of a closed-loop submit spent its time, in
// the order it happens. Prepare is the client's own: building the round's
// commands. ToWrite runs from the submit call to the start of the
// transaction that carried the round's Issued records (the dispatcher's
// accepting and queueing them, and a checkpoint's encoding when one is
// due), Write is that transaction (through Leadership.Write), Effects from
// its commit until its effects were applied or the round's last device act,
// whichever came first, Acts from then to the last device act, and Back
// from the last act until the client saw it and the next round could begin.
type RoundPhases struct {
	Prepare, ToWrite, Write, Effects, Acts, Back time.Duration
}

// Outside returns the phases outside the dispatcher's transaction.
func (p RoundPhases) Outside() time.Duration {
	return p.Prepare + p.ToWrite + p.Effects + p.Acts + p.Back
}

// MedianPhases returns the median of each phase over rounds.
func MedianPhases(rounds []RoundPhases) RoundPhases {
	median := func(of func(RoundPhases) time.Duration) time.Duration {
		v := make([]float64, len(rounds))
		for i, r := range rounds {
			v[i] = float64(of(r))
		}
		return time.Duration(Median(v))
	}
	return RoundPhases{
		Prepare: median(func(r RoundPhases) time.Duration { return r.Prepare }),
		ToWrite: median(func(r RoundPhases) time.Duration { return r.ToWrite }),
		Write:   median(func(r RoundPhases) time.Duration { return r.Write }),
		Effects: median(func(r RoundPhases) time.Duration { return r.Effects }),
		Acts:    median(func(r RoundPhases) time.Duration { return r.Acts }),
		Back:    median(func(r RoundPhases) time.Duration { return r.Back }),
	}
}

// issuedWrites logs the dispatcher's committed transactions that carried
// Issued records: when each began and committed, and when the dispatcher
// reported it to WithOnCommitted, after its effects. Only its commit loop
// adds to either, one transaction after another, so the nth report is the
// nth transaction's.
type issuedWrites struct {
	mu      sync.Mutex
	writes  []issuedWrite
	applied int // how many of writes have their applied time
}

// issuedWrite is one transaction with Issued records.
type issuedWrite struct {
	began, committed, applied time.Time
}

// wrote logs a committed transaction with Issued records.
func (w *issuedWrites) wrote(began, committed time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, issuedWrite{began: began, committed: committed})
}

// reported logs that the effects of the oldest transaction not yet
// reported were applied.
func (w *issuedWrites) reported(at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.applied < len(w.writes) {
		w.writes[w.applied].applied = at
		w.applied++
	}
}

// mark returns how many transactions are logged.
func (w *issuedWrites) mark() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.writes)
}

// from returns the transactions logged from mark on, once every one of
// them was reported, or as they stand when that takes longer than wait:
// the devices may act before the dispatcher reports the last transaction.
func (w *issuedWrites) from(mark int, wait time.Duration) []issuedWrite {
	for deadline := time.Now().Add(wait); ; time.Sleep(time.Millisecond) {
		w.mu.Lock()
		if w.applied == len(w.writes) || time.Now().After(deadline) {
			out := slices.Clone(w.writes[mark:])
			w.mu.Unlock()
			return out
		}
		w.mu.Unlock()
	}
}

// roundMarks are the instants of one round that the client sees: its
// start, its submit call, its last device act and the end of its wait.
type roundMarks struct {
	began, called, lastAct, back time.Time
}

// phasesOf splits each round into its phases, with the last transaction
// with Issued records that began within it. A round without one, as when a
// write failed, is left out.
func phasesOf(rounds []roundMarks, writes []issuedWrite) []RoundPhases {
	var out []RoundPhases
	next := 0
	for _, r := range rounds {
		var w *issuedWrite
		for ; next < len(writes) && !writes[next].began.After(r.back); next++ {
			if !writes[next].began.Before(r.called) {
				w = &writes[next]
			}
		}
		if w == nil {
			continue
		}
		applied := w.applied
		if applied.IsZero() || applied.After(r.lastAct) {
			applied = r.lastAct
		}
		out = append(out, RoundPhases{
			Prepare: r.called.Sub(r.began),
			ToWrite: w.began.Sub(r.called),
			Write:   w.committed.Sub(w.began),
			Effects: max(0, applied.Sub(w.committed)),
			Acts:    r.lastAct.Sub(applied),
			Back:    r.back.Sub(r.lastAct),
		})
	}
	return out
}
