package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// PatroniMember is one member of a PatroniCluster: a Patroni process and
// the PostgreSQL server it runs. Its name, ports and directories stay the
// same for the life of the cluster.
type PatroniMember struct {
	pc         *PatroniCluster
	name       string
	zone       string
	pgPort     int
	apiPort    int
	dir        string // member directory: patroni.yml, patroni.log, pgpass, data/
	dataDir    string
	sockDir    string
	configPath string
	logPath    string // Patroni's output and that of its PostgreSQL
	// shortSock is a directory under /tmp holding sockDir when the member
	// directory is too deep for a Unix socket path; removed by Close.
	shortSock string

	// mu guards proc. No I/O while held.
	mu   sync.Mutex
	proc *process // the Patroni process; nil before the first start
}

// Name returns the member's Patroni name: member0, member1, ...
func (m *PatroniMember) Name() string { return m.name }

// Port returns the TCP port of the member's PostgreSQL on 127.0.0.1.
func (m *PatroniMember) Port() int { return m.pgPort }

// Addr returns "127.0.0.1:port" of the member's PostgreSQL.
func (m *PatroniMember) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(m.pgPort))
}

// APIURL returns the base URL of the member's Patroni REST API,
// http://127.0.0.1:port.
func (m *PatroniMember) APIURL() string {
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(m.apiPort))
}

// Zone returns the member's pgfailover.zone setting ("" when unset).
func (m *PatroniMember) Zone() string { return m.zone }

// DataDir returns the member's PostgreSQL data directory.
func (m *PatroniMember) DataDir() string { return m.dataDir }

// LogPath returns the file that receives the output of Patroni and of the
// PostgreSQL server it runs.
func (m *PatroniMember) LogPath() string { return m.logPath }

// String returns the member's name and PostgreSQL address.
func (m *PatroniMember) String() string { return m.name + "@" + m.Addr() }

// ConnString returns a URL for this member's PostgreSQL alone as the
// superuser postgres with the cluster's password, over TCP with
// sslmode=disable. params are appended when not empty.
func (m *PatroniMember) ConnString(params string) string {
	return connURL(m.pc.opts.Password, []string{m.Addr()}, params)
}

// adminConnString connects through the member's Unix socket, where the
// postgres user is trusted; the harness uses it for its own work.
func (m *PatroniMember) adminConnString() string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres sslmode=disable connect_timeout=2",
		kvQuote(m.sockDir), m.pgPort)
}

