// Package ceiling measures each of the project's performance claims against
// a ceiling or a bound measured in the same run on the same machine, so that
// every result is a ratio that holds on the machine that produced it.
//
// The dispatcher's ceiling is raw franz-go transactional produce with the
// client options that coordination.KafkaTransport gives a role's producer
// (ProducerOptions) and the records the dispatcher writes, encoded before
// the timed loop (EncodeCommands); RunE2E interleaves the two over
// repetitions and takes the best of a sweep of pauses after each commit.
// Beside it: latency from submit through a real member (StartMember) to
// the device and to the outcome committed (OutcomeWatcher), a backlog
// drain, raw MQTT and Modbus ceilings for the devices, the failover and
// handover trials over separate leader processes (cmd/holder), the roles
// held by one process with a dispatcher each, and the PNG plots and tables
// of docs/PERFORMANCE.md (cmd/benchreport).
//
// Every measurement talks to services on 127.0.0.1 whose addresses the
// caller passes in; nothing here starts a service.
package ceiling
