// Package coordination elects one leader per role, and it proves that
// leadership on every guarded write.
//
// A control plane that dispatches commands to external devices needs two
// properties from its log. A command is durable in a quorum before the
// dispatch, and a deposed leader cannot dispatch at all. The second property
// is the hard one. A leader that loses its lease does not know that it lost
// the lease, so it cannot fence itself. Something outside the leader must
// refuse its writes.
//
// # The epoch is the safety mechanism and the lease is not
//
// The leadership epoch is the producer epoch that Kafka's transaction
// coordinator mints for the transactional id of a role. That one decision
// supplies every property this package promises:
//
//   - The quorum mints the epoch. No member picks its own, so no member can
//     claim a role that the coordinator did not give it.
//   - The epoch only grows. Every [FencingToken] a role shows supersedes every
//     token before it.
//   - The broker enforces it. A write under a superseded epoch fails with
//     [ErrFenced], whatever the clock of the writer says.
//   - Anyone can check it. [DescribeLeadership] asks the coordinator which
//     token holds the role now.
//
// The lease adds no safety of its own. It is a liveness and anti-flap
// device. It tells a standby when to stop waiting for a quiet holder. A wrong
// lease makes a failover early or late. A wrong lease never makes two writers
// authoritative. Read that inversion against a hand-rolled design, where the
// lease deadline decides who may write. This package never asks the lease
// that question.
//
// # The fencing token is a pair
//
// The producer epoch is an int16 and it wraps. Kafka handles the exhaustion
// with a fresh producer id and an epoch of zero. An implementation that
// compares the epoch alone accepts a stale writer after about 32000
// leadership changes. [FencingToken] holds the pair, and
// [FencingToken.Compare] reads the producer id first. See [NoEpoch] for the
// token of a role that no member has taken.
//
// # The term orders leaderships, and the pair does not
//
// The published contract of this package says that Kafka allocates producer
// ids from a monotonic block allocator, so that the pair only grows. That
// holds per broker and not across brokers: each broker hands out ids from a
// block of its own (on a three-broker cluster, broker 2 minted 4000 and then
// broker 1 minted 3017). When the epoch of a role runs out, the coordinator
// mints the next id from the block of whichever broker coordinates the role
// at that moment, and that moves at every broker restart, so the new id can
// be lower than the old one.
//
// This package therefore keeps the pair for what the broker enforces, and
// nothing else: the broker fences by the pair, a [Leadership] follows the
// pair that its own transaction coordinator reports after each commit or
// abort, wherever it goes, and [LeadershipStatus.Authoritative] compares
// pairs for equality. The order between leaderships comes from the [Term]:
// the offset, in the role's partition of the coordination topic, of the
// leadership's first committed lease record, which the quorum assigns and
// which only grows. Every later record of the leadership carries it in the
// [TermHeader] header; [RoleState.Term] and [Leadership.Term] report it, and
// [Authority] pairs it with the token for a device. Anything that must tell
// an older leadership from a newer one (a device-side fence, an audit of the
// log) compares terms; [FencingToken.Compare] stays as the contract defines
// it and is right only within one producer id.
//
// # A member never takes over its own live lease
//
// The published contract lets a member that finds its own member id in a
// live lease challenge at once, since the lease must be an earlier
// incarnation's. That incarnation may be paused rather than gone, and it
// still believes it holds most of its lease, so it would drive the devices
// beside the new one until it woke. [AcquireLeadership] waits for the
// deadline of such a lease as a standby of rank 0 does, unless the lease is
// cleared first, which only the holder's own resignation does.
//
// # Rank comes from the log
//
// A candidate appends a registration record to [StateTopic]. The offset of
// that record in the partition is the join sequence of the candidate. Log
// compaction keeps the offset of every record it retains, so a reader that
// walks the partition in offset order sees the registrations in registration
// order. [BuildRoleState] folds that walk into a [RoleState], and the roster
// it builds is in offset order.
//
// A recovered node registers again. The new record takes a higher offset, so
// the node lands at the tail of the roster and takes the last rank. That is
// the no-failback rule, and it needs no counter and no coordinator. A rank
// from a configuration file would put the recovered node at the front, and
// the node would then preempt the member that replaced it. The cluster would
// pay for a second failover that it does not need.
//
// # The stagger is an optimisation
//
// A challenger of rank n waits n challenge staggers past the deadline of the
// lease. This saves epoch churn, and it does nothing else. InitProducerId is
// atomic at the coordinator, so a simultaneous challenge by every standby
// still leaves exactly one member with the newest epoch. The losers keep an
// older epoch, and each one learns that it lost on its first guarded write.
// A loser whose InitProducerId lands after the winner's first lease
// committed fences the winner instead, and it then outwaits the winner's
// lease before it leads (see below), so the role goes without a leader for
// up to a lease duration. Set the stagger to make that outcome rare. Do not
// set it to make the outcome safe, because the outcome is already safe.
//
// # The rules pin no Kafka client
//
// The succession rules and the leadership pin no Kafka client, so they reach
// a broker through the small interfaces in [Transport]. An adapter over any
// client is a few dozen lines of glue; [KafkaTransport] is the one over
// franz-go. Everything else is here: the record codec, the roster and the
// rank logic, the challenge timing, the lease clock, the renewal loop,
// [AcquireLeadership], and [DescribeLeadership].
//
// # Clock assumptions
//
// The lease deadline is a wall-clock instant. The holder writes it, and a
// challenger compares it against the clock of the challenger. Skew between
// the two clocks moves the failover time by the size of the skew. Skew does
// not affect safety, for the reason the first section gives. An operator that
// needs a bound on the failover time needs a bound on the skew.
//
// # Guarded writes and freshness
//
// A leader writes its own records, such as the commands it is about to
// dispatch, with [Leadership.Write]: one transaction under the epoch of the
// role, through the optional [GuardedWriter] of the transport. The broker
// fences the transaction of a deposed leader, so the write itself proves the
// authority of its author. A Write and a lease renewal never run at once,
// because a role has one transactional producer. A Write that is fenced, or
// whose outcome is unknown, ends the leadership.
//
// The broker fences writes to the log, and it fences nothing outside it. A
// leader that was paused after a commit and before it drove a device may wake
// after a successor took the role. [Leadership.ValidFor] answers the local
// question that closes most of that window: how much of the lease is left,
// measured on the monotonic clock from the instant just before the last
// committed grant or renewal was written. A caller drives devices only while
// ValidFor exceeds a safety margin that covers the clock skew between
// members, and devices that can check a token reject a lower one.
//
// # A new leader outwaits the freshness of the holder it fenced
//
// Freshness closes the window only if no new leader drives the devices while
// the old one still finds its lease fresh. A standby decides to challenge on
// a view that may be stale by then: the markers of a renewal that already
// committed may land after its read, so the view hid a newer lease; it may
// have been paused between its read and its challenge while the holder
// renewed; a holder paused past its deadline may wake and commit one more
// renewal just before the InitProducerId. The new epoch fences the holder's
// writes to the log at once, and its device calls not at all.
//
// So a challenger, once [Transport.AcquireEpoch] returned, reads the role's
// partition again before it writes its first lease. The earlier epochs can
// commit nothing more by then (the coordinator aborted an open transaction,
// and answered only once a committing one had its markers written), so that
// read shows the last lease a fenced holder will ever have. When that lease
// is still live on the challenger's clock, the challenger waits for its
// deadline, by which the holder's freshness ended within the skew that the
// safety margin covers. When the read cannot show the whole partition,
// because another producer's transaction holds the last stable offset back,
// it proves nothing: the challenger reads again every poll interval and
// waits at most one lease duration from the instant AcquireEpoch returned,
// by which any lease committed before the fence is stale whatever the skew.
// A failover after a crash finds the lease expired and pays one read for the
// rule; a failover whose read stays blocked pays up to one lease duration
// more.
//
// # Transaction versions
//
// Kafka has two versions of the transaction protocol, and the token of a
// leadership follows both. Under transactions v1 the epoch that
// InitProducerId mints stays put for the life of the producer. Under
// transactions v2 (KIP-890), the default of Kafka 4 clusters, the coordinator
// bumps the epoch on every commit and every abort, returns the new pair with
// the end of the transaction, and rotates to a new producer id with epoch 0
// when the epoch nears exhaustion. A transport that implements
// [GuardedWriter] reports the token after every commit, and the leadership
// takes it, so [Leadership.Token] always equals the token the coordinator
// holds now, and every lease record carries the token of the transaction
// that wrote it. A deposed member keeps an older token under both versions.
package coordination
