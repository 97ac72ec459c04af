package kubernetes

import (
	"context"
	"net/url"
	"os"
	"strings"

	"github.com/pgfailover/pgfailover/failover"
)

// The connection-string keys ParseConfig reads. They are taken out of the
// string before failover.ParseConfig sees it.
const (
	KeyNamespace  = "kubernetes_namespace"  // SourceConfig.Namespace
	KeySelector   = "kubernetes_selector"   // SourceConfig.Selector
	KeyCluster    = "kubernetes_cluster"    // SourceConfig.Cluster
	KeyRoleLabel  = "kubernetes_role_label" // SourceConfig.RoleLabel
	KeyZoneLabel  = "kubernetes_zone_label" // SourceConfig.ZoneLabel
	KeyPortName   = "kubernetes_port_name"  // SourceConfig.PortName
	KeyKubeconfig = "kubernetes_kubeconfig" // SourceConfig.Kubeconfig
	KeyContext    = "kubernetes_context"    // SourceConfig.Context
	keyPrefix     = "kubernetes_"
)

// ParseConfig reads a connection string whose hosts come from Kubernetes:
// it takes the kubernetes_* keys out of it, hands the rest to
// failover.ParseConfig, and sets the Config's Topology to a Source built
// from those keys (see SourceConfig for each):
//
//	kubernetes_cluster      a CloudNativePG Cluster: its instance pods, and its
//	                        status.targetPrimary followed
//	kubernetes_selector     a label selector for the pods (required without
//	                        kubernetes_cluster)
//	kubernetes_namespace    the pods' namespace; default: the kubeconfig
//	                        context's, or in a pod its own
//	kubernetes_role_label   a pod label read for the role before the operators'
//	kubernetes_zone_label   the pod label holding the zone; default
//	                        topology.kubernetes.io/zone
//	kubernetes_port_name    the container port of PostgreSQL; default the one
//	                        named postgresql or postgres, else 5432
//	kubernetes_kubeconfig   a kubeconfig file; default: in a pod its service
//	                        account, else $KUBECONFIG or ~/.kube/config
//	kubernetes_context      a kubeconfig context; default the current one
//
// A string that names no host (postgres://app:pw@/app?kubernetes_cluster=pg)
// gets its hosts from the pods only. One that names hosts keeps them
// beside the pods, as a Service name the Pool can fall back on before the
// first list; a string with a host=, hostaddr= or service= entry, or with
// PGHOST, PGHOSTADDR or PGSERVICE set, counts as naming hosts. Values in a
// URL are URL-encoded.
//
// The Source logs nothing: to see its warnings, build it with NewSource
// and a Logger, and set it as the Config's Topology. Errors name the key
// at fault and never contain the password.
func ParseConfig(connString string) (*failover.Config, error) {
	rest, keys, namesHost, err := takeKeys(connString)
	if err != nil {
		return nil, err
	}
	cfg, err := failover.ParseConfig(rest)
	if err != nil {
		return nil, err
	}
	src, err := NewSource(SourceConfig{
		Namespace:  keys[KeyNamespace],
		Selector:   keys[KeySelector],
		Cluster:    keys[KeyCluster],
		RoleLabel:  keys[KeyRoleLabel],
		ZoneLabel:  keys[KeyZoneLabel],
		PortName:   keys[KeyPortName],
		Kubeconfig: keys[KeyKubeconfig],
		Context:    keys[KeyContext],
	})
	if err != nil {
		key := KeyKubeconfig
		if keys[KeySelector] == "" && keys[KeyCluster] == "" {
			key = KeyCluster
		}
		return nil, &failover.ConfigError{Key: key, Msg: err.Error(), Err: err}
	}
	cfg.Topology = src
	if !namesHost {
		cfg.Hosts = nil // pgconn filled in its default host; the pods are the hosts
	}
	return cfg, nil
}

// New is ParseConfig followed by failover.NewWithConfig.
func New(ctx context.Context, connString string) (*failover.Pool, error) {
	cfg, err := ParseConfig(connString)
	if err != nil {
		return nil, err
	}
	return failover.NewWithConfig(ctx, cfg)
}

