package config

import (
	"errors"
	"fmt"

	"github.com/krabka-io/krabka-dispatch/devices/modbus"
	"github.com/krabka-io/krabka-dispatch/devices/mqtt"
)

// MQTTConfig decodes the device's mqtt section strictly into the
// configuration of package devices/mqtt.
func (d Device) MQTTConfig() (mqtt.Config, error) {
	var c mqtt.Config
	if err := decodeSection(d.MQTT, &c); err != nil {
		return c, err
	}
	return c, nil
}

// ModbusConfig decodes the device's modbus section strictly into the
// configuration of package devices/modbus.
func (d Device) ModbusConfig() (modbus.Config, error) {
	var c modbus.Config
	if err := decodeSection(d.Modbus, &c); err != nil {
		return c, err
	}
	return c, nil
}

// checkDevice validates the type-specific section of a device: it decodes it
// strictly into the configuration type of its device package, so a misspelt
// key is reported, and runs that package's validation. A returned
// *FieldError names the field relative to the section.
func checkDevice(d Device) error {
	switch d.Type {
	case DeviceMQTT:
		c, err := d.MQTTConfig()
		if err != nil {
			return err
		}
		if err := c.Validate(); err != nil {
			var ce *mqtt.ConfigError
			if errors.As(err, &ce) {
				return &FieldError{Field: ce.Field, Value: ce.Value, Problem: ce.Reason}
			}
			return fmt.Errorf("%w", err)
		}
	case DeviceModbus:
		c, err := d.ModbusConfig()
		if err != nil {
			return err
		}
		if err := c.Validate(); err != nil {
			var ce *modbus.ConfigError
			if errors.As(err, &ce) {
				return &FieldError{Field: ce.Field, Value: ce.Value, Problem: ce.Reason}
			}
			return fmt.Errorf("%w", err)
		}
	}
	return nil
}
