package dispatch

import (
	"fmt"
	"sync"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// StaleTokenError reports a dispatch under a token below the highest that a
// [TokenFence] has admitted: a deposed leader woke in the zombie window. It
// is a refusal: [TokenFence.Admit] returns it marked [Rejected].
type StaleTokenError struct {
	// Token is the token refused.
	Token coordination.FencingToken

	// Highest is the highest token admitted before.
	Highest coordination.FencingToken
}

// Error names both tokens.
func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("dispatch: token %s is below %s, already seen: a newer leader holds the role", e.Token, e.Highest)
}

// TokenFence is the device-side defence of the zombie window (see the
// package doc): it admits a token only when no higher one was admitted
// before. A Device, or a gateway in front of hardware, keeps one per piece
// of hardware and calls Admit before it acts. Its zero value is ready, and it
// is safe for concurrent use.
//
// The fence lives as long as the process that holds it; hardware that must
// survive a restart of its gateway keeps the highest token in its own
// storage, as the Modbus fence registers do.
type TokenFence struct {
	mu      sync.Mutex
	highest coordination.FencingToken
	seen    bool
}

// Admit records token and returns nil when it is at least the highest seen;
// otherwise it returns a *[StaleTokenError] marked [Rejected], and the device
// must not act.
func (f *TokenFence) Admit(token coordination.FencingToken) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen && token.Compare(f.highest) < 0 {
		return Rejected(&StaleTokenError{Token: token, Highest: f.highest})
	}
	f.highest, f.seen = token, true
	return nil
}

// Highest returns the highest token admitted; ok is false before the first.
func (f *TokenFence) Highest() (token coordination.FencingToken, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.highest, f.seen
}
