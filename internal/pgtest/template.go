package pgtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// The initdb template: initdb runs once per process and server programs'
// directory, and every cluster's first primary is a copy of its result.
// The template is kept in the process's memory, never on disk past its
// making, so nothing of it is left however the process ends: Go runs no
// code at a test binary's exit, so a directory would outlive the process,
// and one directory shared by processes would need them to agree on when
// the last one is done with it. It costs the process about 27 MB of memory
// (a data directory's 39 MB without the zero bytes that end its files).

var (
	// templateMu guards templates; it is held while initdb runs so that
	// concurrent first clusters wait for one initdb instead of racing.
	templateMu sync.Mutex
	templates  = map[string]*template{} // binaries dir -> its template
)

// template is a data directory fresh from initdb, held in memory.
type template struct {
	// entries are in the order filepath.WalkDir visits them: a directory
	// before what it holds.
	entries []templateEntry
}

type templateEntry struct {
	rel  string // path relative to the data directory, "." for itself
	dir  bool
	perm fs.FileMode
	data []byte // a file's contents without the zero bytes that end it
	size int64  // the file's size
}

// templateFor returns the template for b, running initdb on first use in
// this process. The directory initdb wrote is read into memory and
// removed at once; a process killed meanwhile leaves it to the next
// process's sweep.
func templateFor(ctx context.Context, b *binaries) (*template, error) {
	templateMu.Lock()
	defer templateMu.Unlock()
	if t, ok := templates[b.dir]; ok {
		return t, nil
	}
	sweepOnce.Do(sweepStale)
	root, err := os.MkdirTemp(os.TempDir(), fmt.Sprintf("%s%d-template-", dirPrefix, os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("pgtest: template dir: %w", err)
	}
	data, err := makeTemplate(ctx, b, root)
	var t *template
	if err == nil {
		t, err = loadTemplate(data)
	}
	if rerr := os.RemoveAll(root); err == nil && rerr != nil {
		err = fmt.Errorf("pgtest: removing the template's directory: %w", rerr)
	}
	if err != nil {
		return nil, err
	}
	templates[b.dir] = t
	return t, nil
}

// loadTemplate reads the data directory dir into memory.
func loadTemplate(dir string) (*template, error) {
	t := &template{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := templateEntry{rel: rel, dir: d.IsDir(), perm: info.Mode().Perm()}
		switch {
		case d.IsDir():
		case info.Mode().IsRegular():
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			e.size = int64(len(raw))
			e.data = bytes.Clone(bytes.TrimRight(raw, "\x00"))
		default:
			return nil // sockets, pipes: nothing to carry over
		}
		t.entries = append(t.entries, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgtest: reading the template: %w", err)
	}
	return t, nil
}

// writeTo writes the template into the data directory dst, which may exist
// (empty) or not, everything owned by the server user. A file's final zero
// bytes are left to the file system (a hole, read back as zeros).
func (t *template) writeTo(b *binaries, dst string) error {
	for _, e := range t.entries {
		target := filepath.Join(dst, e.rel)
		if e.dir {
			if e.rel == "." {
				if _, err := os.Stat(dst); err == nil {
					continue // made by the caller
				}
			}
			if err := b.mkdirOwned(target, e.perm); err != nil {
				return err
			}
			continue
		}
		f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, e.perm)
		if err != nil {
			return err
		}
		_, err = f.Write(e.data)
		if err == nil && e.size > int64(len(e.data)) {
			err = f.Truncate(e.size)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if err := b.chown(target); err != nil {
			return err
		}
	}
	return nil
}

func makeTemplate(ctx context.Context, b *binaries, root string) (string, error) {
	if err := os.Chmod(root, 0o755); err != nil {
		return "", err
	}
	data := filepath.Join(root, "data")
	if err := b.mkdirOwned(data, 0o700); err != nil {
		return "", err
	}
	if _, err := b.run(ctx, root, "initdb", "-D", data, "-U", "postgres",
		"-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"); err != nil {
		return "", fmt.Errorf("pgtest: initdb: %w", err)
	}
	hba := "# Written by pgtest.\n" +
		"local all all trust\n" +
		"local replication all trust\n" +
		"host replication all 127.0.0.1/32 trust\n" +
		"host all all 127.0.0.1/32 scram-sha-256\n"
	if err := b.writeOwned(filepath.Join(data, "pg_hba.conf"), []byte(hba)); err != nil {
		return "", err
	}
	// Node-specific settings go to pgtest.conf, rewritten for every node.
	// ALTER SYSTEM (postgresql.auto.conf) still overrides them.
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return "", err
	}
	_, err = io.WriteString(f, "\n# Node settings written by pgtest.\ninclude_if_exists = 'pgtest.conf'\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return data, err
}
