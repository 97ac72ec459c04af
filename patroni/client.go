package patroni

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/pgfailover/pgfailover/internal/clock"
	"github.com/pgfailover/pgfailover/internal/flight"
)

// Defaults of ClientConfig.
const (
	DefaultTimeout = 5 * time.Second
	DefaultMaxBody = 1 << 20
)

// ClientConfig configures a Client. Only URLs is required.
type ClientConfig struct {
	// URLs are the Patroni REST API addresses, http or https, such as
	// "http://10.0.0.1:8008". GET /cluster is sent to each; a URL whose
	// path already ends in /cluster is used as it is. User info in a URL
	// ("http://user:secret@host:8008") is sent as basic authentication and
	// never shown.
	URLs []string
	// Timeout bounds each request, answer included; 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// MaxBody is the longest answer accepted, in bytes; 0 means
	// DefaultMaxBody. A longer answer is an error.
	MaxBody int64
	// TLS configures https URLs. Leave it nil when HTTPClient is set.
	TLS *tls.Config
	// User and Password are sent as basic authentication to every URL that
	// carries no user info of its own.
	User, Password string
	// HTTPClient replaces the client the Client builds for itself. It is
	// never closed by this package.
	HTTPClient *http.Client
	// MeterProvider receives the metrics pgfailover.patroni.requests,
	// .errors and .duration; nil means none.
	MeterProvider metric.MeterProvider
	// clock times each request for the duration metric; nil means the
	// wall clock. A Pool sets it to its own (clock.Configure).
	clock clock.Clock
}

// Client reads GET /cluster from a Patroni cluster's REST APIs.
type Client struct {
	endpoints []endpoint
	timeout   time.Duration
	maxBody   int64
	http      *http.Client
	own       *http.Transport // nil when the HTTP client is the caller's
	tel       clientTelemetry
	clock     clock.Clock

	rounds flight.Group[*Cluster] // the round in flight that callers share
}

// endpoint is one API URL, split into what is sent and what is shown.
type endpoint struct {
	url            string // without user info
	user, password string
	auth           bool
}

// NewClient checks cfg and returns a Client. It does no I/O.
func NewClient(cfg ClientConfig) (*Client, error) {
	if len(cfg.URLs) == 0 {
		return nil, errors.New("patroni: no API URL given")
	}
	if cfg.Timeout < 0 || cfg.MaxBody < 0 {
		return nil, errors.New("patroni: Timeout and MaxBody must not be negative")
	}
	if cfg.HTTPClient != nil && cfg.TLS != nil {
		return nil, errors.New("patroni: set TLS on the HTTPClient's transport, not in ClientConfig, when giving both")
	}
	c := &Client{
		timeout: cmpOr(cfg.Timeout, DefaultTimeout),
		maxBody: cmpOr(cfg.MaxBody, DefaultMaxBody),
		http:    cfg.HTTPClient,
		clock:   cfg.clock,
	}
	if c.clock == nil {
		c.clock = clock.Real()
	}
	for i, raw := range cfg.URLs {
		ep, err := parseEndpoint(raw)
		if err != nil {
			return nil, fmt.Errorf("patroni: API URL %d %q: %w", i+1, redactRaw(raw), err)
		}
		if !ep.auth && (cfg.User != "" || cfg.Password != "") {
			ep.user, ep.password, ep.auth = cfg.User, cfg.Password, true
		}
		c.endpoints = append(c.endpoints, ep)
	}
	if c.http == nil {
		c.own = http.DefaultTransport.(*http.Transport).Clone()
		c.own.TLSClientConfig = cfg.TLS.Clone()
		c.http = &http.Client{Transport: c.own}
	}
	tel, err := newClientTelemetry(cfg.MeterProvider)
	if err != nil {
		return nil, err
	}
	c.tel = tel
	return c, nil
}

// parseEndpoint checks one URL and takes its user info out.
func parseEndpoint(raw string) (endpoint, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's error quotes the URL, password and all.
		return endpoint{}, errors.New("not a valid URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return endpoint{}, errors.New("scheme must be http or https")
	}
	if u.Host == "" {
		return endpoint{}, errors.New("no host")
	}
	var ep endpoint
	if u.User != nil {
		ep.user = u.User.Username()
		ep.password, _ = u.User.Password()
		ep.auth = true
		u.User = nil
	}
	if !strings.HasSuffix(u.Path, "/cluster") {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/cluster"
		u.RawPath = ""
	}
	u.Fragment = ""
	ep.url = u.String()
	return ep, nil
}

// CloseIdleConnections closes the idle keep-alive connections of the
// Client's own transport, ending their goroutines. A later Cluster opens
// new ones. It leaves a ClientConfig.HTTPClient alone.
func (c *Client) CloseIdleConnections() {
	if c.own != nil {
		c.own.CloseIdleConnections()
	}
}

// Cluster asks every URL for GET /cluster at once and returns the first
// good answer; the other requests are cancelled and waited for before it
// returns. Callers that arrive while a round is in flight share it: a
// caller that gives up (its ctx ends) leaves the round running for the
// others, and the last one to give up cancels it and waits for it to end.
//
// The Cluster returned may be shared with other callers: do not modify it.
// When no URL gives a good answer, the error names each URL (without its
// user info) and why it failed.
func (c *Client) Cluster(ctx context.Context) (*Cluster, error) {
	return c.rounds.Do(ctx, c.round)
}

// round asks every endpoint in parallel and returns the first good answer.
func (c *Client) round(ctx context.Context) (*Cluster, error) {
	ctx, cancel := context.WithCancel(ctx)
	type answer struct {
		cluster *Cluster
		err     *URLError
	}
	answers := make(chan answer, len(c.endpoints)) // never blocks a sender
	var wg sync.WaitGroup
	for _, ep := range c.endpoints {
		wg.Go(func() {
			cl, err := c.get(ctx, ep)
			answers <- answer{cl, err}
		})
	}
	defer func() {
		cancel() // first, so the requests still running end promptly
		wg.Wait()
	}()
	failed := &Error{}
	for range c.endpoints {
		a := <-answers
		if a.err == nil {
			return a.cluster, nil
		}
		failed.URLs = append(failed.URLs, a.err)
	}
	return nil, failed
}

// get sends GET /cluster to one endpoint and decodes the answer.
func (c *Client) get(ctx context.Context, ep endpoint) (*Cluster, *URLError) {
	start := c.clock.Now() // for the duration metric, not for any decision
	cl, err := c.fetch(ctx, ep)
	c.tel.record(ctx, c.clock.Now().Sub(start), err)
	if err != nil {
		return nil, &URLError{URL: ep.url, Err: err}
	}
	return cl, nil
}

func (c *Client) fetch(ctx context.Context, ep endpoint) (*Cluster, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ep.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if ep.auth {
		req.SetBasicAuth(ep.user, ep.password)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// *url.Error repeats the method and URL, which get already names.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w %d", ErrStatus, resp.StatusCode)
	}
	// Read one byte past the limit to tell "exactly the limit" from "more".
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if int64(len(body)) > c.maxBody {
		return nil, fmt.Errorf("%w: more than %s bytes", ErrBodyTooLarge, strconv.FormatInt(c.maxBody, 10))
	}
	cl, err := Decode(body)
	if err != nil {
		return nil, err
	}
	if len(cl.Members) == 0 {
		return nil, fmt.Errorf("%w (%d skipped)", ErrNoUsableMember, countSkipped(cl.Issues))
	}
	return cl, nil
}

func countSkipped(issues []Issue) int {
	n := 0
	for _, i := range issues {
		if i.Skipped() {
			n++
		}
	}
	return n
}
