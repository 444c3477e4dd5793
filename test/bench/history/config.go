package history

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// Defaults of a run.
const (
	// DefaultPartitions is the partition count of the run's log and
	// requests topics.
	DefaultPartitions = 4
	// DefaultLease, DefaultRenew, DefaultStagger and DefaultPoll are the
	// lease timings of the measured processes.
	DefaultLease   = 5 * time.Second
	DefaultRenew   = 1500 * time.Millisecond
	DefaultStagger = 1 * time.Second
	DefaultPoll    = 200 * time.Millisecond
	// DefaultSamples is how many times each latency is measured.
	DefaultSamples = 5
	// DefaultStepTimeout bounds each step of a size: the fill, a start, a
	// failover, the further commands.
	DefaultStepTimeout = 30 * time.Minute
)

// Config describes a run.
type Config struct {
	// Brokers are the bootstrap addresses of the cluster.
	Brokers []string
	// MQTTURL is the broker the measured processes' device publishes to.
	MQTTURL string
	// Binary is the path of the dispatcher binary.
	Binary string
	// Dir holds the configuration files and the processes' logs.
	Dir string
	// Sizes are the numbers of settled commands of the role (and as many
	// of another role) in the log before the start; 0 should come first,
	// as the ratios are against it.
	Sizes []int
	// Further is the number of commands sent after the failover, before
	// the last memory reading; zero sends none.
	Further int
	// WarmUp is the size of a pass run before the first size, whose
	// figures are dropped; zero runs none. On brokers that just started
	// the first size measured is slower than the later ones (an empty
	// log's cold start took 401 ms to its first command there, 147 ms
	// after twenty minutes of load), and every ratio against it flatters
	// the larger sizes.
	WarmUp int
	// Partitions, Lease, Renew, Stagger, Poll and Samples default to the
	// constants above when zero.
	Partitions                  int
	Lease, Renew, Stagger, Poll time.Duration
	Samples                     int
	// Settle is how long after the fill the cold starts and the lookups
	// are measured, at least: a lookup by time starts
	// dispatch.DefaultLookupSkew before the time it is given, so without
	// it the hinted lookups would read the fill itself, and the brokers
	// would still be busy with the fill's millions of records during the
	// cold starts; a real history is older than both. Zero means
	// DefaultLookupSkew and a second; a negative value waits not at all.
	Settle time.Duration
	// Progress receives a line per step; nil discards them.
	Progress io.Writer
}

func (c *Config) complete() error {
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.Lease == 0 {
		c.Lease, c.Renew, c.Stagger, c.Poll = DefaultLease, DefaultRenew, DefaultStagger, DefaultPoll
	}
	if c.Samples == 0 {
		c.Samples = DefaultSamples
	}
	if c.Settle == 0 {
		c.Settle = dispatch.DefaultLookupSkew + time.Second
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	switch {
	case len(c.Brokers) == 0:
		return errors.New("history: no brokers")
	case c.MQTTURL == "":
		return errors.New("history: no MQTT broker")
	case c.Binary == "" || c.Dir == "":
		return errors.New("history: the binary and the directory are required")
	case len(c.Sizes) == 0:
		return errors.New("history: no sizes")
	case c.Further < 0:
		return fmt.Errorf("history: further %d is negative", c.Further)
	case c.WarmUp < 0:
		return fmt.Errorf("history: warm-up %d is negative", c.WarmUp)
	}
	for _, n := range c.Sizes {
		if n < 0 {
			return fmt.Errorf("history: size %d is negative", n)
		}
	}
	return nil
}

func (c *Config) logf(format string, args ...any) {
	fmt.Fprintf(c.Progress, time.Now().UTC().Format("15:04:05")+" "+format+"\n", args...)
}
