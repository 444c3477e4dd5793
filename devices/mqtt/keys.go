package mqtt

import (
	"fmt"
	"os"

	"github.com/krabka-io/krabka-dispatch/devices/fence"
)

// validateKeys checks the authentication settings without reading a file.
func (c Config) validateKeys() []error {
	var errs []error
	if !c.Authenticates() {
		if len(c.Keys) > 0 || c.Verifier != nil {
			errs = append(errs, configErr("authenticate", "false", "keys given but authenticate is false"))
		}
		return errs
	}
	switch {
	case len(c.Keys) == 0 && c.Verifier == nil:
		errs = append(errs, configErr("keys", "",
			"authentication is on by default and needs at least one key; set authenticate: false only if every publisher on the broker is trusted"))
	case len(c.Keys) > 0 && c.Verifier != nil:
		errs = append(errs, configErr("keys", "", "give keys or a loaded Verifier, not both"))
	}
	seen := make(map[string]bool, len(c.Keys))
	for i, k := range c.Keys {
		field := fmt.Sprintf("keys[%d]", i)
		switch {
		case k.ID == "":
			errs = append(errs, configErr(field+".id", "", "a key id is required"))
		case seen[k.ID]:
			errs = append(errs, configErr(field+".id", k.ID, "key id given twice"))
		}
		seen[k.ID] = true
		if (k.KeyFile == "") == (k.KeyEnv == "") {
			errs = append(errs, configErr(field, k.ID, "give exactly one of key_file and key_env"))
		}
	}
	return errs
}

// LoadVerifier reads the secrets that keys name, from their files or
// environment variables, and returns a [fence.Verifier] whose first key
// signs. A missing file, an unset or empty variable, and a secret that is
// not at least 64 hex digits are *ConfigError values naming the field; the
// secret is never repeated in an error.
func LoadVerifier(keys []KeyConfig) (*fence.Verifier, error) {
	loaded := make([]fence.Key, 0, len(keys))
	for i, k := range keys {
		field := fmt.Sprintf("keys[%d]", i)
		var text string
		switch {
		case k.KeyFile != "" && k.KeyEnv != "", k.KeyFile == "" && k.KeyEnv == "":
			return nil, configErr(field, k.ID, "give exactly one of key_file and key_env")
		case k.KeyFile != "":
			field += ".key_file"
			b, err := os.ReadFile(k.KeyFile)
			if err != nil {
				return nil, &ConfigError{Field: field, Value: k.KeyFile, Reason: "cannot read the key", Err: err}
			}
			text = string(b)
		default:
			field += ".key_env"
			v, ok := os.LookupEnv(k.KeyEnv)
			if !ok || v == "" {
				return nil, configErr(field, k.KeyEnv, "environment variable unset or empty")
			}
			text = v
		}
		secret, err := fence.ParseKey(text)
		if err != nil {
			return nil, &ConfigError{Field: field, Value: k.KeyFile + k.KeyEnv, Reason: "not a device key", Err: err}
		}
		loaded = append(loaded, fence.Key{ID: k.ID, Secret: secret})
	}
	v, err := fence.NewVerifier(loaded...)
	if err != nil {
		return nil, &ConfigError{Field: "keys", Reason: "invalid keys", Err: err}
	}
	return v, nil
}
