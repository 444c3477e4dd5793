package modbus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/devices/modbus"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// The dispatcher ends a call's context without a deadline, with cause
// dispatch.ErrFreshnessExpired, when its lease's freshness runs out. The
// waits of a Modbus dispatch end with it, however long the unit timeout:
// the answer after the write (in doubt), and the bus held by another unit
// (retryable, nothing sent). The cause travels in the error.
func TestFreshnessEndEndsModbusWaits(t *testing.T) {
	sim, srv := startTCP(t)
	pool := modbus.NewPool()
	cfg1, cfg2 := tcpConfig(srv.Addr()), tcpConfig(srv.Addr())
	cfg1.Timeout, cfg2.Timeout = time.Hour, time.Hour
	cfg2.Unit = 2
	u1 := newDevice(t, cfg1, modbus.WithPool(pool))
	u2 := newDevice(t, cfg2, modbus.WithPool(pool))
	reached, _ := holdRequests(t, sim, unitIs(1))

	ctx1, cut1 := context.WithCancelCause(context.Background())
	answer := dispatchAsync(ctx1, u1, command(modbus.WriteRegister, modbus.RegisterValue{Address: 1, Value: 1}), token(t, 1, 0))
	waitReached(t, reached)
	ctx2, cut2 := context.WithCancelCause(context.Background())
	bus := dispatchAsync(ctx2, u2, command(modbus.WriteRegister, modbus.RegisterValue{Address: 1, Value: 2}), token(t, 1, 0))

	cut2(dispatch.ErrFreshnessExpired)
	o := await(t, bus, promptly)
	if !dispatch.IsRetryable(o.err) || !errors.Is(o.err, dispatch.ErrFreshnessExpired) {
		t.Errorf("waiting for the bus: %v (%s), want retryable with the freshness cause", o.err, class(o.err))
	}
	cut1(dispatch.ErrFreshnessExpired)
	o = await(t, answer, promptly)
	if class(o.err) != "in doubt" || !errors.Is(o.err, dispatch.ErrFreshnessExpired) {
		t.Errorf("waiting for the answer: %v (%s), want in doubt with the freshness cause", o.err, class(o.err))
	}
}
