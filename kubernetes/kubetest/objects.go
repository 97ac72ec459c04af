package kubetest

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// SourceRole is the Role the harness grants SourceUser in each namespace
// it creates: what a kubernetes.Source needs, and nothing more.
var SourceRole = map[string]any{
	"apiVersion": "rbac.authorization.k8s.io/v1",
	"kind":       "Role",
	"metadata":   map[string]any{"name": "pgfailover"},
	"rules": []any{
		map[string]any{"apiGroups": []string{""}, "resources": []string{"pods"}, "verbs": []string{"get", "list", "watch"}},
		map[string]any{"apiGroups": []string{"postgresql.cnpg.io"}, "resources": []string{"clusters"}, "verbs": []string{"get", "list", "watch"}},
	},
}

// clusterCRD is a minimal CustomResourceDefinition of CloudNativePG's
// Cluster: any spec and status, with the status subresource, as the
// operator writes it.
var clusterCRD = map[string]any{
	"apiVersion": "apiextensions.k8s.io/v1",
	"kind":       "CustomResourceDefinition",
	"metadata":   map[string]any{"name": "clusters.postgresql.cnpg.io"},
	"spec": map[string]any{
		"group": "postgresql.cnpg.io",
		"scope": "Namespaced",
		"names": map[string]any{"plural": "clusters", "singular": "cluster", "kind": "Cluster", "listKind": "ClusterList"},
		"versions": []any{map[string]any{
			"name": "v1", "served": true, "storage": true,
			"schema": map[string]any{"openAPIV3Schema": map[string]any{
				"type": "object", "x-kubernetes-preserve-unknown-fields": true,
			}},
			"subresources": map[string]any{"status": map[string]any{}},
		}},
	},
}

// setUp creates what every test needs: the Cluster resource type.
func (a *APIServer) setUp(ctx context.Context) error {
	if err := a.Do(ctx, http.MethodPost, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", clusterCRD, nil); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		// Served once the CRD is established.
		err := a.Do(ctx, http.MethodGet, "/apis/postgresql.cnpg.io/v1/clusters", nil, nil)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubetest: the Cluster resource is not served: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// CreateNamespace creates namespace ns with its default service account
// (no controller creates it here) and grants SourceUser SourceRole in it.
func (a *APIServer) CreateNamespace(ctx context.Context, ns string) error {
	steps := []struct {
		path string
		obj  any
	}{
		{"/api/v1/namespaces", map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}},
		{"/api/v1/namespaces/" + ns + "/serviceaccounts", map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "default"}}},
		{"/apis/rbac.authorization.k8s.io/v1/namespaces/" + ns + "/roles", SourceRole},
		{"/apis/rbac.authorization.k8s.io/v1/namespaces/" + ns + "/rolebindings", map[string]any{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
			"metadata": map[string]any{"name": "pgfailover"},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pgfailover"},
			"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": SourceUser}},
		}},
	}
	for _, s := range steps {
		if err := a.Do(ctx, http.MethodPost, s.path, s.obj, nil); err != nil {
			return err
		}
	}
	return nil
}

// Pod describes a pod the harness stores.
type Pod struct {
	Name   string
	Labels map[string]string
	// Port is the container port named "postgresql"; 0 means 5432.
	Port int
}

// CreatePod stores a pod in ns, not yet scheduled, without an address
// and not ready.
func (a *APIServer) CreatePod(ctx context.Context, ns string, p Pod) error {
	port := p.Port
	if port == 0 {
		port = 5432
	}
	return a.Do(ctx, http.MethodPost, "/api/v1/namespaces/"+ns+"/pods", map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": p.Name, "labels": p.Labels},
		"spec": map[string]any{
			"automountServiceAccountToken": false,
			"containers": []any{map[string]any{
				"name": "postgres", "image": "postgres",
				"ports": []any{map[string]any{"name": "postgresql", "containerPort": port, "protocol": "TCP"}},
			}},
		},
	}, nil)
}

// SetPodStatus writes a pod's status as the kubelet does: running at ip
// and ready, or not ready (ip "" keeps the address it has).
func (a *APIServer) SetPodStatus(ctx context.Context, ns, name, ip string, ready bool) error {
	st := "False"
	if ready {
		st = "True"
	}
	status := map[string]any{
		"phase":      "Running",
		"conditions": []any{map[string]any{"type": "Ready", "status": st}},
	}
	if ip != "" {
		status["podIP"] = ip
		status["podIPs"] = []any{map[string]any{"ip": ip}}
	}
	return a.Do(ctx, http.MethodPatch, "/api/v1/namespaces/"+ns+"/pods/"+name+"/status", map[string]any{"status": status}, nil)
}

// SetLabels merges labels into a pod's labels; a label set to "" is
// removed.
func (a *APIServer) SetLabels(ctx context.Context, ns, name string, labels map[string]string) error {
	l := make(map[string]any, len(labels))
	for k, v := range labels {
		if v == "" {
			l[k] = nil
		} else {
			l[k] = v
		}
	}
	return a.Do(ctx, http.MethodPatch, "/api/v1/namespaces/"+ns+"/pods/"+name, map[string]any{"metadata": map[string]any{"labels": l}}, nil)
}

// DeletePod deletes a pod at once.
func (a *APIServer) DeletePod(ctx context.Context, ns, name string) error {
	return a.Do(ctx, http.MethodDelete, "/api/v1/namespaces/"+ns+"/pods/"+name+"?gracePeriodSeconds=0", nil, nil)
}

// CreateCluster stores a CloudNativePG Cluster named name in ns.
func (a *APIServer) CreateCluster(ctx context.Context, ns, name string) error {
	return a.Do(ctx, http.MethodPost, "/apis/postgresql.cnpg.io/v1/namespaces/"+ns+"/clusters", map[string]any{
		"apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"instances": 3},
	}, nil)
}

// SetClusterStatus writes a Cluster's status.currentPrimary and
// status.targetPrimary; an empty value leaves that field as it is.
func (a *APIServer) SetClusterStatus(ctx context.Context, ns, name, current, target string) error {
	st := map[string]any{}
	if current != "" {
		st["currentPrimary"] = current
	}
	if target != "" {
		st["targetPrimary"] = target
	}
	return a.Do(ctx, http.MethodPatch, "/apis/postgresql.cnpg.io/v1/namespaces/"+ns+"/clusters/"+name+"/status", map[string]any{"status": st}, nil)
}
