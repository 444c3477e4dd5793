// Package member runs one member of a role: it campaigns for the role, runs a
// [dispatch.Dispatcher] while it leads, and when the leadership ends or the
// member stops, it drains, resigns, and (unless it stops) campaigns again.
// Every program that dispatches under a role runs this loop; it lives here,
// once, so that each of them stops in the same order and with the same
// bounds.
//
// # Why a loop, and why in this order
//
// A [coordination.Leadership] ends: a successor fences it, a renewal's outcome
// is unknown, or the member gives it up. A member that wants to keep serving
// its role must therefore build a new dispatcher for every leadership it wins
// and campaign again after each one ends, pausing a little (a bounded,
// jittered backoff, [WithCampaignBackoff]) so that members that fail together
// do not retry in step and a member whose dispatcher cannot start does not
// spin.
//
// Stopping is where the order matters. When the context of [Member.Run] ends
// (a SIGTERM, in a daemon) the member:
//
//  1. stops intake, from both sides at once: [dispatch.Dispatcher.Submit]
//     refuses new commands with [dispatch.ErrIntakeStopped] (so an HTTP API
//     in front of it answers "not the leader"), and the dispatcher stops
//     reading the requests topic, leaving every request it had not taken past
//     the committed intake position, for the next leader;
//  2. lets the commands it took reach their outcomes, for at most the drain
//     timeout ([WithDrainTimeout]), still fenced by its leadership;
//  3. halts the dispatcher (what is still in flight is cancelled and left to
//     the next leader's recovery) and resigns, bounded by the resign timeout
//     ([WithResignTimeout]), so that a standby takes over at once instead of
//     waiting for the lease to run out.
//
// Were the order reversed (resign first, or keep intake open while draining),
// a command taken during the drain could be cut off mid-dispatch by the halt,
// and would be left in doubt when it could simply have gone to the successor.
//
// A leadership that ends on its own is not drained: its dispatcher has halted
// already (it cannot write under a fenced token), and the member emits
// [EventDeposed] with the cause. A dispatcher that stops on its own while the
// leadership holds (a panic in a device, say) makes the member resign, so
// that the role does not stay with a member that no longer dispatches.
//
// # Reading ahead while it waits
//
// A member with a dispatcher over a [dispatch.LogRangeReader] gives its
// dispatchers a [dispatch.Standby], which reads the role's newest full
// checkpoint (the part of a recovery that grows with the dedup window)
// whenever the member starts to campaign and every [PrefetchInterval] while
// it does not lead, and keeps what its search for the newest checkpoint
// found. The recovery of a leadership it wins then reads only the records
// written after that read, unless the role wrote a checkpoint since; at a
// cold start the read runs beside the campaign. A read that fails is
// logged, and the recovery reads what it needs itself.
//
// # Observing a member
//
// [WithEventHandler] receives every [Event] in order, from the goroutine of
// Run: elected (term and token), ready (the dispatcher recovered the role's
// state and takes commands), deposed (with the cause), draining, resigned or
// abandoned (the resignation failed), campaign failures, and stopped.
// [Member.Status] returns a snapshot at any time, which is what a readiness
// probe reads: [Status.Leading] and [Status.Recovered].
//
// # Goroutines
//
// Run starts one goroutine per leadership, the dispatcher's Run (which starts
// its own, see [dispatch.Dispatcher]), and, with a dispatcher, one that reads
// ahead for the whole of Run; it returns only after they have exited.
// Nothing runs before Run or after it returns.
//
// Without [WithDispatcher] a member only holds the role: it campaigns, keeps
// the lease, and resigns on stop; a program that measures the election uses
// that.
package member
