package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/krabka-io/krabka-dispatch/internal/demo"
)

// DemoOptions are the flags of `dispatcher demo`.
type DemoOptions struct {
	Commands int
	Hold     time.Duration
	Lease    time.Duration

	Verbose bool

	Streams

	logger *slog.Logger
}

// NewDemoCommand builds `dispatcher demo`.
func NewDemoCommand(streams Streams) *cobra.Command {
	o := &DemoOptions{Streams: streams}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a whole system in this process: Kafka, MQTT, Modbus, three members, a failover and an audit",
		Long: `demo needs nothing but Go. It starts an in-process Kafka cluster (franz-go's
kfake), an MQTT broker with a valve whose firmware fences by token, a Modbus
unit, and three members of one role, each with its status page. It sends
commands through a standby's HTTP API (redirected to the leader), crashes the
leader, sends more through the requests topic while the role fails over,
shows the deposed leader's late write refused by the valve, and replays and
verifies the command log. It exits 0 when the audit is clean, 4 when not.

kfake does not fence like a real Kafka cluster; the demo shows the mechanism
and its timeline, the test suite proves the fencing on a real cluster.`,
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
	cmd.Flags().IntVar(&o.Commands, "commands", demo.DefaultCommands, "commands to send, half before the crash and half during the failover")
	cmd.Flags().DurationVar(&o.Hold, "hold", 0, "keep the surviving members and their status pages up this long after the audit (-1s: until Ctrl-C)")
	cmd.Flags().BoolVarP(&o.Verbose, "verbose", "v", false, "also print the members' logs, on stderr")
	cmd.Flags().DurationVar(&o.Lease, "lease", demo.DefaultLeaseDuration, "lease duration; the failover takes about this long")
	return cmd
}

// Complete builds the logger of --verbose.
func (o *DemoOptions) Complete() error {
	if o.Verbose {
		o.logger = slog.New(slog.NewTextHandler(o.Err, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return nil
}

// Validate checks the flags.
func (o *DemoOptions) Validate() error {
	if o.Commands < 2 {
		return usageErrorf("--commands %d: want at least 2", o.Commands)
	}
	if o.Lease < 500*time.Millisecond {
		return usageErrorf("--lease %v: want at least 500ms", o.Lease)
	}
	return nil
}

// Run runs the demo.
func (o *DemoOptions) Run(ctx context.Context) error {
	renew := o.Lease / 4
	rep, err := demo.Run(ctx, demo.Options{
		Out:              o.Out,
		Commands:         o.Commands,
		LeaseDuration:    o.Lease,
		RenewInterval:    renew,
		ChallengeStagger: renew,
		Hold:             o.Hold,
		Logger:           o.logger,
	})
	if errors.Is(err, demo.ErrAuditFailed) {
		return withCode(ExitAuditFailed, err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "\ndemo complete: %d commands succeeded, failover in %.2fs, %d log records verified clean.\n",
		rep.Succeeded, rep.Failover.Seconds(), rep.Records)
	if o.Hold == 0 {
		fmt.Fprintln(o.Out, "Run it with --hold -1s to keep the status pages up; see README.md to run members on a real cluster.")
	}
	return nil
}
