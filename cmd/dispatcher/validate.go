package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/krabka-io/krabka-dispatch/internal/config"
)

// ValidateOptions are the flags of `dispatcher validate`.
type ValidateOptions struct {
	ConfigFile    string
	MemberSecrets bool
	Output        Output

	Streams
}

// ValidateResult is what `validate -o json` prints.
type ValidateResult struct {
	File   string          `json:"file"`
	OK     bool            `json:"ok"`
	Faults []ValidateFault `json:"faults"`
}

// ValidateFault is one fault of the file.
type ValidateFault struct {
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Field   string `json:"field,omitempty"`
	Value   string `json:"value,omitempty"`
	Problem string `json:"problem"`
	Hint    string `json:"hint,omitempty"`
}

// NewValidateCommand builds `dispatcher validate`.
func NewValidateCommand(streams Streams) *cobra.Command {
	o := &ValidateOptions{Output: OutputTable, Streams: streams}
	cmd := &cobra.Command{
		Use:   "validate -c dispatcher.yaml",
		Short: "Check a configuration file offline: print ok, or every fault with its line and fix",
		Long: `validate reads a configuration file as run would and reports every fault at
once, each with its line and column, the field, the value and the fix. It
reaches no network: it reads only the file and the local files and variables
the kafka section names. It prints "ok" and exits 0, or prints the faults and
exits 2.

--member-secrets also resolves the member's own secrets, as run does (the
HTTP token's file or variable, and the certificate, key and client
authorities of http.tls): use it where the member runs.`,
		Args: args(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error { return o.Run() },
	}
	addConfigFlag(cmd.Flags(), &o.ConfigFile)
	addOutputFlag(cmd, &o.Output)
	cmd.Flags().BoolVar(&o.MemberSecrets, "member-secrets", false, "also resolve the HTTP token and read the http.tls files, as run does")
	return cmd
}

// Run loads the file and prints the verdict.
func (o *ValidateOptions) Run() error {
	if o.ConfigFile == "" {
		return usageErrorf("--config is required")
	}
	c, err := config.Load(o.ConfigFile)
	if err == nil && o.MemberSecrets {
		err = c.CheckMemberSecrets()
	}
	var invalid *config.ValidationError
	if err != nil && !errors.As(err, &invalid) {
		return withCode(ExitUsage, err)
	}
	res := ValidateResult{File: o.ConfigFile, OK: err == nil, Faults: []ValidateFault{}}
	if invalid != nil {
		for _, p := range invalid.Problems {
			res.Faults = append(res.Faults, ValidateFault{Line: p.Line, Column: p.Column, Field: p.Field, Value: p.Value, Problem: p.Problem, Hint: p.Hint})
		}
	}
	if o.Output.Structured() {
		if werr := o.Output.Write(o.Out, res); werr != nil {
			return werr
		}
	} else if res.OK {
		fmt.Fprintln(o.Out, "ok")
	} else {
		fmt.Fprintln(o.Out, invalid.Error())
	}
	if !res.OK {
		return withCode(ExitUsage, fmt.Errorf("%s: not valid", o.ConfigFile))
	}
	return nil
}
