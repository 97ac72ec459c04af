package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ErrNoPatroni is returned (wrapped) by NewPatroni when the patroni,
// patronictl or etcd program is not on PATH.
var ErrNoPatroni = errors.New("pgtest: Patroni or etcd not found")

// PatroniOptions configures a Patroni cluster. The zero value is three
// members in synchronous mode with ttl 10 s, loop_wait 1 s and
// retry_timeout 3 s.
type PatroniOptions struct {
	// Members is the number of Patroni members, each running one
	// PostgreSQL server. Zero means 3. Synchronous mode needs at least 2.
	Members int
	// TTL is the leader lock's time to live (Patroni's ttl): how long a
	// leader that vanished keeps the lock. Zero means 10 s.
	TTL time.Duration
	// LoopWait is the pause between two runs of Patroni's HA loop
	// (loop_wait). Zero means 1 s.
	LoopWait time.Duration
	// RetryTimeout bounds DCS and PostgreSQL operations that Patroni
	// retries (retry_timeout). Zero means 3 s.
	RetryTimeout time.Duration
	// Async turns Patroni's synchronous_mode off. By default it is on: the
	// leader names one replica its synchronous standby, commits wait for
	// it, and only that standby may be promoted.
	Async bool
	// Password is the password of the superuser "postgres" for TCP
	// connections (scram-sha-256). Empty means DefaultPassword.
	Password string
	// Zones optionally gives member i the setting pgfailover.zone =
	// Zones[i]. It may be shorter than the number of members, not longer.
	Zones []string
}

// Patroni's timings are whole seconds.
func wholeSeconds(name string, d *time.Duration, def time.Duration) error {
	if *d == 0 {
		*d = def
	}
	if *d < time.Second || *d%time.Second != 0 {
		return fmt.Errorf("pgtest: %s = %v, want a whole number of seconds >= 1s", name, *d)
	}
	return nil
}

func normalizePatroni(o *PatroniOptions) error {
	if o.Members == 0 {
		o.Members = 3
	}
	if o.Members < 0 {
		return fmt.Errorf("pgtest: Members = %d, want >= 1", o.Members)
	}
	if !o.Async && o.Members < 2 {
		return errors.New("pgtest: synchronous mode needs at least 2 members (set Async for one)")
	}
	if err := wholeSeconds("TTL", &o.TTL, 10*time.Second); err != nil {
		return err
	}
	if err := wholeSeconds("LoopWait", &o.LoopWait, time.Second); err != nil {
		return err
	}
	if err := wholeSeconds("RetryTimeout", &o.RetryTimeout, 3*time.Second); err != nil {
		return err
	}
	if o.Password == "" {
		o.Password = DefaultPassword
	}
	if strings.ContainsRune(o.Password, 0) {
		return errors.New("pgtest: password holds a NUL byte")
	}
	if len(o.Zones) > o.Members {
		return fmt.Errorf("pgtest: %d zones for %d members", len(o.Zones), o.Members)
	}
	for _, z := range o.Zones {
		if strings.ContainsAny(z, "\n\r\x00") {
			return fmt.Errorf("pgtest: zone %q holds a line break", z)
		}
	}
	o.Zones = append([]string(nil), o.Zones...)
	return nil
}

// PatroniCluster is a Patroni cluster on loopback: one etcd and
// PatroniOptions.Members Patroni processes, each running its PostgreSQL
// server. Unlike Cluster, the harness does not decide who is primary:
// Patroni does, and Leader, SyncStandby and WaitNewLeader find out.
//
// Its methods are safe for concurrent use, but the drills (Switchover,
// KillLeaderPostmaster, KillLeaderNode, KillMember, RestartMember) should
// not run concurrently with each other.
type PatroniCluster struct {
	opts       PatroniOptions
	bins       *binaries
	tmpl       *template
	template   string // a copy of tmpl in the cluster's directory, for Patroni's bootstrap
	patroni    string // path of the patroni program
	patronictl string // path of the patronictl program
	base       string
	scope      string
	hc         *http.Client
	etcd       *etcd
	members    []*PatroniMember

	closeOnce sync.Once
	closeErr  error
}

// StartPatroni is NewPatroni for tests: it fails the test at once (it never
// skips) if the cluster cannot be started, for example when the patroni or
// etcd-server package is not installed, and closes the cluster when the
// test ends. When the test has failed, the tail of every member's log is
// written to the test log.
func StartPatroni(t testing.TB, opts PatroniOptions) *PatroniCluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pc, err := NewPatroni(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			pc.LogTails(t)
		}
		if err := pc.Close(); err != nil {
			t.Error(err)
		}
	})
	return pc
}

