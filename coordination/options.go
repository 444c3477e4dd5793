package coordination

import (
	"errors"
	"fmt"
	"time"
)

// StateTopic is the compacted internal topic that holds the coordination
// state of a cluster. Every record of one role goes to one partition, so the
// records of a role carry a total order. See [RolePartition].
//
// The topic needs cleanup.policy=compact. A client writes it with acks=all,
// and an operator should set min.insync.replicas to at least 2. The claim
// "durable in a quorum before the dispatch" rests on that topic configuration,
// and not on this package.
const StateTopic = "__coordination_state"

// DefaultPartitions is the partition count that this package assumes for
// [StateTopic]. Pass the real count of the cluster with [WithPartitions] when
// an operator created the topic with another count.
const DefaultPartitions = 16

// DefaultPollInterval is the default gap between two reads of [StateTopic]
// while a member waits for a role. It also bounds the retry of a renewal that
// failed for a reason other than a fence.
const DefaultPollInterval = time.Second

// maxTopicLen is the longest topic name that Kafka accepts.
const maxTopicLen = 249

// Option configures [AcquireLeadership], [DescribeRoleState], and
// [RoleTopicPartition].
//
// Every option checks its own value when it is applied, and the call checks
// the combination (a renew interval below the lease duration) before it starts
// any goroutine or reaches the cluster. A rejected option names the bad value.
type Option func(*settings) error

// settings is what the options configure. newSettings applies the options
// to the defaults and validates the result once.
type settings struct {
	topic            string
	partitions       int
	pollInterval     time.Duration
	clock            Clock
	leaseDuration    time.Duration
	renewInterval    time.Duration
	challengeStagger time.Duration
	renewalLead      time.Duration // zero: no Write carries a renewal

	// lease is the validated policy that newSettings builds from the three
	// extents above.
	lease LeaseConfig
}

// newSettings applies options to the defaults and validates the whole.
func newSettings(options []Option) (*settings, error) {
	s := &settings{
		topic:            StateTopic,
		partitions:       DefaultPartitions,
		pollInterval:     DefaultPollInterval,
		clock:            SystemClock{},
		leaseDuration:    DefaultLeaseDuration,
		renewInterval:    DefaultRenewInterval,
		challengeStagger: DefaultChallengeStagger,
	}
	for _, option := range options {
		if option == nil {
			continue
		}
		if err := option(s); err != nil {
			return nil, err
		}
	}
	lease, err := NewLeaseConfig(s.leaseDuration, s.renewInterval, s.challengeStagger)
	if err != nil {
		return nil, err
	}
	s.lease = lease
	if s.renewalLead >= s.renewInterval {
		return nil, fmt.Errorf("coordination: renewal lead %v is not below the renew interval %v, so every write would carry a renewal", s.renewalLead, s.renewInterval)
	}
	return s, nil
}

// topicPartition applies RolePartition to the configured topic.
func (s *settings) topicPartition(role Role) (TopicPartition, error) {
	partition, err := RolePartition(role, s.partitions)
	if err != nil {
		return TopicPartition{}, err
	}
	return TopicPartition{Topic: s.topic, Partition: partition}, nil
}

// WithTopic reads and writes another topic than [StateTopic]. It rejects an
// empty name, a name longer than 249 bytes, and a name with a character that
// Kafka does not allow in a topic name (ASCII letters, digits, '.', '_', '-').
func WithTopic(topic string) Option {
	return func(s *settings) error {
		if err := checkTopic(topic); err != nil {
			return err
		}
		s.topic = topic
		return nil
	}
}

// checkTopic applies Kafka's rules for a topic name.
func checkTopic(topic string) error {
	if topic == "" || topic == "." || topic == ".." {
		return fmt.Errorf("coordination: topic %q is not a legal topic name", topic)
	}
	if len(topic) > maxTopicLen {
		return fmt.Errorf("coordination: topic %.32q... is %d bytes, above the limit of %d", topic, len(topic), maxTopicLen)
	}
	for _, c := range []byte(topic) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return fmt.Errorf("coordination: topic %q holds %q, which a topic name may not", topic, c)
		}
	}
	return nil
}

