package pgtest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Timelines and WAL positions: what decides whether a server can follow a
// new primary or has to be rewound first.

// timeline returns the current timeline of the primary p.
func (p *Node) timeline(ctx context.Context) (int, error) {
	var walfile string
	if err := p.queryRow(ctx, "SELECT pg_walfile_name(pg_current_wal_lsn())", &walfile); err != nil {
		return 0, err
	}
	if len(walfile) < 8 {
		return 0, fmt.Errorf("pgtest: %s: unexpected WAL file name %q", p.name, walfile)
	}
	tli, err := strconv.ParseUint(walfile[:8], 16, 32)
	if err != nil {
		return 0, fmt.Errorf("pgtest: %s: WAL file name %q: %w", p.name, walfile, err)
	}
	return int(tli), nil
}

// history describes the primary p's current timeline: its number, its
// parent (0 on timeline 1) and, for each ancestor timeline, the LSN where
// it ended and the next one began. A server that stopped on ancestor
// timeline t with no WAL past branch[t] can follow p; one with more WAL has
// diverged and must be rewound.
type history struct {
	tli    int
	parent int
	branch map[int]uint64
}

func (p *Node) history(ctx context.Context) (history, error) {
	tli, err := p.timeline(ctx)
	if err != nil || tli == 1 {
		return history{tli: tli}, err
	}
	var text string
	if err := p.queryRow(ctx, fmt.Sprintf("SELECT pg_read_file('pg_wal/%08X.history')", tli), &text); err != nil {
		return history{}, err
	}
	h := history{tli: tli, branch: map[int]uint64{}}
	// Lines: "<timeline>\t<LSN where it ended>\t<reason>", oldest first.
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		t, err1 := strconv.Atoi(f[0])
		lsn, err2 := parseLSN(f[1])
		if err1 != nil || err2 != nil {
			return history{}, fmt.Errorf("pgtest: %s: unexpected timeline history line %q", p.name, line)
		}
		h.branch[t] = lsn
		h.parent = t
	}
	return h, nil
}

// diverged reports whether a server on timeline t whose WAL reaches pos
// holds WAL that the primary of h never had.
func (h history) diverged(t int, pos uint64) bool {
	if t == h.tli {
		return false
	}
	end, ok := h.branch[t]
	return !ok || pos > end
}

// parseLSN parses PostgreSQL's "XXXXXXXX/XXXXXXXX" notation.
func parseLSN(s string) (uint64, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("bad LSN %q", s)
	}
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad LSN %q", s)
	}
	return h<<32 | l, nil
}

func formatLSN(v uint64) string { return fmt.Sprintf("%X/%X", v>>32, uint32(v)) }
