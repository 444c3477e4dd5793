package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// NewLogCommand builds `dispatcher log`.
func NewLogCommand(streams Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "log",
		Short: "log",
		RunE:  func(*cobra.Command, []string) error { return errors.New("log: not built yet") },
	}
}
