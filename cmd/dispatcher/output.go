package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"
)

// Output is the format a command prints its result in.
type Output string

// The output formats of -o.
const (
	// OutputTable is for people: aligned columns.
	OutputTable Output = "table"
	// OutputJSON is for programs: the command's result struct, with stable
	// field names; a streaming command prints one object per line.
	OutputJSON Output = "json"
	// OutputYAML is the JSON result with the same field names, as YAML; a
	// streaming command prints one document per record.
	OutputYAML Output = "yaml"
)

// outputs are the values of -o, in the order the help lists them.
var outputs = []string{string(OutputTable), string(OutputJSON), string(OutputYAML)}

// String implements pflag.Value.
func (o *Output) String() string { return string(*o) }

// Set implements pflag.Value; it rejects an unknown format at parse time,
// before any work.
func (o *Output) Set(s string) error {
	switch Output(s) {
	case OutputTable, OutputJSON, OutputYAML:
		*o = Output(s)
		return nil
	}
	return fmt.Errorf("want %s", strings.Join(outputs, ", "))
}

// Type implements pflag.Value.
func (o *Output) Type() string { return strings.Join(outputs, "|") }

// Structured reports whether the format is for programs (json or yaml)
// rather than the table.
func (o Output) Structured() bool { return o == OutputJSON || o == OutputYAML }

// Write prints v in a structured format: indented JSON, or the same as
// YAML.
func (o Output) Write(w io.Writer, v any) error {
	if o == OutputYAML {
		return writeYAML(w, v)
	}
	return writeJSON(w, v)
}

// Stream returns a function that prints one record of a stream: one JSON
// object per line, or one YAML document per record.
func (o Output) Stream(w io.Writer) func(v any) error {
	if o == OutputYAML {
		return func(v any) error {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
			return writeYAML(w, v)
		}
	}
	enc := json.NewEncoder(w)
	return enc.Encode
}

// table is a header and rows, the input of the table printer.
type table struct {
	header []string
	rows   [][]string
}

// write prints t aligned with tabs.
func (t table) write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.header, "\t"))
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeYAML prints v as YAML with the field names of its JSON form, so the
// two structured formats never disagree.
func writeYAML(w io.Writer, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	out, err := yaml.JSONToYAML(data)
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// addOutputFlag registers -o with its values in the help and in shell
// completion.
func addOutputFlag(cmd *cobra.Command, o *Output) {
	cmd.Flags().VarP(o, "output", "o", "output format: "+strings.Join(outputs, ", "))
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return outputs, cobra.ShellCompDirectiveNoFileComp
	})
}
