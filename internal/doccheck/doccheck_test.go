package doccheck

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// root is the repository's root, seen from this package's directory.
const root = "../.."

// pages returns the Markdown files the checks read, relative to root:
// README.md and CHANGELOG.md, docs/*.md and, when examples is set,
// examples/*/README.md.
func pages(t *testing.T, examples bool) []string {
	t.Helper()
	out := []string{"README.md", "CHANGELOG.md"}
	globs := []string{"docs/*.md"}
	if examples {
		globs = append(globs, "examples/*/README.md")
	}
	for _, g := range globs {
		m, err := filepath.Glob(filepath.Join(root, g))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			rel, _ := filepath.Rel(root, f)
			out = append(out, rel)
		}
	}
	var exist []string
	for _, f := range out {
		if _, err := os.Stat(filepath.Join(root, f)); err == nil {
			exist = append(exist, f)
		}
	}
	return exist
}

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// block is a fenced code block of a page.
type block struct {
	lang, info string // the info string's first word, and the rest
	line       int    // line of the opening fence, from 1
	text       string
}

// split returns a page's prose lines (code blocks blanked, so that line
// numbers stay) and its fenced code blocks.
func split(page string) (prose []string, blocks []block) {
	lines := strings.Split(page, "\n")
	var cur *block
	var fence string
	for i, l := range lines {
		trimmed := strings.TrimLeft(l, " ")
		switch {
		case cur == nil && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")):
			fence = trimmed[:3]
			fields := strings.Fields(trimmed[3:])
			cur = &block{line: i + 1}
			if len(fields) > 0 {
				cur.lang, cur.info = fields[0], strings.Join(fields[1:], " ")
			}
			prose = append(prose, "")
		case cur != nil && strings.HasPrefix(trimmed, fence):
			blocks = append(blocks, *cur)
			cur = nil
			prose = append(prose, "")
		case cur != nil:
			cur.text += l + "\n"
			prose = append(prose, "")
		default:
			prose = append(prose, l)
		}
	}
	return prose, blocks
}

