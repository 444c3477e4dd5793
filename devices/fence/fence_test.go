package fence

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

func tok(t testing.TB, id int64, epoch int16) coordination.FencingToken {
	t.Helper()
	tk, err := coordination.NewFencingToken(id, epoch)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func openStore(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func TestAdmitRefusesLowerTokens(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "fence.json"))
	steps := []struct {
		key   string
		token coordination.FencingToken
		stale bool
	}{
		{"valve-1", tok(t, 10, 2), false},
		{"valve-1", tok(t, 10, 2), false}, // equal: the same leader again
		{"valve-1", tok(t, 10, 3), false}, // higher epoch
		{"valve-1", tok(t, 10, 1), true},  // lower epoch
		{"valve-1", tok(t, 9, 30000), true},
		{"valve-1", tok(t, 11, 0), false}, // a new producer id outranks any epoch of the old
		{"valve-2", tok(t, 1, 0), false},  // keys are independent
		{"valve-1", tok(t, 10, 3), true},
	}
	for i, st := range steps {
		err := s.Admit(st.key, st.token)
		if !st.stale {
			if err != nil {
				t.Fatalf("step %d: Admit(%s, %s) = %v", i, st.key, st.token, err)
			}
			continue
		}
		var se *StaleTokenError
		if !errors.Is(err, ErrStaleToken) || !errors.As(err, &se) {
			t.Fatalf("step %d: Admit(%s, %s) = %v, want a StaleTokenError", i, st.key, st.token, err)
		}
		if se.Key != st.key || se.Token != st.token {
			t.Fatalf("step %d: error %+v", i, se)
		}
		if h, _ := s.Highest(st.key); se.Highest != h {
			t.Fatalf("step %d: error names highest %s, store has %s", i, se.Highest, h)
		}
	}
	if h, ok := s.Highest("valve-1"); !ok || h != tok(t, 11, 0) {
		t.Fatalf("Highest(valve-1) = %s, %v", h, ok)
	}
	if _, ok := s.Highest("valve-3"); ok {
		t.Fatal("Highest of an unseen key reported")
	}
	if got := strings.Join(s.Keys(), ","); got != "valve-1,valve-2" {
		t.Fatalf("Keys = %s", got)
	}
	if err := s.Admit("valve-1", coordination.NoEpoch); !errors.Is(err, ErrNoToken) {
		t.Fatalf("Admit(NoEpoch) = %v", err)
	}
}

func TestHighestSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fence.json")
	s := openStore(t, path)
	if err := s.Admit("valve-1", tok(t, 7, 4)); err != nil {
		t.Fatal(err)
	}
	if err := s.Admit("pump", tok(t, 3, 0)); err != nil {
		t.Fatal(err)
	}

	again := openStore(t, path)
	if h, ok := again.Highest("valve-1"); !ok || h != tok(t, 7, 4) {
		t.Fatalf("after restart Highest = %s, %v", h, ok)
	}
	if err := again.Admit("valve-1", tok(t, 7, 3)); !errors.Is(err, ErrStaleToken) {
		t.Fatalf("after restart a lower token: %v", err)
	}
	if err := again.Admit("pump", tok(t, 3, 0)); err != nil {
		t.Fatalf("after restart the equal token: %v", err)
	}
}

func TestOpenWithoutFileStartsEmpty(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, filepath.Join(dir, "fence.json"))
	if len(s.Keys()) != 0 {
		t.Fatal("new store not empty")
	}
	if _, err := os.Stat(filepath.Join(dir, "fence.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open created the file: %v", err)
	}
	if _, err := Open(filepath.Join(dir, "missing", "fence.json")); err == nil {
		t.Fatal("Open in a missing directory succeeded")
	}
}

