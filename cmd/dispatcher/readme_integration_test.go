//go:build integration

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
)

// readmeBlock returns the lines of the ```sh block that follows the
// paragraph "On a real cluster:" in README.md.
func readmeBlock(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "\nOn a real cluster:\n")
	if !ok {
		t.Fatal(`README.md has no paragraph "On a real cluster:"`)
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	if !ok {
		t.Fatal("README.md: no ```sh block under On a real cluster")
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("README.md: the block does not end")
	}
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// shell is one bash process fed the README's lines one at a time, so that
// what one line sets (a variable, a background job) holds for the next.
type shell struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	seq   int
}

func startShell(t *testing.T, dir string) *shell {
	t.Helper()
	cmd := exec.Command("bash", "--noprofile", "--norc")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sh := &shell{cmd: cmd, stdin: stdin, lines: make(chan string, 1024)}
	go func() {
		defer close(sh.lines)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			sh.lines <- sc.Text()
		}
	}()
	waited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = pw.Close()
		close(waited)
	}()
	t.Cleanup(func() {
		// The shell and its background jobs share its process group.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-waited
	})
	return sh
}

// run feeds one line and returns its exit status, its output, and $!.
func (sh *shell) run(t *testing.T, line string, timeout time.Duration) (int, int, string) {
	t.Helper()
	sh.seq++
	marker := fmt.Sprintf("__readme_done_%d", sh.seq)
	if _, err := fmt.Fprintf(sh.stdin, "%s\necho %s $? ${!:-0}\n", line, marker); err != nil {
		t.Fatalf("writing to the shell: %v", err)
	}
	var out strings.Builder
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-sh.lines:
			if !ok {
				t.Fatalf("the shell ended during %q:\n%s", line, out.String())
			}
			if rest, found := strings.CutPrefix(l, marker+" "); found {
				f := strings.Fields(rest)
				code, _ := strconv.Atoi(f[0])
				pid, _ := strconv.Atoi(f[1])
				return code, pid, out.String()
			}
			out.WriteString(l + "\n")
		case <-deadline:
			t.Fatalf("%q did not finish within %v:\n%s", line, timeout, out.String())
		}
	}
}

// drain returns what the shell's background jobs printed so far.
func (sh *shell) drain() string {
	var b strings.Builder
	for {
		select {
		case l, ok := <-sh.lines:
			if !ok {
				return b.String()
			}
			b.WriteString(l + "\n")
		default:
			return b.String()
		}
	}
}

// editFile replaces each old text with its new one in path; an old text
// that is not there fails the test, so the example file and this test do
// not drift apart unseen.
func editFile(t *testing.T, path string, pairs ...string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			t.Fatalf("%s no longer holds %q", path, pairs[i])
		}
		s = strings.ReplaceAll(s, pairs[i], pairs[i+1])
	}
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestReadmeRealClusterBlock runs the README's "On a real cluster" block
// line by line, verbatim, in one shell in a directory that looks like a
// clone of the repository, against the real cluster and Mosquitto. After
// the cp line it edits node-1.yaml as the line's comment tells a reader to:
// the brokers (Kafka's and the valve's MQTT broker) and the listen address;
// and, because the cluster is shared, a role and topic names of its own.
// Every line must exit 0; after the `run ... &` line the test waits until
// the member leads, as a reader would, before the next line.
func TestReadmeRealClusterBlock(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	mqttURL := os.Getenv(EnvMQTTURL)
	if mqttURL == "" {
		t.Fatalf("%s is not set: start Mosquitto with scripts/services/20-mosquitto.sh and source .run/mosquitto/env", EnvMQTTURL)
	}
	lines := readmeBlock(t)

	// A directory that stands for the clone: every entry of the repository
	// root, linked.
	dir := t.TempDir()
	entries, err := os.ReadDir("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == ".git" || e.Name() == ".run" || e.Name() == "dispatcher" || e.Name() == "node-1.yaml" {
			continue
		}
		abs, err := filepath.Abs(filepath.Join("../..", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(abs, filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("GOFLAGS", "-buildvcs=false")
	sh := startShell(t, dir)
	listen := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	role := kafkatest.UniqueName(t, "readme")

	var runPID int
	for _, line := range lines {
		timeout := 2 * time.Minute
		code, pid, out := sh.run(t, line, timeout)
		t.Logf("$ %s\n%s(exit %d)", line, out, code)
		if code != 0 {
			t.Fatalf("%q exited %d:\n%s%s", line, code, out, sh.drain())
		}
		switch {
		case strings.HasPrefix(line, "cp dispatcher.example.yaml node-1.yaml"):
			editFile(t, filepath.Join(dir, "node-1.yaml"),
				"brokers: [127.0.0.1:9092, 127.0.0.1:9093, 127.0.0.1:9094]", "brokers: ["+strings.Join(brokers, ", ")+"]",
				"brokers: [tcp://127.0.0.1:1883]", "brokers: ["+mqttURL+"]",
				"listen: 127.0.0.1:8081", "listen: "+listen,
				"node-1: http://127.0.0.1:8081", "node-1: http://"+listen,
				"role: controller", "role: "+role,
				"coordination: __coordination_state", "coordination: "+role+".coord",
				"log: dispatch.log", "log: "+role+".log",
				"requests: dispatch.requests", "requests: "+role+".requests",
			)
		case strings.HasSuffix(strings.TrimSpace(strings.SplitN(line, "#", 2)[0]), "&"):
			runPID = pid
			waitLeading(t, sh, filepath.Join(dir, "dispatcher"), dir, pid)
		}
	}
	if runPID == 0 {
		t.Fatal("the block starts no member in the background")
	}
	// Stop the member as systemd would, and want exit 0 (the shell reaps
	// it; a stop is clean when it exits before its stop timeout).
	if err := syscall.Kill(runPID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, _, out := sh.run(t, fmt.Sprintf("wait %d", runPID), 30*time.Second)
	if code != 0 {
		t.Fatalf("run exited %d after SIGTERM:\n%s", code, out)
	}
}

// waitLeading polls `dispatcher status` until the member leads (exit 0),
// failing the test if the member exits first or it takes over a minute.
func waitLeading(t *testing.T, sh *shell, bin, dir string, pid int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			t.Fatalf("the member exited before it led:\n%s", sh.drain())
		}
		cmd := exec.CommandContext(ctx, bin, "status", "-c", "node-1.yaml")
		cmd.Dir = dir
		if err := cmd.Run(); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the member did not lead within 90s:\n%s", sh.drain())
		case <-time.After(500 * time.Millisecond):
		}
	}
}
