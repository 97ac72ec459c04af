package patroni

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/pgfailover/pgfailover/replica"
)

// rawCluster and rawMember hold each field as raw JSON, so that a field of
// the wrong type costs that field (or that member), not the whole answer.
type rawCluster struct {
	Members json.RawMessage `json:"members"`
	Pause   json.RawMessage `json:"pause"`
	Scope   json.RawMessage `json:"scope"`
}

type rawMember struct {
	Name       json.RawMessage `json:"name"`
	Role       json.RawMessage `json:"role"`
	State      json.RawMessage `json:"state"`
	Host       json.RawMessage `json:"host"`
	Port       json.RawMessage `json:"port"`
	Timeline   json.RawMessage `json:"timeline"`
	Lag        json.RawMessage `json:"lag"`
	ReceiveLag json.RawMessage `json:"receive_lag"`
	ReplayLag  json.RawMessage `json:"replay_lag"`
	LSN        json.RawMessage `json:"lsn"`
	ReceiveLSN json.RawMessage `json:"receive_lsn"`
	ReplayLSN  json.RawMessage `json:"replay_lsn"`
	Tags       json.RawMessage `json:"tags"`
}

// Decode reads an answer of GET /cluster from Patroni 3.0 or later. It
// fails only when data is not a JSON object with a members list; a member
// it cannot use is left out and a field of the wrong type is ignored, and
// either is recorded in Cluster.Issues.
func Decode(data []byte) (*Cluster, error) {
	var raw rawCluster
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("patroni: decoding /cluster: %w", err)
	}
	var list []json.RawMessage
	if isNull(raw.Members) {
		return nil, ErrNoMembers
	}
	if err := json.Unmarshal(raw.Members, &list); err != nil {
		return nil, fmt.Errorf("%w: members is %s, not a list", ErrNoMembers, kind(raw.Members))
	}
	c := &Cluster{}
	// A wrong type in these two costs nothing that matters: ignore it.
	_ = json.Unmarshal(raw.Pause, &c.Paused)
	_ = json.Unmarshal(raw.Scope, &c.Scope)
	for i, item := range list {
		m, issues := decodeMember(i, item)
		c.Issues = append(c.Issues, issues...)
		if m != nil {
			c.Members = append(c.Members, *m)
		}
	}
	return c, nil
}

// decodeMember decodes the i-th member. It returns nil when the member
// cannot be used; the issues say why, and which fields were ignored.
func decodeMember(i int, data json.RawMessage) (*Member, []Issue) {
	var raw rawMember
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, []Issue{{Index: i, Reason: "not an object: " + kind(data)}}
	}
	var issues []Issue
	m := &Member{Lag: UnknownLag, ReceiveLag: UnknownLag, ReplayLag: UnknownLag}
	// ignore records a field dropped for a wrong type.
	ignore := func(field string, err error) {
		issues = append(issues, Issue{Index: i, Name: clip(m.Name), Field: field, Reason: err.Error()})
	}
	skip := func(reason string) (*Member, []Issue) {
		return nil, append(issues, Issue{Index: i, Name: clip(m.Name), Reason: reason})
	}

	if err := optional(raw.Name, asString, &m.Name); err != nil {
		ignore("name", err)
	}
	if err := optional(raw.Role, asString, &m.RoleName); err != nil {
		ignore("role", err)
	}
	m.Role = ParseRole(m.RoleName)
	if err := optional(raw.State, asString, &m.State); err != nil {
		ignore("state", err)
	}
	if err := optional(raw.Timeline, asInt, &m.Timeline); err != nil {
		ignore("timeline", err)
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		lag  *Lag
		lsn  *replica.LSN
	}{
		{"lag", raw.Lag, &m.Lag, nil},
		{"receive_lag", raw.ReceiveLag, &m.ReceiveLag, nil},
		{"replay_lag", raw.ReplayLag, &m.ReplayLag, nil},
		{"lsn", raw.LSN, nil, &m.LSN},
		{"receive_lsn", raw.ReceiveLSN, nil, &m.ReceiveLSN},
		{"replay_lsn", raw.ReplayLSN, nil, &m.ReplayLSN},
	} {
		var err error
		if f.lag != nil {
			err = optional(f.raw, asLag, f.lag)
		} else {
			err = optional(f.raw, asLSN, f.lsn)
		}
		if err != nil {
			ignore(f.name, err)
		}
	}
	issues = append(issues, decodeTags(i, m, raw.Tags)...)

	// Without an address the member cannot be used at all.
	if isNull(raw.Host) {
		return skip("no host")
	}
	if err := optional(raw.Host, asString, &m.Host); err != nil {
		return skip("host: " + err.Error())
	}
	if m.Host == "" {
		return skip("empty host")
	}
	if isNull(raw.Port) {
		return skip("no port")
	}
	var port int64
	if err := optional(raw.Port, asInt, &port); err != nil {
		return skip("port: " + err.Error())
	}
	if port < 1 || port > math.MaxUint16 {
		return skip("port " + strconv.FormatInt(port, 10) + " out of range")
	}
	m.Port = uint16(port)
	return m, issues
}

