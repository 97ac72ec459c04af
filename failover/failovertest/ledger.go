package failovertest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/pgfailover/pgfailover/failover"
)

// WriteResult is what one write returned, as a Ledger records it.
type WriteResult int

const (
	// Acknowledged: the write returned no error, so it committed.
	Acknowledged WriteResult = iota
	// Unknown: the write failed with failover.ErrCommitOutcomeUnknown. It
	// may or may not have committed.
	Unknown
	// Failed: the write failed with any other error, so it did not commit
	// (it was never sent, or the server refused it or rolled it back).
	Failed
)

// String returns the result's name.
func (o WriteResult) String() string {
	switch o {
	case Acknowledged:
		return "acknowledged"
	case Unknown:
		return "unknown"
	case Failed:
		return "failed"
	}
	return "WriteResult(" + strconv.Itoa(int(o)) + ")"
}

// WriteResultOf says what a write's error means: nil is Acknowledged, an
// error wrapping failover.ErrCommitOutcomeUnknown is Unknown, any other is
// Failed.
func WriteResultOf(err error) WriteResult {
	switch {
	case err == nil:
		return Acknowledged
	case errors.Is(err, failover.ErrCommitOutcomeUnknown):
		return Unknown
	}
	return Failed
}

// ErrMismatch is wrapped by the error of Ledger.Check when the table
// disagrees with what the writes returned.
var ErrMismatch = errors.New("failovertest: the table disagrees with the ledger")

// Ledger records what each write of the application returned, by the key
// the write stores (an idempotency key, an order number), and then checks
// a table against it: no acknowledged write missing, none applied twice,
// none that failed present, and how many writes of unknown outcome
// committed. K is the key's Go type, which the key column must scan into
// (int64 for bigint, string for text or uuid).
//
// A key may be recorded more than once, as when the application retries a
// write under the same idempotency key: it must be in the table once if any
// of its writes was acknowledged, at most once if any had an unknown
// outcome, and not at all if every one failed.
//
// The zero value is ready to use. Its methods are safe for concurrent use.
type Ledger[K comparable] struct {
	// mu guards the fields below. No I/O while held.
	mu     sync.Mutex
	keys   map[K]keyResults
	order  []K // keys in the order first recorded, for stable reports
	counts [3]int
}

// keyResults says which results the writes of one key had.
type keyResults [3]bool

// verdict is the one result a key's writes add up to: acknowledged if
// any was, else unknown if any was, else failed.
func (k keyResults) verdict() WriteResult {
	switch {
	case k[Acknowledged]:
		return Acknowledged
	case k[Unknown]:
		return Unknown
	}
	return Failed
}

// Record records that a write storing key returned err, and returns what
// that means (WriteResultOf). Pass the error the application's own code
// returned, so that the check judges the application: a service that
// reports an unknown outcome as its own error type should wrap
// failover.ErrCommitOutcomeUnknown, or the write counts as Failed. So
// should one whose resend of an unknown write failed: the error then wraps
// both, as the settle pattern of docs/errors.md does.
func (l *Ledger[K]) Record(key K, err error) WriteResult {
	o := WriteResultOf(err)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keys == nil {
		l.keys = map[K]keyResults{}
	}
	k, seen := l.keys[key]
	if !seen {
		l.order = append(l.order, key)
	}
	k[o] = true
	l.keys[key] = k
	l.counts[o]++
	return o
}

