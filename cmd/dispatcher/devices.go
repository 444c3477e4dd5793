package main

import (
	"fmt"
	"log/slog"

	"github.com/krabka-io/krabka-dispatch/devices/modbus"
	"github.com/krabka-io/krabka-dispatch/devices/mqtt"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/internal/config"
)

// buildRegistry creates the devices of the configuration and registers them
// under their names. On an error it closes the devices it created.
func buildRegistry(cfg *config.Config, logger *slog.Logger) (*dispatch.Registry, error) {
	registry := dispatch.NewRegistry()
	// One pool for the process, so Modbus units behind one gateway or on one
	// serial line share a bus and take turns on it.
	buses := modbus.NewPool()
	for i, d := range cfg.Devices {
		dev, err := buildDevice(d, buses, logger.With("device", d.Name))
		if err == nil {
			err = registry.Register(d.Name, dev)
		}
		if err != nil {
			_ = registry.Close()
			return nil, fmt.Errorf("devices[%d] (%s): %w", i, d.Name, err)
		}
	}
	return registry, nil
}

func buildDevice(d config.Device, buses *modbus.Pool, logger *slog.Logger) (dispatch.Device, error) {
	switch d.Type {
	case config.DeviceMQTT:
		c, err := d.MQTTConfig()
		if err != nil {
			return nil, err
		}
		return mqtt.New(c, mqtt.WithLogger(logger))
	case config.DeviceModbus:
		c, err := d.ModbusConfig()
		if err != nil {
			return nil, err
		}
		return modbus.New(c, modbus.WithPool(buses))
	}
	return nil, fmt.Errorf("unknown device type %q", d.Type)
}
