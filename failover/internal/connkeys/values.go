package connkeys

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
	"github.com/pgfailover/pgfailover/internal/probe"
	"github.com/pgfailover/pgfailover/patroni"
	"github.com/pgfailover/pgfailover/replica"
)

// reader reads the values of the keys taken from a string, each checked
// against its range: [Read] calls it for each group of keys. Every method
// taking a default returns it when the key is absent.
type reader map[string]string

func (r reader) target(tsa connstr.TargetSessionAttrs, def hosthealth.Target) (hosthealth.Target, *Error) {
	target := def
	v, hasTarget := r[Target]
	var fromTSA hosthealth.Target
	// The environment variable is only a default: target= outranks it.
	if tsa.Set || (tsa.EnvOnly && !hasTarget) {
		t, err := hosthealth.ParseTarget(tsa.Value)
		if err != nil {
			problem := "is not a known target"
			if tsa.EnvOnly {
				problem = "(from " + connstr.EnvTargetSessionAttrs + ") is not a known target"
			}
			return 0, badValue(TargetSessionAttrs, tsa.Value, problem+"; "+targetSpellings, err)
		}
		fromTSA = t
		target = t
	}
	if !hasTarget {
		return target, nil
	}
	t, err := hosthealth.ParseTarget(v)
	if err != nil {
		return 0, badValue(Target, v, "is not a known target; "+targetSpellings, err)
	}
	if tsa.Set && t != fromTSA {
		return 0, fail(Target, fmt.Sprintf("%q conflicts with %s %q; give one of them, or the same target in both",
			v, TargetSessionAttrs, tsa.Value), nil)
	}
	return t, nil
}

const targetSpellings = "accepted: any, read-write, primary, read-only, standby, replica, prefer-standby, prefer-replica"

// count reads a whole number: at least least, tooSmall saying why a
// smaller one is refused.
func (r reader) count(key string, def, least int, tooSmall string) (int, *Error) {
	v, ok := r[key]
	if !ok {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, badValue(key, v, "is out of range", err)
	case err != nil:
		return 0, badValue(key, v, "is not a whole number", err)
	case n < int64(least):
		return 0, badValue(key, v, tooSmall, nil)
	}
	return int(n), nil
}

// budget reads the failover_* keys over the defaults in s. An unset
// failover_backoff_max is raised to failover_backoff_initial.
func (r reader) budget(s *Settings) *Error {
	var err *Error
	if s.MaxAttempts, err = r.count(MaxAttempts, s.MaxAttempts, 1, "is too small: at least 1 attempt is needed"); err != nil {
		return err
	}
	if s.ReadyConns, err = r.count(ReadyConns, s.ReadyConns, 0, "is negative: 0 opens none"); err != nil {
		return err
	}
	if s.MaxDuration, err = r.duration(MaxDuration, s.MaxDuration, positive); err != nil {
		return err
	}
	if s.BackoffInitial, err = r.duration(BackoffInitial, s.BackoffInitial, positive); err != nil {
		return err
	}
	if v, ok := r[BackoffMax]; ok {
		if s.BackoffMax, err = r.duration(BackoffMax, s.BackoffMax, positive); err != nil {
			return err
		}
		if s.BackoffMax < s.BackoffInitial {
			return badValue(BackoffMax, v, fmt.Sprintf("is less than %s (%s)", BackoffInitial, s.BackoffInitial), nil)
		}
	} else {
		s.BackoffMax = max(s.BackoffMax, s.BackoffInitial)
	}
	return nil
}

// probeWaitMax reads health_probe_wait_max: at least probe.Floor, at most
// probeInterval, the health_probe_interval in force. When the key is unset
// def is lowered to probeInterval if that is smaller.
func (r reader) probeWaitMax(def, probeInterval time.Duration) (time.Duration, *Error) {
	v, ok := r[HealthProbeWaitMax]
	if !ok {
		return min(def, probeInterval), nil
	}
	d, err := r.duration(HealthProbeWaitMax, def, positive)
	if err != nil {
		return 0, err
	}
	switch {
	case d < probe.Floor:
		return 0, badValue(HealthProbeWaitMax, v, fmt.Sprintf("is less than %s, the shortest interval between probes", probe.Floor), nil)
	case d > probeInterval:
		return 0, badValue(HealthProbeWaitMax, v, fmt.Sprintf("is greater than %s (%s)", HealthProbeInterval, probeInterval), nil)
	}
	return d, nil
}

// replica reads pin_after_write, max_lag, replica_wait and outage_reads
// over the defaults in s. max_lag is checked against probeInterval, the
// health_probe_interval in force.
func (r reader) replica(s *Replica, probeInterval time.Duration) *Error {
	var err *Error
	if s.PinAfterWrite, err = r.duration(PinAfterWrite, s.PinAfterWrite, nonNegative); err != nil {
		return err
	}
	if s.MaxLag, err = r.duration(MaxLag, s.MaxLag, nonNegative); err != nil {
		return err
	}
	if s.Wait, err = r.duration(ReplicaWait, s.Wait, nonNegative); err != nil {
		return err
	}
	if v, ok := r[OutageReads]; ok {
		switch v {
		case replica.OutageReplica.String():
			s.OutageReads = replica.OutageReplica
		case replica.OutageWait.String():
			s.OutageReads = replica.OutageWait
		default:
			return badValue(OutageReads, v, "must be replica or wait", nil)
		}
	}
	if s.MaxLag > 0 && s.MaxLag <= probeInterval {
		// A replica's staleness bound only shrinks when it is probed, so a
		// gate at or below the probe period would shut every replica out
		// between probes.
		return badValue(MaxLag, r[MaxLag], fmt.Sprintf("must be greater than %s (%s), or 0 for no gate",
			HealthProbeInterval, probeInterval), nil)
	}
	return nil
}

