package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// A release build stamps these with the linker, for instance
//
//	go build -ldflags "-X main.version=v1.2.0 -X main.commit=$(git rev-parse HEAD)"
//
// (make release does). They are package variables only because -X can set
// nothing else; nothing assigns them at run time. When empty, the build
// information the Go toolchain records is used.
var (
	version    string
	commit     string
	commitTime string
)

// VersionInfo is what `dispatcher version` prints.
type VersionInfo struct {
	// Version is the module version: a tag such as v1.2.0 for a release
	// or a `go install …@version` build, "(devel)" for a build from a
	// working tree.
	Version string `json:"version"`
	// Commit is the VCS revision the binary was built from.
	Commit string `json:"commit,omitempty"`
	// CommitTime is the time of that revision, RFC 3339.
	CommitTime string `json:"commit_time,omitempty"`
	// Modified reports a build from a working tree with uncommitted changes.
	Modified bool `json:"modified,omitempty"`
	// GoVersion is the toolchain that built the binary.
	GoVersion string `json:"go_version"`
	// Module is the main module's path.
	Module string `json:"module,omitempty"`
}

// readVersion reads the build information and applies the stamped values
// over it.
func readVersion() VersionInfo {
	info := buildVersion(debug.ReadBuildInfo())
	if version != "" {
		info.Version = version
	}
	if commit != "" {
		info.Commit, info.Modified = commit, false
	}
	if commitTime != "" {
		info.CommitTime = commitTime
	}
	return info
}

// buildVersion reads what the toolchain recorded; it is a pure function of
// its arguments.
func buildVersion(bi *debug.BuildInfo, ok bool) VersionInfo {
	info := VersionInfo{Version: "(unknown)"}
	if !ok || bi == nil {
		return info
	}
	info.GoVersion, info.Module = bi.GoVersion, bi.Main.Path
	if bi.Main.Version != "" {
		info.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.time":
			info.CommitTime = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// String is the one line of `dispatcher --version`.
func (v VersionInfo) String() string {
	s := "dispatcher " + v.Version
	if v.Commit != "" {
		s += " (commit " + v.Commit
		if v.Modified {
			s += ", modified"
		}
		if v.CommitTime != "" {
			s += ", " + v.CommitTime
		}
		s += ")"
	}
	if v.GoVersion != "" {
		s += " " + v.GoVersion
	}
	return s
}

func (v VersionInfo) writeTable(w io.Writer) error {
	commit := dash(v.Commit)
	if v.Modified {
		commit += " (modified)"
	}
	_, err := fmt.Fprintf(w, "version:  %s\ncommit:   %s\ntime:     %s\ngo:       %s\n", v.Version, commit, dash(v.CommitTime), dash(v.GoVersion))
	return err
}

// NewVersionCommand builds `dispatcher version`.
func NewVersionCommand(streams Streams) *cobra.Command {
	output := OutputTable
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version of this binary",
		Args:  args(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			v := readVersion()
			if output.Structured() {
				return output.Write(streams.Out, v)
			}
			return v.writeTable(streams.Out)
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
