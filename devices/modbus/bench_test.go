package modbus_test

import (
	"context"
	"slices"
	"testing"
	"time"

	gmodbus "github.com/goburrow/modbus"

	"github.com/krabka-io/krabka-dispatch/devices/modbus"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// BenchmarkWriteRegister measures one register write (function 06) to the
// same loopback simulator twice in one run: through Device.Dispatch, payload
// parsing, bus and cancellation included, and through goburrow's own TCP
// client, the ceiling. The two alternate every few writes, so that a burst
// of load on a shared machine hits both alike. It reports each side's commands per second and
// p99 latency, and ratio = device commands/s ÷ raw commands/s (target at
// least 0.8). ns/op is the device's.
func BenchmarkWriteRegister(b *testing.B) {
	_, srv := startTCP(b)
	cfg := tcpConfig(srv.Addr())
	cfg.Actions = map[modbus.Action]modbus.ActionConfig{modbus.WriteRegister: {}}
	d := newDevice(b, cfg)

	h := gmodbus.NewTCPClientHandler(srv.Addr())
	h.SlaveId = 1
	h.Timeout = testTimeout
	if err := h.Connect(); err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	raw := gmodbus.NewClient(h)

	// The commands are built before the clock runs, as a submitter would
	// have built them; the device's share is parsing them.
	cmds := make([]dispatch.Command, 256)
	for i := range cmds {
		cmds[i] = command(modbus.WriteRegister, modbus.RegisterValue{Address: 40, Value: uint16(i)})
	}
	tok := token(b, 1, 0)
	ctx := context.Background()
	viaDevice := func(i int) error {
		_, err := d.Dispatch(ctx, cmds[i%len(cmds)], tok)
		return err
	}
	viaRaw := func(i int) error {
		_, err := raw.WriteSingleRegister(40, uint16(i%len(cmds)))
		return err
	}
	for _, f := range []func(int) error{viaDevice, viaRaw} { // connect and warm up
		if err := f(0); err != nil {
			b.Fatal(err)
		}
	}

	const block = 4
	devLat := make([]time.Duration, 0, b.N)
	rawLat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for done := 0; done < b.N; done += block {
		n := min(block, b.N-done)
		for _, side := range []struct {
			f   func(int) error
			lat *[]time.Duration
		}{{viaDevice, &devLat}, {viaRaw, &rawLat}} {
			for i := done; i < done+n; i++ {
				start := time.Now()
				if err := side.f(i); err != nil {
					b.Fatal(err)
				}
				*side.lat = append(*side.lat, time.Since(start))
			}
		}
	}
	b.StopTimer()

	devRate, devP99 := rateAndP99(devLat)
	rawRate, rawP99 := rateAndP99(rawLat)
	b.ReportMetric(float64(sum(devLat))/float64(len(devLat)), "ns/op")
	b.ReportMetric(devRate, "cmd/s")
	b.ReportMetric(float64(devP99.Microseconds()), "p99-µs")
	b.ReportMetric(rawRate, "raw-cmd/s")
	b.ReportMetric(float64(rawP99.Microseconds()), "raw-p99-µs")
	b.ReportMetric(devRate/rawRate, "ratio")
}

func rateAndP99(lat []time.Duration) (rate float64, p99 time.Duration) {
	rate = float64(len(lat)) / sum(lat).Seconds()
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	return rate, sorted[(len(sorted)*99)/100]
}

func sum(lat []time.Duration) time.Duration {
	var s time.Duration
	for _, l := range lat {
		s += l
	}
	return s
}
