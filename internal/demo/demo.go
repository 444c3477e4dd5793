// Package demo is `dispatcher demo`: a whole system in one process, with
// nothing but Go. It runs franz-go's kfake cluster, an MQTT broker (mochi)
// with a valve's firmware that fences by term, a Modbus unit (the
// simulator of internal/modbussim, fencing by term too), and three members
// of one role. It sends
// commands through a standby's HTTP API (redirected to the leader), cuts
// the leader off the cluster, sends more commands through the requests
// topic while the role fails over, lets the deposed leader's late MQTT
// write bounce off the firmware's fence, and verifies the command log.
//
// kfake does not fence like Kafka (see DESIGN.md section 7): the demo shows
// the mechanism and its timeline, and the fencing claims rest on the tests
// against a real cluster.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/devices/mqtt"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/internal/member"
)

// Role is the role the demo's members compete for.
const Role = "controller"

// Defaults of Options. The lease is short so the failover fits in seconds.
const (
	DefaultCommands         = 8
	DefaultLeaseDuration    = 2 * time.Second
	DefaultRenewInterval    = 500 * time.Millisecond
	DefaultChallengeStagger = 500 * time.Millisecond
	DefaultPollInterval     = 100 * time.Millisecond
	// DefaultStepTimeout bounds each step of the story.
	DefaultStepTimeout = 20 * time.Second
)

// Options configure a run of the demo.
type Options struct {
	// Out receives the timeline. Required.
	Out io.Writer
	// Commands is the number of commands, half before the failover and half
	// during it; DefaultCommands when zero.
	Commands int
	// Lease timings; the defaults when zero.
	LeaseDuration    time.Duration
	RenewInterval    time.Duration
	ChallengeStagger time.Duration
	PollInterval     time.Duration
	// Hold keeps the surviving members and their status pages up this long
	// after the audit (until ctx ends, when negative).
	Hold time.Duration
	// Logger receives the members' logs; nil discards them.
	Logger *slog.Logger
	// OnServing, when set, is called with each member's status page URL
	// once all three serve, and again with the holder's after the failover.
	OnServing func(member, url string)
}

// Report is what a run of the demo found.
type Report struct {
	// Leaders lists the elections in order: member, term and token.
	Leaders []Election
	// Failover is the time from the leader's crash to the next election.
	Failover time.Duration
	// Succeeded counts the commands that succeeded, of Submitted.
	Submitted, Succeeded int
	// Refused counts the commands the valve's firmware refused for an
	// earlier term; the demo's late write makes it one.
	Refused int64
	// Forged counts the commands the valve's firmware refused because
	// their MAC did not verify; the demo's forgery makes it one.
	Forged int64
	// Records is the length of the role's command log; Violations what
	// dispatch.Verify found in it.
	Records    int
	Violations []dispatch.Violation
}

// Election is one leadership the demo saw begin.
type Election struct {
	Member string
	// Term orders the elections; Token is the leadership's first token.
	Term  coordination.Term
	Token coordination.FencingToken
	At    time.Time
}

// ErrAuditFailed reports a demo whose log did not verify, or whose commands
// did not all succeed.
var ErrAuditFailed = errors.New("demo: the audit failed")

