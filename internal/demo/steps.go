package demo

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/devices/fence"
	"github.com/krabka-io/krabka-dispatch/devices/mqtt"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/internal/httpapi"
	"github.com/krabka-io/krabka-dispatch/internal/member"
)

// command builds the i-th command of the demo: valve and pump in turn.
func command(i int) dispatch.Command {
	id := fmt.Sprintf("cmd-%03d", i)
	if i%2 == 1 {
		action := "open"
		if i%4 == 3 {
			action = "close"
		}
		return dispatch.Command{ID: id, Device: "valve-1", Action: action}
	}
	return dispatch.Command{ID: id, Device: "pump-1", Action: "write-register",
		Payload: []byte(fmt.Sprintf(`{"address":0,"value":%d}`, i*100))}
}

// submitHTTP posts cmd to n's API and follows the redirect to the leader.
func (r *run) submitHTTP(ctx context.Context, n *node, cmd dispatch.Command) error {
	r.report.Submitted++
	body, _ := json.Marshal(httpapi.SubmitRequest{ID: cmd.ID, Device: cmd.Device, Action: cmd.Action, Payload: string(cmd.Payload)})
	var hops []string
	hc := &http.Client{
		Timeout: DefaultStepTimeout,
		CheckRedirect: func(req *http.Request, _ []*http.Request) error {
			hops = append(hops, r.byURL[req.URL.Host])
			return nil
		},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.url+"/v1/commands?wait=10s", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("demo: submit %s: %w", cmd.ID, err)
	}
	defer resp.Body.Close()
	var st httpapi.CommandState
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return fmt.Errorf("demo: submit %s: HTTP %d: %w", cmd.ID, resp.StatusCode, err)
	}
	path := n.id
	for _, h := range hops {
		path += " -> 307 -> " + h
	}
	r.tl.print("http", "POST %s (%s %s) to %s: %s", cmd.ID, cmd.Device, cmd.Action, path, st.State)
	if st.State == dispatch.StatusSucceeded.String() {
		r.report.Succeeded++
	}
	return nil
}

func (r *run) waitElected(ctx context.Context) (member.Event, error) {
	timer := time.NewTimer(DefaultStepTimeout)
	defer timer.Stop()
	select {
	case e := <-r.elected:
		r.report.Leaders = append(r.report.Leaders, Election{Member: e.Member, Term: e.Term, Token: e.Token, At: e.At})
		return e, nil
	case <-timer.C:
		return member.Event{}, errors.New("demo: no member was elected in time")
	case <-ctx.Done():
		return member.Event{}, ctx.Err()
	}
}

// waitRoster polls until every started member's view shows n registered
// members.
func (r *run) waitRoster(ctx context.Context, n int) error {
	return poll(ctx, func() bool {
		for _, nd := range r.nodes {
			if nd.cancel != nil && len(nd.member.Leadership().Roster) < n {
				return false
			}
		}
		return true
	})
}

// waitRenewal polls until the standbys see a lease of the leader, so the
// crash happens with the lease the timeline talks about.
func (r *run) waitRenewal(ctx context.Context, leader *node) error {
	return poll(ctx, func() bool {
		for _, nd := range r.nodes {
			if nd.member.Leadership().Holder != leader.id {
				return false
			}
		}
		return true
	})
}

