// Package recorder is the recording device of the dispatch tests: a Server
// that plays the hardware and records every dispatch that reaches it, with
// its term and token, and a Device, the dispatch.Device that drives it over HTTP on
// loopback, from the test process or from a member process.
//
// At the moment it is called, a Device can read the command log
// read_committed and report whether the command's Issued record is there,
// so a test proves "durable before dispatch" from the device's side.
//
// The Server plays two kinds of hardware: a fencing one, which refuses any
// term below the highest it has admitted (a devices/fence Store in a
// directory of its own), and a plain one, which accepts everything and where
// a double dispatch after a failover shows up, for the tests to count.
//
// What it does not model: a device that acts and then fails to answer (every
// refusal happens before the action), a slow network, and persistence across
// a restart of the Server: Close removes the fence's state.
package recorder

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/devices/fence"
)

// Dispatch is one call that reached the Server.
type Dispatch struct {
	Device    string                    `json:"device"`
	CommandID string                    `json:"command_id"`
	Term      coordination.Term         `json:"term"`
	Token     coordination.FencingToken `json:"token"`
	Member    string                    `json:"member"`
	// Logged reports whether the Device found the command's Issued record
	// in the committed log when it was called, LogChecked whether it looked,
	// and LogLag how long after the call the record became visible to a
	// read_committed reader (zero when the first read found it; see
	// LogLagBound).
	Logged     bool          `json:"logged"`
	LogChecked bool          `json:"log_checked"`
	LogLag     time.Duration `json:"log_lag"`
	// Accepted reports whether the hardware acted: false for a refusal by
	// the fence, a failure, or a rejection.
	Accepted bool      `json:"accepted"`
	At       time.Time `json:"at"`
}

// Behaviour is how the Server answers for one device name.
type Behaviour struct {
	// Fencing turns the fence on: a term below the highest admitted, or a
	// dispatch without a term, is refused, and the Device returns a rejected
	// error.
	Fencing bool

	// FailFirst makes the first FailFirst calls of each command fail
	// without acting; the Device returns a retryable error.
	FailFirst int

	// Reject refuses every command; the Device returns a rejected error.
	Reject bool

	// Block holds every call until the caller goes away.
	Block bool
}

// RejectAction is the action that the Server refuses for every device,
// without acting: a poison command.
const RejectAction = "reject"

// Server is the hardware side. It is safe for concurrent use.
type Server struct {
	listener net.Listener
	http     *http.Server
	done     chan struct{}
	fenceDir string

	mu         sync.Mutex
	behaviours map[string]Behaviour
	fence      *fence.Store   // keyed by device name
	calls      map[string]int // by device and command
	dispatches []Dispatch
	blocked    chan Dispatch
}

// NewServer starts a Server on a free loopback port, with its fence state in
// a new temporary directory. Close stops it and removes that directory.
func NewServer() (*Server, error) {
	dir, err := os.MkdirTemp("", "recorder-fence-")
	if err != nil {
		return nil, fmt.Errorf("recorder: fence directory: %w", err)
	}
	store, err := fence.Open(filepath.Join(dir, "fence.json"))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("recorder: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("recorder: listen: %w", err)
	}
	s := &Server{
		listener:   l,
		done:       make(chan struct{}),
		fenceDir:   dir,
		behaviours: make(map[string]Behaviour),
		fence:      store,
		calls:      make(map[string]int),
		blocked:    make(chan Dispatch, 64),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /dispatch", s.serveDispatch)
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.http.Serve(l)
	}()
	return s, nil
}

// URL is the base URL that a Device posts to.
func (s *Server) URL() string { return "http://" + s.listener.Addr().String() }

// Close stops the Server, waits for it, and removes the fence's state.
func (s *Server) Close() {
	_ = s.http.Close()
	<-s.done
	_ = os.RemoveAll(s.fenceDir)
}

// Behave sets the behaviour of one device name.
func (s *Server) Behave(device string, b Behaviour) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.behaviours[device] = b
}

// Dispatches returns every call so far, in arrival order.
func (s *Server) Dispatches() []Dispatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Dispatch(nil), s.dispatches...)
}

// Blocked receives each call that a Block behaviour holds, as it arrives.
func (s *Server) Blocked() <-chan Dispatch { return s.blocked }

// request is the body a Device posts.
type request struct {
	Device     string        `json:"device"`
	CommandID  string        `json:"command_id"`
	Action     string        `json:"action"`
	Term       int64         `json:"term"`
	Token      string        `json:"token"`
	Member     string        `json:"member"`
	Logged     bool          `json:"logged"`
	LogChecked bool          `json:"log_checked"`
	LogLag     time.Duration `json:"log_lag"`
}

// Answers of the Server, as HTTP status codes.
const (
	statusActed    = http.StatusOK
	statusFenced   = http.StatusConflict
	statusRejected = http.StatusUnprocessableEntity
	statusFailed   = http.StatusServiceUnavailable
)

func (s *Server) serveDispatch(w http.ResponseWriter, r *http.Request) {
	var req request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	token, err := coordination.ParseFencingToken(req.Token)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	d := Dispatch{Device: req.Device, CommandID: req.CommandID, Term: coordination.Term(req.Term), Token: token, Member: req.Member,
		Logged: req.Logged, LogChecked: req.LogChecked, LogLag: req.LogLag, At: time.Now()}

	s.mu.Lock()
	b := s.behaviours[req.Device]
	key := req.Device + "\x00" + req.CommandID
	s.calls[key]++
	n := s.calls[key]
	status := statusActed
	switch {
	case b.Block:
		s.dispatches = append(s.dispatches, d)
		s.mu.Unlock()
		select {
		case s.blocked <- d:
		default:
		}
		<-r.Context().Done()
		return
	case b.Reject || req.Action == RejectAction:
		status = statusRejected
	case n <= b.FailFirst:
		status = statusFailed
	case b.Fencing:
		err := s.fence.Admit(req.Device, coordination.Authority{Term: d.Term, Token: token})
		switch {
		case errors.Is(err, fence.ErrStaleTerm), errors.Is(err, fence.ErrNoTerm), errors.Is(err, fence.ErrNoToken):
			status = statusFenced
		case err != nil:
			// The state could not be written: refuse without acting.
			status = statusFailed
		}
	}
	d.Accepted = status == statusActed
	s.dispatches = append(s.dispatches, d)
	s.mu.Unlock()
	w.WriteHeader(status)
}
