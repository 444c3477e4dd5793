// Package dispatch drives external devices from a command log that a fenced
// leader writes: a command reaches a device only after its record committed in
// the quorum under the leadership token, and nothing is dispatched once the
// leadership ends.
//
// # Lifecycle
//
// (Written with the dispatcher.)
//
// # Writing a Device
//
// (Written with the dispatcher.)
//
// # The zombie window
//
// (Written with the dispatcher.)
//
// # The command log
//
// Every record of one role goes to the partition of the log topic
// ([DefaultLogTopic]) that coordination.RolePartition picks for the role, so
// a role's log is one totally ordered partition, written only in transactions
// under the role's fencing token. There are four kinds of record
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
//
// An intake record covers the request records at offsets FromOffset up to,
// not including, NextOffset of one requests partition; FromOffset is the
// previous intake record's NextOffset, so the covered ranges of a role are
// contiguous, and the number of offsets covered is NextOffset - FromOffset.
// Each request record in the range is answered in the same transaction,
// before the intake record, by exactly one of: an Issued record; an Outcome
// rejected with attempt [NoAttempt], for a request whose command does not
// validate (it has no Issued record); or nothing, for a request whose command
// ID the log already holds (its submitter reads the status of the first), for
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
// millisecond of 0001-01-01T00:00:00Z). A negative length, a length above the
// bound of its field, a buffer that ends early, and a byte after the last
// field are all format errors ([LogFormatError]); a decoder checks each length
// against the bytes that remain before it allocates, so no record makes it
// allocate more than its own size. Version 0 is the only version of each
// layout today; a reader rejects any other.
//
// The key of every log record:
//
//	int16  version       0
//	int16  kind          1 issued, 2 redispatched, 3 outcome, 4 intake
//	string role          1..249 bytes (coordination.MaxRoleLen)
//	string command id    1..255 bytes (MaxCommandIDLen); empty for intake
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
// # Audit
//
// The log alone tells what happened. [KafkaLogReader.ReadLog] reads a
// partition read_committed to its last stable offset, each [Entry] with its
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
//     request never taken in) and no overlap (a request taken in twice).
//
// A [Client] submits commands through the requests topic and reads their
// status and outcomes from the log; it needs no leader.
package dispatch
