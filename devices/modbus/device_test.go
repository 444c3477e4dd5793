package modbus_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"reflect"
	"testing"
	"time"

	gmodbus "github.com/goburrow/modbus"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/devices/modbus"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/internal/modbussim"
)

func TestActionsWriteAndReadBack(t *testing.T) {
	sim, srv := startTCP(t)
	d := newDevice(t, tcpConfig(srv.Addr()))
	tok := token(t, 7, 1)
	ctx := context.Background()

	cases := []struct {
		name    string
		cmd     dispatch.Command
		written func() any
		want    any
		data    string
	}{
		{
			name:    "write-register",
			cmd:     command(modbus.WriteRegister, modbus.RegisterValue{Address: 10, Value: 4242}),
			written: func() any { return sim.HoldingRegisters(1, 10, 1) },
			want:    []uint16{4242},
			data:    `{"address":10,"values":[4242]}`,
		},
		{
			name:    "write-registers",
			cmd:     command(modbus.WriteRegisters, modbus.RegisterValues{Address: 100, Values: []uint16{1, 65535, 3}}),
			written: func() any { return sim.HoldingRegisters(1, 100, 3) },
			want:    []uint16{1, 65535, 3},
			data:    `{"address":100,"values":[1,65535,3]}`,
		},
		{
			name:    "write-coil",
			cmd:     command(modbus.WriteCoil, modbus.CoilValue{Address: 5, Value: true}),
			written: func() any { return sim.Coils(1, 5, 1) },
			want:    []bool{true},
			data:    `{"address":5,"values":[true]}`,
		},
		{
			name:    "write-coils",
			cmd:     command(modbus.WriteCoils, modbus.CoilValues{Address: 20, Values: []bool{true, false, true, true, false, false, false, false, true}}),
			written: func() any { return sim.Coils(1, 20, 9) },
			want:    []bool{true, false, true, true, false, false, false, false, true},
			data:    `{"address":20,"values":[true,false,true,true,false,false,false,false,true]}`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := d.Dispatch(ctx, c.cmd, tok)
			if err != nil {
				t.Fatalf("Dispatch: %v", err)
			}
			if got := c.written(); !reflect.DeepEqual(got, c.want) {
				t.Errorf("unit memory = %v, want %v", got, c.want)
			}
			if string(res.Data) != c.data {
				t.Errorf("result data = %s, want %s", res.Data, c.data)
			}
			reqs := sim.Requests()
			last := reqs[len(reqs)-1]
			if want := map[bool]modbussim.Function{true: modbussim.ReadCoils, false: modbussim.ReadHoldingRegisters}[c.cmd.Action == string(modbus.WriteCoil) || c.cmd.Action == string(modbus.WriteCoils)]; last.Function != want {
				t.Errorf("last request %v, want the read-back %v", last.Function, want)
			}
		})
	}
}

