package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// Config describes one chaos run.
type Config struct {
	// Brokers are the bootstrap addresses of the three-broker cluster, on
	// the host's loopback, as the brokers advertise them.
	Brokers []string

	// KafkaScript is scripts/services/10-kafka.sh, which kills and restarts
	// one broker (kill-broker N, restart-broker N).
	KafkaScript string

	// DispatcherBin is the path of the cmd/dispatcher binary; each member
	// is `dispatcher run -c <member>.yaml`.
	DispatcherBin string

	// MQTT is the URL of Mosquitto on the host's loopback, a listener
	// without authentication (tcp://127.0.0.1:port).
	MQTT string

	// Dir receives the configuration files, the device records, the
	// accepted submissions, the event log, the members' output and the
	// report.
	Dir string

	// Duration is how long faults are injected and commands submitted.
	Duration time.Duration

	// Settle bounds the wait, after the faults stop, for every accepted
	// command to reach an outcome. It must outlast CommandTimeout: a
	// command that no leader could dispatch by its deadline gets its
	// outcome, expired, without a device call, so a settle period beyond
	// the deadline of the last command submitted leaves no command without
	// an outcome for lack of time, only for a fault of the dispatcher.
	Settle time.Duration

	// CommandTimeout is each command's time to live, from its submission
	// to its deadline; 0 means DefaultCommandTimeout.
	CommandTimeout time.Duration

	// Seed seeds every random choice; the run prints it.
	Seed uint64

	// Members is the number of members of the first role (3), and
	// SecondRole that of a second role (2; 0 for none) whose members write
	// to the same log partition and read the same requests partition.
	Members, SecondRole int

	// Rate is the number of commands submitted per second, over both
	// roles, half through the requests topic and half through the members'
	// HTTP API.
	Rate float64

	// Lease is the lease duration the members use; faults are timed
	// against it, and the safety margin is 3/8 of it.
	Lease time.Duration

	// Reader reads the run's state topic, so that half the member faults
	// hit a leader; nil picks members at random.
	Reader coordination.StateReader

	// Out receives the progress lines; nil discards them.
	Out io.Writer
}

// DefaultCommandTimeout is the commands' time to live when
// Config.CommandTimeout is 0. It keeps the backlog that a stretch of faults
// leaves within what a leader drains in a settle period of two minutes.
const DefaultCommandTimeout = time.Minute

// ErrSettleWithinTimeout refuses a Config whose settle period does not
// outlast its command timeout.
var ErrSettleWithinTimeout = errors.New("chaos: Config.Settle must outlast Config.CommandTimeout, the deadline of the last command submitted")

// Result is a finished run: the checker's report and what the run did.
type Result struct {
	Report

	// Seed, Duration and Faults describe the run.
	Seed     uint64         `json:"seed"`
	Duration string         `json:"duration"`
	Faults   map[string]int `json:"faults"`

	// Roles names the run's roles and their members; every member of every
	// role writes to the same log partition.
	Roles map[string][]string `json:"roles"`

	// Submitted counts the submissions by path ("http", "topic") and
	// outcome ("accepted", "unconfirmed": a produce that failed, or a
	// submission whose outcome no member reported within 30 s).
	Submitted map[string]int `json:"submitted"`

	// Offsets are the members' clock offsets at their first start, Skew the skew assumption of
	// the freshness check, and Margin the members' safety margin.
	Offsets map[string]string `json:"clock_offsets"`
	Skew    string            `json:"skew_assumption"`
	Margin  string            `json:"safety_margin"`

	// Unsettled counts the accepted commands without an outcome when the
	// settle period ended (each is also a LostCommand violation).
	Unsettled int `json:"unsettled"`
}

// The freshness check's allowances: the delivery of a call from a member
// that is neither stalled nor cut from its devices (Mosquitto and two
// forwarders on a loaded host), and the fraction of the margin that the
// members' clock offsets stay within unless they are skewed beyond it.
const (
	transitAllowance = time.Second
	skewShare        = 2 // the skew assumption is margin/skewShare
)

