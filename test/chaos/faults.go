package chaos

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// The faults a run injects, as counted in Result.Faults.
const (
	FaultKill       = "sigkill-member"
	FaultPause      = "sigstop-member"
	FaultRestart    = "restart-member-same-id"
	FaultBroker     = "kill-broker"
	FaultKillLeader = "of-them-the-leader"

	FaultCutKafka    = "cut-member-from-kafka"
	FaultCutDevices  = "cut-member-from-devices"
	FaultCutBroker   = "cut-broker-from-brokers"
	FaultSlowDevice  = "slow-device-call"
	FaultStuckDevice = "device-reply-past-timeout"
	FaultResolve     = "operator-resolve"
	FaultResolveFail = "operator-resolve-failed"
	FaultSkewInside  = "member-skewed-inside-assumption"
	FaultSkewBeyond  = "member-skewed-beyond-margin"
)

// brokerState tracks the one broker that may be down or cut.
type brokerState struct {
	down    int // 0 when every broker runs
	restart time.Time
	busy    chan struct{} // closed when the running restart finished
	cut     int           // 0 when no broker is cut from the others
	heal    time.Time
}

func (r *run) float() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rng.Float64()
}

// inject injects faults at random until the duration ends. At most one
// broker is down or cut at a time, and a member is hurt only while another
// member of its role is healthy. Every 15 s an operator resolves the
// commands in doubt.
func (r *run) inject(ctx context.Context) {
	end := time.Now().Add(r.cfg.Duration)
	var broker brokerState
	next := time.Now().Add(r.gap())
	nextOperator := time.Now().Add(15 * time.Second)
	for time.Now().Before(end) && ctx.Err() == nil {
		now := time.Now()
		r.housekeep(now, &broker)
		if !now.Before(nextOperator) {
			nextOperator = now.Add(15 * time.Second)
			r.operate(ctx)
		}
		if now.Before(next) {
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
			}
			continue
		}
		next = now.Add(r.gap())
		switch p := r.float(); {
		case p < 0.10 && broker.down == 0 && broker.cut == 0:
			n := 1 + r.rngIntN(3)
			r.logf("kill broker %d", n)
			if err := exec.Command("bash", r.cfg.KafkaScript, "kill-broker", fmt.Sprint(n)).Run(); err != nil {
				r.logf("kill broker %d failed: %v", n, err)
				continue
			}
			r.count(FaultBroker)
			broker.down = n
			broker.restart = now.Add(time.Duration(5+r.rngIntN(10)) * time.Second)
		case p < 0.20 && broker.down == 0 && broker.cut == 0:
			n := 1 + r.rngIntN(len(r.cfg.Brokers))
			ports, err := brokerPorts(r.cfg.Brokers[n-1])
			if err != nil {
				r.logf("cut broker %d: %v", n, err)
				continue
			}
			r.logf("cut broker %d (ports %v) from the other brokers", n, ports)
			if err := r.lab.cutBroker(n, ports...); err != nil {
				r.logf("cut broker %d failed: %v", n, err)
				continue
			}
			r.count(FaultCutBroker)
			broker.cut = n
			broker.heal = now.Add(time.Duration(5+r.rngIntN(10)) * time.Second)
		default:
			m := r.target(ctx)
			if m == nil {
				continue
			}
			r.hurt(m, now)
		}
	}
	r.waitBroker(&broker)
}

// brokerPorts returns the listener port of a broker and its controller
// port, which the cluster's scripts put 100 above it.
func brokerPorts(addr string) ([]int, error) {
	i := len(addr) - 1
	for i >= 0 && addr[i] != ':' {
		i--
	}
	p, err := strconv.Atoi(addr[i+1:])
	if err != nil {
		return nil, fmt.Errorf("broker address %q: %w", addr, err)
	}
	return []int{p, p + 100}, nil
}

// RequiredMemberFaults returns the member faults every run injects at least
// once: a run owes each of them first, in an order its seed draws, and draws
// at random after that. Otherwise a short run misses one by chance (a
// SIGKILL, drawn with probability 0.2, in about one run of 150).
func RequiredMemberFaults() []string {
	return []string{FaultKill, FaultPause, FaultCutKafka, FaultCutDevices}
}

// owedFaults returns the required member faults in an order rng draws.
func owedFaults(rng *mrand.Rand) []string {
	owed := RequiredMemberFaults()
	rng.Shuffle(len(owed), func(i, j int) { owed[i], owed[j] = owed[j], owed[i] })
	return owed
}

// memberFault picks the kind of the next member fault: the next one the run
// still owes, or else one drawn at random.
func (r *run) memberFault() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.owed) > 0 {
		kind := r.owed[0]
		r.owed = r.owed[1:]
		return kind
	}
	switch q := r.rng.Float64(); {
	case q < 0.20:
		return FaultKill
	case q < 0.40:
		return FaultPause
	case q < 0.50:
		return FaultRestart
	case q < 0.80:
		return FaultCutKafka
	default:
		return FaultCutDevices
	}
}