// patroni reads the patroni_* keys, query_wait_timeout and the fallback_*
// keys over the defaults in s. Any other fallback_* key is an error.
func (r reader) patroni(s *Patroni) *Error {
	var err *Error
	if v, ok := r[PatroniAPIURLs]; ok {
		if s.APIURLs, err = patroniURLs(v); err != nil {
			return err
		}
	}
	if s.Refresh, err = r.duration(PatroniRefresh, s.Refresh, positive); err != nil {
		return err
	}
	if v, ok := r[PatroniAllowedHosts]; ok {
		allowed, aerr := patroni.ParseAllowList(v)
		if aerr != nil {
			return fail(PatroniAllowedHosts, aerr.Error(), nil)
		}
		s.Allowed = allowed
	}
	if v, ok := r[PatroniZoneTag]; ok {
		if v == "" {
			return fail(PatroniZoneTag, "must not be empty", nil)
		}
		s.ZoneTag = v
	}
	if s.QueryWait, err = r.duration(QueryWaitTimeout, s.QueryWait, positive); err != nil {
		return err
	}
	if s.FallbackLocal, err = r.onOff(FallbackLocal, s.FallbackLocal); err != nil {
		return err
	}

	var unknown []string
	for k := range r {
		if strings.HasPrefix(k, FallbackPrefix) && !slices.Contains(fallback, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return fail(unknown[0], "unknown key; the fallback_* keys are "+strings.Join(fallback, ", "), nil)
	}
	if s.FallbackConnectTimeout, err = r.duration(FallbackConnectTimeout, s.FallbackConnectTimeout, positive); err != nil {
		return err
	}
	if s.FallbackCooldown, err = r.duration(FallbackCooldown, s.FallbackCooldown, positive); err != nil {
		return err
	}
	if s.FallbackLifetime, err = r.duration(FallbackLifetime, s.FallbackLifetime, positive); err != nil {
		return err
	}
	return nil
}

// tcpUserTimeout reads tcp_user_timeout: whole milliseconds as in libpq
// (or a duration like the other keys), 0 for the operating system's
// default, at most what the socket option holds.
func (r reader) tcpUserTimeout(def time.Duration) (time.Duration, *Error) {
	d, err := r.duration(TCPUserTimeout, def, nonNegative)
	if err != nil {
		return 0, err
	}
	if d/time.Millisecond > math.MaxInt32 {
		return 0, badValue(TCPUserTimeout, r[TCPUserTimeout], "is out of range: at most 2147483647 milliseconds", nil)
	}
	if d > 0 && d < time.Millisecond {
		return 0, badValue(TCPUserTimeout, r[TCPUserTimeout], "is less than a millisecond; give 0 for the operating system's default", nil)
	}
	return d, nil
}

// patroniURLs checks a comma list of Patroni REST API base URLs. A URL may
// carry credentials, so messages quote only the redacted form of a URL, and
// nothing of one that does not parse.
func patroniURLs(v string) ([]string, *Error) {
	var out []string
	for i, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		n := i + 1
		if s == "" {
			return nil, fail(PatroniAPIURLs, fmt.Sprintf("entry %d is empty", n), nil)
		}
		u, err := url.Parse(s)
		if err != nil {
			return nil, fail(PatroniAPIURLs, fmt.Sprintf("entry %d is not a valid URL", n), nil)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fail(PatroniAPIURLs, fmt.Sprintf("entry %d (%q) is not an http:// or https:// URL with a host", n, u.Redacted()), nil)
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

// duration reads a duration (see parseDuration) under rule.
func (r reader) duration(key string, def time.Duration, rule durationRule) (time.Duration, *Error) {
	v, ok := r[key]
	if !ok {
		return def, nil
	}
	d, problem, err := parseDuration(v)
	if problem != "" {
		return 0, badValue(key, v, problem, err)
	}
	switch {
	case rule == positive && d <= 0:
		return 0, badValue(key, v, "must be greater than zero", nil)
	case rule == nonNegative && d < 0:
		return 0, badValue(key, v, "must not be negative", nil)
	}
	return d, nil
}

// parseDuration reads Go duration syntax ("250ms", "1m30s") or a bare
// whole number of milliseconds ("250", "-5"), as every duration key is
// written. It returns a problem description instead of an error message so
// the caller can name the key; err is the cause, if any.
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

// onOff reads a switch: on, true or 1; off, false or 0.
func (r reader) onOff(key string, def bool) (bool, *Error) {
	v, ok := r[key]
	if !ok {
		return def, nil
	}
	switch v {
	case "on", "true", "1":
		return true, nil
	case "off", "false", "0":
		return false, nil
	}
	return false, badValue(key, v, "must be on or off", nil)
}
