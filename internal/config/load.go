package config

import (
	"bytes"
	"fmt"
	"os"

	"github.com/goccy/go-yaml"
)

// ParseError reports a file that is not valid YAML for the schema: a syntax
// error, an unknown key, or a value of the wrong type. Its message carries
// the line and column and quotes the offending source.
type ParseError struct {
	// Path is the file, or "" for bytes that came from no file.
	Path string

	// Err is the decoder's error.
	Err error
}

// Error names the file and the position of the fault.
func (e *ParseError) Error() string {
	where := "config"
	if e.Path != "" {
		where = e.Path
	}
	return fmt.Sprintf("%s: %s", where, yaml.FormatError(e.Err, false, true))
}

// Unwrap returns the decoder's error.
func (e *ParseError) Unwrap() error { return e.Err }

// Parse decodes a configuration strictly: an unknown key, a duplicate key,
// or a value of the wrong type is a *ParseError. It neither completes nor
// validates the result.
func Parse(data []byte) (*Config, error) {
	var c Config
	if len(bytes.TrimSpace(data)) == 0 {
		return &c, nil
	}
	if err := yaml.UnmarshalWithOptions(data, &c, yaml.Strict()); err != nil {
		return nil, &ParseError{Err: err}
	}
	return &c, nil
}

// Load reads, parses, completes and validates the file at path. It returns a
// *ParseError for a file that does not decode and a *ValidationError for a
// file that decodes into invalid settings.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		if pe, ok := err.(*ParseError); ok {
			pe.Path = path
		}
		return nil, err
	}
	c.Complete()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}
