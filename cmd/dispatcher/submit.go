package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// NewSubmitCommand builds `dispatcher submit`.
func NewSubmitCommand(streams Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "submit",
		Short: "submit",
		RunE:  func(*cobra.Command, []string) error { return errors.New("submit: not built yet") },
	}
}
