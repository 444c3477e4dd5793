package modbus_test

import (
	"net"
	"sync"
	"testing"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/devices/modbus"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/dispatch/dispatchtest"
	"github.com/krabka-io/krabka-dispatch/internal/modbussim"
)

// fenceAt is the first fence register of the conformance targets.
const fenceAt = 900

// conformanceTarget points the dispatch contract suite at device, a unit
// with fence registers at fenceAt on sim. A Modbus write carries no command
// ID, so each command ID gets a register of its own: the token delivered
// with a command is the fence write that the unit received just before the
// write to that register.
func conformanceTarget(t *testing.T, sim *modbussim.Sim, device, unreachable *modbus.Device) dispatchtest.Target {
	var (
		mu    sync.Mutex
		addrs = make(map[string]uint16)
	)
	addressOf := func(id string) uint16 {
		mu.Lock()
		defer mu.Unlock()
		a, ok := addrs[id]
		if !ok {
			a = uint16(1000 + len(addrs))
			addrs[id] = a
		}
		return a
	}
	return dispatchtest.Target{
		Device: device,
		Command: func(id string) dispatch.Command {
			c := command(modbus.WriteRegister, modbus.RegisterValue{Address: addressOf(id), Value: 1})
			c.ID = id
			return c
		},
		Delivered: func(id string) (coordination.FencingToken, bool) {
			addr := addressOf(id)
			var fence *modbussim.Request
			for _, r := range sim.Requests() {
				switch {
				case r.Function == modbussim.WriteMultipleRegisters && r.Address == fenceAt:
					fence = &r
				case r.IsWrite() && r.Address == addr && fence != nil:
					return fenceToken(t, fence.Registers), true
				}
			}
			return coordination.NoEpoch, false
		},
		Stall: func() func() {
			_, release := holdRequests(t, sim, func(modbussim.Request) bool { return true })
			return func() {
				sim.SetHook(nil)
				release()
			}
		},
		Unreachable: unreachable,
		Invalid: func(id string) dispatch.Command {
			return dispatch.Command{ID: id, Action: "pulse", Payload: []byte(`{"address": 1}`)}
		},
	}
}

// fenceToken decodes the token from the fence registers: the four after the
// term hold the producer id, the ninth the epoch.
func fenceToken(t *testing.T, regs []uint16) coordination.FencingToken {
	var id int64
	for _, r := range regs[4:8] {
		id = id<<16 | int64(r)
	}
	tok, err := coordination.NewFencingToken(id, int16(regs[8]))
	if err != nil {
		t.Errorf("fence registers %v hold no token: %v", regs, err)
	}
	return tok
}

// closedAddr returns a loopback address that refuses connections.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestConformanceTCP(t *testing.T) {
	sim, srv := startTCP(t)
	cfg := tcpConfig(srv.Addr())
	cfg.Fence = &modbus.Fence{Address: fenceAt}
	device := newDevice(t, cfg)
	unreachable := newDevice(t, tcpConfig(closedAddr(t)))
	dispatchtest.Run(t, conformanceTarget(t, sim, device, unreachable))
}
