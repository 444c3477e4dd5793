package modbus_test

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/krabka-io/krabka-dispatch/devices/modbus"
)

func TestValidateNamesTheField(t *testing.T) {
	valid := func() modbus.Config { return tcpConfig("127.0.0.1:502") }
	rtu := func() modbus.Config {
		return modbus.Config{
			Transport: modbus.RTU, Serial: modbus.Serial{Device: "/dev/ttyUSB0"}, Unit: 1,
			Actions: map[modbus.Action]modbus.ActionConfig{modbus.WriteRegister: {}},
		}
	}
	cases := []struct {
		name  string
		cfg   func() modbus.Config
		field string
		value string
	}{
		{"transport", func() modbus.Config { c := valid(); c.Transport = "udp"; return c }, "transport", "udp"},
		{"tcp without address", func() modbus.Config { c := valid(); c.Address = ""; return c }, "address", ""},
		{"tcp address without port", func() modbus.Config { c := valid(); c.Address = "10.0.0.5"; return c }, "address", "10.0.0.5"},
		{"tcp with serial", func() modbus.Config { c := valid(); c.Serial.Device = "/dev/ttyS0"; return c }, "serial.device", "/dev/ttyS0"},
		{"tcp unit", func() modbus.Config { c := valid(); c.Unit = 256; return c }, "unit", "256"},
		{"rtu with address", func() modbus.Config { c := rtu(); c.Address = "1.2.3.4:502"; return c }, "address", "1.2.3.4:502"},
		{"rtu without device", func() modbus.Config { c := rtu(); c.Serial.Device = ""; return c }, "serial.device", ""},
		{"rtu broadcast unit", func() modbus.Config { c := rtu(); c.Unit = 0; return c }, "unit", "0"},
		{"rtu unit", func() modbus.Config { c := rtu(); c.Unit = 248; return c }, "unit", "248"},
		{"baud rate", func() modbus.Config { c := rtu(); c.Serial.BaudRate = -9600; return c }, "serial.baud_rate", "-9600"},
		{"data bits", func() modbus.Config { c := rtu(); c.Serial.DataBits = 9; return c }, "serial.data_bits", "9"},
		{"parity", func() modbus.Config { c := rtu(); c.Serial.Parity = "even"; return c }, "serial.parity", "even"},
		{"stop bits", func() modbus.Config { c := rtu(); c.Serial.StopBits = 3; return c }, "serial.stop_bits", "3"},
		{"timeout", func() modbus.Config { c := valid(); c.Timeout = -time.Second; return c }, "timeout", "-1s"},
		{"fence", func() modbus.Config { c := valid(); c.Fence = &modbus.Fence{Address: 65532}; return c }, "fence.address", "65532"},
		// The term and the token need nine registers: 65528 leaves eight.
		{"fence without room for the term", func() modbus.Config { c := valid(); c.Fence = &modbus.Fence{Address: 65528}; return c }, "fence.address", "65528"},
		{"no actions", func() modbus.Config { c := valid(); c.Actions = nil; return c }, "actions", ""},
		{"unknown action", func() modbus.Config {
			c := valid()
			c.Actions = map[modbus.Action]modbus.ActionConfig{"pulse": {}}
			return c
		}, "actions", "pulse"},
	}
	for _, c := range cases {
		cfg := c.cfg()
		err := cfg.Validate()
		var ce *modbus.ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%s: Validate = %v, want a *ConfigError", c.name, err)
			continue
		}
		if ce.Field != c.field || ce.Value != c.value {
			t.Errorf("%s: field %s value %s, want %s %s (%v)", c.name, ce.Field, ce.Value, c.field, c.value, err)
		}
		if !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: message %q does not name %s", c.name, err, c.field)
		}
		if _, err := modbus.New(cfg); !errors.As(err, &ce) {
			t.Errorf("%s: New accepted an invalid config: %v", c.name, err)
		}
	}
	lastFence := valid()
	lastFence.Fence = &modbus.Fence{Address: 65536 - modbus.FenceRegisterCount}
	for _, cfg := range []modbus.Config{valid(), rtu(), lastFence} {
		if err := cfg.Validate(); err != nil {
			t.Errorf("valid config %+v: %v", cfg, err)
		}
	}
}

// The YAML examples of the package documentation load and validate, so the
// documentation cannot drift from the yaml tags.
func TestDocumentedYAMLLoads(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	blocks := yamlBlocks(string(src))
	if len(blocks) != 2 {
		t.Fatalf("found %d YAML examples in doc.go, want 2", len(blocks))
	}
	var configs []modbus.Config
	for _, b := range blocks {
		var cfg modbus.Config
		if err := yaml.UnmarshalWithOptions([]byte(b), &cfg, yaml.Strict()); err != nil {
			t.Fatalf("decode\n%s: %v", b, err)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("validate\n%s: %v", b, err)
		}
		configs = append(configs, cfg)
	}
	want := modbus.Config{
		Transport: modbus.TCP,
		Address:   "10.0.0.5:502",
		Unit:      3,
		Timeout:   500 * time.Millisecond,
		Fence:     &modbus.Fence{Address: 900, Mode: modbus.FenceTwoRequests},
		Actions: map[modbus.Action]modbus.ActionConfig{
			modbus.WriteRegister: {Verify: true},
			modbus.WriteCoils:    {Verify: true},
			modbus.WriteCoil:     {NoRedispatch: true},
		},
		Health: &modbus.Health{Register: 0},
	}
	if !reflect.DeepEqual(configs[0], want) {
		t.Errorf("TCP example = %+v, want %+v", configs[0], want)
	}
	if got := configs[1].Serial; got != (modbus.Serial{Device: "/dev/ttyUSB0", BaudRate: 19200, DataBits: 8, Parity: "E", StopBits: 1}) {
		t.Errorf("RTU example serial = %+v", got)
	}
	if configs[1].Transport != modbus.RTU || configs[1].Unit != 17 {
		t.Errorf("RTU example = %+v", configs[1])
	}
	// A misspelt key is an error under strict decoding, which the loader
	// should use.
	var cfg modbus.Config
	if err := yaml.UnmarshalWithOptions([]byte("transport: tcp\nadress: x:1\n"), &cfg, yaml.Strict()); err == nil {
		t.Error("strict decoding accepted an unknown key")
	}
}

// yamlBlocks returns the indented comment blocks of src that start with
// "transport:".
func yamlBlocks(src string) []string {
	var blocks []string
	var cur []string
	for _, line := range strings.Split(src, "\n") {
		body, ok := strings.CutPrefix(line, "//\t")
		switch {
		case ok && (len(cur) > 0 || strings.HasPrefix(body, "transport:")):
			cur = append(cur, body)
		case len(cur) > 0:
			blocks = append(blocks, strings.Join(cur, "\n"))
			cur = nil
		}
	}
	return blocks
}
