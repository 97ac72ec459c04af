package kubeapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const kubeconfigYAML = `apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: c1
  cluster:
    server: https://127.0.0.1:6443
    insecure-skip-tls-verify: true
contexts:
- name: dev
  context: {cluster: c1, user: u1, namespace: db}
- name: files
  context: {cluster: c1, user: u2}
- name: plugin
  context: {cluster: c1, user: u3}
- name: lost
  context: {cluster: nowhere, user: u1}
users:
- name: u1
  user: {token: s3cr3t-token}
- name: u2
  user: {tokenFile: token}
- name: u3
  user:
    exec: {command: aws, args: [eks, get-token]}
`

func TestLoadKubeconfig(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "config", kubeconfigYAML)
	write(t, dir, "token", "first-token\n")

	c, err := LoadKubeconfig(path, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Server != "https://127.0.0.1:6443" || c.Namespace != "db" || !c.TLS.InsecureSkipVerify {
		t.Errorf("config %v", c)
	}
	if tok, _ := c.token(); tok != "s3cr3t-token" {
		t.Errorf("token %q", tok)
	}
	if s := c.String(); strings.Contains(s, "s3cr3t") {
		t.Errorf("String shows the token: %s", s)
	}

	// A token file is read again for each request: it rotates.
	c, err = LoadKubeconfig(path, "files")
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, "token", "second-token\n")
	if tok, _ := c.token(); tok != "second-token" {
		t.Errorf("token %q after the file changed, want second-token", tok)
	}

	for ctx, want := range map[string]string{
		"plugin":  `user "u3": exec credential plugins are not supported`,
		"lost":    `cluster "nowhere" of context "lost" not found`,
		"missing": `context "missing" not found`,
	} {
		_, err := LoadKubeconfig(path, ctx)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("context %s: error %v, want one with %q", ctx, err, want)
		}
	}
}

func TestInCluster(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
	if _, err := InCluster(dir, func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "ca.crt") {
		t.Fatalf("error %v, want one naming ca.crt", err)
	}
	write(t, dir, "ca.crt", testCA(t))
	write(t, dir, "token", "sa-token-1")
	write(t, dir, "namespace", "db\n")
	c, err := InCluster(dir, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.Server != "https://10.96.0.1:443" || c.Namespace != "db" || c.TLS.RootCAs == nil || c.TLS.MinVersion != tls.VersionTLS12 {
		t.Errorf("config %v", c)
	}
	write(t, dir, "token", "sa-token-2")
	if tok, _ := c.token(); tok != "sa-token-2" {
		t.Errorf("token %q after rotation", tok)
	}
}

// testCA returns a fresh self-signed certificate in PEM, used as a CA
// bundle only.
func testCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
