package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// Limits of a batch submission.
const (
	// MaxBatchCommands bounds the commands of one POST /v1/commands/batch.
	MaxBatchCommands = 1000

	// MaxBatchRequestBytes bounds the body of one POST /v1/commands/batch.
	MaxBatchRequestBytes = 8 << 20
)

// BatchRequest is the body of POST /v1/commands/batch.
type BatchRequest struct {
	// Commands are submitted as one batch (dispatch.Dispatcher.SubmitBatch):
	// their Issued records share the leader's transactions. From 1 to
	// MaxBatchCommands.
	Commands []SubmitRequest `json:"commands"`
}

// BatchResult is what became of one command of a batch: its state, or the
// error that refused it. A Backend's SubmitBatch returns one per command,
// in the order of the batch.
type BatchResult struct {
	State CommandState
	Err   error
}

// BatchResponse is the body of a 200 answer to POST /v1/commands/batch: one
// item per command, in the order of the request.
type BatchResponse struct {
	Results []BatchItem `json:"results"`
}

// BatchItem is the answer for one command of a batch.
type BatchItem struct {
	// Status is what POST /v1/commands would have answered for the command
	// alone: 200 settled, 202 pending, or the status of its refusal (400,
	// 409, 422, 503).
	Status int `json:"status"`
	// Command is the command's state when Status is 200 or 202.
	Command *CommandState `json:"command,omitempty"`
	// Error says why the command was refused otherwise.
	Error *ErrorResponse `json:"error,omitempty"`
}

// submitBatch takes a batch of commands. The request as a whole is refused
// (400) when its body is malformed, holds no command or more than
// MaxBatchCommands, or its ?wait= is; on a standby it is redirected or
// answered 503 as a single submission is. Otherwise it is answered 200, and
// each command's item says what became of it: a malformed command is
// refused alone, with 400 in its item, and the others go on.
func (s *server) submitBatch(w http.ResponseWriter, r *http.Request) {
	var req BatchRequest
	if !decodeBodyUpTo(w, r, &req, MaxBatchRequestBytes) {
		return
	}
	if n := len(req.Commands); n == 0 || n > MaxBatchCommands {
		writeError(w, http.StatusBadRequest, ErrorResponse{Error: fmt.Sprintf("commands: want 1 to %d, got %d", MaxBatchCommands, n)})
		return
	}
	wait, err := parseWait(r.URL.Query().Get("wait"))
	if err != nil {
		writeError(w, http.StatusBadRequest, ErrorResponse{Error: err.Error()})
		return
	}
	items := make([]BatchItem, len(req.Commands))
	cmds := make([]dispatch.Command, 0, len(req.Commands))
	from := make([]int, 0, len(req.Commands)) // the item of each of cmds
	now := time.Now()
	for i, sr := range req.Commands {
		cmd, err := sr.command(now)
		if err != nil {
			items[i] = BatchItem{Status: http.StatusBadRequest, Error: &ErrorResponse{Error: fmt.Sprintf("commands[%d]: %v", i, err)}}
			continue
		}
		cmds = append(cmds, cmd)
		from = append(from, i)
	}
	if len(cmds) > 0 {
		results, err := s.backend.SubmitBatch(r.Context(), cmds, wait)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if len(results) != len(cmds) {
			s.fail(w, r, fmt.Errorf("httpapi: the backend answered %d commands of a batch of %d", len(results), len(cmds)))
			return
		}
		for j, res := range results {
			items[from[j]] = batchItem(res)
			if items[from[j]].Status == http.StatusInternalServerError {
				s.opts.Logger.Warn("httpapi: a command of a batch failed", "path", r.URL.Path, "id", cmds[j].ID, "err", res.Err)
			}
		}
	}
	writeJSON(w, http.StatusOK, BatchResponse{Results: items})
}

// batchItem is the item that answers one result of a batch.
func batchItem(res BatchResult) BatchItem {
	if res.Err != nil {
		code, body := errorAnswer(res.Err)
		return BatchItem{Status: code, Error: &body}
	}
	st := res.State
	code := http.StatusOK
	if st.State == StatePending {
		code = http.StatusAccepted
	}
	return BatchItem{Status: code, Command: &st}
}
