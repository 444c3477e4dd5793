package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds the loader arbitrary files, seeded with every file of
// testdata/. Whatever the bytes, Parse answers with a config or a
// *ValidationError, and a config that parses completes and validates with a
// *ValidationError or nil: no input makes the loader panic, and no fault
// escapes the two error types that the binary reports.
func FuzzParse(f *testing.F) {
	for _, pattern := range []string{"testdata/*.yaml", "testdata/invalid/*.yaml", "testdata/unparsable/*.yaml"} {
		paths, err := filepath.Glob(pattern)
		if err != nil {
			f.Fatal(err)
		}
		for _, path := range paths {
			data, err := os.ReadFile(path)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte("role: [unclosed"))
	f.Add([]byte("role: r\nrole: r\n"))

	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			var parseErr *ValidationError
			if !errors.As(err, &parseErr) || len(parseErr.Problems) == 0 {
				t.Fatalf("Parse returned %T, want *ValidationError with faults: %v", err, err)
			}
			_ = parseErr.Error()
			return
		}
		c.Complete()
		if err := c.Validate(); err != nil {
			var invalid *ValidationError
			if !errors.As(err, &invalid) {
				t.Fatalf("Validate returned %T, want *ValidationError: %v", err, err)
			}
			if invalid.Error() == "" {
				t.Fatal("a validation error with no message")
			}
		}
	})
}