// decodeTags fills m.Tags, m.NoFailover and m.NoLoadBalance from the tags
// object and returns the issues met.
func decodeTags(i int, m *Member, data json.RawMessage) []Issue {
	if isNull(data) {
		return nil
	}
	var issues []Issue
	ignore := func(field, reason string) {
		issues = append(issues, Issue{Index: i, Name: clip(m.Name), Field: field, Reason: reason})
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		ignore("tags", "not an object: "+kind(data))
		return issues
	}
	flags := map[string]*bool{"nofailover": &m.NoFailover, "noloadbalance": &m.NoLoadBalance}
	m.Tags = make(map[string]string, len(raw))
	// Sorted, so that the issues come in the same order every time.
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		v := raw[k]
		if isNull(v) {
			continue // a tag set to null is no tag
		}
		if dst, ok := flags[k]; ok {
			if err := optional(v, asBool, dst); err != nil {
				ignore("tags."+k, err.Error())
				continue
			}
		}
		s, err := tagText(v)
		if err != nil {
			ignore("tags."+clip(k), err.Error())
			continue
		}
		m.Tags[k] = s
	}
	return issues
}

// optional decodes data with parse into dst, leaving dst alone when the
// field is absent or null.
func optional[T any](data json.RawMessage, parse func(json.RawMessage) (T, error), dst *T) error {
	if isNull(data) {
		return nil
	}
	v, err := parse(data)
	if err != nil {
		return err
	}
	*dst = v
	return nil
}

func isNull(data json.RawMessage) bool {
	return len(data) == 0 || bytes.Equal(data, []byte("null"))
}

func asString(data json.RawMessage) (string, error) {
	var s string
	// Unmarshal takes null for a string; a null here is a wrong type.
	if kind(data) != "a string" || json.Unmarshal(data, &s) != nil {
		return "", wrongType("a string", data)
	}
	return s, nil
}

// asInt accepts a JSON integer or a string holding one.
func asInt(data json.RawMessage) (int64, error) {
	text := string(data)
	if s, err := asString(data); err == nil {
		text = s
	}
	n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
	if err != nil {
		return 0, wrongType("an integer", data)
	}
	return n, nil
}

// asBool accepts true and false, the strings Patroni itself accepts for a
// boolean (true/false, yes/no, on/off, 1/0, in any case), and a number
// (zero is false).
func asBool(data json.RawMessage) (bool, error) {
	var b bool
	if json.Unmarshal(data, &b) == nil {
		return b, nil
	}
	var f float64
	if json.Unmarshal(data, &f) == nil {
		return f != 0, nil
	}
	if s, err := asString(data); err == nil {
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "true", "yes", "on", "1":
			return true, nil
		case "false", "no", "off", "0":
			return false, nil
		}
	}
	return false, wrongType("a boolean", data)
}

// asLag accepts a byte count or the string "unknown".
func asLag(data json.RawMessage) (Lag, error) {
	if s, err := asString(data); err == nil && s == "unknown" {
		return UnknownLag, nil
	}
	n, err := asInt(data)
	if err != nil || n < 0 {
		return UnknownLag, wrongType(`a byte count or "unknown"`, data)
	}
	return Lag(n), nil
}

// asLSN accepts PostgreSQL's "X/Y" text, a plain integer, or "unknown".
func asLSN(data json.RawMessage) (replica.LSN, error) {
	s, err := asString(data)
	if err != nil {
		var n uint64
		if json.Unmarshal(data, &n) != nil {
			return 0, wrongType("an LSN", data)
		}
		return replica.LSN(n), nil
	}
	if s == "unknown" {
		return 0, nil
	}
	lsn, err := replica.ParseLSN(s)
	if err != nil {
		return 0, wrongType("an LSN", data)
	}
	return lsn, nil
}

// tagText writes a tag's value as text; objects, lists and null are not
// kept.
func tagText(data json.RawMessage) (string, error) {
	if s, err := asString(data); err == nil {
		return s, nil
	}
	switch k := kind(data); k {
	case "a boolean", "a number":
		return string(bytes.TrimSpace(data)), nil
	default:
		return "", wrongType("a string, number or boolean", data)
	}
}

// wrongType says what was wanted and what came, without echoing the value
// beyond a short prefix: an answer can be large.
func wrongType(want string, data json.RawMessage) error {
	return fmt.Errorf("want %s, got %s %s", want, kind(data), clip(string(bytes.TrimSpace(data))))
}

// kind names the JSON type of data by its first byte.
func kind(data json.RawMessage) string {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return "nothing"
	}
	switch c := data[0]; {
	case c == '{':
		return "an object"
	case c == '[':
		return "a list"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	default:
		return "a number"
	}
}

// maxClip bounds the text an issue quotes from the answer.
const maxClip = 40

// clip shortens s for an issue or a log line.
func clip(s string) string {
	if len(s) <= maxClip {
		return s
	}
	return strings.ToValidUTF8(s[:maxClip], "") + "..."
}
