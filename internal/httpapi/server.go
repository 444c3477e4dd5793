package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// Limits of the API.
const (
	// MaxRequestBytes bounds the body of a request.
	MaxRequestBytes = 1 << 20

	// DefaultRecentLimit is the number of commands GET /v1/commands returns
	// without ?limit.
	DefaultRecentLimit = 50

	// MaxWait bounds ?wait= on a submission.
	MaxWait = 5 * time.Minute

	// RetryAfterSeconds is the Retry-After of a 503 when no leader is known.
	RetryAfterSeconds = 1
)

// Options configure the handler.
type Options struct {
	// Token is the bearer token the write endpoints demand; "" demands none.
	Token string

	// ProtectReads demands Token of the read endpoints too: the status
	// page, /v1/leadership, /v1/commands, /v1/commands/{id} and /metrics.
	// The health probes /livez, /readyz and /leaderz stay open. It has no
	// effect without a Token.
	ProtectReads bool

	// Metrics serves /metrics; nil answers 404.
	Metrics http.Handler

	// Logger receives request failures; nil discards them.
	Logger *slog.Logger
}

// NewHandler returns the handler of every endpoint listed in the package
// doc, served from backend.
func NewHandler(backend Backend, opts Options) http.Handler {
	s := &server{backend: backend, opts: opts}
	if s.opts.Logger == nil {
		s.opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	read := func(h http.HandlerFunc) http.HandlerFunc { return h }
	if opts.ProtectReads {
		read = s.auth
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", read(s.page))
	mux.HandleFunc("GET /v1/leadership", read(s.leadership))
	mux.HandleFunc("GET /v1/commands", read(s.recent))
	mux.HandleFunc("POST /v1/commands", s.auth(s.submit))
	mux.HandleFunc("POST /v1/commands/batch", s.auth(s.submitBatch))
	mux.HandleFunc("GET /v1/commands/{id}", read(s.command))
	mux.HandleFunc("POST /v1/commands/{id}/resolve", s.auth(s.resolve))
	// The health probes answer a load balancer or an orchestrator, which
	// carries no token; they tell only whether the member lives, takes
	// part and leads.
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) { writeText(w, http.StatusOK, "ok") })
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /leaderz", s.leaderz)
	if opts.Metrics != nil {
		mux.HandleFunc("GET /metrics", read(opts.Metrics.ServeHTTP))
	}
	return mux
}

type server struct {
	backend Backend
	opts    Options
}

// SubmitRequest is the body of POST /v1/commands.
type SubmitRequest struct {
	// ID is the idempotency key; a second submission of the same command
	// with the same ID gets the first one's state, and one of a different
	// command 409 Conflict (see [dispatch.Command.SameAs]). Required.
	ID     string `json:"id"`
	Device string `json:"device"`
	Action string `json:"action"`
	// Payload is the action's argument as text; PayloadBase64 as bytes. Give
	// at most one.
	Payload       string `json:"payload,omitempty"`
	PayloadBase64 string `json:"payload_base64,omitempty"`
	// Timeout is the command's time to live from now, such as "30s"; the
	// dispatcher's default when empty.
	Timeout    string            `json:"timeout,omitempty"`
	Attributes map[string]string `json:"attributes,omitempty"`
}

// ResolveRequest is the body of POST /v1/commands/{id}/resolve.
type ResolveRequest struct {
	// Action is "redispatch" or "cancel".
	Action string `json:"action"`
}

// ErrorResponse is the body of every answer that is not 2xx.
type ErrorResponse struct {
	Error     string `json:"error"`
	Leader    string `json:"leader,omitempty"`
	LeaderURL string `json:"leader_url,omitempty"`
	// ID and Differs answer a 409 to a submission whose ID is taken by a
	// different command: the ID, and the fields that differ (device,
	// action, payload, deadline, attributes, role).
	ID      string   `json:"id,omitempty"`
	Differs []string `json:"differs,omitempty"`
}

