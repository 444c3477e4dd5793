package mqtt

import (
	"math"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// validationAuthority stands in for the authority a command is dispatched
// under when ValidateCommand builds its envelope: the largest term and
// token, so the envelope's size is never underestimated.
func validationAuthority() (coordination.Authority, error) {
	token, err := coordination.NewFencingToken(math.MaxInt64, math.MaxInt16)
	if err != nil {
		return coordination.Authority{}, err
	}
	return coordination.Authority{Term: coordination.Term(math.MaxInt64), Token: token}, nil
}

// ValidateCommand implements [dispatch.CommandValidator]: it refuses, before
// the command is recorded, a command that DispatchUnder would refuse without
// publishing: a command field that cannot fill the topic or reply topic
// (*TopicValueError), a payload that the configured payload encoding cannot
// carry (ErrMalformedPayload), and an envelope over MaxPayloadBytes
// (*PayloadTooLargeError), sized with the largest term and token. Any action
// is accepted: the device at the other end gives actions their meaning.
func (d *Device) ValidateCommand(cmd dispatch.Command) error {
	authority, err := validationAuthority()
	if err != nil {
		return err
	}
	_, _, err = d.prepare(cmd, authority)
	return err
}

var _ dispatch.CommandValidator = (*Device)(nil)
