package patroni

import (
	"fmt"
	"net/netip"
	"strings"
)

// AllowList says which member addresses a Source may report. It guards
// against a Patroni API (or anyone who can write to its DCS) sending the
// client's connections, and its password, to an arbitrary host.
//
// The zero AllowList allows every host.
type AllowList struct {
	prefixes []netip.Prefix
	names    map[string]struct{} // exact host names, lower case
	suffixes []string            // ".db.internal" for "*.db.internal"
	entries  []string            // as given, for String
}

// ParseAllowList parses a comma-separated list of entries:
//
//	10.0.0.0/8, fd00::/8   networks (CIDR); IP members must fall in one
//	192.0.2.7              a single IP address
//	*.db.internal          any host name ending in ".db.internal"
//	db-1.example.com       exactly that host name
//
// Names match case-insensitively and never by DNS: an IP member is matched
// against the networks only, a named member against the names only. The
// empty string gives the AllowList that allows every host. An entry that is
// none of the above is an error naming it.
func ParseAllowList(s string) (AllowList, error) {
	var a AllowList
	if strings.TrimSpace(s) == "" {
		return a, nil
	}
	for i, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if err := a.add(e); err != nil {
			return AllowList{}, fmt.Errorf("patroni: allow-list entry %d %q: %w", i+1, clip(e), err)
		}
		a.entries = append(a.entries, e)
	}
	return a, nil
}

func (a *AllowList) add(e string) error {
	switch {
	case e == "":
		return fmt.Errorf("empty entry")
	case strings.Contains(e, "/"):
		p, err := netip.ParsePrefix(e)
		if err != nil {
			return fmt.Errorf("not a network in CIDR notation")
		}
		a.prefixes = append(a.prefixes, p.Masked())
	case isIP(e):
		ip, _ := netip.ParseAddr(e)
		ip = ip.Unmap()
		a.prefixes = append(a.prefixes, netip.PrefixFrom(ip, ip.BitLen()))
	case strings.HasPrefix(e, "*."):
		name := canonicalName(e[2:])
		if !validName(name) {
			return fmt.Errorf("not a host name pattern: want \"*.\" followed by a domain name")
		}
		a.suffixes = append(a.suffixes, "."+name)
	default:
		name := canonicalName(e)
		if !validName(name) {
			return fmt.Errorf("not a host name, an IP address, a network or a *.domain pattern")
		}
		if a.names == nil {
			a.names = make(map[string]struct{})
		}
		a.names[name] = struct{}{}
	}
	return nil
}

// Allows reports whether host may be reported.
func (a AllowList) Allows(host string) bool {
	if len(a.entries) == 0 {
		return true
	}
	if isIP(host) {
		ip, _ := netip.ParseAddr(host)
		ip = ip.WithZone("").Unmap()
		for _, p := range a.prefixes {
			if p.Contains(ip) {
				return true
			}
		}
		return false
	}
	name := canonicalName(host)
	if _, ok := a.names[name]; ok {
		return true
	}
	for _, s := range a.suffixes {
		if len(name) > len(s) && strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// String returns the entries, comma-separated, as they were given.
func (a AllowList) String() string { return strings.Join(a.entries, ",") }

func isIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

// canonicalName lowers s and drops one trailing dot, so "DB.example.com."
// and "db.example.com" are the same name.
func canonicalName(s string) string {
	return strings.TrimSuffix(strings.ToLower(s), ".")
}

// validName accepts dot-separated labels of letters, digits, '-' and '_'
// (underscores occur in container names), none empty, the last not all
// digits (so that a mistyped IP address such as 10.0.0.256 is refused).
func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	last := s[strings.LastIndex(s, ".")+1:]
	if strings.Trim(last, "0123456789") == "" {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range label {
			ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
			if !ok {
				return false
			}
		}
	}
	return true
}
