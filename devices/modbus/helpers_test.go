package modbus_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/devices/modbus"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/internal/modbussim"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testTimeout is the per-request timeout of the devices in these tests:
// short enough that a test of a silent unit ends quickly, long enough for a
// loaded two-core machine to answer a loopback request.
const testTimeout = 2 * time.Second

// promptly bounds how long a cancelled or interrupted call may take to
// return. It is far below testTimeout, so a call that waited for its
// timeout instead of honouring the cancel fails the check.
const promptly = testTimeout / 2

// allActions enables every action, with read-back verification.
func allActions() map[modbus.Action]modbus.ActionConfig {
	return map[modbus.Action]modbus.ActionConfig{
		modbus.WriteRegister:  {Verify: true},
		modbus.WriteRegisters: {Verify: true},
		modbus.WriteCoil:      {Verify: true},
		modbus.WriteCoils:     {Verify: true},
	}
}

// startTCP starts a simulator and its TCP server, closed at cleanup.
func startTCP(t testing.TB) (*modbussim.Sim, *modbussim.TCPServer) {
	t.Helper()
	sim := modbussim.New()
	srv, err := sim.ListenTCP("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return sim, srv
}

// tcpConfig returns the configuration of unit 1 at addr with every action
// enabled and verified.
func tcpConfig(addr string) modbus.Config {
	return modbus.Config{
		Transport: modbus.TCP,
		Address:   addr,
		Unit:      1,
		Timeout:   testTimeout,
		Actions:   allActions(),
	}
}

// newDevice builds a device, closed at cleanup.
func newDevice(t testing.TB, cfg modbus.Config, opts ...modbus.Option) *modbus.Device {
	t.Helper()
	d, err := modbus.New(cfg, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d
}

// command builds a command with a JSON payload.
func command(action modbus.Action, payload any) dispatch.Command {
	b, err := json.Marshal(payload)
	if err != nil {
		panic(err)
	}
	return dispatch.Command{ID: "cmd-1", Device: "unit", Action: string(action), Payload: b}
}

func token(t testing.TB, id int64, epoch int16) coordination.FencingToken {
	t.Helper()
	tok, err := coordination.NewFencingToken(id, epoch)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// dispatchAsync runs Dispatch on its own goroutine and delivers its result.
type outcome struct {
	res dispatch.Result
	err error
}

func dispatchAsync(ctx context.Context, d *modbus.Device, cmd dispatch.Command, tok coordination.FencingToken) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		res, err := d.Dispatch(ctx, cmd, tok)
		ch <- outcome{res, err}
	}()
	return ch
}

// await returns the outcome, or fails the test when it takes longer than
// within.
func await(t testing.TB, ch <-chan outcome, within time.Duration) outcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(within):
		t.Fatalf("no result within %v", within)
		return outcome{}
	}
}

// holdRequests makes every request that match selects wait until the
// returned release is called; reached receives each held request as it
// arrives. release is also called at cleanup.
func holdRequests(t testing.TB, sim *modbussim.Sim, match func(modbussim.Request) bool) (reached <-chan modbussim.Request, release func()) {
	hold := make(chan struct{})
	arrived := make(chan modbussim.Request, 16)
	var once sync.Once
	release = func() { once.Do(func() { close(hold) }) }
	sim.SetHook(func(r modbussim.Request) modbussim.Fault {
		if !match(r) {
			return modbussim.Fault{}
		}
		select {
		case arrived <- r:
		default:
		}
		return modbussim.Fault{Hold: hold}
	})
	t.Cleanup(release)
	return arrived, release
}

func waitReached(t testing.TB, reached <-chan modbussim.Request) modbussim.Request {
	t.Helper()
	select {
	case r := <-reached:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the unit")
		return modbussim.Request{}
	}
}

func unitIs(unit uint8) func(modbussim.Request) bool {
	return func(r modbussim.Request) bool { return r.Unit == unit }
}

// class names the dispatch class of err, for messages.
func class(err error) string {
	switch {
	case err == nil:
		return "success"
	case dispatch.IsRejected(err):
		return "rejected"
	case dispatch.IsRetryable(err):
		return "retryable"
	}
	return "in doubt"
}
