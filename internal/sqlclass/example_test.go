package sqlclass_test

import (
	"fmt"

	"github.com/pgfailover/pgfailover/internal/sqlclass"
)

func ExampleReplaySafe() {
	fmt.Println(sqlclass.ReplaySafe("SELECT id, name FROM users WHERE id = $1"))
	fmt.Println(sqlclass.ReplaySafe("SELECT nextval('order_id_seq')"))
	fmt.Println(sqlclass.ReplaySafe("SELECT 'DELETE FROM users' AS text"))
	// Output:
	// true
	// false
	// true
}

func ExampleClassify() {
	for _, sql := range []string{
		"SELECT * FROM jobs WHERE state = 'ready' FOR UPDATE SKIP LOCKED",
		"WITH gone AS (DELETE FROM sessions RETURNING id) SELECT count(*) FROM gone",
		"SET statement_timeout = '5s'",
		"SELECT 1; SELECT 2",
		"EXPLAIN SELECT * FROM users",
	} {
		v := sqlclass.Classify(sql)
		fmt.Printf("%-11s safe=%-5v session=%-5v %s\n", v.Kind, v.ReplaySafe, v.SessionState, v.Reason)
	}
	// Output:
	// write       safe=false session=false locking clause
	// write       safe=false session=false data-modifying CTE
	// session     safe=false session=true  set
	// read        safe=false session=false multiple statements
	// read        safe=true  session=false explain
}
