package failover_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgfailover/pgfailover/failover"
)

// ExampleParseConfig reads a connection string that names three hosts in
// three zones. The package's own keys become fields of the Config and are
// gone from the runtime parameters, so none reaches a server.
func ExampleParseConfig() {
	cfg, err := failover.ParseConfig("postgres://app:secret@db-a:5432,db-b:5432,db-c:5433/orders" +
		"?target=primary&zone=eu-1a&zones=eu-1a,eu-1b,eu-1c&failover_max_attempts=4&application_name=checkout")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, h := range cfg.Hosts {
		fmt.Printf("host %s zone %s\n", h.Addr(), h.Zone)
	}
	fmt.Println("target:", cfg.Target)
	fmt.Println("zone:", cfg.Zone)
	fmt.Println("max attempts:", cfg.MaxAttempts)
	fmt.Println("max duration:", cfg.MaxDuration)
	fmt.Println("user, database:", cfg.ConnConfig.User, cfg.ConnConfig.Database)
	fmt.Println("connect timeout:", cfg.ConnConfig.ConnectTimeout)
	fmt.Println("runtime parameters:", cfg.ConnConfig.RuntimeParams)
	// Output:
	// host db-a:5432 zone eu-1a
	// host db-b:5432 zone eu-1b
	// host db-c:5433 zone eu-1c
	// target: read-write
	// zone: eu-1a
	// max attempts: 4
	// max duration: 30s
	// user, database: app orders
	// connect timeout: 5s
	// runtime parameters: map[application_name:checkout]
}

// ExampleParseConfig_error shows an error from ParseConfig: a
// *ConfigError that names the key and the bad value, and never the
// connection string or its password.
func ExampleParseConfig_error() {
	_, err := failover.ParseConfig("postgres://app:secret@db-a,db-b/orders?failover_max_duration=soon")
	var ce *failover.ConfigError
	if errors.As(err, &ce) {
		fmt.Println("key:", ce.Key)
	}
	fmt.Println(err)
	fmt.Println("holds the password:", strings.Contains(err.Error(), "secret"))
	// Output:
	// key: failover_max_duration
	// pgfailover: invalid connection string: failover_max_duration: "soon" is not a duration: write it like "250ms" or "2s", or as whole milliseconds
	// holds the password: false
}

// ExampleParseCausalToken carries a CausalToken from one request to the
// next as text, for example in a cookie: String writes it, and
// ParseCausalToken reads it back.
func ExampleParseCausalToken() {
	for _, text := range []string{"0/16B3748", "", "primary", "not a position"} {
		tok, err := failover.ParseCausalToken(text)
		if err != nil {
			fmt.Printf("%q: error\n", text)
			continue
		}
		fmt.Printf("%q: reads as %q\n", text, tok.String())
	}
	// Output:
	// "0/16B3748": reads as "0/16B3748"
	// "": reads as ""
	// "primary": reads as "primary"
	// "not a position": error
}

// ExampleNewWithConfig takes the hosts from Patroni's REST API, and sets
// in code what a connection string cannot carry: a logger.
func ExampleNewWithConfig() {
	ctx := context.Background()
	cfg, err := failover.ParseConfig("postgres://app:secret@/app" +
		"?patroni_api_urls=http://db-a:8008,http://db-b:8008,http://db-c:8008" +
		"&patroni_allowed_hosts=10.0.0.0/8")
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg.MaxConns = 10 // per host, as pool_max_conns
	cfg.Logger = slog.Default()
	pool, err := failover.NewWithConfig(ctx, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
}

// ExamplePool_Reader reads on a replica that is at most max_lag stale and
// has replayed the Pool's own recent writes, else on the primary.
func ExamplePool_Reader() {
	ctx := context.Background()
	pool, err := failover.New(ctx, "postgres://app:secret@db-a,db-b,db-c/app?max_lag=5s")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "UPDATE users SET name = $1 WHERE id = $2", "Ada", 42); err != nil {
		fmt.Println(err)
		return
	}
	var name string
	// Sees the update above (read-your-writes, pin_after_write).
	err = pool.Reader().QueryRow(ctx, "SELECT name FROM users WHERE id = $1", 42).Scan(&name)
	fmt.Println(name, err)
}

