package pgtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"path/filepath"
	"time"
)

// serverTLS is a throwaway certificate authority and one server
// certificate it signed, for "localhost" and 127.0.0.1, that every server of
// a cluster started with Options.TLS presents.
type serverTLS struct {
	roots   *x509.CertPool
	certPEM []byte
	keyPEM  []byte
}

func newServerTLS() (*serverTLS, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "pgtest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	return &serverTLS{
		roots:   roots,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// writeFiles writes the server's certificate and key into dataDir, owned by
// the server's user with mode 0600 (the server refuses a key others can
// read), and returns the settings that turn TLS on with them.
func (s *serverTLS) writeFiles(b *binaries, dataDir string) (map[string]string, error) {
	for name, data := range map[string][]byte{"server.crt": s.certPEM, "server.key": s.keyPEM} {
		if err := b.writeOwned(filepath.Join(dataDir, name), data); err != nil {
			return nil, fmt.Errorf("pgtest: writing %s: %w", name, err)
		}
	}
	return map[string]string{"ssl": "on", "ssl_cert_file": "server.crt", "ssl_key_file": "server.key"}, nil
}

// RootCAs returns the pool holding the certificate authority that signed the
// servers' certificate (for "localhost" and 127.0.0.1), or nil when the
// cluster was started without Options.TLS.
func (c *Cluster) RootCAs() *x509.CertPool {
	if c.tls == nil {
		return nil
	}
	return c.tls.roots
}
