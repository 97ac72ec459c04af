package stdlib

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	pgxstdlib "github.com/jackc/pgx/v5/stdlib"

	"github.com/pgfailover/pgfailover/failover"
	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/backoff"
	"github.com/pgfailover/pgfailover/internal/flight"
	"github.com/pgfailover/pgfailover/internal/outcome"
)

// DriverName is the name the driver is registered under.
const DriverName = "pgfailover"

// init registers the driver. House rule: no init(). The exception is
// database/sql's own design: a driver name must be registered before
// sql.Open("pgfailover", dsn) is called, and tools configured by a DSN
// alone can only import the package for that side effect, as they do for
// pgx's stdlib.
func init() {
	sql.Register(DriverName, Driver{})
}

// OpenDB returns a *sql.DB whose connections come from pool.PgxPool(): new
// connections go to the best host for the Pool's target. Like pgx's
// stdlib.OpenDBFromPool it sets the DB's idle connections to 0, so that
// every connection goes back to the pgxpool between uses and passes its
// checks again. Closing the DB does not close pool.
func OpenDB(pool *failover.Pool) *sql.DB {
	db := sql.OpenDB(connector(pool))
	db.SetMaxIdleConns(0)
	return db
}

// OpenReaderDB returns a *sql.DB for reads, over pool.Reader().PgxPool():
// read-only sessions, each connection on a fresh-enough replica (same zone
// first) or, while none is, the primary. Routing is per connection (see
// Reader.PgxPool), not per statement: read-your-writes (pin_after_write,
// replica_wait) and causal tokens do not apply, so a statement may run on
// a replica that has not yet replayed a write the Pool just made. Read
// your own writes through pool.Reader(), or through the DB that made
// them. A statement that writes fails. Closing the DB does not close
// pool.
func OpenReaderDB(pool *failover.Pool) *sql.DB {
	db := sql.OpenDB(newConnector(pool, pool.Reader().PgxPool(), hosthealth.TargetAny))
	db.SetMaxIdleConns(0)
	return db
}

// connector returns a connector over pool's PgxPool whose connections
// carry the Pool's statement-level semantics (see Conn).
func connector(pool *failover.Pool) driver.Connector {
	return newConnector(pool, pool.PgxPool(), pool.Config().Target)
}

// newConnector returns a connector over pp, one of pool's following
// pgxpools, whose servers must be in a role target accepts.
func newConnector(pool *failover.Pool, pp *pgxpool.Pool, target hosthealth.Target) driver.Connector {
	cfg := pool.Config()
	return &poolConnector{
		inner:    pgxstdlib.GetPoolConnector(pp),
		usable:   pp.Config().PrepareConn,
		target:   target,
		attempts: cfg.MaxAttempts,
		// The Pool's failover_backoff_initial and failover_backoff_max, on
		// the wall clock. That is the clock of every Pool this package is
		// handed: a Pool runs on another one only in package failover's
		// own tests, which cannot import this package; passing the clock
		// itself would take an exported hook on Pool.
		backoff: backoff.Policy{Initial: cfg.BackoffInitial, Max: cfg.BackoffMax},
	}
}

// poolConnector wraps each of pgx's connections in a Conn.
type poolConnector struct {
	inner driver.Connector
	// usable is the check pgxpool runs before it hands out an idle
	// connection (the peek, the role, the host's state, and the user's
	// own PrepareConn); Conn runs it again before database/sql reuses one.
	usable func(context.Context, *pgx.Conn) (bool, error)
	target hosthealth.Target

	// The Pool's failover_max_attempts bounds the connects of one Connect,
	// and its backoff (failover_backoff_*, on the wall clock) spaces them.
	attempts int
	backoff  backoff.Policy
}

// Connect takes a connection from the PgxPool. A new connection refused by
// its host (unreachable, shutting down, in the wrong role) is tried again
// after a backoff, as the Pool's own calls are: by then the Pool has
// learnt of the failover, and the next connection goes to another host or
// waits for one. Nothing was sent; database/sql would return the error to
// the caller rather than ask again.
func (c *poolConnector) Connect(ctx context.Context) (driver.Conn, error) {
	var waits *backoff.Waits
	for attempt := 1; ; attempt++ {
		dc, err := c.inner.Connect(ctx)
		if err == nil {
			return &Conn{pgxConn: dc.(*pgxstdlib.Conn), usable: c.usable, target: c.target}, nil
		}
		if !c.again(ctx, err, attempt) {
			return nil, err
		}
		if waits == nil {
			waits = c.backoff.Start()
		}
		if waits.Wait(ctx, nil) != nil {
			return nil, err
		}
	}
}

// again reports whether a connect that failed with err, the attempt-th,
// is tried again: outcome.Decide's verdict on a connect refused by its
// host (a *pgconn.ConnectError: nothing was sent), with attempts the
// connector's own budget.
func (c *poolConnector) again(ctx context.Context, err error, attempt int) bool {
	if _, ok := errors.AsType[*pgconn.ConnectError](err); !ok {
		return false
	}
	f, _ := outcome.Describe(err, outcome.Connect, outcome.Idempotent, c.target)
	f.CallerDone = outcome.CallerDone(ctx)
	f.Attempts, f.MaxAttempts, f.TimeLeft = attempt-1, c.attempts, attempt < c.attempts
	return outcome.Decide(f).Verdict == outcome.TryNext
}

