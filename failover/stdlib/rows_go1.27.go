//go:build go1.27

package stdlib

import (
	"database/sql/driver"

	"github.com/pgfailover/pgfailover/failover"
)

// From Go 1.27, pgx's Rows implements driver.RowsColumnScanner, and
// database/sql then reads rows with NextRow instead of Next. rows embeds
// pgx's, so it implements the interface too (ScanColumn is pgx's own), and
// NextRow must give a failure the meaning Next gives it.
var _ driver.RowsColumnScanner = (*rows)(nil)

// NextRow is Next for database/sql from Go 1.27.
func (r *rows) NextRow() error {
	if r.c.ended() {
		return failover.ErrClosed
	}
	return r.named(r.Rows.NextRow())
}
