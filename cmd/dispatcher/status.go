package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// StatusOptions are the flags of `dispatcher status`.
type StatusOptions struct {
	Cluster ClusterOptions
	Output  Output

	Streams

	// connect reaches the cluster; connectCluster unless a test sets it.
	connect func(ctx context.Context, o *ClusterOptions) (cluster, error)
	// now reads the clock; time.Now unless a test sets it.
	now func() time.Time
}

// The verdicts of StatusResult.Authority.
const (
	// AuthorityConfirmed: the lease's token is the token the transaction
	// coordinator holds now.
	AuthorityConfirmed = "confirmed"
	// AuthorityAdvanced: the coordinator holds another token than the lease
	// record: a later epoch, or a producer id the role rotated to when its
	// epoch ran out, which may be lower. Under Kafka transactions v2 every
	// commit bumps the epoch, so a working leader shows this between
	// renewals; after a takeover the new leader's lease record follows
	// within one write.
	AuthorityAdvanced = "advanced"
	// AuthorityNone: no lease, or no epoch was ever minted.
	AuthorityNone = "none"
)

// StatusResult is the output of `dispatcher status`.
type StatusResult struct {
	Role      string `json:"role"`
	Holder    string `json:"holder,omitempty"`
	LeaseLive bool   `json:"lease_live"`
	// Term orders leaderships: it is the term of the leadership that wrote
	// the lease, absent when there is none. The tokens beside it are what
	// the broker enforces; they do not order leaderships.
	Term             coordination.Term `json:"term,omitempty"`
	LeaseToken       string            `json:"lease_token,omitempty"`
	LeaseGrantedAt   *time.Time        `json:"lease_granted_at,omitempty"`
	LeaseDeadline    *time.Time        `json:"lease_deadline,omitempty"`
	LeaseRemainingMS int64             `json:"lease_remaining_ms"`
	CoordinatorToken string            `json:"coordinator_token,omitempty"`
	Authority        string            `json:"authority"`
	Roster           []StatusMember    `json:"roster"`
	// HolderState is what the holder's HTTP API (GET /v1/leadership) says
	// it does: "recovering" while it holds the lease and reads the role's
	// log, taking no command yet; "leading" once it takes commands;
	// "draining" while it stops. Absent when the configuration's members
	// list does not name the holder, or its API did not answer.
	HolderState string `json:"holder_state,omitempty"`
	// Devices is the holder's last health check of each device, from its
	// HTTP API (GET /v1/leadership); absent when the configuration's members
	// list does not name the holder, or its API did not answer.
	Devices []StatusDevice `json:"devices,omitempty"`
}

// StatusDevice is the last health check of one device, as the holder made
// it.
type StatusDevice struct {
	Device    string    `json:"device"`
	Reachable bool      `json:"reachable"`
	Error     string    `json:"error,omitempty"`
	CheckedAt time.Time `json:"checked_at"`
}

// StatusMember is one member of the roster.
type StatusMember struct {
	Member string `json:"member"`
	// Rank is the member's challenge rank: the first standby has 0, and so
	// does the holder, which the table shows as "holder" instead.
	Rank         int       `json:"rank"`
	Holder       bool      `json:"holder"`
	Offset       int64     `json:"offset"`
	RegisteredAt time.Time `json:"registered_at"`
	// API is what the member's HTTP API, from the configuration's members
	// list, answered to GET /livez: APILive, APIUnreachable, or absent when
	// the list does not name the member.
	API string `json:"api,omitempty"`
}

// The values of StatusMember.API.
const (
	// APILive: /livez answered 200 in time.
	APILive = "live"
	// APIUnreachable: /livez did not answer 200 within LivezTimeout (or
	// the --timeout left, if shorter). A registration stays in the roster
	// until it is removed (dispatcher members remove), so a member that
	// crashed for good shows here, still ranked: it is stale.
	APIUnreachable = "unreachable"
)

// LivezTimeout bounds the /livez probe of each member by status.
const LivezTimeout = 2 * time.Second

// NewStatusCommand builds `dispatcher status`.
func NewStatusCommand(streams Streams) *cobra.Command {
	o := &StatusOptions{Output: OutputTable, Streams: streams}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show who leads a role: roster with ranks, holder, lease remaining, term, token, authority",
		Long: `status reads the role's partition of the coordination topic (the roster in
registration order and the lease, with the term of the leadership that wrote
it) and asks the transaction coordinator which token it holds for the role,
the third-party authority check that joins no group and takes no epoch. The
term orders leaderships; the token is what the broker enforces, and may rotate
to a lower producer id within a term. It exits 5 when no member holds a live
lease, and 8 when no member has ever registered for the role (a typo in --role
or the config's role, most likely: roles are case-sensitive).`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	o.Cluster.AddFlags(cmd.Flags())
	addOutputFlag(cmd, &o.Output)
	return cmd
}

