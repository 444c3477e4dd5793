package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/internal/config"
)

// EnvBrokers is the environment variable that --brokers defaults from.
const EnvBrokers = "DISPATCHER_BROKERS"

// DefaultCommandTimeout bounds a short operator command (status, submit,
// resolve) unless --timeout says otherwise.
const DefaultCommandTimeout = 15 * time.Second

// DefaultTopicsTimeout bounds `dispatcher topics` unless --timeout says
// otherwise. It is longer than DefaultCommandTimeout because the command
// creates up to three topics one after another and waits, for each, until
// the controller has elected a leader for every partition; on a busy
// cluster that alone takes several seconds a topic.
const DefaultTopicsTimeout = time.Minute

// ClusterOptions are the flags of every command that talks to the cluster:
// where it is, which role, and how long to wait. Settings come from
// --config when given, and flags override them.
type ClusterOptions struct {
	ConfigFile string
	Brokers    []string
	Role       string
	Timeout    time.Duration

	// Config is the completed configuration, set by Complete.
	Config *config.Config

	// brokersFrom names the setting the brokers came from when it is not
	// the configuration file; see brokerSetting.
	brokersFrom string
}

// AddFlags registers the flags on fs, with DefaultCommandTimeout as the
// default of --timeout.
func (o *ClusterOptions) AddFlags(fs *pflag.FlagSet) {
	o.addFlags(fs, DefaultCommandTimeout)
}

// addFlags registers the flags on fs, with timeout as the default of
// --timeout.
func (o *ClusterOptions) addFlags(fs *pflag.FlagSet, timeout time.Duration) {
	addConfigFlag(fs, &o.ConfigFile)
	fs.StringSliceVar(&o.Brokers, "brokers", nil, "seed brokers, host:port (default $"+EnvBrokers+")")
	fs.StringVar(&o.Role, "role", "", "role (default: the config file's role)")
	addTimeoutFlag(fs, &o.Timeout, timeout)
}

// Complete loads the configuration file, applies the flags over it, and
// fills defaults. It resolves none of the member's secrets (the HTTP
// token): a command that reaches only the cluster has no use for them.
func (o *ClusterOptions) Complete() error {
	var c *config.Config
	if o.ConfigFile != "" {
		loaded, err := config.Load(o.ConfigFile)
		if err != nil {
			return withCode(ExitUsage, err)
		}
		c = loaded
	} else {
		c = &config.Config{}
	}
	switch {
	case len(o.Brokers) > 0:
		o.brokersFrom = "--brokers"
	case len(c.Kafka.Brokers) == 0:
		if env := os.Getenv(EnvBrokers); env != "" {
			o.Brokers = strings.Split(env, ",")
			o.brokersFrom = "$" + EnvBrokers
		}
	}
	if len(o.Brokers) > 0 {
		c.Kafka.Brokers = o.Brokers
	}
	if o.Role != "" {
		c.Role = o.Role
	}
	if c.Member == "" {
		c.Member = "dispatcher-cli"
	}
	c.Complete()
	o.Config = c
	return nil
}

// Validate checks the settings the command needs.
func (o *ClusterOptions) Validate(needRole bool) error {
	if len(o.Config.Kafka.Brokers) == 0 {
		return usageErrorf("no brokers: pass --brokers, --config, or set $%s", EnvBrokers)
	}
	if o.Timeout <= 0 {
		return usageErrorf("--timeout %v: want a duration above 0", o.Timeout)
	}
	if needRole {
		if _, err := coordination.NewRole(o.Config.Role); err != nil {
			return usageErrorf("no role: pass --role or --config")
		}
	}
	return nil
}

// role returns the validated role.
func (o *ClusterOptions) role() coordination.Role {
	r, _ := coordination.NewRole(o.Config.Role)
	return r
}

// clientOptions returns the franz-go options that reach the cluster.
func (o *ClusterOptions) clientOptions() ([]kgo.Opt, error) {
	opts, err := o.Config.Kafka.ClientOptions()
	if err != nil {
		return nil, withCode(ExitUsage, err)
	}
	return opts, nil
}

// unavailable marks an error of reaching the cluster, unless the context
// ran out for another reason than the timeout.
func unavailable(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil && !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		return err
	}
	return withCode(ExitUnavailable, fmt.Errorf("cluster: %w", err))
}
