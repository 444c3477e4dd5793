// Package sim is a deterministic simulator of the fenced-dispatch protocol:
// a single goroutine runs a seeded world, a discrete event queue ordered by
// (time, sequence) with one PRNG choosing every delay, fault and
// interleaving, so a seed replays exactly (the event trace's hash is the
// same on every run). There is no real goroutine, timer or network.
//
// # What is modelled
//
//   - Members of one role, and of a second role sharing the partitions when
//     the seed enables it. Each has a wall clock with its own skew and a
//     monotonic clock (true time). Their leadership loop follows
//     coordination's campaign and renewal loop, and the real pure code takes
//     every decision: registration records and lease records are encoded
//     with coordination's codec and folded with BuildRoleState, the step is
//     coordination.Evaluate, leases come from LeaseConfig.Grant and
//     LeaseTiming, the term is the offset of the first lease record and
//     later records carry it in the term header, freshness is the lease
//     duration minus the time since just before the last committed grant
//     was written, on the monotonic clock. A live lease of the member's own
//     ID is waited out; the instant a decision judges its view at is taken
//     before the read; after the InitProducerId a challenger reads the role
//     again and outwaits a fenced holder's live lease, or a lease duration
//     when that read cannot pass the high watermark, before its first lease;
//     resign tombstones lease and registration in one guarded write.
//   - A transaction coordinator modelling transactions v2: InitProducerId
//     bumps the epoch, fencing earlier epochs, and answers
//     CONCURRENT_TRANSACTIONS (the client sends it again) while the last
//     transaction is open, which it aborts, or decided with its markers not
//     yet landed; every EndTxn bumps the epoch and returns the new token; an
//     exhausted epoch rotates to a producer id from the coordinating
//     broker's block, which may be lower; the last stable offset hides
//     records behind an undecided transaction or one whose markers have not
//     landed (marker lag); a transaction open past its timeout is aborted;
//     an outage fails every request for a while and moves the coordinator.
//   - Dispatchers modelled on dispatch.Dispatcher: recovery reads the log
//     past the high watermark of its first read and settles pending commands
//     through dispatch.Replay (expired, redispatched when the device declares
//     it safe, in doubt otherwise); intake from a requests partition with the
//     intake position in the same transaction as the Issued records; a device
//     call only after its record committed, one at a time per device, after a
//     freshness check that forces a renewal; outcomes under the token; a call
//     whose freshness ran out, or that got no answer, is in doubt.
//   - A fencing device that keeps its highest term with the real
//     devices/fence Store, and a plain device; both record every call.
//   - Faults: crash and restart under the same member ID, pause and resume,
//     a member cut from the brokers or from the devices, broker outage,
//     clock skew inside and beyond the safety margin, slow devices, epoch
//     exhaustion, marker lag, a leader's resignation, an operator's resolve.
//
// The command log is encoded with dispatch.EncodeEntry and decoded with
// dispatch.DecodeEntry, and each role's log and device calls go through
// chaos.Check, the chaos harness's checker, which runs dispatch.Verify. The
// simulator adds checks that need true time: no device call after the
// caller's freshness ended (FreshnessOverrun), none before its record
// committed (DispatchBeforeCommit), and no device acting on a term after a
// later term of the role began (ZombieDispatch; counted as expected when
// the seed skews a clock beyond the margin).
//
// # What is not modelled
//
// The model abstracts the real code where it says so here. The loops are
// re-expressed as events, not run: a change to campaign.go, renewal.go or
// the dispatcher must be carried here by hand. A partition waiter
// (long-poll) is not modelled; standbys poll. A pause only falls between
// events, so the gap between the freshness check and the device write is
// taken as zero. A request that is dropped times out and counts as an
// unknown outcome; a produce refused by an absent coordinator did nothing.
// One transaction per role commits or aborts as a whole, with no partial
// produce. Requests carry the command as a value of the world, not the
// requests codec. Checkpoints, the dedup window, group-commit bounds, HTTP
// intake, MACs and device replies are absent. Brokers do not lose
// acknowledged records.
package sim