// Exec runs sql (one or more statements, simple protocol) as the superuser
// on a fresh connection to this member's PostgreSQL.
func (m *PatroniMember) Exec(ctx context.Context, sql string) error {
	conn, err := pgconn.Connect(ctx, m.adminConnString())
	if err != nil {
		return fmt.Errorf("pgtest: %s: connect: %w", m.name, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql).ReadAll(); err != nil {
		return fmt.Errorf("pgtest: %s: %w", m.name, err)
	}
	return nil
}

// QueryRow runs a one-row query as the superuser on a fresh connection to
// this member's PostgreSQL and scans the row into dest.
func (m *PatroniMember) QueryRow(ctx context.Context, sql string, dest ...any) error {
	conn, err := pgx.Connect(ctx, m.adminConnString())
	if err != nil {
		return fmt.Errorf("pgtest: %s: connect: %w", m.name, err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(ctx, sql).Scan(dest...); err != nil {
		return fmt.Errorf("pgtest: %s: %w", m.name, err)
	}
	return nil
}

// InRecovery reports pg_is_in_recovery() of the member's PostgreSQL: true
// on a replica. This is the server's own word, which wins over the role
// Patroni reports.
func (m *PatroniMember) InRecovery(ctx context.Context) (bool, error) {
	var r bool
	err := m.QueryRow(ctx, "SELECT pg_is_in_recovery()", &r)
	return r, err
}

// Running reports whether the member's Patroni process runs. Its
// PostgreSQL may be down meanwhile (KillLeaderPostmaster).
func (m *PatroniMember) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc != nil && !m.proc.exited()
}

// dcsWait bounds how long startPatroni waits for etcd to take writes
// promptly before it gives up.
const dcsWait = 30 * time.Second

// startPatroni starts the member's Patroni process once etcd grants a
// lease within half the time Patroni gives a request (retry_timeout/3 with
// one etcd member): see etcd.waitWritable for why Patroni exits at start
// otherwise. It does not wait for Patroni itself.
func (m *PatroniMember) startPatroni(ctx context.Context) error {
	m.mu.Lock()
	running := m.proc != nil && !m.proc.exited()
	m.mu.Unlock()
	if running {
		return fmt.Errorf("%w: Patroni of %s", ErrRunning, m.name)
	}
	wctx, cancel := context.WithTimeout(ctx, dcsWait)
	defer cancel()
	if err := m.pc.etcd.waitWritable(wctx, m.pc.hc, m.pc.opts.RetryTimeout/6); err != nil {
		return fmt.Errorf("pgtest: %s: Patroni not started: %w", m.name, err)
	}
	logf, err := os.OpenFile(m.logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("pgtest: %s: log file: %w", m.name, err)
	}
	cmd := m.pc.command(m.dir, m.pc.patroni, m.configPath)
	cmd.Stdout = logf
	cmd.Stderr = logf
	err = cmd.Start()
	_ = logf.Close()
	if err != nil {
		return fmt.Errorf("pgtest: %s: start %s: %w", m.name, m.pc.patroni, err)
	}
	p := &process{cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	m.mu.Lock()
	m.proc = p
	m.mu.Unlock()
	return nil
}

// killPatroni kills the member's Patroni process (and anything left in its
// process group) and waits until it has exited. Its PostgreSQL keeps
// running: Patroni starts it in a session of its own.
func (m *PatroniMember) killPatroni() {
	m.mu.Lock()
	p := m.proc
	m.mu.Unlock()
	if p == nil {
		return
	}
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	<-p.done
	waitGroupGone(p.pid, 2*time.Second)
}

// postmasterPID returns the pid in the member's postmaster.pid, or 0 when
// there is none.
func (m *PatroniMember) postmasterPID() int {
	raw, err := os.ReadFile(filepath.Join(m.dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// livePostmaster returns the pid in the member's postmaster.pid if that
// process still works in the data directory (so it is this member's
// postmaster, not a process that reused the pid), or 0.
func (m *PatroniMember) livePostmaster() int {
	pid := m.postmasterPID()
	if pid == 0 {
		return 0
	}
	for _, p := range serverPIDs(m.dataDir) {
		if p == pid {
			return pid
		}
	}
	return 0
}

// shmID returns the System V shared memory id in the member's
// postmaster.pid, or -1.
func (m *PatroniMember) shmID() int {
	raw, err := os.ReadFile(filepath.Join(m.dataDir, "postmaster.pid"))
	if err != nil {
		return -1
	}
	lines := strings.Split(string(raw), "\n")
	if len(lines) >= 7 {
		if f := strings.Fields(lines[6]); len(f) == 2 {
			if id, err := strconv.Atoi(f[1]); err == nil {
				return id
			}
		}
	}
	return -1
}

// stopPostgres ends the member's PostgreSQL with an immediate shutdown,
// which removes its shared memory, and kills whatever is left after 5 s.
// Patroni must not run.
func (m *PatroniMember) stopPostgres() {
	shm := m.shmID()
	if pid := m.livePostmaster(); pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGQUIT)
	}
	if pollUntil(5*time.Second, func() bool { return len(pidsUnder(m.dir)) == 0 }) {
		return
	}
	killUnder(m.dir)
	if shm >= 0 {
		removeSysVShm(shm)
	}
}

// kill kills the member as a node failure would: Patroni, then every
// process of its PostgreSQL, all with SIGKILL. It returns without waiting
// for the orphaned postmaster to be reaped.
func (m *PatroniMember) kill() {
	m.killPatroni()
	for _, pid := range pidsUnder(m.dir) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	killUnder(m.dir)
}

// LogTail returns up to the last size bytes of the member's log (Patroni's
// output and that of its PostgreSQL), with the password masked.
func (m *PatroniMember) LogTail(size int) string {
	return fileTail(m.logPath, size, m.pc.opts.Password)
}

// errorf builds an error naming the member and carrying the tail of its
// log.
func (m *PatroniMember) errorf(format string, args ...any) error {
	return &nodeError{node: m.name, err: fmt.Errorf(format, args...), log: m.LogTail(3000)}
}
