//go:build integration

package mqtt

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/test/mqtttest"
)

// BenchmarkDispatchVsRawPublish measures, in one run against the shared
// Mosquitto, QoS 1 commands through the Device and the same publishes
// (same topic, same envelope size, one at a time until PUBACK) through a
// bare paho client, interleaved in rounds that alternate which goes first, so that both see the same broker
// load. It reports the rate and p99 latency of each and the ratio of the
// rates; the target is a ratio of at least 0.8.
//
//	go test -tags integration -run '^$' -bench DispatchVsRaw -benchtime 5000x ./devices/mqtt/
func BenchmarkDispatchVsRawPublish(b *testing.B) {
	sh := mqtttest.SharedBroker(b)
	prefix := mqtttest.Unique("bench-") + "/"
	d, err := New(Config{Brokers: []string{sh.URL}, Topic: prefix + "{device}/cmd", QoS: 1, Verifier: testKeys})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	if err := d.WaitConnected(ctx); err != nil {
		b.Fatal(err)
	}
	raw := mqtttest.Connect(b, sh.URL, nil)

	token := mustToken(b, 123456, 7)
	cmd := testCommand("cmd-0000000")
	rawTopic := prefix + cmd.Device + "/cmd"
	rawPayload, err := EncodeEnvelope(Envelope{ID: cmd.ID, Role: cmd.Role, Device: cmd.Device, Action: cmd.Action,
		Payload: cmd.Payload, Token: token, Deadline: cmd.Deadline})
	if err != nil {
		b.Fatal(err)
	}
	publishRaw := func() {
		tok := raw.Publish(rawTopic, 1, false, rawPayload)
		tok.Wait()
		if err := tok.Error(); err != nil {
			b.Fatal(err)
		}
	}
	dispatchOne := func(i int) {
		cmd.ID = "cmd-" + strconv.Itoa(i)
		if _, err := d.Dispatch(ctx, cmd, token); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 50 { // warm both paths up
		publishRaw()
		dispatchOne(i)
	}

	const round = 200
	devLat := make([]time.Duration, 0, b.N)
	rawLat := make([]time.Duration, 0, b.N)
	var devTime, rawTime time.Duration
	b.ResetTimer()
	runRaw := func(n int) {
		start := time.Now()
		for range n {
			t0 := time.Now()
			publishRaw()
			rawLat = append(rawLat, time.Since(t0))
		}
		rawTime += time.Since(start)
	}
	runDevice := func(first, n int) {
		start := time.Now()
		for i := range n {
			t0 := time.Now()
			dispatchOne(first + i)
			devLat = append(devLat, time.Since(t0))
		}
		devTime += time.Since(start)
	}
	for done, r := 0, 0; done < b.N; r++ {
		n := min(round, b.N-done)
		// Alternate which path goes first, so that neither always runs
		// right after the other's burst.
		if r%2 == 0 {
			runRaw(n)
			runDevice(done, n)
		} else {
			runDevice(done, n)
			runRaw(n)
		}
		done += n
	}
	b.StopTimer()
	dev := mqtttest.Summarise(devLat, devTime)
	rw := mqtttest.Summarise(rawLat, rawTime)
	b.ReportMetric(dev.PerSecond, "device_cmd/s")
	b.ReportMetric(rw.PerSecond, "raw_cmd/s")
	b.ReportMetric(float64(dev.P99.Microseconds()), "device_p99_µs")
	b.ReportMetric(float64(rw.P99.Microseconds()), "raw_p99_µs")
	b.ReportMetric(dev.PerSecond/rw.PerSecond, "ratio")
}
