// Package fence lets a device, or a gateway in front of devices, refuse
// commands from a deposed leader.
//
// The dispatcher's broker fences its own log writes, but not the commands a
// device receives over MQTT or Modbus: a leader that was paused after its log
// commit may wake and publish after a successor took over. Every command
// carries the fencing token of the leadership that issued it, and tokens
// only grow. A [Store] remembers the highest token seen per key (a device
// name, or any other scope of one leader's commands) and [Store.Admit]
// refuses a lower one with a [*StaleTokenError].
//
// The highest token survives a restart: Admit writes a higher token to the
// state file before it returns, by writing a temporary file in the same
// directory, syncing it, renaming it over the state file and syncing the
// directory. A crash leaves the old file or the new one, never a mix, and a
// device that restarts does not accept a token it had already outranked. A
// state file that does not parse makes [Open] fail with a [*CorruptError];
// it is never silently reset, since an empty state admits every token.
//
// Typical use in firmware that receives commands over MQTT:
//
//	store, err := fence.Open("/var/lib/valve/fence.json")
//	...
//	env, err := mqtt.DecodeEnvelope(msg.Payload())
//	...
//	if err := store.Admit(env.Device, env.Token); err != nil {
//		// errors.Is(err, fence.ErrStaleToken): reply "rejected", do not act
//	}
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

// FileVersion is the value of the "v" field of the state file.
const FileVersion = 1

// ErrStaleToken is matched by every [*StaleTokenError].
var ErrStaleToken = errors.New("fence: token lower than one already admitted")

// ErrNoToken reports coordination.NoEpoch passed to Admit: it proves no
// leadership and is never admitted.
var ErrNoToken = errors.New("fence: no fencing token")

// ErrCorrupt is matched by every [*CorruptError].
var ErrCorrupt = errors.New("fence: state file is corrupt")

// StaleTokenError reports a token lower than the highest admitted for its
// key. The command that carried it must not be acted on.
type StaleTokenError struct {
	// Key is the key the token was presented for.
	Key string
	// Token is the token presented.
	Token coordination.FencingToken
	// Highest is the highest token admitted for Key.
	Highest coordination.FencingToken
}

func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("fence: token %s for %q is below %s, already admitted", e.Token, e.Key, e.Highest)
}

// Is reports whether target is ErrStaleToken.
func (e *StaleTokenError) Is(target error) bool { return target == ErrStaleToken }

// CorruptError reports a state file that Open cannot read as a state.
type CorruptError struct {
	// Path is the state file.
	Path string
	// Err says what is wrong.
	Err error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("fence: state file %s is corrupt (remove it only if no token may have been admitted since): %v", e.Path, e.Err)
}

// Is reports whether target is ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Unwrap returns the underlying error.
func (e *CorruptError) Unwrap() error { return e.Err }

// Store keeps the highest admitted token per key in a state file.
type Store struct {
	path string

	mu     sync.Mutex
	tokens map[string]coordination.FencingToken

	// beforeRename, when set, runs after the temporary file is synced and
	// before it is renamed; tests use it to fail or stop the write there.
	beforeRename func(tmp string) error
}

// fileState is the JSON form of the state file:
//
//	{"v":1,"tokens":{"valve-1":{"producer_id":1001,"producer_epoch":3}}}
type fileState struct {
	V      int                  `json:"v"`
	Tokens map[string]fileToken `json:"tokens"`
}

type fileToken struct {
	ProducerID    *int64 `json:"producer_id"`
	ProducerEpoch *int16 `json:"producer_epoch"`
}

// Open loads the state file at path, or starts empty when it does not
// exist; the directory must exist. It removes temporary files that a crash
// during a write left beside it. A file that does not hold a valid state is
// a *CorruptError.
func Open(path string) (*Store, error) {
	s := &Store{path: path, tokens: make(map[string]coordination.FencingToken)}
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
	if st.V != FileVersion {
		return fmt.Errorf("version %d, want %d", st.V, FileVersion)
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
		s.tokens[key] = tok
	}
	return nil
}

// Path returns the state file's path.
func (s *Store) Path() string { return s.path }

// Admit admits token for key when it is not lower than the highest token
// admitted for key so far. A higher token is written to the state file
// before Admit returns; an equal one needs no write. A lower token is
// refused with a *StaleTokenError, and coordination.NoEpoch with ErrNoToken.
// When the write fails Admit returns its error and the state is unchanged:
// the command must not be acted on, since the device could forget the token
// at its next restart.
func (s *Store) Admit(key string, token coordination.FencingToken) error {
	if token.Compare(coordination.NoEpoch) == 0 {
		return ErrNoToken
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	highest, seen := s.tokens[key]
	if seen {
		switch c := token.Compare(highest); {
		case c < 0:
			return &StaleTokenError{Key: key, Token: token, Highest: highest}
		case c == 0:
			return nil
		}
	}
	next := make(map[string]coordination.FencingToken, len(s.tokens)+1)
	for k, v := range s.tokens {
		next[k] = v
	}
	next[key] = token
	if err := s.write(next); err != nil {
		return err
	}
	s.tokens = next
	return nil
}

// Highest returns the highest token admitted for key, and false when none
// was.
func (s *Store) Highest(key string) (coordination.FencingToken, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tokens[key]
	return t, ok
}

// Keys returns the keys with an admitted token, sorted.
func (s *Store) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.tokens))
	for k := range s.tokens {
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

// write replaces the state file with tokens, atomically and durably.
func (s *Store) write(tokens map[string]coordination.FencingToken) (err error) {
	st := fileState{V: FileVersion, Tokens: make(map[string]fileToken, len(tokens))}
	for k, t := range tokens {
		id, epoch := t.ProducerID(), t.ProducerEpoch()
		st.Tokens[k] = fileToken{ProducerID: &id, ProducerEpoch: &epoch}
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
