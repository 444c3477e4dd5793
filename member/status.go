package member

import (
	"fmt"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// Phase is where a member stands.
type Phase int

// The phases of a member.
const (
	// PhaseIdle: Run was not called yet.
	PhaseIdle Phase = iota
	// PhaseCampaigning: the member waits for the role.
	PhaseCampaigning
	// PhaseRecovering: the member leads and its dispatcher reads the role's
	// state from the command log; it takes no command yet.
	PhaseRecovering
	// PhaseLeading: the member leads and takes commands.
	PhaseLeading
	// PhaseDraining: the member is stopping while it leads; it takes no new
	// command and lets the ones it took finish.
	PhaseDraining
	// PhaseResigning: the stopping member halted its dispatcher and gives
	// the role up; it no longer leads.
	PhaseResigning
	// PhasePausing: the member waits before it campaigns again.
	PhasePausing
	// PhaseStopped: Run returned.
	PhaseStopped
)

// String names the phase.
func (p Phase) String() string {
	switch p {
	case PhaseIdle:
		return "idle"
	case PhaseCampaigning:
		return "campaigning"
	case PhaseRecovering:
		return "recovering"
	case PhaseLeading:
		return "leading"
	case PhaseDraining:
		return "draining"
	case PhaseResigning:
		return "resigning"
	case PhasePausing:
		return "pausing"
	case PhaseStopped:
		return "stopped"
	}
	return fmt.Sprintf("Phase(%d)", int(p))
}

// Status is a snapshot of a member ([Member.Status]).
type Status struct {
	Role   string
	Member string
	Phase  Phase
	// Since is when the member entered Phase.
	Since time.Time
	// Authority is the leadership's term and current token while the member
	// leads (recovering, leading or draining); coordination.NoTerm and
	// coordination.NoEpoch otherwise.
	Authority coordination.Authority
	// Lease is the leadership's lease while the member leads.
	Lease coordination.Lease
	// Elections counts the leaderships the member won.
	Elections int
	// LastErr is the cause of the last leadership that ended or the last
	// campaign that failed; nil before either.
	LastErr error

	recovered bool // the dispatcher of the leadership recovered
}

// Leading reports whether the member holds the role: recovering, leading
// or draining.
func (s Status) Leading() bool {
	return s.Phase == PhaseRecovering || s.Phase == PhaseLeading || s.Phase == PhaseDraining
}

// Recovered reports whether the member leads and its dispatcher finished
// reading the role's state: what a readiness probe of a leader asks. It stays
// true while the member drains.
func (s Status) Recovered() bool {
	return s.Phase == PhaseLeading || s.Phase == PhaseDraining && s.recovered
}
