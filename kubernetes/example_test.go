package kubernetes_test

import (
	"fmt"

	"github.com/pgfailover/pgfailover/kubernetes"
)

// A connection string whose hosts are a CloudNativePG Cluster's pods. It
// names no host, so the pods are the only ones; failover.NewWithConfig
// (or kubernetes.New in one step) starts the Pool, which watches them.
func ExampleParseConfig() {
	cfg, err := kubernetes.ParseConfig("postgres://app:secret@/app?kubernetes_cluster=pg-main&kubernetes_namespace=db" +
		"&kubernetes_kubeconfig=testdata/kubeconfig")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(cfg.Hosts), "hosts from the string")
	fmt.Println(cfg.Topology)
	// Output:
	// 0 hosts from the string
	// kubernetes.Source{Namespace: "db", Selector: "cnpg.io/cluster=pg-main,cnpg.io/instanceRole", Cluster: "pg-main"}
}

// Any operator's pods, by label selector; the namespace comes from the
// kubeconfig's context.
func ExampleNewSource() {
	src, err := kubernetes.NewSource(kubernetes.SourceConfig{
		Selector:   "application=spilo,cluster-name=acid-main",
		Kubeconfig: "testdata/kubeconfig",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(src)
	// Output:
	// kubernetes.Source{Namespace: "apps", Selector: "application=spilo,cluster-name=acid-main"}
}
