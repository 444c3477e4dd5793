// Package config is the YAML configuration of the dispatcher binary: the
// schema of dispatcher.yaml, its defaults, and its validation.
//
// A file is read in three steps: [Parse] decodes the YAML strictly (an
// unknown key is an error, because a misspelt key that is silently ignored
// turns into a default nobody chose), [Config.Complete] fills every omitted
// setting from the Default… constants of this package, and [Config.Validate]
// checks every field. [Load] runs the three and reports every fault of the
// file at once, those of shape (syntax, unknown keys, wrong types) with those
// of value, as one *[ValidationError]: each fault names the file, its line
// and column, the field by its YAML path, the bad value, and the fix.
// Durations are strings with a unit ("15s"); a bare number is refused.
//
// The member's own secrets (the HTTP API token) are resolved only by
// [Config.CheckMemberSecrets], so an operator command that does not serve
// the API loads a member's file without them.
//
// The package turns settings into the options of the libraries that use them
// ([Kafka.ClientOptions] for franz-go), so that the binary holds no
// translation logic of its own.
package config
