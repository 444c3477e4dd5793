package modbus

import "github.com/krabka-io/krabka-dispatch/dispatch"

// ValidateCommand implements [dispatch.CommandValidator]: it refuses, before
// the command is recorded, an action not listed in [Config.Actions]
// (*UnknownActionError) and a payload that does not fit its action
// (*PayloadError), the same checks Dispatch makes before it touches the bus.
func (d *Device) ValidateCommand(cmd dispatch.Command) error {
	if _, ok := d.cfg.Actions[Action(cmd.Action)]; !ok {
		return &UnknownActionError{Action: cmd.Action}
	}
	_, err := parsePayload(Action(cmd.Action), cmd.Payload)
	return err
}

var _ dispatch.CommandValidator = (*Device)(nil)
