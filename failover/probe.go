package failover

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/hosthealth"
)

// probeSQL asks a server for its role and for the zone it advertises (a
// placeholder setting in postgresql.conf; NULL where unset).
const probeSQL = "SELECT pg_is_in_recovery(), current_setting('pgfailover.zone', true)"

// prober keeps one connection to its host for health probes. Only one
// goroutine uses it at a time: NewWithConfig's first probe, then the host's
// probe loop.
type prober struct {
	config        *pgx.ConnConfig
	beforeConnect func(context.Context, *pgx.ConnConfig) error // the user's pool hook, if any
	conn          *pgconn.PgConn
}

// probeResult is what one probe of one host found.
type probeResult struct {
	role hosthealth.Role
	zone string
	err  error
}

func (pr *prober) run(ctx context.Context, timeout time.Duration) probeResult {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if pr.conn == nil || pr.conn.IsClosed() {
		// Probes connect like the pool does, so credentials set by the
		// user's BeforeConnect hook (a rotating token) apply to them too.
		cfg := pr.config.Copy()
		if pr.beforeConnect != nil {
			if err := pr.beforeConnect(ctx, cfg); err != nil {
				return probeResult{err: err}
			}
		}
		conn, err := pgconn.ConnectConfig(ctx, &cfg.Config)
		if err != nil {
			return probeResult{err: err}
		}
		pr.conn = conn
	}
	res := pr.conn.ExecParams(ctx, probeSQL, nil, nil, nil, nil).Read()
	if res.Err == nil && (len(res.Rows) != 1 || len(res.Rows[0]) != 2) {
		res.Err = errors.New("pgfailover: unexpected answer to the health probe")
	}
	if res.Err != nil {
		pr.close()
		return probeResult{err: res.Err}
	}
	r := probeResult{role: hosthealth.RolePrimary, zone: string(res.Rows[0][1])}
	if string(res.Rows[0][0]) == "t" {
		r.role = hosthealth.RoleReplica
	}
	return r
}

func (pr *prober) close() {
	if pr.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		pr.conn.Close(ctx)
		pr.conn = nil
	}
}

// probeTimeout bounds one probe: connecting and asking.
func (p *Pool) probeTimeout() time.Duration {
	if t := p.cfg.ConnConfig.ConnectTimeout; t > 0 {
		return t
	}
	return 5 * time.Second
}

// probeAll probes every host in parallel and records what it finds. It
// fails with ErrNoHost, listing every host's outcome, when no host
// satisfies the target.
func (p *Pool) probeAll(ctx context.Context) error {
	results := make([]probeResult, len(p.hosts))
	var wg sync.WaitGroup
	for i, h := range p.hosts {
		wg.Go(func() { results[i] = h.probe.run(ctx, p.probeTimeout()) })
	}
	wg.Wait()
	fe := &FailoverError{Kind: ErrNoHost}
	usable := false
	for i, r := range results {
		p.observe(i, r)
		switch {
		case r.err != nil:
			fe.Hosts = append(fe.Hosts, HostError{Addr: p.hosts[i].addr, Err: r.err})
		case !p.cfg.Target.Accepts(r.role):
			fe.Hosts = append(fe.Hosts, HostError{Addr: p.hosts[i].addr, Err: &hosthealth.RoleError{Addr: p.hosts[i].addr, Role: r.role, Target: p.cfg.Target}})
		default:
			usable = true
		}
	}
	if usable {
		return nil
	}
	if err := ctx.Err(); err != nil {
		fe.Cause = err
	}
	return fe
}

// observe records a probe's outcome on host i.
func (p *Pool) observe(i int, r probeResult) {
	before := p.tracker.Status(i)
	if r.err != nil {
		if class := hosthealth.Classify(r.err); class != hosthealth.NotFailover {
			p.tracker.ObserveFailure(i, class)
		}
	} else {
		p.tracker.ObserveConnect(i, r.role)
		p.tracker.ObserveZone(i, r.zone)
		if !p.cfg.Target.Accepts(r.role) {
			// Nothing of ours may stay on a host in the wrong role.
			p.hosts[i].pool.Reset()
		}
	}
	p.logChange(before, p.tracker.Status(i), r.err)
}

// startProbes starts one probe loop per host. Close stops and waits for
// them.
func (p *Pool) startProbes() {
	for i, h := range p.hosts {
		p.probes.Go(func() {
			t := time.NewTicker(p.cfg.HealthProbeInterval)
			defer t.Stop()
			for {
				select {
				case <-p.life.Done():
					return
				case <-t.C:
					p.observe(i, h.probe.run(p.life, p.probeTimeout()))
				}
			}
		})
	}
}
