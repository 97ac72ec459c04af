// Package cpubench compares the client CPU time of two ways of doing one
// operation, side by side in one benchmark run, for benchstat.
//
// Wall time on a small shared machine is mostly waiting for the server and
// cannot resolve a few percent; CPU time can, but it drifts with the load
// other processes put on the machine. So [Compare] runs each side in
// rounds and, between rounds, a round of the other side, and reports the
// ratio of their CPU times in each pair of interleaved rounds, which the
// drift mostly cancels out of, as the median over the pairs (cpu-ratio)
// and over all of them at once (cpu-ratio-pooled):
//
//	func BenchmarkQueryRowCPU(b *testing.B) {
//		// ... connect ...
//		cpubench.Compare(b, [2]cpubench.Side{
//			{Name: "pool=pgxpool", Op: func() error { return bare.QueryRow(ctx, "SELECT 1").Scan(&v) }},
//			{Name: "pool=failover", Op: func() error { return pool.QueryRow(ctx, "SELECT 1").Scan(&v) }},
//		})
//	}
//
// The package keeps no state between benchmarks.
package cpubench
