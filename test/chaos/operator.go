package chaos

import (
	"context"
	"errors"
	"os/exec"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// exitRedispatchFailed is the exit code of `dispatcher resolve` when the
// redispatch was recorded but did not succeed.
const exitRedispatchFailed = 7

// operate starts an operator's pass in the background: it reads the log,
// and settles up to four commands in doubt with `dispatcher resolve`,
// redispatching half and cancelling half, through the API of a member of
// the command's role (a standby redirects to the leader).
func (r *run) operate(ctx context.Context) {
	r.operator.Add(1)
	go func() {
		defer r.operator.Done()
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		log, err := readLog(rctx, r.cfg.Brokers, coordination.TopicPartition{Topic: r.logTopic, Partition: 0})
		if err != nil {
			r.logf("operator: reading the log: %v", err)
			return
		}
		latest := map[string]dispatch.Entry{}
		var order []string
		for _, e := range log {
			if e.Kind != dispatch.EntryOutcome {
				continue
			}
			if _, ok := latest[e.CommandID()]; !ok {
				order = append(order, e.CommandID())
			}
			latest[e.CommandID()] = e
		}
		done := 0
		for _, id := range order {
			e := latest[id]
			if e.Outcome.Status != dispatch.StatusInDoubt || done == 4 {
				continue
			}
			r.mu.Lock()
			if r.resolved == nil {
				r.resolved = map[string]bool{}
			}
			seen := r.resolved[id]
			r.resolved[id] = true
			r.mu.Unlock()
			if seen {
				continue
			}
			done++
			action := "cancel"
			if r.rngIntN(2) == 0 {
				action = "redispatch"
			}
			r.resolve(rctx, e.Role, id, action)
		}
	}()
}

// resolve runs `dispatcher resolve` against the members of role in turn
// until one settles the command.
func (r *run) resolve(ctx context.Context, role, id, action string) {
	for _, m := range r.members {
		if m.role != role {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		cmd := exec.CommandContext(cctx, r.cfg.DispatcherBin, "resolve", id, "--action", action, "--url", r.url(m))
		cmd.Env = r.env(nil)
		out, err := cmd.CombinedOutput()
		cancel()
		var exit *exec.ExitError
		if err == nil || (errors.As(err, &exit) && exit.ExitCode() == exitRedispatchFailed) {
			r.logf("operator: resolve %s --action %s via %s: done (%v)", id, action, m.name, err)
			r.count(FaultResolve)
			return
		}
		r.logf("operator: resolve %s --action %s via %s: %v: %.200s", id, action, m.name, err, out)
	}
	r.count(FaultResolveFail)
}

// waitOperator waits for the operator's passes that still run.
func (r *run) waitOperator() { r.operator.Wait() }
