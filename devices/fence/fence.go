// Package fence lets a device, or a gateway in front of devices, refuse
// commands from a deposed leader.
//
// The dispatcher's broker fences its own log writes, but not the commands a
// device receives over MQTT or Modbus: a leader that was paused after its log
// commit may wake and publish after a successor took over. Every command
// carries the authority it was issued under (a [coordination.Authority]): the
// term of the leadership that issued it, which orders leaderships, and the
// fencing token that the broker enforced on its record. Terms only grow from
// one leadership to the next; tokens do not, since a role's producer id may
// rotate to a lower one within a leadership. A [Store] therefore remembers the
// highest term seen per key (a device name, or any other scope of one
// leader's commands), and [Store.Admit] refuses a lower term with a
// [*StaleTermError]. Within the highest term any token is admitted: it is the
// same leadership, whose tokens the broker already checked.
//
// The highest term survives a restart: Admit writes a higher term to the
// state file before it returns, by writing a temporary file in the same
// directory, syncing it, renaming it over the state file and syncing the
// directory. A crash leaves the old file or the new one, never a mix, and a
// device that restarts does not accept a term it had already outranked. A
// state file that does not parse makes [Open] fail with a [*CorruptError];
// it is never silently reset, since an empty state admits every term. A state
// file of version 1, which held tokens without terms, still opens: its keys
// hold [coordination.NoTerm], which every term outranks.
//
// # Authenticated commands
//
// A term is only worth what its sender is: anyone who can publish to a
// device's topic could otherwise send the largest term and make the store
// refuse every real leader from then on. [Store.AdmitSigned] takes the
// command's fields ([Command]), the id of the key it names and its MAC, and
// verifies the HMAC-SHA256 over the command's canonical encoding
// ([Command.AppendCanonical]) with a [Verifier] of the device's keys before
// it reads or writes any state: a forged or altered command is refused with
// an [*AuthError] and changes nothing. It then refuses a command past its
// deadline, refuses the replay of a command id it admitted within the
// highest term, and applies the authenticated reset [ResetAction], by which
// an operator moves a device to another cluster or resets it after a key
// change. The Verifier signs the device's replies too ([Reply]).
//
// Typical use in firmware that receives commands over MQTT:
//
//	store, err := fence.Open("/var/lib/valve/fence.json")
//	...
//	keys, err := fence.NewVerifier(fence.Key{ID: "2026-11", Secret: secret})
//	...
//	env, err := mqtt.DecodeEnvelope(msg.Payload())
//	...
//	adm, err := store.AdmitSigned(keys, env.Signed(), env.KeyID, env.MAC, time.Now())
//	if err != nil {
//		// ErrUnauthenticated: drop it; ErrStaleTerm, ErrExpired: reply
//		// "rejected"; ErrReplayed: send the earlier reply again. Do not act.
//	}
//
// [Store.Admit] remains for devices on a link where every sender is
// trusted, such as a Modbus unit on a serial line behind the dispatcher.
//
// A Store is safe for concurrent use. One file belongs to one Store: two
// Stores, in one process or two, on one file lose each other's updates.
package fence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// FileVersion is the value of the "v" field of the state file that Admit
// writes. Version 1 held tokens without terms, version 2 no reset ids;
// [Open] still reads both.
const FileVersion = 3

// fileVersionTerms is the version of a state file without reset ids.
const fileVersionTerms = 2

// fileVersionTokens is the version of a state file that held tokens only.
const fileVersionTokens = 1

// ErrStaleTerm is matched by every [*StaleTermError].
var ErrStaleTerm = errors.New("fence: term lower than one already admitted")

// ErrNoToken reports coordination.NoEpoch passed to Admit: it proves no
// leadership and is never admitted.
var ErrNoToken = errors.New("fence: no fencing token")

// ErrNoTerm reports coordination.NoTerm passed to Admit: a command without a
// term cannot be ordered against a leadership and is never admitted.
var ErrNoTerm = errors.New("fence: no term")

// ErrCorrupt is matched by every [*CorruptError].
var ErrCorrupt = errors.New("fence: state file is corrupt")

