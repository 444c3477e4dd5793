package config

import (
	"fmt"
	"sort"
	"strings"
)

// FieldError is one fault of a configuration: where it is in the file, the
// field by its YAML path (such as "kafka.sasl.mechanism" or
// "devices[1].name"), the value found there, what is wrong with it, and the
// fix.
type FieldError struct {
	// File is the file the fault is in, or "" for bytes from no file.
	File string

	// Line and Column locate the fault, counted from 1. For a field the
	// file omits they locate the nearest enclosing section the file has;
	// both are 0 when it has none.
	Line, Column int

	// Field is the YAML path of the field; "" for a fault of the YAML
	// syntax itself.
	Field string

	// Value is the value found, as text. A secret is never quoted: its
	// Value is "<redacted>".
	Value string

	// Problem says what is wrong.
	Problem string

	// Hint says what to write instead, such as "did you mean `lease`?" or
	// "a duration such as 15s"; "" when Problem says it already.
	Hint string
}

// Error renders the fault as "file:line:col: field: "value": problem; hint",
// leaving out the parts it does not have.
func (e *FieldError) Error() string {
	var b strings.Builder
	if loc := e.location(); loc != "" {
		b.WriteString(loc)
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	if e.Value != "" || e.Field != "" {
		fmt.Fprintf(&b, "%q: ", e.Value)
	}
	b.WriteString(e.Problem)
	if e.Hint != "" {
		b.WriteString("; ")
		b.WriteString(e.Hint)
	}
	return b.String()
}

func (e *FieldError) location() string {
	switch {
	case e.Line > 0 && e.File != "":
		return fmt.Sprintf("%s:%d:%d", e.File, e.Line, e.Column)
	case e.Line > 0:
		return fmt.Sprintf("line %d:%d", e.Line, e.Column)
	}
	return e.File
}

// ValidationError lists every fault found in one configuration: YAML
// syntax, unknown keys, values of the wrong type, and invalid settings, in
// file order.
type ValidationError struct {
	// File is the file, or "" for bytes from no file.
	File string

	// Problems are the faults, at least one.
	Problems []*FieldError
}

// Error renders a heading and one fault per line.
func (e *ValidationError) Error() string {
	var b strings.Builder
	where := "config"
	if e.File != "" {
		where = e.File
	}
	fmt.Fprintf(&b, "%s: %d fault", where, len(e.Problems))
	if len(e.Problems) != 1 {
		b.WriteString("s")
	}
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.Error())
	}
	return b.String()
}

// Unwrap returns the faults, so errors.As finds a *FieldError.
func (e *ValidationError) Unwrap() []error {
	out := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p
	}
	return out
}

// Field returns the fault of one field, or nil.
func (e *ValidationError) Field(field string) *FieldError {
	for _, p := range e.Problems {
		if p.Field == field {
			return p
		}
	}
	return nil
}

// sortProblems orders the faults by their place in the file; a fault
// without a place goes last, in the order it was found.
func sortProblems(ps []*FieldError) {
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if (a.Line == 0) != (b.Line == 0) {
			return b.Line == 0
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
}
