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

// Open starts socat with two raw pseudo-terminals linked to each other and
// returns the paths of the two ends. A byte written to one end is read from
// the other. socat runs until the test ends; the cleanup kills it and waits
// for it to exit.
func Open(t testing.TB) (a, b string) {
	t.Helper()
	bin := os.Getenv(EnvSocat)
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("socat"); err != nil {
			t.Fatalf("ptypair: socat is not installed (scripts/deps.sh installs it, or set %s): %v", EnvSocat, err)
		}
	}
	dir := t.TempDir()
	a, b = filepath.Join(dir, "a"), filepath.Join(dir, "b")
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "-d", "-d",
		"pty,raw,echo=0,link="+a,
		"pty,raw,echo=0,link="+b)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("ptypair: start socat: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	// socat reports "starting data transfer loop" once both ends exist; poll
	// for the two links, the observable part of that, under a deadline.
	deadline := time.Now().Add(readyTimeout)
	for {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("ptypair: socat exited early: %v\n%s", err, stderr.String())
		default:
		}
		if exists(a) && exists(b) {
			return a, b
		}
		if time.Now().After(deadline) {
			t.Fatalf("ptypair: socat did not create %s and %s within %v", a, b, readyTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
