package ceiling

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Roles describes the measurement of one process that holds many roles.
type Roles struct {
	// HolderBin is the path of the cmd/holder binary.
	HolderBin string

	// Brokers are the bootstrap addresses; their ports identify the
	// connections whose requests are counted.
	Brokers []string

	// RolePrefix names the roles, <prefix>-0000 and up; use a fresh one per
	// run.
	RolePrefix string

	// Window is how long the process is observed once it holds every role.
	Window time.Duration

	// Lease, Renew, Stagger and Poll are the timings of every role.
	Lease, Renew, Stagger, Poll time.Duration

	// LogTopic and RequestsTopic, when set, make the process run a real
	// dispatcher (no-op device, intake from the requests topic) for every
	// role it holds; both topics have Partitions partitions.
	LogTopic, RequestsTopic string
	Partitions              int

	// Stderr receives the standard error of the process; nil discards it.
	Stderr io.Writer
}

// RolesResult is what holding a number of roles costs one process.
type RolesResult struct {
	// Roles is the number of roles held.
	Roles int

	// Acquire is the time from the start of the process until it held every
	// role.
	Acquire time.Duration

	// CPU is the CPU the process used during the window, in cores.
	CPU float64

	// RSS is the resident memory of the process at the end of the window.
	RSS int64

	// RequestsPerSec is the rate of Kafka requests the process wrote to the
	// brokers during the window, counted by a franz-go broker-write hook on
	// every client of the transport.
	RequestsPerSec float64

	// SegmentsPerSec is the rate of TCP data segments the process sent to
	// the brokers during the window, as ss(8) reports them: the wire's
	// view of the same traffic, a cross-check of RequestsPerSec.
	SegmentsPerSec float64

	// OpsPerSec is the rate during the window of each counter of the
	// process: coordination transport operations (OpPrefix) and Kafka
	// requests by name (RequestPrefix).
	OpsPerSec map[string]float64

	// Sockets and FDs are the open sockets and file descriptors of the
	// process at the end of the window (/proc/<pid>/fd), Threads its
	// threads (/proc/<pid>/status), Goroutines its goroutines (reported by
	// the process).
	Sockets, FDs, Threads int
	Goroutines            int64

	// MaxFiles is the process's soft limit of open files; zero when
	// unlimited.
	MaxFiles int64

	// Dispatchers reports whether every role ran a dispatcher.
	Dispatchers bool
}

