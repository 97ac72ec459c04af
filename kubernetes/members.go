package kubernetes

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/topology"
)

// PendingFailover is the value CloudNativePG writes into
// status.targetPrimary when it has lost the primary and not yet chosen
// the next one.
const PendingFailover = "pending"

// cnpgCluster is the part of a CloudNativePG Cluster this package reads.
type cnpgCluster struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Status struct {
		CurrentPrimary string `json:"currentPrimary"`
		TargetPrimary  string `json:"targetPrimary"`
	} `json:"status"`
}

func decodeCluster(raw json.RawMessage) (*cnpgCluster, error) {
	var c cnpgCluster
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// view is what a Source has last seen: the selected pods by name and,
// when it follows a CloudNativePG Cluster, that Cluster.
type view struct {
	pods    map[string]*pod
	cluster *cnpgCluster // nil while unknown or not followed
}

// memberRules are the settings that turn a view into members.
type memberRules struct {
	roleLabel, zoneLabel, portName string
}

// members turns the view into the topology to report, and notes on the
// pods it left out for a reason the user may want to know. Pods that are
// not ready are left out without a note: that is their normal way to
// come and go.
//
// The Cluster, when known, speaks over the labels. While its
// targetPrimary names another pod than its currentPrimary, a switchover
// or failover is under way: the target is claimed primary (even before it
// reports ready, as long as it has an address), the current primary is
// left out, as the operator has let it go, and no other pod is claimed
// primary. While targetPrimary is PendingFailover no pod is claimed
// primary. Otherwise currentPrimary is claimed primary and a pod whose
// label still says primary is claimed nothing.
func (v *view) members(r memberRules) (out []topology.Member, notes []string) {
	names := make([]string, 0, len(v.pods))
	for name := range v.pods {
		names = append(names, name)
	}
	slices.Sort(names)
	var current, target string
	if v.cluster != nil {
		current, target = v.cluster.Status.CurrentPrimary, v.cluster.Status.TargetPrimary
		if target == "" {
			target = current
		}
	}
	seen := make(map[string]bool, len(names))
	for _, name := range names {
		p := v.pods[name]
		moving := target != "" && target != current
		switch {
		case moving && name == current:
			continue // let go by the operator
		case moving && name == target:
			if p.Status.PodIP == "" || p.Metadata.DeletionTimestamp != nil {
				continue
			}
		case !p.ready():
			continue
		}
		port, ok := p.port(r.portName)
		if !ok {
			notes = append(notes, "pod "+name+" has no container port named "+r.portName)
			continue
		}
		addr := p.addr(port)
		if seen[addr] {
			notes = append(notes, "pod "+name+" skipped: its address "+addr+" is another pod's")
			continue
		}
		seen[addr] = true
		label := p.roleLabel(r.roleLabel)
		role, standbyLeader := roleOf(label)
		if v.cluster != nil {
			switch {
			case name == target && target != PendingFailover:
				role = hosthealth.RolePrimary
			case role == hosthealth.RolePrimary:
				role = hosthealth.RoleUnknown // the label lags the Cluster
			}
		}
		m := topology.Member{
			Host:     p.Status.PodIP,
			Port:     port,
			Zone:     p.Metadata.Labels[r.zoneLabel],
			Role:     role,
			ReadLast: standbyLeader,
			Tags:     map[string]string{TagPod: name, TagRoleLabel: label},
		}
		out = append(out, m)
	}
	// The claimed primary first, as the Patroni source ranks its members.
	slices.SortStableFunc(out, func(a, b topology.Member) int {
		return rank(a.Role) - rank(b.Role)
	})
	return out, notes
}

func rank(r hosthealth.Role) int {
	if r == hosthealth.RolePrimary {
		return 0
	}
	return 1
}

// clip keeps a name from the API short in a log line.
func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}
