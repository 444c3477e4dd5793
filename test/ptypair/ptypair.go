// Package ptypair connects two pseudo-terminals with socat, so that a test of
// a serial protocol can run a client on one end and a responder on the other
// without hardware.
//
// socat is the real service here: the test that uses it carries the
// integration build tag, and a missing socat fails the test rather than
// skipping it. KRABKA_SOCAT names the binary when it is not on PATH.
package ptypair

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// EnvSocat names the environment variable that overrides the socat binary.
const EnvSocat = "KRABKA_SOCAT"

// readyTimeout bounds the wait for socat to create both terminals.
const readyTimeout = 10 * time.Second

// Pair is a running socat that links two pseudo-terminals.
type Pair struct {
	// A and B are the paths of the two ends. A byte written to one end is
	// read from the other.
	A, B string

	bin  string
	cmd  *exec.Cmd
	done chan error
}

// Open starts socat with two raw pseudo-terminals linked to each other.
// socat runs until the test ends; the cleanup kills it and waits for it.
func Open(t testing.TB) *Pair {
	t.Helper()
	bin := os.Getenv(EnvSocat)
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("socat"); err != nil {
			t.Fatalf("ptypair: socat is not installed (scripts/deps.sh installs it, or set %s): %v", EnvSocat, err)
		}
	}
	dir := t.TempDir()
	p := &Pair{A: filepath.Join(dir, "a"), B: filepath.Join(dir, "b"), bin: bin}
	p.start(t)
	t.Cleanup(p.Stop)
	return p
}

// Stop kills socat and waits for it to exit: both ends hang up, as a serial
// adapter that is unplugged does. It is safe to call more than once.
func (p *Pair) Stop() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	p.cmd = nil
	// socat removes its links when it exits cleanly, not when killed.
	_ = os.Remove(p.A)
	_ = os.Remove(p.B)
}

// Restart stops socat and starts a new one on the same paths: the adapter
// is plugged in again. Whoever had an end open must open it again.
func (p *Pair) Restart(t testing.TB) {
	t.Helper()
	p.Stop()
	p.start(t)
}

func (p *Pair) start(t testing.TB) {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(p.bin, "-d", "-d",
		"pty,raw,echo=0,link="+p.A,
		"pty,raw,echo=0,link="+p.B)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("ptypair: start socat: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	p.cmd, p.done = cmd, done
	// socat creates both links before it starts relaying; poll for them,
	// under a deadline.
	deadline := time.Now().Add(readyTimeout)
	for !exists(p.A) || !exists(p.B) {
		select {
		case err := <-done:
			p.cmd = nil
			t.Fatalf("ptypair: socat exited early: %v\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			p.Stop()
			t.Fatalf("ptypair: socat did not create %s and %s within %v", p.A, p.B, readyTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