// ExampleRunTx runs a transaction function again when its connection died
// before COMMIT (the server rolled it back); never after an unknown commit
// outcome.
func ExampleRunTx() {
	ctx := context.Background()
	pool, err := failover.New(ctx, "postgres://app:secret@db-a,db-b,db-c/app")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	err = failover.RunTx(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		// No effect outside the database here: this may run twice.
		if _, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance - 10 WHERE id = 1"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance + 10 WHERE id = 2")
		return err
	})
	if errors.Is(err, failover.ErrCommitOutcomeUnknown) {
		fmt.Println("the transfer may or may not have committed: read back before retrying")
	}
}

// ExampleWithCausalToken carries a write's position to a later read, in
// another request or process, so that the read sees the write on any
// replica that has replayed it.
func ExampleWithCausalToken() {
	ctx := context.Background()
	pool, err := failover.New(ctx, "postgres://app:secret@db-a,db-b,db-c/app")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()

	tok := new(failover.CausalToken)
	if _, err := pool.Exec(failover.WithCausalToken(ctx, tok), "UPDATE users SET name = 'Ada' WHERE id = 42"); err != nil {
		fmt.Println(err)
		return
	}
	cookie := tok.String() // hand it to the client

	// A later request, perhaps to another process:
	later, err := failover.ParseCausalToken(cookie)
	if err != nil {
		fmt.Println(err)
		return
	}
	var name string
	err = pool.Reader().QueryRow(failover.WithCausalToken(ctx, later), "SELECT name FROM users WHERE id = 42").Scan(&name)
	fmt.Println(name, err)
}

// ExampleNoRetry marks a read that must not run twice: the SQL classifier
// cannot see that a function it calls has effects.
func ExampleNoRetry() {
	ctx := context.Background()
	pool, err := failover.New(ctx, "postgres://app:secret@db-a,db-b,db-c/app")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	var id int64
	err = pool.QueryRow(failover.NoRetry(ctx), "SELECT claim_next_job()").Scan(&id)
	if errors.Is(err, failover.ErrCommitOutcomeUnknown) {
		fmt.Println("the job may have been claimed")
	}
}

// ExampleReplaySafe promises that a query may run twice, so that it moves
// to another host even when the classifier would not let it. It counts
// for Query, QueryRow and SendBatch; Exec is never run twice once sent.
func ExampleReplaySafe() {
	ctx := context.Background()
	pool, err := failover.New(ctx, "postgres://app:secret@db-a,db-b,db-c/app")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	// The classifier never replays FOR SHARE; outside a transaction its
	// lock ends with the statement, so running it twice changes nothing.
	var balance int64
	err = pool.QueryRow(failover.ReplaySafe(ctx),
		"SELECT balance FROM accounts WHERE id = $1 FOR SHARE", 7).Scan(&balance)
	fmt.Println(balance, err)
}

// ExampleErrCommitOutcomeUnknown tells an error after which a write may
// have committed from every other error, after which it did not.
func ExampleErrCommitOutcomeUnknown() {
	errs := []error{
		// What the Pool returns for a write cut in flight.
		&failover.HostError{Kind: failover.ErrCommitOutcomeUnknown, Addr: "db-a:5432", Err: io.ErrUnexpectedEOF},
		// What it returns when its deadline ran out waiting for a primary.
		&failover.FailoverError{Kind: failover.ErrBudgetExhausted, Cause: context.DeadlineExceeded},
	}
	for _, err := range errs {
		switch {
		case errors.Is(err, failover.ErrCommitOutcomeUnknown):
			fmt.Println("may have committed: settle by key;", err)
		default:
			fmt.Println("did not commit; caller's deadline:", errors.Is(err, context.DeadlineExceeded))
		}
	}
	// Output:
	// may have committed: settle by key; pgfailover: commit outcome unknown: host db-a:5432: unexpected EOF
	// did not commit; caller's deadline: true
}
