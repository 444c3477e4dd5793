package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/devices/fence"
	"github.com/krabka-io/krabka-dispatch/devices/modbus"
	"github.com/krabka-io/krabka-dispatch/devices/mqtt"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/internal/modbussim"
	"github.com/krabka-io/krabka-dispatch/test/bench/ceiling"
)

// deviceBatch is the batch the dispatcher rows of the device sections
// submit at once.
const deviceBatch = 100

// deviceResult is a device section: every side over the repetitions, the
// raw ceiling first.
type deviceResult struct {
	sides []ceiling.SideResult
	// note is a sentence about the ceiling's payload.
	note string
}

// dispatcherSide is the whole path through a dispatcher with dev, batches
// of deviceBatch submitted at once.
func dispatcherSide(ctx context.Context, o options, name, role string, dev dispatch.Device, newTopic func(string) (string, error)) (ceiling.Side, func(), error) {
	logTopic, err := newTopic(role + "-log")
	if err != nil {
		return ceiling.Side{}, nil, err
	}
	reqTopic, err := newTopic(role + "-req")
	if err != nil {
		return ceiling.Side{}, nil, err
	}
	d, err := ceiling.StartDispatcher(ctx, ceiling.DispatcherSetup{
		Brokers: o.brokers, Role: o.prefix + "-" + role, LogTopic: logTopic, RequestsTopic: reqTopic, Device: dev,
	})
	if err != nil {
		return ceiling.Side{}, nil, err
	}
	return ceiling.Side{Name: name, Run: func(ctx context.Context, rep int, window time.Duration) (ceiling.Summary, error) {
		s, _, err := ceiling.MeasureSubmit(ctx, d, deviceBatch, window, fmt.Sprintf("%s-%d", role, rep))
		return s, err
	}}, d.Close, nil
}

// mqttSection compares raw publish, the MQTT device alone, and the whole
// dispatcher with the MQTT device, interleaved.
func mqttSection(ctx context.Context, o options, newTopic func(string) (string, error), rep *report) error {
	if o.mqttURL == "" {
		return fmt.Errorf("no MQTT broker: set $KRABKA_MQTT_URL or -mqtt")
	}
	token, _ := coordination.NewFencingToken(1, 0)
	now := time.Now()
	sample := ceiling.BenchCommand(o.prefix, "mqtt", 0, now)
	env, err := mqtt.EncodeEnvelope(mqtt.Envelope{ID: sample.ID, Role: sample.Role, Device: sample.Device, Action: sample.Action,
		Payload: sample.Payload, Token: token, Deadline: sample.Deadline, SubmittedAt: sample.SubmittedAt})
	if err != nil {
		return err
	}
	raw, err := ceiling.DialMQTT(o.mqttURL)
	if err != nil {
		return err
	}
	defer raw.Close()
	// The device signs, as a deployment with the default settings does.
	keys, err := fence.NewVerifier(fence.Key{ID: "bench", Secret: bytes.Repeat([]byte{0x5a}, fence.MinKeyBytes)})
	if err != nil {
		return err
	}
	dev, err := mqtt.New(mqtt.Config{Brokers: []string{o.mqttURL}, Topic: o.prefix + "/{device}/cmd", QoS: 1, Verifier: keys})
	if err != nil {
		return err
	}
	defer dev.Close()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = dev.WaitConnected(wctx)
	cancel()
	if err != nil {
		return err
	}
	full, stop, err := dispatcherSide(ctx, o, fmt.Sprintf("dispatcher + devices/mqtt, batch %d", deviceBatch), "mqtt", dev, newTopic)
	if err != nil {
		return err
	}
	defer stop()
	sides := []ceiling.Side{
		{Name: "raw paho publish, QoS 1", Run: func(ctx context.Context, _ int, window time.Duration) (ceiling.Summary, error) {
			return ceiling.SerialLoop(ctx, window, func(context.Context, int) error { return raw.Publish(o.prefix+"/raw", 1, env) })
		}},
		{Name: "devices/mqtt Dispatch", Run: func(ctx context.Context, rep int, window time.Duration) (ceiling.Summary, error) {
			return ceiling.SerialLoop(ctx, window, func(ctx context.Context, i int) error {
				cmd := ceiling.BenchCommand(o.prefix, fmt.Sprintf("mqtt-dev-%d", rep), i, time.Now())
				dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				_, err := dev.Dispatch(dctx, cmd, token)
				return err
			})
		}},
		full,
	}
	res, err := ceiling.Interleave(ctx, o.reps, o.point, sides)
	if err != nil {
		return err
	}
	rep.mqtt = &deviceResult{sides: res, note: fmt.Sprintf("The ceiling is paho publishing a %d-byte payload (the size of the device's envelope for the benchmark command) and waiting for PUBACK.", len(env))}
	logf("mqtt: raw %.0f/s, device %.0f/s (%.2f), dispatcher %.0f/s", res[0].Rate, res[1].Rate, res[1].RatioTo(res[0]), res[2].Rate)
	return nil
}

// Modbus layout of the benchmark units.
const (
	modbusRegister   = 40
	modbusFence      = 100
	modbusUnfenced   = 1
	modbusFenced     = 2
	modbusDispatcher = 3
)

