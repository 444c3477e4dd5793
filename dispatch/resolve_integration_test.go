//go:build integration

package dispatch_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// doubtDevice leaves every command whose action is "doubt" in doubt (an
// error that is neither retryable nor a rejection: the device may have
// acted), acts on every other one, and counts its calls by command ID.
type doubtDevice struct {
	mu    sync.Mutex
	calls map[string]int
}

func (d *doubtDevice) Dispatch(_ context.Context, cmd dispatch.Command, _ coordination.FencingToken) (dispatch.Result, error) {
	d.mu.Lock()
	d.calls[cmd.ID]++
	d.mu.Unlock()
	if cmd.Action == "doubt" {
		return dispatch.Result{}, errors.New("the reply timed out after the write")
	}
	return dispatch.Result{Detail: "done"}, nil
}

func (d *doubtDevice) count(id string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[id]
}

// TestSuccessorAfterAResolveCancel: a command falls in doubt, an operator
// cancels it (Dispatcher.Resolve, which `dispatcher resolve <id> --action
// cancel` reaches through the leader's HTTP API), and the leader then
// resigns or dies. The successor's recovery reads an outcome in doubt
// followed by a cancelled one; it must lead: accept and dispatch a new
// command, leave the cancelled one alone, and leave a log that Verify finds
// clean.
func TestSuccessorAfterAResolveCancel(t *testing.T) {
	for _, exit := range []string{"resigns", "dies"} {
		t.Run(exit, func(t *testing.T) {
			c := realCluster(t)
			tp := c.newTopics(t)
			role := testRole(t)
			dev := &doubtDevice{calls: map[string]int{}}
			registry := func() *dispatch.Registry {
				r := dispatch.NewRegistry()
				if err := r.Register("valve", dev); err != nil {
					t.Fatal(err)
				}
				return r
			}

			first := lead(t, c, tp, role, "m1", registry())
			out, err := first.d.Submit(t.Context(), dispatch.Command{ID: "doubt-1", Device: "valve", Action: "doubt"})
			if err != nil || out.Status != dispatch.StatusInDoubt {
				t.Fatalf("the command meant to fall in doubt: %+v %v", out, err)
			}
			out, err = first.d.Resolve(t.Context(), "doubt-1", dispatch.ResolveCancel)
			if err != nil || out.Status != dispatch.StatusCancelled {
				t.Fatalf("resolve cancel: %+v %v", out, err)
			}

			switch exit {
			case "resigns":
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				err := first.l.Resign(ctx)
				cancel()
				if err != nil {
					t.Fatalf("resign: %v", err)
				}
			case "dies":
				// No resignation: the dispatcher stops and the member's
				// connections close, as at a crash, and the successor waits
				// for the lease to run out.
				first.stop()
				<-first.done
				first.transport.Close()
			}
			<-first.done

			second := lead(t, c, tp, role, "m2", registry())
			out, err = second.d.Submit(t.Context(), dispatch.Command{ID: "after-1", Device: "valve", Action: "set"})
			if err != nil || out.Status != dispatch.StatusSucceeded {
				t.Fatalf("a new command under the successor: %+v %v", out, err)
			}
			if out, ok := second.d.Lookup("doubt-1"); !ok || out.Status != dispatch.StatusCancelled {
				t.Errorf("the successor's view of the cancelled command: %+v %v", out, ok)
			}
			var notInDoubt *dispatch.NotInDoubtError
			if _, err := second.d.Resolve(t.Context(), "doubt-1", dispatch.ResolveCancel); !errors.As(err, &notInDoubt) || !notInDoubt.Settled() {
				t.Errorf("a second cancel under the successor: %v, want a settled *NotInDoubtError", err)
			}
			if got := second.d.InDoubt(); len(got) != 0 {
				t.Errorf("the successor lists in doubt: %v", got)
			}
			if n := dev.count("doubt-1"); n != 1 {
				t.Errorf("the cancelled command reached the device %d times, want once", n)
			}
			if n := dev.count("after-1"); n != 1 {
				t.Errorf("the new command reached the device %d times, want once", n)
			}
			select {
			case err := <-second.runErr:
				t.Fatalf("the successor's dispatcher stopped: %v", err)
			default:
			}

			_, entries := waitSettled(t, c, tp, role.String(), []string{"doubt-1", "after-1"}, 30*time.Second)
			var statuses []dispatch.Status
			for _, e := range entries {
				if e.Kind == dispatch.EntryOutcome && e.CommandID() == "doubt-1" {
					statuses = append(statuses, e.Outcome.Status)
				}
			}
			if len(statuses) != 2 || statuses[0] != dispatch.StatusInDoubt || statuses[1] != dispatch.StatusCancelled {
				t.Errorf("outcomes of doubt-1: %v, want in doubt then cancelled", statuses)
			}
			verifyLog(t, entries)
		})
	}
}