// auth demands the bearer token of the request before next, when a token is
// configured.
func (s *server) auth(next http.HandlerFunc) http.HandlerFunc {
	want := sha256.Sum256([]byte(s.opts.Token))
	return func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Token != "" {
			got, ok := bearerToken(r.Header.Get("Authorization"))
			// Comparing digests of equal length keeps the comparison's
			// time independent of the token's content and length.
			sum := sha256.Sum256([]byte(got))
			if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="dispatcher"`)
				writeError(w, http.StatusUnauthorized, ErrorResponse{Error: "missing or wrong bearer token"})
				return
			}
		}
		next(w, r)
	}
}

// bearerToken returns the token of an Authorization header of the Bearer
// scheme. The scheme's name is matched without regard to case (RFC 9110
// section 11.1, RFC 6750 section 2.1).
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimLeft(token, " ")
	return token, token != ""
}

func (s *server) leadership(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.backend.Leadership())
}

func (s *server) recent(w http.ResponseWriter, r *http.Request) {
	limit := DefaultRecentLimit
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, ErrorResponse{Error: "limit: want a number above 0"})
			return
		}
		limit = n
	}
	writeJSON(w, http.StatusOK, s.backend.Recent(limit))
}

func (s *server) command(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	st, ok := s.backend.Command(id)
	if !ok {
		// A standby knows little: the leader may know the command.
		if l := s.backend.Leadership(); !l.Leader && l.HolderURL != "" {
			redirect(w, r, l.HolderURL)
			return
		}
		writeError(w, http.StatusNotFound, ErrorResponse{Error: "unknown command " + strconv.Quote(id)})
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *server) submit(w http.ResponseWriter, r *http.Request) {
	var req SubmitRequest
	if !decodeBody(w, r, &req) {
		return
	}
	wait, err := parseWait(r.URL.Query().Get("wait"))
	if err != nil {
		writeError(w, http.StatusBadRequest, ErrorResponse{Error: err.Error()})
		return
	}
	cmd, err := req.command(time.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, ErrorResponse{Error: err.Error()})
		return
	}
	st, err := s.backend.Submit(r.Context(), cmd, wait)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	code := http.StatusOK
	if st.State == StatePending {
		code = http.StatusAccepted
	}
	w.Header().Set("Location", "/v1/commands/"+cmd.ID)
	writeJSON(w, code, st)
}

func (s *server) resolve(w http.ResponseWriter, r *http.Request) {
	var req ResolveRequest
	if !decodeBody(w, r, &req) {
		return
	}
	var action dispatch.ResolveAction
	switch req.Action {
	case dispatch.ResolveRedispatch.String():
		action = dispatch.ResolveRedispatch
	case dispatch.ResolveCancel.String():
		action = dispatch.ResolveCancel
	default:
		writeError(w, http.StatusBadRequest, ErrorResponse{Error: "action: want redispatch or cancel"})
		return
	}
	st, err := s.backend.Resolve(r.Context(), r.PathValue("id"), action)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// readyz answers 200 while the member takes part in the role, and 503 with
// the member's state and the reason otherwise.
func (s *server) readyz(w http.ResponseWriter, _ *http.Request) {
	if err := s.backend.Ready(); err != nil {
		writeText(w, http.StatusServiceUnavailable, "not ready: "+string(s.backend.Leadership().State)+": "+err.Error())
		return
	}
	writeText(w, http.StatusOK, "ok")
}

// leaderz answers 200 only on a leader that takes commands: a member that
// holds the lease while it recovers or drains would refuse them.
func (s *server) leaderz(w http.ResponseWriter, _ *http.Request) {
	l := s.backend.Leadership()
	switch {
	case l.Leader && l.State == StateLeading:
		writeText(w, http.StatusOK, string(StateLeading)+": term "+l.Term.String()+" token "+l.Token)
	case l.Leader && l.State == StateRecovering:
		writeText(w, http.StatusServiceUnavailable, string(StateRecovering)+": holds the lease, term "+l.Term.String()+"; reading the role's log, takes no command yet")
	case l.Leader && l.State == StateDraining:
		writeText(w, http.StatusServiceUnavailable, string(StateDraining)+": holds the lease, term "+l.Term.String()+"; stopping, takes no new command")
	case l.Leader:
		writeText(w, http.StatusServiceUnavailable, "holds the lease, term "+l.Term.String()+", in state "+strconv.Quote(string(l.State))+"; takes no command")
	default:
		writeText(w, http.StatusServiceUnavailable, string(StateStandby)+": "+dashIfEmpty(l.Holder)+" leads")
	}
}

// fail answers a backend error with its status.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var notLeader *NotLeaderError
	if errors.As(err, &notLeader) {
		if notLeader.LeaderURL != "" {
			redirect(w, r, notLeader.LeaderURL)
			return
		}
		w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
		writeError(w, http.StatusServiceUnavailable, ErrorResponse{Error: err.Error(), Leader: notLeader.Leader})
		return
	}
	code, body := errorAnswer(err)
	switch code {
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
	case http.StatusInternalServerError:
		s.opts.Logger.Warn("httpapi: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeError(w, code, body)
}

// errorAnswer returns the status and the body that answer a backend error
// other than a *NotLeaderError: the refusals of the package doc, 404 for a
// command the member does not know, 503 when the dispatcher halted or the
// device is down, and 500 for anything else.
func errorAnswer(err error) (int, ErrorResponse) {
	var invalid *dispatch.InvalidCommandError
	var unknownDevice *dispatch.UnknownDeviceError
	var unsupported *dispatch.UnsupportedCommandError
	var conflict *dispatch.IDConflictError
	var unknownCmd *dispatch.UnknownCommandError
	var notInDoubt *dispatch.NotInDoubtError
	body := ErrorResponse{Error: err.Error()}
	switch {
	case errors.As(err, &conflict):
		body.ID, body.Differs = conflict.ID, conflict.Differs
		return http.StatusConflict, body
	case errors.As(err, &invalid):
		return http.StatusBadRequest, body
	case errors.As(err, &unknownDevice), errors.As(err, &unsupported):
		return http.StatusUnprocessableEntity, body
	case errors.Is(err, ErrUnknownCommand), errors.As(err, &unknownCmd):
		return http.StatusNotFound, body
	case errors.As(err, &notInDoubt):
		return http.StatusConflict, body
	case errors.Is(err, dispatch.ErrHalted), errors.Is(err, dispatch.ErrIntakeStopped), errors.As(err, new(*dispatch.DeviceUnavailableError)):
		return http.StatusServiceUnavailable, body
	default:
		return http.StatusInternalServerError, body
	}
}

// redirect sends the client to the same request on the leader.
func redirect(w http.ResponseWriter, r *http.Request, leaderURL string) {
	target := strings.TrimRight(leaderURL, "/") + r.URL.RequestURI()
	w.Header().Set("Location", target)
	writeJSON(w, http.StatusTemporaryRedirect, ErrorResponse{Error: "not the leader", LeaderURL: leaderURL})
}

// command builds the dispatch command of a submission.
func (req SubmitRequest) command(now time.Time) (dispatch.Command, error) {
	cmd := dispatch.Command{
		ID:          req.ID,
		Device:      req.Device,
		Action:      req.Action,
		SubmittedAt: now,
		Attributes:  req.Attributes,
	}
	switch {
	case req.Payload != "" && req.PayloadBase64 != "":
		return cmd, errors.New("give payload or payload_base64, not both")
	case req.PayloadBase64 != "":
		p, err := base64.StdEncoding.DecodeString(req.PayloadBase64)
		if err != nil {
			return cmd, errors.New("payload_base64: not base64")
		}
		cmd.Payload = p
	case req.Payload != "":
		cmd.Payload = []byte(req.Payload)
	}
	if req.Timeout != "" {
		d, err := time.ParseDuration(req.Timeout)
		if err != nil || d <= 0 {
			return cmd, errors.New("timeout: want a duration above 0, such as 30s")
		}
		cmd.Deadline = now.Add(d)
	}
	if req.ID == "" {
		return cmd, errors.New("id: required, the command's idempotency key")
	}
	if req.Device == "" {
		return cmd, errors.New("device: required")
	}
	return cmd, nil
}

func parseWait(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > MaxWait {
		return 0, errors.New("wait: want a duration from 0 to " + MaxWait.String())
	}
	return d, nil
}

func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	return decodeBodyUpTo(w, r, v, MaxRequestBytes)
}

func decodeBodyUpTo(w http.ResponseWriter, r *http.Request, v any, limit int64) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, ErrorResponse{Error: "body: " + err.Error()})
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, e ErrorResponse) { writeJSON(w, code, e) }

func writeText(w http.ResponseWriter, code int, s string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, s+"\n")
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "no member"
	}
	return s
}
