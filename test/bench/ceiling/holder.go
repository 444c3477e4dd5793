package ceiling

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// The kinds of [HolderEvent] that cmd/holder writes.
const (
	// EventAcquired: the member holds the role; Token and Deadline are set.
	EventAcquired = "acquired"
	// EventLease: a renewal committed; Deadline is the new deadline.
	EventLease = "lease"
	// EventLost: the leadership ended without a resignation; Err says why.
	EventLost = "lost"
	// EventResigned: Resign returned for the role.
	EventResigned = "resigned"
	// EventReady: every role the process was asked to hold is held.
	EventReady = "ready"
	// EventOps: the transport operations counted so far, in Ops.
	EventOps = "ops"
	// EventError: the process failed; Err says why.
	EventError = "error"
)

// The prefixes of the counters of an EventOps.
const (
	// OpPrefix prefixes the count of a coordination transport operation.
	OpPrefix = "op:"
	// RequestPrefix prefixes the count of a Kafka request, by its name.
	RequestPrefix = "req:"
	// GoroutinesCounter is the number of goroutines of the process.
	GoroutinesCounter = "goroutines"
)

// HolderEvent is one line that cmd/holder writes to its standard output, as
// JSON. The measurement drivers read them to time a failover from outside
// the processes.
type HolderEvent struct {
	// Ev is the kind of event, one of the Event constants.
	Ev string `json:"ev"`

	// Role and Member name the role and the member of the event.
	Role   string `json:"role,omitempty"`
	Member string `json:"member,omitempty"`

	// Token is the fencing token, in its producer_id:epoch form.
	Token string `json:"token,omitempty"`

	// Deadline is the lease deadline, in milliseconds since the Unix epoch.
	Deadline int64 `json:"deadline,omitempty"`

	// At is the instant of the event, in nanoseconds since the Unix epoch,
	// read from the host clock, which the driver shares.
	At int64 `json:"at"`

	// Err is the error of a lost leadership or a failure.
	Err string `json:"err,omitempty"`

	// Ops counts the transport operations by name, for EventOps.
	Ops map[string]int64 `json:"ops,omitempty"`
}

// Time returns At as a time.
func (e HolderEvent) Time() time.Time { return time.Unix(0, e.At) }

// Holder is a running cmd/holder process and the stream of its events.
type Holder struct {
	// Member is the member id the process competes as.
	Member string

	cmd    *exec.Cmd
	events chan HolderEvent
	exited chan struct{} // closed when the process has exited and its output is drained
	err    error         // the wait error, set before exited closes

	mu   sync.Mutex
	last map[string]HolderEvent // the latest event of each kind
}

// StartHolder starts cmd/holder from its binary with the given arguments;
// stderr goes to the given writer (nil discards it). The caller reads the
// events with Next and ends the process with Kill or Terminate, then Wait.
func StartHolder(bin, member string, stderr io.Writer, args ...string) (*Holder, error) {
	cmd := exec.Command(bin, append([]string{"-member", member}, args...)...)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start holder %s: %w", member, err)
	}
	h := &Holder{
		Member: member,
		cmd:    cmd,
		events: make(chan HolderEvent, 4096),
		exited: make(chan struct{}),
		last:   map[string]HolderEvent{},
	}
	go h.read(out)
	return h, nil
}

// read decodes the event lines until the process closes its output, then
// reaps the process. It is the one goroutine of a Holder and ends with the
// process.
func (h *Holder) read(out io.Reader) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var ev HolderEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		h.mu.Lock()
		h.last[ev.Ev] = ev
		h.mu.Unlock()
		select {
		case h.events <- ev:
		default: // nobody reads this kind; the latest stays in last
		}
	}
	h.err = h.cmd.Wait()
	close(h.events)
	close(h.exited)
}

// PID returns the process id.
func (h *Holder) PID() int { return h.cmd.Process.Pid }

// Last returns the latest event of a kind, and whether there was one.
func (h *Holder) Last(kind string) (HolderEvent, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ev, ok := h.last[kind]
	return ev, ok
}

// ErrHolderExited reports that a holder process exited while an event was
// awaited.
var ErrHolderExited = errors.New("ceiling: holder process exited")

// Next returns the next event for which match reports true, dropping the
// others. It fails when ctx ends or the process exits first.
func (h *Holder) Next(ctx context.Context, match func(HolderEvent) bool) (HolderEvent, error) {
	for {
		select {
		case <-ctx.Done():
			return HolderEvent{}, ctx.Err()
		case ev, ok := <-h.events:
			if !ok {
				return HolderEvent{}, fmt.Errorf("%w: %s (%v)", ErrHolderExited, h.Member, h.err)
			}
			if ev.Ev == EventError {
				return HolderEvent{}, fmt.Errorf("holder %s: %s", h.Member, ev.Err)
			}
			if match(ev) {
				return ev, nil
			}
		}
	}
}

// Signal sends a signal to the process.
func (h *Holder) Signal(sig syscall.Signal) error { return h.cmd.Process.Signal(sig) }

// Kill sends SIGKILL and returns the instant just before it was sent.
func (h *Holder) Kill() (time.Time, error) {
	at := time.Now()
	return at, h.cmd.Process.Signal(syscall.SIGKILL)
}

// Terminate sends SIGTERM, which makes the holder resign every role and exit,
// and returns the instant just before it was sent.
func (h *Holder) Terminate() (time.Time, error) {
	at := time.Now()
	return at, h.cmd.Process.Signal(syscall.SIGTERM)
}

// Wait waits until the process exited, at most until ctx ends, in which case
// it kills the process.
func (h *Holder) Wait(ctx context.Context) error {
	select {
	case <-h.exited:
		return h.err
	case <-ctx.Done():
		_ = h.cmd.Process.Signal(syscall.SIGKILL)
		<-h.exited
		return ctx.Err()
	}
}

// Exited returns a channel closed when the process has exited.
func (h *Holder) Exited() <-chan struct{} { return h.exited }

// Ops asks the process for its transport operation counts (SIGUSR1) and
// returns them.
func (h *Holder) Ops(ctx context.Context) (map[string]int64, error) {
	if err := h.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		return nil, err
	}
	ev, err := h.Next(ctx, func(ev HolderEvent) bool { return ev.Ev == EventOps })
	return ev.Ops, err
}
