package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// fakeBackend is a member whose answers the test sets.
type fakeBackend struct {
	mu         sync.Mutex
	leadership Leadership
	commands   map[string]CommandState
	submitted  []dispatch.Command
	sent       map[string]dispatch.Command
	resolved   []dispatch.ResolveAction
	batches    []int // the length of each batch submitted
	ready      error
}

func newFakeBackend(leader bool) *fakeBackend {
	deadline := time.Now().Add(4 * time.Second)
	l := Leadership{Role: "controller", Member: "node-1", Leader: leader, Holder: "node-1", Term: 4096, Token: "7:3",
		LeaseDeadline: &deadline, LeaseRemainingMS: 4000,
		Roster: []RosterMember{{Member: "node-1", Rank: 0, Holder: true}, {Member: "node-2", Rank: 0}, {Member: "node-3", Rank: 1}}}
	l.State = StateLeading
	if !leader {
		l.Member, l.Holder, l.HolderURL, l.State = "node-2", "node-1", "http://127.0.0.1:9/", StateStandby
	}
	return &fakeBackend{leadership: l, commands: map[string]CommandState{}}
}

func (f *fakeBackend) Leadership() Leadership {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leadership
}

func (f *fakeBackend) Submit(_ context.Context, cmd dispatch.Command, wait time.Duration) (CommandState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.leadership.Leader {
		return CommandState{}, &NotLeaderError{Member: f.leadership.Member, Leader: f.leadership.Holder, LeaderURL: f.leadership.HolderURL}
	}
	if cmd.Device == "nope" {
		return CommandState{}, &dispatch.UnknownDeviceError{Name: cmd.Device}
	}
	if cmd.Device == "down" {
		return CommandState{}, &dispatch.DeviceUnavailableError{Device: cmd.Device, CheckedAt: time.Now(), Err: errors.New("broker unreachable")}
	}
	if cmd.Action == "explode" {
		return CommandState{}, &dispatch.UnsupportedCommandError{Device: cmd.Device, Action: cmd.Action, Err: errors.New("unknown action")}
	}
	if prev, ok := f.sent[cmd.ID]; ok {
		if diff := cmd.Differences(prev); len(diff) > 0 {
			return CommandState{}, &dispatch.IDConflictError{ID: cmd.ID, Differs: diff}
		}
		return f.commands[cmd.ID], nil
	}
	if f.sent == nil {
		f.sent = map[string]dispatch.Command{}
	}
	f.sent[cmd.ID] = cmd
	f.submitted = append(f.submitted, cmd)
	st := CommandState{ID: cmd.ID, Device: cmd.Device, Action: cmd.Action, State: StatePending, SubmittedAt: cmd.SubmittedAt, UpdatedAt: cmd.SubmittedAt}
	if wait > 0 {
		st.State = dispatch.StatusSucceeded.String()
	}
	f.commands[cmd.ID] = st
	return st, nil
}

// SubmitBatch submits each command as Submit does, and records the batch.
func (f *fakeBackend) SubmitBatch(ctx context.Context, cmds []dispatch.Command, wait time.Duration) ([]BatchResult, error) {
	f.mu.Lock()
	if !f.leadership.Leader {
		defer f.mu.Unlock()
		return nil, &NotLeaderError{Member: f.leadership.Member, Leader: f.leadership.Holder, LeaderURL: f.leadership.HolderURL}
	}
	f.batches = append(f.batches, len(cmds))
	f.mu.Unlock()
	results := make([]BatchResult, len(cmds))
	for i, cmd := range cmds {
		results[i].State, results[i].Err = f.Submit(ctx, cmd, wait)
	}
	return results, nil
}

func (f *fakeBackend) Command(id string) (CommandState, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.commands[id]
	return st, ok
}

