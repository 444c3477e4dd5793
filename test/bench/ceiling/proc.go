package ceiling

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the unit of the CPU times in /proc/<pid>/stat. Linux reports
// USER_HZ, which is 100 on every architecture Go supports.
const clockTicks = 100

// ProcSample is the resource use of one process at one instant, read from
// /proc.
type ProcSample struct {
	// At is the instant of the read.
	At time.Time

	// CPU is the user plus system CPU time the process used since it started.
	CPU time.Duration

	// RSS is the resident set size, in bytes.
	RSS int64
}

// ReadProc samples the CPU time and resident memory of a process.
func ReadProc(pid int) (ProcSample, error) {
	now := time.Now()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcSample{}, fmt.Errorf("read process %d: %w", pid, err)
	}
	// The command name may hold spaces; the fields after it are fixed.
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return ProcSample{}, fmt.Errorf("process %d: malformed stat", pid)
	}
	fields := strings.Fields(string(stat[end+1:]))
	// fields[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(fields) < 13 {
		return ProcSample{}, fmt.Errorf("process %d: short stat", pid)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return ProcSample{}, fmt.Errorf("process %d: stat times: %w", pid, err)
	}
	rss, err := statusKB(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:")
	if err != nil {
		return ProcSample{}, fmt.Errorf("process %d: %w", pid, err)
	}
	return ProcSample{
		At:  now,
		CPU: time.Duration(utime+stime) * time.Second / clockTicks,
		RSS: rss * 1024,
	}, nil
}

// CPUShare returns the CPU used between two samples of one process, as a
// fraction of one core.
func CPUShare(from, to ProcSample) float64 {
	wall := to.At.Sub(from.At)
	if wall <= 0 {
		return 0
	}
	return float64(to.CPU-from.CPU) / float64(wall)
}

// statusKB reads one "Name: N kB" line of a /proc status-like file.
func statusKB(path, name string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, name); ok {
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
	return 0, fmt.Errorf("%s: no %s line", path, name)
}

// Machine describes the host a measurement ran on, for the report header.
type Machine struct {
	// CPUs is the number of logical CPUs (nproc).
	CPUs int

	// CPUModel is the model name of the first CPU.
	CPUModel string

	// MemoryBytes is the total memory of the host.
	MemoryBytes int64

	// Kernel is the kernel release.
	Kernel string

	// GoVersion is the Go toolchain that built the tool.
	GoVersion string

	// Date is the instant the facts were read.
	Date time.Time
}

// ReadMachine reads the facts of the host. A fact it cannot read stays at
// its zero value.
func ReadMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Date: time.Now().UTC()}
	if kb, err := statusKB("/proc/meminfo", "MemTotal:"); err == nil {
		m.MemoryBytes = kb * 1024
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPUModel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), ":"))
				break
			}
		}
	}
	return m
}

// CountFDs counts the open file descriptors of a process and, among them,
// the sockets.
func CountFDs(pid int) (fds, sockets int, err error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, fmt.Errorf("process %d: %w", pid, err)
	}
	for _, e := range entries {
		fds++
		if target, err := os.Readlink(dir + "/" + e.Name()); err == nil && strings.HasPrefix(target, "socket:") {
			sockets++
		}
	}
	return fds, sockets, nil
}

// Threads returns the number of threads of a process.
func Threads(pid int) (int, error) {
	n, err := statusKB(fmt.Sprintf("/proc/%d/status", pid), "Threads:")
	return int(n), err
}

// OpenFilesLimit returns the soft limit of open files of a process, from
// /proc/<pid>/limits; zero when it is unlimited.
func OpenFilesLimit(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return 0, fmt.Errorf("process %d: %w", pid, err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				break
			}
			if fields[0] == "unlimited" {
				return 0, nil
			}
			return strconv.ParseInt(fields[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("process %d: no open files limit", pid)
}
