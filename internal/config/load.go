package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// Parse decodes a configuration strictly and reports every fault of shape
// at once: a YAML syntax error (which ends the parse), and else each
// unknown key, each value of the wrong type and each duration that is not
// a string such as "15s". It returns a *ValidationError listing them. It
// neither completes nor validates the result.
func Parse(data []byte) (*Config, error) {
	c, s, err := parse(data)
	if err != nil {
		return nil, err
	}
	if len(s.problems) > 0 {
		return nil, &ValidationError{Problems: s.problems}
	}
	return c, nil
}

// parse decodes data, leaving out the nodes at fault, and returns the
// schema walk with its faults and the places of the fields. A syntax error
// is the only error it returns.
func parse(data []byte) (*Config, *schema, error) {
	s := newSchema(data)
	c := &Config{}
	if len(bytes.TrimSpace(data)) == 0 {
		return c, s, nil
	}
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, s, &ValidationError{Problems: []*FieldError{syntaxFault(err)}}
	}
	if len(file.Docs) > 1 {
		p := tokenPos(file.Docs[1].GetToken())
		return nil, s, &ValidationError{Problems: []*FieldError{{Line: p.line, Column: p.column,
			Problem: "more than one YAML document", Hint: "remove the second \"---\" and what follows it"}}}
	}
	if len(file.Docs) == 0 || file.Docs[0].Body == nil {
		return c, s, nil
	}
	body := file.Docs[0].Body
	s.walk(body, reflectConfig, "")
	if s.faulted[""] {
		return c, s, nil
	}
	if err := yaml.NodeToValue(body, c, yaml.Strict()); err != nil {
		// The schema walk saw nothing wrong that the decoder does: report
		// the decoder's own words at its position.
		f := syntaxFault(err)
		if len(s.problems) == 0 {
			s.problems = append(s.problems, f)
		}
		return &Config{}, s, nil
	}
	for i := range c.Devices {
		d := &c.Devices[i]
		if n, ok := s.sections[fmt.Sprintf("devices[%d].%s", i, DeviceMQTT)]; ok {
			d.MQTT = yaml.RawMessage(n.String())
		}
		if n, ok := s.sections[fmt.Sprintf("devices[%d].%s", i, DeviceModbus)]; ok {
			d.Modbus = yaml.RawMessage(n.String())
		}
	}
	return c, s, nil
}

// syntaxFault turns a decoder error into a fault at its position.
func syntaxFault(err error) *FieldError {
	f := &FieldError{Problem: err.Error()}
	var located interface {
		GetToken() *token.Token
		GetMessage() string
	}
	if errors.As(err, &located) {
		p := tokenPos(located.GetToken())
		f.Line, f.Column, f.Problem = p.line, p.column, located.GetMessage()
	}
	if f.Line == 0 {
		// An error without a token still says where in its text.
		f.Problem = strings.TrimSpace(firstLine(err.Error()))
	}
	f.Problem = "YAML: " + f.Problem
	return f
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// Load reads, parses, completes and validates the file at path. It reports
// every fault of the file at once as a *ValidationError, each fault with
// the file, its line and column, the field, the value and the fix. Load
// reads no member secret: the HTTP token's file or variable is resolved by
// [Config.CheckMemberSecrets] and [HTTP.ResolveToken], which only a command
// that uses the token calls.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := LoadBytes(path, data)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// LoadBytes is [Load] of data read from the file named path; path only
// names the file in the faults.
func LoadBytes(path string, data []byte) (*Config, error) {
	c, s, err := parse(data)
	if err != nil {
		var ve *ValidationError
		if errors.As(err, &ve) {
			ve.setFile(path)
		}
		return nil, err
	}
	c.Complete()
	c.at = s.at
	problems := s.problems
	var ve *ValidationError
	if err := c.Validate(); errors.As(err, &ve) {
		for _, p := range ve.Problems {
			if !s.covered(p.Field) {
				problems = append(problems, p)
			}
		}
	}
	if len(problems) == 0 {
		c.file = path
		return c, nil
	}
	out := &ValidationError{Problems: problems}
	c.locate(out)
	out.setFile(path)
	sortProblems(out.Problems)
	return nil, out
}

func (e *ValidationError) setFile(path string) {
	e.File = path
	for _, p := range e.Problems {
		p.File = path
	}
}
