package recorder

import (
	"errors"
	"testing"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/dispatch/dispatchtest"
)

func token(t *testing.T, id int64, epoch int16) coordination.FencingToken {
	t.Helper()
	tok, err := coordination.NewFencingToken(id, epoch)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func newServer(t *testing.T) *Server {
	s, err := NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestFencingHardwareRefusesStaleTokens(t *testing.T) {
	s := newServer(t)
	s.Behave("fenced", Behaviour{Fencing: true})
	fenced := NewDevice("fenced", s.URL(), "m1")
	plain := NewDevice("plain", s.URL(), "m1")
	ctx := t.Context()
	cmd := dispatch.Command{ID: "c1"}
	if _, err := fenced.Dispatch(ctx, cmd, token(t, 5, 3)); err != nil {
		t.Fatal(err)
	}
	_, err := fenced.Dispatch(ctx, cmd, token(t, 5, 2))
	if !errors.Is(err, ErrFenced) || !dispatch.IsRejected(err) {
		t.Errorf("stale token: %v, want a rejected ErrFenced", err)
	}
	for range 2 {
		if _, err := plain.Dispatch(ctx, cmd, token(t, 5, 2)); err != nil {
			t.Errorf("plain hardware: %v", err)
		}
	}
	got := s.Dispatches()
	if len(got) != 4 || !got[0].Accepted || got[1].Accepted || !got[2].Accepted || !got[3].Accepted {
		t.Errorf("dispatches %+v", got)
	}
	if got[0].Token != token(t, 5, 3) || got[0].Member != "m1" || got[0].CommandID != "c1" {
		t.Errorf("first dispatch %+v", got[0])
	}
}

func TestDeviceConformance(t *testing.T) {
	s := newServer(t)
	dead := newServer(t)
	deadURL := dead.URL()
	dead.Close()
	var resume func()
	dispatchtest.Run(t, dispatchtest.Target{
		Device:  NewDevice("sim", s.URL(), "m"),
		Command: func(id string) dispatch.Command { return dispatch.Command{ID: id, Device: "sim"} },
		Delivered: func(id string) (coordination.FencingToken, bool) {
			for _, d := range s.Dispatches() {
				if d.CommandID == id && d.Accepted {
					return d.Token, true
				}
			}
			return coordination.NoEpoch, false
		},
		Stall: func() func() {
			s.Behave("sim", Behaviour{Block: true})
			resume = func() { s.Behave("sim", Behaviour{}) }
			return resume
		},
		Unreachable: NewDevice("sim", deadURL, "m"),
		Invalid: func(id string) dispatch.Command {
			return dispatch.Command{ID: id, Device: "sim", Action: RejectAction}
		},
	})
}
