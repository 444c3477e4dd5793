// Package ceiling measures the dispatcher against its ceiling on a real
// cluster, in one run: end-to-end commands per second and submit-to-dispatch
// latency through a dispatch.Dispatcher with a device that does nothing, and
// the same figures for raw franz-go transactional produce of the same records
// (each command's Issued and Outcome entries) at the same batch size, with
// the same number of submitters waiting on their commands. The ratio of the
// two throughputs says what the dispatcher's bookkeeping costs.
//
// Both sides run closed loops: each of Submitters goroutines submits one
// command, waits until it is done, and submits the next. The dispatcher side
// is done when the command's outcome is recorded, and its latency ends when
// the device is called; the raw side is done, and its latency ends, when the
// transaction that holds the command's records commits.
package ceiling

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// Defaults of a Config.
const (
	// DefaultCommands is the number of measured commands per side.
	DefaultCommands = 5000

	// DefaultWarmup is the number of commands per side before the
	// measurement starts.
	DefaultWarmup = 500

	// DefaultBatch is the bound on records per transaction, on both sides.
	DefaultBatch = 100

	// DefaultPayload is the payload size of each command, in bytes.
	DefaultPayload = 64
)

// Config is one run of the benchmark.
type Config struct {
	// Brokers is the cluster.
	Brokers []string

	// Commands and Warmup are the measured and the unmeasured commands of
	// each side.
	Commands, Warmup int

	// Batch bounds the records of one transaction on both sides:
	// dispatch.WithMaxBatchRecords and the raw producer's group size.
	Batch int

	// Submitters is the number of concurrent submitters; zero means twice
	// Batch, enough to fill every transaction.
	Submitters int

	// Payload is the payload size of each command, in bytes.
	Payload int
}

func (c *Config) fill() error {
	if len(c.Brokers) == 0 {
		return errors.New("bench: no brokers")
	}
	if c.Commands <= 0 {
		c.Commands = DefaultCommands
	}
	if c.Warmup < 0 {
		c.Warmup = 0
	}
	if c.Batch <= 0 {
		c.Batch = DefaultBatch
	}
	if c.Submitters <= 0 {
		c.Submitters = 2 * c.Batch
	}
	if c.Payload < 0 {
		c.Payload = DefaultPayload
	}
	return nil
}

// Side is the result of one side of the benchmark.
type Side struct {
	// Name is "dispatcher" or "raw-transactional".
	Name string `json:"name"`

	// Commands is the number of measured commands.
	Commands int `json:"commands"`

	// Elapsed is the span of the measurement.
	Elapsed time.Duration `json:"elapsed_ns"`

	// PerSecond is Commands over Elapsed.
	PerSecond float64 `json:"commands_per_second"`

	// P50 and P99 are submit-to-dispatch latencies (submit-to-commit on the
	// raw side).
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`

	// Transactions is the number of transactions the side committed during
	// the measurement, and RecordsPerTransaction their mean size.
	Transactions          int     `json:"transactions"`
	RecordsPerTransaction float64 `json:"records_per_transaction"`
}

// Result is one run.
type Result struct {
	Batch      int  `json:"batch"`
	Submitters int  `json:"submitters"`
	Dispatcher Side `json:"dispatcher"`
	Raw        Side `json:"raw"`

	// Ratio is the dispatcher's throughput over the raw one.
	Ratio float64 `json:"ratio"`
}

// Run measures both sides, the raw one first, each on topics of its own that
// it deletes afterwards.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.fill(); err != nil {
		return Result{}, err
	}
	raw, err := runRaw(ctx, cfg)
	if err != nil {
		return Result{}, fmt.Errorf("bench: raw side: %w", err)
	}
	disp, err := runDispatcher(ctx, cfg)
	if err != nil {
		return Result{}, fmt.Errorf("bench: dispatcher side: %w", err)
	}
	r := Result{Batch: cfg.Batch, Submitters: cfg.Submitters, Dispatcher: disp, Raw: raw}
	if raw.PerSecond > 0 {
		r.Ratio = disp.PerSecond / raw.PerSecond
	}
	return r, nil
}

// summarize builds a Side from the latencies and the span.
func summarize(name string, latencies []time.Duration, elapsed time.Duration, txns, records int) Side {
	slices.Sort(latencies)
	s := Side{Name: name, Commands: len(latencies), Elapsed: elapsed, Transactions: txns}
	if elapsed > 0 {
		s.PerSecond = float64(len(latencies)) / elapsed.Seconds()
	}
	if n := len(latencies); n > 0 {
		s.P50 = latencies[n*50/100]
		s.P99 = latencies[min(n-1, n*99/100)]
	}
	if txns > 0 {
		s.RecordsPerTransaction = float64(records) / float64(txns)
	}
	return s
}

// topicSet creates a log and a requests topic of one partition each,
// replication 3 and min.insync.replicas 2, and returns a function that
// deletes them.
func topicSet(ctx context.Context, brokers []string, prefix string) (log, requests string, drop func(), err error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return "", "", nil, err
	}
	adm := kadm.NewClient(cl)
	suffix := time.Now().UTC().Format("20060102T150405.000000000")
	log, requests = prefix+".log."+suffix, prefix+".requests."+suffix
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	configs := map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}
	for _, name := range []string{log, requests} {
		resp, err := adm.CreateTopic(cctx, 1, 3, configs, name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			cl.Close()
			return "", "", nil, fmt.Errorf("create topic %s: %w", name, err)
		}
	}
	drop = func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopics(dctx, log, requests)
		cl.Close()
	}
	return log, requests, drop, nil
}

// benchLease is the lease of the dispatcher side; its duration is the
// transaction timeout of both sides.
func benchLease() (coordination.LeaseConfig, error) {
	return coordination.NewLeaseConfig(10*time.Second, 3*time.Second, time.Second)
}
