package kubeapi

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Config says where the API server is and how to authenticate to it.
type Config struct {
	// Server is the API server's base URL, https://host:port.
	Server string
	// Namespace is the namespace of the kubeconfig context, or the pod's
	// own in a cluster; "" when neither says.
	Namespace string
	// TLS verifies the server and holds a client certificate if any.
	TLS *tls.Config

	// token returns the bearer token for the next request, "" for none.
	// A token file is read again on every call, so a rotated token is
	// picked up (the kubelet rewrites a projected service account token
	// well before it expires).
	token func() (string, error)
	// user and password are sent as basic authentication when set.
	user, password string
	// origin names where the config came from, for errors.
	origin string
}

// String describes the config without its credentials.
func (c *Config) String() string {
	return fmt.Sprintf("kubeapi.Config{Server: %q, Namespace: %q, from %s}", c.Server, c.Namespace, c.origin)
}

// GoString is String, for %#v.
func (c *Config) GoString() string { return c.String() }

// The files a pod's service account is mounted as.
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// Load finds the credentials the way kubectl and client-go do, minus
// their plugins: from the kubeconfig file at path when path is set; else
// in the cluster when KUBERNETES_SERVICE_HOST is set; else from the first
// file $KUBECONFIG lists, or ~/.kube/config. context picks a kubeconfig
// context other than the current one.
func Load(path, context string) (*Config, error) {
	if path != "" {
		return LoadKubeconfig(path, context)
	}
	if os.Getenv("KUBERNETES_SERVICE_HOST") != "" && context == "" {
		return InCluster(ServiceAccountDir, os.Getenv)
	}
	if env := os.Getenv("KUBECONFIG"); env != "" {
		for _, p := range filepath.SplitList(env) {
			if p != "" {
				return LoadKubeconfig(p, context)
			}
		}
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return nil, errors.New("kubeapi: no kubeconfig: KUBERNETES_SERVICE_HOST and KUBECONFIG are unset and the home directory is unknown")
	}
	return LoadKubeconfig(filepath.Join(home, ".kube", "config"), context)
}

// InCluster reads the pod's service account from dir (ServiceAccountDir
// in a pod) and the API server's address from KUBERNETES_SERVICE_HOST and
// KUBERNETES_SERVICE_PORT, as getenv returns them.
func InCluster(dir string, getenv func(string) string) (*Config, error) {
	host, port := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, errors.New("kubeapi: in-cluster: KUBERNETES_SERVICE_HOST or KUBERNETES_SERVICE_PORT is unset")
	}
	c := &Config{Server: "https://" + net.JoinHostPort(host, port), origin: "the service account in " + dir}
	caPath := filepath.Join(dir, "ca.crt")
	pem, err := os.ReadFile(caPath)
	if err != nil {
		return nil, fmt.Errorf("kubeapi: in-cluster: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("kubeapi: in-cluster: %s holds no PEM certificate", caPath)
	}
	c.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	c.token = tokenFile(filepath.Join(dir, "token"))
	if _, err := c.token(); err != nil {
		return nil, fmt.Errorf("kubeapi: in-cluster: %w", err)
	}
	if ns, err := os.ReadFile(filepath.Join(dir, "namespace")); err == nil {
		c.Namespace = strings.TrimSpace(string(ns))
	}
	return c, nil
}

// tokenFile returns a token function that reads path on each call.
func tokenFile(path string) func() (string, error) {
	return func() (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("token file: %w", err) // the path, never the token
		}
		t := strings.TrimSpace(string(b))
		if t == "" {
			return "", fmt.Errorf("token file %s is empty", path)
		}
		return t, nil
	}
}

// kubeconfig is the part of a kubeconfig file this package reads.
type kubeconfig struct {
	CurrentContext string `yaml:"current-context"`
	Clusters       []struct {
		Name    string `yaml:"name"`
		Cluster struct {
			Server                   string `yaml:"server"`
			CertificateAuthority     string `yaml:"certificate-authority"`
			CertificateAuthorityData string `yaml:"certificate-authority-data"`
			InsecureSkipTLSVerify    bool   `yaml:"insecure-skip-tls-verify"`
			TLSServerName            string `yaml:"tls-server-name"`
		} `yaml:"cluster"`
	} `yaml:"clusters"`
	Users []struct {
		Name string `yaml:"name"`
		User struct {
			Token                 string    `yaml:"token"`
			TokenFile             string    `yaml:"tokenFile"`
			ClientCertificate     string    `yaml:"client-certificate"`
			ClientCertificateData string    `yaml:"client-certificate-data"`
			ClientKey             string    `yaml:"client-key"`
			ClientKeyData         string    `yaml:"client-key-data"`
			Username              string    `yaml:"username"`
			Password              string    `yaml:"password"`
			Exec                  yaml.Node `yaml:"exec"`
			AuthProvider          yaml.Node `yaml:"auth-provider"`
		} `yaml:"user"`
	} `yaml:"users"`
	Contexts []struct {
		Name    string `yaml:"name"`
		Context struct {
			Cluster   string `yaml:"cluster"`
			User      string `yaml:"user"`
			Namespace string `yaml:"namespace"`
		} `yaml:"context"`
	} `yaml:"contexts"`
}

