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

// under returns the authority of term with the token id:epoch.
func under(t testing.TB, term coordination.Term, id int64, epoch int16) coordination.Authority {
	t.Helper()
	return coordination.Authority{Term: term, Token: tok(t, id, epoch)}
}

func TestAdmitOrdersByTerm(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "fence.json"))
	steps := []struct {
		key       string
		authority coordination.Authority
		stale     bool
	}{
		{"valve-1", under(t, 40, 10, 2), false},
		{"valve-1", under(t, 40, 10, 2), false},   // equal: the same leader again
		{"valve-1", under(t, 40, 10, 3), false},   // an epoch bump within the term
		{"valve-1", under(t, 40, 3, 0), false},    // a rotation to a lower producer id within the term
		{"valve-1", under(t, 40, 10, 1), false},   // any token of the highest term
		{"valve-1", under(t, 39, 900, 9), true},   // an earlier term with a higher token
		{"valve-1", under(t, 57, 2, 0), false},    // a later term with a lower token
		{"valve-2", under(t, 12, 1, 0), false},    // keys are independent
		{"valve-1", under(t, 40, 10, 3), true},    // the deposed term again
		{"valve-1", under(t, 56, 30000, 0), true}, // the term just below
	}
	for i, st := range steps {
		err := s.Admit(st.key, st.authority)
		if !st.stale {
			if err != nil {
				t.Fatalf("step %d: Admit(%s, %s) = %v", i, st.key, st.authority, err)
			}
			continue
		}
		var se *StaleTermError
		if !errors.Is(err, ErrStaleTerm) || !errors.As(err, &se) {
			t.Fatalf("step %d: Admit(%s, %s) = %v, want a StaleTermError", i, st.key, st.authority, err)
		}
		if se.Key != st.key || se.Authority != st.authority {
			t.Fatalf("step %d: error %+v", i, se)
		}
		if h, _ := s.Highest(st.key); se.Highest != h {
			t.Fatalf("step %d: error names highest %s, store has %s", i, se.Highest, h)
		}
	}
	// The highest term keeps the token that first carried it.
	if h, ok := s.Highest("valve-1"); !ok || h != under(t, 57, 2, 0) {
		t.Fatalf("Highest(valve-1) = %s, %v", h, ok)
	}
	if _, ok := s.Highest("valve-3"); ok {
		t.Fatal("Highest of an unseen key reported")
	}
	if got := strings.Join(s.Keys(), ","); got != "valve-1,valve-2" {
		t.Fatalf("Keys = %s", got)
	}
	if err := s.Admit("valve-1", coordination.Authority{Term: 90, Token: coordination.NoEpoch}); !errors.Is(err, ErrNoToken) {
		t.Fatalf("Admit(NoEpoch) = %v", err)
	}
	if err := s.Admit("valve-1", coordination.Authority{Term: coordination.NoTerm, Token: tok(t, 99, 0)}); !errors.Is(err, ErrNoTerm) {
		t.Fatalf("Admit(NoTerm) = %v", err)
	}
	if h, _ := s.Highest("valve-1"); h.Term != 57 {
		t.Fatalf("a refused authority moved the term to %s", h.Term)
	}
}

func TestHighestSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fence.json")
	s := openStore(t, path)
	if err := s.Admit("valve-1", under(t, 30, 7, 4)); err != nil {
		t.Fatal(err)
	}
	if err := s.Admit("pump", under(t, 8, 3, 0)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"v": 3`) || !strings.Contains(string(data), `"term": 30`) {
		t.Fatalf("state file holds no version-3 term:\n%s", data)
	}

	again := openStore(t, path)
	if h, ok := again.Highest("valve-1"); !ok || h != under(t, 30, 7, 4) {
		t.Fatalf("after restart Highest = %s, %v", h, ok)
	}
	if err := again.Admit("valve-1", under(t, 29, 70, 9)); !errors.Is(err, ErrStaleTerm) {
		t.Fatalf("after restart an earlier term: %v", err)
	}
	if err := again.Admit("valve-1", under(t, 30, 1, 0)); err != nil {
		t.Fatalf("after restart a rotation within the term: %v", err)
	}
	if err := again.Admit("pump", under(t, 8, 3, 0)); err != nil {
		t.Fatalf("after restart the equal authority: %v", err)
	}
}

// TestOpensVersionOneFile reads a state file written before terms: its
// tokens hold no term, so the first termed command is admitted whatever its
// token, and the next write moves the file to version 2.
func TestOpensVersionOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fence.json")
	v1 := `{"v":1,"tokens":{"valve-1":{"producer_id":900,"producer_epoch":7},"pump":{"producer_id":4,"producer_epoch":0}}}`
	if err := os.WriteFile(path, []byte(v1), 0o600); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, path)
	if h, ok := s.Highest("valve-1"); !ok || h != under(t, coordination.NoTerm, 900, 7) {
		t.Fatalf("Highest from a version-1 file = %s, %v", h, ok)
	}
	if err := s.Admit("valve-1", under(t, 5, 12, 0)); err != nil {
		t.Fatalf("the first termed command, with a lower token: %v", err)
	}

	again := openStore(t, path)
	if h, _ := again.Highest("valve-1"); h != under(t, 5, 12, 0) {
		t.Fatalf("after reopen Highest(valve-1) = %s", h)
	}
	if h, _ := again.Highest("pump"); h != under(t, coordination.NoTerm, 4, 0) {
		t.Fatalf("after reopen Highest(pump) = %s, want the version-1 token with no term", h)
	}
	if err := again.Admit("valve-1", under(t, 4, 999, 0)); !errors.Is(err, ErrStaleTerm) {
		t.Fatalf("an earlier term after the upgrade: %v", err)
	}
	if err := again.Admit("pump", under(t, 1, 1, 0)); err != nil {
		t.Fatalf("the first termed command of a carried-over key: %v", err)
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
		"truncated":       `{"v":2,"tokens":{"valve-1":{"term":3,"producer_id":7,`,
		"not json":        "hello",
		"other version":   `{"v":4,"tokens":{}}`,
		"no version":      `{"tokens":{}}`,
		"no tokens":       `{"v":2}`,
		"negative epoch":  `{"v":2,"tokens":{"a":{"term":3,"producer_id":7,"producer_epoch":-1}}}`,
		"missing number":  `{"v":2,"tokens":{"a":{"term":3,"producer_id":7}}}`,
		"missing term":    `{"v":2,"tokens":{"a":{"producer_id":7,"producer_epoch":1}}}`,
		"negative term":   `{"v":2,"tokens":{"a":{"term":-3,"producer_id":7,"producer_epoch":1}}}`,
		"term in v1":      `{"v":1,"tokens":{"a":{"term":3,"producer_id":7,"producer_epoch":1}}}`,
		"unknown field":   `{"v":2,"tokens":{},"extra":true}`,
		"trailing data":   `{"v":2,"tokens":{}} {}`,
		"epoch too large": `{"v":2,"tokens":{"a":{"term":3,"producer_id":7,"producer_epoch":40000}}}`,
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
	if err := s.Admit("valve-1", under(t, 5, 5, 0)); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk full")
	s.beforeRename = func(string) error { return boom }
	if err := s.Admit("valve-1", under(t, 6, 6, 0)); !errors.Is(err, boom) {
		t.Fatalf("Admit with a failing write = %v", err)
	}
	if h, _ := s.Highest("valve-1"); h != under(t, 5, 5, 0) {
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
	if err := s.Admit("valve-1", under(t, 6, 6, 0)); err != nil {
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
	if err := s.Admit("valve-1", under(t, 5, 5, 0)); err != nil {
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
	_ = s.Admit("valve-1", under(t, 9, 9, 0))
	if _, err := os.Stat(leftover); err != nil {
		t.Fatalf("no leftover to test with: %v", err)
	}

	again := openStore(t, path)
	if h, _ := again.Highest("valve-1"); h != under(t, 5, 5, 0) {
		t.Fatalf("after the crash Highest = %s, want the old term 5", h)
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
				// Goroutine g presents terms g*100+1..g*100+20 with
				// tokens that fall as the terms rise.
				err := s.Admit("valve-1", under(t, coordination.Term(g*100+e+1), int64(100-g), int16(20-e)))
				if err != nil && !errors.Is(err, ErrStaleTerm) {
					t.Errorf("Admit: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	want := under(t, 720, 93, 1)
	if h, _ := s.Highest("valve-1"); h != want {
		t.Fatalf("Highest = %s, want %s", h, want)
	}
	if h, _ := openStore(t, path).Highest("valve-1"); h != want {
		t.Fatalf("file holds %s, want %s", h, want)
	}
}
