// Package dispatch drives external devices from a command log that a fenced
// leader writes: a command reaches a device only after its record committed in
// the quorum under the leadership token, and nothing is dispatched once the
// leadership ends.
//
// # Lifecycle
//
// A member that acquires its role's coordination.Leadership builds a
// [Dispatcher] with [NewDispatcher] and calls [Dispatcher.Run]; when Run
// returns, the leadership is over (or the member is shutting down), and the
// next leadership gets a new Dispatcher. Run goes through these steps:
//
//  1. Recovery. It reads the role's partition of the command log from the
//     newest checkpoint of the role to the high watermark taken when it
//     began, waiting out other producers' open transactions ([LogReader],
//     [LogRangeReader], [KafkaLogReader]; see "Checkpoints and the dedup
//     window" below), and rebuilds the command IDs inside the dedup window,
//     the intake position, and the pending commands: issued, with no
//     outcome of their latest attempt. Each pending command is settled as
//     "Takeover" below says, before any new command. A read that fails for a
//     reason a retry may cure is tried again while the leadership holds; a
//     record that does not decode ends Run, because a leader must not act on
//     part of its log. [Dispatcher.RecoveryStats] says how many records it
//     read.
//  2. Intake. Commands arrive from the role's partition of the requests topic
//     (read_committed, from the recovered intake position, with
//     [WithRequestSource]) and from [Dispatcher.Submit], which the binary's
//     HTTP API calls, or [Dispatcher.SubmitBatch] for many commands at once,
//     whose Issued records then commit together. A command whose ID the log holds inside the dedup
//     window is not issued again, and one submitted before the window is
//     refused ([ErrOutsideDedupWindow]). When it is the same command ([Command.SameAs]: role, device, action,
//     payload, attributes and deadline; SubmittedAt may differ), its
//     submitter gets the status of the first; when it differs, Submit
//     returns an *[IDConflictError], and a request from the topic, which has
//     no one to answer, is refused with a warning in the dispatcher's log
//     that names the ID and what differs (the ID's records belong to the
//     first command, so nothing is written for it). Submit refuses, before
//     anything is written, a command that does not validate, names a device
//     the [Registry] lacks, or that the device's [CommandValidator] refuses
//     ([Dispatcher.Check] asks the same without submitting); a request from
//     the topic with such a command is recorded as rejected and the rest
//     flow on.
//  3. Group commit. One transaction of the command log is in flight at a
//     time ([Leader.Write], serialised with the lease renewals). Every record
//     that queues while it is in flight goes into the next one, up to
//     [WithMaxBatchRecords] records and [WithMaxBatchBytes] bytes: Issued
//     records, outcomes, Redispatched records, and one intake record that
//     covers the requests the transaction answers. Each record carries the
//     token of the transaction that writes it, in its value and its headers,
//     with the member and the W3C trace context. The next transaction
//     starts no sooner than [WithCommitGap] after the one before ended,
//     unless the queue is full, and not before the transaction
//     coordinator has completed that one (the transport settles each
//     commit; see coordination.KafkaTransport.WriteGuarded).
//  4. Dispatch. Only a command whose Issued (or Redispatched) record
//     committed is dispatched, and the device receives the token that record
//     was written under. One device's commands go in log order, one at a
//     time; different devices run in parallel, up to
//     [WithMaxParallelDevices]. A command past its deadline is never
//     dispatched: it is recorded expired. Each Dispatch call gets a context
//     that ends at the command's deadline or the instant the dispatcher
//     halts, whichever comes first.
//  5. Outcome. The device's answer becomes an outcome record, batched like
//     the rest: nil is succeeded; an error marked [Rejected] is rejected; an
//     error marked [Retryable] is tried again after a doubling backoff
//     ([WithRetryBackoff]) while the leadership holds, up to
//     [WithMaxAttempts] calls, and then failed, because the device certainly
//     did not act on any of them (expired when the deadline passes between
//     attempts); any other error, a deadline passing during a call included,
//     is in doubt, because the device may have acted.
//  6. Halt. The instant the leadership's Done closes (or Run's context
//     ends), the dispatcher cancels the context of every Dispatch in flight,
//     stops intake, and writes nothing more; it could not land anyway. Every
//     waiting Submit returns [ErrHalted]: the command's outcome is unknown to
//     this member. The next leader's recovery finds such a command pending
//     and records it, so the log alone tells what became of it.
//
// Takeover. For each pending command the new leader finds: past its
// deadline, it records expired; when the device implements [Redispatcher]
// and says a redispatch is safe, it writes a Redispatched record under its
// own token and, once that commits, dispatches with that token; otherwise it
// records in doubt, and [Dispatcher.InDoubt] lists it for an operator, who
// decides with [Dispatcher.Resolve]: [ResolveRedispatch] (a Redispatched
// record, then the dispatch) or [ResolveCancel] (a cancelled outcome). The
// decision is itself recorded before anything is dispatched: every dispatch,
// first or not, follows a record committed under the current token.
//
// A command's first terminal outcome settles it for good: whatever follows
// in the log, a new leader never dispatches it again, and Resolve refuses it
// with a *[NotInDoubtError] that reports Settled. Short of that, an outcome
// in doubt leaves the command in doubt until an operator decides, and a
// Redispatched record makes it pending again. Recovery takes any log,
// sound or not, by these rules, and the live dispatcher applies the same
// ones to each record it commits.
//
// The dispatcher keeps every command ID of its role's log in memory, which is
// what makes a duplicate cheap to refuse; the log's retention bounds it.
//
// Telemetry. With [WithTracerProvider], each command is one trace: a span for
// its submission or intake (a child of the trace context in the request's
// headers), one per record of it from queueing to commit, and one per
// Dispatch call. The trace context travels in the headers of its log
// records, so a new leader that settles the command at a takeover continues
// the same trace from its Issued record ([Entry.Trace]). With
// [WithMeterProvider], each with the attributes "role" and "member":
// dispatch.commands (outcomes by status), dispatch.fenced_writes (log
// transactions refused with coordination.ErrFenced),
// dispatch.commit.duration and dispatch.dispatch.duration (seconds, in the
// buckets of [DurationBuckets]), and the gauges dispatch.pending and
// dispatch.in_doubt.
//
// # Writing a Device
//
// [Device] is the one interface a new kind of hardware needs. Its contract:
//
//   - Dispatch is never called concurrently for one device, and a device's
//     commands arrive in log order.
//   - ctx ends at the halt, at the command's deadline, and at the end of the
//     leadership's freshness (cause [ErrFreshnessExpired]; see "The zombie
//     window"). A cancelled ctx must abort the device write as soon as the
//     protocol allows, every wait of the device (a connection, an
//     acknowledgement, an answer) must end with it, and Dispatch must then
//     return: the halt of a deposed leader waits for it.
//   - The token passed is the token under which the command's record
//     committed. A device that can carry it to the hardware (an envelope
//     field, a fence register) should, so the hardware can refuse a deposed
//     leader: see "The zombie window".
//   - An error says whether a retry may help. Mark it with [Retryable] only
//     when the device certainly did not act (the connection was refused, the
//     request never left), and with [Rejected] when the device certainly did
//     not act and never will for this command (a malformed payload, a token
//     below one already seen). Any other error leaves the command in doubt.
//     A timeout after the request left is in doubt, never retryable.
//
// The optional interfaces, each asserted where it is needed:
//
//   - [Redispatcher]: RedispatchSafe is asked at a takeover, for each command
//     an earlier leader left pending. Without it, nothing is dispatched twice:
//     such commands are recorded in doubt.
//   - [HealthChecker]: [Registry.CheckHealth] calls CheckHealth, which the
//     binary runs on an interval for its readiness, status output and
//     metrics, and remembers the answers: [Dispatcher.Submit] refuses a
//     command for a device whose last check failed with a
//     *[DeviceUnavailableError] and records nothing. A request read from the
//     requests topic is not refused so: no caller waits to submit it again,
//     and a check is up to an interval old, so it is recorded and dispatched
//     as usual, and the device's Dispatch and the command's deadline decide
//     its outcome. Without CheckHealth a device is reported healthy.
//   - [CommandValidator]: ValidateCommand is asked at intake, for each new
//     command ID, before anything is written: an unknown action or a payload
//     the device cannot parse is refused to the submitter then (recorded
//     rejected for a request from the topic), not at dispatch. Without it
//     every action and payload is accepted at intake, and the device refuses
//     a bad one with [Rejected] when it is dispatched.
//   - io.Closer: [Registry.Close] calls Close once, after the last Dispatch
//     returned; it must not block indefinitely.
//
// Register each device under its name in a [Registry]; the registry refuses
// an empty name, a nil device and a name taken twice when the registration is
// made. Package dispatchtest checks a Device against this contract, in the
// manner of testing/slogtest: call dispatchtest.Run from the device's tests.
//
// # The zombie window
//
// The broker fences Kafka writes, not MQTT publishes or Modbus writes. A
// leader that is paused (a GC stall, a frozen VM, SIGSTOP) after its Issued
// record committed and before its device write may wake after a successor
// took over: its next Kafka write fails, but the device write it was about to
// make does not. That gap is the zombie window. Two defences close it, and
// both are required:
//
//   - Freshness. Before every Dispatch call, the dispatcher checks that its
//     own lease has more than the safety margin left ([WithSafetyMargin],
//     [DefaultSafetyMargin]), measured by [Leader.ValidFor] on the monotonic
//     clock from the instant just before the grant or renewal was written. A
//     command write proves authority when it commits but does not extend the
//     lease; only a lease write moves the deadline that standbys wait for
//     (the dispatcher binary lets a command write carry the lease record when
//     a renewal is due, coordination.WithRenewalsInWrites). A
//     dispatcher that finds its lease stale forces a renewal (Renew) and
//     dispatches only once one commits. A leader that was paused past its
//     deadline therefore finds on waking that it may not dispatch, and its
//     renewal fails with coordination.ErrFenced if a successor took over,
//     which ends the leadership and halts the dispatcher. This rests on a
//     successor that does not lead while the leader it fenced may still find
//     its lease fresh: after its InitProducerId a challenger reads the role
//     again and outwaits the newest lease it finds, as coordination's
//     package documentation explains. The margin must
//     cover the clock skew between members and the time one Dispatch needs
//     to reach the wire. What remains of the window is a pause that begins
//     after the freshness check and before the device write, longer than the
//     margin. Freshness also bounds the call itself: the ctx of every
//     Dispatch ends, with cause [ErrFreshnessExpired], when [Leader.ValidFor]
//     falls to the margin, an instant that each renewal committed during the
//     call moves forward. A leader cut off from the cluster, whose renewals
//     fail without fencing it, so stops waiting on a device before its lease
//     runs out; such a call is in doubt unless the device certainly did not
//     act.
//   - Device-side fencing. Every dispatch carries the term of its leadership
//     beside the token of its record ([AuthorityDevice]), and terms never go
//     backwards in the log; tokens may, within a term, when the role's
//     producer id rotates to a lower one. A device or gateway that refuses
//     any term lower than the highest it has seen (devices/fence) closes the
//     rest of the window: the devices/mqtt envelope carries the term and the
//     token, devices/modbus can write both to fence registers, and a device
//     that cannot check them is where a double dispatch remains possible;
//     the integration tests count them.
//
// # The command log
//
// Every record of one role goes to the partition of the log topic
// ([DefaultLogTopic]) that coordination.RolePartition picks for the role, so
// a role's log is one totally ordered partition, written only in transactions
// under the role's fencing token. There are five kinds of record
// ([EntryKind]):
//
//   - Issued: a command, written before any dispatch of it. It opens attempt
//     1 ([FirstAttempt]).
//   - Redispatched: a later attempt of an issued command, after a takeover or
//     an operator's resolve, written and committed before that dispatch. It
//     opens the next attempt.
//   - Outcome: what became of an attempt: succeeded, failed, expired,
//     rejected, cancelled ([Status.Terminal]), or in doubt, which an operator
//     resolves by a redispatch or a cancel.
//   - Intake: how far the requests partition has been read. It is written in
//     the same transaction as the records that answer the requests it covers,
//     so a new leader resumes intake exactly where the old one committed:
//     exactly-once intake with no consumer group.
//   - Checkpoint: one part of the role's dispatch state as of the
//     transaction that writes it (see "Checkpoints and the dedup window").
//
// An intake record covers the request records at offsets FromOffset up to,
// not including, NextOffset of one requests partition; FromOffset is the
// previous intake record's NextOffset, so the covered ranges of a role are
// contiguous, and the number of offsets covered is NextOffset - FromOffset.
// Each request record in the range is answered in the same transaction,
// before the intake record, by exactly one of: an Issued record; an Outcome
// rejected with attempt [NoAttempt], for a request whose command does not
// validate or that its device refuses (it has no Issued record); or nothing,
// for a request whose command ID the log already holds (its submitter reads
// the status of the first; a different command under a taken ID is refused
// with a warning), for
// one that does not decode at all, and for one of another role that shares
// the partition. An offset that holds no request (a transaction marker, an
// aborted record) is covered all the same. A command submitted in process,
// not through the requests topic, is covered by no intake record, so the
// log does not tie an Issued record to a request offset: the audit checks
// that intake is contiguous, and the idempotency of command IDs (no ID issued
// twice) covers a request read twice.
//
// The headers of a record carry the W3C trace context, the token and the
// member; the key and value below are the authoritative record, and
// [DecodeEntry] reads nothing else.
//
// Every layout is big-endian. In the tables, string is an int16 length
// followed by that many bytes of UTF-8, bytes is an int32 length followed by
// that many bytes, and time is an int64 count of milliseconds since the Unix
// epoch, UTC (the zero time.Time is written as -62135596800000, the
// millisecond of 0001-01-01T00:00:00Z, and means no time). A time holds a
// millisecond of the years 1 to 9999; a time within the first millisecond
// after the zero time would read back as no time, so the encoders refuse it
// as the decoders do. A negative length, a length above the
// bound of its field, a buffer that ends early, and a byte after the last
// field are all format errors ([LogFormatError]); a decoder checks each length
// against the bytes that remain before it allocates, so no record makes it
// allocate more than its own size. Version 0 is the only version of each
// layout today but the checkpoint state's, which has two (below); a reader
// rejects any version it does not know.
//
// The key of every log record:
//
//	int16  version       0
//	int16  kind          1 issued, 2 redispatched, 3 outcome, 4 intake,
//	                     5 checkpoint
//	string role          1..249 bytes (coordination.MaxRoleLen)
//	string command id    1..255 bytes (MaxCommandIDLen); empty for intake
//	                     and checkpoint
//
// The value of every log record starts with the same head, followed by the
// body of its kind:
//
//	int16  version         0
//	int64  producer id     of the token of the transaction; not negative
//	int16  producer epoch  of the same token; not negative
//	string member          1..249 bytes (coordination.MaxMemberIDLen)
//	time   at              when the leader wrote the record; not the zero time
//	...    body
//
// The body of an issued record is the command:
//
//	string id              the key's command id
//	string role            the key's role
//	string device          1..255 bytes (MaxDeviceLen)
//	string action          0..255 bytes (MaxActionLen)
//	bytes  payload         0..262144 bytes (MaxPayloadLen)
//	time   submitted at    not the zero time
//	time   deadline        after submitted at
//	int16  attributes      0..32 (MaxAttributes), then for each, keys in
//	                       strictly ascending byte order:
//	string   key           1..255 bytes (MaxAttributeKeyLen)
//	string   value         0..4096 bytes (MaxAttributeValueLen)
//
// The body of a redispatched record (the command id is the key's):
//
//	int32  attempt         2 or more: one more than the attempt before
//	int8   reason          1 takeover, 2 operator
//
// The body of an outcome record (the command id is the key's):
//
//	int8   status          1 succeeded, 2 failed, 3 expired, 4 rejected,
//	                       5 in doubt, 6 cancelled
//	int32  attempt         the attempt it closes; 0 only for rejected
//	string reason          0..4096 bytes (MaxReasonLen)
//	string detail          0..4096 bytes (MaxDetailLen), Result.Detail
//	bytes  data            0..262144 bytes (MaxResultDataLen), Result.Data
//
// The body of an intake record (the key's command id is empty):
//
//	string topic           1..249 bytes, the requests topic
//	int32  partition       not negative
//	int64  from offset     not negative
//	int64  next offset     at least from offset
//
// The body of a checkpoint record (the key's command id is empty) is one
// part of a checkpoint ([CheckpointPart]):
//
//	int64  sequence        names the checkpoint within its leadership; not
//	                       negative
//	int32  part            0..parts-1
//	int32  parts           1..4096 (MaxCheckpointParts)
//	bytes  data            0..786432 bytes (MaxCheckpointPartLen), this
//	                       part's slice of the checkpoint state
//
// Every part of one checkpoint is written in one transaction, under one
// token, with one sequence and one count of parts, so a reader holds the
// whole checkpoint when it holds parts 0 to parts-1 of one sequence under
// one token; a reader that sees a part sees them all, since the
// transaction committed all or none. The state is the concatenation of the
// parts' data in part order ([AssembleCheckpoint]):
//
//	int16  version         1 (0 is read too; see below)
//	int64  window          the writer's dedup window, in milliseconds; positive
//	string intake topic    0..249 bytes; empty when no intake is recorded
//	int32  intake partition
//	int64  intake next     the offset where intake resumes; 0 without a topic
//	int32  commands        then for each command held whole:
//	int8     status        0 pending, 5 in doubt, or the terminal status of
//	                       a settled command that could not be held compact
//	int8     issued        1 when the log holds its Issued record, else 0
//	...      command       issued 1: the command, as in an issued record;
//	                       issued 0: string id, time submitted at (may be
//	                       the zero time)
//	int32    attempt       its latest attempt
//	int64    producer id   the token its latest attempt was opened under
//	int16    producer epoch
//	int64    first         offset of its first record, or -1 when unknown
//	...      outcome       only when status is not 0: int32 attempt, string
//	                       reason, string detail, bytes data, as in an
//	                       outcome record (its status is the status above)
//	...    base            version 2 only: the full checkpoint this delta
//	                       builds on ([CheckpointBase]): int64 producer id,
//	                       int16 producer epoch (its token), int64 sequence,
//	                       int64 first and int64 last (the offsets of its
//	                       first and last part, first <= last)
//	int32  ids             then for each compact ID, in ascending hash:
//	uint64   hash          IDHash of the command ID (FNV-1a, 64 bits);
//	                       above the previous ID's
//	uvarint  first         offset of its first record
//	uvarint  outcome delta offset of its terminal outcome minus first
//	varint   submitted at  milliseconds since the Unix epoch, as a zigzag
//	                       delta from the previous ID's (from 0 for the first)
//
// Version 0 held the compact IDs in ascending first offset, each as in
// version 1 but for its first offset, a uvarint delta from the previous
// ID's (the first ID's is the offset itself; positive but for the first
// ID). Version 1 keeps them in the order the leader holds them, so that it
// writes them without sorting a copy of its window, and a recovery loads
// them as they come; a recovery still reads a checkpoint of version 0, and
// sorts its IDs. Version 2 is a delta checkpoint: version 1 with the base
// after the commands, and only the compact IDs added to the window since
// the base was taken; the window it describes is the base's IDs with these
// in place of any of the same hash. A full checkpoint is written as version
// 1, so a dispatcher of the version before reads it; only a delta needs a
// reader of version 2.
//
// A varint is Go's encoding/binary varint, in its shortest form.
//
// A record of the requests topic ([DefaultRequestsTopic], the role's
// partition, written by any producer or by [Client.Submit]) has the command
// ID as its key and this value:
//
//	int16  version         0
//	...    the command, as in an issued record, except that role may be
//	       empty (the dispatcher's own role) and deadline may be the zero
//	       time (the dispatcher's command timeout)
//
// The files in testdata/ hold a golden vector of each layout, for the
// ports of this log to check against.
//
// # Checkpoints and the dedup window
//
// Nothing a leader reads at takeover or keeps in memory grows with the log's
// history: it grows with the commands of one dedup window and the commands
// not yet settled.
//
// The window ([WithDedupWindow], [DefaultDedupWindow], seven days) is the
// rule of idempotency: a command ID is deduplicated exactly while its
// command's SubmittedAt is within the window of now, and a command whose
// SubmittedAt is older than the window, and whose ID the dispatcher does not
// hold, is refused: Submit returns an *[OutsideWindowError] (it wraps
// [ErrOutsideDedupWindow]) and records nothing; a request from the requests
// topic is recorded as rejected, with no Issued record, as one that does not
// validate is. The dispatcher can no longer prove such a command is not a
// duplicate, and a retry carries its original SubmittedAt, so the retry of a
// command whose ID has left the window is itself outside the window: it is
// never dispatched twice. A settled command's ID is held for the window plus
// [DedupClockSkew], measured from its SubmittedAt on the leader's clock, so
// that a successor whose clock runs up to that far ahead still refuses every
// command its predecessor would have. A submitter whose clock runs behind the
// leader's by more than the window cannot submit at all; one whose clock runs
// ahead holds its IDs longer.
//
// A settled command is kept only as a compact ID ([CheckpointID]): the
// 64-bit hash of its ID, the offsets of its first record and its terminal
// outcome and its submission time, packed in 24 bytes, without its payload
// ([Dispatcher.Retained] counts them); the rare ID whose offsets or time do
// not fit the packing (a first offset past 2^46, an outcome 2^40 offsets
// after it, a time before 2020 or after 2159) is held whole beside them. A
// Submit or a request whose ID hashes to a compact ID reads
// the record at the first offset from the log to compare the IDs exactly; a
// duplicate gets the outcome read from the outcome's offset
// ([Dispatcher.LookupContext] does the same): two reads of one record each,
// never a scan. A command whose hash another compact ID holds stays whole.
// This needs a reader of log ranges ([LogRangeReader], which
// [KafkaLogReader] is) and a writer that reports the offsets of what it
// committed (coordination.GuardedRecord's Offset, which the Kafka transport
// sets); without them a dispatcher holds every command whole, reads the whole
// partition at takeover, and writes no checkpoints.
//
// A checkpoint is the state a recovery needs ([Checkpoint]): the intake
// position, the commands not settled (whole: recovery dispatches them again
// or records them in doubt), and the compact IDs inside the window. The
// leader writes it in the role's own log partition, first in the
// transaction of the next batch, before that batch's records (or in a
// transaction of its own when no record queues within a transaction's
// time): it is the only writer of the role's records, so the state it takes
// is exactly what committed before its parts, and a recovery that starts
// from the checkpoint and folds the records after it through the same
// command state machine gets the state of one that folds the whole log. Keeping it in the log, not in a compacted topic of its own, keeps one
// partition the whole truth of a role: the checkpoint commits under the
// token in the same ordered partition as the records it summarises, needs
// no topic beyond those the deployment has, and [Verify] checks it against
// them. A checkpoint over [MaxCheckpointPartLen] bytes (some 45,000 compact
// IDs a part) is split into parts of one transaction, each well below
// Kafka's default max.message.bytes of 1 MiB.
//
// The leader writes a checkpoint right after a recovery that read records
// after the newest one; after [WithCheckpointInterval] records of its own
// ([DefaultCheckpointInterval]); and, every few seconds, when it finds the
// partition's high watermark an interval past its last checkpoint, even
// when it wrote nothing itself: roles share partitions, and a busy
// neighbour moves the partition while this role is idle. Most of a large
// window does not change from one checkpoint to the next, so the window is
// written whole only every interval, or after one record for each four
// compact IDs when that is more (a window of a million IDs, 16 to 19 MB of
// checkpoint, is written about every 250,000 records): the bytes of full
// checkpoints stay a fixed share of the log however large the window, 64
// to 76 bytes a record. When the window is written whole less often than
// every interval, the checkpoints in between are deltas ([CheckpointBase]):
// the commands and the intake position whole, and only the compact IDs
// added since the newest full checkpoint, which the delta names by its
// offsets. They add about window/(16 x interval) IDs a record when a
// command's two records add one ID (some 50 to 60 bytes at a million IDs
// and the default interval). A delta
// always builds on the role's newest full checkpoint: a leader that
// recovered from a checkpoint builds on the one it recovered from (or on
// that one's base), adding the IDs of the delta and of the records it read
// after it, and then on each full checkpoint of its own; one that found
// none writes its first checkpoint whole. Its first checkpoint is a delta
// unless that would hold more than a quarter of the window, so that a
// takeover does not rewrite the whole window. So a delta holds at most a
// quarter of the window, or the IDs of one full interval when that is more,
// and a recovery reads the delta, its base at the offsets the delta names,
// and the records after the delta: a bounded tail, not the records back to
// the last full checkpoint.
//
// Recovery finds the newest checkpoint by reading backwards from the high
// watermark taken when it began: 1,024 offsets (or one checkpoint interval
// when that is less), then twice that, and so on up to 65,536 offsets a
// read, until it holds every part of the newest checkpoint of its role, and
// decodes only its role's records on the way (the role is read from a
// record's key; the other roles' records are counted and skipped). Since the
// leader writes a checkpoint at least every interval of partition offsets,
// the search reads at most about twice the interval whatever else the
// partition holds, and the records recovery reads are bounded by the
// interval and the records after the checkpoint, not by the history
// ([RecoveryStats]). A leader that drains before it gives the role up
// ([Dispatcher.Drain]) writes a checkpoint last when 512 offsets or more lie
// after its last one, so that its successor's first read finds a checkpoint
// and a short tail at most. A partition without a
// checkpoint of the role is read to its start, as without checkpoints; so is
// one whose newest checkpoint is a delta whose base retention deleted.
//
// The base of a delta is the one read of a recovery that grows with the
// window: at a million IDs, some 17 MB in 15 records, read in about 30 ms
// and decoded in 30 to 45 on the test cluster. A member reads it before it
// leads: its [Standby] finds the role's newest checkpoint and reads the full
// checkpoint that it is or builds on when the member starts to campaign
// (beside the campaign, at a cold start) and every minute while it waits,
// decoding each part as its fetch brings it, while the later ones are still
// read, and letting go of it once decoded; and the recovery of a
// leadership the member wins takes those IDs when the delta it finds names
// that base ([WithStandby]; [RecoveryStats] says whether it did). A
// checkpoint is named by the token, the sequence and the offsets of its
// parts, and committed records never change, so IDs read
// before the lease are those a read after it finds. A recovery whose delta
// names another base reads that base itself.
//
// The recovery builds on the Standby's search too. That search read every
// offset below the high watermark it began at once the last stable offset
// had passed it, so each of them was decided, and no transaction holds
// records on both sides of that watermark. The recovery reads, with the
// lease held, the offsets from there to its own high watermark: all that a
// deposed leader may have written since. When no checkpoint record of the
// role lies among them, the Standby's checkpoint is still the newest, and
// the recovery takes it, the role's records after it, and these; otherwise
// it searches on down itself. A takeover by a standby that read ahead thus
// reads about what was written after its last read ([RecoveryStats]
// CheckpointPrefetched). At a cold start, when the campaign wins before the
// Standby's search is over, the recovery waits for that search rather than
// searching beside it. When the search is over but the Standby still reads
// the IDs of the full checkpoint, the recovery ends without them: the
// dispatcher is ready, takes over the commands the log leaves pending, and
// answers a repeat of a command it holds whole, while a command under any
// other ID waits until the IDs are loaded, as [Dispatcher.Drain] does
// ([Dispatcher.Check] skips its conflict test until then); nothing is held
// as a compact ID, evicted or checkpointed before then. A failure of that read halts the dispatcher,
// whose member gives the role up: its successor's recovery reads again.
//
// [Client.Status] and [Client.Wait] without a hint search the same way for
// the role's newest checkpoint, and read a command's records at the offsets
// the checkpoint holds for it, or, for a command it does not hold, only the
// records after it; a command ID is compared whole with the records read, so
// a hash that another command shares gives no wrong answer. They read the
// base of a delta only for a command that neither the delta nor the records
// after it name. Only a role with no checkpoint in the lookup window has the
// window read ([Client.RecordsRead] counts).
//
// # Audit
//
// The log alone tells what happened. [KafkaLogReader.ReadLog] reads a
// partition read_committed to the high watermark taken when the read began,
// waiting out the open transactions of other producers, each [Entry] with its
// offset and the producer of its record batch; [KafkaLogReader.FollowLog]
// streams it as it commits. [Replay] folds the entries into a [History]:
// each command with its Issued record, its attempts (each with the token the
// device received), its outcomes and its status, and the leadership timeline,
// a span per run of records of one role by one member, with its first and
// last token and offset. [Verify] checks the invariants and reports every
// [Violation] with its offset, per role (roles may share a partition):
//
//   - tokens never go backwards: no record carries a token below one that an
//     earlier record carries, which would be a write under a superseded
//     token; one token belongs to one member; and a record carries the token
//     of the transaction that wrote it, the producer of its batch;
//   - every Redispatched record and outcome follows the command's Issued
//     record (but a rejection at intake), and no command is issued twice;
//   - no command has two terminal outcomes, and nothing follows a terminal
//     outcome;
//   - attempts are numbered in order, and an outcome closes the latest one;
//   - intake positions are contiguous: each intake record of a requests
//     partition starts where the role's previous one ended, with no gap (a
//     request never taken in) and no overlap (a request taken in twice);
//   - every checkpoint assembles and says what the records before it say:
//     the state of each command it holds whole, the offsets of each compact
//     ID, the intake position, and no command missing that it must hold; a
//     delta builds on the role's newest full checkpoint before it, and is
//     checked with that one's compact IDs. A log that begins at a
//     checkpoint is checked from it.
//
// A [Client] submits commands through the requests topic and reads their
// status and outcomes from the log; it needs no leader.
package dispatch
