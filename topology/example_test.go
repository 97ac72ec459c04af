package topology_test

import (
	"context"
	"fmt"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/topology"
)

// A source reports whole topologies; members are known by address.
func ExampleStatic() {
	src := topology.Static{Members: []topology.Member{
		{Host: "10.0.0.1", Port: 5432, Role: hosthealth.RolePrimary, Zone: "eu-1a"},
		{Host: "fe80::1", Port: 5433, Role: hosthealth.RoleReplica},
	}}
	ctx, cancel := context.WithCancel(context.Background())
	_ = src.Watch(ctx, func(t topology.Topology) {
		for _, m := range t.Members {
			fmt.Println(m.Addr(), m.Role, m.Zone)
		}
		cancel() // a Pool keeps watching until it closes
	})
	// Output:
	// 10.0.0.1:5432 primary eu-1a
	// [fe80::1]:5433 replica
}