func TestWithoutVerifyNoReadBack(t *testing.T) {
	sim, srv := startTCP(t)
	cfg := tcpConfig(srv.Addr())
	cfg.Actions = map[modbus.Action]modbus.ActionConfig{modbus.WriteRegisters: {}}
	d := newDevice(t, cfg)
	res, err := d.Dispatch(context.Background(), command(modbus.WriteRegisters, modbus.RegisterValues{Address: 1, Values: []uint16{9, 8}}), token(t, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	if res.Data != nil {
		t.Errorf("data %s without verification", res.Data)
	}
	reqs := sim.Requests()
	if len(reqs) != 1 || reqs[0].Function != modbussim.WriteMultipleRegisters {
		t.Errorf("requests = %+v, want one write-multiple-registers", reqs)
	}
}

func TestVerifyMismatchIsInDoubt(t *testing.T) {
	sim, srv := startTCP(t)
	d := newDevice(t, tcpConfig(srv.Addr()))
	// Something else writes the register between the write and the read.
	sim.SetHook(func(r modbussim.Request) modbussim.Fault {
		if r.Function == modbussim.ReadHoldingRegisters {
			sim.SetHoldingRegisters(r.Unit, r.Address, 1)
		}
		return modbussim.Fault{}
	})
	_, err := d.Dispatch(context.Background(), command(modbus.WriteRegister, modbus.RegisterValue{Address: 3, Value: 2}), token(t, 1, 0))
	var ve *modbus.VerifyError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v, want a *VerifyError", err)
	}
	if ve.Wrote != "[2]" || ve.Read != "[1]" {
		t.Errorf("VerifyError = %+v", ve)
	}
	if c := class(err); c != "in doubt" {
		t.Errorf("class %s, want in doubt: the unit acknowledged the write", c)
	}
}

func TestFenceWrittenBeforeCommand(t *testing.T) {
	sim, srv := startTCP(t)
	cfg := tcpConfig(srv.Addr())
	cfg.Fence = &modbus.Fence{Address: 900}
	d := newDevice(t, cfg)
	authority := coordination.Authority{Term: 0x1112131415161718, Token: token(t, 0x0102030405060708, 0x0A0B)}

	if _, err := d.DispatchUnder(context.Background(), command(modbus.WriteCoil, modbus.CoilValue{Address: 1, Value: true}), authority); err != nil {
		t.Fatal(err)
	}
	reqs := sim.Requests()
	if len(reqs) != 3 {
		t.Fatalf("requests = %+v, want fence, write, read-back", reqs)
	}
	fence := reqs[0]
	if fence.Function != modbussim.WriteMultipleRegisters || fence.Address != 900 || fence.Quantity != modbus.FenceRegisterCount {
		t.Fatalf("first request = %+v, want the fence write at 900", fence)
	}
	want := []uint16{0x1112, 0x1314, 0x1516, 0x1718, 0x0102, 0x0304, 0x0506, 0x0708, 0x0A0B}
	if !reflect.DeepEqual(fence.Registers, want) {
		t.Errorf("fence registers = %#x, want %#x", fence.Registers, want)
	}
	if reqs[1].Function != modbussim.WriteSingleCoil {
		t.Errorf("second request = %+v, want the command", reqs[1])
	}
	if got := sim.HoldingRegisters(1, 900, modbus.FenceRegisterCount); !reflect.DeepEqual(got, want) {
		t.Errorf("fence registers in memory = %#x", got)
	}

	// Dispatch, without a term, writes term 0 before the token.
	if _, err := d.Dispatch(context.Background(), command(modbus.WriteCoil, modbus.CoilValue{Address: 1, Value: false}), authority.Token); err != nil {
		t.Fatal(err)
	}
	want = []uint16{0, 0, 0, 0, 0x0102, 0x0304, 0x0506, 0x0708, 0x0A0B}
	if got := sim.HoldingRegisters(1, 900, modbus.FenceRegisterCount); !reflect.DeepEqual(got, want) {
		t.Errorf("fence registers after Dispatch = %#x, want %#x", got, want)
	}
}

// A unit that keeps the highest term refuses a lower one with an exception
// to the fence write; the command is then rejected and never written. Within
// a term the producer id may rotate to a lower one, and the unit admits it.
func TestFenceRefusedRejectsWithoutWriting(t *testing.T) {
	sim, srv := startTCP(t)
	sim.SetFence(1, 0)
	cfg := tcpConfig(srv.Addr())
	cfg.Fence = &modbus.Fence{Address: 0}
	d := newDevice(t, cfg)

	ctx := context.Background()
	write := func(value uint16, term coordination.Term, id int64, epoch int16) error {
		cmd := command(modbus.WriteRegister, modbus.RegisterValue{Address: 50, Value: value})
		_, err := d.DispatchUnder(ctx, cmd, coordination.Authority{Term: term, Token: token(t, id, epoch)})
		return err
	}
	if err := write(1, 40, 5, 3); err != nil {
		t.Fatal(err)
	}
	if err := write(2, 40, 2, 0); err != nil {
		t.Fatalf("a rotation to a lower producer id within the term: %v", err)
	}
	for _, stale := range []struct {
		what string
		err  error
	}{
		{"an earlier term with a higher token", write(3, 39, 90, 9)},
		{"no term", func() error {
			_, err := d.Dispatch(ctx, command(modbus.WriteRegister, modbus.RegisterValue{Address: 50, Value: 4}), token(t, 91, 0))
			return err
		}()},
	} {
		if !dispatch.IsRejected(stale.err) {
			t.Fatalf("%s: %v (%s), want rejected", stale.what, stale.err, class(stale.err))
		}
		var ue *modbus.UnitError
		if !errors.As(stale.err, &ue) || ue.Phase != modbus.PhaseFence {
			t.Errorf("%s: err = %v, want a fence-phase UnitError", stale.what, stale.err)
		}
	}
	if got := sim.HoldingRegisters(1, 50, 1)[0]; got != 2 {
		t.Errorf("register 50 = %d: a command the fence refused was written", got)
	}
	if err := write(5, 41, 1, 0); err != nil {
		t.Fatalf("a later term with a lower token: %v", err)
	}
	if got := sim.HighestTerm(1); got != 41 {
		t.Errorf("the unit's highest term is %d, want 41", got)
	}
}

func TestConnectionRefusedIsRetryable(t *testing.T) {
	// A port that was free a moment ago and has no listener.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	d := newDevice(t, tcpConfig(addr))
	_, err = d.Dispatch(context.Background(), command(modbus.WriteRegister, modbus.RegisterValue{Address: 1, Value: 1}), token(t, 1, 0))
	if !dispatch.IsRetryable(err) {
		t.Fatalf("err = %v (%s), want retryable", err, class(err))
	}
	var ue *modbus.UnitError
	if !errors.As(err, &ue) || ue.Phase != modbus.PhaseConnect || ue.Sent {
		t.Errorf("err = %#v, want an unsent connect-phase UnitError", err)
	}
	if err := d.CheckHealth(context.Background()); err == nil {
		t.Error("CheckHealth of an unreachable unit succeeded")
	}
}

func TestExceptionClasses(t *testing.T) {
	cases := []struct {
		exception modbussim.Exception
		class     string
	}{
		{modbussim.IllegalFunction, "rejected"},
		{modbussim.IllegalDataAddress, "rejected"},
		{modbussim.IllegalDataValue, "rejected"},
		{modbussim.ServerDeviceFailure, "in doubt"},
		{modbussim.ServerDeviceBusy, "in doubt"},
		{modbussim.GatewayTargetFailedToRespond, "in doubt"},
	}
	sim, srv := startTCP(t)
	d := newDevice(t, tcpConfig(srv.Addr()))
	for _, c := range cases {
		sim.SetHook(func(modbussim.Request) modbussim.Fault { return modbussim.Fault{Exception: c.exception} })
		_, err := d.Dispatch(context.Background(), command(modbus.WriteRegister, modbus.RegisterValue{Address: 1, Value: 1}), token(t, 1, 0))
		if got := class(err); got != c.class {
			t.Errorf("exception %d: class %s, want %s (%v)", c.exception, got, c.class, err)
		}
		if dispatch.IsRetryable(err) {
			t.Errorf("exception %d is retryable", c.exception)
		}
		var me *gmodbus.ModbusError
		if !errors.As(err, &me) || me.ExceptionCode != byte(c.exception) {
			t.Errorf("exception %d: err %v does not carry the exception", c.exception, err)
		}
	}
	// After exception answers the connection is still good.
	sim.SetHook(nil)
	if _, err := d.Dispatch(context.Background(), command(modbus.WriteRegister, modbus.RegisterValue{Address: 1, Value: 1}), token(t, 1, 0)); err != nil {
		t.Fatal(err)
	}
}

// The unit's memory limit produces a real illegal-address answer.
func TestWriteBeyondUnitMemoryRejected(t *testing.T) {
	sim := modbussim.New(modbussim.WithSize(100))
	srv, err := sim.ListenTCP("")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	d := newDevice(t, tcpConfig(srv.Addr()))
	_, err = d.Dispatch(context.Background(), command(modbus.WriteRegisters, modbus.RegisterValues{Address: 99, Values: []uint16{1, 2}}), token(t, 1, 0))
	if !dispatch.IsRejected(err) {
		t.Fatalf("err = %v (%s), want rejected", err, class(err))
	}
}

// A unit that never answers: the request left, so the command is in doubt,
// and the dispatch ends at the unit's timeout.
func TestSilentUnitTimesOutInDoubt(t *testing.T) {
	for _, reply := range []modbussim.Reply{modbussim.ReplyNone, modbussim.ReplyLost} {
		sim, srv := startTCP(t)
		cfg := tcpConfig(srv.Addr())
		cfg.Timeout = 200 * time.Millisecond
		d := newDevice(t, cfg)
		sim.SetHook(func(modbussim.Request) modbussim.Fault { return modbussim.Fault{Reply: reply} })
		start := time.Now()
		_, err := d.Dispatch(context.Background(), command(modbus.WriteRegister, modbus.RegisterValue{Address: 7, Value: 77}), token(t, 1, 0))
		elapsed := time.Since(start)
		if c := class(err); c != "in doubt" {
			t.Fatalf("reply %d: class %s (%v), want in doubt", reply, c, err)
		}
		if !errors.Is(err, modbus.ErrNoAnswer) {
			t.Errorf("reply %d: err %v does not wrap ErrNoAnswer", reply, err)
		}
		if elapsed < cfg.Timeout || elapsed > cfg.Timeout+promptly {
			t.Errorf("reply %d: returned after %v, want about the timeout %v", reply, elapsed, cfg.Timeout)
		}
		if reply == modbussim.ReplyLost && sim.HoldingRegisters(1, 7, 1)[0] != 77 {
			t.Error("the unit did not act although only its answer was lost")
		}
		// The unit answers again: the next command goes through on a
		// fresh connection.
		sim.SetHook(nil)
		if _, err := d.Dispatch(context.Background(), command(modbus.WriteRegister, modbus.RegisterValue{Address: 7, Value: 78}), token(t, 1, 0)); err != nil {
			t.Fatalf("after the silence: %v", err)
		}
	}
}

func TestCancelMidDispatchReturnsPromptly(t *testing.T) {
	sim, srv := startTCP(t)
	d := newDevice(t, tcpConfig(srv.Addr()))
	reached, _ := holdRequests(t, sim, func(r modbussim.Request) bool { return r.IsWrite() })

	ctx, cancel := context.WithCancel(context.Background())
	done := dispatchAsync(ctx, d, command(modbus.WriteRegister, modbus.RegisterValue{Address: 1, Value: 1}), token(t, 1, 0))
	waitReached(t, reached)
	start := time.Now()
	cancel()
	o := await(t, done, promptly)
	if elapsed := time.Since(start); elapsed > promptly {
		t.Errorf("returned %v after the cancel", elapsed)
	}
	if !errors.Is(o.err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled beneath", o.err)
	}
	if c := class(o.err); c != "in doubt" {
		t.Errorf("class %s, want in doubt: the write had reached the unit", c)
	}
}

func TestCancelledBeforeDispatchIsRetryable(t *testing.T) {
	sim, srv := startTCP(t)
	d := newDevice(t, tcpConfig(srv.Addr()))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := d.Dispatch(ctx, command(modbus.WriteRegister, modbus.RegisterValue{Address: 1, Value: 1}), token(t, 1, 0))
	if !dispatch.IsRetryable(err) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v (%s), want retryable context.Canceled", err, class(err))
	}
	if n := len(sim.Requests()); n != 0 {
		t.Errorf("%d requests reached the unit", n)
	}
}

