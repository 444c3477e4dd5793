package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/krabka-io/krabka-dispatch/internal/config"
)

// TestStatusShowsHolderState wants status to show what the holder's API
// says it does, so an operator tells a leader that recovers (holds the
// lease, takes no command yet) from one that leads; and to show nothing
// when the members list points at another member.
func TestStatusShowsHolderState(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"member":"node-1","state":"recovering","devices":[]}`))
	}))
	defer api.Close()
	o := &StatusOptions{}
	o.Cluster.Config = &config.Config{Members: map[string]string{"node-1": api.URL, "node-2": api.URL}}
	state, _ := o.holderView(context.Background(), api.Client(), "node-1")
	if state != "recovering" {
		t.Errorf("holder state %q, want recovering", state)
	}
	if state, _ := o.holderView(context.Background(), api.Client(), "node-2"); state != "" {
		t.Errorf("state %q of another member's API taken for the holder's", state)
	}
	var out bytes.Buffer
	o.Out = &out
	if err := writeStatusTable(o, StatusResult{Role: "r", Holder: "node-1", HolderState: state, Authority: AuthorityConfirmed}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "holder:       node-1 (recovering)") {
		t.Errorf("table:\n%s", out.String())
	}
}
