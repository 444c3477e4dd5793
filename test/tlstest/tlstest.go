// Package tlstest makes throwaway certificate authorities and the
// certificates they sign, for tests of TLS and client certificates. Every
// key is made fresh in the test and every file lives in the test's
// temporary directory: no key material is kept in the repository.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Validity is how long a certificate of this package is valid, from an hour
// before it is made.
const Validity = 24 * time.Hour

// CA is a certificate authority of one test.
type CA struct {
	// CertFile is the PEM file of the authority's certificate, to trust.
	CertFile string

	// Pool holds the authority's certificate.
	Pool *x509.CertPool

	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	dir  string
}

// Pair is a certificate an authority signed, with its key, in PEM files and
// loaded.
type Pair struct {
	CertFile, KeyFile string
	Certificate       tls.Certificate
}

// NewCA makes an authority named name, its files in t's temporary
// directory.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(Validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("tlstest: make CA: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("tlstest: parse CA: %v", err)
	}
	ca := &CA{cert: cert, key: key, dir: t.TempDir(), Pool: x509.NewCertPool()}
	ca.Pool.AddCert(cert)
	ca.CertFile = ca.write(t, name+"-ca.pem", "CERTIFICATE", der)
	return ca
}

// Server issues a server certificate for 127.0.0.1, ::1 and localhost.
func (ca *CA) Server(t testing.TB, name string) Pair {
	t.Helper()
	return ca.issue(t, name, x509.ExtKeyUsageServerAuth, func(c *x509.Certificate) {
		c.DNSNames = []string{"localhost"}
		c.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	})
}

// Client issues a client certificate whose common name is name.
func (ca *CA) Client(t testing.TB, name string) Pair {
	t.Helper()
	return ca.issue(t, name, x509.ExtKeyUsageClientAuth, func(*x509.Certificate) {})
}

func (ca *CA) issue(t testing.TB, name string, usage x509.ExtKeyUsage, edit func(*x509.Certificate)) Pair {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(Validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	edit(tmpl)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("tlstest: issue %s: %v", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("tlstest: key of %s: %v", name, err)
	}
	p := Pair{
		CertFile: ca.write(t, name+".pem", "CERTIFICATE", der),
		KeyFile:  ca.write(t, name+"-key.pem", "PRIVATE KEY", keyDER),
	}
	p.Certificate, err = tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
	if err != nil {
		t.Fatalf("tlstest: load %s: %v", name, err)
	}
	return p
}

func (ca *CA) write(t testing.TB, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(ca.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	return path
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("tlstest: key: %v", err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("tlstest: serial: %v", err)
	}
	return n
}
