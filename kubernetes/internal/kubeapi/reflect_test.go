package kubeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/internal/backoff"
)

// script is a fake API server for one collection: each request takes the
// next step, and the test reads back what was asked.
type script struct {
	mu    sync.Mutex // guards the fields below
	steps []func(w http.ResponseWriter, r *http.Request)
	asked []string // "list" or "watch@<rv>", in order
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if got := r.Header.Get("Authorization"); got != "Bearer secret-token" {
		http.Error(w, `{"kind":"Status","code":401,"reason":"Unauthorized"}`, http.StatusUnauthorized)
		return
	}
	s.mu.Lock()
	q := r.URL.Query()
	if q.Get("watch") == "1" {
		if q.Get("allowWatchBookmarks") != "true" {
			panic("a watch without bookmarks")
		}
		s.asked = append(s.asked, "watch@"+q.Get("resourceVersion"))
	} else {
		s.asked = append(s.asked, "list")
	}
	var step func(http.ResponseWriter, *http.Request)
	if len(s.steps) > 0 {
		step, s.steps = s.steps[0], s.steps[1:]
	}
	s.mu.Unlock()
	if step == nil {
		<-r.Context().Done() // a watch that stays open
		return
	}
	step(w, r)
}

func (s *script) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.asked, " ")
}

func list(rv string, names ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		items := make([]string, len(names))
		for i, n := range names {
			items[i] = fmt.Sprintf(`{"metadata":{"name":%q,"resourceVersion":%q}}`, n, rv)
		}
		fmt.Fprintf(w, `{"kind":"PodList","metadata":{"resourceVersion":%q},"items":[%s]}`, rv, strings.Join(items, ","))
	}
}

// events streams the given lines, then ends the stream.
func events(lines ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		for _, l := range lines {
			fmt.Fprintln(w, l)
			w.(http.Flusher).Flush()
		}
	}
}

func event(typ, name, rv string) string {
	return fmt.Sprintf(`{"type":%q,"object":{"metadata":{"name":%q,"resourceVersion":%q}}}`, typ, name, rv)
}

func answer(code int, reason string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"kind":"Status","code":%d,"reason":%q,"message":"said the server"}`, code, reason)
	}
}

// recorder keeps what a Reflector hands its Handler.
type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, s)
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.got, " ")
}

func (r *recorder) handler() Handler {
	return Handler{
		Replace: func(items []json.RawMessage) {
			var names []string
			for _, it := range items {
				var o struct {
					Metadata struct{ Name string } `json:"metadata"`
				}
				_ = json.Unmarshal(it, &o)
				names = append(names, o.Metadata.Name)
			}
			r.add("replace[" + strings.Join(names, ",") + "]")
		},
		Apply:  func(ev Event) { r.add(strings.ToLower(ev.Type) + ":" + ev.ResourceVersion) },
		Failed: func(err error) { r.add("failed") },
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// run starts a Reflector against s and returns what it did once the
// script is spent and the last watch is open.
func run(t *testing.T, s *script, steps int) (asked, got string) {
	t.Helper()
	srv := httptest.NewServer(s)
	defer srv.Close()
	c, err := NewClient(&Config{Server: srv.URL, token: func() (string, error) { return "secret-token", nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	rec := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := &Reflector{Client: c, Path: "/api/v1/namespaces/db/pods", Backoff: backoff.Exponential{Initial: time.Millisecond, Max: 2 * time.Millisecond}}
		r.Run(ctx, rec.handler())
	}()
	waitFor(t, "the script to be spent", func() bool { return len(strings.Fields(s.log())) > steps })
	cancel()
	<-done
	return s.log(), rec.String()
}

// The protocol's edge cases: a watch resumes from the last version seen
// (an event's or a bookmark's) when its stream ends or drops; a 410, as
// an answer or as an ERROR event in the stream, lists again; a failure is
// reported and retried; nothing is missed or applied twice.
func TestReflectorResumesAndRelists(t *testing.T) {
	for _, tc := range []struct {
		name         string
		steps        []func(http.ResponseWriter, *http.Request)
		asked, gotEv string
	}{
		{
			name: "resume after the stream ends, from a bookmark",
			steps: []func(http.ResponseWriter, *http.Request){
				list("10", "a", "b"),
				events(event("ADDED", "c", "11"), event("BOOKMARK", "", "15")),
				events(event("MODIFIED", "c", "16")),
			},
			asked: "list watch@10 watch@15 watch@16",
			gotEv: "replace[a,b] added:11 modified:16",
		},
		{
			name: "410 answer: list again",
			steps: []func(http.ResponseWriter, *http.Request){
				list("10", "a"),
				events(event("DELETED", "a", "12")),
				answer(http.StatusGone, "Expired"),
				list("40", "b"),
			},
			asked: "list watch@10 watch@12 list watch@40",
			gotEv: "replace[a] deleted:12 replace[b]",
		},
		{
			name: "410 as an ERROR event: list again",
			steps: []func(http.ResponseWriter, *http.Request){
				list("10", "a"),
				events(event("ADDED", "b", "11"), `{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}}`),
				list("50", "a", "b"),
			},
			asked: "list watch@10 list watch@50",
			gotEv: "replace[a] added:11 replace[a,b]",
		},
		{
			name: "an event it cannot read: list again",
			steps: []func(http.ResponseWriter, *http.Request){
				list("10", "a"),
				events(event("ADDED", "b", "11"), `{"type":"MODIFIED","object":{"metadata":{}}}`),
				list("60", "a", "b"),
			},
			asked: "list watch@10 list watch@60",
			gotEv: "replace[a] added:11 failed replace[a,b]",
		},
		{
			name: "failures are retried, the version kept",
			steps: []func(http.ResponseWriter, *http.Request){
				answer(http.StatusServiceUnavailable, "ServiceUnavailable"),
				list("10", "a"),
				answer(http.StatusInternalServerError, "InternalError"),
				events(event("ADDED", "b", "11")),
			},
			asked: "list list watch@10 watch@10 watch@11",
			gotEv: "failed replace[a] failed added:11",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &script{steps: tc.steps}
			asked, got := run(t, s, len(tc.steps))
			if asked != tc.asked {
				t.Errorf("requests: %s\n     want: %s", asked, tc.asked)
			}
			if got != tc.gotEv {
				t.Errorf("handled: %s\n    want: %s", got, tc.gotEv)
			}
		})
	}
}

func TestStatusErrorKeepsTokenOut(t *testing.T) {
	srv := httptest.NewServer(&script{})
	defer srv.Close()
	c, err := NewClient(&Config{Server: srv.URL, token: func() (string, error) { return "wrong-token", nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	_, err = c.List(context.Background(), "/api/v1/namespaces/db/pods", nil)
	if err == nil || strings.Contains(err.Error(), "wrong-token") || !strings.Contains(err.Error(), "/api/v1/namespaces/db/pods: 401") {
		t.Fatalf("error %v: want a 401 naming the path, without the token", err)
	}
}
