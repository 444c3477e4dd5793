package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// hostLine describes the host of a run for its report: the CPUs, the
// memory, and the kernel release. A fact that cannot be read is left out.
func hostLine() string {
	parts := []string{fmt.Sprintf("%d CPUs", runtime.NumCPU())}
	if kb, err := memTotalKB(); err == nil {
		parts = append(parts, fmt.Sprintf("%.1f GiB", float64(kb)*1024/(1<<30)))
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		parts = append(parts, "Linux "+strings.TrimSpace(string(b)))
	}
	return strings.Join(parts, ", ") + " (brokers, members and harness share them)"
}

// memTotalKB reads the MemTotal line of /proc/meminfo.
func memTotalKB() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				break
			}
			return strconv.ParseInt(fields[0], 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("/proc/meminfo: no MemTotal line")
}
