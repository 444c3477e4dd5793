package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// TestSubmitBatchAnswersEachCommand: a batch reaches the backend as one
// call, and each command's item holds what a submission of it alone would
// have answered.
func TestSubmitBatchAnswersEachCommand(t *testing.T) {
	b := newFakeBackend(true)
	h := NewHandler(b, Options{Token: "s3cret"})
	body := `{"commands":[
		{"id":"a","device":"d","action":"open"},
		{"id":"","device":"d"},
		{"id":"b","device":"nope"},
		{"id":"c","device":"down"},
		{"id":"a","device":"e","action":"open"},
		{"id":"a","device":"d","action":"open"}
	]}`
	if rec := do(t, h, "POST", "/v1/commands/batch", "", body); rec.Code != http.StatusUnauthorized {
		t.Fatalf("without the token: %d, want 401", rec.Code)
	}
	rec := do(t, h, "POST", "/v1/commands/batch", "s3cret", body)
	if rec.Code != http.StatusOK {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	var resp BatchResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		t.Fatal(err)
	}
	var codes []int
	for _, it := range resp.Results {
		codes = append(codes, it.Status)
		if (it.Command == nil) == (it.Error == nil) {
			t.Errorf("item %+v: want a command or an error", it)
		}
	}
	want := []int{http.StatusAccepted, http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusServiceUnavailable, http.StatusConflict, http.StatusAccepted}
	if !slices.Equal(codes, want) {
		t.Fatalf("statuses %v, want %v", codes, want)
	}
	if e := resp.Results[1].Error.Error; !strings.HasPrefix(e, "commands[1]: id:") {
		t.Errorf("the malformed command's error %q names neither its place nor its field", e)
	}
	if c := resp.Results[4].Error; c.ID != "a" || !slices.Equal(c.Differs, []string{dispatch.FieldDevice}) {
		t.Errorf("the conflict's item %+v, want the ID and the device", c)
	}
	if got := resp.Results[0].Command; got.ID != "a" || got.State != StatePending {
		t.Errorf("the first command's item %+v", got)
	}
	// The malformed command never reached the backend; the rest did, in
	// one call.
	if !slices.Equal(b.batches, []int{5}) {
		t.Errorf("batches %v, want one of 5", b.batches)
	}

	rec = do(t, h, "POST", "/v1/commands/batch?wait=1s", "s3cret", `{"commands":[{"id":"w","device":"d"}]}`)
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("%d %s %v", rec.Code, rec.Body, err)
	}
	if it := resp.Results[0]; it.Status != http.StatusOK || it.Command.State != dispatch.StatusSucceeded.String() {
		t.Errorf("waited for: %+v", it)
	}
}

// TestSubmitBatchRefusesTheWholeRequest: a malformed request, an empty or
// too large batch and a bad wait are refused whole, before the backend.
func TestSubmitBatchRefusesTheWholeRequest(t *testing.T) {
	b := newFakeBackend(true)
	h := NewHandler(b, Options{})
	var many strings.Builder
	many.WriteString(`{"commands":[`)
	for i := range MaxBatchCommands + 1 {
		if i > 0 {
			many.WriteString(",")
		}
		fmt.Fprintf(&many, `{"id":"c%d","device":"d"}`, i)
	}
	many.WriteString(`]}`)
	for name, req := range map[string][2]string{
		"not JSON":      {"/v1/commands/batch", `[`},
		"unknown field": {"/v1/commands/batch", `{"command":[]}`},
		"no command":    {"/v1/commands/batch", `{"commands":[]}`},
		"too many":      {"/v1/commands/batch", many.String()},
		"bad wait":      {"/v1/commands/batch?wait=forever", `{"commands":[{"id":"x","device":"d"}]}`},
	} {
		if rec := do(t, h, "POST", req[0], "", req[1]); rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", name, rec.Code, rec.Body)
		}
	}
	if len(b.batches) != 0 {
		t.Errorf("the backend got batches %v", b.batches)
	}
}

// TestSubmitBatchOnStandbyRedirects: a standby sends a batch to the
// leader, as it does a single submission.
func TestSubmitBatchOnStandbyRedirects(t *testing.T) {
	h := NewHandler(newFakeBackend(false), Options{})
	rec := do(t, h, "POST", "/v1/commands/batch?wait=1s", "", `{"commands":[{"id":"x","device":"d"}]}`)
	if rec.Code != http.StatusTemporaryRedirect {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if loc := rec.Header().Get("Location"); loc != "http://127.0.0.1:9/v1/commands/batch?wait=1s" {
		t.Errorf("Location = %q", loc)
	}
}