// Count returns how many writes were recorded with result o so far, for
// a test that waits for progress before or after a fault.
func (l *Ledger[K]) Count(o WriteResult) int {
	if o < 0 || int(o) >= len(l.counts) {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts[o]
}

// Querier runs a query: a *failover.Pool, a *pgxpool.Pool, a *pgx.Conn or
// a Node.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Check reads how many rows of table hold each key in column, through q
// (the Pool, or the new primary: Cluster.Primary()), and compares them
// with the ledger. table may be schema-qualified ("app.orders"); table and
// column are quoted as given, so they are case-sensitive. Rows whose key
// the ledger never recorded are counted in Tally.Unrecorded and are not
// an error.
//
// The error wraps ErrMismatch and names the keys at fault when the table
// disagrees with the ledger; it is another error when the table could not
// be read. The Tally is complete in the first case.
func (l *Ledger[K]) Check(ctx context.Context, q Querier, table, column string) (Tally[K], error) {
	sql := fmt.Sprintf("SELECT %[2]s, count(*) FROM %[1]s WHERE %[2]s IS NOT NULL GROUP BY %[2]s",
		pgx.Identifier(strings.Split(table, ".")).Sanitize(), pgx.Identifier{column}.Sanitize())
	rows, err := q.Query(ctx, sql)
	if err != nil {
		return Tally[K]{}, fmt.Errorf("failovertest: reading %s.%s: %w", table, column, err)
	}
	present := map[K]int64{}
	var (
		key K
		n   int64
	)
	_, err = pgx.ForEachRow(rows, []any{&key, &n}, func() error {
		present[key] = n
		return nil
	})
	if err != nil {
		return Tally[K]{}, fmt.Errorf("failovertest: reading %s.%s: %w", table, column, err)
	}
	v := l.tally(present)
	return v, v.err(table, column)
}

// tally compares the rows per key with the ledger.
func (l *Ledger[K]) tally(present map[K]int64) Tally[K] {
	l.mu.Lock()
	defer l.mu.Unlock()
	var v Tally[K]
	for _, key := range l.order {
		n := present[key]
		if n > 1 {
			v.Duplicated = append(v.Duplicated, key)
		}
		switch l.keys[key].verdict() {
		case Acknowledged:
			v.Acknowledged++
			if n == 0 {
				v.Missing = append(v.Missing, key)
			}
		case Unknown:
			v.Unknown++
			if n > 0 {
				v.UnknownCommitted++
			}
		case Failed:
			v.Failed++
			if n > 0 {
				v.FailedPresent = append(v.FailedPresent, key)
			}
		}
	}
	for key := range present {
		if _, ok := l.keys[key]; !ok {
			v.Unrecorded++
		}
	}
	return v
}

// Tally is what Ledger.Check found, by key: each recorded key counts
// once, under the result its writes add up to (acknowledged if any was,
// else unknown if any was, else failed).
type Tally[K comparable] struct {
	// Acknowledged, Unknown and Failed count the keys by result.
	Acknowledged, Unknown, Failed int
	// UnknownCommitted counts the keys of unknown outcome that are in the
	// table: those writes committed.
	UnknownCommitted int
	// Unrecorded counts the keys in the table that the ledger never
	// recorded (rows written by other means).
	Unrecorded int

	// Missing lists the acknowledged keys absent from the table: writes
	// lost.
	Missing []K
	// Duplicated lists the keys present more than once: writes applied
	// twice.
	Duplicated []K
	// FailedPresent lists the keys whose every write failed yet which are
	// in the table: writes reported as failed that committed.
	FailedPresent []K
}

// OK reports whether the table agrees with the ledger.
func (v Tally[K]) OK() bool {
	return len(v.Missing) == 0 && len(v.Duplicated) == 0 && len(v.FailedPresent) == 0
}

// String sums the tally up in one line.
func (v Tally[K]) String() string {
	s := fmt.Sprintf("%d acknowledged, %d of unknown outcome (%d committed), %d failed",
		v.Acknowledged, v.Unknown, v.UnknownCommitted, v.Failed)
	if !v.OK() {
		s += fmt.Sprintf("; %d acknowledged missing, %d duplicated, %d failed yet present",
			len(v.Missing), len(v.Duplicated), len(v.FailedPresent))
	}
	return s
}

// maxKeysShown bounds how many keys of each kind an error names.
const maxKeysShown = 10

// err returns nil when v is OK, else an error wrapping ErrMismatch that
// names the keys at fault.
func (v Tally[K]) err(table, column string) error {
	if v.OK() {
		return nil
	}
	var parts []string
	for _, p := range []struct {
		what string
		keys []K
	}{
		{"acknowledged but missing", v.Missing},
		{"applied more than once", v.Duplicated},
		{"reported failed but present", v.FailedPresent},
	} {
		if len(p.keys) > 0 {
			parts = append(parts, p.what+": "+showKeys(p.keys))
		}
	}
	return fmt.Errorf("%w: %s.%s: %s (%s)", ErrMismatch, table, column, strings.Join(parts, "; "), v)
}

func showKeys[K any](keys []K) string {
	var b strings.Builder
	for i, k := range keys {
		if i == maxKeysShown {
			fmt.Fprintf(&b, " and %d more", len(keys)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%v", k)
	}
	return b.String()
}
