package failover_test

import (
	"errors"
	"fmt"
	"strings"

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
