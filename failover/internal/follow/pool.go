package follow

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/failover/internal/hostpool"
	"github.com/pgfailover/pgfailover/hosthealth"
)

// Walk is the choice of a host for one new connection, made by the
// caller's own failover rules: the same call the Pool makes for its
// statements, with its budget and backoff.
type Walk interface {
	// Pick returns the host for the next attempt, waiting while none
	// can take it, or the error that ends the connect.
	Pick() (*hostpool.Host, error)
	// Failed settles an attempt on h that gave no session (err says
	// whether the server was reached). It returns the error that ends
	// the connect when the walk's budget is spent, nil to go on.
	Failed(h *hostpool.Host, err *ConnectError) error
	// Connected ends the walk: a session is ready.
	Connected()
}

// Config says where a following pool's connections go.
type Config struct {
	Set *hostpool.Set
	// Base is the pool's configuration (pool_* settings and the user's
	// hooks); New copies it.
	Base *pgxpool.Config
	// Target is the roles a connection's server may be in.
	Target hosthealth.Target
	// ReadOnly makes every session read-only
	// (default_transaction_read_only).
	ReadOnly bool
	// Rounds is how many times the chain lists every host after the one
	// chosen first (failover_max_attempts).
	Rounds int
	// Start begins the walk of one connect; ctx is the acquiring
	// caller's, which pgxpool ends only when the pool closes.
	Start func(ctx context.Context) Walk
	// OK decides whether an idle connection may be handed out.
	OK func(*pgx.Conn) bool
}

// Pool holds a genuine *pgxpool.Pool whose new connections follow the
// Pool's routes, and what it needs to be reset when a host its
// connections go to is demoted.
type Pool struct {
	PgxPool *pgxpool.Pool

	set    *hostpool.Set
	target hosthealth.Target
	rounds int

	// mu guards hosts. No I/O while held (Reset only marks connections;
	// it closes idle ones in the background).
	mu sync.Mutex
	// hosts are the addresses the pool has connected to since its last
	// Reset: the hosts some of its connections may still point at.
	hosts map[string]bool
}

// New builds a following pool. Creating a pgxpool connects nothing
// (pool_min_conns connects in the background).
func New(cfg Config) (*Pool, error) {
	f := &Pool{set: cfg.Set, target: cfg.Target, rounds: cfg.Rounds, hosts: make(map[string]bool)}
	pc := cfg.Base.Copy()
	pc.ConnConfig.ValidateConnect = nil // set for each connection below
	if cfg.ReadOnly {
		pc.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	}
	userBeforeConnect := pc.BeforeConnect
	pc.BeforeConnect = func(ctx context.Context, cc *pgx.ConnConfig) error {
		// cc is this connection's own copy of the config: the chain points
		// it at the chosen host, and at the others should that one refuse.
		if err := f.newConnectChain(cfg.Start(ctx), cc); err != nil {
			return err
		}
		if userBeforeConnect != nil {
			return userBeforeConnect(ctx, cc)
		}
		return nil
	}
	pool, err := cfg.Set.NewPgxPool(pc, cfg.OK)
	if err != nil {
		return nil, err
	}
	f.PgxPool = pool
	return f, nil
}

// connected records that the pool has a connection to addr.
func (f *Pool) connected(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hosts[addr] = true
}

// Demoted resets the pool when it may hold connections to addr, a host
// just found in a role the target does not accept. A nil Pool (never
// built) does nothing.
func (f *Pool) Demoted(addr string) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.hosts[addr] {
		return
	}
	clear(f.hosts)
	f.PgxPool.Reset()
}
