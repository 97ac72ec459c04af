package pgtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// etcd is the single-member etcd that a PatroniCluster uses as its DCS. It
// runs as the test process's own user, on loopback ports, with its log in
// the cluster directory and its data in memory where it can (see
// newMemData).
type etcd struct {
	bin     string
	dir     string // working directory; holds etcd.log, and data/ without memData
	logPath string
	// memData is a directory on a memory file system holding data/, or "";
	// stop removes it.
	memData    string
	clientPort int
	peerPort   int
	proc       *process // set by start, never changed afterwards
}

// newMemData puts etcd's data on a memory file system (/dev/shm) where there
// is one, under a name the sweep recognises. On a disk, every write etcd
// commits waits for an fdatasync of its log, and on a disk shared with
// other tests' writes that took over a second at times ("slow fdatasync"
// in etcd's log): longer than Patroni gives etcd while it starts (see
// waitWritable). Nothing of a test cluster need survive a crash of the
// machine (PostgreSQL runs with fsync=off too). The cost is memory: etcd
// preallocates its log in files of 64 MB.
func (e *etcd) newMemData() error {
	m := memDir()
	if m == "" {
		return nil
	}
	d, err := os.MkdirTemp(m, fmt.Sprintf("%s%d-etcd-", dirPrefix, os.Getpid()))
	if err != nil {
		return fmt.Errorf("pgtest: etcd: %w", err)
	}
	e.memData = d
	return nil
}

// dataDir returns etcd's data directory, which etcd creates.
func (e *etcd) dataDir() string {
	if e.memData != "" {
		return filepath.Join(e.memData, "data")
	}
	return filepath.Join(e.dir, "data")
}

// endpoint returns the client address "127.0.0.1:port".
func (e *etcd) endpoint() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(e.clientPort))
}

// start launches etcd and waits until it reports itself healthy.
func (e *etcd) start(ctx context.Context, hc *http.Client, token string) error {
	if err := os.Mkdir(e.dir, 0o700); err != nil {
		return fmt.Errorf("pgtest: etcd: %w", err)
	}
	logf, err := os.OpenFile(e.logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("pgtest: etcd: log file: %w", err)
	}
	client := "http://" + e.endpoint()
	peer := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(e.peerPort))
	cmd := exec.Command(e.bin,
		"--name", "etcd0",
		"--data-dir", e.dataDir(),
		"--listen-client-urls", client,
		"--advertise-client-urls", client,
		"--listen-peer-urls", peer,
		"--initial-advertise-peer-urls", peer,
		"--initial-cluster", "etcd0="+peer,
		"--initial-cluster-state", "new",
		"--initial-cluster-token", token,
		// One member elects itself; no need to wait the default second.
		"--heartbeat-interval", "25",
		"--election-timeout", "250",
		"--logger", "zap",
		"--log-outputs", "stderr",
	)
	cmd.Dir = e.dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + e.dir, "LC_ALL=C"}
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dieWithParent(cmd.SysProcAttr)
	err = cmd.Start()
	_ = logf.Close()
	if err != nil {
		return fmt.Errorf("pgtest: etcd: start %s: %w", e.bin, err)
	}
	p := &process{cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	e.proc = p
	return e.waitHealthy(ctx, hc)
}

// waitHealthy polls GET /health until etcd answers {"health":"true"}.
func (e *etcd) waitHealthy(ctx context.Context, hc *http.Client) error {
	var last error
	for {
		if e.proc.exited() {
			return e.errorf("etcd exited at start (%v)", e.proc.cmd.ProcessState)
		}
		ok, err := e.healthy(ctx, hc)
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		if err := Sleep(ctx, 20*time.Millisecond); err != nil {
			return e.errorf("waiting for etcd to be healthy: %w (last error: %v)", err, last)
		}
	}
}

func (e *etcd) healthy(ctx context.Context, hc *http.Client) (bool, error) {
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, "http://"+e.endpoint()+"/health", nil)
	if err != nil {
		return false, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return false, err
	}
	var h struct {
		Health string `json:"health"`
	}
	if err := json.Unmarshal(body, &h); err != nil {
		return false, fmt.Errorf("GET /health: %d %q: %w", resp.StatusCode, body, err)
	}
	return resp.StatusCode == http.StatusOK && h.Health == "true", nil
}

// stop kills etcd, waits until it has exited and removes memData.
func (e *etcd) stop() error {
	if e.proc != nil {
		_ = syscall.Kill(-e.proc.pid, syscall.SIGKILL)
		<-e.proc.done
		waitGroupGone(e.proc.pid, 2*time.Second)
	}
	if e.memData == "" {
		return nil
	}
	return os.RemoveAll(e.memData)
}

// errorf builds an error carrying the tail of etcd's log.
func (e *etcd) errorf(format string, args ...any) error {
	return &nodeError{node: "etcd", err: fmt.Errorf(format, args...), log: fileTail(e.logPath, 3000, "")}
}

// fileTail returns up to the last size bytes of the file at path, starting
// at a line boundary, with secret (when at least 6 bytes long) masked.
func fileTail(path string, size int, secret string) string {
	if size <= 0 {
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(fi.Size()-int64(size), 0)
	buf := make([]byte, fi.Size()-off)
	nr, _ := f.ReadAt(buf, off)
	s := string(buf[:nr])
	if off > 0 {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	if len(secret) >= 6 {
		s = strings.ReplaceAll(s, secret, "********")
	}
	return s
}

// waitWritable waits until etcd grants a lease within bound, and returns an
// error carrying etcd's log when ctx ends first or etcd exits.
//
// A lease is the first thing a starting Patroni asks of etcd, and the one
// thing it does not wait for: Patroni 3.0.2 waits as long as it takes when
// etcd cannot be reached, but when etcd is slow to grant its lease (each
// request may take retry_timeout/3 with one etcd member, 1 s by default),
// EtcdConnectionFailed ("No more machines in the cluster") escapes from
// create_lease and Patroni exits with status 1 before its REST API
// listens. So a Patroni may start only while etcd commits writes promptly.
// The probe's lease, granted for etcd's shortest TTL and given no key,
// expires by itself.
func (e *etcd) waitWritable(ctx context.Context, hc *http.Client, bound time.Duration) error {
	var last error
	for {
		if e.proc.exited() {
			return e.errorf("etcd exited (%v)", e.proc.cmd.ProcessState)
		}
		err := e.grantLease(ctx, hc, bound)
		if err == nil {
			return nil
		}
		last = err
		if err := Sleep(ctx, 20*time.Millisecond); err != nil {
			return e.errorf("waiting for etcd to grant a lease within %v, as a starting Patroni needs: %w (last: %v)",
				bound, err, last)
		}
	}
}

// grantLease asks etcd for a lease and fails unless it is granted within
// timeout.
func (e *etcd) grantLease(ctx context.Context, hc *http.Client, timeout time.Duration) error {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, "http://"+e.endpoint()+"/v3/lease/grant",
		strings.NewReader(`{"TTL":1}`))
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return err
	}
	var r struct {
		ID string `json:"ID"`
	}
	if err := json.Unmarshal(body, &r); err != nil || resp.StatusCode != http.StatusOK || r.ID == "" {
		return fmt.Errorf("POST /v3/lease/grant: %d %q", resp.StatusCode, body)
	}
	return nil
}
