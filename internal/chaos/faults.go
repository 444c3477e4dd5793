package chaos

import (
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// The faults a run injects, as counted in Result.Faults.
const (
	FaultKill       = "sigkill-member"
	FaultPause      = "sigstop-member"
	FaultRestart    = "restart-member"
	FaultBroker     = "kill-broker"
	FaultKillLeader = "of-them-the-leader"
)

// brokerState tracks the one broker that may be down.
type brokerState struct {
	down    int // 0 when every broker runs
	restart time.Time
	busy    chan struct{} // closed when the running restart finished
}

// inject injects faults at random until the duration ends. At most one
// broker is down at a time, and a member is killed or paused only while
// another one is healthy.
func (r *run) inject(ctx context.Context) {
	end := time.Now().Add(r.cfg.Duration)
	reader := r.cfg.Reader
	role, _ := coordination.NewRole(r.role)
	var broker brokerState
	next := time.Now().Add(r.gap())
	for time.Now().Before(end) && ctx.Err() == nil {
		now := time.Now()
		r.housekeep(now, &broker)
		if now.Before(next) {
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
			}
			continue
		}
		next = now.Add(r.gap())
		switch p := r.rng.Float64(); {
		case p < 0.25 && broker.down == 0:
			n := 1 + r.rng.IntN(3)
			r.logf("kill broker %d", n)
			if err := exec.Command("bash", r.cfg.KafkaScript, "kill-broker", fmt.Sprint(n)).Run(); err != nil {
				r.logf("kill broker %d failed: %v", n, err)
				continue
			}
			r.count(FaultBroker)
			broker.down = n
			broker.restart = now.Add(time.Duration(5+r.rng.IntN(10)) * time.Second)
		default:
			m := r.target(ctx, reader, role)
			if m == nil {
				continue
			}
			switch q := r.rng.Float64(); {
			case q < 0.4:
				r.logf("SIGKILL %s", m.name)
				_ = m.cmd.Process.Signal(syscall.SIGKILL)
				<-m.exited
				m.down = true
				m.restart = now.Add(time.Duration(500+r.rng.IntN(2500)) * time.Millisecond)
				r.count(FaultKill)
			case q < 0.8:
				// Long enough, often, for a successor to take over, so the
				// paused member wakes up deposed: the zombie window.
				pause := time.Duration(float64(r.cfg.Lease) * (0.5 + 2*r.rng.Float64()))
				r.logf("SIGSTOP %s for %s", m.name, pause.Round(time.Millisecond))
				_ = m.cmd.Process.Signal(syscall.SIGSTOP)
				m.paused = true
				m.resume = now.Add(pause)
				r.count(FaultPause)
			default:
				r.logf("restart %s (SIGTERM)", m.name)
				_ = m.cmd.Process.Signal(syscall.SIGTERM)
				select {
				case <-m.exited:
				case <-time.After(15 * time.Second):
					_ = m.cmd.Process.Signal(syscall.SIGKILL)
					<-m.exited
				}
				if err := r.start(m); err != nil {
					r.logf("restart %s failed: %v", m.name, err)
					m.down, m.restart = true, now.Add(time.Second)
				}
				r.count(FaultRestart)
			}
		}
	}
	r.waitBroker(&broker)
}

// gap is the random time between two faults.
func (r *run) gap() time.Duration {
	return time.Duration(1500+r.rng.IntN(3500)) * time.Millisecond
}

// target picks a healthy member to hurt, the leader half the time, and nil
// when hurting one would leave no healthy member.
func (r *run) target(ctx context.Context, reader coordination.StateReader, role coordination.Role) *member {
	var healthy []*member
	for _, m := range r.members {
		if m.healthy() {
			healthy = append(healthy, m)
		}
	}
	if len(healthy) < 2 {
		return nil
	}
	if reader != nil && r.rng.IntN(2) == 0 {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		state, err := coordination.DescribeRoleState(rctx, reader, role)
		cancel()
		if err == nil {
			if holder, ok := state.Holder(); ok {
				for _, m := range healthy {
					if m.name == holder.String() {
						r.count(FaultKillLeader)
						return m
					}
				}
			}
		}
	}
	return healthy[r.rng.IntN(len(healthy))]
}

// housekeep resumes paused members, restarts killed ones, and restarts the
// broker that is down, each when its time has come.
func (r *run) housekeep(now time.Time, broker *brokerState) {
	for _, m := range r.members {
		if m.paused && !now.Before(m.resume) {
			r.logf("SIGCONT %s", m.name)
			_ = m.cmd.Process.Signal(syscall.SIGCONT)
			m.paused = false
		}
		if m.down && !now.Before(m.restart) {
			r.logf("start %s", m.name)
			if err := r.start(m); err != nil {
				r.logf("start %s failed: %v", m.name, err)
				m.restart = now.Add(time.Second)
			}
		}
	}
	if broker.down != 0 && broker.busy == nil && !now.Before(broker.restart) {
		n := broker.down
		busy := make(chan struct{})
		broker.busy = busy
		r.logf("restart broker %d", n)
		go func() {
			defer close(busy)
			if out, err := exec.Command("bash", r.cfg.KafkaScript, "restart-broker", fmt.Sprint(n)).CombinedOutput(); err != nil {
				r.logf("restart broker %d failed: %v: %s", n, err, out)
			} else {
				r.logf("broker %d is back", n)
			}
		}()
	}
	if broker.busy != nil {
		select {
		case <-broker.busy:
			broker.down, broker.busy = 0, nil
		default:
		}
	}
}

// waitBroker brings the broker that is down back, and waits for it.
func (r *run) waitBroker(broker *brokerState) {
	for broker.down != 0 {
		broker.restart = time.Time{}
		r.housekeep(time.Now(), broker)
		if broker.busy != nil {
			<-broker.busy
			broker.down, broker.busy = 0, nil
		}
	}
}

// heal resumes every paused member, starts every killed one, and waits until
// every broker runs, so the settle period runs on a whole cluster.
func (r *run) heal() {
	for _, m := range r.members {
		if m.paused {
			r.logf("SIGCONT %s", m.name)
			_ = m.cmd.Process.Signal(syscall.SIGCONT)
			m.paused = false
		}
		if m.down {
			r.logf("start %s", m.name)
			if err := r.start(m); err != nil {
				r.logf("start %s failed: %v", m.name, err)
			}
		}
	}
}
