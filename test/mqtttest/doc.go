// Package mqtttest provides MQTT brokers for tests: an in-process broker for
// tests that need no service, the shared Mosquitto that
// scripts/services/20-mosquitto.sh starts (read from its environment
// variables), and private Mosquitto processes that a test may stop and
// start, for the faults a shared broker must not suffer. [MeasurePublish]
// measures the rate and latency of any publish function.
package mqtttest
