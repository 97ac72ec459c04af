package failover

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/connstr"
	"github.com/pgfailover/pgfailover/internal/netconn"
	"github.com/pgfailover/pgfailover/internal/probe"
	"github.com/pgfailover/pgfailover/patroni"
	"github.com/pgfailover/pgfailover/replica"
)

// Reading the values of this package's keys, each checked against its
// range: ParseConfig (parse.go) calls these for each group of keys.

func (p *parseState) applyTarget(c *Config, own map[string]string, tsa connstr.TargetSessionAttrs) error {
	v, hasTarget := own[keyTarget]
	var fromTSA hosthealth.Target
	// The environment variable is only a default: target= outranks it.
	if tsa.Set || (tsa.EnvOnly && !hasTarget) {
		t, err := hosthealth.ParseTarget(tsa.Value)
		if err != nil {
			problem := "is not a known target"
			if tsa.EnvOnly {
				problem = "(from " + connstr.EnvTargetSessionAttrs + ") is not a known target"
			}
			return p.badValue(keyTargetSessionAttrs, tsa.Value, problem+"; "+targetSpellings, err)
		}
		fromTSA = t
		c.Target = t
	}
	if !hasTarget {
		return nil
	}
	t, err := hosthealth.ParseTarget(v)
	if err != nil {
		return p.badValue(keyTarget, v, "is not a known target; "+targetSpellings, err)
	}
	if tsa.Set && t != fromTSA {
		return p.fail(keyTarget, fmt.Sprintf("%q conflicts with %s %q; give one of them, or the same target in both",
			v, keyTargetSessionAttrs, tsa.Value), nil)
	}
	c.Target = t
	return nil
}

const targetSpellings = "accepted: any, read-write, primary, read-only, standby, replica, prefer-standby, prefer-replica"

// count returns the whole number at key in own, def when it is unset: at
// least least, tooSmall saying why a smaller one is refused.
func (p *parseState) count(own map[string]string, key string, def, least int, tooSmall string) (int, error) {
	v, ok := own[key]
	if !ok {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, p.badValue(key, v, "is out of range", err)
	case err != nil:
		return 0, p.badValue(key, v, "is not a whole number", err)
	case n < int64(least):
		return 0, p.badValue(key, v, tooSmall, nil)
	}
	return int(n), nil
}

func (p *parseState) applyBudget(c *Config, own map[string]string) error {
	var err error
	if c.MaxAttempts, err = p.count(own, keyMaxAttempts, c.MaxAttempts, 1, "is too small: at least 1 attempt is needed"); err != nil {
		return err
	}
	if c.ReadyConns, err = p.count(own, keyReadyConns, c.ReadyConns, 0, "is negative: 0 opens none"); err != nil {
		return err
	}
	if c.MaxDuration, err = p.duration(own, keyMaxDuration, c.MaxDuration, positive); err != nil {
		return err
	}
	if c.BackoffInitial, err = p.duration(own, keyBackoffInitial, c.BackoffInitial, positive); err != nil {
		return err
	}
	if v, ok := own[keyBackoffMax]; ok {
		if c.BackoffMax, err = p.duration(own, keyBackoffMax, c.BackoffMax, positive); err != nil {
			return err
		}
		if c.BackoffMax < c.BackoffInitial {
			return p.badValue(keyBackoffMax, v, fmt.Sprintf("is less than %s (%s)", keyBackoffInitial, c.BackoffInitial), nil)
		}
	} else {
		c.BackoffMax = max(c.BackoffMax, c.BackoffInitial)
	}
	return nil
}

