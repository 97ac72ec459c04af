package connkeys

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/connstr"
	"github.com/pgfailover/pgfailover/internal/netconn"
	"github.com/pgfailover/pgfailover/patroni"
	"github.com/pgfailover/pgfailover/replica"
)

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		problem bool
	}{
		{"250ms", 250 * time.Millisecond, false},
		{"250", 250 * time.Millisecond, false},
		{"+250", 250 * time.Millisecond, false},
		{"-250", -250 * time.Millisecond, false},
		{"0", 0, false},
		{"1h", time.Hour, false},
		{"9223372036854", 9223372036854 * time.Millisecond, false},
		{"9223372036855", 0, true},
		{"", 0, true},
		{"-", 0, true},
		{"12 ms", 0, true},
		{"1e3", 0, true},
	}
	for _, tt := range tests {
		got, problem, _ := parseDuration(tt.in)
		if (problem != "") != tt.problem || got != tt.want {
			t.Errorf("parseDuration(%q) = %v, %q; want %v, problem %v", tt.in, got, problem, tt.want, tt.problem)
		}
	}
}

// Take removes exactly our keys, an unknown fallback_* one included, and
// leaves every other runtime parameter, target_session_attrs among them
// (pgconn never files it there).
func TestTake(t *testing.T) {
	params := map[string]string{
		"application_name": "demo",
		"search_path":      "app",
		MaxAttempts:        "3",
		Zone:               "eu-1a",
		FallbackLocal:      "on",
		"fallback_typo":    "1",
		"failover_typo":    "1", // not ours: pgconn sends it, the server refuses it
	}
	got := Take(params)
	want := map[string]string{MaxAttempts: "3", Zone: "eu-1a", FallbackLocal: "on", "fallback_typo": "1"}
	if !maps.Equal(got, want) {
		t.Errorf("Take = %v, want %v", got, want)
	}
	left := map[string]string{"application_name": "demo", "search_path": "app", "failover_typo": "1"}
	if !maps.Equal(params, left) {
		t.Errorf("params left = %v, want %v", params, left)
	}
}

func TestNames(t *testing.T) {
	names := Names()
	if names[0] != TargetSessionAttrs {
		t.Errorf("Names()[0] = %q, want %q", names[0], TargetSessionAttrs)
	}
	for _, k := range names[1:] {
		if !Ours(k) {
			t.Errorf("Names() lists %q, which Ours refuses", k)
		}
	}
	if Ours(TargetSessionAttrs) {
		t.Errorf("Ours(%q) = true; pgconn handles that key", TargetSessionAttrs)
	}
	if n := len(slices.Compact(slices.Sorted(slices.Values(names)))); n != len(names) {
		t.Errorf("Names() repeats a key: %q", names)
	}
}

// An empty string reads to the defaults; each default is written once, in
// defaults.
func TestReadDefaults(t *testing.T) {
	s, err := Read(map[string]string{}, connstr.TargetSessionAttrs{}, 7)
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{
		Target:              hosthealth.TargetPrimary,
		MaxAttempts:         8,
		ReadyConns:          7,
		MaxDuration:         30 * time.Second,
		BackoffInitial:      50 * time.Millisecond,
		BackoffMax:          time.Second,
		HealthProbeInterval: time.Second,
		HealthProbeWaitMax:  50 * time.Millisecond,
		NameRecheckInterval: 50 * time.Millisecond,
		HealthProbeTimeout:  3 * time.Second,
		TCPUserTimeout:      netconn.DefaultTCPUserTimeout,
		Replica:             Replica{PinAfterWrite: time.Second, Wait: 20 * time.Millisecond},
		Patroni: Patroni{
			Refresh:                patroni.DefaultRefreshInterval,
			ZoneTag:                patroni.DefaultZoneTag,
			QueryWait:              patroni.DefaultQueryWaitTimeout,
			FallbackConnectTimeout: patroni.DefaultFallbackConnect,
			FallbackCooldown:       patroni.DefaultFallbackCooldown,
			FallbackLifetime:       patroni.DefaultFallbackLifetime,
		},
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("Read of no keys =\n %+v\nwant\n %+v", s, want)
	}
}