// The command's deadline bounds the request even when the unit timeout is
// longer; the unit may have acted, so the command is in doubt.
func TestContextDeadlineShortensTimeout(t *testing.T) {
	sim, srv := startTCP(t)
	d := newDevice(t, tcpConfig(srv.Addr()))
	holdRequests(t, sim, func(r modbussim.Request) bool { return r.IsWrite() })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := d.Dispatch(ctx, command(modbus.WriteRegister, modbus.RegisterValue{Address: 1, Value: 1}), token(t, 1, 0))
	if elapsed := time.Since(start); elapsed > promptly {
		t.Errorf("returned after %v, past the context deadline", elapsed)
	}
	if c := class(err); c != "in doubt" {
		t.Errorf("class %s (%v), want in doubt", c, err)
	}
}

// A unit held on one connection does not delay a unit on another.
func TestSlowUnitDoesNotBlockOtherConnection(t *testing.T) {
	simA, srvA := startTCP(t)
	_, srvB := startTCP(t)
	pool := modbus.NewPool()
	a := newDevice(t, tcpConfig(srvA.Addr()), modbus.WithPool(pool))
	b := newDevice(t, tcpConfig(srvB.Addr()), modbus.WithPool(pool))
	reached, release := holdRequests(t, simA, func(modbussim.Request) bool { return true })

	slow := dispatchAsync(context.Background(), a, command(modbus.WriteRegister, modbus.RegisterValue{Address: 1, Value: 1}), token(t, 1, 0))
	waitReached(t, reached)
	fast := dispatchAsync(context.Background(), b, command(modbus.WriteRegister, modbus.RegisterValue{Address: 1, Value: 2}), token(t, 1, 0))
	// b finishes while a is still held: the order of events proves it,
	// whatever the machine's speed.
	if o := await(t, fast, testTimeout); o.err != nil {
		t.Fatalf("unit on the other connection: %v", o.err)
	}
	select {
	case o := <-slow:
		t.Fatalf("the held unit finished before its release: %v", o.err)
	default:
	}
	release()
	if o := await(t, slow, testTimeout); o.err != nil {
		t.Fatalf("held unit after release: %v", o.err)
	}
}