// LogTails writes the end of every member's log, and of etcd's, to t's
// log: what StartPatroni's cleanup shows when the test has failed.
func (pc *PatroniCluster) LogTails(t testing.TB) {
	t.Helper()
	for _, m := range pc.members {
		t.Logf("--- tail of %s log (%s) ---\n%s", m.name, m.logPath, m.LogTail(6000))
	}
	t.Logf("--- tail of etcd log ---\n%s", fileTail(pc.etcd.logPath, 2000, ""))
}

// lookPatroni returns the paths of patroni, patronictl and etcd in PATH.
func lookPatroni() (map[string]string, error) {
	progs := map[string]string{}
	var missing []string
	for _, p := range []string{"patroni", "patronictl", "etcd"} {
		path, err := exec.LookPath(p)
		if err != nil {
			missing = append(missing, p)
			continue
		}
		progs[p] = path
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s not in PATH", ErrNoPatroni, strings.Join(missing, ", "))
	}
	return progs, nil
}

// NewPatroni starts etcd and the Patroni members and returns once the
// cluster is healthy (see WaitHealthy). On error nothing is left running.
// Call Close when done.
//
// The programs patroni, patronictl and etcd are looked up in PATH, and
// installed when missing as EnsurePatroni does; PostgreSQL is found as for
// New, and must come with pg_basebackup and pg_rewind.
func NewPatroni(ctx context.Context, opts PatroniOptions) (*PatroniCluster, error) {
	if err := normalizePatroni(&opts); err != nil {
		return nil, err
	}
	progs, err := EnsurePatroni(ctx, os.Stderr)
	if err != nil {
		return nil, err
	}
	bins, err := cachedBinaries(ctx, "")
	if err != nil {
		return nil, err
	}
	// Patroni makes its replicas and rewinds with the PostgreSQL tools.
	if !bins.basebackup || !bins.rewind {
		return nil, fmt.Errorf("%w: Patroni needs %s and %s beside postgres in %s", ErrNoBinaries, basebackupTool, rewindTool, bins.dir)
	}
	tmpl, err := templateFor(ctx, bins) // sweeps stale directories first
	if err != nil {
		return nil, err
	}

	base, err := os.MkdirTemp(os.TempDir(), fmt.Sprintf("%s%d-patroni-", dirPrefix, os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	// Processes are recognised by their working directory, which the
	// kernel reports with symbolic links resolved.
	if real, err := filepath.EvalSymlinks(base); err == nil {
		base = real
	}
	pc := &PatroniCluster{
		opts:       opts,
		bins:       bins,
		tmpl:       tmpl,
		template:   filepath.Join(base, "template"),
		patroni:    progs["patroni"],
		patronictl: progs["patronictl"],
		base:       base,
		scope:      filepath.Base(base),
		// No keep-alive: no idle connection (and its goroutines) outlives
		// a request.
		hc: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
	}
	if err := pc.setup(ctx, progs["etcd"]); err != nil {
		_ = pc.Close()
		return nil, err
	}
	return pc, nil
}

func (pc *PatroniCluster) setup(ctx context.Context, etcdBin string) error {
	if err := os.Chmod(pc.base, 0o755); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	// The first leader's bootstrap copies it; Close removes it with the rest.
	if err := pc.tmpl.writeTo(pc.bins, pc.template); err != nil {
		return fmt.Errorf("pgtest: writing the template for Patroni: %w", err)
	}
	cport, err := reservePort()
	if err != nil {
		return err
	}
	pport, err := reservePort()
	if err != nil {
		releasePort(cport)
		return err
	}
	pc.etcd = &etcd{
		bin:        etcdBin,
		dir:        filepath.Join(pc.base, "etcd"),
		logPath:    filepath.Join(pc.base, "etcd", "etcd.log"),
		clientPort: cport,
		peerPort:   pport,
	}
	if err := pc.etcd.newMemData(); err != nil {
		return err
	}
	secrets := map[string]string{}
	for _, k := range []string{"replication", "rewind"} {
		s, err := randomSecret()
		if err != nil {
			return err
		}
		secrets[k] = s
	}
	for i := 0; i < pc.opts.Members; i++ {
		m, err := pc.newMember(i)
		if err != nil {
			return err
		}
		pc.members = append(pc.members, m)
		if err := m.writeConfig(secrets); err != nil {
			return err
		}
	}
	if err := pc.etcd.start(ctx, pc.hc, pc.scope); err != nil {
		return err
	}
	for _, m := range pc.members {
		if err := m.startPatroni(ctx); err != nil {
			return err
		}
	}
	return pc.WaitHealthy(ctx)
}

// shellQuote quotes s for Python's shlex.split, which Patroni uses on a
// bootstrap command.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

func randomSecret() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// env is the whole environment of Patroni and patronictl, built from
// scratch so that PATRONI_* and PG* variables of the test environment
// cannot change the configuration.
func (pc *PatroniCluster) env() []string {
	env := []string{
		"PATH=" + pc.bins.dir + ":" + filepath.Dir(pc.patroni) + ":/usr/local/bin:/usr/bin:/bin",
		"HOME=" + pc.bins.home,
		"LC_ALL=C.UTF-8",
		"LANG=C.UTF-8",
	}
	if tz, ok := os.LookupEnv("TZ"); ok {
		env = append(env, "TZ="+tz)
	}
	return env
}

// command prepares patroni or patronictl to run as the server user (the
// postgres system user when the test process is root), in its own process
// group, killed by the kernel if the test process dies.
func (pc *PatroniCluster) command(dir, prog string, args ...string) *exec.Cmd {
	cmd := exec.Command(prog, args...)
	cmd.Dir = dir
	cmd.Env = pc.env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: pc.bins.cred}
	dieWithParent(cmd.SysProcAttr)
	return cmd
}

// Close kills every Patroni process, stops their PostgreSQL servers
// (immediate shutdown, escalating to SIGKILL), kills etcd, waits until none
// of these processes is left and removes the cluster's directories. It is
// safe to call more than once; later calls return the first result.
func (pc *PatroniCluster) Close() error {
	pc.closeOnce.Do(func() {
		// Patroni first, so that it restarts no server meanwhile.
		for _, m := range pc.members {
			m.killPatroni()
		}
		var wg sync.WaitGroup
		for _, m := range pc.members {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m.stopPostgres()
			}()
		}
		wg.Wait()
		var errs []error
		if pc.etcd != nil {
			if err := pc.etcd.stop(); err != nil {
				errs = append(errs, err)
			}
		}
		if left := killUnder(pc.base); len(left) > 0 {
			errs = append(errs, fmt.Errorf("processes %v would not die", left))
		}
		for _, m := range pc.members {
			releasePort(m.pgPort)
			releasePort(m.apiPort)
			if m.shortSock != "" {
				if err := os.RemoveAll(m.shortSock); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if pc.etcd != nil {
			releasePort(pc.etcd.clientPort)
			releasePort(pc.etcd.peerPort)
		}
		if err := os.RemoveAll(pc.base); err != nil {
			errs = append(errs, err)
		}
		pc.hc.CloseIdleConnections()
		if err := errors.Join(errs...); err != nil {
			pc.closeErr = fmt.Errorf("pgtest: close Patroni cluster: %w", err)
		}
	})
	return pc.closeErr
}

// killUnder kills every process working in dir or below, again and again
// until none is left or 10 s have passed, and returns what is left.
func killUnder(dir string) []int {
	var left []int
	pollUntil(10*time.Second, func() bool {
		left = pidsUnder(dir)
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		return len(left) == 0
	})
	return left
}

// Members returns the members in creation order (member0, member1, ...).
func (pc *PatroniCluster) Members() []*PatroniMember {
	return append([]*PatroniMember(nil), pc.members...)
}

// Member returns the member with the given Patroni name, or nil.
func (pc *PatroniCluster) Member(name string) *PatroniMember {
	for _, m := range pc.members {
		if m.name == name {
			return m
		}
	}
	return nil
}

// Password returns the superuser's password.
func (pc *PatroniCluster) Password() string { return pc.opts.Password }

// ConnString returns a multi-host URL over every member's PostgreSQL in
// member order, as the superuser postgres with the cluster's password:
// postgres://postgres:<pw>@127.0.0.1:p0,127.0.0.1:p1,.../postgres?sslmode=disable
// with params (like "target_session_attrs=read-write") appended when not
// empty.
func (pc *PatroniCluster) ConnString(params string) string {
	hosts := make([]string, len(pc.members))
	for i, m := range pc.members {
		hosts[i] = m.Addr()
	}
	return connURL(pc.opts.Password, hosts, params)
}

// APIURLs returns the base URL of every member's REST API
// (http://127.0.0.1:port) in member order.
func (pc *PatroniCluster) APIURLs() []string {
	urls := make([]string, len(pc.members))
	for i, m := range pc.members {
		urls[i] = m.APIURL()
	}
	return urls
}

// Scope returns the Patroni cluster name (scope).
func (pc *PatroniCluster) Scope() string { return pc.scope }
