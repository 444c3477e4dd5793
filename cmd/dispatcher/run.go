package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// NewRunCommand builds `dispatcher run`.
func NewRunCommand(streams Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "run",
		Short: "run",
		RunE:  func(*cobra.Command, []string) error { return errors.New("run: not built yet") },
	}
}
