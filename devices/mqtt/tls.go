package mqtt

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
)

// buildTLS turns the TLS settings into a *tls.Config. It returns nil for nil
// settings, which leaves TLS brokers to the system roots.
func buildTLS(c *TLSConfig) (*tls.Config, error) {
	if c == nil {
		return nil, nil
	}
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         c.ServerName,
		InsecureSkipVerify: c.InsecureSkipVerify, //nolint:gosec // documented as for tests only
	}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, &ConfigError{Field: "tls.ca_file", Value: c.CAFile, Reason: "cannot read", Err: err}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &ConfigError{Field: "tls.ca_file", Value: c.CAFile, Reason: "holds no PEM certificate",
				Err: errors.New("no certificate found")}
		}
		cfg.RootCAs = pool
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, &ConfigError{Field: "tls.cert_file", Value: c.CertFile, Reason: "cannot load with tls.key_file", Err: err}
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
