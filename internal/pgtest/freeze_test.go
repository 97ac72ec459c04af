package pgtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestFreeze freezes a primary: every server process is stopped, an open
// session and a new connection get no answer, and after Thaw both work.
// A frozen server is still stopped by Close (Start's cleanup) at once.
func TestFreeze(t *testing.T) {
	skipUnderShort(t)
	t.Parallel()
	ctx := testCtx(t)
	c := Start(t, Options{})
	p := c.Primary()
	open := connect(t, ctx, p.ConnString(""))

	if err := p.Freeze(); err != nil {
		t.Fatal(err)
	}
	if !p.Frozen() {
		t.Error("Frozen() = false after Freeze")
	}
	pids := append(serverPIDs(p.DataDir()), p.pid())
	for _, pid := range pids {
		if !procStopped(pid) {
			t.Errorf("server process %d is not stopped", pid)
		}
	}
	if len(pids) < 3 {
		t.Errorf("found %d server processes, want the postmaster, its helpers and the open session", len(pids))
	}
	// The query is sent, nothing answers; the deadline ends the wait. An
	// answer would mean a process still ran.
	qctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := open.Exec(qctx, "SELECT 1")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("query on a frozen server: %v, want the deadline", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	conn, err := pgx.Connect(cctx, p.ConnString(""))
	cancel()
	if err == nil {
		conn.Close(ctx)
		t.Error("connected to a frozen server")
	}

	if err := p.Thaw(); err != nil {
		t.Fatal(err)
	}
	if p.Frozen() {
		t.Error("Frozen() = true after Thaw")
	}
	fresh := connect(t, ctx, p.ConnString(""))
	if _, err := fresh.Exec(ctx, "SELECT 1"); err != nil {
		t.Errorf("query after Thaw: %v", err)
	}

	// Frozen again and left so: Stop thaws it and stops it cleanly.
	if err := p.Freeze(); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := p.Stop(sctx, Fast); err != nil {
		t.Fatalf("Stop of a frozen server: %v", err)
	}
	if p.Frozen() || p.Running() {
		t.Errorf("after Stop: frozen %v, running %v", p.Frozen(), p.Running())
	}
	if err := p.Freeze(); !errors.Is(err, ErrStopped) {
		t.Errorf("Freeze of a stopped server: %v, want ErrStopped", err)
	}
}