// probeWaitMax reads health_probe_wait_max: at least probe.Floor, at most
// probeInterval, the health_probe_interval in force. When the key is unset
// the default is lowered to probeInterval if that is smaller.
func (p *parseState) probeWaitMax(own map[string]string, probeInterval time.Duration) (time.Duration, error) {
	v, ok := own[keyHealthProbeWaitMax]
	if !ok {
		return min(defaultHealthProbeWaitMax, probeInterval), nil
	}
	d, err := p.duration(own, keyHealthProbeWaitMax, defaultHealthProbeWaitMax, positive)
	if err != nil {
		return 0, err
	}
	switch {
	case d < probe.Floor:
		return 0, p.badValue(keyHealthProbeWaitMax, v, fmt.Sprintf("is less than %s, the shortest interval between probes", probe.Floor), nil)
	case d > probeInterval:
		return 0, p.badValue(keyHealthProbeWaitMax, v, fmt.Sprintf("is greater than %s (%s)", keyHealthProbeInterval, probeInterval), nil)
	}
	return d, nil
}

// parse reads pin_after_write, max_lag, replica_wait and outage_reads
// from own over the defaults in r. max_lag is checked against
// probeInterval, the health_probe_interval in force.
func (r *ReplicaConfig) parse(p *parseState, own map[string]string, probeInterval time.Duration) error {
	var err error
	if r.PinAfterWrite, err = p.duration(own, keyPinAfterWrite, r.PinAfterWrite, nonNegative); err != nil {
		return err
	}
	if r.MaxLag, err = p.duration(own, keyMaxLag, r.MaxLag, nonNegative); err != nil {
		return err
	}
	if r.Wait, err = p.duration(own, keyReplicaWait, r.Wait, nonNegative); err != nil {
		return err
	}
	if v, ok := own[keyOutageReads]; ok {
		switch v {
		case replica.OutageReplica.String():
			r.OutageReads = replica.OutageReplica
		case replica.OutageWait.String():
			r.OutageReads = replica.OutageWait
		default:
			return p.badValue(keyOutageReads, v, "must be replica or wait", nil)
		}
	}
	if r.MaxLag > 0 && r.MaxLag <= probeInterval {
		// A replica's staleness bound only shrinks when it is probed, so a
		// gate at or below the probe period would shut every replica out
		// between probes.
		return p.badValue(keyMaxLag, own[keyMaxLag], fmt.Sprintf("must be greater than %s (%s), or 0 for no gate",
			keyHealthProbeInterval, probeInterval), nil)
	}
	return nil
}

