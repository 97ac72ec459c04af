package doccheck

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// guidePages returns the base names of docs/*.md.
func guidePages(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range m {
		out = append(out, filepath.Base(f))
	}
	if len(out) == 0 {
		t.Fatal("no page in docs/; is root right?")
	}
	return out
}

// compareList reports, naming file and line, each page a list names that
// docs/ does not have, and each page of docs/ the list leaves out.
func compareList(t *testing.T, file, what string, listed map[string]int, head int) {
	t.Helper()
	have := guidePages(t)
	for name, line := range listed {
		if !slices.Contains(have, name) {
			t.Errorf("%s:%d: %s lists %s, which docs/ does not have", file, line, what, name)
		}
	}
	for _, name := range have {
		if _, ok := listed[name]; !ok {
			t.Errorf("%s:%d: %s leaves out docs/%s", file, head, what, name)
		}
	}
}

var (
	docGoEntry  = regexp.MustCompile(`^//\s+- ([a-z0-9-]+\.md):`)
	readmeEntry = regexp.MustCompile(`\]\(docs/([a-z0-9-]+\.md)\)`)
)

// TestGuideLists fails when the guide's page list in failover/doc.go
// (under "# Reference and guide") or in the README (under "## Guide")
// names a page docs/ does not have, or leaves one out.
func TestGuideLists(t *testing.T) {
	const docGo = "failover/doc.go"
	listed, head := map[string]int{}, 0
	for i, l := range strings.Split(read(t, docGo), "\n") {
		switch {
		case strings.HasPrefix(l, "// # "):
			if head > 0 {
				break
			}
			if l == "// # Reference and guide" {
				head = i + 1
			}
		case head > 0:
			if m := docGoEntry.FindStringSubmatch(l); m != nil {
				listed[m[1]] = i + 1
			}
		}
	}
	if head == 0 {
		t.Fatalf("%s: no section \"# Reference and guide\"", docGo)
	}
	compareList(t, docGo, "the guide list", listed, head)

	listed, head = map[string]int{}, 0
	for i, l := range strings.Split(read(t, "README.md"), "\n") {
		switch {
		case strings.HasPrefix(l, "## "):
			if head > 0 && l != "## Guide" {
				compareList(t, "README.md", "the Guide section", listed, head)
				return
			}
			if l == "## Guide" {
				head = i + 1
			}
		case head > 0 && strings.HasPrefix(l, "- "):
			if m := readmeEntry.FindStringSubmatch(l); m != nil {
				listed[m[1]] = i + 1
			}
		}
	}
	t.Fatal("README.md: no section \"## Guide\" followed by another section")
}

var (
	// tableKey is a row of ParseConfig's key table: a tab, the key, spaces.
	tableKey = regexp.MustCompile(`(?m)^//\t([a-z_]+) {2,}\S`)
	// ourFamily matches a name shaped like one of the module's keys or
	// pgxpool's: a mention of one must be a key ParseConfig's doc names.
	ourFamily = regexp.MustCompile(`\b(?:failover|health_probe|patroni|fallback|pool)_[a-z_]+\b`)
	codeSpan  = regexp.MustCompile("`[^`]+`")
)

// knownKeys returns the keys ParseConfig's doc comment names: its table's,
// and pgxpool's pool_* keys that its prose lists.
func knownKeys(t *testing.T) map[string]bool {
	t.Helper()
	src := read(t, "failover/parse.go")
	i := strings.Index(src, "// ParseConfig builds")
	j := strings.Index(src, "func ParseConfig(")
	if i < 0 || j < i {
		t.Fatal("failover/parse.go: ParseConfig's doc comment not found")
	}
	doc := src[i:j]
	keys := map[string]bool{}
	for _, m := range tableKey.FindAllStringSubmatch(doc, -1) {
		keys[m[1]] = true
	}
	for _, m := range ourFamily.FindAllString(doc, -1) {
		keys[m] = true
	}
	if !keys["failover_max_duration"] || !keys["pool_max_conns"] {
		t.Fatalf("failover/parse.go: read %d keys from ParseConfig's doc comment, without failover_max_duration or pool_max_conns", len(keys))
	}
	return keys
}

