package patroni_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/pgfailover/pgfailover/patroni"
	"github.com/pgfailover/pgfailover/topology"
)

// Decoding an answer of GET /cluster captured from Patroni 3.0.2.
func ExampleDecode() {
	answer, err := os.ReadFile("testdata/patroni-3.0.2-cluster.json")
	if err != nil {
		panic(err)
	}
	cluster, err := patroni.Decode(answer)
	if err != nil {
		panic(err)
	}
	for _, m := range cluster.Members {
		tm := m.Topology(patroni.DefaultZoneTag)
		fmt.Println(m.Name, tm.Addr(), m.Role, m.State, "claims", tm.Role, "lag", m.Lag)
	}
	// Output:
	// pa1 127.0.0.1:35451 leader running claims primary lag unknown
	// pa2 127.0.0.1:35452 replica running claims replica lag 0
	// pa3 127.0.0.1:35453 replica running claims replica lag 0
}

// Only members in the allowed networks or with allowed names are reported.
func ExampleParseAllowList() {
	allow, err := patroni.ParseAllowList("10.0.0.0/8, *.db.internal")
	if err != nil {
		panic(err)
	}
	for _, host := range []string{"10.1.2.3", "192.0.2.1", "pg-1.db.internal", "pg-1.example.com"} {
		fmt.Println(host, allow.Allows(host))
	}
	// Output:
	// 10.1.2.3 true
	// 192.0.2.1 false
	// pg-1.db.internal true
	// pg-1.example.com false
}

// The local server fails: the synchronous standby is raced first, and the
// winner takes new connections until the local server's cooldown ends.
func ExampleFallback() {
	f, err := patroni.NewFallback(patroni.FallbackConfig{Local: "10.0.0.1:5432"})
	if err != nil {
		panic(err)
	}
	f.SetMembers([]topology.Member{
		patroni.Member{Host: "10.0.0.1", Port: 5432, Role: patroni.RoleLeader, State: "running"}.Topology(""),
		patroni.Member{Host: "10.0.0.2", Port: 5432, Role: patroni.RoleReplica, State: "streaming"}.Topology(""),
		patroni.Member{Host: "10.0.0.3", Port: 5432, Role: patroni.RoleSyncStandby, State: "streaming"}.Topology(""),
	})
	start := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)

	fmt.Println(f.Decide(start).Action)
	f.LocalFailed(start, patroni.ReasonRefused)
	fmt.Println(f.Decide(start).Action)
	for i, wave := range f.Plan(start).Waves {
		for _, m := range wave {
			fmt.Println("wave", i+1, m.Addr(), m.Tags[patroni.TagRole])
		}
	}
	f.Won("10.0.0.3:5432", start.Add(time.Second))
	d := f.Decide(start.Add(2 * time.Second))
	fmt.Println(d.Action, d.Addr, d.Lifetime)
	fmt.Println(f.Decide(start.Add(30 * time.Second)).Action)
	// Output:
	// use-local
	// discover
	// wave 1 10.0.0.3:5432 sync_standby
	// wave 2 10.0.0.2:5432 replica
	// use-fallback 10.0.0.3:5432 30s
	// use-local
}

// A Source following a cluster; here a test server stands in for the
// Patroni REST API.
func ExampleSource() {
	answer, err := os.ReadFile("testdata/patroni-4.x-cluster.json")
	if err != nil {
		panic(err)
	}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write(answer)
	}))
	defer api.Close()

	client, err := patroni.NewClient(patroni.ClientConfig{URLs: []string{api.URL}})
	if err != nil {
		panic(err)
	}
	defer client.CloseIdleConnections()
	src, err := patroni.NewSource(patroni.SourceConfig{Client: client})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	_ = src.Watch(ctx, func(t topology.Topology) {
		for _, m := range t.Members {
			fmt.Println(m.Addr(), m.Role, m.Zone, m.Tags[patroni.TagRole], m.Tags[patroni.TagState])
		}
		cancel() // a Pool keeps watching until it closes
	})
	// Output:
	// 10.0.1.11:5432 primary eu-1a leader running
	// 10.0.1.12:5432 replica eu-1b sync_standby streaming
	// 10.0.1.13:5432 replica eu-1c replica streaming
	// 10.0.1.14:5432 unknown eu-1a quorum_standby in archive recovery
}
