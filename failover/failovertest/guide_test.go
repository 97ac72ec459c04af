package failovertest_test

import (
	"os"
	"strings"
	"testing"
)

// TestGuideShowsServiceTest: the guide's complete test is
// TestOrdersSurviveFailover as it is, so the code a user pastes is the code
// the suite runs.
func TestGuideShowsServiceTest(t *testing.T) {
	src, err := os.ReadFile("service_test.go")
	if err != nil {
		t.Fatal(err)
	}
	guide, err := os.ReadFile("../../docs/testing.md")
	if err != nil {
		t.Fatal(err)
	}
	code := string(src)
	i := strings.Index(code, "import (")
	if i < 0 {
		t.Fatal("service_test.go has no import block")
	}
	want := "```go\npackage orders_test\n\n" + code[i:] + "```\n"
	if !strings.Contains(string(guide), want) {
		t.Error("docs/testing.md does not show service_test.go as it is (from its import block on, after \"package orders_test\")")
	}
}
