package patroni

import (
	"fmt"
	"strings"
)

// The String and GoString methods below keep passwords out of anything
// printed with fmt, %v and %#v alike: a config or client logged whole
// shows its URLs without user info and no password.

// String describes the config without its password.
func (cfg ClientConfig) String() string {
	urls := make([]string, len(cfg.URLs))
	for i, u := range cfg.URLs {
		urls[i] = redactRaw(u)
	}
	pwd := ""
	if cfg.Password != "" {
		pwd = "redacted"
	}
	return fmt.Sprintf("patroni.ClientConfig{URLs: [%s], Timeout: %v, MaxBody: %d, TLS: %t, User: %q, Password: %q, HTTPClient: %t}",
		strings.Join(urls, " "), cfg.Timeout, cfg.MaxBody, cfg.TLS != nil, cfg.User, pwd, cfg.HTTPClient != nil)
}

// GoString is String, for %#v.
func (cfg ClientConfig) GoString() string { return cfg.String() }

// String names the client's URLs, without user info.
func (c *Client) String() string {
	urls := make([]string, len(c.endpoints))
	for i, ep := range c.endpoints {
		urls[i] = ep.url
	}
	return "patroni.Client{URLs: [" + strings.Join(urls, " ") + "]}"
}

// GoString is String, for %#v.
func (c *Client) GoString() string { return c.String() }

// redactRaw drops the user info of a URL that may not parse, for an error
// message.
func redactRaw(raw string) string {
	rest := raw
	scheme, after, ok := strings.Cut(raw, "://")
	if ok {
		rest = after
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndex(rest[:end], "@")
	if at < 0 {
		return clip(raw)
	}
	rest = "redacted@" + rest[at+1:]
	if ok {
		rest = scheme + "://" + rest
	}
	return clip(rest)
}
