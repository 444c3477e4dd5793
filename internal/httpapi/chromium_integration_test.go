//go:build integration

package httpapi

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// EnvChromium names the browser binary; "chromium" on the PATH when unset.
const EnvChromium = "KRABKA_CHROMIUM"

// chromium returns the headless browser, or fails the test: under the
// integration tag the browser is a required service.
func chromium(t *testing.T) string {
	t.Helper()
	name := os.Getenv(EnvChromium)
	if name == "" {
		name = "chromium"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("headless Chromium not found (%v): install Debian's chromium package (scripts/deps.sh) or set %s", err, EnvChromium)
	}
	return path
}

// browse runs headless Chromium on url with extra flags and returns stdout.
func browse(t *testing.T, url string, extra ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir=" + t.TempDir(),
	}, extra...)
	args = append(args, url)
	out, err := exec.CommandContext(ctx, chromium(t), args...).Output()
	if err != nil {
		t.Fatalf("chromium %v: %v", args, err)
	}
	return string(out)
}

// serveLoopback serves h on 127.0.0.1 only.
func serveLoopback(t *testing.T, h http.Handler) string {
	t.Helper()
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

// TestStatusPageInChromium loads the status page in a real browser, lets its
// script run, and reads the DOM it leaves: the leadership, the roster with
// ranks, the lease counted down by the script, and the recent commands.
func TestStatusPageInChromium(t *testing.T) {
	b := newFakeBackend(true)
	now := time.Now()
	b.commands["cmd-1"] = CommandState{ID: "cmd-1", Device: "valve-1", Action: "open", State: dispatch.StatusSucceeded.String(), Detail: "acknowledged", UpdatedAt: now}
	b.commands["cmd-2"] = CommandState{ID: "cmd-2", Device: "pump-1", Action: "write-register", State: dispatch.StatusInDoubt.String(), Reason: "no answer", UpdatedAt: now}
	url := serveLoopback(t, NewHandler(b, Options{}))

	dom := browse(t, url+"/", "--virtual-time-budget=3000", "--dump-dom")
	for _, want := range []string{
		`data-live="true"`, // the script ran
		`id="holder">node-1<`,
		`id="term">4096<`,
		`id="token">7:3<`,
		"<td>node-3</td>",
		"cmd-1", "succeeded", "cmd-2", "in-doubt",
		" s left", // the countdown the script writes
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page's DOM lacks %q", want)
		}
	}
	if strings.Contains(dom, "ms left") {
		t.Error("the lease still shows the server's text: the countdown did not run")
	}
	// The roster keeps its ranks after the script's refresh from the API,
	// the holder shown as such rather than at rank 0 beside the first
	// standby.
	for _, row := range []string{"<td>holder</td><td>node-1</td>", "<td>0</td><td>node-2</td>", "<td>1</td><td>node-3</td>"} {
		if !strings.Contains(dom, row) {
			t.Errorf("roster lacks %q", row)
		}
	}
	if t.Failed() {
		t.Logf("DOM:\n%s", dom)
	}

	shot := filepath.Join(t.TempDir(), "status.png")
	browse(t, url+"/", "--window-size=1024,768", "--screenshot="+shot)
	info, err := os.Stat(shot)
	if err != nil || info.Size() < 1000 {
		t.Fatalf("screenshot: %v (%v bytes)", err, info)
	}
}