// hurt injects one member fault.
func (r *run) hurt(m *member, now time.Time) {
	lease := r.cfg.Lease
	switch r.memberFault() {
	case FaultKill:
		r.logf("SIGKILL %s", m.name)
		_ = m.cmd.Process.Signal(syscall.SIGKILL)
		<-m.exited
		m.down = true
		m.restart = now.Add(time.Duration(500+r.rngIntN(2500)) * time.Millisecond)
		r.count(FaultKill)
	case FaultPause:
		// Long enough, often, for a successor to take over, so the
		// paused member wakes up deposed: the zombie window.
		pause := time.Duration(float64(lease) * (0.5 + 2*r.float()))
		r.logf("SIGSTOP %s for %s", m.name, pause.Round(time.Millisecond))
		_ = m.cmd.Process.Signal(syscall.SIGSTOP)
		m.paused, m.resume, m.stallFrom = true, now.Add(pause), now
		r.count(FaultPause)
	case FaultRestart:
		r.logf("restart %s under the same member ID (SIGTERM)", m.name)
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.exited:
		case <-time.After(15 * time.Second):
			_ = m.cmd.Process.Signal(syscall.SIGKILL)
			<-m.exited
		}
		r.reskew(m)
		if err := r.start(m); err != nil {
			r.logf("restart %s failed: %v", m.name, err)
			m.down, m.restart = true, now.Add(time.Second)
		}
		r.count(FaultRestart)
	case FaultCutKafka:
		// The member keeps its devices and loses the cluster: its
		// renewals fail, and it must stop driving devices when its
		// freshness ends, before a successor's lease begins.
		cut := time.Duration(float64(lease) * (0.5 + 2.5*r.float()))
		r.logf("cut %s from Kafka for %s", m.name, cut.Round(time.Millisecond))
		if err := r.lab.setLink(m.name, true, false); err != nil {
			r.logf("cut %s from Kafka failed: %v", m.name, err)
			return
		}
		m.kafkaCut, m.kafkaHeal = true, now.Add(cut)
		r.count(FaultCutKafka)
	default:
		cut := time.Duration(float64(lease) * (0.25 + 1.5*r.float()))
		r.logf("cut %s from its devices for %s", m.name, cut.Round(time.Millisecond))
		if err := r.lab.setLink(m.name, false, false); err != nil {
			r.logf("cut %s from its devices failed: %v", m.name, err)
			return
		}
		m.devicesCut, m.devHeal, m.stallFrom = true, now.Add(cut), now
		r.count(FaultCutDevices)
	}
}

// gap is the random time between two faults.
func (r *run) gap() time.Duration {
	return time.Duration(1500+r.rngIntN(3500)) * time.Millisecond
}

// target picks a member to hurt, the leader of its role half the time, and
// nil when hurting one would leave its role without a healthy member.
func (r *run) target(ctx context.Context) *member {
	role := r.roles[r.rngIntN(len(r.roles))]
	var healthy []*member
	for _, m := range r.members {
		if m.role == role && m.healthy() {
			healthy = append(healthy, m)
		}
	}
	if len(healthy) < 2 {
		return nil
	}
	if r.cfg.Reader != nil && r.rngIntN(2) == 0 {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		rl, err := coordination.NewRole(role)
		if err == nil {
			state, err := coordination.DescribeRoleState(rctx, r.cfg.Reader, rl,
				coordination.WithTopic(r.stateTopic), coordination.WithPartitions(1))
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
	}
	return healthy[r.rngIntN(len(healthy))]
}

// housekeep resumes paused members, heals cut links, restarts killed
// members, and restarts or heals the broker that is down or cut, each when
// its time has come.
func (r *run) housekeep(now time.Time, broker *brokerState) {
	for _, m := range r.members {
		if m.paused && !now.Before(m.resume) {
			r.logf("SIGCONT %s", m.name)
			_ = m.cmd.Process.Signal(syscall.SIGCONT)
			m.paused = false
			r.stall(m.name, m.stallFrom, now)
		}
		if m.kafkaCut && !now.Before(m.kafkaHeal) {
			r.logf("heal %s's Kafka link", m.name)
			if err := r.lab.setLink(m.name, true, true); err != nil {
				r.logf("heal %s's Kafka link failed: %v", m.name, err)
			} else {
				m.kafkaCut = false
			}
		}
		if m.devicesCut && !now.Before(m.devHeal) {
			r.logf("heal %s's device link", m.name)
			if err := r.lab.setLink(m.name, false, true); err != nil {
				r.logf("heal %s's device link failed: %v", m.name, err)
			} else {
				m.devicesCut = false
				r.stall(m.name, m.stallFrom, now)
			}
		}
		if m.down && !now.Before(m.restart) {
			r.logf("start %s", m.name)
			r.reskew(m)
			if err := r.start(m); err != nil {
				r.logf("start %s failed: %v", m.name, err)
				m.restart = now.Add(time.Second)
			}
		}
	}
	if broker.cut != 0 && !now.Before(broker.heal) {
		r.logf("heal broker %d", broker.cut)
		if err := r.lab.healBrokers(); err != nil {
			r.logf("heal broker %d failed: %v", broker.cut, err)
		} else {
			broker.cut = 0
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

// waitBroker heals the broker that is cut, and brings the broker that is
// down back and waits for it.
func (r *run) waitBroker(broker *brokerState) {
	for broker.down != 0 || broker.cut != 0 {
		broker.restart, broker.heal = time.Time{}, time.Time{}
		r.housekeep(time.Now(), broker)
		if broker.busy != nil {
			<-broker.busy
			broker.down, broker.busy = 0, nil
		}
		if broker.cut != 0 {
			time.Sleep(time.Second)
		}
	}
}

// heal resumes every paused member, heals every cut link, and starts every
// killed member, so the settle period runs on a whole cluster.
func (r *run) heal() {
	now := time.Now()
	for _, m := range r.members {
		m.resume, m.kafkaHeal, m.devHeal, m.restart = now, now, now, now
	}
	var none brokerState
	r.housekeep(now, &none)
}