func TestOpenRefusesCorruptFiles(t *testing.T) {
	cases := map[string]string{
		"empty":           "",
		"truncated":       `{"v":1,"tokens":{"valve-1":{"producer_id":7,`,
		"not json":        "hello",
		"other version":   `{"v":2,"tokens":{}}`,
		"no tokens":       `{"v":1}`,
		"negative epoch":  `{"v":1,"tokens":{"a":{"producer_id":7,"producer_epoch":-1}}}`,
		"missing number":  `{"v":1,"tokens":{"a":{"producer_id":7}}}`,
		"unknown field":   `{"v":1,"tokens":{},"extra":true}`,
		"trailing data":   `{"v":1,"tokens":{}} {}`,
		"epoch too large": `{"v":1,"tokens":{"a":{"producer_id":7,"producer_epoch":40000}}}`,
	}
	for name, content := range cases {
		path := filepath.Join(t.TempDir(), "fence.json")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Open(path)
		var ce *CorruptError
		if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.Path != path {
			t.Fatalf("%s: Open = %v, want a CorruptError for %s", name, err, path)
		}
	}
}

func TestFailedWriteLeavesOldStateAndRefusesTheToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fence.json")
	s := openStore(t, path)
	if err := s.Admit("valve-1", tok(t, 5, 0)); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk full")
	s.beforeRename = func(string) error { return boom }
	if err := s.Admit("valve-1", tok(t, 6, 0)); !errors.Is(err, boom) {
		t.Fatalf("Admit with a failing write = %v", err)
	}
	if h, _ := s.Highest("valve-1"); h != tok(t, 5, 0) {
		t.Fatalf("memory moved to %s although the write failed", h)
	}
	after, _ := os.ReadFile(path)
	if string(after) != string(before) {
		t.Fatalf("state file changed:\n%s\nwant\n%s", after, before)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
	s.beforeRename = nil
	if err := s.Admit("valve-1", tok(t, 6, 0)); err != nil {
		t.Fatalf("Admit after the disk recovered: %v", err)
	}
}

// TestCrashBeforeRenameKeepsOldState stops a write where a crash would:
// after the new state is synced to a temporary file and before the rename.
// The next Open reads the old state and removes the temporary file.
func TestCrashBeforeRenameKeepsOldState(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "fence.json")
	s := openStore(t, path)
	if err := s.Admit("valve-1", tok(t, 5, 0)); err != nil {
		t.Fatal(err)
	}
	var leftover string
	s.beforeRename = func(tmp string) error {
		// Keep a copy of the synced temporary file as the crash left it.
		data, err := os.ReadFile(tmp)
		if err != nil {
			return err
		}
		leftover = tmp + "x"
		if err := os.WriteFile(leftover, data[:len(data)/2], 0o600); err != nil {
			return err
		}
		return errors.New("crash")
	}
	_ = s.Admit("valve-1", tok(t, 9, 0))
	if _, err := os.Stat(leftover); err != nil {
		t.Fatalf("no leftover to test with: %v", err)
	}

	again := openStore(t, path)
	if h, _ := again.Highest("valve-1"); h != tok(t, 5, 0) {
		t.Fatalf("after the crash Highest = %s, want the old 5:0", h)
	}
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open left the temporary file: %v", err)
	}
	// A file beside it whose name only resembles the pattern stays.
	other := filepath.Join(dir, "fence.json.bak")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	openStore(t, path)
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("Open removed an unrelated file: %v", err)
	}
}

func TestConcurrentAdmitKeepsTheMaximum(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fence.json")
	s := openStore(t, path)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range 20 {
				err := s.Admit("valve-1", tok(t, int64(g), int16(e)))
				if err != nil && !errors.Is(err, ErrStaleToken) {
					t.Errorf("Admit: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	want := tok(t, 7, 19)
	if h, _ := s.Highest("valve-1"); h != want {
		t.Fatalf("Highest = %s, want %s", h, want)
	}
	if h, _ := openStore(t, path).Highest("valve-1"); h != want {
		t.Fatalf("file holds %s, want %s", h, want)
	}
}
