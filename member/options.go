package member

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// Defaults of the options.
const (
	// DefaultDrainTimeout bounds how long a stopping leader lets the
	// commands it took reach their outcomes before it halts the dispatcher
	// ([WithDrainTimeout]).
	DefaultDrainTimeout = 10 * time.Second

	// DefaultResignTimeout bounds the resignation ([WithResignTimeout]).
	DefaultResignTimeout = 5 * time.Second

	// DefaultCampaignBackoff is the first pause before a member campaigns
	// again after a failed campaign or a lost leadership, and
	// DefaultMaxCampaignBackoff the longest ([WithCampaignBackoff]).
	DefaultCampaignBackoff    = 100 * time.Millisecond
	DefaultMaxCampaignBackoff = 5 * time.Second

	// PrefetchInterval is how often a member that does not lead has its
	// [dispatch.Standby] look for a newer full checkpoint of the role to
	// read ahead, besides each time it starts to campaign; it also bounds
	// one such read.
	PrefetchInterval = time.Minute
)

// Option configures [New]. Each option checks its own value; New checks the
// whole before it returns.
type Option func(*settings) error

// settings is what the options configure.
type settings struct {
	coordination  []coordination.Option
	registry      *dispatch.Registry
	log           dispatch.LogReader
	dispatch      []dispatch.Option
	drainTimeout  time.Duration
	resignTimeout time.Duration
	backoffFirst  time.Duration
	backoffMax    time.Duration
	slots         chan struct{}
	logger        *slog.Logger
	onEvent       func(Event)
}

func newSettings(options []Option) (*settings, error) {
	s := &settings{
		drainTimeout:  DefaultDrainTimeout,
		resignTimeout: DefaultResignTimeout,
		backoffFirst:  DefaultCampaignBackoff,
		backoffMax:    DefaultMaxCampaignBackoff,
	}
	for _, option := range options {
		if option == nil {
			continue
		}
		if err := option(s); err != nil {
			return nil, err
		}
	}
	if s.backoffMax < s.backoffFirst {
		return nil, fmt.Errorf("member: the longest campaign backoff %v is below the first %v", s.backoffMax, s.backoffFirst)
	}
	return s, nil
}

var errNotPositive = errors.New("must be positive")

func positive(what string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("member: %s %v: %w", what, d, errNotPositive)
	}
	return nil
}

// WithCoordination passes options to [coordination.AcquireLeadership]: the
// state topic and its partitions, the lease timings, the poll interval, the
// clock.
func WithCoordination(options ...coordination.Option) Option {
	return func(s *settings) error {
		s.coordination = append(s.coordination, options...)
		return nil
	}
}

// WithDispatcher makes the member run a dispatcher while it leads, built by
// [dispatch.NewDispatcher] with registry, log and options for each
// leadership. Without it the member only holds the role.
func WithDispatcher(registry *dispatch.Registry, log dispatch.LogReader, options ...dispatch.Option) Option {
	return func(s *settings) error {
		if registry == nil {
			return errors.New("member: the dispatcher's registry is nil")
		}
		if log == nil {
			return errors.New("member: the dispatcher's log reader is nil")
		}
		s.registry, s.log, s.dispatch = registry, log, options
		return nil
	}
}

// WithDrainTimeout bounds how long a stopping leader lets the commands it
// took reach their outcomes, overriding [DefaultDrainTimeout]. What is still
// in flight after it is cancelled and left to the next leader's recovery.
func WithDrainTimeout(d time.Duration) Option {
	return func(s *settings) error {
		if err := positive("drain timeout", d); err != nil {
			return err
		}
		s.drainTimeout = d
		return nil
	}
}

// WithResignTimeout bounds the resignation, overriding
// [DefaultResignTimeout]. A resignation that does not finish in time leaves
// the standbys waiting for the lease to run out ([EventAbandoned]).
func WithResignTimeout(d time.Duration) Option {
	return func(s *settings) error {
		if err := positive("resign timeout", d); err != nil {
			return err
		}
		s.resignTimeout = d
		return nil
	}
}

// WithCampaignBackoff sets the pause before a member campaigns again after a
// failed campaign or a lost leadership: first, then doubling up to max, each
// pause jittered by half either way and never above max, overriding
// [DefaultCampaignBackoff] and [DefaultMaxCampaignBackoff]. A won leadership
// starts the sequence over.
func WithCampaignBackoff(first, max time.Duration) Option {
	return func(s *settings) error {
		if err := positive("campaign backoff", first); err != nil {
			return err
		}
		if err := positive("longest campaign backoff", max); err != nil {
			return err
		}
		s.backoffFirst, s.backoffMax = first, max
		return nil
	}
}

// WithCampaignSlots makes the member hold a slot of slots (send to take one,
// receive to give it back) for each campaign, so that many members of one
// process, one per role, do not all start a transactional producer at the
// same instant. Members that share slots campaign at most cap(slots) at a
// time; a standby keeps its slot while it waits for the role.
func WithCampaignSlots(slots chan struct{}) Option {
	return func(s *settings) error {
		if slots == nil || cap(slots) == 0 {
			return errors.New("member: campaign slots need a buffered channel")
		}
		s.slots = slots
		return nil
	}
}

// WithLogger sets the logger of the member's own messages; none by default.
func WithLogger(logger *slog.Logger) Option {
	return func(s *settings) error {
		s.logger = logger
		return nil
	}
}

// WithEventHandler calls handle for every [Event], in order, from the
// goroutine of [Member.Run]. handle must not block: the member waits for it.
func WithEventHandler(handle func(Event)) Option {
	return func(s *settings) error {
		s.onEvent = handle
		return nil
	}
}
