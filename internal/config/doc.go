// Package config is the YAML configuration of the dispatcher binary: the
// schema of dispatcher.yaml, its defaults, and its validation.
//
// A file is read in three steps, each of which can fail on its own: [Parse]
// decodes the YAML strictly (an unknown key is an error, because a misspelt
// key that is silently ignored turns into a default nobody chose), [Config.Complete]
// fills every omitted setting from the Default… constants of this package,
// and [Config.Validate] checks every field and reports all the faults at
// once, each naming the field by its YAML path and quoting the bad value.
// [Load] runs the three.
//
// The package turns settings into the options of the libraries that use them
// ([Kafka.ClientOptions] for franz-go, [Lease.Options] for package
// coordination) so that the binary holds no translation logic of its own.
package config