func (o *Options) complete() error {
	if o.Out == nil {
		return errors.New("demo: Options.Out is nil")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if o.Commands <= 0 {
		o.Commands = DefaultCommands
	}
	def(&o.LeaseDuration, DefaultLeaseDuration)
	def(&o.RenewInterval, DefaultRenewInterval)
	def(&o.ChallengeStagger, DefaultChallengeStagger)
	def(&o.PollInterval, DefaultPollInterval)
	return nil
}

// Run runs the demo and prints its timeline. It returns the report, and an
// error wrapping ErrAuditFailed when the log does not verify or a command
// did not succeed. Everything it starts is stopped before it returns.
func Run(ctx context.Context, opts Options) (Report, error) {
	if err := opts.complete(); err != nil {
		return Report{}, err
	}
	r := &run{opts: opts, tl: newTimeline(opts.Out), elected: make(chan member.Event, 16)}
	defer r.shutdown()
	err := r.story(ctx)
	return r.report, err
}

type run struct {
	opts    Options
	tl      *timeline
	world   *world
	nodes   []*node
	byURL   map[string]string
	elected chan member.Event
	report  Report
	dir     string
}

func (r *run) onEvent(e member.Event) {
	switch e.Kind {
	case member.EventElected:
		r.tl.print(e.Member, "ELECTED: leads %s in term %s with fencing token %s", Role, e.Term, e.Token)
		r.elected <- e
	case member.EventDeposed:
		r.tl.print(e.Member, "leadership ended: %v", e.Err)
	case member.EventResigned:
		r.tl.print(e.Member, "resigned the role (term %s, token %s)", e.Term, e.Token)
	case member.EventAbandoned:
		r.tl.print(e.Member, "stopped without resigning: it cannot reach the cluster")
	}
}

func (r *run) story(ctx context.Context) error {
	o := r.opts
	r.tl.text("krabka-dispatch demo: three members of role %q elect a leader through Kafka's transaction\n", Role)
	r.tl.text("coordinator; the leader logs each command under its term and fencing token before it drives a device.\n")
	r.tl.text("lease %v, renewed every %v, challenge stagger %v\n", o.LeaseDuration, o.RenewInterval, o.ChallengeStagger)

	r.tl.section("Starting the cluster, the devices and three members")
	dir, err := os.MkdirTemp("", "dispatcher-demo-")
	if err != nil {
		return err
	}
	r.dir = dir
	r.world, err = startWorld(ctx, r.tl, dir)
	if err != nil {
		return err
	}
	peers := map[string]string{}
	r.byURL = map[string]string{}
	for _, id := range []string{"node-1", "node-2", "node-3"} {
		n, err := newNode(id)
		if err != nil {
			return err
		}
		r.nodes = append(r.nodes, n)
		peers[id] = n.url
		r.byURL[strings.TrimPrefix(n.url, "http://")] = id
	}
	for _, n := range r.nodes {
		if err := n.build(&o, r.world, r.tl, peers, r.onEvent); err != nil {
			return fmt.Errorf("demo: %s: %w", n.id, err)
		}
	}
	// node-1 registers first, so it takes rank 0 and leads; the others
	// register behind it and take the next ranks.
	r.nodes[0].start(ctx)
	r.tl.print(r.nodes[0].id, "registered; status page %s/", r.nodes[0].url)
	first, err := r.waitElected(ctx)
	if err != nil {
		return err
	}
	for i, n := range r.nodes[1:] {
		n.start(ctx)
		r.tl.print(n.id, "registered; status page %s/", n.url)
		if err := r.waitRoster(ctx, i+2); err != nil {
			return err
		}
	}
	r.printRoster(r.node(first.Member))
	if o.OnServing != nil {
		for _, n := range r.nodes {
			o.OnServing(n.id, n.url)
		}
	}

	half := (o.Commands + 1) / 2
	r.tl.section("Commands through the HTTP API of a standby, which redirects to the leader")
	leader := r.node(first.Member)
	standby := r.nodes[1]
	for i := 1; i <= half; i++ {
		if err := r.submitHTTP(ctx, standby, command(i)); err != nil {
			return err
		}
	}
	if err := r.waitRenewal(ctx, leader); err != nil {
		return err
	}

	r.tl.section("Crashing the leader")
	deposed, _ := leader.member.Leading()
	killedAt := time.Now()
	r.tl.print(leader.id, "CRASHED: cut off from Kafka; it can neither renew nor resign. The standbys wait out its lease.")
	leader.crash()

	r.tl.section("Commands through the requests topic while the role fails over")
	client, err := dispatch.NewClient(r.world.brokers,
		dispatch.WithClientLogTopic(dispatch.DefaultLogTopic, partitions),
		dispatch.WithClientRequestsTopic(dispatch.DefaultRequestsTopic, partitions))
	if err != nil {
		return err
	}
	defer client.Close()
	var queued []dispatch.Command
	for i := half + 1; i <= o.Commands; i++ {
		cmd := command(i)
		cmd.Role = Role
		cmd.SubmittedAt = time.Now()
		cmd.Deadline = cmd.SubmittedAt.Add(time.Minute)
		if err := client.Submit(ctx, cmd); err != nil {
			return fmt.Errorf("demo: submit %s: %w", cmd.ID, err)
		}
		r.tl.print("client", "wrote %s (%s %s) to %s; it waits there for the next leader", cmd.ID, cmd.Device, cmd.Action, dispatch.DefaultRequestsTopic)
		queued = append(queued, cmd)
		r.report.Submitted++
	}
	next, err := r.waitElected(ctx)
	if err != nil {
		return err
	}
	r.report.Failover = next.At.Sub(killedAt)
	r.tl.print(next.Member, "took over %.2fs after the crash (lease %v + rank x stagger + two reads); term %s follows term %s: %t",
		r.report.Failover.Seconds(), o.LeaseDuration, next.Term, deposed.Term, next.Term.Compare(deposed.Term) > 0)
	if o.OnServing != nil {
		o.OnServing(next.Member, r.node(next.Member).url)
	}
	for _, cmd := range queued {
		wctx, cancel := context.WithTimeout(ctx, DefaultStepTimeout)
		out, err := client.Wait(wctx, Role, cmd.ID)
		cancel()
		if err != nil {
			return fmt.Errorf("demo: wait for %s: %w", cmd.ID, err)
		}
		r.tl.print("client", "%s: %s %s", cmd.ID, out.Status, detail(out))
		if out.Status == dispatch.StatusSucceeded {
			r.report.Succeeded++
		}
	}
	r.printRoster(r.node(next.Member))

	r.tl.section("A late write from the deposed leader")
	r.tl.print(leader.id, "(a zombie that woke after its pause) publishes zombie-1 to valve-1 under its old %s", deposed)
	// The zombie holds the device key, as every member does: its
	// envelope is authentic, and only its term betrays it.
	zombie := mqtt.Envelope{ID: "zombie-1", Role: Role, Device: "valve-1", Action: "open", Term: deposed.Term, Token: deposed.Token}
	zombie.KeyID, zombie.MAC = r.world.valveKeys.Sign(zombie.Signed().AppendCanonical(nil))
	late, err := mqtt.EncodeEnvelope(zombie)
	if err != nil {
		return err
	}
	r.world.valve.receive(late)
	r.report.Refused = r.world.valve.refused.Load()

	r.tl.section("A forged command from someone on the broker")
	if err := r.forge(ctx, client); err != nil {
		return err
	}

	r.tl.section("Audit: replaying and verifying the command log")
	if err := r.audit(ctx, client); err != nil {
		return err
	}
	if r.opts.Hold != 0 {
		r.hold(ctx)
	}
	r.tl.section("Stopping")
	return r.verdict()
}
