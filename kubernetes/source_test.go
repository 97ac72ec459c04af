package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/internal/backoff"
	"github.com/pgfailover/pgfailover/kubernetes/internal/kubeapi"
	"github.com/pgfailover/pgfailover/topology"
)

// fakeAPI serves one pod list and then a watch stream the test feeds.
type fakeAPI struct {
	list   string
	events chan string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("watch") != "1" {
		fmt.Fprint(w, f.list)
		return
	}
	w.(http.Flusher).Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case ev, ok := <-f.events:
			if !ok {
				return
			}
			fmt.Fprintln(w, ev)
			w.(http.Flusher).Flush()
		}
	}
}

func podEvent(typ string, raw json.RawMessage, rv int) string {
	var obj map[string]any
	_ = json.Unmarshal(raw, &obj)
	obj["metadata"].(map[string]any)["resourceVersion"] = fmt.Sprint(rv)
	b, _ := json.Marshal(map[string]any{"type": typ, "object": obj})
	return string(b)
}

// A source whose pods all go unready, or are all deleted, says nothing:
// an empty topology would drop every host. The next ready pod is news.
func TestSourceKeepsTheLastTopology(t *testing.T) {
	a := podJSON("a", "10.0.0.1", true, map[string]string{LabelSpiloRole: "master"})
	b := podJSON("b", "10.0.0.2", true, map[string]string{LabelSpiloRole: "replica"})
	f := &fakeAPI{events: make(chan string)}
	f.list = fmt.Sprintf(`{"metadata":{"resourceVersion":"1"},"items":[%s,%s]}`, a, b)
	srv := httptest.NewServer(f)
	defer srv.Close()
	src, err := newSource(SourceConfig{Selector: "application=spilo", backoff: backoff.Exponential{Initial: time.Millisecond}},
		&kubeapi.Config{Server: srv.URL, Namespace: "db"})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // before srv.Close, which waits for the watch to end
	done := make(chan error, 1)
	go func() {
		done <- src.Watch(ctx, func(tp topology.Topology) { got <- show(tp.Members) })
	}()
	next := func(want string) {
		t.Helper()
		select {
		case s := <-got:
			if s != want {
				t.Fatalf("update %s\nwant %s", s, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no update; want %s", want)
		}
	}
	next("a=10.0.0.1:5432 primary, b=10.0.0.2:5432 replica")
	if err := src.Watch(ctx, nil); err != ErrWatching {
		t.Errorf("a second Watch: %v, want ErrWatching", err)
	}
	f.events <- podEvent("MODIFIED", podJSON("a", "10.0.0.1", false, nil), 2)
	next("b=10.0.0.2:5432 replica")
	f.events <- podEvent("DELETED", b, 3)
	f.events <- podEvent("MODIFIED", podJSON("b", "10.0.0.2", true, nil), 4) // back, without its label
	next("b=10.0.0.2:5432 unknown")
	f.events <- podEvent("DELETED", b, 5) // none left: nothing is reported
	f.events <- podEvent("ADDED", podJSON("c", "10.0.0.3", true, map[string]string{LabelSpiloRole: "master"}), 6)
	next("c=10.0.0.3:5432 primary")
	select {
	case s := <-got:
		t.Errorf("an update beyond those expected: %s", s)
	default:
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Watch: %v", err)
	}
	if s := fmt.Sprint(src); strings.Contains(s, "token") {
		t.Errorf("String: %s", s)
	}
}
