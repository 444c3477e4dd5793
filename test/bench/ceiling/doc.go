// Package ceiling turns the project's performance claims into numbers: it
// measures a figure and, in the same run, the ceiling or bound that the
// figure is judged against, so every result is a ratio that holds on the
// machine that produced it.
//
// The package holds the pieces that the report tool (cmd/benchreport) wires
// together: latency summaries, process CPU and memory sampling, the raw
// ceilings (transactional produce to the cluster, QoS 1 publish to the MQTT
// broker), the failover and handover trials over separate leader processes
// (cmd/holder), and the PNG plots and Markdown tables of docs/PERFORMANCE.md.
//
// Every measurement talks to services on 127.0.0.1 whose addresses the
// caller passes in; nothing here starts a service.
package ceiling
