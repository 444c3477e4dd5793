package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/internal/config"
	"github.com/krabka-io/krabka-dispatch/internal/httpapi"
)

// SubmitOptions are the flags of `dispatcher submit`.
type SubmitOptions struct {
	Cluster     ClusterOptions
	API         APIOptions
	Output      Output
	ID          string
	Device      string
	Action      string
	Payload     string
	PayloadFile string
	TTL         time.Duration
	Attributes  map[string]string
	Wait        bool

	Streams

	payload []byte
}

// SubmitResult is what `submit` prints.
type SubmitResult struct {
	ID     string `json:"id"`
	Role   string `json:"role,omitempty"`
	Via    string `json:"via"`
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// NewSubmitCommand builds `dispatcher submit`.
func NewSubmitCommand(streams Streams) *cobra.Command {
	o := &SubmitOptions{Output: OutputTable, Streams: streams}
	cmd := &cobra.Command{
		Use:   "submit --device NAME --action ACTION [--payload TEXT]",
		Short: "Submit a command, through the requests topic or a member's HTTP API",
		Long: `submit sends one command. With --url it posts to that member's HTTP API (a
standby redirects to the leader); without, it writes the command to the
requests topic, where the leader takes it in exactly once. The command ID is
the idempotency key: submitting the same ID again never dispatches twice.
An https --url is verified against --cacert (else the host's roots), and
--cert and --key answer a member that demands a client certificate.

--wait waits for the outcome (bounded by --timeout) and exits 7 unless the
command succeeded.`,
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
	o.API.AddFlags(cmd.Flags())
	addOutputFlag(cmd, &o.Output)
	cmd.Flags().StringVar(&o.ID, "id", "", "command ID, the idempotency key (default: generated)")
	cmd.Flags().StringVar(&o.Device, "device", "", "device name (required)")
	cmd.Flags().StringVar(&o.Action, "action", "", "action, as the device defines it (required)")
	cmd.Flags().StringVar(&o.Payload, "payload", "", "payload as text")
	cmd.Flags().StringVar(&o.PayloadFile, "payload-file", "", "file whose bytes are the payload")
	cmd.Flags().DurationVar(&o.TTL, "ttl", 0, "time to live: never dispatched after it (default: the dispatcher's command timeout)")
	cmd.Flags().StringToStringVar(&o.Attributes, "attr", nil, "attributes, key=value")
	cmd.Flags().BoolVarP(&o.Wait, "wait", "w", false, "wait for the outcome; exit 7 unless it succeeded")
	return cmd
}

// Complete fills defaults and reads the payload file. Through the requests
// topic it needs the cluster settings; through the HTTP API (--url) it
// takes the token from --config when no flag or variable gives it.
func (o *SubmitOptions) Complete() error {
	if o.API.URL == "" || o.Cluster.ConfigFile != "" {
		if err := o.Cluster.Complete(); err != nil {
			return err
		}
	}
	if o.API.URL != "" {
		var c *config.Config
		if o.Cluster.ConfigFile != "" {
			c = o.Cluster.Config
		}
		if err := o.API.complete(c); err != nil {
			return err
		}
	}
	if o.ID == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		o.ID = "cli-" + time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b[:])
	}
	o.payload = []byte(o.Payload)
	if o.PayloadFile != "" {
		data, err := os.ReadFile(o.PayloadFile)
		if err != nil {
			return usageErrorf("--payload-file: %v", err)
		}
		o.payload = data
	}
	return nil
}

// Validate checks the flags.
func (o *SubmitOptions) Validate() error {
	switch {
	case o.Device == "":
		return usageErrorf("--device is required")
	case o.Action == "":
		return usageErrorf("--action is required")
	case o.Payload != "" && o.PayloadFile != "":
		return usageErrorf("give --payload or --payload-file, not both")
	case o.TTL < 0:
		return usageErrorf("--ttl %v: want a duration above 0", o.TTL)
	case o.Cluster.Timeout <= 0:
		return usageErrorf("--timeout %v: want a duration above 0", o.Cluster.Timeout)
	}
	if o.API.URL == "" {
		return o.Cluster.Validate(true)
	}
	if !strings.HasPrefix(o.API.URL, "http://") && !strings.HasPrefix(o.API.URL, "https://") {
		return usageErrorf("--url %q: want http:// or https://", o.API.URL)
	}
	return nil
}