// Complete loads the configuration and fills the defaults.
func (o *StatusOptions) Complete() error {
	if o.connect == nil {
		o.connect = connectCluster
	}
	if o.now == nil {
		o.now = time.Now
	}
	return o.Cluster.Complete()
}

// Validate checks the flags.
func (o *StatusOptions) Validate() error { return o.Cluster.Validate(true) }

// Run reads the state and prints it.
func (o *StatusOptions) Run(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, o.Cluster.Timeout)
	defer cancel()
	if err := o.Cluster.reach(ctx); err != nil {
		return err
	}
	cl, err := o.connect(ctx, &o.Cluster)
	if err != nil {
		return err
	}
	defer cl.Close()
	role := o.Cluster.role()
	state, err := readRoleState(ctx, cl, o.Cluster.Config, role)
	if err != nil {
		return err
	}
	leadership, err := coordination.DescribeLeadership(ctx, cl, role)
	if err != nil {
		return unavailable(ctx, err)
	}
	res := buildStatus(role, state, leadership, o.now())
	if hc := o.apiClient(); hc != nil {
		defer hc.CloseIdleConnections()
		o.probeMembers(ctx, hc, res.Roster)
		res.HolderState, res.Devices = o.holderView(ctx, hc, res.Holder)
	}
	if o.Output.Structured() {
		err = o.Output.Write(o.Out, res)
	} else {
		err = writeStatusTable(o, res)
	}
	if err != nil {
		return err
	}
	if !res.LeaseLive {
		return withCode(ExitNoLeader, fmt.Errorf("role %s: no member holds a live lease", res.Role))
	}
	return nil
}

// buildStatus folds the role state and the coordinator's answer into the
// result. It is a pure function of its arguments.
func buildStatus(role coordination.Role, state coordination.RoleState, leadership coordination.LeadershipStatus, now time.Time) StatusResult {
	res := StatusResult{Role: role.String(), Authority: AuthorityNone, Roster: []StatusMember{}}
	if leadership.Held {
		res.CoordinatorToken = leadership.Token.String()
	}
	holder, hasHolder := state.Holder()
	if state.Lease != nil {
		l := *state.Lease
		res.Holder = l.Member.String()
		res.Term = state.Term
		res.LeaseToken = l.Token.String()
		granted := time.UnixMilli(l.GrantedAt).UTC()
		deadline := time.UnixMilli(l.Deadline).UTC()
		res.LeaseGrantedAt, res.LeaseDeadline = &granted, &deadline
		nowMillis := now.UnixMilli()
		res.LeaseLive = nowMillis < l.Deadline
		if res.LeaseLive {
			res.LeaseRemainingMS = l.Deadline - nowMillis
		}
		switch {
		case leadership.Authoritative(l.Token):
			res.Authority = AuthorityConfirmed
		case leadership.Held && leadership.Token != coordination.NoEpoch && leadership.Token != l.Token:
			res.Authority = AuthorityAdvanced
		}
	}
	for _, e := range state.Roster {
		rank, _ := state.RankOf(e.Member)
		res.Roster = append(res.Roster, StatusMember{
			Member:       e.Member.String(),
			Rank:         rank,
			Holder:       hasHolder && e.Member == holder,
			Offset:       e.Offset,
			RegisteredAt: time.UnixMilli(e.RegisteredAt).UTC(),
		})
	}
	return res
}