// LoadKubeconfig reads the kubeconfig file at path and returns the
// credentials of context, or of its current context when context is "".
// Tokens, token files, client certificates and basic authentication are
// supported; exec and auth-provider plugins are not, and are refused
// naming the user entry. Relative file names are read from path's
// directory.
func LoadKubeconfig(path, context string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kubeapi: kubeconfig: %w", err)
	}
	var kc kubeconfig
	if err := yaml.Unmarshal(b, &kc); err != nil {
		// yaml's errors quote lines by number only, not their text.
		return nil, fmt.Errorf("kubeapi: kubeconfig %s: %w", path, err)
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("kubeapi: kubeconfig %s: "+format, append([]any{path}, args...)...)
	}
	dir := filepath.Dir(path)
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	if context == "" {
		context = kc.CurrentContext
	}
	if context == "" {
		return nil, fail("current-context is unset and no context was named")
	}
	ci := -1
	for i, c := range kc.Contexts {
		if c.Name == context {
			ci = i
		}
	}
	if ci < 0 {
		return nil, fail("context %q not found", context)
	}
	ctx := kc.Contexts[ci].Context
	cfg := &Config{Namespace: ctx.Namespace, origin: "kubeconfig " + path + ", context " + context}
	found := false
	for _, cl := range kc.Clusters {
		if cl.Name != ctx.Cluster {
			continue
		}
		found = true
		c := cl.Cluster
		u, err := url.Parse(c.Server)
		if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			return nil, fail("cluster %q: server %q is not an http or https URL", cl.Name, c.Server)
		}
		cfg.Server = strings.TrimSuffix(c.Server, "/")
		cfg.TLS = &tls.Config{ServerName: c.TLSServerName, InsecureSkipVerify: c.InsecureSkipTLSVerify, MinVersion: tls.VersionTLS12} //nolint:gosec // the user's own setting
		pem, err := dataOrFile(c.CertificateAuthorityData, rel(c.CertificateAuthority))
		if err != nil {
			return nil, fail("cluster %q: certificate-authority: %v", cl.Name, err)
		}
		if pem != nil {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fail("cluster %q: certificate-authority holds no PEM certificate", cl.Name)
			}
			cfg.TLS.RootCAs = pool
		}
	}
	if !found {
		return nil, fail("cluster %q of context %q not found", ctx.Cluster, context)
	}
	found = false
	for _, us := range kc.Users {
		if us.Name != ctx.User {
			continue
		}
		found = true
		u := us.User
		switch {
		case !u.Exec.IsZero():
			return nil, fail("user %q: exec credential plugins are not supported; give a token, tokenFile or client certificate", us.Name)
		case !u.AuthProvider.IsZero():
			return nil, fail("user %q: auth-provider plugins are not supported; give a token, tokenFile or client certificate", us.Name)
		}
		switch {
		case u.TokenFile != "":
			cfg.token = tokenFile(rel(u.TokenFile))
			if _, err := cfg.token(); err != nil {
				return nil, fail("user %q: %v", us.Name, err)
			}
		case u.Token != "":
			tok := u.Token
			cfg.token = func() (string, error) { return tok, nil }
		}
		cfg.user, cfg.password = u.Username, u.Password
		certPEM, err := dataOrFile(u.ClientCertificateData, rel(u.ClientCertificate))
		if err != nil {
			return nil, fail("user %q: client-certificate: %v", us.Name, err)
		}
		keyPEM, err := dataOrFile(u.ClientKeyData, rel(u.ClientKey))
		if err != nil {
			return nil, fail("user %q: client-key: %v", us.Name, err)
		}
		if (certPEM == nil) != (keyPEM == nil) {
			return nil, fail("user %q: a client certificate needs both client-certificate and client-key", us.Name)
		}
		if certPEM != nil {
			pair, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				// tls's errors describe the PEM blocks, never their bytes.
				return nil, fail("user %q: client certificate: %v", us.Name, err)
			}
			cfg.TLS.Certificates = []tls.Certificate{pair}
		}
	}
	if !found && ctx.User != "" {
		return nil, fail("user %q of context %q not found", ctx.User, context)
	}
	return cfg, nil
}

// dataOrFile returns the decoded base64 data when set, else the file's
// contents when a file is named, else nil.
func dataOrFile(data, file string) ([]byte, error) {
	if data != "" {
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(data))
		if err != nil {
			return nil, errors.New("the -data value is not base64")
		}
		return b, nil
	}
	if file == "" {
		return nil, nil
	}
	return os.ReadFile(file)
}