// anchors returns the anchors a Markdown renderer gives the page's
// headings: lower case, spaces to hyphens, punctuation other than hyphens
// and underscores dropped, a repeated one suffixed -1, -2, ….
func anchors(page string) map[string]bool {
	prose, _ := split(page)
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range prose {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestRelativeLinks fails on a relative link to a file that does not
// exist, or to a heading anchor its page does not have.
func TestRelativeLinks(t *testing.T) {
	for _, p := range pages(t, true) {
		prose, _ := split(read(t, p))
		for i, l := range prose {
			for _, m := range link.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				dest := p
				if file != "" {
					dest = filepath.Join(filepath.Dir(p), file)
					if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
						t.Errorf("%s:%d: link to %s: no such file", p, i+1, target)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s:%d: link to %s: an anchor into a file that is not Markdown", p, i+1, target)
					continue
				}
				if !anchors(read(t, dest))[anchor] {
					t.Errorf("%s:%d: link to %s: %s has no heading with the anchor #%s", p, i+1, target, dest, anchor)
				}
			}
		}
	}
}

var (
	testFunc  = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)[A-Z0-9_]\w*)\(`)
	testCited = regexp.MustCompile(`\b((?:Test|Benchmark|Fuzz)[A-Z]\w*)`)
)

// definedTests returns the names of every Test, Benchmark and Fuzz
// function in the repository's _test.go files, examples' modules included.
func definedTests(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range testFunc.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCitedTestsExist fails when README.md or a page of docs/ names a
// Test, Benchmark or Fuzz function that the code does not have.
func TestCitedTestsExist(t *testing.T) {
	defined := definedTests(t)
	if len(defined) < 100 {
		t.Fatalf("found only %d test functions; is root right?", len(defined))
	}
	for _, p := range pages(t, false) {
		for i, l := range strings.Split(read(t, p), "\n") {
			for _, m := range testCited.FindAllStringSubmatch(l, -1) {
				if !defined[m[1]] {
					t.Errorf("%s:%d: cites %s, which no _test.go file defines", p, i+1, m[1])
				}
			}
		}
	}
}

// imports are the packages a ```go func block may use by name; the ones
// it names get imported.
var imports = map[string]string{
	"context":  "context",
	"errors":   "errors",
	"fmt":      "fmt",
	"log":      "log",
	"os":       "os",
	"slog":     "log/slog",
	"sql":      "database/sql",
	"strings":  "strings",
	"time":     "time",
	"pgx":      "github.com/jackc/pgx/v5",
	"pgconn":   "github.com/jackc/pgx/v5/pgconn",
	"pgxpool":  "github.com/jackc/pgx/v5/pgxpool",
	"failover": "github.com/pgfailover/pgfailover/failover",
	"stdlib":   "github.com/pgfailover/pgfailover/failover/stdlib",
	"patroni":  "github.com/pgfailover/pgfailover/patroni",
}

// source returns the Go file a block stands for, its file name, and the
// module directory (relative to root) to compile it in; ok is false for a
// block the check skips, and problem says why a block cannot be checked.
func source(b block) (src, name, module string, ok bool, problem string) {
	if b.lang != "go" {
		return "", "", "", false, ""
	}
	info := strings.Fields(b.info)
	if slices.Contains(info, "fragment") {
		return "", "", "", false, ""
	}
	for _, f := range info {
		if m, found := strings.CutPrefix(f, "module="); found {
			module = m
		}
	}
	if slices.Contains(info, "func") {
		var head strings.Builder
		head.WriteString("package doc\n\nimport (\n")
		names := make([]string, 0, len(imports))
		for n := range imports {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			if regexp.MustCompile(`\b` + n + `\.`).MatchString(b.text) {
				fmt.Fprintf(&head, "\t%q\n", imports[n])
			}
		}
		head.WriteString(")\n\n")
		return head.String() + b.text, "doc.go", module, true, ""
	}
	pkg := regexp.MustCompile(`(?m)^package (\w+)`).FindStringSubmatch(b.text)
	if pkg == nil {
		return "", "", "", false, "a ```go block that is neither a complete file (a package clause) nor marked `func` or `fragment`"
	}
	name = "main.go"
	if strings.HasSuffix(pkg[1], "_test") {
		name = "doc_test.go"
	}
	return b.text, name, module, true, ""
}

// TestGoBlocksCompile writes every complete Go block of README.md and
// docs/, and every block marked func, into a package of its own inside
// the module it names (this one by default) and runs go vet on them.
func TestGoBlocksCompile(t *testing.T) {
	type placed struct {
		page string
		line int
	}
	byModule := map[string]map[string]placed{} // module → package dir → block
	dirs := map[string]string{}                // module → scratch directory
	for _, p := range pages(t, false) {
		_, blocks := split(read(t, p))
		for _, b := range blocks {
			src, name, module, ok, problem := source(b)
			if problem != "" {
				t.Errorf("%s:%d: %s", p, b.line, problem)
			}
			if !ok {
				continue
			}
			if module == "" {
				module = "."
			}
			scratch, found := dirs[module]
			if !found {
				// Inside the module, under testdata, so that ./... of the
				// module never sees it; removed at the end.
				var err error
				base := filepath.Join(root, module, "internal", "doccheck", "testdata")
				if module != "." {
					base = filepath.Join(root, module, "testdata")
				}
				if err = os.MkdirAll(base, 0o755); err != nil {
					t.Fatal(err)
				}
				scratch, err = os.MkdirTemp(base, "blocks-")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					_ = os.RemoveAll(scratch)
					_ = os.Remove(base) // only when empty: a testdata of the module's own stays
				})
				dirs[module] = scratch
				byModule[module] = map[string]placed{}
			}
			dir := fmt.Sprintf("b%d", len(byModule[module]))
			if err := os.Mkdir(filepath.Join(scratch, dir), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(scratch, dir, name), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			byModule[module][dir] = placed{p, b.line}
		}
	}
	if len(byModule["."]) == 0 {
		t.Fatal("no Go block to compile was found")
	}
	for module, blocks := range byModule {
		modDir := filepath.Join(root, module)
		rel, err := filepath.Rel(modDir, dirs[module])
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("go", "vet", "./"+filepath.ToSlash(rel)+"/...")
		cmd.Dir = modDir
		out, err := cmd.CombinedOutput()
		if err == nil {
			continue
		}
		// Name the page and line of each block go vet complains of.
		report := string(out)
		for dir, at := range blocks {
			if strings.Contains(report, "/"+dir+"/") || strings.Contains(report, "/"+dir+"\n") {
				t.Errorf("%s:%d: the Go block does not compile against the module", at.page, at.line)
			}
		}
		t.Errorf("go vet in %s: %v\n%s", module, err, report)
	}
}

// TestOneHome fails when the metric catalog or the connection-string key
// table is written out on a page other than its home.
func TestOneHome(t *testing.T) {
	catalogRow := regexp.MustCompile("(?m)^\\| `pgfailover\\.failover\\.survived` \\|")
	keyRow := regexp.MustCompile("(?m)^\\| `(failover_max_duration|health_probe_interval|pin_after_write)` \\|")
	for _, p := range pages(t, true) {
		page := read(t, p)
		if catalogRow.MatchString(page) && p != filepath.FromSlash("docs/observability.md") {
			t.Errorf("%s: a metric catalog; it has one home, docs/observability.md", p)
		}
		if keyRow.MatchString(page) {
			t.Errorf("%s: a table of connection-string keys; it has one home, ParseConfig's doc comment", p)
		}
	}
}
