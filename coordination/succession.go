package coordination

import "strconv"

// Action is the step that one member takes about a role now.
type Action int

const (
	// ActionNotRegistered says that the member is not in the roster of the
	// role, so it has no rank. It registers first, reads the partition again,
	// and evaluates again.
	ActionNotRegistered Action = iota

	// ActionHold says that this member holds the role and that its lease is
	// live. It renews the lease, and it calls InitProducerId for nothing.
	ActionHold

	// ActionChallenge says that this member calls InitProducerId now.
	ActionChallenge

	// ActionWait says that this member waits and then evaluates the role
	// state again. [Decision.WaitUntil] carries the instant.
	ActionWait
)

// String names the action.
func (a Action) String() string {
	switch a {
	case ActionNotRegistered:
		return "not registered"
	case ActionHold:
		return "hold"
	case ActionChallenge:
		return "challenge"
	case ActionWait:
		return "wait"
	}
	return "Action(" + strconv.Itoa(int(a)) + ")"
}

// Decision is what one member does about a role right now. [Evaluate] returns
// one.
type Decision struct {
	// Action is the step that the member takes now.
	Action Action

	// WaitUntil is the instant of the next evaluation, in milliseconds since
	// the Unix epoch. It carries a value for [ActionWait] only.
	WaitUntil int64
}

// Evaluate decides what one member does about a role at this instant.
//
// The rules are:
//
//  1. A member that is not in the roster gets [ActionNotRegistered]. It has
//     no rank, because rank comes from the registration record.
//  2. A member that the lease names, while that lease is live, gets
//     [ActionHold].
//  3. A challenger of rank n gets [ActionChallenge] from the deadline plus n
//     challenge staggers on. With no lease, the anchor is the registration
//     instant of the member instead of a deadline, so rank 0 challenges at
//     once and rank n challenges n staggers later.
//  4. Every other member gets [ActionWait]. The instant it carries is the
//     earliest instant at which this answer changes for an unchanged role
//     state.
//
// The anchor of rule 3 always comes from the role state, and never from the
// current instant. A member that has no lease to wait for anchors on its own
// registration record. An anchor of "now plus n staggers" would move forward
// on every evaluation, and a standby of rank 1 or more would then wait for
// ever while rank 0 is dead.
//
// The member of an expired lease keeps rank 0, so it reclaims its own role at
// its own deadline. See [RoleState.RankOf].
//
// A caller evaluates again when it reads a new record, and at the latest at
// the instant that [Decision.WaitUntil] names.
func Evaluate(state RoleState, member MemberID, nowMillis int64, config LeaseConfig) Decision {
	entry, ok := state.Entry(member)
	if !ok {
		return Decision{Action: ActionNotRegistered}
	}
	rank, _ := state.RankOf(member)
	var challengeAt int64
	if state.Lease != nil {
		timing := config.Timing(*state.Lease)
		if state.Lease.Member == member && timing.LiveAt(nowMillis) {
			return Decision{Action: ActionHold}
		}
		challengeAt = timing.ChallengeAt(rank)
	} else {
		challengeAt = addMillis(entry.RegisteredAt, config.ChallengeDelay(rank))
	}
	if nowMillis >= challengeAt {
		return Decision{Action: ActionChallenge}
	}
	return Decision{Action: ActionWait, WaitUntil: challengeAt}
}