func (c *poolConnector) Driver() driver.Driver { return Driver{} }

// Driver is the database/sql driver registered as "pgfailover". It opens
// connectors only: sql.Open calls OpenConnector once per *sql.DB.
type Driver struct{}

var _ driver.DriverContext = Driver{}

// errOpen is what Open returns: a connection of its own would need a Pool
// of its own.
var errOpen = errors.New("pgfailover: open the driver with sql.Open(\"pgfailover\", dsn) or stdlib.OpenDB")

// Open is not supported; database/sql uses OpenConnector.
func (Driver) Open(string) (driver.Conn, error) { return nil, errOpen }

// OpenConnector parses name, a connection string with failover.ParseConfig's
// keys, and returns a connector that creates the Pool on its first
// Connect. Parse errors never contain the password.
func (Driver) OpenConnector(name string) (driver.Connector, error) {
	cfg, err := failover.ParseConfig(name)
	if err != nil {
		return nil, err
	}
	return &dsnConnector{cfg: cfg}, nil
}

// dsnConnector creates one failover.Pool for its *sql.DB, on first use, and
// closes it when database/sql closes the DB.
type dsnConnector struct {
	cfg *failover.Config

	// closing is set by Close; every statement of the connections reads
	// it, without mu (see Conn.ended).
	closing atomic.Bool

	// creation is the Pool's creation in flight, which every Connect
	// that finds no Pool shares.
	creation flight.Group[driver.Connector]

	// mu guards the fields below. No I/O while held: the Pool is created
	// outside it.
	mu     sync.Mutex
	pool   *failover.Pool
	inner  driver.Connector // the connector over pool's PgxPool (connector)
	closed bool
	// held counts the connections handed to database/sql and not yet
	// closed, and the Connects in flight.
	held int
	// poolClosed is closed when the Pool's Close, begun by Close, is over;
	// nil until then.
	poolClosed chan struct{}
}

var _ interface {
	driver.Connector
	Close() error
} = (*dsnConnector)(nil)

// Connect returns a connection from the Pool, creating the Pool first if
// this is the DB's first connection. A failed creation is tried again by
// the next Connect.
func (c *dsnConnector) Connect(ctx context.Context) (driver.Conn, error) {
	inner, err := c.connector(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, failover.ErrClosed
	}
	c.held++
	c.mu.Unlock()
	dc, err := inner.Connect(ctx)
	if err != nil {
		c.release()
		return nil, err
	}
	cn := dc.(*Conn)
	cn.owner = c
	return cn, nil
}

// release counts a connection (or a failed Connect) out. The last one out
// after Close waits for the Pool's Close to end, so that the Pool's
// goroutines are gone when database/sql has closed every connection.
func (c *dsnConnector) release() {
	c.mu.Lock()
	c.held--
	var wait chan struct{}
	if c.closed && c.held == 0 {
		wait = c.poolClosed
	}
	c.mu.Unlock()
	if wait != nil {
		<-wait
	}
}

// connector returns the connector over the Pool's PgxPool, creating the
// Pool first when there is none.
func (c *dsnConnector) connector(ctx context.Context) (driver.Connector, error) {
	c.mu.Lock()
	closed, inner := c.closed, c.inner
	c.mu.Unlock()
	switch {
	case closed:
		return nil, failover.ErrClosed
	case inner != nil:
		return inner, nil
	}
	return c.creation.Do(ctx, c.create)
}

// create creates the Pool and keeps it, unless one was kept meanwhile or
// Close came first, which leaves it to close the Pool it made.
func (c *dsnConnector) create(ctx context.Context) (driver.Connector, error) {
	c.mu.Lock()
	inner := c.inner
	c.mu.Unlock()
	if inner != nil {
		return inner, nil
	}
	pool, err := failover.NewWithConfig(ctx, c.cfg)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	closed := c.closed
	if !closed {
		c.pool, c.inner = pool, connector(pool)
	}
	inner = c.inner
	c.mu.Unlock()
	if closed {
		pool.Close()
		return nil, failover.ErrClosed
	}
	return inner, nil
}

// Driver returns the pgfailover driver.
func (c *dsnConnector) Driver() driver.Driver { return Driver{} }

// Close closes the Pool. database/sql calls it from DB.Close, after
// closing its idle connections, and DB.Close returns at once as with pgx's
// driver: connections still held (a *sql.Conn, open *sql.Rows or *sql.Tx)
// fail from then on with failover.ErrClosed, and the Pool's Close ends in
// the background, when the last of them is closed, whose Close waits for
// it. With none held, Close waits for the Pool's Close.
func (c *dsnConnector) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.closing.Store(true)
	pool, held := c.pool, c.held
	done := make(chan struct{})
	c.poolClosed = done
	c.mu.Unlock()
	if pool == nil {
		close(done) // a creation in flight closes the Pool it made
		return nil
	}
	closePool := func() {
		pool.Close()
		close(done)
	}
	if held == 0 {
		closePool()
		return nil
	}
	go closePool()
	return nil
}
