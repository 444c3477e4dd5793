package mqtt

import (
	"errors"
	"fmt"
	"time"

	"github.com/eclipse/paho.mqtt.golang/packets"
)

// Errors that Dispatch, CheckHealth and WaitConnected wrap. Dispatch also
// marks each one with [dispatch.Retryable] or [dispatch.Rejected] when the
// device certainly did not act; the doc of each says which.
var (
	// ErrNotConnected says the Device has no broker connection. Dispatch
	// returns it, retryable, when no connection came up within the connect
	// timeout, or when the connection dropped before the publish left; the
	// last connection failure, a *ConnectError, is wrapped beside it.
	ErrNotConnected = errors.New("mqtt: not connected to a broker")

	// ErrNotAuthorized says the broker refused the username, the password
	// or the client id. It is wrapped in a *ConnectError.
	ErrNotAuthorized = errors.New("mqtt: broker refused the credentials")

	// ErrAckTimeout says the broker did not acknowledge the publish within
	// the publish timeout. The command is in doubt.
	ErrAckTimeout = errors.New("mqtt: no acknowledgement from the broker")

	// ErrReplyTimeout says the device did not reply within the reply
	// timeout. The command is in doubt.
	ErrReplyTimeout = errors.New("mqtt: no reply from the device")

	// ErrClosed says the Device was closed. Dispatch marks it retryable
	// when the command was not yet published, and leaves it in doubt after.
	ErrClosed = errors.New("mqtt: device closed")

	// ErrNoToken says the dispatch carried coordination.NoEpoch, which
	// proves no leadership; such a command is rejected.
	ErrNoToken = errors.New("mqtt: command has no fencing token")

	// ErrCommandInFlight says a command with the same ID is already waiting
	// for its reply on this Device; the second is retryable, as it was not
	// published.
	ErrCommandInFlight = errors.New("mqtt: a command with this id is already in flight")

	// ErrPayloadTooLarge is matched by a *PayloadTooLargeError.
	ErrPayloadTooLarge = errors.New("mqtt: envelope too large")

	// ErrMalformedPayload says the command's payload cannot travel under
	// the configured payload encoding (PayloadJSON with a payload that is
	// not JSON); the command is rejected.
	ErrMalformedPayload = errors.New("mqtt: malformed payload")
)

// ConnectError reports a failed connection attempt.
type ConnectError struct {
	// Brokers are the broker URLs that the attempt tried.
	Brokers []string
	// Err is the failure: a network or TLS error (a certificate that does
	// not verify matches *tls.CertificateVerificationError), or a refusal
	// that matches ErrNotAuthorized.
	Err error
}

func (e *ConnectError) Error() string {
	return fmt.Sprintf("mqtt: connect to %v: %v", e.Brokers, e.Err)
}

// Unwrap returns the failure.
func (e *ConnectError) Unwrap() error { return e.Err }

// classifyConnect wraps the error of a connection attempt, marking the
// broker's refusals of the credentials with ErrNotAuthorized.
func classifyConnect(brokers []string, err error) *ConnectError {
	if errors.Is(err, packets.ErrorRefusedBadUsernameOrPassword) ||
		errors.Is(err, packets.ErrorRefusedNotAuthorised) ||
		errors.Is(err, packets.ErrorRefusedIDRejected) {
		err = fmt.Errorf("%w: %w", ErrNotAuthorized, err)
	}
	return &ConnectError{Brokers: brokers, Err: err}
}

// PayloadTooLargeError reports a command whose envelope exceeds the
// configured maximum. Dispatch rejects it.
type PayloadTooLargeError struct {
	// Size is the size of the encoded envelope in bytes.
	Size int
	// Limit is Config.MaxPayloadBytes.
	Limit int
}

func (e *PayloadTooLargeError) Error() string {
	return fmt.Sprintf("mqtt: envelope of %d bytes exceeds the limit of %d bytes", e.Size, e.Limit)
}

// Is reports whether target is ErrPayloadTooLarge.
func (e *PayloadTooLargeError) Is(target error) bool { return target == ErrPayloadTooLarge }

// ReplyError reports a device's reply with a status other than ok. With
// status rejected, Dispatch marks it with dispatch.Rejected; with status
// error it leaves the command in doubt, as the device may have acted in
// part.
type ReplyError struct {
	// ID is the command ID.
	ID string
	// Status is StatusError or StatusRejected.
	Status string
	// Detail is the device's account.
	Detail string
}

func (e *ReplyError) Error() string {
	return fmt.Sprintf("mqtt: device replied %s to command %s: %s", e.Status, e.ID, e.Detail)
}

// TimeoutError reports a wait that ran past its bound; it matches
// ErrAckTimeout or ErrReplyTimeout.
type TimeoutError struct {
	// Wait is ErrAckTimeout or ErrReplyTimeout.
	Wait error
	// After is the bound that passed.
	After time.Duration
}

func (e *TimeoutError) Error() string { return fmt.Sprintf("%v within %v", e.Wait, e.After) }

// Unwrap returns Wait.
func (e *TimeoutError) Unwrap() error { return e.Wait }
