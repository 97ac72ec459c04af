package stdlib

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	pgxstdlib "github.com/jackc/pgx/v5/stdlib"

	"github.com/pgfailover/pgfailover/failover"
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

// connector returns pgx's connector over pool's PgxPool, with a
// ResetSession that retires a connection database/sql kept idle when the
// pgxpool would no longer hand it out.
func connector(pool *failover.Pool) driver.Connector {
	pp := pool.PgxPool()
	return pgxstdlib.GetPoolConnector(pp, pgxstdlib.OptionResetSession(resetSession(pp)))
}

// resetSession runs pp's PrepareConn, the check pgxpool runs before it
// hands out an idle connection (the peek, the role, the host's state, and
// the user's own PrepareConn), before database/sql reuses a connection.
// driver.ErrBadConn makes database/sql close it and take another: nothing
// was sent on it yet.
func resetSession(pp *pgxpool.Pool) func(context.Context, *pgx.Conn) error {
	prepare := pp.Config().PrepareConn
	return func(ctx context.Context, conn *pgx.Conn) error {
		if ok, err := prepare(ctx, conn); !ok || err != nil {
			return driver.ErrBadConn
		}
		return nil
	}
}

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

	// mu guards the fields below. No I/O while held: the Pool is created
	// outside it, by one Connect at a time, the others waiting on
	// creating or their own context.
	mu       sync.Mutex
	pool     *failover.Pool
	inner    driver.Connector // pgx's connector over pool
	creating chan struct{}    // closed when the creation in flight ends
	closed   bool
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
	return inner.Connect(ctx)
}

func (c *dsnConnector) connector(ctx context.Context) (driver.Connector, error) {
	for {
		c.mu.Lock()
		switch {
		case c.closed:
			c.mu.Unlock()
			return nil, failover.ErrClosed
		case c.inner != nil:
			inner := c.inner
			c.mu.Unlock()
			return inner, nil
		case c.creating != nil:
			wait := c.creating
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		c.creating = done
		c.mu.Unlock()

		pool, err := failover.NewWithConfig(ctx, c.cfg)

		c.mu.Lock()
		c.creating = nil
		close(done)
		closed := c.closed
		if err == nil && !closed {
			c.pool, c.inner = pool, connector(pool)
		}
		inner := c.inner
		c.mu.Unlock()
		switch {
		case err != nil:
			return nil, err
		case closed:
			pool.Close()
			return nil, failover.ErrClosed
		}
		return inner, nil
	}
}

// Driver returns the pgfailover driver.
func (c *dsnConnector) Driver() driver.Driver { return Driver{} }

// Close closes the Pool, waiting for its connections in use to come back.
// database/sql calls it from DB.Close.
func (c *dsnConnector) Close() error {
	c.mu.Lock()
	c.closed = true
	pool := c.pool
	c.mu.Unlock()
	if pool != nil {
		pool.Close()
	}
	return nil
}
