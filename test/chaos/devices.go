package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// The two devices of a chaos run.
const (
	// FencedDevice refuses any term lower than the highest it has seen.
	FencedDevice = "fenced"

	// PlainDevice obeys every call, as hardware without a fence does.
	PlainDevice = "plain"
)

// Verdicts of a device call.
const (
	VerdictObeyed  = "obeyed"
	VerdictRefused = "refused"
)

// Call is one call that a device received, as its record file holds it.
type Call struct {
	// Device is the device name, FencedDevice or PlainDevice.
	Device string `json:"device"`

	// Role is the role whose leader dispatched; empty when the device
	// cannot tell.
	Role string `json:"role,omitempty"`

	// ID is the command ID.
	ID string `json:"id"`

	// Term is the term the dispatcher passed; 0 for none.
	Term int64 `json:"term"`

	// Token is the fencing token the dispatcher passed, producer_id:epoch.
	Token string `json:"token"`

	// Member is the member that dispatched.
	Member string `json:"member"`

	// At is when the device received the call, in Unix nanoseconds.
	At int64 `json:"at"`

	// Verdict says whether the device acted.
	Verdict string `json:"verdict"`
}

// authority writes the call's term and token as coordination.Authority
// writes them, or the raw token when it does not parse.
func (c Call) authority() string {
	tok, err := coordination.ParseFencingToken(c.Token)
	if err != nil {
		return "term " + coordination.Term(c.Term).String() + " token " + c.Token
	}
	return coordination.Authority{Term: coordination.Term(c.Term), Token: tok}.String()
}

// ReadCalls reads the record file of one device, in arrival order.
func ReadCalls(dir, device string) ([]Call, error) {
	f, err := os.Open(filepath.Join(dir, device+".jsonl"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var calls []Call
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c Call
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return nil, fmt.Errorf("%s: %w", device, err)
		}
		calls = append(calls, c)
	}
	return calls, sc.Err()
}
