package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/dispatch/dispatchtest"
)

func TestExampleRuns(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"relay-1 at 127.0.0.1:",
		"leader c1 under term 20 token 7:2: channel 3 on",
		"deposed leader c2 under term 11 token 9:4: rejected, the board did not act: the relay board refused an earlier term",
		"leader c3 under term 20 token 7:2: rejected",
		"leader c4 under term 20 token 3:0: channel 4 on",
		"channel 3 is on: true, channel 4 is on: true",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestRelayConformance runs the dispatch contract suite against the device,
// as every device package should.
func TestRelayConformance(t *testing.T) {
	board, err := StartBoard()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(board.Close)
	// A port that refuses connections: listen, then close.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	dispatchtest.Run(t, dispatchtest.Target{
		Device: NewRelayDevice(board.Addr()),
		Command: func(id string) dispatch.Command {
			return dispatch.Command{ID: id, Device: "relay-1", Action: "on", Payload: []byte("1")}
		},
		Delivered:   func(id string) (coordination.FencingToken, bool) { return board.Token(id) },
		Stall:       board.Stall,
		Unreachable: NewRelayDevice(closed),
		Invalid: func(id string) dispatch.Command {
			return dispatch.Command{ID: id, Device: "relay-1", Action: "explode", Payload: []byte("1")}
		},
	})
}

// TestBoardRefusesACommandWithoutTerm checks that a command sent through
// Dispatch, which carries no term, is refused without acting: the board
// cannot order it against any leadership.
func TestBoardRefusesACommandWithoutTerm(t *testing.T) {
	board, err := StartBoard()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(board.Close)
	tok, _ := coordination.NewFencingToken(7, 2)
	_, err = NewRelayDevice(board.Addr()).Dispatch(t.Context(), dispatch.Command{ID: "c1", Action: "on", Payload: []byte("5")}, tok)
	if !dispatch.IsRejected(err) || board.Channel(5) {
		t.Fatalf("a command without a term: %v, channel 5 on: %v", err, board.Channel(5))
	}
}