var knownKeys = map[string]bool{
	KeyNamespace: true, KeySelector: true, KeyCluster: true, KeyRoleLabel: true,
	KeyZoneLabel: true, KeyPortName: true, KeyKubeconfig: true, KeyContext: true,
}

// takeKeys returns the string without its kubernetes_* keys, their
// values, and whether the string names a host. The rest of the string is
// left byte for byte as written.
func takeKeys(s string) (rest string, keys map[string]string, namesHost bool, err error) {
	keys = map[string]string{}
	add := func(k, v string) error {
		if !knownKeys[k] {
			return &failover.ConfigError{Key: clip(k), Msg: "unknown key"}
		}
		keys[k] = v
		return nil
	}
	namesHost = os.Getenv("PGHOST") != "" || os.Getenv("PGHOSTADDR") != "" || os.Getenv("PGSERVICE") != ""
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		scheme := s[:strings.Index(s, "://")+3]
		body := s[len(scheme):]
		authority, query := body, ""
		if i := strings.IndexByte(body, '?'); i >= 0 {
			authority, query = body[:i], body[i+1:]
		}
		if i := strings.IndexByte(authority, '/'); i >= 0 {
			authority = authority[:i]
		}
		hosts := authority[strings.LastIndexByte(authority, '@')+1:]
		for h := range strings.SplitSeq(hosts, ",") {
			if h = strings.TrimSpace(h); h != "" && !strings.HasPrefix(h, ":") {
				namesHost = true
			}
		}
		if query == "" {
			return s, keys, namesHost, nil
		}
		var kept []string
		for part := range strings.SplitSeq(query, "&") {
			k, v, _ := strings.Cut(part, "=")
			k, kerr := url.QueryUnescape(k)
			if kerr != nil || !strings.HasPrefix(k, keyPrefix) {
				if (k == "host" || k == "hostaddr" || k == "service") && v != "" {
					namesHost = true
				}
				kept = append(kept, part)
				continue
			}
			val, verr := url.QueryUnescape(v)
			if verr != nil {
				return "", nil, false, &failover.ConfigError{Key: k, Msg: "the value is not URL-encoded"}
			}
			if err := add(k, val); err != nil {
				return "", nil, false, err
			}
		}
		rest = s[:len(s)-len(query)] + strings.Join(kept, "&")
		return strings.TrimSuffix(rest, "?"), keys, namesHost, nil
	}
	rest, namesHost, err = takeKeyValues(s, add, namesHost)
	return rest, keys, namesHost, err
}

// takeKeyValues is takeKeys for the keyword/value form: key=value pairs
// apart by spaces, a value in single quotes or not, with backslash
// escapes.
func takeKeyValues(s string, add func(k, v string) error, namesHost bool) (string, bool, error) {
	var b strings.Builder
	i := 0
	for i < len(s) {
		start := i
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i == len(s) {
			b.WriteString(s[start:])
			break
		}
		k0 := i
		for i < len(s) && s[i] != '=' && !isSpace(s[i]) {
			i++
		}
		key := s[k0:i]
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i == len(s) || s[i] != '=' {
			// Not ours to judge: failover.ParseConfig names the fault.
			b.WriteString(s[start:])
			break
		}
		i++ // '='
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		var val strings.Builder
		if i < len(s) && s[i] == '\'' {
			i++
			for i < len(s) && s[i] != '\'' {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				val.WriteByte(s[i])
				i++
			}
			if i == len(s) {
				if strings.HasPrefix(key, keyPrefix) {
					return "", false, &failover.ConfigError{Key: clip(key), Msg: "unterminated quoted value"}
				}
				b.WriteString(s[start:])
				break
			}
			i++ // closing quote
		} else {
			for i < len(s) && !isSpace(s[i]) {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				val.WriteByte(s[i])
				i++
			}
		}
		if strings.HasPrefix(key, keyPrefix) {
			if err := add(key, val.String()); err != nil {
				return "", false, err
			}
			continue
		}
		if (key == "host" || key == "hostaddr" || key == "service") && val.Len() > 0 {
			namesHost = true
		}
		b.WriteString(s[start:i])
	}
	return b.String(), namesHost, nil
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}
