package fence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// ResetAction is the action of a command that resets a key's fence: it
// sets the highest term to the floor that its payload names, lower or
// higher than the one held, for a move to another cluster whose terms
// start again from low values, or after a key change. Only
// [Store.AdmitSigned] applies it, so only a holder of the device key can
// send one. Its payload is JSON:
//
//	{"floor": 1, "reason": "move plant-a to cluster b"}
//
// "floor" is a term of at least 1; "reason" is free text that may not be
// empty. A reset needs a deadline, and the store keeps the ids of the last
// MaxResetIDs resets per key in its state file, so that a reset is applied
// once even if it is delivered again after its effect was overtaken.
const ResetAction = "fence.reset"

// MaxRecentIDs bounds the command ids per key that AdmitSigned remembers
// within the highest term to refuse a replay.
const MaxRecentIDs = 1024

// MaxResetIDs bounds the reset ids per key kept in the state file.
const MaxResetIDs = 16

// ErrReplayed reports a command id that AdmitSigned already admitted for
// its key within the highest term, or a reset applied before. A device
// that deduplicates answers it with its earlier reply and does not act
// again.
var ErrReplayed = errors.New("fence: command already admitted")

// ErrExpired reports a command whose deadline has passed.
var ErrExpired = errors.New("fence: command deadline passed")

// ErrBadReset reports a reset command that AdmitSigned refuses as
// malformed: a payload that is not the documented JSON, a floor below 1,
// an empty reason, or no deadline.
var ErrBadReset = errors.New("fence: malformed reset")

// Admission says what AdmitSigned did with an authenticated command.
type Admission struct {
	// Reset is true when the command was a reset and the key's highest
	// term is now Floor; the device does nothing else for it.
	Reset bool
	// Floor is the term a reset set.
	Floor coordination.Term
	// Reason is the reason a reset gave.
	Reason string
}

// resetPayload is the JSON payload of a ResetAction command.
type resetPayload struct {
	Floor  *int64 `json:"floor"`
	Reason string `json:"reason"`
}

// AdmitSigned verifies and admits one command, the single call that device
// firmware in Go makes for each message. In order, and stopping at the
// first refusal, it:
//
//  1. verifies mac over the canonical encoding of cmd under the key kid of
//     v ([*AuthError], matching ErrUnauthenticated): nothing of the store
//     is read or changed for a forged or altered command, so a forged term,
//     however large, cannot lock out the real leader;
//  2. refuses a deadline before now (ErrExpired);
//  3. applies a ResetAction command (see there), whatever its term;
//  4. refuses a command id already admitted for cmd.Device within the
//     highest term (ErrReplayed), remembering the last MaxRecentIDs ids;
//  5. admits cmd's authority for the key cmd.Device as [Store.Admit] does.
//
// The memory of command ids lives in the process and starts empty at
// Open: after a restart a replay of a command of the current term is
// refused only by its deadline, so a dispatcher that sends to fenced
// devices should give every command a deadline. A command of an earlier
// term is refused by the term in every case.
func (s *Store) AdmitSigned(v *Verifier, cmd Command, kid string, mac []byte, now time.Time) (Admission, error) {
	if err := v.Verify(kid, cmd.AppendCanonical(nil), mac); err != nil {
		return Admission{}, err
	}
	if !cmd.Deadline.IsZero() && now.After(cmd.Deadline) {
		return Admission{}, fmt.Errorf("%w: command %q, deadline %s", ErrExpired, cmd.ID, cmd.Deadline.UTC().Format(time.RFC3339Nano))
	}
	if cmd.Action == ResetAction {
		return s.reset(cmd)
	}
	authority := cmd.Authority()
	if authority.Token.Compare(coordination.NoEpoch) == 0 {
		return Admission{}, ErrNoToken
	}
	if authority.Term.Compare(coordination.NoTerm) <= 0 {
		return Admission{}, ErrNoTerm
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := cmd.Device
	highest, seen := s.highest[key]
	if seen {
		switch c := authority.Compare(highest); {
		case c < 0:
			return Admission{}, &StaleTermError{Key: key, Authority: authority, Highest: highest}
		case c == 0:
			if s.recent[key].has(cmd.ID) {
				return Admission{}, fmt.Errorf("%w: command %q for %q", ErrReplayed, cmd.ID, key)
			}
			s.remember(key, cmd.ID)
			return Admission{}, nil
		}
	}
	if err := s.raiseLocked(key, authority); err != nil {
		return Admission{}, err
	}
	s.remember(key, cmd.ID)
	return Admission{}, nil
}

// reset applies an authenticated ResetAction command.
func (s *Store) reset(cmd Command) (Admission, error) {
	var p resetPayload
	dec := json.NewDecoder(bytes.NewReader(cmd.Payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Admission{}, fmt.Errorf("%w: payload: %w", ErrBadReset, err)
	}
	switch {
	case dec.More():
		return Admission{}, fmt.Errorf("%w: trailing data after the payload", ErrBadReset)
	case p.Floor == nil || *p.Floor < 1:
		return Admission{}, fmt.Errorf("%w: floor must be a term of at least 1", ErrBadReset)
	case p.Reason == "":
		return Admission{}, fmt.Errorf("%w: no reason", ErrBadReset)
	case cmd.Deadline.IsZero():
		return Admission{}, fmt.Errorf("%w: no deadline", ErrBadReset)
	case cmd.Token.Compare(coordination.NoEpoch) == 0:
		return Admission{}, ErrNoToken
	}
	key := cmd.Device
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range s.resets[key] {
		if id == cmd.ID {
			return Admission{}, fmt.Errorf("%w: reset %q for %q", ErrReplayed, cmd.ID, key)
		}
	}
	ids := append(append([]string(nil), s.resets[key]...), cmd.ID)
	if len(ids) > MaxResetIDs {
		ids = ids[len(ids)-MaxResetIDs:]
	}
	resets := make(map[string][]string, len(s.resets)+1)
	for k, v := range s.resets {
		resets[k] = v
	}
	resets[key] = ids
	highest := make(map[string]coordination.Authority, len(s.highest)+1)
	for k, v := range s.highest {
		highest[k] = v
	}
	floor := coordination.Term(*p.Floor)
	highest[key] = coordination.Authority{Term: floor, Token: cmd.Token}
	if err := s.write(highest, resets); err != nil {
		return Admission{}, err
	}
	s.highest, s.resets = highest, resets
	delete(s.recent, key)
	return Admission{Reset: true, Floor: floor, Reason: p.Reason}, nil
}

// remember records id as admitted for key. s.mu is held.
func (s *Store) remember(key, id string) {
	r := s.recent[key]
	if r == nil {
		r = &idRing{ids: make(map[string]struct{})}
		s.recent[key] = r
	}
	r.add(id)
}

// idRing is a bounded set of ids that forgets the oldest first.
type idRing struct {
	order []string
	ids   map[string]struct{}
}

func (r *idRing) has(id string) bool {
	if r == nil {
		return false
	}
	_, ok := r.ids[id]
	return ok
}

func (r *idRing) add(id string) {
	r.ids[id] = struct{}{}
	r.order = append(r.order, id)
	if len(r.order) > MaxRecentIDs {
		delete(r.ids, r.order[0])
		r.order = r.order[1:]
	}
}
