package modbus_test

import (
	"errors"
	"testing"

	"github.com/krabka-io/krabka-dispatch/devices/modbus"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

func TestValidateCommandRefusesWhatDispatchWould(t *testing.T) {
	_, srv := startTCP(t)
	cfg := tcpConfig(srv.Addr())
	cfg.Actions = map[modbus.Action]modbus.ActionConfig{modbus.WriteRegister: {}, modbus.WriteCoils: {}}
	d := newDevice(t, cfg)
	cmd := func(action, payload string) dispatch.Command {
		return dispatch.Command{ID: "x", Device: "plc", Action: action, Payload: []byte(payload)}
	}
	if err := d.ValidateCommand(cmd("write-register", `{"address": 1, "value": 7}`)); err != nil {
		t.Errorf("a good command: %v", err)
	}
	var unknown *modbus.UnknownActionError
	if err := d.ValidateCommand(cmd("write-registers", `{"address": 1, "values": [1]}`)); !errors.As(err, &unknown) {
		t.Errorf("an action not enabled: %v, want *UnknownActionError", err)
	}
	if err := d.ValidateCommand(cmd("pulse", `{}`)); !errors.As(err, &unknown) {
		t.Errorf("an unknown action: %v, want *UnknownActionError", err)
	}
	var pe *modbus.PayloadError
	for _, p := range []string{`{"address": 1}`, `{"address": 1, "value": 70000}`, `not json`, ``} {
		if err := d.ValidateCommand(cmd("write-register", p)); !errors.As(err, &pe) {
			t.Errorf("payload %q: %v, want *PayloadError", p, err)
		}
	}
}
