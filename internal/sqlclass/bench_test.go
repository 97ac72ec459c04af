package sqlclass

import "testing"

// benchSQL is a typical query of about 200 bytes: joins, parameters, a
// string literal and a comment.
const benchSQL = `SELECT o.id, o.total, c.name /* customer */ FROM orders o ` +
	`JOIN customers c ON c.id = o.customer_id LEFT JOIN regions r ON r.id = c.region_id ` +
	`WHERE o.status = 'shipped' AND o.created_at > $1 ORDER BY o.id LIMIT 50`

func BenchmarkReplaySafe(b *testing.B) {
	b.SetBytes(int64(len(benchSQL)))
	b.ReportAllocs()
	for b.Loop() {
		if !ReplaySafe(benchSQL) {
			b.Fatal("benchSQL should be replay-safe")
		}
	}
}

// BenchmarkClassifyLiterals stresses the literal scanners: dollar quotes,
// E strings, quoted identifiers and nested comments.
func BenchmarkClassifyLiterals(b *testing.B) {
	const sql = `SELECT $body$ a long body with 'quotes' and "idents" $body$, ` +
		`E'escaped \' quote', "Quoted ""Ident""" /* outer /* inner */ */ FROM t -- done`
	b.SetBytes(int64(len(sql)))
	b.ReportAllocs()
	for b.Loop() {
		Classify(sql)
	}
}
