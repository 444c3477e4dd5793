// Command benchreport measures the project's performance claims against the
// real cluster and Mosquitto and writes docs/PERFORMANCE.md with its plots
// in docs/img/. Every figure is a ratio against a ceiling or a bound that
// the same run measures:
//
//   - e2e: commands/s of a dispatcher with a no-op device against the fair
//     ceiling (raw franz-go with the transport's options and the same
//     pre-encoded records, best of a sweep of pauses), interleaved in
//     alternating repetitions, for batches of 1, 10, 100 and 1000;
//   - latency: submit, through a real member's HTTP API and through the
//     requests topic, to the device acting and to the outcome committed,
//     beside the raw commit;
//   - backlog: one role draining a backlog of requests;
//   - mqtt, modbus: dispatch through devices/mqtt and devices/modbus
//     (fenced and unfenced) against raw publish and raw register writes;
//   - failover, handover: crash failover (SIGKILL of the leader process)
//     against its bound, and graceful handover (SIGTERM, the leader
//     resigns) against 150 ms;
//   - memory: heap per pending command against the size of its log record;
//   - roles: CPU, memory, sockets, file descriptors and goroutines of one
//     process running a dispatcher for each of 1 to 64 roles.
//
// scripts/bench.sh builds it and cmd/holder and runs it:
//
//	benchreport -holder-bin .run/bench/holder -out docs/PERFORMANCE.md -img docs/img
//
// -quick runs every section with fewer trials and shorter windows;
// -cpuprofile writes a CPU profile whose e2e samples carry the label
// side=dispatcher or side=ceiling.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/test/bench/ceiling"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

// options are the flags of one run.
type options struct {
	brokers         []string
	mqttURL         string
	holderBin       string
	out             string
	img             string
	point           time.Duration
	warmup          time.Duration
	reps            int
	cpuProfile      string
	clients         int
	prefix          string
	history         string
	backlog         int
	backlogBatch    int
	batches         []int
	failoverTrials  int
	handoverTrials  int
	roles           []int
	rolesWindow     time.Duration
	pending         int
	only            map[string]bool
	seed            uint64
	failoverTimings timings
	verbose         bool
	// warmCluster runs an unmeasured warm-up of the cluster before the
	// first section.
	warmCluster bool
	// commitGap and commitLinger, when not negative, replace the
	// dispatcher's defaults in the end-to-end section.
	commitGap, commitLinger time.Duration
	// checkpointInterval, when above zero, replaces the dispatcher's
	// checkpoint interval in the end-to-end section.
	checkpointInterval int
	// submit is how the end-to-end dispatcher side submits a batch.
	submit ceiling.SubmitMode
}

// timings are the lease timings of the failover and handover trials.
type timings struct {
	lease, renew, stagger, poll time.Duration
}

