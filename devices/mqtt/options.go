package mqtt

import "log/slog"

// Option adjusts a Device beyond its Config.
type Option func(*options)

type options struct {
	logger *slog.Logger
}

// WithLogger sets the logger for connection events: connected, lost,
// reconnect attempts, and replies that match no command. The default
// discards them.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

func buildOptions(opts []Option) options {
	o := options{logger: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}