func writeStatusTable(o *StatusOptions, r StatusResult) error {
	holder := r.Holder
	if holder == "" {
		holder = "(none)"
	}
	lease := "expired"
	switch {
	case r.LeaseDeadline == nil:
		lease = "none"
	case r.LeaseLive:
		lease = (time.Duration(r.LeaseRemainingMS) * time.Millisecond).String() + " left"
	}
	fmt.Fprintf(o.Out, "role:         %s\n", r.Role)
	if r.HolderState != "" {
		holder += " (" + r.HolderState + ")"
	}
	fmt.Fprintf(o.Out, "holder:       %s\n", holder)
	fmt.Fprintf(o.Out, "lease:        %s\n", lease)
	term := ""
	if r.Term != coordination.NoTerm {
		term = r.Term.String()
	}
	fmt.Fprintf(o.Out, "term:         %s\n", dash(term))
	fmt.Fprintf(o.Out, "lease token:  %s\n", dash(r.LeaseToken))
	fmt.Fprintf(o.Out, "coordinator:  %s\n", dash(r.CoordinatorToken))
	fmt.Fprintf(o.Out, "authority:    %s\n\n", r.Authority)
	t := table{header: []string{"RANK", "MEMBER", "API", "OFFSET", "REGISTERED"}}
	for _, m := range r.Roster {
		// The holder and the first standby both have rank 0 by the
		// succession rules; the table tells them apart.
		rank := strconv.Itoa(m.Rank)
		if m.Holder {
			rank = "holder"
		}
		t.rows = append(t.rows, []string{rank, m.Member, dash(m.API), strconv.FormatInt(m.Offset, 10), m.RegisteredAt.Format(time.RFC3339)})
	}
	if err := t.write(o.Out); err != nil {
		return err
	}
	if len(r.Devices) == 0 {
		return nil
	}
	fmt.Fprintln(o.Out)
	d := table{header: []string{"DEVICE", "REACHABLE", "CHECKED", "ERROR"}}
	for _, dev := range r.Devices {
		reachable := "yes"
		if !dev.Reachable {
			reachable = "no"
		}
		d.rows = append(d.rows, []string{dev.Device, reachable, dev.CheckedAt.UTC().Format(time.RFC3339), dash(dev.Error)})
	}
	return d.write(o.Out)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cluster is what the operator commands need of a coordination transport.
type cluster interface {
	coordination.StateReader
	coordination.Coordinator
	coordination.Registrar
	Close()
}

// apiClient builds the client that status reaches the members' APIs with,
// or nil when the configuration's members list names none.
func (o *StatusOptions) apiClient() *http.Client {
	c := o.Cluster.Config
	if len(c.Members) == 0 {
		return nil
	}
	api := APIOptions{}
	if c.HTTP.TLS != nil {
		api.CACert, api.Cert, api.Key = c.HTTP.TLS.CAFile, c.HTTP.TLS.ClientCertFile, c.HTTP.TLS.ClientKeyFile
	}
	if err := api.completeTLS(); err != nil {
		fmt.Fprintf(o.Err, "not asking the members' APIs: %v\n", err)
		return nil
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = api.tlsConfig
	return &http.Client{Transport: transport, Timeout: LivezTimeout}
}

// probeMembers sets the API of each member that the configuration's
// members list names, asking GET /livez of all at once, each within
// LivezTimeout or what is left of ctx.
func (o *StatusOptions) probeMembers(ctx context.Context, hc *http.Client, roster []StatusMember) {
	c := o.Cluster.Config
	var wg sync.WaitGroup
	for i := range roster {
		base, ok := c.Members[roster[i].Member]
		if !ok {
			continue
		}
		wg.Go(func() { roster[i].API = livez(ctx, hc, base) })
	}
	wg.Wait()
}

// holderView asks the holder's API for its state (recovering or leading)
// and its last health check of each device. It needs no secret of its own: it sends $DISPATCHER_TOKEN, or the
// file's token when that resolves, for a member that protects its reads,
// and reports nothing when the holder does not answer.
func (o *StatusOptions) holderView(ctx context.Context, hc *http.Client, holder string) (string, []StatusDevice) {
	c := o.Cluster.Config
	base, ok := c.Members[holder]
	if holder == "" || !ok {
		return "", nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/v1/leadership", nil)
	if err != nil {
		return "", nil
	}
	token := os.Getenv(EnvToken)
	if token == "" {
		token, _ = c.HTTP.ResolveToken()
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", nil
	}
	var view struct {
		Member  string         `json:"member"`
		State   string         `json:"state"`
		Devices []StatusDevice `json:"devices"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&view); err != nil {
		return "", nil
	}
	if view.Member != holder {
		// The members list points elsewhere: its state is not the holder's.
		return "", view.Devices
	}
	return view.State, view.Devices
}

// livez returns APILive when base answers GET /livez with 200.
func livez(ctx context.Context, hc *http.Client, base string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/livez", nil)
	if err != nil {
		return APIUnreachable
	}
	resp, err := hc.Do(req)
	if err != nil {
		return APIUnreachable
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return APIUnreachable
	}
	return APILive
}
