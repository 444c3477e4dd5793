// Command benchhistory measures the cost of a long command log to a
// dispatcher (package history) and writes the section "Cost against
// history" of the benchmark report as markdown to the file of -out.
//
//	benchhistory -out history.md                        # 0, 100,000 and 1,000,000 commands
//	benchhistory -sizes 0,100000 -further 100000 -out history.md   # a quick run
//
// It reads the cluster from $KRABKA_KAFKA_BROKERS and the MQTT broker from
// $KRABKA_MQTT_URL unless -brokers and -mqtt give them, and builds the
// dispatcher binary from ./cmd/dispatcher of the repository at -repo unless
// -binary names one.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/krabka-io/krabka-dispatch/test/bench/history"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "benchhistory:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		brokers = flag.String("brokers", os.Getenv("KRABKA_KAFKA_BROKERS"), "bootstrap brokers, comma-separated")
		mqttURL = flag.String("mqtt", os.Getenv("KRABKA_MQTT_URL"), "MQTT broker of the measured device")
		sizes   = flag.String("sizes", "0,100000,1000000", "settled commands of the role in the log before the start, comma-separated")
		further = flag.Int("further", 1_000_000, "commands sent after the failover, before the last memory reading")
		samples = flag.Int("samples", history.DefaultSamples, "samples of each latency")
		warmUp  = flag.Int("warm-up", 100_000, "size of a pass before the first size, whose figures are dropped (0: none)")
		out     = flag.String("out", "", "file to write the markdown section to (required)")
		binary  = flag.String("binary", "", "the dispatcher binary (default: built from -repo)")
		repo    = flag.String("repo", "../..", "the repository root, to build ./cmd/dispatcher from")
	)
	flag.Parse()
	if *out == "" {
		return errors.New("-out is required")
	}
	ns, err := parseSizes(*sizes)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "benchhistory-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := *binary
	if bin == "" {
		bin = filepath.Join(dir, "dispatcher")
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/dispatcher")
		build.Dir, build.Stdout, build.Stderr = *repo, os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build the dispatcher: %w", err)
		}
	}
	cfg := history.Config{
		Brokers: strings.Split(*brokers, ","), MQTTURL: *mqttURL, Binary: bin, Dir: dir,
		Sizes: ns, Further: *further, Samples: *samples, WarmUp: *warmUp, Progress: os.Stderr,
	}
	if *brokers == "" {
		cfg.Brokers = nil
	}
	start := time.Now()
	rows, err := history.Run(ctx, cfg)
	if err != nil {
		return err
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	if err := history.Markdown(f, rows, cfg, time.Since(start)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func parseSizes(s string) ([]int, error) {
	var ns []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("-sizes %q: want counts of 0 or more, comma-separated", s)
		}
		ns = append(ns, n)
	}
	return ns, nil
}
