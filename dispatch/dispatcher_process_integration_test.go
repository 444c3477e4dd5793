//go:build integration

package dispatch_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/test/recorder"
)

var (
	memberBinOnce sync.Once
	memberBin     string
	memberBinErr  error
)

// buildMember builds test/recorder/cmd/member once per test binary.
func buildMember(t *testing.T) string {
	t.Helper()
	memberBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "dispatch-member")
		if err != nil {
			memberBinErr = err
			return
		}
		memberBin = filepath.Join(dir, "member")
		cmd := exec.Command("go", "build", "-o", memberBin, "github.com/krabka-io/krabka-dispatch/test/recorder/cmd/member")
		if out, err := cmd.CombinedOutput(); err != nil {
			memberBinErr = err
			memberBin = string(out)
		}
	})
	if memberBinErr != nil {
		t.Fatalf("build the member program: %v\n%s", memberBinErr, memberBin)
	}
	return memberBin
}

// memberProc is a member running in its own process.
type memberProc struct {
	name  string
	cmd   *exec.Cmd
	lines chan string

	mu      sync.Mutex
	leading bool // its last line said "leading"
}

// isLeading reports whether the member's last line said it leads.
func (m *memberProc) isLeading() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leading
}

// drain drops the lines the member printed so far.
func (m *memberProc) drain() {
	for {
		select {
		case <-m.lines:
		default:
			return
		}
	}
}

// leaderOf returns the member that leads now, and the other one.
func leaderOf(t *testing.T, a, b *memberProc) (leader, other *memberProc) {
	t.Helper()
	switch {
	case a.isLeading() && !b.isLeading():
		return a, b
	case b.isLeading() && !a.isLeading():
		return b, a
	}
	t.Fatalf("cannot tell the leader: %s leading %v, %s leading %v", a.name, a.isLeading(), b.name, b.isLeading())
	return nil, nil
}

// startMember starts a member of role with the recorder's devices; the
// test's cleanup kills it.
func startMember(t *testing.T, c cluster, tp topics, role coordination.Role, name string, server *recorder.Server, devices, redispatch string) *memberProc {
	t.Helper()
	return startIncarnation(t, c, tp, role, name, name, server, devices, redispatch)
}

// startIncarnation starts a process named name that competes as member id
// memberID, so that two processes may share a member id.
func startIncarnation(t *testing.T, c cluster, tp topics, role coordination.Role, name, memberID string, server *recorder.Server, devices, redispatch string) *memberProc {
	t.Helper()
	cmd := exec.Command(buildMember(t),
		"-brokers", strings.Join(c.brokers, ","), "-role", role.String(), "-member", memberID,
		"-log-topic", tp.log, "-requests-topic", tp.requests, "-partitions", "1",
		"-recorder", server.URL(), "-devices", devices, "-redispatch", redispatch)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := os.Create(filepath.Join(t.TempDir(), name+".stderr"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := &memberProc{name: name, cmd: cmd, lines: make(chan string, 64)}
	go func() {
		defer close(m.lines)
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			line := scanner.Text()
			m.mu.Lock()
			m.leading = strings.HasPrefix(line, "leading")
			m.mu.Unlock()
			select {
			case m.lines <- line:
			default: // nobody waits for old lines
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			out, _ := os.ReadFile(stderr.Name())
			t.Logf("stderr of %s:\n%s", name, out)
		}
		stderr.Close()
	})
	return m
}

// waitLine waits for a line of the member that starts with prefix.
func (m *memberProc) waitLine(t *testing.T, prefix string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-m.lines:
			if !ok {
				t.Fatalf("%s exited before printing %q", m.name, prefix)
			}
			if strings.HasPrefix(line, prefix) {
				return line
			}
		case <-deadline:
			t.Fatalf("%s printed no %q within %v", m.name, prefix, timeout)
		}
	}
}

func (m *memberProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := m.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to %s: %v", sig, m.name, err)
	}
}

// waitDispatches polls the recorder until cond holds for its dispatches.
func waitDispatches(t *testing.T, server *recorder.Server, what string, timeout time.Duration, cond func([]recorder.Dispatch) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond(server.Dispatches()) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, timeout)
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
}

// stream submits n commands through the requests topic, spread over the
// devices, and returns the IDs whose Submit succeeded: the accepted ones.
func stream(t *testing.T, client *dispatch.Client, role coordination.Role, prefix string, n int, devices ...string) <-chan []string {
	done := make(chan []string, 1)
	go func() {
		var accepted []string
		for i, id := range ids(prefix, n) {
			cmd := dispatch.Command{ID: id, Role: role.String(), Device: devices[i%len(devices)], Action: "set",
				Deadline: time.Now().Add(2 * time.Minute)}
			if err := client.Submit(t.Context(), cmd); err != nil {
				t.Errorf("submit %s: %v", id, err)
				continue
			}
			accepted = append(accepted, id)
		}
		done <- accepted
	}()
	return done
}

