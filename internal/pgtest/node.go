package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// StopMode says how Node.Stop ends a server.
type StopMode int

const (
	// Fast sends SIGINT: clients are disconnected (57P01), a shutdown
	// checkpoint is written and streamed to connected standbys.
	Fast StopMode = iota
	// Immediate sends SIGQUIT: no checkpoint; crash recovery at next start.
	Immediate
	// Crash sends SIGKILL to the postmaster alone; its children notice and
	// exit on their own, as after a real postmaster crash.
	Crash
	// Smart sends SIGTERM: the server refuses new connections (57P03,
	// "the database system is shutting down") and stops once every
	// session has ended, so Stop waits for them.
	Smart
)

// String returns the mode's name.
func (m StopMode) String() string {
	switch m {
	case Fast:
		return "fast"
	case Immediate:
		return "immediate"
	case Crash:
		return "crash"
	case Smart:
		return "smart"
	}
	return "StopMode(" + strconv.Itoa(int(m)) + ")"
}

func (m StopMode) signal() syscall.Signal {
	switch m {
	case Immediate:
		return syscall.SIGQUIT
	case Crash:
		return syscall.SIGKILL
	case Smart:
		return syscall.SIGTERM
	}
	return syscall.SIGINT
}

// ErrRunning is returned by Node.Start when the server already runs, and by
// operations that need a stopped server.
var ErrRunning = errors.New("pgtest: server is running")

// ErrStopped is returned by operations that need a running server.
var ErrStopped = errors.New("pgtest: server is not running")

// Node is one PostgreSQL server of a Cluster. Its port and data directory
// stay the same for the life of the cluster.
type Node struct {
	c       *Cluster
	name    string
	port    int
	zone    string
	dir     string // node directory: data/, sock/, postgres.log
	dataDir string
	sockDir string
	logPath string
	// shortSock is a directory under /tmp holding sockDir when the node
	// directory is too deep for a Unix socket path; removed by Close.
	shortSock string
	// frozen is set by Freeze and cleared by Thaw.
	frozen atomic.Bool

	// mu guards proc. No I/O while held.
	mu      sync.Mutex
	proc    *process // nil when stopped
	lastPID int      // pid of the most recent postmaster

	rewinds atomic.Int32 // how often this node was rewound (see Rewinds)

	// follows is the node this one streams from as the harness set it up,
	// nil for a primary; syncNames is the synchronous_standby_names last
	// written to its pgtest.conf. Both are guarded by c.mu (see
	// syncrep.go).
	follows   *Node
	syncNames string
}

// process is one run of a postmaster.
type process struct {
	cmd  *exec.Cmd
	pid  int
	done chan struct{} // closed once the postmaster has exited and been reaped
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Name returns the node's name: node0, node1, ...
func (n *Node) Name() string { return n.name }

// Port returns the node's TCP port on 127.0.0.1.
func (n *Node) Port() int { return n.port }

// Addr returns "127.0.0.1:port".
func (n *Node) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)) }

// Zone returns the node's pgfailover.zone setting ("" when unset).
func (n *Node) Zone() string { return n.zone }

// DataDir returns the node's data directory.
func (n *Node) DataDir() string { return n.dataDir }

// LogPath returns the file that receives the server's log output.
func (n *Node) LogPath() string { return n.logPath }

// String returns the node's name and address.
func (n *Node) String() string { return n.name + "@" + n.Addr() }

// ConnString returns a URL for this node alone as the superuser postgres
// with the cluster's password, over TCP with sslmode=disable. params (like
// "connect_timeout=2&application_name=x") are appended when not empty.
func (n *Node) ConnString(params string) string {
	return connURL(n.c.opts.Password, []string{n.Addr()}, params)
}

func connURL(password string, hosts []string, params string) string {
	u := "postgres://" + url.UserPassword("postgres", password).String() + "@" +
		strings.Join(hosts, ",") + "/postgres?sslmode=disable"
	if params = strings.TrimLeft(params, "?&"); params != "" {
		u += "&" + params
	}
	return u
}

// adminConnString connects through the node's Unix socket, where the
// postgres user is trusted; the harness uses it for its own work.
func (n *Node) adminConnString() string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres sslmode=disable connect_timeout=10",
		kvQuote(n.sockDir), n.port)
}

func kvQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// Connect opens a connection to the node as the superuser (over the Unix
// socket, no password needed). The caller closes it.
func (n *Node) Connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, n.adminConnString())
	if err != nil {
		return nil, n.errorf("connect: %w", err)
	}
	return conn, nil
}

// Exec runs sql (one or more statements, simple protocol) as the superuser
// on a fresh connection to this node.
func (n *Node) Exec(ctx context.Context, sql string) error {
	conn, err := pgconn.Connect(ctx, n.adminConnString())
	if err != nil {
		return n.errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql).ReadAll(); err != nil {
		return fmt.Errorf("pgtest: %s: %w", n.name, err)
	}
	return nil
}

// queryRow runs a one-row query on a fresh connection and scans it.
func (n *Node) queryRow(ctx context.Context, sql string, dest ...any) error {
	conn, err := n.Connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(ctx, sql).Scan(dest...); err != nil {
		return fmt.Errorf("pgtest: %s: %w", n.name, err)
	}
	return nil
}

// InRecovery reports pg_is_in_recovery() of the node: true on a standby.
func (n *Node) InRecovery(ctx context.Context) (bool, error) {
	var r bool
	err := n.queryRow(ctx, "SELECT pg_is_in_recovery()", &r)
	return r, err
}

// PauseReplay pauses WAL replay on a standby (pg_wal_replay_pause()). WAL
// keeps arriving but is not applied until ResumeReplay, so the standby lags
// on demand. Promoting a paused standby ends the pause. A paused standby
// cannot switch to a new primary (Repoint, Failover, Switchover) until
// replay resumes.
func (n *Node) PauseReplay(ctx context.Context) error {
	return n.Exec(ctx, "SELECT pg_wal_replay_pause()")
}

// ResumeReplay resumes WAL replay on a standby (pg_wal_replay_resume()).
func (n *Node) ResumeReplay(ctx context.Context) error {
	return n.Exec(ctx, "SELECT pg_wal_replay_resume()")
}

// Running reports whether the node's postmaster is running.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc != nil && !n.proc.exited()
}

// Start starts the stopped server again on the same port and data
// directory and waits until it accepts connections, as a primary or (when
// it is configured as one) as a hot standby.
func (n *Node) Start(ctx context.Context) error {
	return n.start(ctx)
}

// errPortBusy means the server exited at start because its port was taken.
var errPortBusy = errors.New("port already in use")

func (n *Node) start(ctx context.Context) error {
	n.mu.Lock()
	if n.proc != nil && !n.proc.exited() {
		n.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrRunning, n.name)
	}
	n.mu.Unlock()
	// A previous run that ended on its own (or by Crash) may have left its
	// pid file and shared memory; it is gone now, so clear them.
	n.clearStale()

	logf, err := os.OpenFile(n.logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("pgtest: %s: log file: %w", n.name, err)
	}
	cmd := n.c.bins.command(n.dir, "postgres", "-D", n.dataDir, "-c", "port="+strconv.Itoa(n.port))
	// An *os.File is handed to the child as is: no copying goroutine.
	cmd.Stdout = logf
	cmd.Stderr = logf
	err = cmd.Start()
	_ = logf.Close()
	if err != nil {
		return fmt.Errorf("pgtest: %s: start postgres: %w", n.name, err)
	}
	p := &process{cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	n.mu.Lock()
	n.proc = p
	n.lastPID = p.pid
	n.mu.Unlock()

	if err := n.waitReady(ctx, p); err != nil {
		n.kill(p)
		return err
	}
	return nil
}