// Run performs a chaos run and checks it. It returns an error when the run
// itself could not be carried out; broken guarantees are in the Result.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Members < 2 || cfg.SecondRole == 1 || cfg.DispatcherBin == "" || cfg.KafkaScript == "" || cfg.MQTT == "" || len(cfg.Brokers) == 0 || cfg.Rate <= 0 || cfg.Lease <= 0 {
		return Result{}, errors.New("chaos: Config needs two Members or more, SecondRole 0 or two or more, DispatcherBin, KafkaScript, MQTT, Brokers, Rate and Lease")
	}
	if cfg.CommandTimeout == 0 {
		cfg.CommandTimeout = DefaultCommandTimeout
	}
	if cfg.CommandTimeout < 0 || cfg.Settle <= cfg.CommandTimeout {
		return Result{}, fmt.Errorf("%w: settle %v, command timeout %v", ErrSettleWithinTimeout, cfg.Settle, cfg.CommandTimeout)
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return Result{}, err
	}
	r := &run{cfg: cfg, rng: mrand.New(mrand.NewPCG(cfg.Seed, cfg.Seed^0x63686173)), faults: map[string]int{}, submitted: map[string]int{},
		margin: cfg.Lease * 3 / 8}
	r.skew = r.margin / skewShare
	r.owed = owedFaults(r.rng)
	events, err := os.Create(filepath.Join(cfg.Dir, "events.log"))
	if err != nil {
		return Result{}, err
	}
	defer events.Close()
	r.events = io.MultiWriter(events, cfg.Out)

	var idb [2]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return Result{}, err
	}
	r.id = hex.EncodeToString(idb[:])
	name := fmt.Sprintf("chaos-%d-%s", time.Now().Unix(), r.id)
	r.logTopic, r.reqTopic, r.stateTopic = name+"-log", name+"-requests", name+"-state"
	r.prefix = "kd/" + name
	r.logf("seed %d, run %s, %d+%d members, %s of faults, %.0f commands/s with a timeout of %s, lease %s, margin %s, skew assumption %s",
		cfg.Seed, name, cfg.Members, cfg.SecondRole, cfg.Duration, cfg.Rate, cfg.CommandTimeout, cfg.Lease, r.margin, r.skew)
	for _, topic := range []string{r.logTopic, r.reqTopic, r.stateTopic} {
		tctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := createTopic(tctx, cfg.Brokers, topic)
		cancel()
		if err != nil {
			return Result{}, err
		}
	}
	if err := r.secrets(); err != nil {
		return Result{}, err
	}

	// The members, their roles and clock offsets.
	roleA := name + "-a"
	r.roles = []string{roleA}
	for i := range cfg.Members {
		r.members = append(r.members, &member{name: fmt.Sprintf("a%d", i+1), role: roleA})
	}
	if cfg.SecondRole > 0 {
		roleB := name + "-b"
		r.roles = append(r.roles, roleB)
		for i := range cfg.SecondRole {
			r.members = append(r.members, &member{name: fmt.Sprintf("b%d", i+1), role: roleB})
		}
	}
	r.skewMembers()

	var names []string
	for _, m := range r.members {
		names = append(names, m.name)
	}
	r.lab, err = newNetLab(r.id, 200+int(cfg.Seed%50), names)
	if err != nil {
		return Result{}, err
	}
	defer func() {
		if err := r.lab.Close(); err != nil {
			r.logf("removing the network: %v", err)
		}
	}()
	if err := r.lab.forwardBrokers(cfg.Brokers); err != nil {
		return Result{}, err
	}
	mqttAddr := strings.TrimPrefix(cfg.MQTT, "tcp://")
	if r.mqttPort, err = r.lab.forwardDevices(mqttAddr); err != nil {
		return Result{}, err
	}
	devices, err := StartMQTTDevices(MQTTDevicesConfig{Broker: cfg.MQTT, Prefix: r.prefix, Key: r.deviceKey, KeyID: "k1", Dir: cfg.Dir,
		Seed: cfg.Seed, SlowShare: 0.25, StuckShare: 0.01, StuckDelay: 4 * time.Second})
	if err != nil {
		return Result{}, err
	}
	defer devices.Close()

	for _, m := range r.members {
		if err := r.writeConfig(m); err != nil {
			return Result{}, err
		}
	}
	if err := r.validate(ctx); err != nil {
		return Result{}, err
	}
	for _, m := range r.members {
		if err := r.start(m); err != nil {
			return Result{}, err
		}
	}
	defer r.stopMembers()

	accepted, stopClient, err := r.client(ctx)
	if err != nil {
		return Result{}, err
	}
	r.inject(ctx)
	r.heal()
	ids := stopClient()
	r.waitOperator()
	r.logf("faults stopped; %d commands accepted; settling", len(ids))

	unsettled, err := r.settle(ctx, ids)
	if err != nil {
		return Result{}, err
	}
	r.stopMembers()
	_ = accepted.Close()
	for k, v := range devices.Counts() {
		r.faults[k] += v
	}
	if err := devices.Close(); err != nil {
		return Result{}, err
	}

	tp := coordination.TopicPartition{Topic: r.logTopic, Partition: 0}
	log, err := readLog(ctx, cfg.Brokers, tp)
	if err != nil {
		return Result{}, err
	}
	leases, err := readLeases(ctx, cfg.Brokers, coordination.TopicPartition{Topic: r.stateTopic, Partition: 0})
	if err != nil {
		return Result{}, err
	}
	fenced, err := ReadCalls(cfg.Dir, FencedDevice)
	if err != nil {
		return Result{}, err
	}
	plain, err := ReadCalls(cfg.Dir, PlainDevice)
	if err != nil {
		return Result{}, err
	}
	offsets := map[string]time.Duration{}
	shown := map[string]string{}
	roles := map[string][]string{}
	for _, m := range r.members {
		roles[m.role] = append(roles[m.role], m.name)
	}
	// Offsets holds each member's first offset; the spans of r.clocks
	// hold those of its restarts.
	r.mu.Lock()
	for _, c := range r.clocks {
		if _, ok := offsets[c.Member]; !ok {
			offsets[c.Member] = c.Offset
			shown[c.Member] = c.Offset.String()
		}
	}
	r.mu.Unlock()
	res := Result{
		Report: Check(Input{Log: log, Fenced: fenced, Plain: plain, Accepted: ids,
			Leases: leases, Margin: r.margin, Skew: r.skew, Transit: transitAllowance, Offsets: offsets, Clocks: r.clocks, Stalls: r.stalls}),
		Seed:      cfg.Seed,
		Duration:  cfg.Duration.String(),
		Faults:    r.faults,
		Submitted: r.submitted,
		Roles:     roles,
		Offsets:   shown,
		Skew:      r.skew.String(),
		Margin:    r.margin.String(),
		Unsettled: unsettled,
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(filepath.Join(cfg.Dir, "report.json"), append(b, '\n'), 0o644); err != nil {
		return res, err
	}
	return res, nil
}

