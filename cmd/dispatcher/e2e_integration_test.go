//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/internal/modbussim"
	"github.com/krabka-io/krabka-dispatch/test/kafkatest"
)

// EnvMQTTURL is the Mosquitto the end-to-end test drives (written to
// .run/mosquitto/env by scripts/services/20-mosquitto.sh).
const EnvMQTTURL = "KRABKA_MQTT_URL"

// buildBinary builds the dispatcher into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "dispatcher")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build: %v", err)
	}
	return bin
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// proc is one `dispatcher run` process.
type proc struct {
	name string
	url  string
	cmd  *exec.Cmd
	logs *lockedBuffer
	done chan struct{} // closed when the process exited; err is then set
	err  error
}

// dispatcherCLI runs the binary with args and returns its exit code and
// output.
func dispatcherCLI(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return code, out.String(), errOut.String()
}

// TestEndToEndOnRealCluster runs three `dispatcher run` processes from
// configuration files against the real cluster, with Mosquitto and a Modbus
// server as devices; it sends commands through HTTP and the requests topic,
// kills the leader with SIGKILL, sends more, stops the survivors with
// SIGTERM (exit 0), and checks that `dispatcher log --verify` is clean.
func TestEndToEndOnRealCluster(t *testing.T) {
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	mqttURL := os.Getenv(EnvMQTTURL)
	if mqttURL == "" {
		t.Fatalf("%s is not set: start Mosquitto with scripts/services/20-mosquitto.sh and source .run/mosquitto/env", EnvMQTTURL)
	}
	sim := modbussim.New()
	modbusSrv, err := sim.ListenTCP("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = modbusSrv.Close() })
	bin := buildBinary(t)

	// Unique names, so runs and other tests never share a role or a topic.
	role := kafkatest.UniqueName(t, "e2e")
	coordTopic := kafkatest.UniqueName(t, "coord")
	logTopic := kafkatest.UniqueName(t, "log")
	reqTopic := kafkatest.UniqueName(t, "req")
	valveTopic := kafkatest.UniqueName(t, "valves")

	names := []string{"node-1", "node-2", "node-3"}
	urls := map[string]string{}
	for _, n := range names {
		urls[n] = fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	}
	dir := t.TempDir()
	configFor := func(member string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "role: %s\nmember: %s\n", role, member)
		fmt.Fprintf(&b, "kafka:\n  brokers: [%s]\n", brokers)
		b.WriteString("lease:\n  duration: 3s\n  renew_interval: 1s\n  challenge_stagger: 500ms\n  poll_interval: 100ms\n")
		fmt.Fprintf(&b, "topics:\n  coordination: %s\n  coordination_partitions: 4\n  log: %s\n  requests: %s\n  partitions: 4\n", coordTopic, logTopic, reqTopic)
		fmt.Fprintf(&b, "http:\n  listen: %s\n  token: e2e-token\n", strings.TrimPrefix(urls[member], "http://"))
		b.WriteString("members:\n")
		for _, n := range names {
			fmt.Fprintf(&b, "  %s: %s\n", n, urls[n])
		}
		b.WriteString("dispatch:\n  safety_margin: 1s\n  shutdown_timeout: 2s\n")
		b.WriteString("devices:\n")
		key := filepath.Join(dir, member+"-valve-1.key")
		if err := os.WriteFile(key, []byte(strings.Repeat("5a", 32)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "  - name: valve-1\n    type: mqtt\n    mqtt:\n      brokers: [%s]\n      topic: %s/{device}/cmd\n      client_id: e2e-%s\n      keys: [{id: k1, key_file: %s}]\n", mqttURL, valveTopic, member, key)
		fmt.Fprintf(&b, "  - name: pump-1\n    type: modbus\n    modbus:\n      transport: tcp\n      address: %s\n      unit: 1\n      fence: {address: 100}\n      actions:\n        write-register: {verify: true}\n", modbusSrv.Addr())
		path := filepath.Join(dir, member+".yaml")
		if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	configs := map[string]string{}
	for _, n := range names {
		configs[n] = configFor(n)
	}
	cfg1 := configs["node-1"]

	if code, out, errOut := dispatcherCLI(t, bin, "topics", "-c", cfg1); code != 0 {
		t.Fatalf("topics: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, errOut := dispatcherCLI(t, bin, "topics", "-c", cfg1, "--check"); code != 0 {
		t.Fatalf("topics --check: exit %d\n%s\n%s", code, out, errOut)
	}

	procs := map[string]*proc{}
	start := func(name string) *proc {
		p := &proc{name: name, url: urls[name], logs: &lockedBuffer{}, done: make(chan struct{})}
		p.cmd = exec.Command(bin, "run", "-c", configs[name])
		p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			p.err = p.cmd.Wait()
			close(p.done)
		}()
		procs[name] = p
		t.Cleanup(func() {
			_ = p.cmd.Process.Kill()
			<-p.done
			if t.Failed() {
				t.Logf("%s logs:\n%s", name, p.logs.String())
			}
		})
		return p
	}
	// node-1 first, so it leads; the others register behind it.
	start("node-1")
	waitHTTP(t, urls["node-1"]+"/leaderz", http.StatusOK)
	start("node-2")
	start("node-3")
	for _, n := range names[1:] {
		waitHTTP(t, urls[n]+"/readyz", http.StatusOK)
	}

	// Through a standby's HTTP API: redirected to the leader.
	for i, dev := range []struct{ device, action, payload string }{
		{"valve-1", "open", ""},
		{"pump-1", "write-register", `{"address":0,"value":11}`},
	} {
		args := []string{"submit", "--url", urls["node-2"], "--token", "e2e-token", "--device", dev.device, "--action", dev.action,
			"--id", fmt.Sprintf("http-%d", i), "--wait", "--timeout", "30s"}
		if dev.payload != "" {
			args = append(args, "--payload", dev.payload)
		}
		if code, out, errOut := dispatcherCLI(t, bin, args...); code != 0 || !strings.Contains(out, "succeeded") || !strings.Contains(out, urls["node-1"]) {
			t.Fatalf("submit over HTTP: exit %d\n%s\n%s", code, out, errOut)
		}
	}
	// Through the requests topic.
	if code, out, errOut := dispatcherCLI(t, bin, "submit", "-c", cfg1, "--device", "valve-1", "--action", "close", "--id", "topic-1", "--wait", "--timeout", "30s"); code != 0 {
		t.Fatalf("submit over the topic: exit %d\n%s\n%s", code, out, errOut)
	}
	if got := sim.HoldingRegisters(1, 0, 1); got[0] != 11 {
		t.Errorf("the Modbus register holds %d, want 11", got[0])
	}

	// Kill the leader outright: no resignation, the standbys wait out its lease.
	if err := procs["node-1"].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-procs["node-1"].done
	killed := time.Now()
	var wg sync.WaitGroup
	results := make([]string, 2)
	for i, dev := range []struct{ device, action, payload string }{
		{"valve-1", "open", ""},
		{"pump-1", "write-register", `{"address":0,"value":22}`},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := []string{"submit", "-c", cfg1, "--device", dev.device, "--action", dev.action, "--id", fmt.Sprintf("after-%d", i), "--wait", "--timeout", "60s"}
			if dev.payload != "" {
				args = append(args, "--payload", dev.payload)
			}
			code, out, errOut := dispatcherCLI(t, bin, args...)
			results[i] = fmt.Sprintf("exit %d\n%s%s", code, out, errOut)
		}()
	}
	wg.Wait()
	for _, r := range results {
		if !strings.HasPrefix(r, "exit 0") || !strings.Contains(r, "succeeded") {
			t.Errorf("submit during the failover: %s", r)
		}
	}
	t.Logf("the commands sent after the kill settled %v after it", time.Since(killed))

	code, out, errOut := dispatcherCLI(t, bin, "status", "-c", cfg1, "-o", "json")
	if code != 0 || strings.Contains(out, `"holder": "node-1"`) {
		t.Fatalf("status after the kill: exit %d\n%s\n%s", code, out, errOut)
	}
	var status StatusResult
	if err := json.Unmarshal([]byte(out), &status); err != nil || status.Term == coordination.NoTerm {
		t.Errorf("status after the kill names no term (%v):\n%s", err, out)
	}

	// SIGTERM: the survivors resign and exit 0.
	for _, n := range names[1:] {
		p := procs[n]
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.done:
			if p.err != nil {
				t.Errorf("%s after SIGTERM: %v\n%s", n, p.err, p.logs.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not stop after SIGTERM", n)
		}
	}

	code, out, errOut = dispatcherCLI(t, bin, "log", "-c", cfg1, "--verify", "-o", "json")
	if code != 0 || !strings.Contains(out, `"clean": true`) {
		t.Fatalf("log --verify: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{`"succeeded": 5`, `"member": "node-1"`} {
		if !strings.Contains(out, want) {
			t.Errorf("audit lacks %s:\n%s", want, out)
		}
	}
	// The successor's term follows node-1's, and status showed a term that
	// the log holds.
	var audit LogAudit
	if err := json.Unmarshal([]byte(out), &audit); err != nil || len(audit.Leaderships) < 2 {
		t.Fatalf("audit leaderships (%v):\n%s", err, out)
	}
	first, last := audit.Leaderships[0], audit.Leaderships[len(audit.Leaderships)-1]
	if first.Member != "node-1" || first.FirstTerm == coordination.NoTerm || last.FirstTerm.Compare(first.LastTerm) <= 0 {
		t.Errorf("leaderships %+v: terms do not rise from node-1's", audit.Leaderships)
	}
	shown := false
	for _, l := range audit.Leaderships {
		shown = shown || l.FirstTerm == status.Term || l.LastTerm == status.Term
	}
	if !shown {
		t.Errorf("no leadership of the log wrote under term %s, which status showed: %+v", status.Term, audit.Leaderships)
	}
}
