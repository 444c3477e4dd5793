//go:build integration

package coordination_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// The holder process: the crash and pause tests need a leader that the test
// can kill with SIGKILL and stop with SIGSTOP, so it must be another OS
// process. The test binary runs itself again with -test.run selecting
// TestKafkaHolderProcess and the holder's settings in these variables.
const (
	envHolderRole  = "KRABKA_TEST_HOLDER_ROLE"  // the role to hold; unset in a normal run
	envHolderTopic = "KRABKA_TEST_HOLDER_TOPIC" // the topic of its guarded writes
	envHolderTxn   = "KRABKA_TEST_HOLDER_TXN"   // "v1" or "v2"
)

// holderMember is the member id of the holder process.
const holderMember = "holder"

// TestKafkaHolderProcess is the body of the holder process and does nothing
// in a normal run. It holds the role, then writes one guarded record every
// 50 milliseconds to partition 0 of the topic, and reports on stdout:
//
//	HOLD <token>                        it holds the role
//	WROTE <token>                       a guarded write committed under token
//	WRITEERR fenced=<bool> ended=<bool> <error>
//	                                    a guarded write failed; fenced says its
//	                                    error wraps ErrFenced, ended that the
//	                                    leadership had ended with ErrFenced
//	DONE fenced=<bool> <error>          the leadership ended; the process exits
func TestKafkaHolderProcess(t *testing.T) {
	roleName := os.Getenv(envHolderRole)
	if roleName == "" {
		return
	}
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
	}
	var env kafkaEnv
	for _, e := range realEnvs(t) {
		if e.name == os.Getenv(envHolderTxn) {
			env = e
		}
	}
	if env.name == "" {
		t.Fatalf("%s=%q names no transaction version", envHolderTxn, os.Getenv(envHolderTxn))
	}
	role, err := coordination.NewRole(roleName)
	if err != nil {
		t.Fatal(err)
	}
	topic := os.Getenv(envHolderTopic)
	tr := env.transport(t, testLease(t))
	ctx := context.Background()
	l, err := coordination.AcquireLeadership(testCtx(t, time.Minute), tr, role, member(t, holderMember), leadershipOptions(t)...)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	say("HOLD %s", l.Token())
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-l.Done():
			say("DONE fenced=%t %v", errors.Is(l.Err(), coordination.ErrFenced), l.Err())
			return
		case <-tick.C:
		}
		token, err := l.Write(ctx, func(token coordination.FencingToken) ([]coordination.GuardedRecord, error) {
			return []coordination.GuardedRecord{{
				Partition: coordination.TopicPartition{Topic: topic},
				Value:     tokenValue(holderMember, token),
			}}, nil
		})
		if err != nil {
			say("WRITEERR fenced=%t ended=%t %v", errors.Is(err, coordination.ErrFenced), errors.Is(l.Err(), coordination.ErrFenced), err)
			continue
		}
		say("WROTE %s", token)
	}
}

// holderProc is a running holder process.
type holderProc struct {
	cmd   *exec.Cmd
	lines chan string // closed when its stdout ends
}

// startHolder starts a holder process for the role and waits until it holds
// the role. The process is killed at the end of the test.
func startHolder(t *testing.T, env kafkaEnv, role coordination.Role, topic string) (*holderProc, coordination.FencingToken) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKafkaHolderProcess$", "-test.count=1", "-test.v=false")
	cmd.Env = append(os.Environ(),
		envHolderRole+"="+role.String(),
		envHolderTopic+"="+topic,
		envHolderTxn+"="+env.name,
	)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &holderProc{cmd: cmd, lines: make(chan string, 1024)}
	go func() {
		defer close(h.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line := h.waitFor(t, "HOLD ", 60*time.Second)
	token, err := coordination.ParseFencingToken(strings.TrimPrefix(line, "HOLD "))
	if err != nil {
		t.Fatalf("holder said %q: %v", line, err)
	}
	return h, token
}

// waitFor returns the next line of the holder that starts with prefix,
// skipping the others, and fails the test after within.
func (h *holderProc) waitFor(t *testing.T, prefix string, within time.Duration) string {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case line, ok := <-h.lines:
			if !ok {
				t.Fatalf("the holder exited before it said %q", prefix)
			}
			if strings.HasPrefix(line, prefix) {
				return line
			}
		case <-timeout:
			t.Fatalf("the holder did not say %q within %v", prefix, within)
		}
	}
}

