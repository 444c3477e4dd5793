// Package history measures what the history of a role's command log costs
// a dispatcher: the "Cost against history" section of the benchmark report.
//
// For each size N it fills a fresh role's partition of the command log with
// N settled commands of the role and N of another role that shares the
// partition, written by real dispatchers (dispatch.Dispatcher over the
// Kafka transport, fed through the requests topic, with a device that does
// nothing), which lead side by side until both are filled and then drain,
// as members stopped one after the other do, so the log holds whatever a
// dispatcher writes. It then builds
// nothing itself: it runs the dispatcher binary (`dispatcher run`,
// configured by YAML files as an operator writes them) against the real
// cluster and measures, on that log:
//
//   - cold start to ready: from the start of the process until the HTTP
//     API accepts its first command (2xx to POST /v1/commands);
//   - the resident memory of the leader at that moment, from /proc;
//   - failover: from SIGKILL of the leader until the standby accepts a
//     command, against its bound (lease + rank x stagger + one poll);
//   - `dispatcher submit --wait` and `dispatcher status`, as processes;
//   - dispatch.Client.Status of a fresh command, with the hint of its
//     submission time and without one (the lookup window), and the records
//     each read;
//   - the resident memory of the new leader after further commands.
//
// Every figure is reported beside its ratio to the empty log's, measured in
// the same run.
package history