// modbusSection compares raw register writes to a loopback Modbus server
// with the Modbus device, unfenced and fenced, and the whole dispatcher
// with the fenced device, interleaved.
func modbusSection(ctx context.Context, o options, newTopic func(string) (string, error), rep *report) error {
	sim := modbussim.New()
	for _, u := range []uint8{modbusFenced, modbusDispatcher} {
		sim.SetFence(u, modbusFence)
	}
	srv, err := sim.ListenTCP("")
	if err != nil {
		return err
	}
	defer srv.Close()
	rawUnfenced, err := ceiling.DialModbus(srv.Addr(), modbusUnfenced, time.Second)
	if err != nil {
		return err
	}
	defer rawUnfenced.Close()
	rawFenced, err := ceiling.DialModbus(srv.Addr(), modbusFenced, time.Second)
	if err != nil {
		return err
	}
	defer rawFenced.Close()
	device := func(unit int, fenced bool) (*modbus.Device, error) {
		cfg := modbus.Config{Transport: modbus.TCP, Address: srv.Addr(), Unit: unit, Timeout: time.Second,
			Actions: map[modbus.Action]modbus.ActionConfig{modbus.WriteRegister: {}}}
		if fenced {
			cfg.Fence = &modbus.Fence{Address: modbusFence}
		}
		return modbus.New(cfg)
	}
	devUnfenced, err := device(modbusUnfenced, false)
	if err != nil {
		return err
	}
	defer devUnfenced.Close()
	devFenced, err := device(modbusFenced, true)
	if err != nil {
		return err
	}
	defer devFenced.Close()
	devDispatcher, err := device(modbusDispatcher, true)
	if err != nil {
		return err
	}
	defer devDispatcher.Close()

	token, _ := coordination.NewFencingToken(1, 0)
	authority := coordination.Authority{Term: 1, Token: token}
	// The commands are built before the clock runs, as a submitter would
	// have built them; the device's share is parsing them.
	cmds := make([]dispatch.Command, 256)
	for i := range cmds {
		payload, _ := json.Marshal(modbus.RegisterValue{Address: modbusRegister, Value: uint16(i)})
		cmds[i] = dispatch.Command{ID: fmt.Sprintf("modbus-%d", i), Device: ceiling.BenchDevice, Action: string(modbus.WriteRegister), Payload: payload}
	}
	full, stop, err := dispatcherSide(ctx, o, fmt.Sprintf("dispatcher + devices/modbus fenced, batch %d", deviceBatch), "modbus", modbusDispatching{devDispatcher}, newTopic)
	if err != nil {
		return err
	}
	defer stop()
	loop := func(f func(ctx context.Context, i int) error) func(context.Context, int, time.Duration) (ceiling.Summary, error) {
		return func(ctx context.Context, _ int, window time.Duration) (ceiling.Summary, error) {
			return ceiling.SerialLoop(ctx, window, f)
		}
	}
	sides := []ceiling.Side{
		{Name: "raw write, unfenced", Run: loop(func(_ context.Context, i int) error {
			return rawUnfenced.WriteRegister(modbusRegister, uint16(i))
		})},
		{Name: "devices/modbus, unfenced", Run: loop(func(ctx context.Context, i int) error {
			_, err := devUnfenced.Dispatch(ctx, cmds[i%len(cmds)], token)
			return err
		})},
		{Name: "raw fence + write", Run: loop(func(_ context.Context, i int) error {
			if err := rawFenced.WriteFence(modbusFence, authority); err != nil {
				return err
			}
			return rawFenced.WriteRegister(modbusRegister, uint16(i))
		})},
		{Name: "devices/modbus, fenced", Run: loop(func(ctx context.Context, i int) error {
			_, err := devFenced.DispatchUnder(ctx, cmds[i%len(cmds)], authority)
			return err
		})},
		full,
	}
	res, err := ceiling.Interleave(ctx, o.reps, o.point, sides)
	if err != nil {
		return err
	}
	rep.modbus = &deviceResult{sides: res, note: "The ceilings are goburrow's TCP client (the device's own) writing one holding register (function 06), and, fenced, first the nine fence registers (function 16) as the device's two-request fence mode does."}
	logf("modbus: raw %.0f/s, device %.0f/s (%.2f); fenced raw %.0f/s, device %.0f/s (%.2f); dispatcher %.0f/s", res[0].Rate, res[1].Rate,
		res[1].RatioTo(res[0]), res[2].Rate, res[3].Rate, res[3].RatioTo(res[2]), res[4].Rate)
	return nil
}

// modbusDispatching gives the dispatcher's commands, which carry the
// benchmark payload, the payload of a register write.
type modbusDispatching struct{ dev *modbus.Device }

func (m modbusDispatching) Dispatch(ctx context.Context, cmd dispatch.Command, token coordination.FencingToken) (dispatch.Result, error) {
	return m.DispatchUnder(ctx, cmd, coordination.Authority{Token: token})
}

func (m modbusDispatching) DispatchUnder(ctx context.Context, cmd dispatch.Command, authority coordination.Authority) (dispatch.Result, error) {
	payload, _ := json.Marshal(modbus.RegisterValue{Address: modbusRegister, Value: uint16(len(cmd.ID))})
	cmd.Action, cmd.Payload = string(modbus.WriteRegister), payload
	return m.dev.DispatchUnder(ctx, cmd, authority)
}