// member is one member process slot.
type member struct {
	name    string
	role    string
	offset  time.Duration // clock offset, KRABKA_CLOCK_OFFSET
	config  string        // path of its configuration file
	cmd     *exec.Cmd
	exited  chan struct{}
	paused  bool
	down    bool // killed, awaiting restart
	restart time.Time
	resume  time.Time
	// The links that are cut, and when they heal; stallFrom is when the
	// member's device link went down or the member was paused.
	kafkaCut, devicesCut bool
	kafkaHeal, devHeal   time.Time
	stallFrom            time.Time
}

func (m *member) healthy() bool {
	return m.cmd != nil && !m.paused && !m.down && !m.kafkaCut && !m.devicesCut
}

// run is the state of one Run.
type run struct {
	cfg        Config
	rng        *mrand.Rand
	events     io.Writer
	id         string
	roles      []string
	logTopic   string
	reqTopic   string
	stateTopic string
	prefix     string // MQTT topic prefix
	mqttPort   string
	httpToken  string
	deviceKey  string
	margin     time.Duration
	skew       time.Duration
	members    []*member
	lab        *netLab
	operator   sync.WaitGroup

	mu        sync.Mutex
	faults    map[string]int
	submitted map[string]int
	stalls    []Window
	clocks    []ClockSpan // guarded by mu
	resolved  map[string]bool
	owed      []string // member faults the run injects before drawing at random
}

func (r *run) logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.events, "%s chaos: %s\n", time.Now().UTC().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func (r *run) count(fault string) {
	r.mu.Lock()
	r.faults[fault]++
	r.mu.Unlock()
}

// stall records that member stopped reaching its devices in time from
// from to to.
func (r *run) stall(member string, from, to time.Time) {
	r.mu.Lock()
	r.stalls = append(r.stalls, Window{Member: member, From: from, To: to})
	r.mu.Unlock()
}

// secrets makes the run's HTTP token and device key.
func (r *run) secrets() error {
	var tok, key [32]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return err
	}
	if _, err := rand.Read(key[:]); err != nil {
		return err
	}
	r.httpToken, r.deviceKey = hex.EncodeToString(tok[:]), hex.EncodeToString(key[:])
	return nil
}

