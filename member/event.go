package member

import (
	"fmt"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// EventKind names what happened to a member.
type EventKind int

// The kinds of [Event], in the order one leadership produces them.
const (
	// EventElected: the member acquired the role. Term, Token and Lease are
	// the leadership's.
	EventElected EventKind = iota + 1
	// EventReady: the dispatcher recovered the role's state from the command
	// log and takes commands. A member without a dispatcher is ready when it
	// is elected.
	EventReady
	// EventDeposed: the leadership ended without a resignation, or the
	// dispatcher stopped on its own and the member resigned. Err says why: a
	// fence wraps coordination.ErrFenced, a stopped dispatcher wraps
	// ErrDispatcherStopped and the dispatcher's error.
	EventDeposed
	// EventDraining: the member is stopping while it leads; intake is
	// stopped and the commands it took are finishing.
	EventDraining
	// EventResigned: the member gave the role up on stopping; a standby
	// takes over at once.
	EventResigned
	// EventAbandoned: the member stopped while leading and could not
	// resign (Err says why); the standbys wait for its lease to run out.
	EventAbandoned
	// EventCampaignFailed: a campaign failed (Err says why); the member
	// campaigns again after Pause.
	EventCampaignFailed
	// EventStopped: Run is about to return.
	EventStopped
)

// String names the kind.
func (k EventKind) String() string {
	switch k {
	case EventElected:
		return "elected"
	case EventReady:
		return "ready"
	case EventDeposed:
		return "deposed"
	case EventDraining:
		return "draining"
	case EventResigned:
		return "resigned"
	case EventAbandoned:
		return "abandoned"
	case EventCampaignFailed:
		return "campaign-failed"
	case EventStopped:
		return "stopped"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is one change of a member.
type Event struct {
	Kind EventKind
	// At is when the member saw the change.
	At     time.Time
	Role   string
	Member string
	// Term orders the leadership the event is about; coordination.NoTerm
	// for the events outside a leadership.
	Term coordination.Term
	// Token is the leadership's fencing token when the event happened.
	Token coordination.FencingToken
	// Lease is the lease granted at election (EventElected only).
	Lease coordination.Lease
	// Err is the cause of EventDeposed, EventAbandoned and
	// EventCampaignFailed.
	Err error
	// Pause is how long the member waits before it campaigns again
	// (EventDeposed and EventCampaignFailed).
	Pause time.Duration
}
