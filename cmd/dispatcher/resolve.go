package main

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/internal/config"
	"github.com/krabka-io/krabka-dispatch/internal/httpapi"
)

// ResolveOptions are the flags of `dispatcher resolve`.
type ResolveOptions struct {
	API        APIOptions
	ConfigFile string
	Output     Output
	Action     string
	Timeout    time.Duration

	Streams

	id string
}

// NewResolveCommand builds `dispatcher resolve`.
func NewResolveCommand(streams Streams) *cobra.Command {
	o := &ResolveOptions{Output: OutputTable, Streams: streams}
	cmd := &cobra.Command{
		Use:   "resolve <command-id> --action redispatch|cancel (--url URL | -c dispatcher.yaml)",
		Short: "Settle a command in doubt: dispatch it again, or cancel it",
		Long: `resolve settles a command that a takeover left in doubt (the device may or
may not have acted). The leader records the decision in the command log under
its token before anything reaches the device:

  redispatch  dispatch it again: choose it when the device certainly did not
              act, or acting twice is harmless
  cancel      close it as cancelled without dispatching it again

List the commands in doubt with 'dispatcher log'. It exits 7 when a
redispatch does not succeed.

With -c it asks the member that file configures (its entry in members, else
its http.listen address) with the file's HTTP token, unless --url, --token
or $DISPATCHER_TOKEN say otherwise. Over https it trusts --cacert (else the
file's http.tls.ca_file, else the host's roots) and presents --cert and
--key (else http.tls.client_cert_file and client_key_file) to a member that
demands a client certificate.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			o.id = a[0]
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	addConfigFlag(cmd.Flags(), &o.ConfigFile)
	o.API.AddFlags(cmd.Flags())
	addOutputFlag(cmd, &o.Output)
	cmd.Flags().StringVar(&o.Action, "action", "", "redispatch or cancel (required)")
	addTimeoutFlag(cmd.Flags(), &o.Timeout, DefaultCommandTimeout)
	return cmd
}

// Complete loads the configuration when -c gives one, and takes the URL and
// the token from the flags, the environment or the configuration.
func (o *ResolveOptions) Complete() error {
	var c *config.Config
	if o.ConfigFile != "" {
		loaded, err := config.Load(o.ConfigFile)
		if err != nil {
			return withCode(ExitUsage, err)
		}
		c = loaded
	}
	return o.API.complete(c)
}

// Validate checks the flags.
func (o *ResolveOptions) Validate() error {
	switch o.Action {
	case dispatch.ResolveRedispatch.String(), dispatch.ResolveCancel.String():
	default:
		return usageErrorf("--action %q: want redispatch or cancel", o.Action)
	}
	if o.API.URL == "" {
		return usageErrorf("--url or --config is required: the leader resolves, and any member redirects to it")
	}
	if o.Timeout <= 0 {
		return usageErrorf("--timeout %v: want a duration above 0", o.Timeout)
	}
	return nil
}

// Run asks the leader to resolve the command.
func (o *ResolveOptions) Run(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	var st httpapi.CommandState
	if _, err := o.API.post(ctx, o.Timeout, "/v1/commands/"+url.PathEscape(o.id)+"/resolve", httpapi.ResolveRequest{Action: o.Action}, &st); err != nil {
		return err
	}
	var err error
	if o.Output.Structured() {
		err = o.Output.Write(o.Out, st)
	} else {
		err = table{header: []string{"ID", "STATE", "DETAIL"}, rows: [][]string{{st.ID, st.State, dash(firstOf(st.Reason, st.Detail))}}}.write(o.Out)
	}
	if err != nil {
		return err
	}
	want := dispatch.StatusSucceeded.String()
	if o.Action == dispatch.ResolveCancel.String() {
		want = dispatch.StatusCancelled.String()
	}
	if st.State != want {
		return withCode(ExitCommandFailed, fmt.Errorf("command %s: %s", st.ID, st.State))
	}
	return nil
}
