package modbus_test

import (
	"context"
	"fmt"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/devices/modbus"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/internal/modbussim"
)

// A valve PLC with fence registers, driven through a simulator on loopback
// that refuses an earlier term, as the PLC's program would.
func Example() {
	sim := modbussim.New()
	sim.SetFence(3, 900)
	srv, err := sim.ListenTCP("")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	pool := modbus.NewPool()
	valve, err := modbus.New(modbus.Config{
		Transport: modbus.TCP,
		Address:   srv.Addr(),
		Unit:      3,
		Fence:     &modbus.Fence{Address: 900},
		Actions: map[modbus.Action]modbus.ActionConfig{
			modbus.WriteRegister: {Verify: true},
		},
	}, modbus.WithPool(pool))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer valve.Close()

	token, _ := coordination.NewFencingToken(4711, 2)
	leader := coordination.Authority{Term: 812, Token: token}
	res, err := valve.DispatchUnder(context.Background(), dispatch.Command{
		ID:      "open-valve-1",
		Action:  "write-register",
		Payload: []byte(`{"address": 10, "value": 1}`),
	}, leader)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Detail)
	fmt.Println(string(res.Data))
	fmt.Println("fence registers:", sim.HoldingRegisters(3, 900, modbus.FenceRegisterCount))

	_, err = valve.DispatchUnder(context.Background(), dispatch.Command{
		ID:      "open-valve-2",
		Action:  "write-register",
		Payload: []byte(`{"address": 10, "value": 70000}`),
	}, leader)
	fmt.Println("bad payload rejected:", dispatch.IsRejected(err))

	// A leader of an earlier term wakes and tries to close the valve.
	deposed, _ := coordination.NewFencingToken(9000, 1)
	_, err = valve.DispatchUnder(context.Background(), dispatch.Command{
		ID:      "close-valve-1",
		Action:  "write-register",
		Payload: []byte(`{"address": 10, "value": 0}`),
	}, coordination.Authority{Term: 640, Token: deposed})
	fmt.Println("earlier term rejected:", dispatch.IsRejected(err), "register 10:", sim.HoldingRegisters(3, 10, 1))
	// Output:
	// wrote 1 register at 10, read back equal
	// {"address":10,"values":[1]}
	// fence registers: [0 0 0 812 0 0 0 4711 2]
	// bad payload rejected: true
	// earlier term rejected: true register 10: [1]
}
