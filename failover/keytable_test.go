package failover

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pgfailover/pgfailover/failover/internal/connkeys"
)

// keyRow matches a row of the key table in ParseConfig's doc comment: a key
// at the table's left edge, then its stated default.
var keyRow = regexp.MustCompile(`^\t([a-z_]+)\s{2,}(\S+)\s`)

// parseConfigKeyTable returns the keys and stated defaults of the table in
// ParseConfig's doc comment, in the order written.
func parseConfigKeyTable(t *testing.T) (keys []string, defaults map[string]string) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "parse.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var doc string
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == "ParseConfig" && fd.Recv == nil {
			doc = fd.Doc.Text()
		}
	}
	if doc == "" {
		t.Fatal("ParseConfig has no doc comment in parse.go")
	}
	defaults = map[string]string{}
	inTable := false
	for _, line := range strings.Split(doc, "\n") {
		switch {
		case strings.HasPrefix(line, "\tkey ") && strings.Contains(line, "default"):
			inTable = true
		case inTable && !strings.HasPrefix(line, "\t"):
			inTable = false
		case inTable:
			if m := keyRow.FindStringSubmatch(line); m != nil {
				if _, dup := defaults[m[1]]; dup {
					t.Errorf("ParseConfig's key table lists %s twice", m[1])
				}
				keys = append(keys, m[1])
				defaults[m[1]] = m[2]
			}
		}
	}
	if len(keys) == 0 {
		t.Fatal("found no key table in ParseConfig's doc comment")
	}
	return keys, defaults
}

// comparable returns what c holds of the keys' settings, without pgx's
// config (it carries functions) and the string itself.
func comparableConfig(c *Config) Config {
	v := *c
	v.Config = nil
	v.connString = ""
	return v
}

// TestParseConfigKeyTable keeps the one table of connection-string keys,
// in ParseConfig's doc comment, true: every key ParseConfig takes is in
// it, it names no key ParseConfig does not take, and a string that sets a
// key to the default the table states parses to the Config the string
// without that key gives.
func TestParseConfigKeyTable(t *testing.T) {
	keys, defaults := parseConfigKeyTable(t)
	known := connkeys.Names()
	for _, k := range known {
		if !slices.Contains(keys, k) {
			t.Errorf("ParseConfig's key table has no row for %s, which ParseConfig takes", k)
		}
	}
	for _, k := range keys {
		if !slices.Contains(known, k) {
			t.Errorf("ParseConfig's key table lists %s, which ParseConfig does not take", k)
		}
	}

	const base = "host=db-a,db-b port=5432 user=app dbname=app sslmode=disable"
	want, err := ParseConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		stated := defaults[k]
		value := stated
		switch stated {
		case `""`:
			value = ""
		case "pool_max_conns":
			value = strconv.Itoa(int(want.MaxConns))
		}
		got, err := ParseConfig(base + " " + k + "='" + value + "'")
		if err != nil && stated == `""` {
			// "" stands for unset; a key that refuses an empty value
			// (patroni_api_urls) has nothing more to compare.
			continue
		}
		if err != nil {
			t.Errorf("%s at its stated default %s: ParseConfig: %v", k, stated, err)
			continue
		}
		if !reflect.DeepEqual(comparableConfig(got), comparableConfig(want)) {
			t.Errorf("%s: the table states the default %s, but setting it so gives another Config than leaving it unset:\n got %+v\nwant %+v",
				k, stated, comparableConfig(got), comparableConfig(want))
		}
	}
}
