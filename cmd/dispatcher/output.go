package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

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
)

// String implements pflag.Value.
func (o *Output) String() string { return string(*o) }

// Set implements pflag.Value; it rejects an unknown format at parse time,
// before any work.
func (o *Output) Set(s string) error {
	switch Output(s) {
	case OutputTable, OutputJSON:
		*o = Output(s)
		return nil
	}
	return fmt.Errorf("want %s or %s", OutputTable, OutputJSON)
}

// Type implements pflag.Value.
func (o *Output) Type() string { return "table|json" }

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

// addOutputFlag registers -o with its values in the help and in shell
// completion.
func addOutputFlag(cmd *cobra.Command, o *Output) {
	cmd.Flags().VarP(o, "output", "o", "output format: table or json")
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{string(OutputTable), string(OutputJSON)}, cobra.ShellCompDirectiveNoFileComp
	})
}
