//go:build integration

package demo

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestDemoStatusPageInChromium keeps the demo's members up after the audit
// and loads the new leader's status page in headless Chromium: the page
// shows the new holder and the commands the log recorded, from both
// leaderships.
func TestDemoStatusPageInChromium(t *testing.T) {
	browser := os.Getenv("KRABKA_CHROMIUM")
	if browser == "" {
		browser = "chromium"
	}
	path, err := exec.LookPath(browser)
	if err != nil {
		t.Fatalf("headless Chromium not found (%v): install Debian's chromium package (scripts/deps.sh) or set KRABKA_CHROMIUM", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	urls := make(chan [2]string, 8)
	var out lockedBuffer
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, Options{Out: &out, Commands: 4, Hold: -1, OnServing: func(m, u string) { urls <- [2]string{m, u} }})
		done <- err
	}()
	// Three pages at the start, then the new leader's after the failover.
	var leader [2]string
	for i := 0; i < 4; i++ {
		select {
		case leader = <-urls:
		case err := <-done:
			t.Fatalf("demo ended early: %v\n%s", err, out.String())
		}
	}
	// Wait for the audit, so every command has its outcome in the log.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "The status pages stay up") {
		if time.Now().After(deadline) {
			t.Fatalf("the demo did not reach its hold:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	bctx, bcancel := context.WithTimeout(ctx, time.Minute)
	dom, err := exec.CommandContext(bctx, path, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir="+t.TempDir(), "--virtual-time-budget=2000", "--dump-dom", leader[1]+"/").Output()
	bcancel()
	cancel()
	if err := <-done; err != nil && ctx.Err() == nil {
		t.Errorf("demo: %v", err)
	}
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	page := string(dom)
	for _, want := range []string{`data-live="true"`, `id="holder">` + leader[0] + `<`, ">leader<", "cmd-001", "cmd-004", "succeeded", " s left"} {
		if !strings.Contains(page, want) {
			t.Errorf("%s's page lacks %q", leader[0], want)
		}
	}
	if t.Failed() {
		t.Logf("DOM:\n%s", page)
	}
}

// lockedBuffer lets the test read the timeline while the demo writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
