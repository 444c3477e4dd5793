package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func TestFailover(t *testing.T) {
	var out lockedBuffer
	if err := run(context.Background(), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.b.String())
	}
	text := out.b.String()
	for _, want := range []string{"node-1 leads in term ", "cmd-1: succeeded", "cmd-2: succeeded", "node-1 crashes", "follows term ", ": true)", "cmd-3 (sent during the failover): succeeded"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	// cmd-3 was driven by the new leader, not the crashed one.
	if m := regexp.MustCompile(`(node-\d) drives valve-1: cmd-3`).FindStringSubmatch(text); m == nil || m[1] == "node-1" {
		t.Errorf("cmd-3 was driven by %v:\n%s", m, text)
	}
}
