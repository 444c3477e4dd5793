// Command benchdispatch measures the dispatcher against raw transactional
// produce on a real cluster and prints both, and their ratio. See package
// bench for what each side does.
//
//	benchdispatch -brokers 127.0.0.1:19092 -batch 100
//
// The brokers default to $KRABKA_KAFKA_BROKERS. It exits 1 on a failure of
// the run, and 2 when -min-ratio is set and the ratio falls below it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/krabka-io/krabka-dispatch/test/bench/ceiling"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("benchdispatch", flag.ContinueOnError)
	flags.SetOutput(stderr)
	brokers := flags.String("brokers", os.Getenv("KRABKA_KAFKA_BROKERS"), "comma-separated broker addresses")
	commands := flags.Int("commands", ceiling.DefaultCommands, "measured commands per side")
	warmup := flags.Int("warmup", ceiling.DefaultWarmup, "unmeasured commands per side before the measurement")
	batch := flags.Int("batch", ceiling.DefaultBatch, "records per transaction, on both sides")
	submitters := flags.Int("submitters", 0, "concurrent submitters (0: twice the batch)")
	payload := flags.Int("payload", ceiling.DefaultPayload, "payload bytes per command")
	minRatio := flags.Float64("min-ratio", 0, "exit 2 when the ratio is below this")
	asJSON := flags.Bool("json", false, "print the result as JSON")
	timeout := flags.Duration("timeout", 10*time.Minute, "bound on the whole run")
	if err := flags.Parse(args); err != nil {
		return 1
	}
	if *brokers == "" {
		fmt.Fprintln(stderr, "benchdispatch: no brokers: pass -brokers or set KRABKA_KAFKA_BROKERS")
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	res, err := ceiling.Run(ctx, ceiling.Config{
		Brokers: strings.Split(*brokers, ","), Commands: *commands, Warmup: *warmup,
		Batch: *batch, Submitters: *submitters, Payload: *payload,
	})
	if err != nil {
		fmt.Fprintln(stderr, "benchdispatch:", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(res)
	} else {
		fmt.Fprintf(stdout, "batch %d records per transaction, %d submitters, %d commands per side\n", res.Batch, res.Submitters, res.Dispatcher.Commands)
		fmt.Fprintf(stdout, "%-18s %12s %10s %10s %8s %10s\n", "side", "commands/s", "p50", "p99", "txns", "recs/txn")
		for _, s := range []ceiling.Side{res.Dispatcher, res.Raw} {
			fmt.Fprintf(stdout, "%-18s %12.0f %10v %10v %8d %10.1f\n", s.Name, s.PerSecond,
				s.P50.Round(10*time.Microsecond), s.P99.Round(10*time.Microsecond), s.Transactions, s.RecordsPerTransaction)
		}
		fmt.Fprintf(stdout, "ratio dispatcher/raw: %.2f\n", res.Ratio)
	}
	if *minRatio > 0 && res.Ratio < *minRatio {
		fmt.Fprintf(stderr, "benchdispatch: ratio %.2f is below %.2f\n", res.Ratio, *minRatio)
		return 2
	}
	return 0
}
