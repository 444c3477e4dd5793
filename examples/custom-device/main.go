// Command custom-device shows how to add a device type for new hardware: a
// relay board that speaks a line protocol over TCP. RelayDevice implements
// dispatch.Device (plus the optional AuthorityDevice, HealthChecker and
// Redispatcher); main
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

	// The dispatcher passes the term of its leadership and the token under
	// which the command's record committed, through DispatchUnder when the
	// device implements dispatch.AuthorityDevice. Here two leaderships of one
	// role: the deposed one held term 11 and a higher producer id than the
	// current one, term 20, whose producer id later rotates lower still.
	under, ok := dev.(dispatch.AuthorityDevice)
	if !ok {
		return fmt.Errorf("relay-1 does not receive terms")
	}
	authority := func(term coordination.Term, id int64, epoch int16) coordination.Authority {
		tok, _ := coordination.NewFencingToken(id, epoch)
		return coordination.Authority{Term: term, Token: tok}
	}
	old := authority(11, 9, 4)
	current := authority(20, 7, 2)
	rotated := authority(20, 3, 0)
	for _, step := range []struct {
		cmd       dispatch.Command
		authority coordination.Authority
		who       string
	}{
		{dispatch.Command{ID: "c1", Device: "relay-1", Action: "on", Payload: []byte("3")}, current, "leader"},
		{dispatch.Command{ID: "c2", Device: "relay-1", Action: "off", Payload: []byte("3")}, old, "deposed leader"},
		{dispatch.Command{ID: "c3", Device: "relay-1", Action: "blink", Payload: []byte("3")}, current, "leader"},
		{dispatch.Command{ID: "c4", Device: "relay-1", Action: "on", Payload: []byte("4")}, rotated, "leader"},
	} {
		res, err := under.DispatchUnder(ctx, step.cmd, step.authority)
		switch {
		case err == nil:
			fmt.Fprintf(out, "%s %s under %s: %s\n", step.who, step.cmd.ID, step.authority, res.Detail)
		case dispatch.IsRejected(err):
			fmt.Fprintf(out, "%s %s under %s: rejected, the board did not act: %v\n", step.who, step.cmd.ID, step.authority, err)
		case dispatch.IsRetryable(err):
			fmt.Fprintf(out, "%s %s under %s: retryable: %v\n", step.who, step.cmd.ID, step.authority, err)
		default:
			fmt.Fprintf(out, "%s %s under %s: in doubt: %v\n", step.who, step.cmd.ID, step.authority, err)
		}
	}
	fmt.Fprintf(out, "channel 3 is on: %t, channel 4 is on: %t\n", board.Channel(3), board.Channel(4))
	return nil
}
