package pgtest

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Process-wide state. None of it is meant to be replaced by tests; it exists
// because initdb and port allocation are shared by every cluster of a process.
var (
	// binariesMu guards found. No I/O while held.
	binariesMu sync.Mutex
	found      = map[string]*binaries{} // Options.BinDir -> what it resolved to

	// portsMu guards ports, the loopback ports handed to live nodes of this
	// process. No I/O while held.
	portsMu sync.Mutex
	ports   = map[int]bool{}

	sweepOnce sync.Once
)

// dirPrefix starts the name of every directory the harness creates under
// os.TempDir(); the owning process id follows, so leftovers of a process
// that died without Close can be recognised and removed.
const dirPrefix = "pgtest-"

// copyTree copies the data directory src to dst (which must not exist),
// keeping modes and giving everything to the server user. Paths (relative
// to src) for which leave reports true are not copied, nor what is below
// them; leave may be nil. src may be a running server's: a file or
// directory that vanishes during the copy is passed over.
func copyTree(b *binaries, src, dst string, leave func(rel string, dir bool) bool) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if leave != nil && rel != "." && leave(rel, d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if rel == "." {
				if _, err := os.Stat(dst); err == nil {
					return nil // made by the caller
				}
			}
			return b.mkdirOwned(target, info.Mode().Perm())
		case info.Mode().IsRegular():
			err := copyFile(path, target, info.Mode().Perm())
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			return b.chown(target)
		default:
			return nil // sockets, pipes: nothing to carry over
		}
	})
}

func copyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// reservePort picks a free loopback port for a new node. Ports come from
// below the usual ephemeral range (32768-60999 on Linux) so that the source
// port of some outgoing connection cannot take a node's port while the node
// is stopped for a restart.
func reservePort() (int, error) {
	const lo, hi = 15000, 32000
	for range 200 {
		n, err := rand.Int(rand.Reader, big.NewInt(hi-lo))
		if err != nil {
			return 0, err
		}
		p := lo + int(n.Int64())
		portsMu.Lock()
		taken := ports[p]
		if !taken {
			ports[p] = true
		}
		portsMu.Unlock()
		if taken {
			continue
		}
		if portFree(p) {
			return p, nil
		}
		releasePort(p)
	}
	return 0, fmt.Errorf("pgtest: no free loopback port found")
}

func releasePort(p int) {
	portsMu.Lock()
	delete(ports, p)
	portsMu.Unlock()
}

func portFree(p int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// sweepStale removes directories left under os.TempDir() (and etcd's data
// under memDir) by processes that died without Close (a test binary killed
// by -timeout, say), after killing any server still running from them.
func sweepStale() {
	sweepStaleIn(os.TempDir())
	if m := memDir(); m != "" {
		sweepStaleIn(m)
	}
}

func sweepStaleIn(tmp string) {
	if real, err := filepath.EvalSymlinks(tmp); err == nil {
		tmp = real // serverPIDs compares resolved paths
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, dirPrefix) {
			continue
		}
		rest := strings.TrimPrefix(name, dirPrefix)
		pidStr, _, ok := strings.Cut(rest, "-")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 || pid == os.Getpid() || pidAlive(pid) {
			continue
		}
		dir := filepath.Join(tmp, name)
		if fi, err := os.Stat(dir); err != nil || !ownedByUs(fi) {
			continue
		}
		dataDirs, _ := filepath.Glob(filepath.Join(dir, "*", "data"))
		for _, d := range dataDirs {
			killServer(d)
		}
		// Anything else working below it: Patroni, its helpers, etcd.
		killUnder(dir)
		_ = os.RemoveAll(dir)
	}
}

func ownedByUs(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}

// killServer kills every process still working in dataDir.
func killServer(dataDir string) {
	for _, p := range serverPIDs(dataDir) {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	pollUntil(5*time.Second, func() bool { return len(serverPIDs(dataDir)) == 0 })
}

// confValue quotes a value for postgresql.conf.
func confValue(v string) string {
	v = strings.ReplaceAll(v, `\`, `\\`)
	return "'" + strings.ReplaceAll(v, "'", "''") + "'"
}

// sqlLiteral quotes s as an SQL string literal. With a backslash in s it
// writes an escape string (E'...'), which reads the same whatever
// standard_conforming_strings says.
func sqlLiteral(s string) string {
	q := "'" + strings.ReplaceAll(s, "'", "''") + "'"
	if strings.Contains(s, `\`) {
		q = "E'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", "''") + "'"
	}
	return q
}

// validSettingName accepts the characters PostgreSQL allows in a setting
// name, including the dot of placeholder settings like pgfailover.zone.
func validSettingName(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if !(r == '_' || r == '.' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// renderConf produces postgresql.conf lines for the settings, sorted by name.
func renderConf(settings map[string]string) string {
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "%s = %s\n", k, confValue(settings[k]))
	}
	return sb.String()
}

// setAutoConf sets (or, with an empty value, removes) settings in
// postgresql.auto.conf of a stopped server, the file ALTER SYSTEM writes.
func setAutoConf(b *binaries, dataDir string, settings map[string]string) error {
	path := filepath.Join(dataDir, "postgresql.auto.conf")
	raw, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	var lines []string
	for _, line := range strings.Split(string(raw), "\n") {
		key, _, _ := strings.Cut(line, "=")
		if _, ok := settings[strings.TrimSpace(key)]; ok {
			continue
		}
		if line != "" {
			lines = append(lines, line)
		}
	}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v := settings[k]; v != "" {
			lines = append(lines, k+" = "+confValue(v))
		}
	}
	return b.writeOwned(path, []byte(strings.Join(lines, "\n")+"\n"))
}

// scramVerifier computes the SCRAM-SHA-256 verifier PostgreSQL stores for a
// password. Setting the verifier instead of the password keeps the clear
// password out of server logs.
func scramVerifier(password string) (string, error) {
	const iterations = 4096
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	salted, err := pbkdf2.Key(sha256.New, password, salt, iterations, sha256.Size)
	if err != nil {
		return "", err
	}
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	storedKey := sha256.Sum256(clientKey)
	serverKey := mac(salted, "Server Key")
	enc := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iterations, enc(salt), enc(storedKey[:]), enc(serverKey)), nil
}

// setPassword gives the postgres role its password. The statement carries a
// SCRAM verifier, not the password, and does not wait for a synchronous
// standby (there is none yet).
func (c *Cluster) setPassword(ctx context.Context, p *Node) error {
	secret := c.opts.Password
	if isPrintableASCII(secret) {
		v, err := scramVerifier(secret)
		if err != nil {
			return fmt.Errorf("pgtest: %w", err)
		}
		secret = v
	}
	// Built by hand: ALTER ROLE takes no parameters.
	sql := "SET synchronous_commit = local; ALTER ROLE postgres PASSWORD " + sqlLiteral(secret)
	if err := p.Exec(ctx, sql); err != nil {
		// Only the SQLSTATE: a syntax error would quote the statement.
		if ctx.Err() != nil {
			return p.errorf("setting the password: %w", ctx.Err())
		}
		code := "no SQLSTATE"
		if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
			code = "SQLSTATE " + pgErr.Code
		}
		return p.errorf("setting the password failed (%s)", code)
	}
	return nil
}

func isPrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
