//go:build integration

package modbus_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/goburrow/serial"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/devices/modbus"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/dispatch/dispatchtest"
	"github.com/krabka-io/krabka-dispatch/internal/modbussim"
	"github.com/krabka-io/krabka-dispatch/test/ptypair"
)

// rtuBaud is the line speed of the tests; a pseudo-terminal ignores it, and
// above 19200 baud the inter-frame silence is the fixed 1.75 ms.
const rtuBaud = 115200

// startRTU links two pseudo-terminals with socat, serves a simulator on one
// end and returns the other end's path.
func startRTU(t *testing.T) (*modbussim.Sim, string) {
	t.Helper()
	pair := ptypair.Open(t)
	sim := modbussim.New()
	serveRTU(t, sim, pair.B)
	return sim, pair.A
}

// serveRTU answers for sim on the serial port at path until the test ends.
func serveRTU(t *testing.T, sim *modbussim.Sim, path string) *modbussim.RTUServer {
	t.Helper()
	srv, err := sim.ServeRTU(serial.Config{Address: path, BaudRate: rtuBaud, DataBits: 8, Parity: "E", StopBits: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

func rtuConfig(device string, unit int) modbus.Config {
	return modbus.Config{
		Transport: modbus.RTU,
		Serial:    modbus.Serial{Device: device, BaudRate: rtuBaud, Parity: "E"},
		Unit:      unit,
		Timeout:   testTimeout,
		Actions:   allActions(),
	}
}

func TestRTUActionsWithFence(t *testing.T) {
	sim, dev := startRTU(t)
	cfg := rtuConfig(dev, 7)
	cfg.Fence = &modbus.Fence{Address: 500}
	sim.SetFence(7, 500)
	d := newDevice(t, cfg)
	authority := coordination.Authority{Term: 1<<36 + 3, Token: token(t, 1<<40+5, 9)}
	ctx := context.Background()

	steps := []struct {
		cmd   dispatch.Command
		check func() bool
	}{
		{command(modbus.WriteRegister, modbus.RegisterValue{Address: 1, Value: 0xBEEF}),
			func() bool { return sim.HoldingRegisters(7, 1, 1)[0] == 0xBEEF }},
		{command(modbus.WriteRegisters, modbus.RegisterValues{Address: 10, Values: []uint16{1, 2, 3, 4}}),
			func() bool { return reflect.DeepEqual(sim.HoldingRegisters(7, 10, 4), []uint16{1, 2, 3, 4}) }},
		{command(modbus.WriteCoil, modbus.CoilValue{Address: 2, Value: true}),
			func() bool { return sim.Coils(7, 2, 1)[0] }},
		{command(modbus.WriteCoils, modbus.CoilValues{Address: 30, Values: []bool{true, true, false, true, false, false, true, false, true, true}}),
			func() bool {
				return reflect.DeepEqual(sim.Coils(7, 30, 10), []bool{true, true, false, true, false, false, true, false, true, true})
			}},
	}
	for _, s := range steps {
		res, err := d.DispatchUnder(ctx, s.cmd, authority)
		if err != nil {
			t.Fatalf("%s: %v", s.cmd.Action, err)
		}
		if !s.check() {
			t.Errorf("%s: unit memory not written", s.cmd.Action)
		}
		if res.Data == nil {
			t.Errorf("%s: no read-back data", s.cmd.Action)
		}
	}
	want := []uint16{0, 0x0010, 0, 3, 0, 0x0100, 0, 5, 9}
	if got := sim.HoldingRegisters(7, 500, modbus.FenceRegisterCount); !reflect.DeepEqual(got, want) {
		t.Errorf("fence registers = %#x, want %#x", got, want)
	}
	reqs := sim.Requests()
	if len(reqs) != 12 {
		t.Fatalf("%d requests, want 4 x (fence, write, read-back)", len(reqs))
	}
	for i := 0; i < len(reqs); i += 3 {
		if reqs[i].Function != modbussim.WriteMultipleRegisters || reqs[i].Address != 500 {
			t.Errorf("request %d = %+v, want the fence write first", i, reqs[i])
		}
	}

	// Over the serial line too, the unit refuses an earlier term.
	deposed := coordination.Authority{Term: 1<<36 + 2, Token: token(t, 1<<41, 0)}
	_, err := d.DispatchUnder(ctx, command(modbus.WriteRegister, modbus.RegisterValue{Address: 1, Value: 0xDEAD}), deposed)
	var ue *modbus.UnitError
	if !dispatch.IsRejected(err) || !errors.As(err, &ue) || ue.Phase != modbus.PhaseFence {
		t.Fatalf("an earlier term: %v (%s), want a rejected fence-phase UnitError", err, class(err))
	}
	if got := sim.HoldingRegisters(7, 1, 1)[0]; got != 0xBEEF {
		t.Errorf("register 1 = %#x: the earlier term's command was written", got)
	}
}

func TestRTUExceptionAndSilence(t *testing.T) {
	sim, dev := startRTU(t)
	cfg := rtuConfig(dev, 1)
	cfg.Timeout = 300 * time.Millisecond
	d := newDevice(t, cfg)
	cmd := command(modbus.WriteRegister, modbus.RegisterValue{Address: 1, Value: 1})
	ctx := context.Background()

	sim.SetHook(func(modbussim.Request) modbussim.Fault {
		return modbussim.Fault{Exception: modbussim.IllegalDataAddress}
	})
	if _, err := d.Dispatch(ctx, cmd, token(t, 1, 0)); !dispatch.IsRejected(err) {
		t.Errorf("illegal address: %v (%s), want rejected", err, class(err))
	}
	sim.SetHook(func(modbussim.Request) modbussim.Fault {
		return modbussim.Fault{Exception: modbussim.ServerDeviceFailure}
	})
	if _, err := d.Dispatch(ctx, cmd, token(t, 1, 0)); class(err) != "in doubt" {
		t.Errorf("device failure: %v (%s), want in doubt", err, class(err))
	}

	sim.SetHook(func(modbussim.Request) modbussim.Fault { return modbussim.Fault{Reply: modbussim.ReplyLost} })
	start := time.Now()
	_, err := d.Dispatch(ctx, cmd, token(t, 1, 0))
	if !errors.Is(err, modbus.ErrNoAnswer) || class(err) != "in doubt" {
		t.Errorf("silent unit: %v (%s), want in doubt with ErrNoAnswer", err, class(err))
	}
	if elapsed := time.Since(start); elapsed < cfg.Timeout || elapsed > cfg.Timeout+promptly {
		t.Errorf("silent unit: returned after %v, want about %v", elapsed, cfg.Timeout)
	}

	sim.SetHook(nil)
	if _, err := d.Dispatch(ctx, command(modbus.WriteRegister, modbus.RegisterValue{Address: 1, Value: 2}), token(t, 1, 0)); err != nil {
		t.Fatalf("after the silence: %v", err)
	}
}

func TestRTUCancelMidDispatch(t *testing.T) {
	sim, dev := startRTU(t)
	d := newDevice(t, rtuConfig(dev, 1))
	reached, release := holdRequests(t, sim, func(r modbussim.Request) bool { return r.IsWrite() })
	ctx, cancel := context.WithCancel(context.Background())
	done := dispatchAsync(ctx, d, command(modbus.WriteCoil, modbus.CoilValue{Address: 1, Value: true}), token(t, 1, 0))
	waitReached(t, reached)
	cancel()
	o := await(t, done, promptly)
	if !errors.Is(o.err, context.Canceled) || class(o.err) != "in doubt" {
		t.Errorf("cancelled: %v (%s), want in doubt with context.Canceled", o.err, class(o.err))
	}
	// The held answer arrives late; the line is drained before the next
	// request, which goes through.
	release()
	if _, err := d.Dispatch(context.Background(), command(modbus.WriteCoil, modbus.CoilValue{Address: 2, Value: true}), token(t, 1, 0)); err != nil {
		t.Fatalf("after the cancel: %v", err)
	}
}

// Units on one serial line take turns; a TCP unit is not delayed by a held
// RTU line.
func TestRTUUnitsShareTheLine(t *testing.T) {
	sim, dev := startRTU(t)
	_, tcpSrv := startTCP(t)
	pool := modbus.NewPool()
	u1 := newDevice(t, rtuConfig(dev, 1), modbus.WithPool(pool))
	u2 := newDevice(t, rtuConfig(dev, 2), modbus.WithPool(pool))
	other := newDevice(t, tcpConfig(tcpSrv.Addr()), modbus.WithPool(pool))

	reached, release := holdRequests(t, sim, unitIs(1))
	first := dispatchAsync(context.Background(), u1, command(modbus.WriteRegister, modbus.RegisterValue{Address: 1, Value: 1}), token(t, 1, 0))
	waitReached(t, reached)
	second := dispatchAsync(context.Background(), u2, command(modbus.WriteRegister, modbus.RegisterValue{Address: 1, Value: 2}), token(t, 1, 0))
	if o := await(t, dispatchAsync(context.Background(), other, command(modbus.WriteRegister, modbus.RegisterValue{Address: 1, Value: 3}), token(t, 1, 0)), testTimeout); o.err != nil {
		t.Fatalf("TCP unit while the line is held: %v", o.err)
	}
	select {
	case o := <-second:
		t.Fatalf("unit 2 finished while unit 1 held the line: %v", o.err)
	default:
	}
	release()
	for _, ch := range []<-chan outcome{first, second} {
		if o := await(t, ch, testTimeout); o.err != nil {
			t.Fatal(o.err)
		}
	}
	var order []uint8
	for _, r := range sim.Requests() {
		if r.IsWrite() {
			order = append(order, r.Unit)
		}
	}
	if !reflect.DeepEqual(order, []uint8{1, 2}) {
		t.Errorf("writes by unit = %v, want [1 2]", order)
	}

	// A unit with other line settings on the same device is refused.
	cfg := rtuConfig(dev, 3)
	cfg.Serial.BaudRate = 9600
	var ce *modbus.ConfigError
	if _, err := modbus.New(cfg, modbus.WithPool(pool)); !errors.As(err, &ce) {
		t.Errorf("conflicting line settings: %v, want a *ConfigError", err)
	}
}

// A serial adapter that is unplugged and plugged in again: the dispatch in
// between fails, and the device reopens the port for the next one.
func TestRTUPortReopenedAfterHangup(t *testing.T) {
	pair := ptypair.Open(t)
	sim := modbussim.New()
	srv := serveRTU(t, sim, pair.B)
	cfg := rtuConfig(pair.A, 1)
	cfg.Timeout = 300 * time.Millisecond
	d := newDevice(t, cfg)
	cmd := command(modbus.WriteRegister, modbus.RegisterValue{Address: 1, Value: 1})
	if _, err := d.Dispatch(context.Background(), cmd, token(t, 1, 0)); err != nil {
		t.Fatal(err)
	}

	_ = srv.Close()
	pair.Stop()
	_, err := d.Dispatch(context.Background(), cmd, token(t, 1, 0))
	if !dispatch.IsRetryable(err) {
		t.Fatalf("dispatch over an unplugged line: %v (%s), want retryable: the write cannot leave", err, class(err))
	}

	pair.Restart(t)
	serveRTU(t, sim, pair.B)
	cmd = command(modbus.WriteRegister, modbus.RegisterValue{Address: 1, Value: 2})
	if _, err = d.Dispatch(context.Background(), cmd, token(t, 1, 0)); err != nil {
		t.Fatalf("after the line came back: %v (%s)", err, class(err))
	}
	if got := sim.HoldingRegisters(1, 1, 1)[0]; got != 2 {
		t.Errorf("register = %d, want 2", got)
	}
}

func TestConformanceRTU(t *testing.T) {
	sim, dev := startRTU(t)
	cfg := rtuConfig(dev, 1)
	cfg.Fence = &modbus.Fence{Address: fenceAt}
	device := newDevice(t, cfg)
	// A serial device that does not exist: the port cannot open.
	unreachable := newDevice(t, rtuConfig(filepath.Join(t.TempDir(), "ttyNone"), 1))
	dispatchtest.Run(t, conformanceTarget(t, sim, device, unreachable))
}
