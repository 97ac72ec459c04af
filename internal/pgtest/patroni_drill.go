package pgtest

import (
	"context"
	"fmt"
	"net/http"
	"syscall"
	"time"
)

// Switchover hands the leader role from the current leader to the
// synchronous standby (with Async: to the first running replica in member
// order) with `patronictl switchover --leader <from> --candidate <to>
// --force`, and returns once GET /cluster shows the candidate as leader.
// In synchronous mode Patroni refuses any other candidate. Clients of the
// old leader get 57P01 when it shuts down; use WaitNewLeader to wait until
// the new one accepts writes.
func (pc *PatroniCluster) Switchover(ctx context.Context) (from, to *PatroniMember, err error) {
	st, err := pc.status(ctx)
	if err != nil {
		return nil, nil, err
	}
	if from, err = pc.one(st, "leader", ErrNoLeader); err != nil {
		return nil, nil, fmt.Errorf("pgtest: switchover: %w", err)
	}
	if !pc.opts.Async {
		to, err = pc.one(st, "sync_standby", ErrNoSyncStandby)
		if err != nil {
			return nil, nil, fmt.Errorf("pgtest: switchover: %w", err)
		}
	} else {
		for _, s := range st.Members {
			if s.Role != "leader" && s.State == "running" {
				to = pc.Member(s.Name)
				break
			}
		}
		if to == nil {
			return nil, nil, fmt.Errorf("pgtest: switchover: no running replica to switch over to")
		}
	}
	out, err := pc.ctl(ctx, from, "switchover", "--leader", from.name, "--candidate", to.name, "--force")
	if err != nil {
		return nil, nil, fmt.Errorf("pgtest: switchover from %s to %s: %w", from.name, to.name, err)
	}
	// patronictl exits with 0 even when Patroni refused, so look at the
	// outcome. After a 200 the lock has moved already; after a fallback to
	// the DCS it moves within a few HA loops.
	wctx, cancel := context.WithTimeout(ctx, 2*pc.opts.TTL)
	defer cancel()
	for {
		if leader, err := pc.Leader(wctx); err == nil && leader == to {
			return from, to, nil
		}
		if err := Sleep(wctx, 20*time.Millisecond); err != nil {
			return nil, nil, fmt.Errorf("pgtest: switchover from %s to %s: %s is not leader: %w\npatronictl said:\n%s",
				from.name, to.name, to.name, err, tail(out, 2048))
		}
	}
}

// ctl runs patronictl with the configuration of member m and returns its
// output. When ctx ends, patronictl is killed.
func (pc *PatroniCluster) ctl(ctx context.Context, m *PatroniMember, args ...string) (string, error) {
	cmd := pc.command(pc.base, pc.patronictl, append([]string{"-c", m.configPath}, args...)...)
	return runToEnd(ctx, cmd, fmt.Sprintf("patronictl %v", args))
}

// KillLeaderPostmaster kills the leader's postmaster with SIGKILL and
// returns the leader (as GET /cluster showed it). Patroni keeps running on
// that member; with primary_start_timeout 0 it gives up the lock instead
// of restarting the server in place, the synchronous standby is promoted,
// and the old leader comes back as a replica by itself (rewound if need
// be). WaitNewLeader and WaitHealthy wait for these steps.
func (pc *PatroniCluster) KillLeaderPostmaster(ctx context.Context) (*PatroniMember, error) {
	leader, err := pc.Leader(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgtest: kill the leader's postmaster: %w", err)
	}
	pid := leader.livePostmaster()
	if pid == 0 {
		return nil, leader.errorf("kill the leader's postmaster: no postmaster runs")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return nil, leader.errorf("kill postmaster %d: %w", pid, err)
	}
	return leader, nil
}

// KillLeaderNode kills the leader as a lost machine would die: its Patroni
// and every process of its PostgreSQL, with SIGKILL. It returns the old
// leader at once. The lock expires after about the TTL and the synchronous
// standby is promoted; RestartMember brings the killed member back.
func (pc *PatroniCluster) KillLeaderNode(ctx context.Context) (*PatroniMember, error) {
	leader, err := pc.Leader(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgtest: kill the leader node: %w", err)
	}
	leader.kill()
	return leader, nil
}

// KillMember kills member m like KillLeaderNode kills the leader: Patroni
// and its PostgreSQL, with SIGKILL. RestartMember brings it back.
func (pc *PatroniCluster) KillMember(ctx context.Context, m *PatroniMember) error {
	if m == nil || m.pc != pc {
		return fmt.Errorf("pgtest: KillMember: not a member of this cluster")
	}
	m.kill()
	return nil
}

// RestartMember starts Patroni again on a member that KillLeaderNode or
// KillMember killed, and returns once its REST API answers. It first waits
// until the old postmaster is gone for good (an unreaped postmaster keeps
// the pid in postmaster.pid alive, and Patroni would refuse to start the
// server), then until etcd grants a lease promptly (Patroni exits at start
// when etcd is slow to grant its own; at most 30 s). Patroni then runs
// crash recovery and, where the member holds WAL the new leader never had,
// pg_rewind; WaitHealthy waits until it streams.
func (pc *PatroniCluster) RestartMember(ctx context.Context, m *PatroniMember) error {
	if m == nil || m.pc != pc {
		return fmt.Errorf("pgtest: RestartMember: not a member of this cluster")
	}
	if m.Running() {
		return fmt.Errorf("%w: Patroni of %s", ErrRunning, m.name)
	}
	old := m.postmasterPID()
	for (old != 0 && pidAlive(old)) || len(pidsUnder(m.dir)) > 0 {
		if err := Sleep(ctx, 20*time.Millisecond); err != nil {
			return m.errorf("waiting for the old postmaster %d to be gone: %w", old, err)
		}
	}
	if err := m.startPatroni(ctx); err != nil {
		return err
	}
	m.mu.Lock()
	p := m.proc
	m.mu.Unlock()
	for {
		if p.exited() {
			return m.errorf("Patroni exited at start (%v)", p.cmd.ProcessState)
		}
		if code, _, err := pc.apiGet(ctx, m, "/liveness"); err == nil && code == http.StatusOK {
			return nil
		}
		if err := Sleep(ctx, 20*time.Millisecond); err != nil {
			return m.errorf("waiting for Patroni's REST API: %w", err)
		}
	}
}
