package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Config describes one chaos run.
type Config struct {
	// Brokers are the bootstrap addresses of the three-broker cluster.
	Brokers []string

	// KafkaScript is scripts/services/10-kafka.sh, which kills and restarts
	// one broker (kill-broker N, restart-broker N).
	KafkaScript string

	// MemberBin is the path of the cmd/chaosmember binary.
	MemberBin string

	// Dir receives the device records, the accepted submissions, the event
	// log, the members' output and the report.
	Dir string

	// Duration is how long faults are injected and commands submitted.
	Duration time.Duration

	// Settle bounds the wait, after the faults stop, for every accepted
	// command to reach an outcome.
	Settle time.Duration

	// Seed seeds every random choice; the run prints it.
	Seed uint64

	// Members is the number of member processes (3).
	Members int

	// Rate is the number of commands submitted per second.
	Rate float64

	// Lease is the lease duration the members use; faults are timed
	// against it.
	Lease time.Duration

	// Reader reads the coordination topic, so that half the member faults
	// hit the leader; nil picks members at random.
	Reader coordination.StateReader

	// Out receives the progress lines; nil discards them.
	Out io.Writer
}

// Result is a finished run: the checker's report and what the run did.
type Result struct {
	Report

	// Seed, Duration and Faults describe the run.
	Seed     uint64         `json:"seed"`
	Duration string         `json:"duration"`
	Faults   map[string]int `json:"faults"`

	// Unsettled counts the accepted commands without an outcome when the
	// settle period ended (each is also a LostCommand violation).
	Unsettled int `json:"unsettled"`
}

// Run performs a chaos run and checks it. It returns an error when the run
// itself could not be carried out; broken guarantees are in the Result.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Members < 1 || cfg.MemberBin == "" || cfg.KafkaScript == "" || len(cfg.Brokers) == 0 || cfg.Rate <= 0 {
		return Result{}, errors.New("chaos: Config needs Members, MemberBin, KafkaScript, Brokers and Rate")
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return Result{}, err
	}
	r := &run{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x63686173)), faults: map[string]int{}}
	events, err := os.Create(filepath.Join(cfg.Dir, "events.log"))
	if err != nil {
		return Result{}, err
	}
	defer events.Close()
	r.events = io.MultiWriter(events, cfg.Out)
	r.logf("seed %d, %d members, %s of faults, %.0f commands/s", cfg.Seed, cfg.Members, cfg.Duration, cfg.Rate)

	name := fmt.Sprintf("chaos-%d-%d", time.Now().Unix(), cfg.Seed%100000)
	r.role, r.logTopic, r.reqTopic = name, name+"-log", name+"-requests"
	for _, topic := range []string{r.logTopic, r.reqTopic} {
		tctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := createTopic(tctx, cfg.Brokers, topic)
		cancel()
		if err != nil {
			return Result{}, err
		}
	}
	devices, err := StartDeviceServer(cfg.Dir)
	if err != nil {
		return Result{}, err
	}
	defer devices.Close()
	r.devicesURL = devices.URL()

	r.members = make([]*member, cfg.Members)
	for i := range r.members {
		r.members[i] = &member{name: fmt.Sprintf("m%d", i+1)}
		if err := r.start(r.members[i]); err != nil {
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
	r.logf("faults stopped; %d commands accepted; settling", len(ids))

	unsettled, err := r.settle(ctx, ids)
	if err != nil {
		return Result{}, err
	}
	r.stopMembers()
	_ = accepted.Close()

	tp := coordination.TopicPartition{Topic: r.logTopic, Partition: 0}
	log, err := readLog(ctx, cfg.Brokers, tp)
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
	res := Result{
		Report:    Check(Input{Log: log, Fenced: fenced, Plain: plain, Accepted: ids}),
		Seed:      cfg.Seed,
		Duration:  cfg.Duration.String(),
		Faults:    r.faults,
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
	cmd     *exec.Cmd
	exited  chan struct{}
	paused  bool
	down    bool // killed, awaiting restart
	restart time.Time
	resume  time.Time
}

func (m *member) healthy() bool { return m.cmd != nil && !m.paused && !m.down }

// run is the state of one Run.
type run struct {
	cfg        Config
	rng        *rand.Rand
	events     io.Writer
	role       string
	logTopic   string
	reqTopic   string
	devicesURL string
	members    []*member

	mu     sync.Mutex
	faults map[string]int
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

// start starts a member process; its output goes to <dir>/<member>.log.
func (r *run) start(m *member) error {
	out, err := os.OpenFile(filepath.Join(r.cfg.Dir, m.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	lease := r.cfg.Lease
	cmd := exec.Command(r.cfg.MemberBin,
		"-brokers", strings.Join(r.cfg.Brokers, ","), "-member", m.name, "-role", r.role,
		"-devices", r.devicesURL, "-log-topic", r.logTopic, "-requests-topic", r.reqTopic,
		"-lease", lease.String(), "-renew", (lease / 4).String(), "-stagger", (lease / 4).String(),
		"-margin", (lease * 3 / 8).String(), "-poll", (lease / 16).String())
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

// client submits commands to the requests topic at the configured rate until
// the returned stop function is called; stop returns the IDs whose produce
// the cluster acknowledged (acks=all), which it also writes to accepted.txt.
func (r *run) client(ctx context.Context) (io.Closer, func() []string, error) {
	f, err := os.Create(filepath.Join(r.cfg.Dir, "accepted.txt"))
	if err != nil {
		return nil, nil, err
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(r.cfg.Brokers...),
		kgo.DefaultProduceTopic(r.reqTopic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(20*time.Second),
		kgo.RequestTimeoutOverhead(DefaultRequestTimeout),
	)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	var (
		mu       sync.Mutex
		accepted []string
		inflight sync.WaitGroup
	)
	stopc := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Duration(float64(time.Second) / r.cfg.Rate))
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-stopc:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			now := time.Now()
			device := PlainDevice
			if n%2 == 0 {
				device = FencedDevice
			}
			cmd := dispatch.Command{
				ID: fmt.Sprintf("cmd-%06d", n), Role: r.role, Device: device, Action: "set",
				Payload: []byte(fmt.Sprintf("value-%d", n)), SubmittedAt: now, Deadline: now.Add(5 * time.Minute),
			}
			value, err := dispatch.EncodeRequest(cmd)
			if err != nil {
				continue
			}
			inflight.Add(1)
			cl.Produce(ctx, &kgo.Record{Key: []byte(cmd.ID), Value: value, Partition: 0}, func(_ *kgo.Record, err error) {
				defer inflight.Done()
				if err != nil {
					return
				}
				mu.Lock()
				accepted = append(accepted, cmd.ID)
				fmt.Fprintln(f, cmd.ID)
				mu.Unlock()
			})
		}
	}()
	stop := func() []string {
		close(stopc)
		<-done
		inflight.Wait()
		cl.Close()
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), accepted...)
	}
	return f, stop, nil
}

// settle waits until every accepted command has an outcome in the log, or
// the settle period ends, and returns how many did not.
func (r *run) settle(ctx context.Context, ids []string) (int, error) {
	deadline := time.Now().Add(r.cfg.Settle)
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

// readLog reads the role's log with dispatch's own reader, the one an
// auditor uses. When that reader refuses a record that does not decode, it
// reads again with LogReader, which keeps such a record as an entry of kind
// zero, so that the checker reports it with its offset instead of the run
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