func poll(ctx context.Context, cond func() bool) error {
	deadline := time.Now().Add(DefaultStepTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("demo: the members did not settle in time")
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (r *run) printRoster(n *node) {
	l := n.member.Leadership()
	r.tl.print(n.id, "sees the roster (registration order; rank = challenge order):")
	for _, m := range l.Roster {
		mark := ""
		if m.Holder {
			mark = "  <- holder, term " + l.Term.String() + ", token " + l.Token
		} else if nd := r.node(m.Member); nd != nil && nd.cancel == nil {
			mark = "  (crashed; its registration stays until it returns)"
		}
		r.tl.text("%20s rank %d  %s%s\n", "", m.Rank, m.Member, mark)
	}
}

func (r *run) node(id string) *node {
	for _, n := range r.nodes {
		if n.id == id {
			return n
		}
	}
	return nil
}

// audit reads the role's log back and verifies it.
func (r *run) audit(ctx context.Context, client *dispatch.Client) error {
	actx, cancel := context.WithTimeout(ctx, DefaultStepTimeout)
	defer cancel()
	entries, err := client.ReadLog(actx, Role)
	if err != nil {
		return fmt.Errorf("demo: read the log: %w", err)
	}
	tp, _ := client.LogPartition(Role)
	r.report.Records = len(entries)
	h := dispatch.Replay(entries)
	r.report.Violations = dispatch.Verify(entries)
	r.tl.print("audit", "read %d records of %s-%d", len(entries), tp.Topic, tp.Partition)
	r.tl.text("%20s who led, from the log alone:\n", "")
	for _, s := range h.Leaderships {
		r.tl.text("%20s   %-7s tokens %s .. %s  offsets %d-%d  (%d records)\n", "", s.Member, s.FirstToken, s.LastToken, s.FirstOffset, s.LastOffset, s.Records)
	}
	counts := map[string]int{}
	for _, c := range h.Commands {
		counts[c.Status.String()]++
	}
	var parts []string
	for s, n := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", n, s))
	}
	sort.Strings(parts)
	r.tl.text("%20s commands: %d (%s)\n", "", len(h.Commands), strings.Join(parts, ", "))
	for _, c := range h.Commands {
		if len(c.Attempts) == 0 {
			continue
		}
		a := c.Attempts[len(c.Attempts)-1]
		r.tl.text("%20s   %s  %-8s %-15s issued by %s under %s: %s\n", "", c.ID, c.Command().Device, c.Command().Action, a.Member, a.Token, c.Status)
	}
	if len(r.report.Violations) == 0 {
		r.tl.print("audit", "Verify: 0 violations. Terms never go backwards, every outcome follows its issue, no command settled twice, intake contiguous.")
	} else {
		for _, v := range r.report.Violations {
			r.tl.print("audit", "VIOLATION %s", v)
		}
	}
	r.tl.print("valve-1", "firmware refused %d stale command(s): the deposed leader's late write", r.world.valve.refused.Load())
	r.tl.print("valve-1", "firmware refused %d forged command(s): not authenticated, the fence untouched", r.world.valve.forged.Load())
	return nil
}

func (r *run) hold(ctx context.Context) {
	r.tl.section("The status pages stay up")
	for _, n := range r.nodes[1:] {
		if n.cancel != nil {
			r.tl.print(n.id, "%s/", n.url)
		}
	}
	if r.opts.Hold < 0 {
		r.tl.text("press Ctrl-C to stop\n")
		<-ctx.Done()
		return
	}
	t := time.NewTimer(r.opts.Hold)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func (r *run) verdict() error {
	rep := r.report
	if len(rep.Violations) > 0 {
		return fmt.Errorf("%w: %d violations in the command log", ErrAuditFailed, len(rep.Violations))
	}
	if rep.Succeeded != rep.Submitted {
		return fmt.Errorf("%w: %d of %d commands succeeded", ErrAuditFailed, rep.Succeeded, rep.Submitted)
	}
	if rep.Refused != 1 {
		return fmt.Errorf("%w: the firmware refused %d stale commands, want exactly the late one", ErrAuditFailed, rep.Refused)
	}
	if rep.Forged != 1 {
		return fmt.Errorf("%w: the firmware refused %d forged commands, want exactly the forgery", ErrAuditFailed, rep.Forged)
	}
	return nil
}

// shutdown stops the members, the standbys first so the leader's
// resignation hands the role to no one, and then the world.
func (r *run) shutdown() {
	for _, n := range r.nodes {
		if n.member == nil {
			n.stop()
			continue
		}
		if _, leading := n.member.Leading(); !leading {
			n.stop()
		}
	}
	for _, n := range r.nodes {
		n.stop()
	}
	if r.world != nil {
		r.world.close()
	}
	if r.dir != "" {
		_ = os.RemoveAll(r.dir)
	}
}

func detail(out dispatch.Outcome) string {
	switch {
	case out.Reason != "":
		return "(" + out.Reason + ")"
	case out.Result.Detail != "":
		return "(" + out.Result.Detail + ")"
	}
	return ""
}

// forge publishes a command that claims the largest term, signed with a key
// that is not valve-1's, as anyone who may publish to the command topic
// could; the firmware refuses it before it reads its term, and the leader
// drives the valve on as before.
func (r *run) forge(ctx context.Context, client *dispatch.Client) error {
	secret := make([]byte, fence.MinKeyBytes)
	if _, err := rand.Read(secret); err != nil {
		return err
	}
	intruder, err := fence.NewVerifier(fence.Key{ID: r.world.valveKeys.KeyID(), Secret: secret})
	if err != nil {
		return err
	}
	tok, err := coordination.NewFencingToken(1, 0)
	if err != nil {
		return err
	}
	env := mqtt.Envelope{ID: "forged-1", Role: Role, Device: "valve-1", Action: "open", Term: math.MaxInt64, Token: tok}
	env.KeyID, env.MAC = intruder.Sign(env.Signed().AppendCanonical(nil))
	data, err := mqtt.EncodeEnvelope(env)
	if err != nil {
		return err
	}
	r.tl.print("intruder", "publishes forged-1 to devices/valve-1/cmd under term %s, signed with a key of its own", env.Term)
	if err := r.world.mqtt.Publish("devices/valve-1/cmd", data, false, 1); err != nil {
		return fmt.Errorf("demo: publish the forgery: %w", err)
	}
	if err := poll(ctx, func() bool { return r.world.valve.forged.Load() > 0 }); err != nil {
		return fmt.Errorf("demo: the firmware never saw the forgery: %w", err)
	}
	r.report.Forged = r.world.valve.forged.Load()

	// The leader's next command is still admitted: the forgery changed
	// nothing in the fence.
	cmd := dispatch.Command{ID: "after-forgery", Role: Role, Device: "valve-1", Action: "close", SubmittedAt: time.Now()}
	cmd.Deadline = cmd.SubmittedAt.Add(time.Minute)
	if err := client.Submit(ctx, cmd); err != nil {
		return fmt.Errorf("demo: submit %s: %w", cmd.ID, err)
	}
	r.report.Submitted++
	wctx, cancel := context.WithTimeout(ctx, DefaultStepTimeout)
	defer cancel()
	out, err := client.Wait(wctx, Role, cmd.ID)
	if err != nil {
		return fmt.Errorf("demo: wait for %s: %w", cmd.ID, err)
	}
	r.tl.print("client", "%s: %s %s", cmd.ID, out.Status, detail(out))
	if out.Status == dispatch.StatusSucceeded {
		r.report.Succeeded++
	}
	return nil
}
