//go:build integration

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestQuickRunWritesEveryTable builds the tool and cmd/holder, runs every
// section with tiny sizes against the real cluster and Mosquitto, and checks
// that the report holds every section with its table and numbers that make
// sense: rates and latencies above zero, ratios above zero and finite. It
// asserts no timing target; the numbers of so short a run are noise.
func TestQuickRunWritesEveryTable(t *testing.T) {
	for _, env := range []string{"KRABKA_KAFKA_BROKERS", "KRABKA_MQTT_URL"} {
		if os.Getenv(env) == "" {
			t.Fatalf("%s must be set: source .run/kafka/env and .run/mosquitto/env after scripts/services/*.sh start", env)
		}
	}
	dir := t.TempDir()
	for bin, pkg := range map[string]string{"benchreport": ".", "holder": "../holder"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, bin), pkg).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", pkg, err, out)
		}
	}
	out := filepath.Join(dir, "PERFORMANCE.md")
	history := filepath.Join(dir, "history.md")
	if err := os.WriteFile(history, []byte("| Commit | Ratio |\n|---|---:|\n| abc | 1.00 |\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "benchreport"), "-holder-bin", filepath.Join(dir, "holder"),
		"-out", out, "-img", filepath.Join(dir, "img"), "-history", history,
		"-batches", "1,10", "-reps", "2", "-point", "300ms", "-warmup", "200ms",
		"-clients", "2", "-backlog", "300", "-pending", "100",
		"-failover-trials", "1", "-handover-trials", "2", "-roles", "1,2", "-roles-window", "1s")
	logs, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("benchreport: %v\n%s", err, logs)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	report := string(b)
	if strings.Contains(report, "Sections that failed") {
		t.Fatalf("a section failed:\n%s", report)
	}
	sections := map[string]int{ // heading: rows its first table must have
		"## Summary": 7,
		"## End-to-end dispatch against the fair ceiling":        2,
		"## Latency end to end":                                  3,
		"## One role draining a backlog":                         1,
		"## Dispatch through MQTT against raw publish":           3,
		"## Dispatch through Modbus against raw register writes": 5,
		"## Crash failover":                                      1,
		"## Graceful handover":                                   1,
		"## Memory per pending command":                          1,
		"## Roles held by one process, each with a dispatcher":   2,
		"## Cost against history":                                1,
	}
	for heading, rows := range sections {
		table := firstTable(report, heading)
		if len(table) < rows {
			t.Errorf("section %q: %d table rows, want %d\n%s", heading, len(table), rows, report)
		}
	}
	for _, img := range []string{"e2e-throughput.png", "e2e-latency.png", "e2e-ratio.png", "mqtt.png", "modbus.png", "failover.png", "handover.png", "roles.png"} {
		if st, err := os.Stat(filepath.Join(dir, "img", img)); err != nil || st.Size() == 0 {
			t.Errorf("plot %s missing: %v", img, err)
		}
	}

	// Every e2e row: rates above zero and a finite ratio above zero.
	for _, row := range firstTable(report, "## End-to-end dispatch against the fair ceiling") {
		cells := strings.Split(strings.Trim(row, "|"), "|")
		dispatch, ceil, ratio := leadingNumber(cells[1]), leadingNumber(cells[2]), leadingNumber(cells[3])
		if !(dispatch > 0 && ceil > 0 && ratio > 0 && ratio < 100) {
			t.Errorf("e2e row %q: dispatch %v, ceiling %v, ratio %v", row, dispatch, ceil, ratio)
		}
	}
	// Every per-round row: the bench's CPU per command on each side,
	// above zero.
	perRound := firstTable(report, "outcome, against the ceiling's produce and commit of the same records.")
	if len(perRound) != 2 {
		t.Errorf("%d per-round rows, want 2", len(perRound))
	}
	for _, row := range perRound {
		cells := strings.Split(strings.Trim(row, "|"), "|")
		if dcpu, ccpu := leadingNumber(cells[5]), leadingNumber(cells[6]); !(dcpu > 0 && ccpu > 0) {
			t.Errorf("per-round row %q: CPU per command %v on the dispatcher's side, %v on the ceiling's", row, dcpu, ccpu)
		}
	}
	// Every latency row: accepted, to device and to outcome, each p50
	// above zero and the finer quantiles at or above it; the outcome
	// after the device.
	for _, row := range firstTable(report, "## Latency end to end")[:2] {
		cells := strings.Split(strings.Trim(row, "|"), "|")
		if q := numbers(cells[2]); len(q) != 2 || !(q[0] > 0 && q[1] >= q[0]) {
			t.Errorf("latency row %q: accepted %v", row, q)
		}
		if dev, out := numbers(cells[3]), numbers(cells[4]); len(dev) == 3 && len(out) == 3 && out[0] < dev[0] {
			t.Errorf("latency row %q: outcome p50 %v before the device p50 %v", row, out[0], dev[0])
		}
		for _, c := range cells[3:5] {
			q := numbers(c)
			if len(q) != 3 || !(q[0] > 0 && q[1] >= q[0] && q[2] >= q[1]) {
				t.Errorf("latency row %q: quantiles %v", row, q)
			}
		}
	}
	// The same clients on a greedy raw producer: outcome quantiles in order.
	greedy := 0
	for _, row := range firstTable(report, "## Latency end to end") {
		if !strings.HasPrefix(row, "| the same clients on a raw producer") {
			continue
		}
		greedy++
		cells := strings.Split(strings.Trim(row, "|"), "|")
		if q := numbers(cells[4]); len(q) != 3 || !(q[0] > 0 && q[1] >= q[0] && q[2] >= q[1]) {
			t.Errorf("greedy raw row %q: quantiles %v", row, q)
		}
	}
	if greedy != 1 {
		t.Errorf("%d rows of the greedy raw producer, want 1", greedy)
	}
	if row := firstTable(report, "## One role draining a backlog"); len(row) > 0 {
		cells := strings.Split(strings.Trim(row[0], "|"), "|")
		if n := leadingNumber(cells[0]); n != 300 {
			t.Errorf("backlog of %v commands, want 300", n)
		}
		if rate := leadingNumber(cells[3]); rate <= 0 {
			t.Errorf("backlog rate %v", rate)
		}
	}
	for _, row := range firstTable(report, "## Roles held by one process, each with a dispatcher") {
		cells := strings.Split(strings.Trim(row, "|"), "|")
		if sockets, fds, goroutines := leadingNumber(cells[4]), leadingNumber(cells[6]), leadingNumber(cells[7]); !(sockets > 0 && fds >= sockets && goroutines > 0) {
			t.Errorf("roles row %q: sockets %v, fds %v, goroutines %v", row, sockets, fds, goroutines)
		}
	}
	if !strings.Contains(report, "| abc | 1.00 |") {
		t.Errorf("the history fragment is missing from the report")
	}
}

// firstTable returns the data rows of the first table after heading.
func firstTable(report, heading string) []string {
	i := strings.Index(report, heading+"\n")
	if i < 0 {
		return nil
	}
	var rows []string
	inTable := false
	for _, line := range strings.Split(report[i+len(heading):], "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			return rows
		case strings.HasPrefix(line, "|---"):
			inTable = true
		case strings.HasPrefix(line, "|") && inTable:
			rows = append(rows, line)
		case inTable:
			return rows
		}
	}
	return rows
}

var number = regexp.MustCompile(`-?[0-9]+(\.[0-9]+)?`)

// numbers returns every number in s.
func numbers(s string) []float64 {
	var out []float64
	for _, m := range number.FindAllString(s, -1) {
		f, _ := strconv.ParseFloat(m, 64)
		out = append(out, f)
	}
	return out
}

// leadingNumber returns the first number in s, or -1.
func leadingNumber(s string) float64 {
	if n := numbers(s); len(n) > 0 {
		return n[0]
	}
	return -1
}