// Two units behind one address share its connection and take turns; a
// unit waiting for the bus gives up when its context ends, retryable.
func TestUnitsOnOneConnectionTakeTurns(t *testing.T) {
	sim, srv := startTCP(t)
	pool := modbus.NewPool()
	cfg1, cfg2 := tcpConfig(srv.Addr()), tcpConfig(srv.Addr())
	cfg2.Unit = 2
	u1 := newDevice(t, cfg1, modbus.WithPool(pool))
	u2 := newDevice(t, cfg2, modbus.WithPool(pool))
	reached, release := holdRequests(t, sim, unitIs(1))

	first := dispatchAsync(context.Background(), u1, command(modbus.WriteRegister, modbus.RegisterValue{Address: 1, Value: 1}), token(t, 1, 0))
	waitReached(t, reached)

	ctx, cancel := context.WithCancel(context.Background())
	waiting := dispatchAsync(ctx, u2, command(modbus.WriteRegister, modbus.RegisterValue{Address: 1, Value: 2}), token(t, 1, 0))
	cancel()
	o := await(t, waiting, promptly)
	if !dispatch.IsRetryable(o.err) || !errors.Is(o.err, context.Canceled) {
		t.Fatalf("unit waiting for the bus: %v (%s), want retryable", o.err, class(o.err))
	}
	var ue *modbus.UnitError
	if !errors.As(o.err, &ue) || ue.Phase != modbus.PhaseBus {
		t.Errorf("err = %v, want a bus-phase UnitError", o.err)
	}

	second := dispatchAsync(context.Background(), u2, command(modbus.WriteRegister, modbus.RegisterValue{Address: 1, Value: 2}), token(t, 1, 0))
	release()
	if o := await(t, first, testTimeout); o.err != nil {
		t.Fatal(o.err)
	}
	if o := await(t, second, testTimeout); o.err != nil {
		t.Fatal(o.err)
	}
	// Unit 2's write reached the unit only after unit 1's transaction.
	var order []uint8
	for _, r := range sim.Requests() {
		if r.IsWrite() {
			order = append(order, r.Unit)
		}
	}
	if !reflect.DeepEqual(order, []uint8{1, 2}) {
		t.Errorf("writes by unit = %v, want [1 2]", order)
	}
}