// waitReady polls until the server accepts a connection.
func (n *Node) waitReady(ctx context.Context, p *process) error {
	for {
		if p.exited() {
			if !portFree(n.port) {
				return n.errorf("postgres exited at start: %w", errPortBusy)
			}
			return n.errorf("postgres exited at start (%v)", p.cmd.ProcessState)
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgconn.Connect(cctx, n.adminConnString())
		cancel()
		if err == nil {
			_ = conn.Close(context.Background())
			return nil
		}
		if err := Sleep(ctx, 10*time.Millisecond); err != nil {
			return n.errorf("waiting for the server to accept connections: %w", err)
		}
	}
}

// Stop ends the server with the given mode and waits until the postmaster
// and all its children have exited (after Crash, the children exit on their
// own once they notice; any still there after 10 s are killed). A stale
// postmaster.pid and shared memory segment are removed. Stopping a stopped
// node does nothing. If ctx ends first, every process of the server is
// killed and ctx's error returned.
func (n *Node) Stop(ctx context.Context, mode StopMode) error {
	n.mu.Lock()
	p := n.proc
	n.mu.Unlock()
	if p == nil {
		return nil
	}
	// A stopped process would hold the signal until it is continued.
	_ = n.Thaw()
	if !p.exited() {
		_ = syscall.Kill(p.pid, mode.signal())
	}
	var err error
	select {
	case <-p.done:
	case <-ctx.Done():
		err = n.errorf("stop (%s): %w", mode, ctx.Err())
	}
	n.kill(p)
	return err
}

// kill makes sure run p is over: unless the postmaster has already exited,
// it kills it and every other process of the server, waits until none is
// left, removes what a killed server leaves behind and forgets the run.
func (n *Node) kill(p *process) {
	if !p.exited() {
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		for _, pid := range serverPIDs(n.dataDir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		<-p.done
	}
	// Children of a killed postmaster exit shortly after noticing; wait for
	// them so that a restart does not find them attached to shared memory.
	n.waitGone(p.pid, 10*time.Second)
	n.mu.Lock()
	if n.proc == p {
		n.proc = nil
	}
	n.mu.Unlock()
	n.clearStale()
}

// waitGone waits until no process of the server remains (postmaster pid,
// its process group, any process working in the data directory). After
// grace it kills what is left.
func (n *Node) waitGone(pid int, grace time.Duration) bool {
	gone := func() bool { return !groupAlive(pid) && len(serverPIDs(n.dataDir)) == 0 }
	if pollUntil(grace, gone) {
		return true
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	for _, pid := range serverPIDs(n.dataDir) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return pollUntil(5*time.Second, gone)
}

// clearStale removes postmaster.pid and the server's System V shared memory
// segment if a server that is no longer running left them behind.
func (n *Node) clearStale() {
	pidFile := filepath.Join(n.dataDir, "postmaster.pid")
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		return
	}
	if len(serverPIDs(n.dataDir)) > 0 {
		return // a server still runs here (or its last processes linger)
	}
	lines := strings.Split(string(raw), "\n")
	if pid, err := strconv.Atoi(strings.TrimSpace(lines[0])); err == nil && pid > 0 && groupAlive(pid) {
		return
	}
	// Line 7 holds "<shm key> <shm id>".
	if len(lines) >= 7 {
		if f := strings.Fields(lines[6]); len(f) == 2 {
			if id, err := strconv.Atoi(f[1]); err == nil && id >= 0 {
				removeSysVShm(id)
			}
		}
	}
	_ = os.Remove(pidFile)
}

// LogTail returns up to the last size bytes of the server log, from the
// start of a line, with the cluster's password masked. The harness never
// sends a printable ASCII password in clear text (see setPassword), so the
// mask matters only for others; a password shorter than six bytes is left
// as it is, as masking it would mask ordinary words.
func (n *Node) LogTail(size int) string {
	return fileTail(n.logPath, size, n.c.opts.Password)
}

// errorf builds an error naming the node and carrying the tail of its log.
func (n *Node) errorf(format string, args ...any) error {
	return &nodeError{node: n.name, err: fmt.Errorf(format, args...), log: n.LogTail(3000)}
}

type nodeError struct {
	node string
	err  error
	log  string
}

func (e *nodeError) Error() string {
	s := "pgtest: " + e.node + ": " + e.err.Error()
	if e.log != "" {
		s += "\n--- tail of " + e.node + " log ---\n" + strings.TrimRight(e.log, "\n")
	}
	return s
}

func (e *nodeError) Unwrap() error { return e.err }

// Sleep waits d, or until ctx ends, and returns ctx's error if it did.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// pid returns the process id of the node's current or last postmaster (0
// if it never ran). Tests use it to check that no process is left.
func (n *Node) pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		return n.lastPID
	}
	return n.proc.pid
}

// Rewinds returns how many times the harness rewound this node: ran
// pg_rewind on it or, where the binaries have no pg_rewind, replaced its
// data directory with a fresh copy of the primary's.
func (n *Node) Rewinds() int { return int(n.rewinds.Load()) }
