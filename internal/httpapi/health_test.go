package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSubmitToUnreachableDeviceIs503 wants a submit that the member refuses
// for a device whose health check failed answered 503 with Retry-After and
// the reason, not 500 and not a 202 that fails later.
func TestSubmitToUnreachableDeviceIs503(t *testing.T) {
	h := NewHandler(newFakeBackend(true), Options{})
	rec := do(t, h, "POST", "/v1/commands?wait=30s", "", `{"id":"c1","device":"down","action":"a"}`)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("%d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	var body ErrorResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body.Error, `"down" is unreachable`) || !strings.Contains(body.Error, "broker unreachable") {
		t.Errorf("error %q does not name the device and the reason", body.Error)
	}
}

// TestPageShowsDeviceHealth wants the status page to list each device's
// last health check, with the error of one that is down.
func TestPageShowsDeviceHealth(t *testing.T) {
	b := newFakeBackend(true)
	b.leadership.Devices = []DeviceHealth{
		{Device: "pump", Reachable: true, CheckedAt: time.Now()},
		{Device: "valve", Error: "dial tcp 192.0.2.1:1883: i/o timeout", CheckedAt: time.Now()},
	}
	rec := do(t, NewHandler(b, Options{}), "GET", "/", "", "")
	page := rec.Body.String()
	for _, want := range []string{"<td>pump</td><td class=\"state-succeeded\">reachable<", "<td>valve</td><td class=\"state-failed\">unreachable<", "i/o timeout"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}