// linesUntil returns every line of the holder up to and including the
// first that starts with prefix, and fails the test after within.
func (h *holderProc) linesUntil(t *testing.T, prefix string, within time.Duration) []string {
	t.Helper()
	var lines []string
	timeout := time.After(within)
	for {
		select {
		case line, ok := <-h.lines:
			if !ok {
				t.Fatalf("the holder exited before it said %q; it said %q", prefix, lines)
			}
			lines = append(lines, line)
			if strings.HasPrefix(line, prefix) {
				return lines
			}
		case <-timeout:
			t.Fatalf("the holder did not say %q within %v; it said %q", prefix, within, lines)
		}
	}
}

// signal sends sig to the holder.
func (h *holderProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := h.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to the holder: %v", sig, err)
	}
}

// standby is one member competing for a role in this process.
type standby struct {
	name   string
	cancel context.CancelFunc
	result chan standbyResult
	epochs *epochWatch
}

// epochWatch is the transport of a standby, which notes when the standby
// first called AcquireEpoch: the instant it challenged.
type epochWatch struct {
	*coordination.KafkaTransport
	mu         sync.Mutex
	challenged time.Time
}

func (w *epochWatch) AcquireEpoch(ctx context.Context, role coordination.Role) (coordination.FencingToken, error) {
	w.mu.Lock()
	if w.challenged.IsZero() {
		w.challenged = time.Now()
	}
	w.mu.Unlock()
	return w.KafkaTransport.AcquireEpoch(ctx, role)
}

// challengedAt returns when the standby first challenged, or the zero time.
func (s *standby) challengedAt() time.Time {
	s.epochs.mu.Lock()
	defer s.epochs.mu.Unlock()
	return s.epochs.challenged
}

type standbyResult struct {
	l   *coordination.Leadership
	err error
	at  time.Time
}

// startStandby starts AcquireLeadership for the member in a goroutine and
// waits until its registration is visible, so the order of the calls is the
// order of the roster. The leadership it wins resigns at the end of the test.
func startStandby(t *testing.T, env kafkaEnv, role coordination.Role, name string, opts ...coordination.Option) *standby {
	t.Helper()
	tr := &epochWatch{KafkaTransport: env.transport(t, testLease(t))}
	ctx, cancel := context.WithCancel(context.Background())
	s := &standby{name: name, cancel: cancel, result: make(chan standbyResult, 1), epochs: tr}
	go func() {
		l, err := coordination.AcquireLeadership(ctx, tr, role, member(t, name), opts...)
		s.result <- standbyResult{l: l, err: err, at: time.Now()}
	}()
	t.Cleanup(func() {
		cancel()
		r := <-s.result
		s.result <- r
		if r.l != nil {
			_ = r.l.Resign(context.Background())
		}
	})
	bystander := env.transport(t, testLease(t))
	ctx2 := testCtx(t, 30*time.Second)
	eventually(t, 20*time.Second, func() error {
		state, err := coordination.DescribeRoleState(ctx2, bystander, role)
		if err != nil {
			return err
		}
		if _, ok := state.Entry(member(t, name)); !ok {
			return fmt.Errorf("%s is not in the roster %+v", name, state.Roster)
		}
		return nil
	})
	return s
}

// wait returns the leadership of the standby, failing the test when it
// does not come within.
func (s *standby) wait(t *testing.T, within time.Duration) standbyResult {
	t.Helper()
	select {
	case r := <-s.result:
		s.result <- r
		if r.err != nil {
			t.Fatalf("standby %s: %v", s.name, r.err)
		}
		return r
	case <-time.After(within):
		t.Fatalf("standby %s did not take the role within %v", s.name, within)
	}
	return standbyResult{}
}

// pending reports whether the standby is still waiting.
func (s *standby) pending() bool {
	select {
	case r := <-s.result:
		s.result <- r
		return false
	default:
		return true
	}
}