func run() error {
	var o options
	brokers := flag.String("brokers", os.Getenv("KRABKA_KAFKA_BROKERS"), "comma-separated bootstrap addresses (default $KRABKA_KAFKA_BROKERS)")
	flag.StringVar(&o.mqttURL, "mqtt", os.Getenv("KRABKA_MQTT_URL"), "MQTT broker URL (default $KRABKA_MQTT_URL)")
	flag.StringVar(&o.holderBin, "holder-bin", "", "path of the cmd/holder binary")
	flag.StringVar(&o.out, "out", "docs/PERFORMANCE.md", "report file")
	flag.StringVar(&o.img, "img", "docs/img", "directory of the plots")
	flag.DurationVar(&o.point, "point", 3*time.Second, "window of each side in each repetition of a throughput point")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "warm-up of each side before the repetitions")
	flag.IntVar(&o.reps, "reps", 7, "alternating repetitions of each throughput point")
	flag.IntVar(&o.clients, "clients", 16, "concurrent submitters of the latency section")
	flag.IntVar(&o.backlog, "backlog", 50000, "requests one role drains in the backlog section")
	flag.IntVar(&o.backlogBatch, "backlog-max-batch-records", 0, "dispatch.WithMaxBatchRecords of the backlog's dispatcher (0: the default)")
	flag.StringVar(&o.history, "history", "", "markdown fragment of the \"Cost against history\" section, included when the file exists")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the run here (the e2e sides carry the pprof label side=dispatcher or side=ceiling)")
	batches := flag.String("batches", "1,10,100,1000", "batch sizes of the end-to-end comparison")
	flag.IntVar(&o.failoverTrials, "failover-trials", 20, "crash failover trials")
	flag.IntVar(&o.handoverTrials, "handover-trials", 50, "graceful handover trials")
	roles := flag.String("roles", "1,4,16,64", "role counts held by one process, each with a dispatcher")
	flag.DurationVar(&o.rolesWindow, "roles-window", 30*time.Second, "observation window of each role count")
	flag.IntVar(&o.pending, "pending", 5000, "commands held pending for the memory figure")
	only := flag.String("only", "", "comma-separated sections to run: e2e,latency,backlog,mqtt,modbus,failover,handover,memory,roles (default all)")
	flag.DurationVar(&o.commitGap, "commit-gap", -1, "dispatch.WithCommitGap of the end-to-end dispatcher (negative: the default)")
	flag.DurationVar(&o.commitLinger, "commit-linger", -1, "dispatch.WithCommitLinger of the end-to-end dispatcher (negative: the default)")
	flag.IntVar(&o.checkpointInterval, "checkpoint-interval", 0, "dispatch.WithCheckpointInterval of the end-to-end dispatcher (0: the default)")
	submit := flag.String("submit", "batch", "how the end-to-end dispatcher side submits a round: batch (one Dispatcher.SubmitBatch) or each (a Submit per command, all at once)")
	flag.Uint64Var(&o.seed, "seed", 0, "seed of the random signal phases (0 picks one)")
	flag.BoolVar(&o.verbose, "v", false, "pass the measured processes' standard error through")
	flag.BoolVar(&o.warmCluster, "warm-cluster", true, "before the first section, run an unmeasured end-to-end comparison and handover trials, so that no section measures brokers that just started")
	quick := flag.Bool("quick", false, "fewer trials and shorter windows, for a check of the tool")
	flag.DurationVar(&o.failoverTimings.lease, "failover-lease", 3*time.Second, "lease duration of the failover trials")
	flag.DurationVar(&o.failoverTimings.renew, "failover-renew", time.Second, "renew interval of the failover trials")
	flag.DurationVar(&o.failoverTimings.stagger, "failover-stagger", time.Second, "challenge stagger of the failover trials")
	flag.DurationVar(&o.failoverTimings.poll, "failover-poll", 250*time.Millisecond, "poll interval of the failover trials")
	flag.Parse()
	if *brokers == "" || o.holderBin == "" {
		return errors.New("-brokers (or $KRABKA_KAFKA_BROKERS) and -holder-bin are required")
	}
	o.brokers = strings.Split(*brokers, ",")
	switch *submit {
	case "batch":
		o.submit = ceiling.SubmitBatched
	case "each":
		o.submit = ceiling.SubmitEach
	default:
		return fmt.Errorf("-submit %q: want batch or each", *submit)
	}
	var err error
	if o.batches, err = ints(*batches); err != nil {
		return err
	}
	if o.roles, err = ints(*roles); err != nil {
		return err
	}
	if *quick {
		// The quick sizes replace the defaults, not the flags given.
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		quickly := func(name string, apply func()) {
			if !set[name] {
				apply()
			}
		}
		quickly("point", func() { o.point = time.Second })
		quickly("warmup", func() { o.warmup = time.Second })
		quickly("reps", func() { o.reps = 5 })
		quickly("failover-trials", func() { o.failoverTrials = 3 })
		quickly("handover-trials", func() { o.handoverTrials = 10 })
		quickly("roles-window", func() { o.rolesWindow = 5 * time.Second })
		quickly("pending", func() { o.pending = 1000 })
		quickly("backlog", func() { o.backlog = 10000 })
		quickly("warm-cluster", func() { o.warmCluster = false })
	}
	if *only != "" {
		o.only = map[string]bool{}
		for _, s := range strings.Split(*only, ",") {
			o.only[strings.TrimSpace(s)] = true
		}
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	if err := os.MkdirAll(o.img, 0o755); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	rep := &report{machine: ceiling.ReadMachine(), opts: o, started: time.Now()}
	prefix := fmt.Sprintf("bench-%d", time.Now().Unix())
	o.prefix = prefix
	var topics []string
	defer func() {
		if len(topics) > 0 {
			dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_ = ceiling.DeleteTopics(dctx, o.brokers, topics...)
			cancel()
		}
	}()
	newTopic := func(name string) (string, error) {
		name = prefix + "-" + name
		tctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := ceiling.CreateTopic(tctx, o.brokers, ceiling.TopicSpec{Name: name, Partitions: 1, Replication: 3, MinInsyncReplicas: 2}); err != nil {
			return "", err
		}
		topics = append(topics, name)
		return name, nil
	}

	step := func(name string, f func() error) {
		if o.only != nil && !o.only[name] {
			return
		}
		if ctx.Err() != nil {
			return
		}
		logf("%s: start", name)
		t0 := time.Now()
		if err := f(); err != nil {
			logf("%s: %v", name, err)
			rep.failed = append(rep.failed, fmt.Sprintf("%s: %v", name, err))
		}
		logf("%s: done in %s", name, time.Since(t0).Round(time.Second))
	}
	reader, err := coordination.NewKafkaTransport(coordination.DefaultLeaseConfig(), o.brokers...)
	if err != nil {
		return err
	}
	defer reader.Close()

	if o.warmCluster && ctx.Err() == nil {
		logf("warm-up of the cluster: start")
		t0 := time.Now()
		if err := warmCluster(ctx, o, reader, prefix, newTopic); err != nil {
			// A failed warm-up leaves the sections to meet a colder
			// cluster; the report says so.
			logf("warm-up of the cluster: %v", err)
			rep.failed = append(rep.failed, fmt.Sprintf("warm-up of the cluster: %v", err))
		}
		logf("warm-up of the cluster: done in %s", time.Since(t0).Round(time.Second))
	}
	step("failover", func() error { return failover(ctx, o, reader, prefix, false, rep) })
	step("handover", func() error { return failover(ctx, o, reader, prefix, true, rep) })
	step("e2e", func() error { return endToEnd(ctx, o, prefix, newTopic, rep) })
	step("latency", func() error { return latencySection(ctx, o, prefix, newTopic, rep) })
	step("backlog", func() error { return backlogSection(ctx, o, prefix, newTopic, rep) })
	step("mqtt", func() error { return mqttSection(ctx, o, newTopic, rep) })
	step("modbus", func() error { return modbusSection(ctx, o, newTopic, rep) })
	step("memory", func() error { return memory(ctx, o, prefix, newTopic, rep) })
	step("roles", func() error { return rolesSection(ctx, o, prefix, newTopic, rep) })

	topics = append(topics, rep.extraTopics...)
	if err := rep.write(); err != nil {
		return err
	}
	logf("wrote %s and the plots in %s", o.out, o.img)
	if len(rep.failed) > 0 {
		return fmt.Errorf("%d sections failed: %s", len(rep.failed), strings.Join(rep.failed, "; "))
	}
	return nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s benchreport: %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a list of positive integers", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// imgPath returns the path of a plot and the link to it from the report.
func (o options) imgPath(name string) (file, link string) {
	file = filepath.Join(o.img, name)
	rel, err := filepath.Rel(filepath.Dir(o.out), file)
	if err != nil {
		rel = file
	}
	return file, filepath.ToSlash(rel)
}
