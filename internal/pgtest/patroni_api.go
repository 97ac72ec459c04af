package pgtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoLeader is returned (wrapped) by Leader when GET /cluster shows no
// leader at the moment.
var ErrNoLeader = errors.New("pgtest: the Patroni cluster has no leader")

// ErrNoSyncStandby is returned (wrapped) by SyncStandby when GET /cluster
// shows no synchronous standby at the moment.
var ErrNoSyncStandby = errors.New("pgtest: the Patroni cluster has no synchronous standby")

// healthyLag is the largest replica lag, in bytes of WAL, that WaitHealthy
// accepts (Patroni's default maximum_lag_on_failover).
const healthyLag = 1 << 20

// clusterStatus is the answer of GET /cluster in Patroni 3.0.2.
type clusterStatus struct {
	Members []memberStatus `json:"members"`
	Pause   bool           `json:"pause"`
}

type memberStatus struct {
	Name     string          `json:"name"`
	Role     string          `json:"role"`  // leader, sync_standby, replica
	State    string          `json:"state"` // running, starting, stopped, ...
	Timeline int             `json:"timeline"`
	Lag      json.RawMessage `json:"lag"` // bytes, or "unknown"; absent on the leader
}

// lag returns the member's lag in bytes and whether Patroni knew it.
func (s memberStatus) lag() (int64, bool) {
	var n int64
	if err := json.Unmarshal(s.Lag, &n); err != nil {
		return 0, false
	}
	return n, true
}

func (st *clusterStatus) withRole(role string) []memberStatus {
	var ms []memberStatus
	for _, m := range st.Members {
		if m.Role == role {
			ms = append(ms, m)
		}
	}
	return ms
}

// apiGet sends GET path to the member's REST API and returns the status
// code and (up to 1 MiB of) the body.
func (pc *PatroniCluster) apiGet(ctx context.Context, m *PatroniMember, path string) (int, []byte, error) {
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, m.APIURL()+path, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := pc.hc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: GET %s: %w", m.name, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("%s: GET %s: %w", m.name, path, err)
	}
	return resp.StatusCode, body, nil
}

// status reads GET /cluster from the first member whose API answers.
func (pc *PatroniCluster) status(ctx context.Context) (*clusterStatus, error) {
	var errs []error
	for _, m := range pc.members {
		code, body, err := pc.apiGet(ctx, m, "/cluster")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if code != http.StatusOK {
			errs = append(errs, fmt.Errorf("%s: GET /cluster: status %d", m.name, code))
			continue
		}
		var st clusterStatus
		if err := json.Unmarshal(body, &st); err != nil {
			errs = append(errs, fmt.Errorf("%s: GET /cluster: %w", m.name, err))
			continue
		}
		return &st, nil
	}
	return nil, fmt.Errorf("pgtest: no Patroni member answered GET /cluster: %w", errors.Join(errs...))
}

// one returns the member that st shows in role, or an error wrapping
// none when there is none.
func (pc *PatroniCluster) one(st *clusterStatus, role string, none error) (*PatroniMember, error) {
	ms := st.withRole(role)
	if len(ms) == 0 {
		return nil, none
	}
	m := pc.Member(ms[0].Name)
	if m == nil {
		return nil, fmt.Errorf("pgtest: GET /cluster names an unknown %s %q", role, ms[0].Name)
	}
	return m, nil
}

// Leader returns the member that GET /cluster shows as leader: the holder
// of the leader lock in the DCS. Right after a fault that may not be the
// member whose PostgreSQL accepts writes (a leader whose postmaster was
// killed keeps the lock for a few seconds); WaitNewLeader checks the
// server itself.
func (pc *PatroniCluster) Leader(ctx context.Context) (*PatroniMember, error) {
	st, err := pc.status(ctx)
	if err != nil {
		return nil, err
	}
	return pc.one(st, "leader", ErrNoLeader)
}

// SyncStandby returns the member that GET /cluster shows as synchronous
// standby (role sync_standby), the only one Patroni promotes in
// synchronous mode.
func (pc *PatroniCluster) SyncStandby(ctx context.Context) (*PatroniMember, error) {
	st, err := pc.status(ctx)
	if err != nil {
		return nil, err
	}
	return pc.one(st, "sync_standby", ErrNoSyncStandby)
}

// WaitHealthy waits until the cluster is healthy and returns nil, or
// returns an error saying what was still wrong when ctx ended. It fails at
// once when a member's Patroni does not run (after KillLeaderNode, say:
// RestartMember brings it back).
//
// Healthy means, in Patroni 3.0.2 terms (whose /cluster shows replicas as
// "running", not "streaming"): GET /cluster lists every member in state
// running on one timeline, with one leader, one sync_standby (none when
// Async), and every replica's lag known and at most 1 MiB; and the
// leader's PostgreSQL is out of recovery with every other member streaming
// from it in pg_stat_replication.
func (pc *PatroniCluster) WaitHealthy(ctx context.Context) error {
	var why string
	for {
		for _, m := range pc.members {
			m.mu.Lock()
			p := m.proc
			m.mu.Unlock()
			if p == nil || p.exited() {
				return m.errorf("Patroni is not running, so the cluster cannot become healthy")
			}
		}
		ok, reason := pc.healthy(ctx)
		if ok {
			return nil
		}
		why = reason
		if err := Sleep(ctx, 50*time.Millisecond); err != nil {
			return fmt.Errorf("pgtest: waiting for a healthy Patroni cluster: %w (last seen: %s)", err, why)
		}
	}
}

