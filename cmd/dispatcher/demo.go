package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// NewDemoCommand builds `dispatcher demo`.
func NewDemoCommand(streams Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "demo",
		RunE:  func(*cobra.Command, []string) error { return errors.New("demo: not built yet") },
	}
}
