// Package httpapi is the HTTP face of one dispatcher member: a small JSON
// API to submit a command, read a command's state and read the leadership,
// the health endpoints a load balancer or orchestrator probes, Prometheus
// /metrics, and the status page.
//
// Every member serves the API, leader or not. A write that only the leader
// can take (a submission, a resolve) reaching a standby is answered with
// 307 Temporary Redirect to the same path on the leader, whose base URL the
// standby takes from the configuration's members list (the member id of the
// holder comes from the lease record); clients that follow redirects need
// not know who leads. With no known leader the answer is 503 with
// Retry-After.
//
// Endpoints:
//
//	GET  /                           the status page (HTML)
//	GET  /v1/leadership              who leads, roster with ranks, lease, term, token
//	GET  /v1/commands?limit=N        the most recent commands with their state
//	POST /v1/commands                submit a command (bearer token)
//	POST /v1/commands/batch          submit up to 1,000 commands at once (bearer token)
//	GET  /v1/commands/{id}           one command's state
//	POST /v1/commands/{id}/resolve   settle a command in doubt (bearer token)
//	GET  /livez                      200 while the process runs
//	GET  /readyz                     200 while the member takes part in the role
//	GET  /leaderz                    200 on the leader once it takes commands, 503 elsewhere
//	GET  /metrics                    Prometheus exposition
//
// Taking the lease is not being ready to lead: a new leader first reads the
// role's log (recovery) and takes no command until it has. Every answer that
// tells the leadership names the member's state ([MemberState]): standby,
// recovering (it holds the lease and reads the log), leading (it holds the
// lease and takes commands) or draining (it is stopping and takes nothing
// new). /leaderz, the probe a load balancer uses to pick where commands go,
// answers 200 only in the leading state, and its body starts with the state
// in every answer ("leading: term 4096 token 7:3", "recovering: holds the
// lease, term 4096; reading the role's log, takes no command yet",
// "standby: node-1 leads"). /readyz answers 503 while the member recovers,
// with the state in its body, and 200 on a standby that reads the role's
// state: a standby takes part by standing by. The status page and
// GET /v1/leadership ("state") show the same state.
//
// A submission is answered 200 with the command's state once it settled, or
// 202 while it is pending; a second submission of the same command under the
// same ID is answered the same way, with the first one's state. Refusals come
// before anything is written to the command log:
//
//	400  the request is malformed: not JSON, a field missing or invalid
//	409  the ID is taken by a different command; the body names the ID and
//	     the fields that differ ("id", "differs")
//	422  the request is well-formed but cannot be carried out: no device is
//	     registered under its name, or the device refuses its action or
//	     payload (dispatch.CommandValidator)
//
// A batch (POST /v1/commands/batch, a [BatchRequest]) is submitted as the
// dispatcher's SubmitBatch takes it: its commands share transactions, which
// carries many commands for the cost of a few commits. It is answered 200
// with an item per command ([BatchResponse]) holding the status that the
// command alone would have got, 200, 202 or its refusal; the request as a
// whole is refused only when it is malformed (400), or redirected from a
// standby.
//
// The write endpoints demand "Authorization: Bearer <token>" when a token is
// configured (the scheme's name in any case), compared in constant time.
// With [Options.ProtectReads] every endpoint but the health probes
// /livez, /readyz and /leaderz demands it too. TLS, when configured, is the
// http.Server's: the handler does not see it.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// Backend is what the API needs of a member. The member runtime implements
// it; a test passes a fake.
type Backend interface {
	// Leadership reports the member's view of the role now.
	Leadership() Leadership

	// Submit hands a command to the leader's dispatcher and waits up to wait
	// for its outcome (zero: not at all). It returns a *NotLeaderError on a
	// member that does not lead.
	Submit(ctx context.Context, cmd dispatch.Command, wait time.Duration) (CommandState, error)

	// Command returns the state of one command, and false for an ID the
	// member does not know.
	Command(id string) (CommandState, bool)

	// Recent returns up to limit commands, newest first.
	Recent(limit int) []CommandState

	// SubmitBatch hands cmds to the leader's dispatcher as one batch and
	// waits up to wait for their outcomes, as Submit does each. It returns
	// one result per command, in order, a command's refusal in its
	// result's Err; and a *NotLeaderError, with no result, on a member
	// that does not lead.
	SubmitBatch(ctx context.Context, cmds []dispatch.Command, wait time.Duration) ([]BatchResult, error)

	// Resolve settles a command in doubt and waits for its new outcome. It
	// returns a *NotLeaderError on a member that does not lead.
	Resolve(ctx context.Context, id string, action dispatch.ResolveAction) (CommandState, error)

	// Ready reports whether the member takes part in the role: it leads
	// and finished reading the role's log (Leadership's State is
	// StateLeading), or it stands by and its last
	// read of the role's state succeeded; and, when the member is so
	// configured, every device's last health check passed.
	Ready() error
}

