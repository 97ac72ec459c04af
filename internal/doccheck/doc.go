// Package doccheck holds no code: its tests keep the documentation true.
// They read README.md, CHANGELOG.md, docs/*.md and examples/*/README.md
// and fail when
//
//   - a relative link points to a file, or a heading anchor, that does not
//     exist;
//   - a Test, Benchmark or Fuzz function named in README.md or docs/ does
//     not exist in the repository's code;
//   - a Go code block does not compile against the module. A block is a
//     complete file (it starts with a package clause), or is marked
//     ```go func (top-level declarations; the imports are added from the
//     package names it uses), or ```go fragment, which is skipped. A block
//     marked module=DIR is compiled inside that module (an example's);
//   - the metric catalog or the connection-string key table is written
//     out anywhere but in its one home (docs/observability.md, and
//     ParseConfig's doc comment);
//   - a Go block marked from=PATH is not, as it stands, in that file (a
//     test runs the code the page shows);
//   - the guide's page list in failover/doc.go or in the README's Guide
//     section names a page docs/ does not have, or leaves one out;
//   - a page names a key of the failover_*, health_probe_*, patroni_*,
//     fallback_* or pool_* families that ParseConfig's doc comment does
//     not name;
//   - a fact with one home (statedOnce: how soon calls resume after a
//     promotion, in docs/performance.md; the did-not-run rule, in
//     docs/errors.md; the PostgreSQL majors CI tests, in README.md; why
//     sqlx.Open("pgfailover", dsn) binds the wrong placeholders, in
//     docs/databasesql-and-pgxpool.md; the probe's backoff of a host
//     that cannot be reached, in docs/how-failover-works.md) is stated on
//     another page, or no longer on its home.
//
// Each failure names the file and line.
//
// The catalog's agreement with the code is failover's
// TestMetricCatalogIsComplete; the key table's is failover's
// TestParseConfigKeyTable.
package doccheck
