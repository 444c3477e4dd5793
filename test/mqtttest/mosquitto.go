package mqtttest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Mosquitto is a private Mosquitto process with one plain, anonymous
// listener on a loopback port that stays the same across Stop and Start, so
// that a test can take its broker down and bring it back without touching
// the shared one.
type Mosquitto struct {
	// Addr is the host:port of the listener.
	Addr string

	bin, dir, conf string
	cmd            *exec.Cmd
	exited         chan struct{}
}

// NewMosquitto prepares a private broker on a free port without starting
// it; bin is the mosquitto executable. Its process, if running, is stopped
// at the test's cleanup.
func NewMosquitto(t testing.TB, bin string) *Mosquitto {
	t.Helper()
	return newMosquitto(t, bin, func(string) string { return "allow_anonymous true\n" })
}

// newMosquitto prepares a private broker whose one listener takes the
// settings that listener returns for the broker's directory.
func newMosquitto(t testing.TB, bin string, listener func(dir string) string) *Mosquitto {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("mqtttest: find a free port: %v", err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	_, port, _ := net.SplitHostPort(addr)

	m := &Mosquitto{Addr: addr, bin: bin, dir: t.TempDir()}
	m.conf = filepath.Join(m.dir, "mosquitto.conf")
	runAs := "root"
	if u, err := user.Current(); err == nil {
		runAs = u.Username
	}
	conf := fmt.Sprintf("user %s\npersistence false\nset_tcp_nodelay true\nlog_dest stderr\nlog_type error\nlog_type warning\n"+
		"listener %s 127.0.0.1\n%s", runAs, port, listener(m.dir))
	if err := os.WriteFile(m.conf, []byte(conf), 0o600); err != nil {
		t.Fatalf("mqtttest: write mosquitto config: %v", err)
	}
	t.Cleanup(func() { m.Stop(t) })
	return m
}

// StartMosquitto prepares a private broker and starts it.
func StartMosquitto(t testing.TB, bin string) *Mosquitto {
	t.Helper()
	m := NewMosquitto(t, bin)
	m.Start(t)
	return m
}

// URL returns the tcp:// URL of the listener.
func (m *Mosquitto) URL() string { return "tcp://" + m.Addr }

// Start starts the broker and waits, for at most ten seconds, until it
// accepts connections.
func (m *Mosquitto) Start(t testing.TB) {
	t.Helper()
	if m.cmd != nil {
		t.Fatalf("mqtttest: mosquitto on %s already running", m.Addr)
	}
	log, err := os.OpenFile(filepath.Join(m.dir, "mosquitto.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatalf("mqtttest: mosquitto log: %v", err)
	}
	cmd := exec.Command(m.bin, "-c", m.conf)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		t.Fatalf("mqtttest: start %s: %v", m.bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = log.Close()
		close(exited)
	}()
	m.cmd, m.exited = cmd, exited

	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", m.Addr, time.Second)
		if err == nil {
			_ = c.Close()
			return
		}
		select {
		case <-exited:
			out, _ := os.ReadFile(filepath.Join(m.dir, "mosquitto.log"))
			m.cmd = nil
			t.Fatalf("mqtttest: mosquitto on %s exited at start:\n%s", m.Addr, out)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("mqtttest: mosquitto on %s not accepting after 10s: %v", m.Addr, err)
		}
	}
}

// Stop terminates the broker and waits for it to exit; its clients see
// their connections drop. It does nothing when the broker is not running.
func (m *Mosquitto) Stop(t testing.TB) {
	t.Helper()
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(10 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.exited
	}
	m.cmd = nil
}