// TestLeaderKilledMidStream kills the leader's process (SIGKILL) in the
// middle of a stream of commands: the standby takes over, recovers the
// pending commands and the intake position from the log, and no accepted
// command is lost.
func TestLeaderKilledMidStream(t *testing.T) {
	c := realCluster(t)
	tp := c.newTopics(t)
	role := testRole(t)
	server := newRecorder(t)
	a := startMember(t, c, tp, role, "a", server, "valve,pump", "valve,pump")
	a.waitLine(t, "leading", 30*time.Second)
	b := startMember(t, c, tp, role, "b", server, "valve,pump", "valve,pump")
	client := newClient(t, c, tp)

	result := stream(t, client, role, "cmd", 150, "valve", "pump")
	waitDispatches(t, server, "30 dispatches", 30*time.Second, func(d []recorder.Dispatch) bool { return len(d) >= 30 })
	victim, successor := leaderOf(t, a, b)
	successor.drain()
	victim.signal(t, syscall.SIGKILL)
	killed := time.Now()
	successor.waitLine(t, "leading", 30*time.Second)
	t.Logf("%s took over %v after %s was killed", successor.name, time.Since(killed), victim.name)
	accepted := <-result

	outcomes, entries := waitSettled(t, c, tp, role.String(), accepted, 90*time.Second)
	for _, id := range accepted {
		if outcomes[id].Status != dispatch.StatusSucceeded {
			t.Errorf("%s: %+v", id, outcomes[id])
		}
	}
	verifyLog(t, entries)
	checkDurableBeforeDispatch(t, entries, server.Dispatches())
	byMember := map[string]int{}
	for _, d := range server.Dispatches() {
		byMember[d.Member]++
	}
	redispatched := 0
	for _, e := range entries {
		if e.Kind == dispatch.EntryRedispatched {
			redispatched++
		}
	}
	t.Logf("%d commands accepted; dispatches by member %v; %d redispatched after the takeover", len(accepted), byMember, redispatched)
	if byMember[successor.name] == 0 {
		t.Error("the successor dispatched nothing")
	}
}

// TestLeaderPausedAndResumed pauses the leader's process (SIGSTOP) in the
// middle of a stream, lets the standby take over and dispatch, and resumes
// the old leader (SIGCONT): its freshness guard holds its dispatches until a
// renewal, which the broker fences. A fencing device never admits a term
// below one it has seen; the double dispatches at a device that does not
// fence are counted and reported.
func TestLeaderPausedAndResumed(t *testing.T) {
	c := realCluster(t)
	tp := c.newTopics(t)
	role := testRole(t)
	server := newRecorder(t)
	server.Behave("fenced", recorder.Behaviour{Fencing: true})
	a := startMember(t, c, tp, role, "a", server, "fenced,plain", "fenced,plain")
	a.waitLine(t, "leading", 30*time.Second)
	b := startMember(t, c, tp, role, "b", server, "fenced,plain", "fenced,plain")
	client := newClient(t, c, tp)

	result := stream(t, client, role, "cmd", 150, "fenced", "plain")
	waitDispatches(t, server, "20 dispatches", 30*time.Second, func(d []recorder.Dispatch) bool { return len(d) >= 20 })
	paused, successor := leaderOf(t, a, b)
	successor.drain()
	paused.signal(t, syscall.SIGSTOP)
	pausedAt := time.Now()
	successor.waitLine(t, "leading", 30*time.Second)
	t.Logf("%s took over %v after %s was paused", successor.name, time.Since(pausedAt), paused.name)
	waitDispatches(t, server, "10 dispatches by the successor", 30*time.Second, func(ds []recorder.Dispatch) bool {
		n := 0
		for _, d := range ds {
			if d.Member == successor.name {
				n++
			}
		}
		return n >= 10
	})
	resumed := len(server.Dispatches())
	paused.drain()
	paused.signal(t, syscall.SIGCONT)
	line := paused.waitLine(t, "halted", 30*time.Second)
	t.Logf("%s after SIGCONT: %s", paused.name, line)
	accepted := <-result

	outcomes, entries := waitSettled(t, c, tp, role.String(), accepted, 90*time.Second)
	for _, id := range accepted {
		if s := outcomes[id].Status; s != dispatch.StatusSucceeded && s != dispatch.StatusInDoubt {
			t.Errorf("%s: %+v", id, outcomes[id])
		}
	}
	verifyLog(t, entries)
	checkDurableBeforeDispatch(t, entries, server.Dispatches())

	all := server.Dispatches()
	highest, refused := coordination.NoTerm, 0
	for _, d := range all {
		if d.Device != "fenced" {
			continue
		}
		if !d.Accepted {
			refused++
			continue
		}
		if d.Term.Compare(highest) < 0 {
			t.Errorf("the fencing device admitted term %s (token %s) for %s after term %s", d.Term, d.Token, d.CommandID, highest)
		}
		highest = d.Term
	}
	acted := map[string]int{}
	for _, d := range all {
		if d.Device == "plain" && d.Accepted {
			acted[d.CommandID]++
		}
	}
	var doubles []string
	for id, n := range acted {
		if n > 1 {
			doubles = append(doubles, id)
		}
	}
	zombie := 0
	for _, d := range all[resumed:] {
		if d.Member == paused.name {
			zombie++
		}
	}
	t.Logf("fencing device: %d stale dispatches refused; plain device: %d double dispatches %v; dispatches by the resumed leader: %d",
		refused, len(doubles), doubles, zombie)
	// A pause that fell between a freshness check and its device write lets
	// that one write out on waking: the rest of the zombie window, which
	// device-side fencing closes. One lane per device has at most one such
	// write; everything queued behind it waits for a renewal that is fenced.
	if zombie > 2 {
		t.Errorf("the resumed leader dispatched %d commands after its successor took over; at most one per device may slip past the freshness guard", zombie)
	}
}