// healthy checks the cluster once; when it is not healthy, the reason says
// why.
func (pc *PatroniCluster) healthy(ctx context.Context) (bool, string) {
	st, err := pc.status(ctx)
	if err != nil {
		return false, err.Error()
	}
	if len(st.Members) != len(pc.members) {
		names := make([]string, len(st.Members))
		for i, m := range st.Members {
			names[i] = m.Name
		}
		return false, fmt.Sprintf("/cluster lists %d of %d members %v", len(st.Members), len(pc.members), names)
	}
	if st.Pause {
		return false, "the cluster is paused"
	}
	leaders := st.withRole("leader")
	if len(leaders) != 1 {
		return false, fmt.Sprintf("%d leaders", len(leaders))
	}
	syncs := st.withRole("sync_standby")
	if want := map[bool]int{false: 1, true: 0}[pc.opts.Async]; len(syncs) != want {
		return false, fmt.Sprintf("%d synchronous standbys, want %d", len(syncs), want)
	}
	for _, s := range st.Members {
		if pc.Member(s.Name) == nil {
			return false, fmt.Sprintf("unknown member %q", s.Name)
		}
		if s.State != "running" {
			return false, fmt.Sprintf("%s is %q", s.Name, s.State)
		}
		if s.Timeline == 0 || s.Timeline != leaders[0].Timeline {
			return false, fmt.Sprintf("%s is on timeline %d, the leader on %d", s.Name, s.Timeline, leaders[0].Timeline)
		}
		if s.Role == "leader" {
			continue
		}
		if lag, ok := s.lag(); !ok || lag > healthyLag {
			return false, fmt.Sprintf("%s lags %s bytes", s.Name, s.Lag)
		}
	}
	leader := pc.Member(leaders[0].Name)
	streaming, err := leader.streamingReplicas(ctx)
	if err != nil {
		return false, err.Error()
	}
	for _, m := range pc.members {
		if m != leader && !streaming[m.name] {
			return false, fmt.Sprintf("%s is not streaming from the leader %s (streaming: %v)",
				m.name, leader.name, sortedKeys(streaming))
		}
	}
	return true, ""
}

// streamingReplicas returns the application names that the member's
// pg_stat_replication shows streaming. The member must be out of recovery.
func (m *PatroniMember) streamingReplicas(ctx context.Context) (map[string]bool, error) {
	qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(qctx, m.adminConnString())
	if err != nil {
		return nil, fmt.Errorf("%s: connect: %w", m.name, err)
	}
	defer conn.Close(context.Background())
	var inRecovery bool
	if err := conn.QueryRow(qctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil {
		return nil, fmt.Errorf("%s: %w", m.name, err)
	}
	if inRecovery {
		return nil, fmt.Errorf("%s holds the leader lock but is in recovery", m.name)
	}
	rows, err := conn.Query(qctx, "SELECT application_name FROM pg_stat_replication WHERE state = 'streaming'")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.name, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.name, err)
	}
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set, nil
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// WaitNewLeader waits until a member other than old (which may be nil)
// answers GET /primary with 200 and its PostgreSQL reports that it is out
// of recovery, and returns that member. Patroni's word alone is not
// enough: a member whose postmaster was killed keeps answering 200 on
// /primary for a few seconds.
func (pc *PatroniCluster) WaitNewLeader(ctx context.Context, old *PatroniMember) (*PatroniMember, error) {
	var last []string
	for {
		last = last[:0]
		for _, m := range pc.members {
			if m == old {
				continue
			}
			code, _, err := pc.apiGet(ctx, m, "/primary")
			if err != nil {
				last = append(last, err.Error())
				continue
			}
			if code != http.StatusOK {
				last = append(last, fmt.Sprintf("%s: GET /primary: %d", m.name, code))
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			inRecovery, err := m.InRecovery(rctx)
			cancel()
			if err != nil {
				last = append(last, err.Error())
				continue
			}
			if inRecovery {
				last = append(last, m.name+": /primary says 200, the server is still in recovery")
				continue
			}
			return m, nil
		}
		if err := Sleep(ctx, 20*time.Millisecond); err != nil {
			from := "any member"
			if old != nil {
				from = "a member other than " + old.name
			}
			return nil, fmt.Errorf("pgtest: waiting for %s to become primary: %w (last seen: %s)",
				from, err, strings.Join(last, "; "))
		}
	}
}
