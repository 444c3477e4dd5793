// Command custom-device shows how to add a device type for new hardware: a
// relay board that speaks a line protocol over TCP. RelayDevice implements
// dispatch.Device (plus the optional HealthChecker and Redispatcher); main
// starts a simulated board, registers the device, and dispatches as a
// leader would, including a late command from a deposed leader that the
// board refuses.
//
//	go run ./examples/custom-device
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "custom-device:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer) error {
	board, err := StartBoard()
	if err != nil {
		return err
	}
	defer board.Close()

	// A dispatcher finds devices by name in its registry.
	registry := dispatch.NewRegistry()
	if err := registry.Register("relay-1", NewRelayDevice(board.Addr())); err != nil {
		return err
	}
	defer registry.Close()
	dev, err := registry.Lookup("relay-1")
	if err != nil {
		return err
	}
	if h, ok := dev.(dispatch.HealthChecker); ok {
		if err := h.CheckHealth(ctx); err != nil {
			return err
		}
		fmt.Fprintf(out, "relay-1 at %s is healthy\n", board.Addr())
	}

	// The dispatcher passes the token under which the command's record
	// committed; here two leaderships of one role.
	old, _ := coordination.NewFencingToken(7, 1)
	current, _ := coordination.NewFencingToken(7, 2)
	for _, step := range []struct {
		cmd   dispatch.Command
		token coordination.FencingToken
		who   string
	}{
		{dispatch.Command{ID: "c1", Device: "relay-1", Action: "on", Payload: []byte("3")}, current, "leader"},
		{dispatch.Command{ID: "c2", Device: "relay-1", Action: "off", Payload: []byte("3")}, old, "deposed leader"},
		{dispatch.Command{ID: "c3", Device: "relay-1", Action: "blink", Payload: []byte("3")}, current, "leader"},
	} {
		res, err := dev.Dispatch(ctx, step.cmd, step.token)
		switch {
		case err == nil:
			fmt.Fprintf(out, "%s %s under %s: %s\n", step.who, step.cmd.ID, step.token, res.Detail)
		case dispatch.IsRejected(err):
			fmt.Fprintf(out, "%s %s under %s: rejected, the board did not act: %v\n", step.who, step.cmd.ID, step.token, err)
		case dispatch.IsRetryable(err):
			fmt.Fprintf(out, "%s %s under %s: retryable: %v\n", step.who, step.cmd.ID, step.token, err)
		default:
			fmt.Fprintf(out, "%s %s under %s: in doubt: %v\n", step.who, step.cmd.ID, step.token, err)
		}
	}
	fmt.Fprintf(out, "channel 3 is on: %t\n", board.Channel(3))
	return nil
}