// StaleTermError reports a term lower than the highest admitted for its key:
// the command comes from a leadership that a later one replaced, and must not
// be acted on.
type StaleTermError struct {
	// Key is the key the authority was presented for.
	Key string
	// Authority is the term and token presented.
	Authority coordination.Authority
	// Highest is the highest term admitted for Key, with the token that
	// first carried it to the store.
	Highest coordination.Authority
}

func (e *StaleTermError) Error() string {
	return fmt.Sprintf("fence: term %s (token %s) for %q is below term %s, already admitted",
		e.Authority.Term, e.Authority.Token, e.Key, e.Highest.Term)
}

// Is reports whether target is ErrStaleTerm.
func (e *StaleTermError) Is(target error) bool { return target == ErrStaleTerm }

// CorruptError reports a state file that Open cannot read as a state.
type CorruptError struct {
	// Path is the state file.
	Path string
	// Err says what is wrong.
	Err error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("fence: state file %s is corrupt (remove it only if no term may have been admitted since): %v", e.Path, e.Err)
}

// Is reports whether target is ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Unwrap returns the underlying error.
func (e *CorruptError) Unwrap() error { return e.Err }

// Store keeps the highest admitted term per key in a state file.
type Store struct {
	path string

	mu      sync.Mutex
	highest map[string]coordination.Authority
	// resets holds, per key, the ids of the last resets admitted, which
	// are kept in the state file so that a reset is never applied twice.
	resets map[string][]string
	// recent holds, per key, the ids of the commands admitted by
	// AdmitSigned within the highest term; it is not kept in the file.
	recent map[string]*idRing

	// beforeRename, when set, runs after the temporary file is synced and
	// before it is renamed; tests use it to fail or stop the write there.
	beforeRename func(tmp string) error
}

// fileState is the JSON form of the state file:
//
//	{"v":3,"tokens":{"valve-1":{"term":42,"producer_id":1001,"producer_epoch":3,"resets":["reset-7"]}}}
//
// A version-1 file has no "term" fields, a version-2 file no "resets". A
// file of version 2 or 3 holds term 0
// (coordination.NoTerm) for a key that a version-1 file brought and no
// termed command has reached since.
type fileState struct {
	V      int                  `json:"v"`
	Tokens map[string]fileToken `json:"tokens"`
}

type fileToken struct {
	Term          *int64   `json:"term,omitempty"`
	ProducerID    *int64   `json:"producer_id"`
	ProducerEpoch *int16   `json:"producer_epoch"`
	Resets        []string `json:"resets,omitempty"`
}

// Open loads the state file at path, or starts empty when it does not
// exist; the directory must exist. It removes temporary files that a crash
// during a write left beside it. A file that does not hold a valid state is
// a *CorruptError.
func Open(path string) (*Store, error) {
	s := &Store{
		path:    path,
		highest: make(map[string]coordination.Authority),
		resets:  make(map[string][]string),
		recent:  make(map[string]*idRing),
	}
	removeLeftovers(path)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Stat(filepath.Dir(path)); err != nil {
			return nil, fmt.Errorf("fence: state directory: %w", err)
		}
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fence: read state: %w", err)
	}
	if err := s.decode(data); err != nil {
		return nil, &CorruptError{Path: path, Err: err}
	}
	return s, nil
}

func (s *Store) decode(data []byte) error {
	var st fileState
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the state")
	}
	if st.V != FileVersion && st.V != fileVersionTerms && st.V != fileVersionTokens {
		return fmt.Errorf("version %d, want %d to %d", st.V, fileVersionTokens, FileVersion)
	}
	if st.Tokens == nil {
		return errors.New("no tokens object")
	}
	for key, ft := range st.Tokens {
		if ft.ProducerID == nil || ft.ProducerEpoch == nil {
			return fmt.Errorf("key %q: producer_id or producer_epoch missing", key)
		}
		tok, err := coordination.NewFencingToken(*ft.ProducerID, *ft.ProducerEpoch)
		if err != nil {
			return fmt.Errorf("key %q: %w", key, err)
		}
		term := coordination.NoTerm
		switch {
		case st.V == fileVersionTokens && ft.Term != nil:
			return fmt.Errorf("key %q: a term in a version-%d file", key, st.V)
		case st.V != fileVersionTokens && ft.Term == nil:
			return fmt.Errorf("key %q: term missing", key)
		case st.V != FileVersion && ft.Resets != nil:
			return fmt.Errorf("key %q: resets in a version-%d file", key, st.V)
		case ft.Term != nil && *ft.Term < 0:
			return fmt.Errorf("key %q: term %d is negative", key, *ft.Term)
		case ft.Term != nil:
			term = coordination.Term(*ft.Term)
		}
		s.highest[key] = coordination.Authority{Term: term, Token: tok}
		if len(ft.Resets) > 0 {
			s.resets[key] = ft.Resets
		}
	}
	return nil
}

