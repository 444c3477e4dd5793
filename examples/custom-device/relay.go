package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// RelayDevice drives a relay board that speaks a one-line text protocol
// over TCP: the dispatcher sends
//
//	SET <channel> <ON|OFF> <term> <token> <command-id>
//
// and the board answers OK, STALE (the term is below one it has seen) or
// ERR <reason>. It is the shape of any Device for new hardware: honour the
// context, carry the term and the token, and say whether a failure left the
// hardware untouched. The term orders leaderships, so the board compares
// terms; the token may rotate to a lower producer id within one term.
type RelayDevice struct {
	addr    string
	timeout time.Duration
}

// Interfaces the dispatcher asserts where it needs them.
var (
	_ dispatch.Device          = (*RelayDevice)(nil)
	_ dispatch.AuthorityDevice = (*RelayDevice)(nil)
	_ dispatch.HealthChecker   = (*RelayDevice)(nil)
	_ dispatch.Redispatcher    = (*RelayDevice)(nil)
)

// DefaultRelayTimeout bounds one exchange with the board.
const DefaultRelayTimeout = 2 * time.Second

// NewRelayDevice returns a device for the board at addr (host:port).
func NewRelayDevice(addr string) *RelayDevice {
	return &RelayDevice{addr: addr, timeout: DefaultRelayTimeout}
}

// errStale is the board's refusal of a deposed leader.
var errStale = errors.New("the relay board refused an earlier term")

// Dispatch sends the command without a term, which the board refuses; the
// dispatcher calls DispatchUnder.
func (d *RelayDevice) Dispatch(ctx context.Context, cmd dispatch.Command, token coordination.FencingToken) (dispatch.Result, error) {
	return d.DispatchUnder(ctx, cmd, coordination.Authority{Term: coordination.NoTerm, Token: token})
}

// DispatchUnder switches one channel under the authority's term and token.
// The payload is the channel number and the action is "on" or "off".
func (d *RelayDevice) DispatchUnder(ctx context.Context, cmd dispatch.Command, authority coordination.Authority) (dispatch.Result, error) {
	var state string
	switch cmd.Action {
	case "on", "off":
		state = strings.ToUpper(cmd.Action)
	default:
		// Refused before any I/O: the board certainly did not act.
		return dispatch.Result{}, dispatch.Rejected(fmt.Errorf("relay: unknown action %q, want on or off", cmd.Action))
	}
	channel, err := strconv.Atoi(string(cmd.Payload))
	if err != nil || channel < 0 {
		return dispatch.Result{}, dispatch.Rejected(fmt.Errorf("relay: payload %q is not a channel number", cmd.Payload))
	}

	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", d.addr)
	if err != nil {
		// Nothing was sent: a retry may succeed and cannot double-act.
		return dispatch.Result{}, dispatch.Retryable(fmt.Errorf("relay: connect %s: %w", d.addr, err))
	}
	defer conn.Close()
	// The dispatcher cancels ctx the moment the leadership ends: close the
	// connection then, so a blocked read returns at once.
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()

	line := fmt.Sprintf("SET %d %s %d %s %s\n", channel, state, int64(authority.Term), authority.Token, cmd.ID)
	if _, err := conn.Write([]byte(line)); err != nil {
		// Part of the line may have reached the board: in doubt.
		return dispatch.Result{}, fmt.Errorf("relay: send: %w", err)
	}
	reply, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		// The board may have switched and the answer was lost: in doubt.
		return dispatch.Result{}, fmt.Errorf("relay: no answer to %s: %w", cmd.ID, err)
	}
	switch reply = strings.TrimSpace(reply); {
	case reply == "OK":
		return dispatch.Result{Detail: fmt.Sprintf("channel %d %s", channel, cmd.Action)}, nil
	case reply == "STALE":
		return dispatch.Result{}, dispatch.Rejected(errStale)
	default:
		return dispatch.Result{}, dispatch.Rejected(fmt.Errorf("relay: board answered %q", reply))
	}
}

// CheckHealth asks the board for a PONG.
func (d *RelayDevice) CheckHealth(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", d.addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := conn.Write([]byte("PING\n")); err != nil {
		return err
	}
	reply, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(reply) != "PONG" {
		return fmt.Errorf("relay: health answer %q", reply)
	}
	return nil
}

// RedispatchSafe reports that a command may be sent again after a failover:
// setting a channel is idempotent, and the board ignores a command ID it
// has already applied.
func (d *RelayDevice) RedispatchSafe(dispatch.Command) bool { return true }
