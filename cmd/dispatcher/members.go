package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// MembersRemoveOptions are the flags of `dispatcher members remove`.
type MembersRemoveOptions struct {
	Cluster ClusterOptions
	Output  Output
	Force   bool

	Streams

	member string
	// connect reaches the cluster; connectCluster unless a test sets it.
	connect func(ctx context.Context, o *ClusterOptions) (cluster, error)
	// now reads the clock; time.Now unless a test sets it.
	now func() time.Time
}

// MembersRemoveResult is the output of `dispatcher members remove`.
type MembersRemoveResult struct {
	Role      string `json:"role"`
	Member    string `json:"member"`
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	// WasHolder reports a member that the lease named when it was removed
	// (with --force).
	WasHolder bool `json:"was_holder"`
}

// ErrMemberHolds refuses to remove the member that the lease names.
var ErrMemberHolds = errors.New("the member holds the role's lease")

// NewMembersCommand builds `dispatcher members` and its subcommands.
func NewMembersCommand(streams Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "members",
		Short: "Manage a role's roster of members",
		Args:  args(cobra.NoArgs),
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(NewMembersRemoveCommand(streams))
	return cmd
}

// NewMembersRemoveCommand builds `dispatcher members remove`.
func NewMembersRemoveCommand(streams Streams) *cobra.Command {
	o := &MembersRemoveOptions{Output: OutputTable, Streams: streams}
	cmd := &cobra.Command{
		Use:   "remove <member> (-c dispatcher.yaml | --brokers B --role R)",
		Short: "Remove a member that will not return from the role's roster",
		Long: `remove writes the tombstone of a member's registration to the role's
partition of the coordination topic, so that the member leaves the roster and
the standbys behind it move up a rank. Use it for a member that crashed or was
retired for good: its registration otherwise stays, ranked, forever ('status'
shows its API as unreachable). A member that still runs registers again the
next time it competes for the role.

It refuses to remove the member that the lease names, unless --force: the
tombstone takes the registration away, never the lease. A lease ends when it
runs out or its holder resigns, and a deposed holder is stopped by fencing
when a successor takes the role, not by this command.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			o.member = a[0]
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
	cmd.Flags().BoolVar(&o.Force, "force", false, "remove the member even when the lease names it (the lease stays until it runs out or a successor fences it)")
	return cmd
}

// Complete loads the configuration and fills the defaults.
func (o *MembersRemoveOptions) Complete() error {
	if o.connect == nil {
		o.connect = connectCluster
	}
	if o.now == nil {
		o.now = time.Now
	}
	return o.Cluster.Complete()
}

// Validate checks the flags and the member id.
func (o *MembersRemoveOptions) Validate() error {
	if _, err := coordination.NewMemberID(o.member); err != nil {
		return usageErrorf("member %q: %v", o.member, err)
	}
	return o.Cluster.Validate(true)
}

// Run writes the tombstone.
func (o *MembersRemoveOptions) Run(ctx context.Context) error {
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
	member, _ := coordination.NewMemberID(o.member)
	tp, err := rolePartition(o.Cluster.Config, role)
	if err != nil {
		return err
	}
	state, err := readRoleState(ctx, cl, o.Cluster.Config, role)
	if err != nil {
		return err
	}
	if _, ok := state.RankOf(member); !ok {
		return usageErrorf("member %s is not in the roster of role %s", member, role)
	}
	res := MembersRemoveResult{Role: role.String(), Member: member.String(), Topic: tp.Topic, Partition: tp.Partition}
	if holder, ok := state.Holder(); ok && holder == member {
		live := ""
		if left := time.UnixMilli(state.Lease.Deadline).Sub(o.now()); left > 0 {
			live = fmt.Sprintf(", %v left", left.Round(time.Millisecond))
		}
		if !o.Force {
			return usageErrorf("%w: %s holds the lease of role %s (term %s%s). Removing its registration would not take the lease away: "+
				"the lease ends when it runs out or %s resigns, and a successor's takeover fences %s. Stop %s instead, "+
				"or pass --force to remove the registration all the same", ErrMemberHolds, member, role, state.Term, live, member, member, member)
		}
		res.WasHolder = true
	}
	key := coordination.EncodeKey(coordination.RegistrationKey(role, member))
	if err := cl.Append(ctx, tp, key, nil); err != nil {
		return unavailable(ctx, fmt.Errorf("write the tombstone of %s to %s-%d: %w", member, tp.Topic, tp.Partition, err))
	}
	if o.Output.Structured() {
		return o.Output.Write(o.Out, res)
	}
	fmt.Fprintf(o.Out, "removed %s from the roster of role %s (tombstone in %s-%d)\n", member, role, tp.Topic, tp.Partition)
	if res.WasHolder {
		fmt.Fprintf(o.Out, "%s still holds the lease until it runs out or a successor fences it\n", member)
	}
	return nil
}