// Path returns the state file's path.
func (s *Store) Path() string { return s.path }

// Admit admits authority for key when its term is not lower than the
// highest term admitted for key so far. Within that term any token is
// admitted, whatever its producer id: the role's producer id may rotate to a
// lower one within a leadership, and only the term orders leaderships.
//
// A higher term is written to the state file before Admit returns; the
// highest term again needs no write. A lower term is refused with a
// *StaleTermError, coordination.NoTerm with ErrNoTerm and
// coordination.NoEpoch with ErrNoToken. When the write fails Admit returns
// its error and the state is unchanged: the command must not be acted on,
// since the device could forget the term at its next restart.
func (s *Store) Admit(key string, authority coordination.Authority) error {
	if authority.Token.Compare(coordination.NoEpoch) == 0 {
		return ErrNoToken
	}
	if authority.Term.Compare(coordination.NoTerm) <= 0 {
		return ErrNoTerm
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	highest, seen := s.highest[key]
	if seen {
		switch c := authority.Compare(highest); {
		case c < 0:
			return &StaleTermError{Key: key, Authority: authority, Highest: highest}
		case c == 0:
			return nil
		}
	}
	return s.raiseLocked(key, authority)
}

// raiseLocked makes authority the highest for key, durably. s.mu is held.
func (s *Store) raiseLocked(key string, authority coordination.Authority) error {
	next := make(map[string]coordination.Authority, len(s.highest)+1)
	for k, v := range s.highest {
		next[k] = v
	}
	next[key] = authority
	if err := s.write(next, s.resets); err != nil {
		return err
	}
	s.highest = next
	delete(s.recent, key)
	return nil
}

// Highest returns the highest term admitted for key, with the token that
// first carried that term to the store, and false when none was. A key that
// a version-1 state file brought holds coordination.NoTerm until the first
// termed command.
func (s *Store) Highest(key string) (coordination.Authority, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.highest[key]
	return a, ok
}

// Keys returns the keys with an admitted term, sorted.
func (s *Store) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.highest))
	for k := range s.highest {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// tmpPrefix is the name prefix of the temporary files beside path.
func tmpPrefix(path string) string { return "." + filepath.Base(path) + ".tmp-" }

func removeLeftovers(path string) {
	dir := filepath.Dir(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	prefix := tmpPrefix(path)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// write replaces the state file with highest, atomically and durably.
func (s *Store) write(highest map[string]coordination.Authority, resets map[string][]string) (err error) {
	st := fileState{V: FileVersion, Tokens: make(map[string]fileToken, len(highest))}
	for k, a := range highest {
		term, id, epoch := int64(a.Term), a.Token.ProducerID(), a.Token.ProducerEpoch()
		st.Tokens[k] = fileToken{Term: &term, ProducerID: &id, ProducerEpoch: &epoch, Resets: resets[k]}
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("fence: encode state: %w", err)
	}
	data = append(data, '\n')

	dir := filepath.Dir(s.path)
	f, err := os.CreateTemp(dir, tmpPrefix(s.path))
	if err != nil {
		return fmt.Errorf("fence: write state: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fence: write state: %w", err)
	}
	if s.beforeRename != nil {
		if err = s.beforeRename(tmp); err != nil {
			return fmt.Errorf("fence: write state: %w", err)
		}
	}
	if err = os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("fence: write state: %w", err)
	}
	// The rename is durable once the directory is synced.
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fence: sync state directory: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fence: sync state directory: %w", err)
	}
	return nil
}
