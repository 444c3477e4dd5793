package recorder

import (
	"errors"
	"os"
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

func TestFencingHardwareRefusesEarlierTerms(t *testing.T) {
	s := newServer(t)
	s.Behave("fenced", Behaviour{Fencing: true})
	fenced := NewDevice("fenced", s.URL(), "m1")
	plain := NewDevice("plain", s.URL(), "m1")
	ctx := t.Context()
	cmd := dispatch.Command{ID: "c1"}
	under := func(term coordination.Term, id int64, epoch int16) coordination.Authority {
		return coordination.Authority{Term: term, Token: token(t, id, epoch)}
	}
	if _, err := fenced.DispatchUnder(ctx, cmd, under(20, 5, 3)); err != nil {
		t.Fatal(err)
	}
	// A rotation to a lower producer id within the term is the same leader.
	if _, err := fenced.DispatchUnder(ctx, cmd, under(20, 2, 0)); err != nil {
		t.Fatalf("a rotation within the term: %v", err)
	}
	_, err := fenced.DispatchUnder(ctx, cmd, under(19, 50, 9))
	if !errors.Is(err, ErrFenced) || !dispatch.IsRejected(err) {
		t.Errorf("an earlier term: %v, want a rejected ErrFenced", err)
	}
	_, err = fenced.Dispatch(ctx, cmd, token(t, 60, 0))
	if !errors.Is(err, ErrFenced) || !dispatch.IsRejected(err) {
		t.Errorf("no term: %v, want a rejected ErrFenced", err)
	}
	for range 2 {
		if _, err := plain.DispatchUnder(ctx, cmd, under(19, 5, 2)); err != nil {
			t.Errorf("plain hardware: %v", err)
		}
	}
	got := s.Dispatches()
	accepted := []bool{true, true, false, false, true, true}
	if len(got) != len(accepted) {
		t.Fatalf("dispatches %+v", got)
	}
	for i, want := range accepted {
		if got[i].Accepted != want {
			t.Errorf("dispatch %d accepted %v, want %v: %+v", i, got[i].Accepted, want, got[i])
		}
	}
	if got[0].Term != 20 || got[0].Token != token(t, 5, 3) || got[0].Member != "m1" || got[0].CommandID != "c1" {
		t.Errorf("first dispatch %+v", got[0])
	}
}

func TestCloseRemovesFenceState(t *testing.T) {
	s, err := NewServer()
	if err != nil {
		t.Fatal(err)
	}
	dir := s.fenceDir
	s.Behave("fenced", Behaviour{Fencing: true})
	if _, err := NewDevice("fenced", s.URL(), "m").DispatchUnder(t.Context(), dispatch.Command{ID: "c"},
		coordination.Authority{Term: 3, Token: token(t, 1, 0)}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("fence directory after Close: %v", err)
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
