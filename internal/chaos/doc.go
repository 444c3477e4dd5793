// Package chaos is the fault-injection harness of the project: several
// dispatcher member processes against the three-broker cluster, killed
// (SIGKILL), paused (SIGSTOP, then SIGCONT) and restarted at random while
// brokers are killed and restarted one at a time, and a checker that proves
// from the devices' own records and the committed command log that the
// guarantees held.
//
// The devices are a small HTTP service that the harness runs (the "hardware"
// outlives every member): a fencing device that refuses any term lower than
// the highest it has seen, and a non-fencing one that obeys every call. Both
// append every call they receive (command ID, term, token, member, time,
// verdict)
// to a file. The members reach them through [HTTPDevice], a dispatch.Device.
//
// [Check] proves, from those records, the accepted submissions and the log:
//
//   - no dispatch of a command absent from the log: every call a device
//     received names a command whose Issued or Redispatched record committed
//     under exactly the term and token the device saw;
//   - no term regression at the fencing device: the terms it obeyed never go
//     down in the order it received them (its tokens may, when a
//     leadership's producer id rotates to a lower one);
//   - no accepted command lost: every submission the requests topic
//     acknowledged has an Issued record and a terminal or in-doubt outcome;
//   - the log audits clean (the invariants of the command log);
//
// and it counts the double dispatches at the non-fencing device, which the
// zombie window and takeover redispatch allow there and only there.
package chaos
