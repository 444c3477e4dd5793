package recorder

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// ErrFenced is the error of a dispatch that the fencing hardware refused,
// marked dispatch.Rejected.
var ErrFenced = errors.New("recorder: the hardware refused a stale term")

// Device is the dispatch.Device that drives a Server; it implements
// dispatch.AuthorityDevice, so the Server receives the term beside the token.
// It is safe for concurrent use, though the dispatcher never calls it
// concurrently.
type Device struct {
	name   string
	url    string
	member string
	client *http.Client

	log          dispatch.LogReader
	logPartition coordination.TopicPartition
	role         string
}

// NewDevice returns the device name of the Server at url, dispatching for
// member.
func NewDevice(name, url, member string) *Device {
	return &Device{name: name, url: url, member: member, client: &http.Client{}}
}

// CheckLog makes the device read the committed log partition of role at each
// call, and report whether the command's Issued record is there.
func (d *Device) CheckLog(log dispatch.LogReader, partition coordination.TopicPartition, role string) *Device {
	d.log, d.logPartition, d.role = log, partition, role
	return d
}

// LogLagBound bounds how long a Device looks for a command's Issued record
// that the committed log does not show yet. A transaction commits when the
// coordinator has durably recorded its decision; the markers that make its
// records visible to read_committed readers follow asynchronously, so a
// record can become visible a few milliseconds after its writer learned of
// the commit.
const LogLagBound = 2 * time.Second

// findIssued reads the committed log for the Issued record of id, again and
// again up to LogLagBound while it is not there. lag is zero when the first
// read found it.
func (d *Device) findIssued(ctx context.Context, id string) (lag time.Duration, found bool, err error) {
	start := time.Now()
	for missed := false; ; missed = true {
		entries, err := d.log.ReadLog(ctx, d.logPartition)
		if err != nil && (time.Since(start) > LogLagBound || ctx.Err() != nil) {
			return 0, false, err
		}
		// A read that failed (a broker away) is tried again, as a miss.
		for _, e := range entries {
			if err == nil && e.Kind == dispatch.EntryIssued && e.Role == d.role && e.Issued.Command.ID == id {
				if !missed {
					return 0, true, nil
				}
				return time.Since(start), true, nil
			}
		}
		if time.Since(start) > LogLagBound {
			return time.Since(start), false, nil
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return 0, false, ctx.Err()
		}
	}
}

// Dispatch implements dispatch.Device: it dispatches under
// coordination.NoTerm, which fencing hardware refuses.
func (d *Device) Dispatch(ctx context.Context, cmd dispatch.Command, token coordination.FencingToken) (dispatch.Result, error) {
	return d.DispatchUnder(ctx, cmd, coordination.Authority{Term: coordination.NoTerm, Token: token})
}

// DispatchUnder implements dispatch.AuthorityDevice.
func (d *Device) DispatchUnder(ctx context.Context, cmd dispatch.Command, authority coordination.Authority) (dispatch.Result, error) {
	if err := ctx.Err(); err != nil {
		return dispatch.Result{}, dispatch.Retryable(err) // nothing was sent
	}
	token := authority.Token
	req := request{Device: d.name, CommandID: cmd.ID, Action: cmd.Action, Term: int64(authority.Term), Token: token.String(), Member: d.member}
	if d.log != nil {
		lag, found, err := d.findIssued(ctx, cmd.ID)
		if err != nil {
			return dispatch.Result{}, dispatch.Retryable(fmt.Errorf("recorder: read the log: %w", err))
		}
		req.LogChecked, req.Logged, req.LogLag = true, found, lag
	}
	body, err := json.Marshal(req)
	if err != nil {
		return dispatch.Result{}, dispatch.Rejected(err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url+"/dispatch", bytes.NewReader(body))
	if err != nil {
		return dispatch.Result{}, dispatch.Rejected(err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := d.client.Do(hreq)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			// No connection, so nothing reached the hardware.
			return dispatch.Result{}, dispatch.Retryable(fmt.Errorf("recorder: %s: %w", d.name, err))
		}
		// The request may have reached the hardware: in doubt.
		return dispatch.Result{}, fmt.Errorf("recorder: %s: %w", d.name, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	switch resp.StatusCode {
	case statusActed:
		return dispatch.Result{Detail: "acted"}, nil
	case statusFenced:
		return dispatch.Result{}, dispatch.Rejected(fmt.Errorf("%w: %s", ErrFenced, authority))
	case statusRejected:
		return dispatch.Result{}, dispatch.Rejected(errors.New("recorder: the hardware rejected the command"))
	case statusFailed:
		return dispatch.Result{}, dispatch.Retryable(errors.New("recorder: the hardware failed without acting"))
	}
	return dispatch.Result{}, fmt.Errorf("recorder: unexpected answer %s", resp.Status)
}