// parse reads patroni_api_urls, patroni_refresh_interval and the fallback_*
// keys from own over the defaults in s. Any other fallback_* key is an
// error.
func (s *patroniSettings) parse(p *parseState, own map[string]string) error {
	if v, ok := own[keyPatroniAPIURLs]; ok {
		urls, err := p.patroniURLs(v)
		if err != nil {
			return err
		}
		s.apiURLs = urls
	}
	var err error
	if s.refresh, err = p.duration(own, keyPatroniRefresh, s.refresh, positive); err != nil {
		return err
	}
	if v, ok := own[keyPatroniAllowedHosts]; ok {
		if s.allowed, err = patroni.ParseAllowList(v); err != nil {
			return p.fail(keyPatroniAllowedHosts, err.Error(), nil)
		}
	}
	if v, ok := own[keyPatroniZoneTag]; ok {
		if v == "" {
			return p.fail(keyPatroniZoneTag, "must not be empty", nil)
		}
		s.zoneTag = v
	}
	if s.queryWait, err = p.duration(own, keyQueryWaitTimeout, s.queryWait, positive); err != nil {
		return err
	}
	if s.fallbackLocal, err = p.onOff(own, keyFallbackLocal, s.fallbackLocal); err != nil {
		return err
	}

	var unknown []string
	for k := range own {
		if strings.HasPrefix(k, fallbackKeyPrefix) && !slices.Contains(fallbackKeys, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return p.fail(unknown[0], "unknown key; the fallback_* keys are "+strings.Join(fallbackKeys, ", "), nil)
	}
	if s.fallbackConnectTimeout, err = p.duration(own, keyFallbackConnectTimeout, s.fallbackConnectTimeout, positive); err != nil {
		return err
	}
	if s.fallbackCooldown, err = p.duration(own, keyFallbackCooldown, s.fallbackCooldown, positive); err != nil {
		return err
	}
	if s.fallbackLifetime, err = p.duration(own, keyFallbackLifetime, s.fallbackLifetime, positive); err != nil {
		return err
	}
	return nil
}

// tcpUserTimeout reads tcp_user_timeout: whole milliseconds as in libpq
// (or a duration like the other keys), 0 for the operating system's
// default, at most what the socket option holds.
func (p *parseState) tcpUserTimeout(own map[string]string) (time.Duration, error) {
	d, err := p.duration(own, keyTCPUserTimeout, netconn.DefaultTCPUserTimeout, nonNegative)
	if err != nil {
		return 0, err
	}
	if d/time.Millisecond > math.MaxInt32 {
		return 0, p.badValue(keyTCPUserTimeout, own[keyTCPUserTimeout], "is out of range: at most 2147483647 milliseconds", nil)
	}
	if d > 0 && d < time.Millisecond {
		return 0, p.badValue(keyTCPUserTimeout, own[keyTCPUserTimeout], "is less than a millisecond; give 0 for the operating system's default", nil)
	}
	return d, nil
}

// patroniURLs checks a comma list of Patroni REST API base URLs. A URL may
// carry credentials, so messages quote only the redacted form of a URL, and
// nothing of one that does not parse.
func (p *parseState) patroniURLs(v string) ([]string, error) {
	var out []string
	for i, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		n := i + 1
		if s == "" {
			return nil, p.fail(keyPatroniAPIURLs, fmt.Sprintf("entry %d is empty", n), nil)
		}
		u, err := url.Parse(s)
		if err != nil {
			return nil, p.fail(keyPatroniAPIURLs, fmt.Sprintf("entry %d is not a valid URL", n), nil)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, p.fail(keyPatroniAPIURLs, fmt.Sprintf("entry %d (%q) is not an http:// or https:// URL with a host", n, u.Redacted()), nil)
		}
		out = append(out, s)
	}
	return out, nil
}

// durationRule is a constraint on a duration key.
type durationRule int

const (
	positive    durationRule = iota // > 0
	nonNegative                     // >= 0
)

// duration reads key from own, or returns def when it is absent.
func (p *parseState) duration(own map[string]string, key string, def time.Duration, rule durationRule) (time.Duration, error) {
	v, ok := own[key]
	if !ok {
		return def, nil
	}
	d, problem, err := parseDuration(v)
	if problem != "" {
		return 0, p.badValue(key, v, problem, err)
	}
	switch {
	case rule == positive && d <= 0:
		return 0, p.badValue(key, v, "must be greater than zero", nil)
	case rule == nonNegative && d < 0:
		return 0, p.badValue(key, v, "must not be negative", nil)
	}
	return d, nil
}

// parseDuration reads Go duration syntax ("250ms", "1m30s") or a bare
// whole number of milliseconds ("250", "-5"). It returns a problem
// description instead of an error message so the caller can name the key.
func parseDuration(s string) (d time.Duration, problem string, err error) {
	if isInteger(s) {
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil || ms > math.MaxInt64/int64(time.Millisecond) || ms < math.MinInt64/int64(time.Millisecond) {
			return 0, "is out of range", err
		}
		return time.Duration(ms) * time.Millisecond, "", nil
	}
	d, err = time.ParseDuration(s)
	if err != nil {
		return 0, `is not a duration: write it like "250ms" or "2s", or as whole milliseconds`, err
	}
	return d, "", nil
}

// isInteger reports whether s is an optionally signed run of ASCII digits.
func isInteger(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// onOff reads a switch: on, true or 1; off, false or 0. def is its value
// when the key is absent.
func (p *parseState) onOff(own map[string]string, key string, def bool) (bool, error) {
	v, ok := own[key]
	if !ok {
		return def, nil
	}
	switch v {
	case "on", "true", "1":
		return true, nil
	case "off", "false", "0":
		return false, nil
	}
	return false, p.badValue(key, v, "must be on or off", nil)
}
