// Command chaos runs the chaos harness of package test/chaos against the
// three-broker cluster and exits non-zero when any guarantee broke:
//
//	chaos -duration 2m -dispatcher-bin .run/chaos/bin/dispatcher -dir .run/chaos/run
//
// The brokers come from $KRABKA_KAFKA_BROKERS and the broker control script
// from $KRABKA_KAFKA_SCRIPT, as scripts/services/10-kafka.sh writes them to
// .run/kafka/env, and Mosquitto from $KRABKA_MQTT_URL (.run/mosquitto/env).
// It must run as root: it creates a network namespace per member. The seed is printed; pass it back with -seed to replay the
// same choices of faults (the timing of the processes still varies).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/test/chaos"
)

func main() {
	ok, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

func run() (bool, error) {
	brokers := flag.String("brokers", os.Getenv("KRABKA_KAFKA_BROKERS"), "comma-separated bootstrap addresses (default $KRABKA_KAFKA_BROKERS)")
	script := flag.String("kafka-script", os.Getenv("KRABKA_KAFKA_SCRIPT"), "the broker control script (default $KRABKA_KAFKA_SCRIPT)")
	dispatcherBin := flag.String("dispatcher-bin", "", "path of the dispatcher binary")
	mqttURL := flag.String("mqtt", os.Getenv("KRABKA_MQTT_URL"), "Mosquitto, without authentication (default $KRABKA_MQTT_URL)")
	second := flag.Int("second-role", 2, "members of a second role sharing the log partition (0: none)")
	dir := flag.String("dir", ".run/chaos/run", "directory for the records and the report")
	duration := flag.Duration("duration", 2*time.Minute, "how long faults are injected")
	settle := flag.Duration("settle", 2*time.Minute, "bound on the wait for every accepted command to reach an outcome")
	seed := flag.Uint64("seed", 0, "random seed (0 picks one from the clock)")
	members := flag.Int("members", 3, "members of the first role")
	rate := flag.Float64("rate", 6, "commands submitted per second, split evenly over the roles")
	commandTimeout := flag.Duration("command-timeout", chaos.DefaultCommandTimeout, "each command's time to live (below -settle)")
	lease := flag.Duration("lease", 4*time.Second, "lease duration of the members")
	render := flag.String("render", "", "print the Markdown report of the finished run in this directory, and run nothing")
	flag.Parse()
	if *render != "" {
		return renderRun(*render)
	}
	if *brokers == "" || *script == "" || *dispatcherBin == "" || *mqttURL == "" {
		return false, errors.New("-brokers (or $KRABKA_KAFKA_BROKERS), -kafka-script (or $KRABKA_KAFKA_SCRIPT), -mqtt (or $KRABKA_MQTT_URL) and -dispatcher-bin are required")
	}
	started := time.Now()
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	reader, err := coordination.NewKafkaTransport(coordination.DefaultLeaseConfig(), strings.Split(*brokers, ",")...)
	if err != nil {
		return false, err
	}
	defer reader.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	res, err := chaos.Run(ctx, chaos.Config{
		Brokers: strings.Split(*brokers, ","), KafkaScript: *script, DispatcherBin: *dispatcherBin, MQTT: *mqttURL, Dir: *dir,
		Duration: *duration, Settle: *settle, CommandTimeout: *commandTimeout, Seed: *seed, Members: *members, SecondRole: *second, Rate: *rate, Lease: *lease,
		Reader: reader, Out: os.Stdout,
	})
	if err != nil {
		return false, err
	}
	fmt.Print(chaos.Summary(res))
	md := chaos.Markdown(res, facts(time.Now(), time.Since(started)))
	if err := os.WriteFile(filepath.Join(*dir, "run.md"), []byte(md), 0o644); err != nil {
		return false, err
	}
	fmt.Printf("records, report.json and run.md in %s\n", *dir)
	return res.OK(), nil
}

// facts describes the host for the Markdown report.
func facts(finished time.Time, wall time.Duration) chaos.RunFacts {
	return chaos.RunFacts{Finished: finished, Wall: wall, Machine: hostLine()}
}

// renderRun prints the Markdown report of a finished run. The run's wall
// time runs from the time stamp that scripts/chaos.sh gives its directory
// to the report's modification time.
func renderRun(dir string) (bool, error) {
	res, err := chaos.ReadResult(dir)
	if err != nil {
		return false, err
	}
	info, err := os.Stat(filepath.Join(dir, "report.json"))
	if err != nil {
		return false, err
	}
	var wall time.Duration
	if start, err := time.Parse("20060102T150405Z", filepath.Base(dir)); err == nil {
		wall = info.ModTime().Sub(start)
	}
	fmt.Print(chaos.Markdown(res, facts(info.ModTime(), wall)))
	return res.OK(), nil
}
