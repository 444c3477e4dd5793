package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
)

// TestReadinessTellsRecoveringFromLeading wants a member that holds the
// lease but has not recovered, or is draining, answered as such by every
// face of the API: /leaderz 503 with the state first in its body (a load
// balancer must not send it commands), /readyz 503 while it recovers,
// /v1/leadership's state, and the status page's badge. Only a leader in the
// leading state answers /leaderz with 200.
func TestReadinessTellsRecoveringFromLeading(t *testing.T) {
	for _, c := range []struct {
		state      MemberState
		leader     bool
		ready      error
		leaderz    int
		leaderBody string
		readyz     int
		badge      string
	}{
		{StateLeading, true, nil, http.StatusOK, "leading: term 4096 token 7:3", http.StatusOK, ">leader</span>"},
		{StateRecovering, true, errors.New("leading, and still reading the role's log"), http.StatusServiceUnavailable,
			"recovering: holds the lease, term 4096; reading the role's log", http.StatusServiceUnavailable, ">leader, recovering</span>"},
		{StateDraining, true, nil, http.StatusServiceUnavailable, "draining: holds the lease, term 4096; stopping", http.StatusOK, ">leader, draining</span>"},
		{StateStandby, false, nil, http.StatusServiceUnavailable, "standby: node-1 leads", http.StatusOK, ">standby</span>"},
	} {
		t.Run(string(c.state), func(t *testing.T) {
			b := newFakeBackend(c.leader)
			b.leadership.State, b.ready = c.state, c.ready
			h := NewHandler(b, Options{})
			rec := do(t, h, "GET", "/leaderz", "", "")
			if rec.Code != c.leaderz || !strings.HasPrefix(rec.Body.String(), c.leaderBody) {
				t.Errorf("/leaderz: %d %q, want %d %q", rec.Code, rec.Body, c.leaderz, c.leaderBody)
			}
			rec = do(t, h, "GET", "/readyz", "", "")
			if rec.Code != c.readyz {
				t.Errorf("/readyz: %d %q, want %d", rec.Code, rec.Body, c.readyz)
			}
			if c.ready != nil && !strings.Contains(rec.Body.String(), "not ready: "+string(c.state)+": ") {
				t.Errorf("/readyz body %q does not name the state", rec.Body)
			}
			rec = do(t, h, "GET", "/v1/leadership", "", "")
			var l struct {
				State  string `json:"state"`
				Leader bool   `json:"leader"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &l); err != nil || l.State != string(c.state) || l.Leader != c.leader {
				t.Errorf("/v1/leadership: %s, %v", rec.Body, err)
			}
			if page := do(t, h, "GET", "/", "", "").Body.String(); !strings.Contains(page, c.badge) {
				t.Errorf("the page's badge is not %q", c.badge)
			}
		})
	}
}
