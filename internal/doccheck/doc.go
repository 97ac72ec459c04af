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
//     ParseConfig's doc comment).
//
// The catalog's agreement with the code is failover's
// TestMetricCatalogIsComplete; the key table's is failover's
// TestParseConfigKeyTable.
package doccheck
