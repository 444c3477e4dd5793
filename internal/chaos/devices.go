package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/devices/fence"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// The two devices of a chaos run.
const (
	// FencedDevice refuses any term lower than the highest it has seen.
	FencedDevice = "fenced"

	// PlainDevice obeys every call, as hardware without a fence does.
	PlainDevice = "plain"
)

// Verdicts of a device call.
const (
	VerdictObeyed  = "obeyed"
	VerdictRefused = "refused"
)

// Call is one call that a device received, as its record file holds it.
type Call struct {
	// Device is the device name, FencedDevice or PlainDevice.
	Device string `json:"device"`

	// Role is the role whose leader dispatched; empty when the device
	// cannot tell.
	Role string `json:"role,omitempty"`

	// ID is the command ID.
	ID string `json:"id"`

	// Term is the term the dispatcher passed; 0 for none.
	Term int64 `json:"term"`

	// Token is the fencing token the dispatcher passed, producer_id:epoch.
	Token string `json:"token"`

	// Member is the member that dispatched.
	Member string `json:"member"`

	// At is when the device received the call, in Unix nanoseconds.
	At int64 `json:"at"`

	// Verdict says whether the device acted.
	Verdict string `json:"verdict"`
}

// authority writes the call's term and token as coordination.Authority
// writes them, or the raw token when it does not parse.
func (c Call) authority() string {
	tok, err := coordination.ParseFencingToken(c.Token)
	if err != nil {
		return "term " + coordination.Term(c.Term).String() + " token " + c.Token
	}
	return coordination.Authority{Term: coordination.Term(c.Term), Token: tok}.String()
}

// DeviceServer is the hardware of a chaos run: an HTTP service on loopback
// that plays both devices and records every call to <dir>/<device>.jsonl.
// The fencing device keeps its highest term with devices/fence, as
// firmware or a gateway would.
// Its calls are serialised, so the record order is the order of arrival.
type DeviceServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}

	mu    sync.Mutex
	files map[string]*os.File
	fence *fence.Store // the fencing device's highest term, devices/fence
}

// StartDeviceServer listens on 127.0.0.1 and serves the devices until Close.
func StartDeviceServer(dir string) (*DeviceServer, error) {
	files := map[string]*os.File{}
	for _, name := range []string{FencedDevice, PlainDevice} {
		f, err := os.OpenFile(filepath.Join(dir, name+".jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		files[name] = f
	}
	store, err := fence.Open(filepath.Join(dir, "fence.state"))
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &DeviceServer{ln: ln, files: files, fence: store, done: make(chan struct{})}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// URL is the base URL the members' HTTPDevice calls.
func (s *DeviceServer) URL() string { return "http://" + s.ln.Addr().String() }

// Close stops the server, waits for it, and closes the record files.
func (s *DeviceServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.files {
		err = errors.Join(err, f.Close())
	}
	return err
}

func (s *DeviceServer) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	device := q.Get("device")
	call := Call{Device: device, ID: q.Get("id"), Token: q.Get("token"), Member: q.Get("member")}
	token, err := coordination.ParseFencingToken(call.Token)
	if err == nil {
		call.Term, err = strconv.ParseInt(q.Get("term"), 10, 64)
	}
	if err != nil || call.ID == "" || (device != FencedDevice && device != PlainDevice) {
		http.Error(w, "bad call", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	call.At = time.Now().UnixNano()
	call.Verdict = VerdictObeyed
	if device == FencedDevice {
		err := s.fence.Admit(FencedDevice, coordination.Authority{Term: coordination.Term(call.Term), Token: token})
		if err != nil {
			if !errors.Is(err, fence.ErrStaleTerm) && !errors.Is(err, fence.ErrNoTerm) {
				s.mu.Unlock()
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			call.Verdict = VerdictRefused
		}
	}
	line, _ := json.Marshal(call)
	_, werr := s.files[device].Write(append(line, '\n'))
	s.mu.Unlock()
	if werr != nil {
		http.Error(w, werr.Error(), http.StatusInternalServerError)
		return
	}
	if call.Verdict == VerdictRefused {
		http.Error(w, "term below the highest seen", http.StatusConflict)
		return
	}
	_, _ = io.WriteString(w, "ok")
}

// ReadCalls reads the record file of one device, in arrival order.
func ReadCalls(dir, device string) ([]Call, error) {
	f, err := os.Open(filepath.Join(dir, device+".jsonl"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var calls []Call
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c Call
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return nil, fmt.Errorf("%s: %w", device, err)
		}
		calls = append(calls, c)
	}
	return calls, sc.Err()
}

// HTTPDevice is the dispatch.Device of a member: it calls one device of a
// DeviceServer. A refusal is dispatch.Rejected; a call that never reached
// the server is dispatch.Retryable; anything else leaves the command in
// doubt.
type HTTPDevice struct {
	// BaseURL is DeviceServer.URL.
	BaseURL string

	// Name is FencedDevice or PlainDevice.
	Name string

	// Member is the member id sent with each call.
	Member string

	// Client makes the calls; its timeout bounds each one.
	Client *http.Client

	// Redispatch is what RedispatchSafe answers.
	Redispatch bool
}

var (
	_ dispatch.Device          = (*HTTPDevice)(nil)
	_ dispatch.AuthorityDevice = (*HTTPDevice)(nil)
	_ dispatch.Redispatcher    = (*HTTPDevice)(nil)
)

// Dispatch implements dispatch.Device: it calls under coordination.NoTerm,
// which the fencing device refuses.
func (d *HTTPDevice) Dispatch(ctx context.Context, cmd dispatch.Command, token coordination.FencingToken) (dispatch.Result, error) {
	return d.DispatchUnder(ctx, cmd, coordination.Authority{Term: coordination.NoTerm, Token: token})
}

// DispatchUnder implements dispatch.AuthorityDevice.
func (d *HTTPDevice) DispatchUnder(ctx context.Context, cmd dispatch.Command, authority coordination.Authority) (dispatch.Result, error) {
	q := url.Values{"device": {d.Name}, "id": {cmd.ID}, "term": {strconv.FormatInt(int64(authority.Term), 10)},
		"token": {authority.Token.String()}, "member": {d.Member}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.BaseURL+"/dispatch?"+q.Encode(), nil)
	if err != nil {
		return dispatch.Result{}, dispatch.Rejected(err)
	}
	resp, err := d.Client.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return dispatch.Result{}, dispatch.Retryable(err)
		}
		return dispatch.Result{}, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	switch resp.StatusCode {
	case http.StatusOK:
		return dispatch.Result{Detail: string(body)}, nil
	case http.StatusConflict:
		return dispatch.Result{}, dispatch.Rejected(fmt.Errorf("%s refused %s", d.Name, authority))
	default:
		return dispatch.Result{}, fmt.Errorf("%s answered %s", d.Name, resp.Status)
	}
}

// RedispatchSafe implements dispatch.Redispatcher.
func (d *HTTPDevice) RedispatchSafe(dispatch.Command) bool { return d.Redispatch }