// A connection that the unit closed between two commands is replaced
// before the next command is written, so that command is not in doubt.
func TestUnitRestartBetweenCommands(t *testing.T) {
	sim := modbussim.New()
	srv, err := sim.ListenTCP("")
	if err != nil {
		t.Fatal(err)
	}
	d := newDevice(t, tcpConfig(srv.Addr()))
	cmd := command(modbus.WriteRegister, modbus.RegisterValue{Address: 1, Value: 1})
	if _, err := d.Dispatch(context.Background(), cmd, token(t, 1, 0)); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	srv, err = sim.ListenTCP(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if _, err := d.Dispatch(context.Background(), cmd, token(t, 1, 0)); err != nil {
		t.Fatalf("after the unit restarted: %v (%s)", err, class(err))
	}
}

func TestMalformedPayloadRejectedWithoutBus(t *testing.T) {
	sim, srv := startTCP(t)
	cfg := tcpConfig(srv.Addr())
	cfg.Actions = map[modbus.Action]modbus.ActionConfig{modbus.WriteRegister: {}, modbus.WriteCoils: {}}
	d := newDevice(t, cfg)
	cases := []struct {
		action, payload string
	}{
		{"write-register", `{"address": 1}`},
		{"write-register", `{"address": 1, "value": 70000}`},
		{"write-register", `{"address": 1, "value": -1}`},
		{"write-register", `{"address": 1, "value": 1.5}`},
		{"write-register", `{"address": 1, "values": [1]}`},
		{"write-register", `{"address": 1, "value": 1, "unit": 3}`},
		{"write-register", `{"address": 1, "value": 1} {}`},
		{"write-register", `not json`},
		{"write-register", ``},
		{"write-coils", `{"address": 1, "values": []}`},
		{"write-coils", `{"address": 65535, "values": [true, true]}`},
		{"write-coils", `{"address": 1, "values": [1, 0]}`},
		{"write-coils", `{"address": 1, "values": null}`},
		{"write-coils", `{"address": 1, "values": [` + repeat("true,", 2000) + `true]}`},
		{"write-registers", `{"address": 1, "values": [1]}`}, // not enabled
		{"pulse", `{}`},
	}
	for _, c := range cases {
		_, err := d.Dispatch(context.Background(), dispatch.Command{ID: "x", Action: c.action, Payload: []byte(c.payload)}, token(t, 1, 0))
		if !dispatch.IsRejected(err) {
			t.Errorf("%s %s: %v (%s), want rejected", c.action, c.payload, err, class(err))
		}
	}
	oversized := []byte(`{"address": 1, "value": 1` + repeat(" ", modbus.MaxPayloadBytes) + `}`)
	_, err := d.Dispatch(context.Background(), dispatch.Command{ID: "x", Action: "write-register", Payload: oversized}, token(t, 1, 0))
	var pe *modbus.PayloadError
	if !dispatch.IsRejected(err) || !errors.As(err, &pe) {
		t.Errorf("oversized payload: %v, want a rejected PayloadError", err)
	}
	if n := len(sim.Requests()); n != 0 {
		t.Errorf("%d requests reached the unit for malformed commands", n)
	}
}

func repeat(s string, n int) string {
	b := make([]byte, 0, len(s)*n)
	for range n {
		b = append(b, s...)
	}
	return string(b)
}

func TestCheckHealth(t *testing.T) {
	sim, srv := startTCP(t)
	cfg := tcpConfig(srv.Addr())
	cfg.Health = &modbus.Health{Register: 30}
	d := newDevice(t, cfg)
	if err := d.CheckHealth(context.Background()); err != nil {
		t.Fatal(err)
	}
	reqs := sim.Requests()
	if len(reqs) != 1 || reqs[0].Function != modbussim.ReadHoldingRegisters || reqs[0].Address != 30 {
		t.Errorf("requests = %+v, want one read of register 30", reqs)
	}
	sim.SetHook(func(modbussim.Request) modbussim.Fault {
		return modbussim.Fault{Exception: modbussim.ServerDeviceFailure}
	})
	var ue *modbus.UnitError
	if err := d.CheckHealth(context.Background()); !errors.As(err, &ue) || ue.Phase != modbus.PhaseHealth {
		t.Errorf("CheckHealth of a failing unit: %v", err)
	}
}

func TestRedispatchSafe(t *testing.T) {
	cfg := tcpConfig("127.0.0.1:1")
	cfg.Actions = map[modbus.Action]modbus.ActionConfig{
		modbus.WriteRegister: {},
		modbus.WriteCoil:     {NoRedispatch: true},
	}
	d := newDevice(t, cfg)
	for action, want := range map[string]bool{"write-register": true, "write-coil": false, "write-coils": false, "pulse": false} {
		if got := d.RedispatchSafe(dispatch.Command{Action: action}); got != want {
			t.Errorf("RedispatchSafe(%s) = %v, want %v", action, got, want)
		}
	}
}

func TestClose(t *testing.T) {
	sim, srv := startTCP(t)
	pool := modbus.NewPool()
	d1, err := modbus.New(tcpConfig(srv.Addr()), modbus.WithPool(pool))
	if err != nil {
		t.Fatal(err)
	}
	cfg2 := tcpConfig(srv.Addr())
	cfg2.Unit = 2
	d2 := newDevice(t, cfg2, modbus.WithPool(pool))
	cmd := command(modbus.WriteRegister, modbus.RegisterValue{Address: 1, Value: 1})
	if _, err := d1.Dispatch(context.Background(), cmd, token(t, 1, 0)); err != nil {
		t.Fatal(err)
	}
	if err := d1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d1.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err = d1.Dispatch(context.Background(), cmd, token(t, 1, 0))
	if !errors.Is(err, modbus.ErrClosed) || !dispatch.IsRetryable(err) {
		t.Errorf("Dispatch after Close: %v, want retryable ErrClosed", err)
	}
	// The other unit on the shared connection is unaffected.
	if _, err := d2.Dispatch(context.Background(), cmd, token(t, 1, 0)); err != nil {
		t.Errorf("unit 2 after unit 1 closed: %v", err)
	}
	if got := sim.HoldingRegisters(2, 1, 1)[0]; got != 1 {
		t.Errorf("unit 2 register = %d", got)
	}
}

// Close interrupts a health check that waits on a silent unit.
func TestCloseInterruptsRunningTransaction(t *testing.T) {
	sim, srv := startTCP(t)
	cfg := tcpConfig(srv.Addr())
	cfg.Health = &modbus.Health{Register: 1}
	d, err := modbus.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	reached, _ := holdRequests(t, sim, func(modbussim.Request) bool { return true })
	done := make(chan error, 1)
	go func() { done <- d.CheckHealth(context.Background()) }()
	waitReached(t, reached)
	start := time.Now()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(start); elapsed > promptly {
		t.Errorf("Close took %v", elapsed)
	}
	if err := <-done; !errors.Is(err, modbus.ErrClosed) {
		t.Errorf("interrupted health check: %v, want ErrClosed beneath", err)
	}
}

func TestResultDetail(t *testing.T) {
	_, srv := startTCP(t)
	d := newDevice(t, tcpConfig(srv.Addr()))
	res, err := d.Dispatch(context.Background(), command(modbus.WriteRegisters, modbus.RegisterValues{Address: 4, Values: []uint16{1, 2}}), token(t, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	if res.Detail != "wrote 2 registers at 4, read back equal" {
		t.Errorf("detail %q", res.Detail)
	}
	var back modbus.RegisterValues
	if err := json.Unmarshal(res.Data, &back); err != nil || back.Address != 4 {
		t.Errorf("data %s: %v", res.Data, err)
	}
}