// MeasureRoles starts one cmd/holder that takes n roles, waits until it
// holds them all, observes it for the window, and stops it.
func MeasureRoles(ctx context.Context, cfg Roles, n int) (RolesResult, error) {
	ports, err := brokerPorts(cfg.Brokers)
	if err != nil {
		return RolesResult{}, err
	}
	started := time.Now()
	args := []string{"-brokers", strings.Join(cfg.Brokers, ","), "-role", fmt.Sprintf("%s-%d", cfg.RolePrefix, n), "-roles", strconv.Itoa(n),
		"-lease", cfg.Lease.String(), "-renew", cfg.Renew.String(), "-stagger", cfg.Stagger.String(), "-poll", cfg.Poll.String()}
	h, err := StartHolder(cfg.HolderBin, "roles-holder", cfg.Stderr, append(args, dispatchArgs(cfg)...)...)
	if err != nil {
		return RolesResult{}, err
	}
	defer func() {
		_, _ = h.Terminate()
		wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = h.Wait(wctx)
	}()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	ready, err := h.Next(rctx, func(ev HolderEvent) bool { return ev.Ev == EventReady })
	cancel()
	if err != nil {
		return RolesResult{}, fmt.Errorf("holding %d roles: %w", n, err)
	}
	res := RolesResult{Roles: n, Acquire: ready.Time().Sub(started), Dispatchers: cfg.LogTopic != ""}

	// Let the acquisition burst pass before the window opens.
	select {
	case <-time.After(min(cfg.Renew, 5*time.Second)):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	ops0, err := opsOf(ctx, h)
	if err != nil {
		return res, err
	}
	p0, err := ReadProc(h.PID())
	if err != nil {
		return res, err
	}
	s0, err := SegmentsTo(h.PID(), ports)
	if err != nil {
		return res, err
	}
	select {
	case <-time.After(cfg.Window):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	p1, err := ReadProc(h.PID())
	if err != nil {
		return res, err
	}
	s1, err := SegmentsTo(h.PID(), ports)
	if err != nil {
		return res, err
	}
	ops1, err := opsOf(ctx, h)
	if err != nil {
		return res, err
	}
	secs := p1.At.Sub(p0.At).Seconds()
	res.CPU = CPUShare(p0, p1)
	res.RSS = p1.RSS
	res.SegmentsPerSec = float64(s1-s0) / secs
	res.OpsPerSec = map[string]float64{}
	res.Goroutines = ops1[GoroutinesCounter]
	if res.FDs, res.Sockets, err = CountFDs(h.PID()); err != nil {
		return res, err
	}
	if res.Threads, err = Threads(h.PID()); err != nil {
		return res, err
	}
	if res.MaxFiles, err = OpenFilesLimit(h.PID()); err != nil {
		return res, err
	}
	for op, c := range ops1 {
		if op == GoroutinesCounter {
			continue
		}
		if d := c - ops0[op]; d > 0 {
			res.OpsPerSec[op] = float64(d) / secs
			if strings.HasPrefix(op, RequestPrefix) {
				res.RequestsPerSec += float64(d) / secs
			}
		}
	}
	return res, nil
}

// dispatchArgs are the holder flags that make it run dispatchers.
func dispatchArgs(cfg Roles) []string {
	if cfg.LogTopic == "" {
		return nil
	}
	return []string{"-log-topic", cfg.LogTopic, "-requests-topic", cfg.RequestsTopic, "-partitions", strconv.Itoa(max(1, cfg.Partitions))}
}

// opsOf asks a holder for its counters, bounded by ten seconds.
func opsOf(ctx context.Context, h *Holder) (map[string]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return h.Ops(ctx)
}

// brokerPorts returns the ports of the bootstrap addresses.
func brokerPorts(brokers []string) (map[int]bool, error) {
	ports := map[int]bool{}
	for _, b := range brokers {
		i := strings.LastIndexByte(b, ':')
		p, err := strconv.Atoi(b[i+1:])
		if i < 0 || err != nil {
			return nil, fmt.Errorf("broker address %q has no port", b)
		}
		ports[p] = true
	}
	return ports, nil
}

var (
	ssPID      = regexp.MustCompile(`pid=(\d+),`)
	ssDataSegs = regexp.MustCompile(`data_segs_out:(\d+)`)
)

// SegmentsTo sums the TCP data segments that a process has sent on its open
// connections to the given peer ports, as ss(8) reports them. Connections
// that closed are not counted, so compare two readings of a process whose
// connections stay open.
func SegmentsTo(pid int, ports map[int]bool) (int64, error) {
	out, err := exec.Command("ss", "-H", "-t", "-i", "-n", "-p", "state", "established").Output()
	if err != nil {
		return 0, fmt.Errorf("ss: %w", err)
	}
	var total int64
	counting := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		if line[0] != ' ' && line[0] != '\t' {
			counting = connectionOf(line, pid, ports)
			continue
		}
		if counting {
			if m := ssDataSegs.FindStringSubmatch(line); m != nil {
				n, _ := strconv.ParseInt(m[1], 10, 64)
				total += n
			}
			counting = false
		}
	}
	return total, sc.Err()
}

// connectionOf reports whether an ss connection line belongs to pid and
// goes to one of the ports.
func connectionOf(line string, pid int, ports map[int]bool) bool {
	m := ssPID.FindStringSubmatch(line)
	if m == nil || m[1] != strconv.Itoa(pid) {
		return false
	}
	fields := strings.Fields(line)
	// Recv-Q Send-Q Local Peer Process
	if len(fields) < 4 {
		return false
	}
	peer := fields[3]
	i := strings.LastIndexByte(peer, ':')
	port, err := strconv.Atoi(peer[i+1:])
	return i >= 0 && err == nil && ports[port]
}

// errNoSS reports that ss(8) is missing.
var errNoSS = errors.New("ceiling: ss(8) is needed to count broker requests")

// CheckSS reports whether ss(8) can be run.
func CheckSS() error {
	if _, err := exec.LookPath("ss"); err != nil {
		return errNoSS
	}
	return nil
}
