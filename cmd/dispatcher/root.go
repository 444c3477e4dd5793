package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// Streams are the standard streams a command reads and writes. Tests pass
// buffers.
type Streams struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// Command groups of the help.
const (
	groupServe   = "serve"
	groupOperate = "operate"
)

// NewRootCommand builds the command tree.
func NewRootCommand(streams Streams) *cobra.Command {
	g := &GlobalOptions{}
	v := readVersion()
	root := &cobra.Command{
		Use:   "dispatcher",
		Short: "Fenced command dispatch to external devices",
		Long: `dispatcher runs one member of a role: the members elect a leader through
Kafka's transaction coordinator, and only the leader drives the devices, each
command recorded in the command log under its fencing token before the device
sees it. A deposed leader cannot write: the broker fences it.

Start with:  dispatcher demo`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       v.Version,
		// With Args set, an unknown subcommand reaches this validator, which
		// makes it a usage error.
		Args: unknownCommand,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.SetVersionTemplate(v.String() + "\n")
	// Defined here so that cobra does not take -v, which demo uses for
	// --verbose.
	root.Flags().Bool("version", false, "print the version and exit")
	root.SuggestionsMinimumDistance = 2
	g.addFlags(root.PersistentFlags())
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.Err)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return withCode(ExitUsage, err)
	})
	root.SetUsageTemplate(root.UsageTemplate() + "\n" + exitCodeHelp)
	root.AddGroup(
		&cobra.Group{ID: groupServe, Title: "Run:"},
		&cobra.Group{ID: groupOperate, Title: "Operate a cluster:"},
	)
	add := func(group string, cmds ...*cobra.Command) {
		for _, c := range cmds {
			c.GroupID = group
			root.AddCommand(c)
		}
	}
	add(groupServe, NewRunCommand(streams, g), NewDemoCommand(streams), NewValidateCommand(streams))
	add(groupOperate,
		NewStatusCommand(streams),
		NewLogCommand(streams),
		NewSubmitCommand(streams),
		NewResolveCommand(streams),
		NewTopicsCommand(streams),
		NewMembersCommand(streams),
	)
	root.AddCommand(NewVersionCommand(streams))
	return root
}

// unknownCommand refuses arguments to the root: the first one is a
// subcommand that does not exist. It names the nearest subcommands, as cobra
// does when the root takes no Args validator.
func unknownCommand(cmd *cobra.Command, a []string) error {
	if len(a) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", a[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(a[0]); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
	}
	return usageErrorf("%s", msg)
}

// Execute runs the command line args and returns the exit code. It prints
// an error to streams.Err.
func Execute(ctx context.Context, args []string, streams Streams) int {
	root := NewRootCommand(streams)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return int(ExitOK)
	}
	fmt.Fprintf(streams.Err, "dispatcher: %v\n", err)
	return int(codeOf(err))
}

// args wraps a cobra argument validator so its error exits with ExitUsage.
func args(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		return withCode(ExitUsage, v(cmd, a))
	}
}