// Run submits the command.
func (o *SubmitOptions) Run(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, o.Cluster.Timeout)
	defer cancel()
	var res SubmitResult
	var err error
	if o.API.URL != "" {
		res, err = o.viaHTTP(ctx)
	} else {
		res, err = o.viaTopic(ctx)
	}
	if err != nil {
		return err
	}
	if o.Output.Structured() {
		err = o.Output.Write(o.Out, res)
	} else {
		err = table{header: []string{"ID", "VIA", "STATE", "DETAIL"}, rows: [][]string{{res.ID, res.Via, res.State, dash(firstOf(res.Reason, res.Detail))}}}.write(o.Out)
	}
	if err != nil {
		return err
	}
	if o.Wait && res.State != dispatch.StatusSucceeded.String() {
		return withCode(ExitCommandFailed, fmt.Errorf("command %s: %s", res.ID, res.State))
	}
	return nil
}

func (o *SubmitOptions) viaHTTP(ctx context.Context) (SubmitResult, error) {
	req := httpapi.SubmitRequest{ID: o.ID, Device: o.Device, Action: o.Action, Attributes: o.Attributes}
	if o.payload != nil {
		req.Payload = string(o.payload)
	}
	if o.TTL > 0 {
		req.Timeout = o.TTL.String()
	}
	path := "/v1/commands"
	if o.Wait {
		path += "?wait=" + o.Cluster.Timeout.String()
	}
	var st httpapi.CommandState
	answered, err := o.API.post(ctx, o.Cluster.Timeout+time.Second, path, req, &st)
	if err != nil {
		return SubmitResult{}, err
	}
	return SubmitResult{ID: st.ID, Via: answered, State: st.State, Reason: st.Reason, Detail: st.Detail}, nil
}

func (o *SubmitOptions) viaTopic(ctx context.Context) (SubmitResult, error) {
	if err := o.Cluster.reach(ctx); err != nil {
		return SubmitResult{}, err
	}
	c := o.Cluster.Config
	kopts, err := o.Cluster.clientOptions()
	if err != nil {
		return SubmitResult{}, err
	}
	client, err := dispatch.NewClient(c.Kafka.Brokers,
		dispatch.WithClientLogTopic(c.Topics.Log, c.Topics.Partitions),
		dispatch.WithClientRequestsTopic(c.Topics.Requests, c.Topics.Partitions),
		dispatch.WithClientKafkaOptions(kopts...))
	if err != nil {
		return SubmitResult{}, withCode(ExitUsage, err)
	}
	defer client.Close()
	now := time.Now()
	ttl := o.TTL
	if ttl == 0 {
		ttl = dispatch.DefaultCommandTimeout
	}
	cmd := dispatch.Command{ID: o.ID, Role: c.Role, Device: o.Device, Action: o.Action, Payload: o.payload,
		SubmittedAt: now, Deadline: now.Add(ttl), Attributes: o.Attributes}
	receipt, err := client.Send(ctx, cmd)
	if err != nil {
		return SubmitResult{}, unavailable(ctx, err)
	}
	res := SubmitResult{ID: o.ID, Role: c.Role, Via: c.Topics.Requests, State: "submitted"}
	if !o.Wait {
		return res, nil
	}
	fmt.Fprintf(o.Err, "submitted %s; waiting for its outcome in %s\n", o.ID, c.Topics.Log)
	// The command's records follow its request: the wait reads from there,
	// not the role's whole log.
	out, err := client.Wait(ctx, c.Role, o.ID, dispatch.LookupAfter(receipt))
	if err != nil {
		return res, unavailable(ctx, err)
	}
	res.State, res.Reason, res.Detail = out.Status.String(), out.Reason, out.Result.Detail
	return res, nil
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
