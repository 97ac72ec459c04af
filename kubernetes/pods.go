package kubernetes

import (
	"encoding/json"
	"net"
	"strconv"
	"strings"

	"github.com/pgfailover/pgfailover/hosthealth"
)

// The labels the operators write, read in this order after
// SourceConfig.RoleLabel.
const (
	// LabelCNPGRole is CloudNativePG's role label (1.18 and later).
	LabelCNPGRole = "cnpg.io/instanceRole"
	// LabelCNPGLegacyRole is CloudNativePG's older role label. It is read
	// only on pods that also carry LabelCNPGCluster, as "role" alone is
	// too common a label to trust.
	LabelCNPGLegacyRole = "role"
	// LabelCNPGCluster names a CloudNativePG pod's Cluster.
	LabelCNPGCluster = "cnpg.io/cluster"
	// LabelSpiloRole is the role label of Patroni on Kubernetes (Zalando's
	// operator, Spilo).
	LabelSpiloRole = "spilo-role"
	// LabelCrunchyRole is Crunchy Data's PGO role label.
	LabelCrunchyRole = "postgres-operator.crunchydata.com/role"
	// DefaultZoneLabel is the label read for a pod's zone. The scheduler
	// does not copy a node's zone onto its pods: an operator or admission
	// policy that wants zones read must set it.
	DefaultZoneLabel = "topology.kubernetes.io/zone"
	// DefaultPort is the port used when no container port is named
	// "postgresql" or "postgres".
	DefaultPort = 5432
	// TagPod is the member tag that holds the pod's name.
	TagPod = "pod"
	// TagRoleLabel is the member tag that holds the role label's value as
	// written, "" when the pod carries none.
	TagRoleLabel = "role-label"
)

// roleLabels lists the operators' role labels in the order they are read.
var roleLabels = [...]string{LabelCNPGRole, LabelSpiloRole, LabelCrunchyRole}

// pod is the part of a Pod this package reads.
type pod struct {
	Metadata struct {
		Name              string            `json:"name"`
		Labels            map[string]string `json:"labels"`
		DeletionTimestamp *string           `json:"deletionTimestamp"`
	} `json:"metadata"`
	Spec struct {
		Containers []struct {
			Name  string `json:"name"`
			Ports []struct {
				Name          string `json:"name"`
				ContainerPort int    `json:"containerPort"`
				Protocol      string `json:"protocol"`
			} `json:"ports"`
		} `json:"containers"`
	} `json:"spec"`
	Status struct {
		Phase      string `json:"phase"`
		PodIP      string `json:"podIP"`
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		} `json:"conditions"`
	} `json:"status"`
}

func decodePod(raw json.RawMessage) (*pod, error) {
	var p pod
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// ready reports whether the pod can serve: Ready=True, running, with an
// address, and not being deleted. A pod being deleted can stay Ready
// through its grace period; its server is about to stop.
func (p *pod) ready() bool {
	if p.Metadata.DeletionTimestamp != nil || p.Status.PodIP == "" {
		return false
	}
	if p.Status.Phase == "Failed" || p.Status.Phase == "Succeeded" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == "True"
		}
	}
	return false
}

// port returns the PostgreSQL port of the pod's spec: the TCP container
// port named name when name is set; else the first one named
// "postgresql" or "postgres"; else DefaultPort. ok is false only when
// name is set and no port carries it.
func (p *pod) port(name string) (port uint16, ok bool) {
	for _, want := range []string{name, "postgresql", "postgres"} {
		if want == "" {
			continue
		}
		for _, c := range p.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == want && (cp.Protocol == "" || cp.Protocol == "TCP") && cp.ContainerPort > 0 && cp.ContainerPort < 65536 {
					return uint16(cp.ContainerPort), true
				}
			}
		}
		if name != "" {
			return 0, false
		}
	}
	return DefaultPort, true
}

// roleLabel returns the value of the first role label the pod carries:
// user's label, then the operators' in turn, "" when none.
func (p *pod) roleLabel(user string) string {
	l := p.Metadata.Labels
	if v, ok := l[user]; ok && user != "" {
		return v
	}
	for _, k := range roleLabels {
		if v, ok := l[k]; ok {
			return v
		}
	}
	if _, cnpg := l[LabelCNPGCluster]; cnpg {
		return l[LabelCNPGLegacyRole]
	}
	return ""
}

// roleOf maps a role label's value onto the role claimed: the values the
// operators write, in any case. standbyLeader is true for a standby
// cluster's leader, which replicates from outside the cluster.
func roleOf(value string) (role hosthealth.Role, standbyLeader bool) {
	switch strings.ToLower(value) {
	case "primary", "master", "leader":
		return hosthealth.RolePrimary, false
	case "replica", "standby", "sync_standby", "quorum_standby", "follower":
		return hosthealth.RoleReplica, false
	case "standby_leader":
		return hosthealth.RoleReplica, true
	}
	return hosthealth.RoleUnknown, false
}

// addr returns the pod's address for PostgreSQL clients.
func (p *pod) addr(port uint16) string {
	return net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(port)))
}
