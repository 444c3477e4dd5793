package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// UnreachableError reports a Kafka cluster that did not answer. Its message
// leads with the cause and the setting that named the brokers, so that the
// first line an operator reads says what to check.
type UnreachableError struct {
	// Brokers are the seed brokers tried.
	Brokers []string
	// Setting is where they came from, such as "kafka.brokers in
	// node-1.yaml", "--brokers" or "$DISPATCHER_BROKERS".
	Setting string
	// Cause is the reason in a few words, such as "connection refused".
	Cause string
	// Err is the client's error.
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the Kafka cluster at %s (%s): %s", strings.Join(e.Brokers, ","), e.Setting, e.Cause)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// brokerSetting names where the brokers of o come from.
func (o *ClusterOptions) brokerSetting() string {
	switch {
	case o.brokersFrom != "":
		return o.brokersFrom
	case o.ConfigFile != "":
		return "kafka.brokers in " + o.ConfigFile
	}
	return "--brokers"
}

// reach asks the cluster for its API versions, once per seed broker, within
// ctx, and returns an *UnreachableError marked ExitUnavailable when none
// answers. Every command that talks to the cluster calls it first, so an
// unreachable cluster fails the same way and at once (a refused connection)
// or at the command's --timeout (a silent one), whichever subcommand meets
// it.
func (o *ClusterOptions) reach(ctx context.Context) error {
	opts, err := o.clientOptions()
	if err != nil {
		return err
	}
	return reachCluster(ctx, o.Config.Kafka.Brokers, o.brokerSetting(), o.Timeout, opts)
}

// reachCluster is reach for brokers named by setting; timeout is the bound
// the caller's ctx carries, named in the error when it runs out.
func reachCluster(ctx context.Context, brokers []string, setting string, timeout time.Duration, opts []kgo.Opt) error {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	defer cl.Close()
	err = cl.Ping(ctx)
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) && !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		return err // interrupted, not unreachable
	}
	return withCode(ExitUnavailable, &UnreachableError{Brokers: brokers, Setting: setting, Cause: causeOf(ctx, err, timeout), Err: err})
}

// causeOf puts the reason a connection failed in a few words.
func causeOf(ctx context.Context, err error, timeout time.Duration) string {
	var errno syscall.Errno
	var dns *net.DNSError
	switch {
	case errors.As(err, &errno):
		return errno.Error()
	case errors.As(err, &dns):
		if dns.IsNotFound {
			return "no such host " + dns.Name
		}
		return dns.Error()
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		return fmt.Sprintf("no answer within --timeout %v", timeout)
	}
	return err.Error()
}