// WithPartitions sets the partition count of the coordination topic; the
// default is [DefaultPartitions]. Every member of a cluster passes the count
// that the cluster created the topic with (the topic's num.partitions),
// because the count picks the partition of a role. It rejects a count below
// one.
func WithPartitions(partitions int) Option {
	return func(s *settings) error {
		if partitions < 1 {
			return fmt.Errorf("coordination: partition count %d is below one", partitions)
		}
		s.partitions = partitions
		return nil
	}
}

// WithPollInterval sets the longest gap between two reads of the coordination
// topic while a member waits; the default is [DefaultPollInterval]. A shorter
// gap finds a resigned holder sooner and costs more fetches. The interval also
// bounds the retry of a renewal that failed for a reason other than a fence.
// A transport that implements [PartitionWaiter] ends a wait early when a
// record commits, so the interval then bounds only the wait for a change of
// the clock. It rejects an interval at or below zero.
func WithPollInterval(interval time.Duration) Option {
	return func(s *settings) error {
		if interval <= 0 {
			return fmt.Errorf("coordination: poll interval %v is not positive", interval)
		}
		s.pollInterval = interval
		return nil
	}
}

// WithClock reads the time from another clock than [SystemClock]. A test
// passes [NewManualClock] and drives every wait by hand. It rejects a nil
// clock.
func WithClock(clock Clock) Option {
	return func(s *settings) error {
		if clock == nil {
			return errors.New("coordination: clock is nil")
		}
		s.clock = clock
		return nil
	}
}

// WithLeaseDuration sets the extent of a lease; the default is
// [DefaultLeaseDuration]. A lease record counts it in whole milliseconds. A
// transport passes the same extent to the transaction coordinator as
// transaction.timeout.ms, so the coordinator aborts the open transaction of a
// dead holder. It rejects an extent at or below zero; the call rejects a
// duration at or below the renew interval.
func WithLeaseDuration(duration time.Duration) Option {
	return func(s *settings) error {
		if duration <= 0 {
			return fmt.Errorf("coordination: lease duration %v is not positive", duration)
		}
		s.leaseDuration = duration
		return nil
	}
}

// WithRenewInterval sets the gap between two renewals by the holder; the
// default is [DefaultRenewInterval]. It rejects an interval at or below zero;
// the call rejects an interval at or above the lease duration.
func WithRenewInterval(interval time.Duration) Option {
	return func(s *settings) error {
		if interval <= 0 {
			return fmt.Errorf("coordination: renew interval %v is not positive", interval)
		}
		s.renewInterval = interval
		return nil
	}
}

// WithChallengeStagger sets the extra delay that one rank of succession adds;
// the default is [DefaultChallengeStagger]. It rejects a stagger at or below
// zero.
func WithChallengeStagger(stagger time.Duration) Option {
	return func(s *settings) error {
		if stagger <= 0 {
			return fmt.Errorf("coordination: challenge stagger %v is not positive", stagger)
		}
		s.challengeStagger = stagger
		return nil
	}
}

// WithRenewalsInWrites lets a [Leadership.Write] carry the lease renewal
// when one falls due within lead: the write adds the lease record to its
// transaction, and its commit extends the lease as [Leadership.Renew] does.
// A holder that writes steadily then spends no transaction of its own on
// renewals, and the background loop renews only when no write carried the
// renewal before its renew instant. The default, zero, leaves every renewal
// to the loop, and a Write then never extends the lease.
//
// It rejects a negative lead; the call rejects a lead at or above the renew
// interval, which would make every write carry a renewal.
func WithRenewalsInWrites(lead time.Duration) Option {
	return func(s *settings) error {
		if lead < 0 {
			return fmt.Errorf("coordination: renewal lead %v is negative", lead)
		}
		s.renewalLead = lead
		return nil
	}
}

// WithLeaseConfig takes a whole lease policy; the default is
// [DefaultLeaseConfig]. A later [WithLeaseDuration], [WithRenewInterval], or
// [WithChallengeStagger] changes one timing of it. It rejects the zero
// LeaseConfig, which [NewLeaseConfig] never returns.
func WithLeaseConfig(config LeaseConfig) Option {
	return func(s *settings) error {
		if config.duration <= 0 {
			return errors.New("coordination: lease config is the zero value; build one with NewLeaseConfig")
		}
		s.leaseDuration = config.duration
		s.renewInterval = config.renewInterval
		s.challengeStagger = config.challengeStagger
		return nil
	}
}