// Settings that depend on another key's value.
func TestReadDependentDefaults(t *testing.T) {
	tests := []struct {
		name string
		own  map[string]string
		get  func(Settings) any
		want any
	}{
		{"backoff max follows a large initial", map[string]string{BackoffInitial: "2s"},
			func(s Settings) any { return s.BackoffMax }, 2 * time.Second},
		{"probe wait max follows a short interval", map[string]string{HealthProbeInterval: "20ms"},
			func(s Settings) any { return s.HealthProbeWaitMax }, 20 * time.Millisecond},
		{"fallback_local needs patroni_api_urls", map[string]string{FallbackLocal: "on"},
			func(s Settings) any { return s.Patroni.FallbackLocal }, false},
		{"fallback_local with patroni_api_urls", map[string]string{FallbackLocal: "on", PatroniAPIURLs: "http://p1:8008"},
			func(s Settings) any { return s.Patroni.FallbackLocal }, true},
		{"outage_reads wait", map[string]string{OutageReads: "wait"},
			func(s Settings) any { return s.Replica.OutageReads }, replica.OutageWait},
		{"zones split", map[string]string{Zones: "a,,b"},
			func(s Settings) any { return s.Zones }, []string{"a", "", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Read(tt.own, connstr.TargetSessionAttrs{}, 4)
			if err != nil {
				t.Fatal(err)
			}
			if got := tt.get(s); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// target= and target_session_attrs, wherever the latter came from.
func TestReadTarget(t *testing.T) {
	tests := []struct {
		name    string
		target  string // "" for unset
		tsa     connstr.TargetSessionAttrs
		want    hosthealth.Target
		wantErr string // "" when accepted
	}{
		{"default", "", connstr.TargetSessionAttrs{}, hosthealth.TargetPrimary, ""},
		{"target alone", "replica", connstr.TargetSessionAttrs{}, hosthealth.TargetReplica, ""},
		{"tsa alone", "", connstr.TargetSessionAttrs{Value: "standby", Set: true}, hosthealth.TargetReplica, ""},
		{"the same in both", "standby", connstr.TargetSessionAttrs{Value: "replica", Set: true}, hosthealth.TargetReplica, ""},
		{"target outranks the environment", "any", connstr.TargetSessionAttrs{Value: "nonsense", EnvOnly: true}, hosthealth.TargetAny, ""},
		{"environment alone", "", connstr.TargetSessionAttrs{Value: "any", EnvOnly: true}, hosthealth.TargetAny, ""},
		{"conflict", "any", connstr.TargetSessionAttrs{Value: "read-write", Set: true}, 0,
			`target: "any" conflicts with target_session_attrs "read-write"; give one of them, or the same target in both`},
		{"bad target", "leader", connstr.TargetSessionAttrs{}, 0,
			`target: "leader" is not a known target; ` + targetSpellings},
		{"bad environment", "", connstr.TargetSessionAttrs{Value: "leader", EnvOnly: true}, 0,
			`target_session_attrs: "leader" (from PGTARGETSESSIONATTRS) is not a known target; ` + targetSpellings},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			own := map[string]string{}
			if tt.target != "" {
				own[Target] = tt.target
			}
			s, err := Read(own, tt.tsa, 4)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Target != tt.want {
				t.Errorf("Target = %v, want %v", s.Target, tt.want)
			}
		})
	}
}

// Each bad value is reported with its key, the value quoted, and the
// cause where there is one.
func TestReadErrors(t *testing.T) {
	tests := []struct {
		own   map[string]string
		key   string
		msg   string
		cause error
	}{
		{map[string]string{MaxAttempts: "0"}, MaxAttempts, `"0" is too small: at least 1 attempt is needed`, nil},
		{map[string]string{MaxAttempts: "99999999999"}, MaxAttempts, `"99999999999" is out of range`, strconv.ErrRange},
		{map[string]string{ReadyConns: "-1"}, ReadyConns, `"-1" is negative: 0 opens none`, nil},
		{map[string]string{MaxDuration: "0"}, MaxDuration, `"0" must be greater than zero`, nil},
		{map[string]string{PinAfterWrite: "-1"}, PinAfterWrite, `"-1" must not be negative`, nil},
		{map[string]string{BackoffInitial: "500ms", BackoffMax: "100ms"}, BackoffMax, `"100ms" is less than failover_backoff_initial (500ms)`, nil},
		{map[string]string{NameRecheckInterval: "-1s"}, NameRecheckInterval, `"-1s" must not be negative`, nil},
		{map[string]string{HealthProbeWaitMax: "1ms"}, HealthProbeWaitMax, `"1ms" is less than 2ms, the shortest interval between probes`, nil},
		{map[string]string{HealthProbeWaitMax: "2s"}, HealthProbeWaitMax, `"2s" is greater than health_probe_interval (1s)`, nil},
		{map[string]string{MaxLag: "1s"}, MaxLag, `"1s" must be greater than health_probe_interval (1s), or 0 for no gate`, nil},
		{map[string]string{OutageReads: "primary"}, OutageReads, `"primary" must be replica or wait`, nil},
		{map[string]string{PatroniAPIURLs: "http://p1:8008,,x"}, PatroniAPIURLs, "entry 2 is empty", nil},
		{map[string]string{PatroniAPIURLs: "ftp://u:secret@p1"}, PatroniAPIURLs, `entry 1 ("ftp://u:xxxxx@p1") is not an http:// or https:// URL with a host`, nil},
		{map[string]string{PatroniZoneTag: ""}, PatroniZoneTag, "must not be empty", nil},
		{map[string]string{"fallback_zz": "1", "fallback_aa": "1"}, "fallback_aa",
			"unknown key; the fallback_* keys are fallback_local, fallback_connect_timeout, fallback_cooldown, fallback_lifetime", nil},
		{map[string]string{TCPUserTimeout: "10us"}, TCPUserTimeout, `"10us" is less than a millisecond; give 0 for the operating system's default`, nil},
		{map[string]string{TCPUserTimeout: "2147483648"}, TCPUserTimeout, `"2147483648" is out of range: at most 2147483647 milliseconds`, nil},
		{map[string]string{LazyConnect: "yes"}, LazyConnect, `"yes" must be on or off`, nil},
		// Two bad values: the order of the checks decides, not the map's.
		{map[string]string{LazyConnect: "yes", MaxAttempts: "0"}, MaxAttempts, `"0" is too small: at least 1 attempt is needed`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.key+"/"+tt.msg, func(t *testing.T) {
			_, err := Read(tt.own, connstr.TargetSessionAttrs{}, 4)
			if err == nil {
				t.Fatal("Read accepted the value")
			}
			if err.Key != tt.key || err.Msg != tt.msg {
				t.Errorf("err = {%q, %q}, want {%q, %q}", err.Key, err.Msg, tt.key, tt.msg)
			}
			if tt.cause != nil && !errors.Is(err, tt.cause) {
				t.Errorf("err = %v, want one wrapping %v", err.Err, tt.cause)
			}
		})
	}
}

func TestHostZones(t *testing.T) {
	tests := []struct {
		zones   string // "-" for unset
		n       int
		want    []string
		wantErr string
	}{
		{"-", 3, nil, ""},
		{"a", 3, []string{"a", "a", "a"}, ""},
		{"a", 0, []string{}, ""},
		{"a,,b", 3, []string{"a", "", "b"}, ""},
		{"a,b,c", 2, nil, "zones: 3 zones given for 2 hosts; give one zone for every host, or a single zone for all"},
	}
	for _, tt := range tests {
		t.Run(tt.zones+"/"+strconv.Itoa(tt.n), func(t *testing.T) {
			own := map[string]string{}
			if tt.zones != "-" {
				own[Zones] = tt.zones
			}
			s, err := Read(own, connstr.TargetSessionAttrs{}, 4)
			if err != nil {
				t.Fatal(err)
			}
			got, zerr := s.HostZones(tt.n)
			if tt.wantErr != "" {
				if zerr == nil || zerr.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %s", zerr, tt.wantErr)
				}
				return
			}
			if zerr != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("HostZones(%d) = %q, %v; want %q", tt.n, got, zerr, tt.want)
			}
		})
	}
}
