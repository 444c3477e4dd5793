// Command sim runs seeds of the deterministic simulator of the
// fenced-dispatch protocol and writes a markdown report.
//
//	sim -seeds 100000 -start 1 -report .run/sim-report.md
//	sim -start 951 -seeds 1 -trace 200   # replay one seed with its trace tail
//
// It exits 1 when any seed shows a violation.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/krabka-io/krabka-dispatch/test/sim"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seeds := fs.Uint64("seeds", 1000, "number of seeds to run")
	start := fs.Uint64("start", 1, "first seed")
	report := fs.String("report", "", "write the markdown report to this file")
	trace := fs.Int("trace", 0, "print the last N trace lines of each seed that shows a violation")
	dir := fs.String("dir", "", "directory for the fencing devices' state files (default /dev/shm when present)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg := sim.DefaultConfig()
	cfg.KeepTrace = *trace
	cfg.Dir = *dir
	if cfg.Dir == "" {
		cfg.Dir = os.TempDir()
		if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
			cfg.Dir = "/dev/shm"
		}
	}
	sum := sim.Summary{Start: *start}
	began := time.Now()
	for seed := *start; seed < *start+*seeds; seed++ {
		res, err := sim.Run(seed, cfg)
		if err != nil {
			fmt.Fprintf(stderr, "seed %d: %v\n", seed, err)
			return 1
		}
		sum.Add(res)
		for _, v := range res.Violations {
			fmt.Fprintf(stdout, "seed %d (%s): %s: %s\n", seed, res.Faults, v.Class, v.Detail)
		}
		if len(res.Violations) > 0 && *trace > 0 {
			for _, l := range res.Trace {
				fmt.Fprintln(stdout, "\t"+l)
			}
		}
		if *seeds >= 10000 && (seed-*start+1)%10000 == 0 {
			fmt.Fprintf(stderr, "%d seeds, %d violations, %s\n", seed-*start+1, len(sum.Violations), time.Since(began).Round(time.Second))
		}
	}
	sum.Elapsed = time.Since(began)
	fmt.Fprintf(stdout, "%d seeds in %s (%.0f seeds/s), %d events, %d violations, %d expected findings\n",
		sum.Seeds, sum.Elapsed.Round(time.Millisecond), float64(sum.Seeds)/max(sum.Elapsed.Seconds(), 1e-9),
		sum.Events, len(sum.Violations), len(sum.Expected))
	if *report != "" {
		if err := os.MkdirAll(filepath.Dir(*report), 0o755); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		f, err := os.Create(*report)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		werr := sum.WriteMarkdown(f)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			fmt.Fprintln(stderr, werr)
			return 1
		}
	}
	if len(sum.Violations) > 0 {
		return 1
	}
	return 0
}
