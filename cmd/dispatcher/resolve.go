package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// NewResolveCommand builds `dispatcher resolve`.
func NewResolveCommand(streams Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "resolve",
		Short: "resolve",
		RunE:  func(*cobra.Command, []string) error { return errors.New("resolve: not built yet") },
	}
}
