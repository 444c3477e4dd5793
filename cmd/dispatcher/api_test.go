package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/internal/httpapi"
)

// TestPostRetriesUnavailable checks that a request a member answers with 503
// (no leader known yet) is sent again until a leader takes it, and that a
// member that stays unavailable ends the call at its deadline with
// ExitUnavailable.
func TestPostRetriesUnavailable(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(httpapi.ErrorResponse{Error: "no leader is known"})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"id": "c-1"})
	}))
	defer srv.Close()

	o := &APIOptions{URL: srv.URL}
	var out struct{ ID string }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := o.post(ctx, time.Second, "/v1/commands", map[string]string{"device": "d"}, &out); err != nil {
		t.Fatalf("post: %v", err)
	}
	if out.ID != "c-1" || calls.Load() != 3 {
		t.Fatalf("answer %+v after %d calls, want c-1 after 3", out, calls.Load())
	}

	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(httpapi.ErrorResponse{Error: "no leader is known"})
	}))
	defer down.Close()
	o = &APIOptions{URL: down.URL}
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := o.post(ctx, time.Second, "/v1/commands", map[string]string{"device": "d"}, &out)
	if codeOf(err) != ExitUnavailable || !errors.Is(err, errUnavailable) {
		t.Fatalf("post to a member that stays unavailable: exit %d, %v", codeOf(err), err)
	}
}
