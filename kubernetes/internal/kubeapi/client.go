package kubeapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"
)

// Limits on what the client reads and waits for.
const (
	// maxBody bounds a list's body; a namespace's PostgreSQL pods and a
	// Cluster object are far smaller.
	maxBody = 32 << 20
	// maxEvent bounds one line of a watch stream.
	maxEvent = 8 << 20
	// requestTimeout bounds a list request.
	requestTimeout = 30 * time.Second
	// IdleTimeout ends a watch that has received nothing for this long:
	// the API server sends a bookmark about once a minute to a watch that
	// asks for them, so a longer silence means a connection that died
	// without a word (a server gone from the network).
	IdleTimeout = 3 * time.Minute
)

// Client sends list and watch requests to one API server. It is safe for
// concurrent use.
type Client struct {
	cfg       *Config
	http      *http.Client
	transport *http.Transport
}

// NewClient returns a client for cfg. It does no I/O.
func NewClient(cfg *Config) (*Client, error) {
	if _, err := url.Parse(cfg.Server); err != nil || cfg.Server == "" {
		return nil, fmt.Errorf("kubeapi: server %q is not a URL", cfg.Server)
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 15 * time.Second}).DialContext,
		TLSClientConfig:       cfg.TLS.Clone(),
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: requestTimeout,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &Client{cfg: cfg, http: &http.Client{Transport: tr}, transport: tr}, nil
}

// CloseIdleConnections closes the client's idle keep-alive connections.
func (c *Client) CloseIdleConnections() { c.transport.CloseIdleConnections() }

// StatusError is an error answer of the API server: its HTTP status code
// and the reason and message of its Status object.
type StatusError struct {
	Path    string // the request path, without the query
	Code    int
	Reason  string
	Message string
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("kubeapi: %s: %d", e.Path, e.Code)
	if e.Reason != "" {
		msg += " " + e.Reason
	}
	if e.Message != "" {
		msg += ": " + clip(e.Message)
	}
	return msg
}

// IsGone reports whether err says the resourceVersion asked for is too
// old to watch from (410 Gone, reason Expired): the caller lists again.
func IsGone(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && (se.Code == http.StatusGone || se.Reason == "Expired" || se.Reason == "Gone")
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// status is the part of a Status object this package reads.
type status struct {
	Kind    string `json:"kind"`
	Code    int    `json:"code"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func (c *Client) request(ctx context.Context, path string, q url.Values) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.cfg.Server+path+"?"+q.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("kubeapi: %s: %w", path, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "pgfailover-kubernetes")
	if c.cfg.token != nil {
		tok, err := c.cfg.token()
		if err != nil {
			return nil, fmt.Errorf("kubeapi: %s: %w", path, err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	} else if c.cfg.user != "" {
		req.SetBasicAuth(c.cfg.user, c.cfg.password)
	}
	return req, nil
}

// do sends req and returns the response when its status is 200, else
// the StatusError the body describes.
func (c *Client) do(req *http.Request, path string) (*http.Response, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is the server's, already known; keep the cause
		}
		return nil, fmt.Errorf("kubeapi: %s: %w", path, err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	se := &StatusError{Path: path, Code: resp.StatusCode}
	var st status
	if b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10)); err == nil && json.Unmarshal(b, &st) == nil {
		se.Reason, se.Message = st.Reason, st.Message
	}
	return nil, se
}

// List is a list answer: the items, raw, and the list's resourceVersion.
type List struct {
	ResourceVersion string
	Items           []json.RawMessage
}

// List asks for the objects at path (a collection, such as
// /api/v1/namespaces/db/pods) that q selects.
func (c *Client) List(ctx context.Context, path string, q url.Values) (List, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := c.request(ctx, path, q)
	if err != nil {
		return List{}, err
	}
	resp, err := c.do(req, path)
	if err != nil {
		return List{}, err
	}
	defer resp.Body.Close()
	var l struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Items []json.RawMessage `json:"items"`
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return List{}, fmt.Errorf("kubeapi: %s: reading the list: %w", path, err)
	}
	if len(body) > maxBody {
		return List{}, fmt.Errorf("kubeapi: %s: the list is larger than %d bytes", path, maxBody)
	}
	if err := json.Unmarshal(body, &l); err != nil {
		return List{}, fmt.Errorf("kubeapi: %s: decoding the list: %w", path, err)
	}
	if l.Metadata.ResourceVersion == "" {
		return List{}, fmt.Errorf("kubeapi: %s: the list has no metadata.resourceVersion", path)
	}
	return List{ResourceVersion: l.Metadata.ResourceVersion, Items: l.Items}, nil
}

// ErrUndecodable is wrapped by the error of a watch that met an event it
// could not read. Watching again from the same version would meet it
// again: the collection is to be listed instead.
var ErrUndecodable = errors.New("undecodable watch event")

// Event is one event of a watch stream.
type Event struct {
	Type   string // ADDED, MODIFIED, DELETED or BOOKMARK
	Object json.RawMessage
	// ResourceVersion is the object's metadata.resourceVersion: where a
	// watch resumes after this event.
	ResourceVersion string
}

// Watch watches the collection at path from resourceVersion rv, with
// bookmarks, and calls event for each event until the stream ends, ctx
// ends or nothing arrives for IdleTimeout. It returns nil when the server
// ended the stream, a StatusError when it refused the watch or sent an
// ERROR event (IsGone tells when to list again), and another error when
// the connection failed. An event that cannot be read (too long, not
// JSON, or an object without metadata.resourceVersion) ends the watch with
// an error wrapping ErrUndecodable.
func (c *Client) Watch(ctx context.Context, path string, q url.Values, rv string, event func(Event)) error {
	q = cloneValues(q)
	q.Set("watch", "1")
	q.Set("resourceVersion", rv)
	q.Set("allowWatchBookmarks", "true")
	parent := ctx
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var silent atomic.Bool
	idle := time.AfterFunc(IdleTimeout, func() { silent.Store(true); cancel() })
	defer idle.Stop()
	req, err := c.request(ctx, path, q)
	if err != nil {
		return err
	}
	resp, err := c.do(req, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxEvent)
	for sc.Scan() {
		idle.Reset(IdleTimeout)
		var ev struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("kubeapi: %s: %w: %w", path, ErrUndecodable, err)
		}
		if ev.Type == "ERROR" {
			var st status
			_ = json.Unmarshal(ev.Object, &st)
			return &StatusError{Path: path, Code: st.Code, Reason: st.Reason, Message: st.Message}
		}
		var meta struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(ev.Object, &meta); err != nil || meta.Metadata.ResourceVersion == "" {
			return fmt.Errorf("kubeapi: %s: %w: a %s event without metadata.resourceVersion", path, ErrUndecodable, ev.Type)
		}
		event(Event{Type: ev.Type, Object: ev.Object, ResourceVersion: meta.Metadata.ResourceVersion})
	}
	switch {
	case parent.Err() != nil:
		return nil // the caller is done
	case silent.Load():
		return fmt.Errorf("kubeapi: %s: the watch was silent for %v", path, IdleTimeout)
	case errors.Is(sc.Err(), bufio.ErrTooLong):
		return fmt.Errorf("kubeapi: %s: %w: an event longer than %d bytes", path, ErrUndecodable, maxEvent)
	case sc.Err() != nil:
		return fmt.Errorf("kubeapi: %s: reading the watch: %w", path, sc.Err())
	}
	return nil
}

func cloneValues(q url.Values) url.Values {
	out := make(url.Values, len(q)+4)
	for k, v := range q {
		out[k] = append([]string(nil), v...)
	}
	return out
}
