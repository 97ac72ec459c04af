package pgtest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Rejoining an old primary to the new one: following it when its history
// allows, else rewinding it (pg_rewind) or cloning it again.

// Rejoin turns old (typically a former primary) into a standby of primary
// and waits until it streams. old is stopped first (fast) if it runs. It is
// started as a standby (standby.signal, primary_conninfo, following the
// latest timeline); a server whose WAL ends at or before the point where
// primary's timeline branched off simply follows. If old replays WAL that
// primary never had (it diverged, as a primary stopped without a clean
// hand-over usually has), it is stopped, rewound (see Node.Rewinds) and
// started again. With SyncReplication, once it streams it is one of
// primary's synchronous standbys again.
func (c *Cluster) Rejoin(ctx context.Context, old, primary *Node) error {
	if old == primary {
		return fmt.Errorf("pgtest: cannot rejoin %s to itself", old.name)
	}
	if !primary.Running() {
		return fmt.Errorf("%w: cannot rejoin %s to %s", ErrStopped, old.name, primary.name)
	}
	if err := old.Stop(ctx, Fast); err != nil {
		return err
	}
	h, err := primary.history(ctx)
	if err != nil {
		return err
	}
	if err := old.configureStandby(primary); err != nil {
		return err
	}
	if err := old.start(ctx); err != nil {
		return err
	}
	diverged, err := c.followOrDiverge(ctx, old, primary, h)
	if err != nil {
		return err
	}
	if !diverged {
		return c.applySync(primary)
	}
	if err := old.Stop(ctx, Fast); err != nil {
		return err
	}
	return c.rewind(ctx, old, primary)
}

// followGrace bounds how long Rejoin waits for a restarted node to either
// stream from the new primary or show that it diverged. Past it, the node is
// rewound anyway; pg_rewind changes nothing if no rewind is needed (a fresh
// copy replaces what was there).
const followGrace = 10 * time.Second

// followOrDiverge waits until standby r streams from p on p's timeline (it
// returns false) or has replayed WAL that p never had (true).
func (c *Cluster) followOrDiverge(ctx context.Context, r, p *Node, h history) (bool, error) {
	deadline := time.Now().Add(followGrace)
	diverged := false
	what := fmt.Sprintf("waiting for %s to follow %s (timeline %d)", r.name, p.name, h.tli)
	err := r.poll(ctx, what, func(ctx context.Context, conn *pgx.Conn) (bool, error) {
		// Read the replay position before the receiver state: when replay
		// has legitimately passed the branch point, the receiver has
		// already received the new timeline by then.
		var (
			replay *string
			ckTLI  int
		)
		err := conn.QueryRow(ctx,
			"SELECT pg_last_wal_replay_lsn()::text, (SELECT timeline_id FROM pg_control_checkpoint())").
			Scan(&replay, &ckTLI)
		if err != nil {
			return false, err
		}
		streaming, err := streamsFrom(ctx, conn, p, h.tli)
		if err != nil || streaming {
			return streaming, err
		}
		if replay != nil {
			pos, err := parseLSN(*replay)
			if err != nil {
				return false, err
			}
			if h.diverged(ckTLI, pos) {
				diverged = true
				return true, nil
			}
		}
		if time.Now().After(deadline) {
			diverged = true // let pg_rewind decide
			return true, nil
		}
		return false, nil
	})
	return diverged, err
}

// rewind runs pg_rewind on the stopped node n against p (where the binaries
// have no pg_rewind, it copies p's data directory afresh instead), makes n a
// standby of p, starts it and waits until it streams.
func (c *Cluster) rewind(ctx context.Context, n, p *Node) error {
	if !c.bins.rewind {
		n.rewinds.Add(1)
		if err := c.recopy(ctx, n, p); err != nil {
			return err
		}
		if err := n.configureStandby(p); err != nil {
			return err
		}
		if err := n.start(ctx); err != nil {
			return err
		}
		if err := c.waitStreaming(ctx, n, p); err != nil {
			return err
		}
		return c.applySync(p)
	}
	// pg_rewind reads the source's timeline from its control file, which is
	// only current after a checkpoint (see Promote; p may have been promoted
	// by other means).
	if err := p.Exec(ctx, "CHECKPOINT"); err != nil {
		return err
	}
	// pg_rewind runs crash recovery first if n was not shut down cleanly.
	source := fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres", kvQuote(p.sockDir), p.port)
	out, err := c.bins.run(ctx, n.dir, rewindTool, "-D", n.dataDir, "--source-server="+source, "--no-sync")
	n.rewinds.Add(1)
	if err != nil {
		return n.errorf("pg_rewind from %s: %w", p.name, err)
	}
	// pg_rewind copies p's configuration files over n's.
	if err := n.configureStandby(p); err != nil {
		return err
	}
	if err := n.start(ctx); err != nil {
		return fmt.Errorf("%w\n--- pg_rewind output ---\n%s", err, strings.TrimSpace(out))
	}
	if err := c.waitStreaming(ctx, n, p); err != nil {
		return fmt.Errorf("%w\n--- pg_rewind output ---\n%s", err, strings.TrimSpace(out))
	}
	return c.applySync(p)
}