// skewMembers gives the members their clock offsets for their first start
// (reskew draws new ones at each restart): in each role one
// member within the skew assumption, and one beyond the safety margin (the
// last member of the first role runs behind, which stretches its freshness
// past what the others read from its leases; the first member of the second
// role runs ahead, which makes it challenge a leader that is still fresh).
func (r *run) skewMembers() {
	var a, b []*member
	for _, m := range r.members {
		if m.role == r.roles[0] {
			a = append(a, m)
		} else {
			b = append(b, m)
		}
	}
	a[1].offset = r.skew / 2
	a[len(a)-1].offset = -(r.margin + time.Second)
	if len(b) > 0 {
		b[0].offset = r.margin + time.Second
	}
}

// reskew draws a new clock offset for a member about to start again, as
// a host whose clock was set wrong, or set right, between two runs of the
// process: none, one within the skew assumption, or one beyond the safety
// margin, ahead or behind. start counts each skewed start as a fault.
func (r *run) reskew(m *member) {
	sign := time.Duration(1)
	if r.float() < 0.5 {
		sign = -1
	}
	switch q := r.float(); {
	case q < 0.4:
		m.offset = 0
	case q < 0.7:
		m.offset = sign * time.Duration(float64(r.skew)*(0.2+0.8*r.float()))
	default:
		m.offset = sign * (r.margin + time.Duration(float64(time.Second)*(0.5+r.float())))
	}
	r.logf("%s starts with its clock offset by %s", m.name, m.offset.Round(time.Millisecond))
}

// The environment variables the members read their secrets from.
const (
	envHTTPToken = "KD_CHAOS_HTTP_TOKEN"
	envDeviceKey = "KD_CHAOS_DEVICE_KEY"
)

// url is the member's HTTP API as the harness reaches it.
func (r *run) url(m *member) string {
	return "http://" + r.lab.node(m.name).dPeerIP() + ":8080"
}

// writeConfig writes the member's configuration file, as an operator
// writes one.
func (r *run) writeConfig(m *member) error {
	n := r.lab.node(m.name)
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# Member %s of a chaos run. Its network namespace reaches the brokers at\n", m.name)
	w("# the addresses they advertise, and Mosquitto at the host end of its device link.\n")
	w("role: %s\nmember: %s\n\n", m.role, m.name)
	w("kafka:\n  brokers: [%s]\n  dial_timeout: 5s\n\n", strings.Join(r.cfg.Brokers, ", "))
	w("lease:\n  duration: %s\n  renew_interval: %s\n  challenge_stagger: %s\n  poll_interval: %s\n\n",
		r.cfg.Lease, r.cfg.Lease/4, r.cfg.Lease/4, r.cfg.Lease/16)
	w("topics:\n  coordination: %s\n  coordination_partitions: 1\n  log: %s\n  requests: %s\n  partitions: 1\n\n",
		r.stateTopic, r.logTopic, r.reqTopic)
	w("http:\n  listen: %s:8080\n  token_env: %s\n\n", n.dPeerIP(), envHTTPToken)
	w("members:\n")
	for _, o := range r.members {
		if o.role == m.role {
			w("  %s: %s\n", o.name, r.url(o))
		}
	}
	w("\ndispatch:\n  safety_margin: %s\n  shutdown_timeout: 5s\n  health_interval: 2s\n  health_timeout: 1s\n\n", r.margin)
	w("devices:\n")
	for _, d := range []string{FencedDevice, PlainDevice} {
		w("  - name: %s\n    type: mqtt\n    mqtt:\n", d)
		w("      brokers: [tcp://%s:%s]\n", n.dHostIP(), r.mqttPort)
		w("      client_id: %s-%s-%s\n", strings.ReplaceAll(r.prefix, "/", "-"), m.name, d)
		w("      qos: 1\n")
		w("      topic: %s/%s/{role}/{device}/cmd\n", r.prefix, m.name)
		w("      reply_topic: %s/%s/{role}/{device}/reply\n", r.prefix, m.name)
		w("      reply_timeout: 3s\n      connect_timeout: 2s\n      publish_timeout: 3s\n      keep_alive: 5s\n")
		w("      reconnect_min_interval: 100ms\n      reconnect_max_interval: 1s\n")
		w("      redispatch_safe: true   # the devices deduplicate by command ID\n")
		w("      keys:\n        - {id: k1, key_env: %s}\n", envDeviceKey)
	}
	m.config = filepath.Join(r.cfg.Dir, m.name+".yaml")
	return os.WriteFile(m.config, []byte(b.String()), 0o644)
}

