package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/krabka-io/krabka-dispatch/internal/httpapi"
)

// fakeLeader answers resolves with the state the test picks, and a standby
// in front of it redirects to it.
func fakeLeader(t *testing.T, state string) (standbyURL string) {
	t.Helper()
	serve := func(h http.Handler) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewUnstartedServer(h)
		srv.Listener = ln
		srv.Start()
		t.Cleanup(srv.Close)
		return srv.URL
	}
	leader := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(httpapi.ErrorResponse{Error: "missing or wrong bearer token"})
			return
		}
		var req httpapi.ResolveRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.URL.Path != "/v1/commands/c%2F1/resolve" && r.URL.Path != "/v1/commands/c/1/resolve" {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(httpapi.ErrorResponse{Error: "bad request " + r.URL.Path})
			return
		}
		_ = json.NewEncoder(w).Encode(httpapi.CommandState{ID: "c/1", State: state, Reason: req.Action})
	}))
	return serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", leader+r.URL.RequestURI())
		w.WriteHeader(http.StatusTemporaryRedirect)
	}))
}

func TestResolveThroughAStandby(t *testing.T) {
	ctx := context.Background()
	url := fakeLeader(t, "cancelled")
	code, out, errOut := runCLI(t, ctx, "resolve", "c/1", "--action", "cancel", "--url", url, "--token", "tok")
	if code != 0 || !strings.Contains(out, "cancelled") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	t.Setenv(EnvToken, "tok")
	code, out, errOut = runCLI(t, ctx, "resolve", "c/1", "--action", "redispatch", "--url", fakeLeader(t, "in-doubt"), "-o", "json")
	if code != int(ExitCommandFailed) || !strings.Contains(out, `"state": "in-doubt"`) {
		t.Fatalf("a redispatch left in doubt: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Setenv(EnvToken, "")
	if code, _, errOut := runCLI(t, ctx, "resolve", "c/1", "--action", "cancel", "--url", url); code == 0 || !strings.Contains(errOut, "401") {
		t.Fatalf("without the token: exit %d\n%s", code, errOut)
	}
	if code, _, _ := runCLI(t, ctx, "resolve", "c/1", "--action", "undo", "--url", url); code != int(ExitUsage) {
		t.Fatalf("a bad action: exit %d", code)
	}
	if code, _, _ := runCLI(t, ctx, "resolve", "--action", "cancel", "--url", url); code != int(ExitUsage) {
		t.Fatalf("no command id: exit %d", code)
	}
}
