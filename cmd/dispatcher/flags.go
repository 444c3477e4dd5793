package main

import (
	"time"

	"github.com/spf13/pflag"
)

// GlobalOptions are the flags of the root, which every subcommand takes.
type GlobalOptions struct {
	LogFormat string
	LogLevel  string
}

// addFlags registers the global flags as persistent flags of the root.
func (g *GlobalOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&g.LogFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&g.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
}

// The flags below mean the same on every subcommand that has them; each is
// registered here and only here, so their names, shorthands, defaults and
// help never drift apart. They are not persistent flags of the root because
// some subcommands have no use for them (demo reads no file, run has no
// time bound, version has no table), and a flag a command ignores would
// mislead.

// addConfigFlag registers -c/--config.
func addConfigFlag(fs *pflag.FlagSet, p *string) {
	fs.StringVarP(p, "config", "c", "", "configuration file, such as dispatcher.yaml")
}

// addTimeoutFlag registers --timeout with the default bound def.
func addTimeoutFlag(fs *pflag.FlagSet, p *time.Duration, def time.Duration) {
	fs.DurationVar(p, "timeout", def, "bound on the whole command")
}