// env is the environment of the dispatcher processes.
func (r *run) env(m *member) []string {
	env := append(os.Environ(), envHTTPToken+"="+r.httpToken, envDeviceKey+"="+r.deviceKey, "DISPATCHER_TOKEN="+r.httpToken)
	if m != nil && m.offset != 0 {
		env = append(env, "KRABKA_CLOCK_OFFSET="+m.offset.String())
	}
	return env
}

// validate checks every configuration file with `dispatcher validate`.
func (r *run) validate(ctx context.Context) error {
	for _, m := range r.members {
		vctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		cmd := exec.CommandContext(vctx, r.cfg.DispatcherBin, "validate", "-c", m.config)
		cmd.Env = r.env(m)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			return fmt.Errorf("dispatcher validate -c %s: %w: %s", m.config, err, out)
		}
	}
	return nil
}

// start starts a member process in its namespace; its output goes to
// <dir>/<member>.log.
func (r *run) start(m *member) error {
	out, err := os.OpenFile(filepath.Join(r.cfg.Dir, m.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	started := time.Now()
	// ip netns exec runs the binary in place of itself: the process is
	// the dispatcher, and signals reach it.
	cmd := exec.Command("ip", "netns", "exec", r.lab.node(m.name).ns, r.cfg.DispatcherBin, "run", "-c", m.config)
	cmd.Env = r.env(m)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("start %s: %w", m.name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		out.Close()
		close(exited)
	}()
	m.cmd, m.exited, m.paused, m.down = cmd, exited, false, false
	r.mu.Lock()
	r.clocks = append(r.clocks, ClockSpan{Member: m.name, From: started, Offset: m.offset})
	r.mu.Unlock()
	switch {
	case m.offset == 0:
	case m.offset <= r.skew && m.offset >= -r.skew:
		r.count(FaultSkewInside)
	default:
		r.count(FaultSkewBeyond)
	}
	return nil
}

// stopMembers resumes and terminates every member, and kills the ones that
// do not exit in time. It is idempotent.
func (r *run) stopMembers() {
	for _, m := range r.members {
		if m == nil || m.cmd == nil {
			continue
		}
		_ = m.cmd.Process.Signal(syscall.SIGCONT)
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, m := range r.members {
		if m == nil || m.cmd == nil {
			continue
		}
		select {
		case <-m.exited:
		case <-time.After(15 * time.Second):
			_ = m.cmd.Process.Signal(syscall.SIGKILL)
			<-m.exited
		}
		m.cmd = nil
	}
}

// settle waits until every accepted command has an outcome in the log, or
// the settle period ends, and returns how many did not.
func (r *run) settle(ctx context.Context, ids []string) (int, error) {
	start := time.Now()
	deadline := start.Add(r.cfg.Settle)
	tp := coordination.TopicPartition{Topic: r.logTopic, Partition: 0}
	for {
		log, err := readLog(ctx, r.cfg.Brokers, tp)
		missing := len(ids)
		if err == nil {
			outcome := map[string]bool{}
			for _, e := range log {
				if e.Kind == dispatch.EntryOutcome {
					outcome[e.CommandID()] = true
				}
			}
			missing = 0
			for _, id := range ids {
				if !outcome[id] {
					missing++
				}
			}
			if missing == 0 {
				r.logf("every accepted command has an outcome, %s into the settle period", time.Since(start).Round(time.Second))
				return 0, nil
			}
		}
		if time.Now().After(deadline) {
			r.logf("settle period over: %d accepted commands without an outcome (last read error: %v)", missing, err)
			return missing, nil
		}
		select {
		case <-ctx.Done():
			return missing, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// readLog reads the log with dispatch's own reader, the one an auditor
// uses. When that reader refuses a record that does not decode, it reads
// again with LogReader, which keeps such a record as an entry of kind zero,
// so that the checker reports it with its offset instead of the run
// failing.
func readLog(ctx context.Context, brokers []string, tp coordination.TopicPartition) ([]dispatch.Entry, error) {
	reader, err := dispatch.NewKafkaLogReader(brokers)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	log, err := reader.ReadLog(rctx, tp)
	var malformed *dispatch.MalformedRecordError
	if errors.As(err, &malformed) {
		return LogReader{Brokers: brokers}.ReadLog(rctx, tp)
	}
	return log, err
}