func (f *fakeBackend) Recent(limit int) []CommandState {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []CommandState
	for _, c := range f.commands {
		out = append(out, c)
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

func (f *fakeBackend) Resolve(_ context.Context, id string, action dispatch.ResolveAction) (CommandState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.commands[id]
	if !ok {
		return CommandState{}, &dispatch.UnknownCommandError{ID: id}
	}
	f.resolved = append(f.resolved, action)
	st.State = dispatch.StatusCancelled.String()
	return st, nil
}

func (f *fakeBackend) Ready() error { return f.ready }

func do(t *testing.T, h http.Handler, method, path, token, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestSubmitNeedsToken(t *testing.T) {
	b := newFakeBackend(true)
	h := NewHandler(b, Options{Token: "s3cret"})
	body := `{"id":"c1","device":"valve-1","action":"open"}`
	if rec := do(t, h, "POST", "/v1/commands", "", body); rec.Code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", rec.Code)
	}
	if rec := do(t, h, "POST", "/v1/commands", "wrong", body); rec.Code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", rec.Code)
	}
	rec := do(t, h, "POST", "/v1/commands", "s3cret", body)
	if rec.Code != http.StatusAccepted {
		t.Fatalf("good token: %d %s", rec.Code, rec.Body)
	}
	var st CommandState
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || st.ID != "c1" || st.State != StatePending {
		t.Fatalf("body %s: %v", rec.Body, err)
	}
	if rec.Header().Get("Location") != "/v1/commands/c1" {
		t.Errorf("Location = %q", rec.Header().Get("Location"))
	}
	// Reads need no token.
	if rec := do(t, h, "GET", "/v1/commands/c1", "", ""); rec.Code != http.StatusOK {
		t.Fatalf("read: %d", rec.Code)
	}
	if len(b.submitted) != 1 || b.submitted[0].Action != "open" {
		t.Fatalf("submitted %+v", b.submitted)
	}
}

func TestSubmitWaitAndPayload(t *testing.T) {
	b := newFakeBackend(true)
	h := NewHandler(b, Options{})
	rec := do(t, h, "POST", "/v1/commands?wait=2s", "", `{"id":"c2","device":"d","action":"a","payload_base64":"AAEC","timeout":"10s"}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	got := b.submitted[0]
	if string(got.Payload) != "\x00\x01\x02" {
		t.Errorf("payload %q", got.Payload)
	}
	if d := got.Deadline.Sub(got.SubmittedAt); d != 10*time.Second {
		t.Errorf("deadline %v after submission, want 10s", d)
	}
}

func TestSubmitBadRequests(t *testing.T) {
	h := NewHandler(newFakeBackend(true), Options{})
	for name, body := range map[string]string{
		"no id":         `{"device":"d","action":"a"}`,
		"no device":     `{"id":"x","action":"a"}`,
		"unknown field": `{"id":"x","device":"d","colour":"red"}`,
		"two payloads":  `{"id":"x","device":"d","payload":"a","payload_base64":"AA=="}`,
		"bad timeout":   `{"id":"x","device":"d","timeout":"soon"}`,
		"not json":      `id=x`,
	} {
		if rec := do(t, h, "POST", "/v1/commands", "", body); rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d %s", name, rec.Code, rec.Body)
		}
	}
	if rec := do(t, h, "POST", "/v1/commands?wait=forever", "", `{"id":"x","device":"d"}`); rec.Code != http.StatusBadRequest {
		t.Errorf("bad wait: %d", rec.Code)
	}
}

func TestSubmitRefusalsNameTheirCause(t *testing.T) {
	h := NewHandler(newFakeBackend(true), Options{})
	for name, body := range map[string]string{
		"unknown device": `{"id":"x","device":"nope"}`,
		"unknown action": `{"id":"y","device":"d","action":"explode"}`,
	} {
		if rec := do(t, h, "POST", "/v1/commands", "", body); rec.Code != http.StatusUnprocessableEntity {
			t.Errorf("%s: %d %s, want 422", name, rec.Code, rec.Body)
		}
	}
	first := `{"id":"k","device":"d","action":"set","payload":"1","timeout":"30s"}`
	if rec := do(t, h, "POST", "/v1/commands", "", first); rec.Code != http.StatusAccepted {
		t.Fatalf("first: %d %s", rec.Code, rec.Body)
	}
	// The same command again, the same timeout included: idempotent.
	if rec := do(t, h, "POST", "/v1/commands", "", first); rec.Code != http.StatusAccepted {
		t.Errorf("same again: %d %s, want the first's state", rec.Code, rec.Body)
	}
	rec := do(t, h, "POST", "/v1/commands", "", `{"id":"k","device":"e","action":"set","payload":"2","timeout":"30s"}`)
	if rec.Code != http.StatusConflict {
		t.Fatalf("reused ID: %d %s, want 409", rec.Code, rec.Body)
	}
	var e ErrorResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
		t.Fatal(err)
	}
	if e.ID != "k" || !slices.Equal(e.Differs, []string{dispatch.FieldDevice, dispatch.FieldPayload}) {
		t.Errorf("conflict body %+v, want the ID and device, payload", e)
	}
}

func TestStandbyRedirectsToLeader(t *testing.T) {
	b := newFakeBackend(false)
	h := NewHandler(b, Options{})
	rec := do(t, h, "POST", "/v1/commands?wait=1s", "", `{"id":"c3","device":"d","action":"a"}`)
	if rec.Code != http.StatusTemporaryRedirect {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if loc := rec.Header().Get("Location"); loc != "http://127.0.0.1:9/v1/commands?wait=1s" {
		t.Errorf("Location = %q", loc)
	}
	// A command the standby does not know is looked up on the leader.
	if rec := do(t, h, "GET", "/v1/commands/c3", "", ""); rec.Code != http.StatusTemporaryRedirect {
		t.Errorf("lookup on standby: %d", rec.Code)
	}
	// With no leader known: 503 and Retry-After.
	b.leadership.Holder, b.leadership.HolderURL = "", ""
	rec = do(t, h, "POST", "/v1/commands", "", `{"id":"c3","device":"d","action":"a"}`)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("no leader: %d %v", rec.Code, rec.Header())
	}
}

func TestHealthEndpointsReflectLeadership(t *testing.T) {
	leader := NewHandler(newFakeBackend(true), Options{})
	standbyBackend := newFakeBackend(false)
	standby := NewHandler(standbyBackend, Options{})
	for _, c := range []struct {
		h    http.Handler
		path string
		want int
	}{
		{leader, "/livez", 200}, {leader, "/readyz", 200}, {leader, "/leaderz", 200},
		{standby, "/livez", 200}, {standby, "/readyz", 200}, {standby, "/leaderz", 503},
	} {
		if rec := do(t, c.h, "GET", c.path, "", ""); rec.Code != c.want {
			t.Errorf("%s: %d, want %d", c.path, rec.Code, c.want)
		}
	}
	if rec := do(t, leader, "GET", "/leaderz", "", ""); !strings.Contains(rec.Body.String(), "leading: term 4096 token 7:3") {
		t.Errorf("leaderz: %s", rec.Body)
	}
	standbyBackend.ready = errors.New("cluster unreachable")
	if rec := do(t, standby, "GET", "/readyz", "", ""); rec.Code != 503 || !strings.Contains(rec.Body.String(), "cluster unreachable") {
		t.Errorf("readyz of an unready member: %d %s", rec.Code, rec.Body)
	}
}

func TestResolve(t *testing.T) {
	b := newFakeBackend(true)
	h := NewHandler(b, Options{Token: "t"})
	do(t, h, "POST", "/v1/commands", "t", `{"id":"c4","device":"d","action":"a"}`)
	if rec := do(t, h, "POST", "/v1/commands/c4/resolve", "t", `{"action":"explode"}`); rec.Code != 400 {
		t.Errorf("bad action: %d", rec.Code)
	}
	if rec := do(t, h, "POST", "/v1/commands/zz/resolve", "t", `{"action":"cancel"}`); rec.Code != 404 {
		t.Errorf("unknown command: %d", rec.Code)
	}
	if rec := do(t, h, "POST", "/v1/commands/c4/resolve", "", `{"action":"cancel"}`); rec.Code != 401 {
		t.Errorf("no token: %d", rec.Code)
	}
	rec := do(t, h, "POST", "/v1/commands/c4/resolve", "t", `{"action":"cancel"}`)
	if rec.Code != 200 || len(b.resolved) != 1 || b.resolved[0] != dispatch.ResolveCancel {
		t.Fatalf("%d %s %v", rec.Code, rec.Body, b.resolved)
	}
}

func TestLeadershipAndPage(t *testing.T) {
	b := newFakeBackend(true)
	h := NewHandler(b, Options{Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("# metrics\n")) })})
	do(t, h, "POST", "/v1/commands", "", `{"id":"cmd-<b>","device":"valve-1","action":"open"}`)

	rec := do(t, h, "GET", "/v1/leadership", "", "")
	var l Leadership
	if err := json.Unmarshal(rec.Body.Bytes(), &l); err != nil || !l.Leader || len(l.Roster) != 3 || l.Term != 4096 || l.Token != "7:3" {
		t.Fatalf("%s: %v", rec.Body, err)
	}
	if !strings.Contains(rec.Body.String(), `"term": 4096,`) {
		t.Errorf("the term is not a JSON number beside the token: %s", rec.Body)
	}

	rec = do(t, h, "GET", "/", "", "")
	page := rec.Body.String()
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("%d %v", rec.Code, rec.Header())
	}
	for _, want := range []string{"controller", "node-3", `id="term">4096<`, `id="token">7:3<`, "cmd-&lt;b&gt;", "pending", `data-remaining="4000"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "cmd-<b>") {
		t.Error("page does not escape a command id")
	}
	if rec := do(t, h, "GET", "/metrics", "", ""); rec.Code != 200 || !strings.Contains(rec.Body.String(), "# metrics") {
		t.Errorf("metrics: %d", rec.Code)
	}
	if rec := do(t, h, "GET", "/nope", "", ""); rec.Code != 404 {
		t.Errorf("unknown path: %d", rec.Code)
	}
}

func TestStatusPageShowsTheHolderApartFromTheRanks(t *testing.T) {
	h := NewHandler(newFakeBackend(true), Options{})
	rec := do(t, h, "GET", "/", "", "")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /: %d", rec.Code)
	}
	page := rec.Body.String()
	for _, row := range []string{"<td>holder</td><td>node-1</td>", "<td>0</td><td>node-2</td>", "<td>1</td><td>node-3</td>"} {
		if !strings.Contains(page, row) {
			t.Errorf("the roster lacks %q", row)
		}
	}
	if strings.Contains(page, "<td>0</td><td>node-1</td>") {
		t.Error("the holder is shown at rank 0, beside the first standby")
	}
}
