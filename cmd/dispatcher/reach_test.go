package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// closedPort returns an address on which nothing listens: connections to
// it are refused.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// silentBroker listens and accepts, and never answers: a cluster behind a
// black hole. It closes at cleanup.
func silentBroker(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// operatorCommands are the subcommands that talk to the cluster, with the
// arguments each needs besides the brokers and the timeout.
var operatorCommands = [][]string{
	{"status", "--role", "r"},
	{"log", "--role", "r"},
	{"log", "--role", "r", "--follow"},
	{"log", "--role", "r", "--verify"},
	{"submit", "--role", "r", "--device", "d", "--action", "a"},
	{"submit", "--role", "r", "--device", "d", "--action", "a", "--wait"},
	{"topics"},
	{"topics", "--check"},
	{"members", "remove", "node-9", "--role", "r"},
}

// TestUnreachableClusterFailsFastAndSaysWhy runs every operator command
// against a closed port: each exits 3 well within its --timeout, and the
// first line of its error names the brokers, where they were set, and the
// cause.
func TestUnreachableClusterFailsFastAndSaysWhy(t *testing.T) {
	addr := closedPort(t)
	file := memberFile(t, addr, "KRABKA_TEST_REACH_TOKEN", "")
	for _, args := range operatorCommands {
		for _, via := range []struct {
			args    []string
			setting string
		}{
			{[]string{"--brokers", addr}, "--brokers"},
			{[]string{"-c", file}, "kafka.brokers in " + file},
		} {
			all := append(append(append([]string{}, args...), via.args...), "--timeout", "5s")
			start := time.Now()
			code, _, errOut := runCLI(t, context.Background(), all...)
			took := time.Since(start)
			name := strings.Join(all, " ")
			if code != int(ExitUnavailable) {
				t.Errorf("%s: exit %d, want %d\n%s", name, code, ExitUnavailable, errOut)
			}
			if took > 2*time.Second {
				t.Errorf("%s: took %v against a refused connection", name, took)
			}
			first, _, _ := strings.Cut(errOut, "\n")
			want := fmt.Sprintf("dispatcher: cannot reach the Kafka cluster at %s (%s): connection refused", addr, via.setting)
			if first != want {
				t.Errorf("%s: first line\n  %q\nwant\n  %q", name, first, want)
			}
		}
	}
}

// TestSilentClusterFailsAtTheTimeout runs every operator command against a
// broker that accepts connections and never answers: each gives up at its
// --timeout, not later, and says so.
func TestSilentClusterFailsAtTheTimeout(t *testing.T) {
	addr := silentBroker(t)
	const timeout = 700 * time.Millisecond
	for _, args := range operatorCommands {
		all := append(append([]string{}, args...), "--brokers", addr, "--timeout", timeout.String())
		start := time.Now()
		code, _, errOut := runCLI(t, context.Background(), all...)
		took := time.Since(start)
		name := strings.Join(all, " ")
		if code != int(ExitUnavailable) {
			t.Errorf("%s: exit %d, want %d\n%s", name, code, ExitUnavailable, errOut)
		}
		if took < timeout || took > timeout+time.Second {
			t.Errorf("%s: took %v, want about --timeout %v", name, took, timeout)
		}
		first, _, _ := strings.Cut(errOut, "\n")
		want := fmt.Sprintf("dispatcher: cannot reach the Kafka cluster at %s (--brokers): no answer within --timeout %v", addr, timeout)
		if first != want {
			t.Errorf("%s: first line\n  %q\nwant\n  %q", name, first, want)
		}
	}
}

// TestRunWarnsOfEachFailedJoin runs a member against a closed port: it logs
// each attempt to reach the cluster at warn level with the cause and the
// setting, from the first second on, and stops cleanly when told to.
func TestRunWarnsOfEachFailedJoin(t *testing.T) {
	t.Setenv("KRABKA_TEST_REACH_TOKEN", "secret-token-for-tests")
	addr := closedPort(t)
	file := memberFile(t, addr, "KRABKA_TEST_REACH_TOKEN", "")
	ctx, cancel := context.WithTimeout(context.Background(), 1200*time.Millisecond)
	defer cancel()
	code, _, errOut := runCLI(t, ctx, "run", "-c", file)
	if code != int(ExitOK) {
		t.Fatalf("run: exit %d\n%s", code, errOut)
	}
	var warns int
	for _, line := range strings.Split(errOut, "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "cannot reach the Kafka cluster") {
			warns++
			if !strings.Contains(line, `cause="connection refused"`) || !strings.Contains(line, "kafka.brokers in "+file) {
				t.Errorf("a warning without the cause or the setting: %s", line)
			}
		}
	}
	if warns < 2 {
		t.Errorf("%d warnings in 1.2s, want one per attempt (at 0, 0.5s, 1.5s)\n%s", warns, errOut)
	}
}

// TestUnreachableMemberAPIFailsFastAndSaysWhy runs the commands that reach
// a member's HTTP API against a closed port.
func TestUnreachableMemberAPIFailsFastAndSaysWhy(t *testing.T) {
	url := "http://" + closedPort(t)
	for _, args := range [][]string{
		{"submit", "--url", url, "--token", "t", "--device", "d", "--action", "a"},
		{"resolve", "x", "--action", "cancel", "--url", url, "--token", "t"},
	} {
		all := append(args, "--timeout", "5s")
		start := time.Now()
		code, _, errOut := runCLI(t, context.Background(), all...)
		name := strings.Join(all, " ")
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%s: took %v against a refused connection", name, took)
		}
		if code != int(ExitUnavailable) {
			t.Errorf("%s: exit %d, want %d\n%s", name, code, ExitUnavailable, errOut)
		}
		want := "dispatcher: cannot reach the member's HTTP API at " + url + " (--url, or the config's http section): connection refused: "
		if !strings.HasPrefix(errOut, want) {
			t.Errorf("%s: error\n  %q\nwant it to start\n  %q", name, errOut, want)
		}
	}
}

// TestRedirectToUnreachableLeaderNamesIt runs the commands that post to a
// member's HTTP API against a standby that redirects to a leader whose port
// is closed: the error names the leader as what cannot be reached, not the
// member that answered.
func TestRedirectToUnreachableLeaderNamesIt(t *testing.T) {
	leader := "http://" + closedPort(t)
	standby := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, leader+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	defer standby.Close()
	for _, args := range [][]string{
		{"submit", "--url", standby.URL, "--token", "t", "--device", "d", "--action", "a"},
		{"resolve", "x", "--action", "cancel", "--url", standby.URL, "--token", "t"},
	} {
		all := append(args, "--timeout", "5s")
		code, _, errOut := runCLI(t, context.Background(), all...)
		name := strings.Join(all, " ")
		if code != int(ExitUnavailable) {
			t.Errorf("%s: exit %d, want %d\n%s", name, code, ExitUnavailable, errOut)
		}
		want := "dispatcher: the member at " + standby.URL + " sent the request on to the leader at " + leader + ", which cannot be reached: connection refused: "
		if !strings.HasPrefix(errOut, want) {
			t.Errorf("%s: error\n  %q\nwant it to start\n  %q", name, errOut, want)
		}
	}
}
