package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rosterOf runs status -o json and returns the members by name.
func rosterOf(t *testing.T, args ...string) map[string]StatusMember {
	t.Helper()
	code, out, errOut := runCLI(t, context.Background(), append([]string{"status", "-o", "json"}, args...)...)
	if code != int(ExitOK) {
		t.Fatalf("status: exit %d\n%s%s", code, out, errOut)
	}
	var res StatusResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	m := map[string]StatusMember{}
	for _, e := range res.Roster {
		m[e.Member] = e
	}
	return m
}

func TestMembersRemove(t *testing.T) {
	_, brokers := newFakeCluster(t)
	ctx := context.Background()
	if code, out, errOut := runCLI(t, ctx, "topics", "--brokers", brokers); code != 0 {
		t.Fatalf("topics: %d\n%s%s", code, out, errOut)
	}
	acquire(t, brokers, "controller", "node-1", "node-2", "node-3")
	flags := []string{"--brokers", brokers, "--role", "controller"}
	remove := func(extra ...string) (int, string, string) {
		return runCLI(t, ctx, append(append([]string{"members", "remove"}, extra...), flags...)...)
	}

	// The holder stays unless forced: the tombstone cannot take its lease.
	code, _, errOut := remove("node-1")
	if code != int(ExitUsage) || !strings.Contains(errOut, "node-1 holds the lease of role controller") ||
		!strings.Contains(errOut, "would not take the lease away") || !strings.Contains(errOut, "--force") {
		t.Fatalf("remove the holder: exit %d\n%s", code, errOut)
	}
	if code, _, errOut := remove("node-9"); code != int(ExitUsage) || !strings.Contains(errOut, "node-9 is not in the roster") {
		t.Fatalf("remove a stranger: exit %d\n%s", code, errOut)
	}

	// A standby leaves the roster, and the one behind it moves up.
	if code, out, errOut := remove("node-2"); code != 0 || !strings.Contains(out, "removed node-2 from the roster of role controller") {
		t.Fatalf("remove node-2: exit %d\n%s%s", code, out, errOut)
	}
	roster := rosterOf(t, flags...)
	if _, ok := roster["node-2"]; ok || len(roster) != 2 || roster["node-3"].Rank != 0 || !roster["node-1"].Holder {
		t.Errorf("roster after removing node-2: %+v", roster)
	}

	// Forced, the holder leaves the roster; the lease is untouched.
	code, out, errOut := remove("node-1", "--force")
	if code != 0 || !strings.Contains(out, "node-1 still holds the lease") {
		t.Fatalf("remove node-1 --force: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, ctx, append([]string{"status", "-o", "json"}, flags...)...)
	var res StatusResult
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || res.Holder != "node-1" || len(res.Roster) != 1 || res.Roster[0].Member != "node-3" {
		t.Errorf("status after the forced removal: exit %d %+v\n%s", code, res, errOut)
	}
}

// TestStatusMarksUnreachableMembers reads the roster with a configuration
// whose members list names node-1 at a live API and node-3 at a closed
// port: the table shows the holder as "holder", not at rank 0 beside the
// first standby, and node-3 as unreachable.
func TestStatusMarksUnreachableMembers(t *testing.T) {
	_, brokers := newFakeCluster(t)
	ctx := context.Background()
	if code, out, errOut := runCLI(t, ctx, "topics", "--brokers", brokers); code != 0 {
		t.Fatalf("topics: %d\n%s%s", code, out, errOut)
	}
	acquire(t, brokers, "controller", "node-1", "node-2", "node-3")
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/livez":
			w.Write([]byte("ok"))
		case "/v1/leadership":
			// The holder's last health checks, as its member reports them.
			w.Write([]byte(`{"role":"controller","devices":[{"device":"valve-1","reachable":true,"checked_at":"2026-12-01T00:00:00Z"},` +
				`{"device":"pump-1","reachable":false,"error":"dial tcp 10.0.0.9:502: connection refused","checked_at":"2026-12-01T00:00:01Z"}]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer live.Close()
	file := filepath.Join(t.TempDir(), "node-1.yaml")
	yaml := "role: controller\nmember: node-1\nkafka:\n  brokers: [" + strings.ReplaceAll(brokers, ",", ", ") + "]\nhttp:\n  listen: \"off\"\nmembers:\n" +
		"  node-1: " + live.URL + "\n  node-3: http://" + closedPort(t) + "\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	roster := rosterOf(t, "-c", file)
	if roster["node-1"].API != APILive || roster["node-3"].API != APIUnreachable || roster["node-2"].API != "" {
		t.Errorf("roster %+v, want node-1 live, node-3 unreachable, node-2 unprobed", roster)
	}
	code, out, errOut := runCLI(t, ctx, "status", "-c", file)
	if code != 0 {
		t.Fatalf("status: exit %d\n%s%s", code, out, errOut)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && strings.HasPrefix(f[1], "node-") {
			rows[f[1]] = f
		}
	}
	if r := rows["node-1"]; r == nil || r[0] != "holder" || r[2] != APILive {
		t.Errorf("node-1 row %q, want holder and live\n%s", r, out)
	}
	if r := rows["node-2"]; r == nil || r[0] != "0" || r[2] != "-" {
		t.Errorf("node-2 row %q, want rank 0, not probed\n%s", r, out)
	}
	if r := rows["node-3"]; r == nil || r[0] != "1" || r[2] != APIUnreachable {
		t.Errorf("node-3 row %q, want rank 1, unreachable\n%s", r, out)
	}
	// The holder's device health follows the roster.
	devices := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && (f[0] == "valve-1" || f[0] == "pump-1") {
			devices[f[0]] = f
		}
	}
	if d := devices["valve-1"]; d == nil || d[1] != "yes" {
		t.Errorf("valve-1 row %q, want reachable\n%s", d, out)
	}
	if d := devices["pump-1"]; d == nil || d[1] != "no" || !strings.Contains(out, "connection refused") {
		t.Errorf("pump-1 row %q, want unreachable with its error\n%s", d, out)
	}
	code, out, errOut = runCLI(t, ctx, "status", "-c", file, "-o", "json")
	var res StatusResult
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || len(res.Devices) != 2 || res.Devices[1].Reachable || res.Devices[1].Device != "pump-1" {
		t.Errorf("status -o json devices %+v (exit %d, %v)\n%s", res.Devices, code, err, errOut)
	}
}
