// Package chaos is the fault-injection harness of the project: the
// dispatcher binary (`dispatcher run`), configured by YAML files as an
// operator writes them, against the three-broker cluster and Mosquitto,
// under real network faults, and a checker that proves from the devices'
// own records, the state topic's lease records and the committed command
// log that the guarantees held.
//
// Each member runs in a network namespace of its own, joined to the host by
// two veth links: one toward Kafka and one toward its devices (and the
// HTTP API). A run cuts a member from Kafka while it keeps its devices (the
// zombie window), cuts it from its devices, kills (SIGKILL), pauses
// (SIGSTOP) and restarts it under the same member ID, kills a broker or
// cuts one from the others with a packet filter, skews members' clocks
// within and beyond the safety margin, anew at each restart (the test-only
// KRABKA_CLOCK_OFFSET of the binary), makes devices slow, runs two roles whose members share one
// log partition and one requests partition, and has an operator resolve
// commands in doubt with `dispatcher resolve`. Its first member faults are
// one of each kind in [RequiredMemberFaults]. Commands arrive both through
// the requests topic and through the members' HTTP API.
//
// The devices are [MQTTDevices], a Mosquitto client in the harness (the
// "hardware" outlives every member): per role, a fencing device that admits
// signed commands with fence.Store.AdmitSigned, and a non-fencing one that
// obeys every authentic call. Both record every call they receive (command
// ID, role, term, token, member, time, verdict) to a file.
//
// [Check] proves, from those records, the accepted submissions, the lease
// records and the log:
//
//   - no dispatch of a command absent from the log: every call a device
//     received names a command whose Issued or Redispatched record committed
//     under exactly the term and token the device saw;
//   - no term regression at any fencing device: the terms it obeyed never go
//     down in the order it received them (its tokens may, when a
//     leadership's producer id rotates to a lower one);
//   - no accepted command lost: every submission the requests topic or the
//     API acknowledged has an Issued record and a terminal or in-doubt
//     outcome;
//   - the log audits clean (the invariants of the command log);
//   - no command received more often than once plus its Redispatched
//     records;
//   - no device call after the caller's freshness ended: the largest lease
//     deadline the caller had committed before the call, minus the safety
//     margin, plus the skew assumption and a delivery allowance (see
//     Input.Skew); calls delivered late after a stall of the caller, and
//     breaches by members skewed beyond the assumption, are counted apart;
//
// and it counts the double dispatches at each device.
package chaos