// MemberState is what a member does for its role: whether it stands by,
// holds the lease and recovers, or leads and takes commands.
type MemberState string

// The states of a member.
const (
	// StateStandby: the member does not hold the role.
	StateStandby MemberState = "standby"
	// StateRecovering: the member holds the lease and reads the role's log;
	// it takes no command yet.
	StateRecovering MemberState = "recovering"
	// StateLeading: the member holds the lease, recovered, and takes
	// commands. Only this state answers /leaderz with 200.
	StateLeading MemberState = "leading"
	// StateDraining: the member still holds the lease but is stopping; it
	// takes no new command and lets the ones it took finish.
	StateDraining MemberState = "draining"
)

// Leadership is a member's view of its role.
type Leadership struct {
	Role   string `json:"role"`
	Member string `json:"member"`
	// Leader reports whether this member holds the role now: it holds the
	// lease, whatever its State.
	Leader bool `json:"leader"`
	// State tells whether the member stands by, recovers, takes commands or
	// drains. A Leader that is not StateLeading takes no command.
	State MemberState `json:"state"`
	// Holder is the member the lease names, if any; HolderURL its API.
	Holder    string `json:"holder,omitempty"`
	HolderURL string `json:"holder_url,omitempty"`
	// Term is the holder's term, which orders leaderships: a later
	// leadership has a higher term. Absent (zero) when the role has none.
	Term coordination.Term `json:"term,omitempty"`
	// Token is the holder's fencing token, as producer_id:producer_epoch:
	// what the broker enforces on the holder's writes. It does not order
	// leaderships, since its producer id may rotate to a lower one within a
	// term.
	Token string `json:"token,omitempty"`
	// LeaseDeadline is when the holder's lease ends unless renewed.
	LeaseDeadline *time.Time `json:"lease_deadline,omitempty"`
	// LeaseRemainingMS is the lease left, in milliseconds, at ObservedAt.
	LeaseRemainingMS int64 `json:"lease_remaining_ms"`
	// Roster lists the members in registration order with their ranks.
	Roster []RosterMember `json:"roster"`
	// ObservedAt is when the member last read the role's state.
	ObservedAt time.Time `json:"observed_at"`
	// Devices is the last health check of each device, by name; empty
	// before the first check.
	Devices []DeviceHealth `json:"devices"`
}

// DeviceHealth is the answer of one device's last health check.
type DeviceHealth struct {
	Device    string `json:"device"`
	Reachable bool   `json:"reachable"`
	// Error is the check's error when the device is unreachable.
	Error     string    `json:"error,omitempty"`
	CheckedAt time.Time `json:"checked_at"`
}

// RosterMember is one member of the roster.
type RosterMember struct {
	Member string `json:"member"`
	Rank   int    `json:"rank"`
	Holder bool   `json:"holder"`
	URL    string `json:"url,omitempty"`
}

// CommandState is what one member knows of one command.
type CommandState struct {
	ID     string `json:"id"`
	Device string `json:"device"`
	Action string `json:"action"`
	// State is "pending" until an outcome is recorded, then the outcome's
	// status: succeeded, failed, expired, rejected, in-doubt, cancelled.
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	// Detail is the device's account of what it did.
	Detail      string    `json:"detail,omitempty"`
	Member      string    `json:"member,omitempty"`
	SubmittedAt time.Time `json:"submitted_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// StatePending is the State of a command without a recorded outcome.
const StatePending = "pending"

// NotLeaderError reports a request that only the leader can take, made to a
// member that does not lead.
type NotLeaderError struct {
	// Member is the member that was asked.
	Member string
	// Leader is the member that leads, "" when none is known; LeaderURL is
	// its API, "" when the members list does not name it.
	Leader    string
	LeaderURL string
}

func (e *NotLeaderError) Error() string {
	if e.Leader == "" {
		return fmt.Sprintf("member %s does not lead, and no leader is known", e.Member)
	}
	return fmt.Sprintf("member %s does not lead; %s does", e.Member, e.Leader)
}

// ErrUnknownCommand reports a command ID the member does not know.
var ErrUnknownCommand = errors.New("unknown command")
