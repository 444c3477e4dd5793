package demo

import (
	"context"
	"io"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// recorder wraps a device to put each dispatch on the timeline: which
// member drove which device with which command, under which term and token.
// It passes the optional interfaces through.
type recorder struct {
	dispatch.Device
	name   string
	member string
	tl     *timeline
}

var (
	_ dispatch.AuthorityDevice = (*recorder)(nil)
	_ dispatch.HealthChecker   = (*recorder)(nil)
	_ dispatch.Redispatcher    = (*recorder)(nil)
	_ io.Closer                = (*recorder)(nil)
)

func (r *recorder) Dispatch(ctx context.Context, cmd dispatch.Command, token coordination.FencingToken) (dispatch.Result, error) {
	return r.DispatchUnder(ctx, cmd, coordination.Authority{Term: coordination.NoTerm, Token: token})
}

func (r *recorder) DispatchUnder(ctx context.Context, cmd dispatch.Command, authority coordination.Authority) (dispatch.Result, error) {
	r.tl.print(r.member, "dispatches %s %q to %s under %s", cmd.ID, cmd.Action, r.name, authority)
	var (
		res dispatch.Result
		err error
	)
	if d, ok := r.Device.(dispatch.AuthorityDevice); ok {
		res, err = d.DispatchUnder(ctx, cmd, authority)
	} else {
		res, err = r.Device.Dispatch(ctx, cmd, authority.Token)
	}
	if err != nil {
		r.tl.print(r.name, "%s: %v", cmd.ID, err)
	}
	return res, err
}

func (r *recorder) CheckHealth(ctx context.Context) error {
	if h, ok := r.Device.(dispatch.HealthChecker); ok {
		return h.CheckHealth(ctx)
	}
	return nil
}

func (r *recorder) RedispatchSafe(cmd dispatch.Command) bool {
	if rd, ok := r.Device.(dispatch.Redispatcher); ok {
		return rd.RedispatchSafe(cmd)
	}
	return false
}

func (r *recorder) Close() error {
	if c, ok := r.Device.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
