package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/devices/modbus"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// syncBuffer is a bytes.Buffer that the unit writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// startUnit runs the example until the returned stop is called.
func startUnit(t *testing.T, cfg config, out *syncBuffer) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, cfg, out, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-errc:
		cancel()
		t.Fatalf("fencing-unit exited: %v", err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("fencing-unit not ready")
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Errorf("fencing-unit: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func device(t *testing.T, addr, mode string) *modbus.Device {
	d, err := modbus.New(modbus.Config{
		Transport: modbus.TCP, Address: addr, Unit: 1, Timeout: 5 * time.Second,
		Fence:   &modbus.Fence{Address: 100, Mode: mode},
		Actions: map[modbus.Action]modbus.ActionConfig{modbus.WriteRegisters: {Verify: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func send(t *testing.T, d *modbus.Device, term coordination.Term, producer int64, values string) error {
	tok, err := coordination.NewFencingToken(producer, 0)
	if err != nil {
		t.Fatal(err)
	}
	cmd := dispatch.Command{ID: "c", Device: "unit", Action: string(modbus.WriteRegisters),
		Payload: []byte(`{"address":109,"values":` + values + `}`)}
	_, err = d.DispatchUnder(context.Background(), cmd, coordination.Authority{Term: term, Token: tok})
	return err
}

// TestOneRequestUnitRefusesAStaleTermAcrossRestarts drives the unit through
// the Modbus Device in one-request mode: the term and the command travel in
// one request, a stale term is refused with its command, also after the
// unit restarts from its state file, and a one-request-only unit refuses
// the two-request mode.
func TestOneRequestUnitRefusesAStaleTermAcrossRestarts(t *testing.T) {
	cfg := config{listen: freeAddr(t), state: filepath.Join(t.TempDir(), "fence.json"), fenceAt: 100, oneRequestOnly: true}
	out := &syncBuffer{}
	stop := startUnit(t, cfg, out)
	d := device(t, cfg.listen, modbus.FenceOneRequest)

	if err := send(t, d, 40, 5, "[1,2]"); err != nil {
		t.Fatalf("leader's command: %v", err)
	}
	if err := send(t, d, 39, 9, "[3,4]"); !dispatch.IsRejected(err) {
		t.Fatalf("deposed leader's command: %v, want rejected", err)
	}
	if err := send(t, d, 40, 2, "[5,6]"); err != nil {
		t.Fatalf("a lower producer id within the term: %v", err)
	}
	stop()

	out2 := &syncBuffer{}
	startUnit(t, cfg, out2)
	d2 := device(t, cfg.listen, modbus.FenceOneRequest)
	if err := send(t, d2, 39, 9, "[7,8]"); !dispatch.IsRejected(err) {
		t.Fatalf("deposed leader's command after a restart: %v, want rejected", err)
	}
	if err := send(t, d2, 41, 1, "[9,10]"); err != nil {
		t.Fatalf("next leader's command: %v", err)
	}
	twoRequests := device(t, cfg.listen, modbus.FenceTwoRequests)
	if err := send(t, twoRequests, 42, 1, "[11,12]"); !dispatch.IsRejected(err) {
		t.Fatalf("a two-request command to a one-request-only unit: %v, want rejected", err)
	}

	log := out.String() + out2.String()
	for _, want := range []string{"ACT term 40", "registers 109-110 = [1 2]", "REJECT term 39", "ACT term 41", "registers 109-110 = [9 10]", "no fence in the request"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	for _, never := range []string{"[3 4]", "[7 8]", "[11 12]"} {
		if strings.Contains(log, "= "+never) {
			t.Errorf("a refused command was applied (%s):\n%s", never, log)
		}
	}
}