// TestKeyNamesExist fails when a page names, in a code span or as key= in
// a code block, a key of the module's families (failover_*,
// health_probe_*, patroni_*, fallback_*, pool_*) that ParseConfig's doc
// comment does not name: a key misspelt, or one that was renamed.
func TestKeyNamesExist(t *testing.T) {
	keys := knownKeys(t)
	check := func(page string, line int, text string) {
		for _, loc := range ourFamily.FindAllStringIndex(text, -1) {
			name := text[loc[0]:loc[1]]
			rest := text[loc[1]:]
			switch {
			case keys[name]:
			case strings.HasPrefix(rest, "*"), strings.HasSuffix(name, "_"):
				// a family written out: fallback_*
			case strings.HasSuffix(name, "_test"), strings.HasPrefix(rest, ".go"):
				// a file or package name
			default:
				t.Errorf("%s:%d: names the key %s, which ParseConfig's doc comment does not", page, line, name)
			}
		}
	}
	for _, p := range pages(t, true) {
		page := read(t, p)
		prose, blocks := split(page)
		for i, l := range prose {
			for _, span := range codeSpan.FindAllString(l, -1) {
				check(p, i+1, span)
			}
		}
		for _, b := range blocks {
			for i, l := range strings.Split(b.text, "\n") {
				for _, m := range regexp.MustCompile(`\b[a-z_]+=`).FindAllString(l, -1) {
					check(p, b.line+1+i, strings.TrimSuffix(m, "="))
				}
			}
		}
	}
}

// statedOnce lists facts that have one home: a page outside it that
// states the fact (matched by re on its prose, lines joined) fails
// TestStatedOnce, which names the file and line. Other pages link to the
// home instead.
var statedOnce = []struct {
	what, home string
	re         *regexp.Regexp
}{
	{
		"how soon calls resume after a promotion",
		"docs/performance.md",
		regexp.MustCompile(`(?i)(within (tens of )?milliseconds|\b\d+(\.\d+)?( ?(–|-|to) ?\d+(\.\d+)?)? ?ms) (of|after) (the promotion|its promotion|the new primary|it takes writes)`),
	},
	{
		"the rule telling a statement that did not run from one that may have committed",
		"docs/errors.md",
		regexp.MustCompile(`(?i)(every|any) other error[^.|]{0,60}?\b(it|the statement|the insert|the write) did not\b`),
	},
	{
		"which PostgreSQL majors CI tests",
		"README.md",
		regexp.MustCompile(`(?i)PostgreSQL 14 to 18|(full|compatibility) suite on (PostgreSQL )?1[4-8]`),
	},
	{
		"why sqlx.Open(\"pgfailover\", dsn) binds the wrong placeholders",
		"docs/databasesql-and-pgxpool.md",
		regexp.MustCompile("(?i)binds? `\\?`|NamedExec`? fails? with[^.]{0,30}42601"),
	},
	{
		"how often a host that cannot be reached, or refuses for now, is probed",
		"docs/how-failover-works.md",
		regexp.MustCompile(`(?i)5 ms doubling`),
	},
}

// TestStatedOnce fails when a fact with one home is stated on another
// page.
func TestStatedOnce(t *testing.T) {
	for _, p := range pages(t, true) {
		prose, _ := split(read(t, p))
		text := strings.Join(prose, "\n")
		flat := strings.ReplaceAll(text, "\n", " ")
		for _, f := range statedOnce {
			if filepath.ToSlash(p) == f.home {
				if !f.re.MatchString(flat) {
					t.Errorf("%s: no longer states %s, the fact whose home it is", p, f.what)
				}
				continue
			}
			for _, loc := range f.re.FindAllStringIndex(flat, -1) {
				line := strings.Count(text[:loc[0]], "\n") + 1
				t.Errorf("%s:%d: states %s (%q); its home is %s: link there instead", p, line, f.what, flat[loc[0]:loc[1]], f.home)
			}
		}
	}
}

// TestBlocksFromFiles fails when a Go block marked from=PATH (a path from
// the repository's root) is not, line for line, in that file: the page
// shows code a test runs, as the test runs it.
func TestBlocksFromFiles(t *testing.T) {
	found := 0
	for _, p := range pages(t, true) {
		_, blocks := split(read(t, p))
		for _, b := range blocks {
			for _, f := range strings.Fields(b.info) {
				from, ok := strings.CutPrefix(f, "from=")
				if !ok {
					continue
				}
				found++
				if !strings.Contains(read(t, filepath.FromSlash(from)), b.text) {
					t.Errorf("%s:%d: the block is not in %s as it is there", p, b.line, from)
				}
			}
		}
	}
	if found == 0 {
		t.Fatal("no block marked from=; docs/errors.md's placeOrder should be one")
	}
}
