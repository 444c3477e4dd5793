package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// ClientOptions turns the section into franz-go client options: the seed
// brokers, the client id, the dial timeout, TLS and SASL. It reads the
// certificate and secret files and variables the section names.
func (k *Kafka) ClientOptions() ([]kgo.Opt, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(k.Brokers...),
	}
	if k.ClientID != "" {
		opts = append(opts, kgo.ClientID(k.ClientID))
	}
	if k.DialTimeout > 0 {
		opts = append(opts, kgo.DialTimeout(k.DialTimeout))
	}
	if k.TLS != nil {
		cfg, err := k.TLS.Config()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if k.SASL != nil {
		m, err := k.SASL.NewMechanism()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// Config builds the *tls.Config of the section.
func (t *TLS) Config() (*tls.Config, error) {
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // documented as for tests only
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("config: kafka.tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("config: kafka.tls.ca_file: %s holds no PEM certificate", t.CAFile)
		}
		cfg.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("config: kafka.tls.cert_file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// NewMechanism builds the franz-go SASL mechanism of the section, reading
// the password from wherever the section put it.
func (s *SASL) NewMechanism() (sasl.Mechanism, error) {
	password, err := resolveSecret(s.Password, s.PasswordFile, s.PasswordEnv)
	if err != nil {
		return nil, fmt.Errorf("config: kafka.sasl.password: %w", err)
	}
	switch s.Mechanism {
	case MechanismPlain:
		return plain.Auth{User: s.Username, Pass: password}.AsMechanism(), nil
	case MechanismScramSHA256:
		return scram.Auth{User: s.Username, Pass: password}.AsSha256Mechanism(), nil
	case MechanismScramSHA512:
		return scram.Auth{User: s.Username, Pass: password}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("config: kafka.sasl.mechanism: %q: %w", s.Mechanism, errUnknownMechanism)
}

var errUnknownMechanism = errors.New("unknown SASL mechanism")

// ResolveToken returns the bearer token of the section from wherever the
// file put it, or "" when the API takes no token.
func (h *HTTP) ResolveToken() (string, error) {
	tok, err := resolveSecret(h.Token, h.TokenFile, h.TokenEnv)
	if err != nil {
		return "", fmt.Errorf("config: http.token: %w", err)
	}
	return tok, nil
}

// resolveSecret reads a secret from its inline value, its file, or its
// environment variable.
func resolveSecret(inline, file, env string) (string, error) {
	switch {
	case inline != "":
		return inline, nil
	case file != "":
		data, err := os.ReadFile(file)
		if err != nil {
			return "", err
		}
		return strings.TrimRight(string(data), "\r\n"), nil
	case env != "":
		val, ok := os.LookupEnv(env)
		if !ok || val == "" {
			return "", fmt.Errorf("environment variable %s is unset or empty", env)
		}
		return val, nil
	}
	return "", nil
}
