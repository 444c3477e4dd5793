package fence

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// MinKeyBytes is the shortest device key a [Verifier] accepts: 32 bytes,
// the output size of SHA-256, below which HMAC-SHA256 is weaker than its
// hash.
const MinKeyBytes = 32

// MACBytes is the length of an HMAC-SHA256 tag.
const MACBytes = sha256.Size

// ErrUnauthenticated is matched by every [*AuthError]: a command or reply
// whose MAC does not verify under any key of the [Verifier].
var ErrUnauthenticated = errors.New("fence: message not authenticated")

// ErrInvalidKey reports a device key that [ParseKey] or [NewVerifier]
// refuses.
var ErrInvalidKey = errors.New("fence: invalid device key")

// AuthError reports a message that is not authenticated. It carries no
// detail that would help a forger beyond what is on the wire.
type AuthError struct {
	// KeyID is the key id the message named.
	KeyID string
	// Reason says why it was refused: "unknown key id", "no mac" or
	// "mac mismatch".
	Reason string
}

func (e *AuthError) Error() string {
	return fmt.Sprintf("fence: message under key id %q not authenticated: %s", e.KeyID, e.Reason)
}

// Is reports whether target is ErrUnauthenticated.
func (e *AuthError) Is(target error) bool { return target == ErrUnauthenticated }

// Key is one device key: an id that messages name in their "kid" field, and
// the secret, at least MinKeyBytes long.
type Key struct {
	ID     string
	Secret []byte
}

// ParseKey decodes the text form of a device key: hexadecimal digits, at
// least 2*MinKeyBytes of them, with surrounding white space (such as the
// newline at the end of a key file) ignored. It is the form that
// `openssl rand -hex 32` writes.
func ParseKey(text string) ([]byte, error) {
	s := strings.TrimSpace(text)
	b, err := hex.DecodeString(s)
	if err != nil {
		// The hex error would quote a character of the secret.
		return nil, fmt.Errorf("%w: not hexadecimal", ErrInvalidKey)
	}
	if len(b) < MinKeyBytes {
		return nil, fmt.Errorf("%w: %d bytes, want at least %d (%d hex digits)", ErrInvalidKey, len(b), MinKeyBytes, 2*MinKeyBytes)
	}
	return b, nil
}

// Verifier holds the keys of one device, or one group of devices that share
// keys: the first key signs, and every key verifies, so that during a
// rotation messages under the old key and the new one are both accepted.
// A Verifier is immutable and safe for concurrent use.
type Verifier struct {
	keys []Key
}

// NewVerifier returns a Verifier over keys, the first of which signs. It
// refuses no keys, an empty or repeated id, and a secret shorter than
// MinKeyBytes, with an error matching ErrInvalidKey. It copies the secrets.
func NewVerifier(keys ...Key) (*Verifier, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no keys", ErrInvalidKey)
	}
	v := &Verifier{keys: make([]Key, 0, len(keys))}
	seen := make(map[string]bool, len(keys))
	for i, k := range keys {
		switch {
		case k.ID == "":
			return nil, fmt.Errorf("%w: key %d has no id", ErrInvalidKey, i)
		case seen[k.ID]:
			return nil, fmt.Errorf("%w: key id %q given twice", ErrInvalidKey, k.ID)
		case len(k.Secret) < MinKeyBytes:
			return nil, fmt.Errorf("%w: key %q has %d bytes, want at least %d", ErrInvalidKey, k.ID, len(k.Secret), MinKeyBytes)
		}
		seen[k.ID] = true
		v.keys = append(v.keys, Key{ID: k.ID, Secret: append([]byte(nil), k.Secret...)})
	}
	return v, nil
}

// KeyID returns the id of the signing key.
func (v *Verifier) KeyID() string { return v.keys[0].ID }

// KeyIDs returns the ids of every key, the signing key first.
func (v *Verifier) KeyIDs() []string {
	ids := make([]string, len(v.keys))
	for i, k := range v.keys {
		ids[i] = k.ID
	}
	return ids
}

// Sign returns the id of the signing key and the HMAC-SHA256 of msg under
// it.
func (v *Verifier) Sign(msg []byte) (kid string, mac []byte) {
	return v.keys[0].ID, computeMAC(v.keys[0].Secret, msg)
}

// Verify checks that mac is the HMAC-SHA256 of msg under the key named kid,
// in constant time. It returns an *AuthError for an unknown key id, a
// missing MAC or a MAC that does not match.
func (v *Verifier) Verify(kid string, msg, mac []byte) error {
	if len(mac) == 0 {
		return &AuthError{KeyID: kid, Reason: "no mac"}
	}
	for _, k := range v.keys {
		if k.ID != kid {
			continue
		}
		if !hmac.Equal(computeMAC(k.Secret, msg), mac) {
			return &AuthError{KeyID: kid, Reason: "mac mismatch"}
		}
		return nil
	}
	return &AuthError{KeyID: kid, Reason: "unknown key id"}
}

func computeMAC(key, msg []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write(msg)
	return h.Sum(nil)
}
