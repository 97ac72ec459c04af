package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// APIServer is a throwaway kube-apiserver on 127.0.0.1, with an etcd of
// its own, both child processes of the test and stopped by Close. It
// authenticates with static tokens: an administrator's, and a user's
// that the harness grants only what a Source needs (see SourceRole).
// No controller, scheduler or kubelet runs: pods are stored but never
// started, and the test writes their status, as the kubelet would.
//
// Its methods are safe for concurrent use.
type APIServer struct {
	dir        string
	bin        string
	etcdPort   int
	port       int
	adminToken string
	userToken  string
	http       *http.Client

	mu   sync.Mutex // guards the fields below
	etcd *exec.Cmd
	kube *exec.Cmd
}

// SourceUser is the user name of the token in Kubeconfig: a user with
// only the permissions of SourceRole.
const SourceUser = "pgfailover"

// StartAPIServer starts an API server for the test and stops it when the
// test ends. It fails the test when the server cannot start.
func StartAPIServer(t testing.TB) *APIServer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a first run builds the binary
	defer cancel()
	a, err := NewAPIServer(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

// NewAPIServer starts an API server with its files under dir, building
// the kube-apiserver binary first if it is not cached (see
// APIServerBinary). Close stops it.
func NewAPIServer(ctx context.Context, dir string) (*APIServer, error) {
	bin, err := APIServerBinary(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := exec.LookPath("etcd"); err != nil {
		return nil, fmt.Errorf("kubetest: etcd is not installed (Debian's package etcd-server): %w", err)
	}
	a := &APIServer{dir: dir, bin: bin, adminToken: randomHex(), userToken: randomHex()}
	if a.etcdPort, err = freePort(); err != nil {
		return nil, err
	}
	if a.port, err = freePort(); err != nil {
		return nil, err
	}
	if err := a.writeFiles(); err != nil {
		return nil, err
	}
	if err := a.startEtcd(ctx); err != nil {
		a.Close()
		return nil, err
	}
	if err := a.Start(ctx); err != nil {
		a.Close()
		return nil, err
	}
	if err := a.setUp(ctx); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

func randomHex() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("kubetest: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// writeFiles writes the token file and the service account key.
func (a *APIServer) writeFiles() error {
	tokens := fmt.Sprintf("%s,admin,1,\"system:masters\"\n%s,%s,2\n", a.adminToken, a.userToken, SourceUser)
	if err := os.WriteFile(filepath.Join(a.dir, "tokens.csv"), []byte(tokens), 0o600); err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	der := x509.MarshalPKCS1PrivateKey(key)
	if err := os.WriteFile(filepath.Join(a.dir, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	a.http = &http.Client{Transport: &http.Transport{
		// The server's certificate is made up at its start.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a test server on loopback
	}}
	return nil
}

func (a *APIServer) startEtcd(ctx context.Context) error {
	peer, err := freePort()
	if err != nil {
		return err
	}
	client := "http://127.0.0.1:" + strconv.Itoa(a.etcdPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peer)
	cmd := exec.Command("etcd",
		"--name", "kube", "--data-dir", filepath.Join(a.dir, "etcd"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "kube="+peerURL,
		"--heartbeat-interval", "25", "--election-timeout", "250")
	if err := a.startProc(cmd, "etcd.log"); err != nil {
		return err
	}
	a.mu.Lock()
	a.etcd = cmd
	a.mu.Unlock()
	return a.waitHTTP(ctx, client+"/health", "etcd", false)
}

func (a *APIServer) startProc(cmd *exec.Cmd, logName string) error {
	logf, err := os.OpenFile(filepath.Join(a.dir, logName), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("kubetest: starting %s: %w", filepath.Base(cmd.Path), err)
	}
	return nil
}

// waitHTTP polls url until it answers 200, within a minute.
func (a *APIServer) waitHTTP(ctx context.Context, url, what string, auth bool) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if auth {
			req.Header.Set("Authorization", "Bearer "+a.adminToken)
		}
		if resp, err := a.http.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubetest: %s did not become ready (its log is in %s)", what, a.dir)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Start starts the API server again after Stop (NewAPIServer starts it
// the first time), on the same port and etcd, and waits until it is
// ready. Watches a Source held before the stop resume from there.
func (a *APIServer) Start(ctx context.Context) error {
	cmd := exec.Command(a.bin,
		"--etcd-servers", "http://127.0.0.1:"+strconv.Itoa(a.etcdPort),
		"--bind-address", "127.0.0.1",
		"--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(a.port),
		"--cert-dir", filepath.Join(a.dir, "certs"),
		"--token-auth-file", filepath.Join(a.dir, "tokens.csv"),
		"--service-account-key-file", filepath.Join(a.dir, "sa.key"),
		"--service-account-signing-key-file", filepath.Join(a.dir, "sa.key"),
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-cluster-ip-range", "10.96.0.0/24",
		"--authorization-mode", "RBAC",
	)
	if err := a.startProc(cmd, "kube-apiserver.log"); err != nil {
		return err
	}
	a.mu.Lock()
	a.kube = cmd
	a.mu.Unlock()
	return a.waitHTTP(ctx, a.URL()+"/readyz", "kube-apiserver", true)
}

// Stop stops the API server (etcd keeps running): clients' connections
// and watches drop and new ones are refused until Start.
func (a *APIServer) Stop() {
	a.mu.Lock()
	cmd := a.kube
	a.kube = nil
	a.mu.Unlock()
	stop(cmd)
}

func stop(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// Close stops the API server and etcd.
func (a *APIServer) Close() {
	a.Stop()
	a.mu.Lock()
	e := a.etcd
	a.etcd = nil
	a.mu.Unlock()
	stop(e)
	if a.http != nil {
		a.http.CloseIdleConnections()
	}
}

// URL returns the server's base URL, https://127.0.0.1:port.
func (a *APIServer) URL() string { return "https://127.0.0.1:" + strconv.Itoa(a.port) }

// Kubeconfig writes a kubeconfig file for the SourceUser, whose namespace
// is namespace, and returns its path.
func (a *APIServer) Kubeconfig(namespace string) (string, error) {
	return a.kubeconfig(namespace, a.userToken, "source")
}

// AdminKubeconfig writes a kubeconfig file for an administrator and
// returns its path.
func (a *APIServer) AdminKubeconfig() (string, error) {
	return a.kubeconfig("default", a.adminToken, "admin")
}

func (a *APIServer) kubeconfig(namespace, token, name string) (string, error) {
	if _, err := os.Stat(filepath.Join(a.dir, "certs", "apiserver.crt")); err != nil {
		return "", fmt.Errorf("kubetest: the server's certificate: %w", err)
	}
	path := filepath.Join(a.dir, name+".kubeconfig")
	body := fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: test
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority: certs/apiserver.crt
    tls-server-name: kubernetes.default.svc
contexts:
- name: test
  context: {cluster: test, user: %s, namespace: %s}
users:
- name: %s
  user: {tokenFile: %s.token}
`, a.URL(), name, namespace, name, name)
	if err := os.WriteFile(filepath.Join(a.dir, name+".token"), []byte(token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("kubetest: %w", err)
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		return "", fmt.Errorf("kubetest: %w", err)
	}
	return path, nil
}

// Do sends a request as the administrator: method to path (such as
// /api/v1/namespaces), with body encoded as JSON (as a merge patch for
// PATCH) unless nil, and decodes the answer into out unless nil. An
// answer other than 2xx is an error quoting the server's message.
func (a *APIServer) Do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("kubetest: %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.URL()+path, rd)
	if err != nil {
		return fmt.Errorf("kubetest: %s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+a.adminToken)
	req.Header.Set("Content-Type", "application/json")
	if method == http.MethodPatch {
		req.Header.Set("Content-Type", "application/merge-patch+json")
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return fmt.Errorf("kubetest: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("kubetest: %s %s: %s: %s", method, path, resp.Status, tail(string(b), 500))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("kubetest: %s %s: decoding the answer: %w", method, path, err)
		}
	}
	return nil
}

// Requests returns how many requests the server has served for a
// resource ("pods", "clusters"), by verb (LIST, WATCH, GET, ...), read
// from its metrics (apiserver_request_total; a watch counts once it
// ends), and how many watches of it are open now (the server holds one
// of pods of its own).
func (a *APIServer) Requests(ctx context.Context, resource string) (byVerb map[string]int, openWatches int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.URL()+"/metrics", nil)
	if err != nil {
		return nil, 0, fmt.Errorf("kubetest: /metrics: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+a.adminToken)
	resp, err := a.http.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("kubetest: /metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, 0, fmt.Errorf("kubetest: /metrics: %w", err)
	}
	byVerb = map[string]int{}
	res := `resource="` + resource + `"`
	for _, line := range strings.Split(string(body), "\n") {
		total := strings.HasPrefix(line, "apiserver_request_total{")
		open := strings.HasPrefix(line, "apiserver_longrunning_requests{")
		if (!total && !open) || !strings.Contains(line, res) || !strings.Contains(line, `subresource=""`) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		n, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		verb := line[strings.Index(line, `verb="`)+6:]
		verb = verb[:strings.IndexByte(verb, '"')]
		if total {
			byVerb[verb] += int(n)
		} else if verb == "WATCH" {
			openWatches += int(n)
		}
	}
	return byVerb, openWatches, nil
}

// ServiceAccountDir writes what a pod's service account mount holds
// (token, ca.crt, namespace) for SourceUser in namespace, into a
// directory of its own, and returns it with the environment a pod gets
// (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT): the in-cluster
// credentials, for a test that has no pod.
func (a *APIServer) ServiceAccountDir(namespace string) (dir string, env map[string]string, err error) {
	dir = filepath.Join(a.dir, "serviceaccount-"+namespace)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, fmt.Errorf("kubetest: %w", err)
	}
	ca, err := os.ReadFile(filepath.Join(a.dir, "certs", "apiserver.crt"))
	if err != nil {
		return "", nil, fmt.Errorf("kubetest: the server's certificate: %w", err)
	}
	for name, body := range map[string]string{"token": a.userToken, "ca.crt": string(ca), "namespace": namespace} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			return "", nil, fmt.Errorf("kubetest: %w", err)
		}
	}
	return dir, map[string]string{"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": strconv.Itoa(a.port)}, nil
}
