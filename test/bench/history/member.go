package history

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// deviceName is the device every command addresses.
	deviceName = "valve-1"
	// apiToken is the bearer token of the measured members' APIs.
	apiToken = "bench-history-token"
)

// member is one `dispatcher run` process and its configuration file.
type member struct {
	name, config, url string
	logPath           string
	cmd               *exec.Cmd
	done              chan struct{}
	err               error
}

// writeConfigs writes one YAML file per member, as an operator would: the
// role, the cluster, the lease, the run's topics, the API and the members
// list, and one MQTT device with its key.
func writeConfigs(c *Config, dir, role string, t topics, names []string) (map[string]*member, error) {
	urls := map[string]string{}
	for _, n := range names {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		urls[n] = fmt.Sprintf("http://127.0.0.1:%d", port)
	}
	key := filepath.Join(dir, "valve-1.key")
	if err := os.WriteFile(key, []byte(strings.Repeat("5a", 32)+"\n"), 0o600); err != nil {
		return nil, err
	}
	members := map[string]*member{}
	for _, n := range names {
		var b strings.Builder
		fmt.Fprintf(&b, "role: %s\nmember: %s\n", role, n)
		fmt.Fprintf(&b, "kafka:\n  brokers: [%s]\n", strings.Join(c.Brokers, ", "))
		fmt.Fprintf(&b, "lease:\n  duration: %s\n  renew_interval: %s\n  challenge_stagger: %s\n  poll_interval: %s\n", c.Lease, c.Renew, c.Stagger, c.Poll)
		fmt.Fprintf(&b, "topics:\n  coordination: %s\n  coordination_partitions: %d\n  log: %s\n  requests: %s\n  partitions: %d\n",
			t.coordination, t.partitions, t.log, t.requests, t.partitions)
		fmt.Fprintf(&b, "http:\n  listen: %s\n  token: %s\n", strings.TrimPrefix(urls[n], "http://"), apiToken)
		b.WriteString("members:\n")
		for _, m := range names {
			fmt.Fprintf(&b, "  %s: %s\n", m, urls[m])
		}
		b.WriteString("dispatch:\n  safety_margin: 1s\n  shutdown_timeout: 5s\n")
		fmt.Fprintf(&b, "devices:\n  - name: %s\n    type: mqtt\n    mqtt:\n      brokers: [%s]\n      topic: %s/{device}/cmd\n      client_id: %s-%s\n      keys: [{id: k1, key_file: %s}]\n",
			deviceName, c.MQTTURL, role, role, n, key)
		path := filepath.Join(dir, n+".yaml")
		if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
			return nil, err
		}
		members[n] = &member{name: n, config: path, url: urls[n], logPath: filepath.Join(dir, n+".log")}
	}
	return members, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs `dispatcher run` for the member, with its output in its log
// file.
func (m *member) start(binary string) error {
	out, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	m.cmd = exec.Command(binary, "run", "-c", m.config)
	m.cmd.Stdout, m.cmd.Stderr = out, out
	if err := m.cmd.Start(); err != nil {
		out.Close()
		return err
	}
	m.done = make(chan struct{})
	go func() {
		m.err = m.cmd.Wait()
		out.Close()
		close(m.done)
	}()
	return nil
}

// stop ends the process with sig and waits for it, killing it after a
// while.
func (m *member) stop(sig syscall.Signal) {
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	_ = m.cmd.Process.Signal(sig)
	select {
	case <-m.done:
	case <-time.After(15 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.done
	}
}

// exited reports whether the process ended.
func (m *member) exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// acceptWait bounds how long the API holds a submission for its outcome.
const acceptWait = time.Minute

// accept posts one command to the member's API, holding the request until
// the command settled, and reports whether it succeeded: 200 with the state
// succeeded. A 202 (the member took it, its dispatcher has not recorded it
// yet: it may still be reading the log) is not enough. It follows no
// redirect: a standby's 307 is not an acceptance.
func (m *member) accept(ctx context.Context, hc *http.Client, id string) (bool, error) {
	body := fmt.Sprintf(`{"id":%q,"device":%q,"action":"set","payload":"1"}`, id, deviceName)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.url+"/v1/commands?wait="+acceptWait.String(), strings.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", "Bearer "+apiToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return false, nil // not listening yet
	}
	defer resp.Body.Close()
	var st struct {
		State string `json:"state"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st) != nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return false, nil
	}
	return st.State == "succeeded", nil
}

// untilAccepted posts commands every few milliseconds until one succeeds
// through the member, and returns when it did.
func (m *member) untilAccepted(ctx context.Context, hc *http.Client, series string) (time.Time, error) {
	for i := 0; ; i++ {
		ok, err := m.accept(ctx, hc, fmt.Sprintf("%s-%d", series, i))
		if err != nil {
			return time.Time{}, err
		}
		if ok {
			return time.Now(), nil
		}
		if m.exited() {
			return time.Time{}, fmt.Errorf("%s exited: %v; see %s", m.name, m.err, m.logPath)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%s never accepted a command: %w; see %s", m.name, ctx.Err(), m.logPath)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// untilStatus polls path until it answers want.
func (m *member) untilStatus(ctx context.Context, hc *http.Client, path string, want int) error {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.url+path, nil)
		if err != nil {
			return err
		}
		if resp, err := hc.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == want {
				return nil
			}
		}
		if m.exited() {
			return fmt.Errorf("%s exited: %v; see %s", m.name, m.err, m.logPath)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s%s never answered %d: %w", m.name, path, want, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// rss reads the process's resident set size, in bytes, from /proc.
func (m *member) rss() (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", m.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}

// cli runs the binary with args and returns how long it took; a non-zero
// exit is an error carrying its output.
func cli(ctx context.Context, binary string, args ...string) (time.Duration, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if err != nil {
		return took, fmt.Errorf("dispatcher %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return took, nil
}
