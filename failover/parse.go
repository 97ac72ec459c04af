package failover

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgfailover/pgfailover/failover/internal/connkeys"
	"github.com/pgfailover/pgfailover/internal/connstr"
	"github.com/pgfailover/pgfailover/internal/netconn"
)

// ParseConfig builds a Config from a connection string in either of libpq's
// forms, a URL or keyword/value pairs:
//
//	postgres://app:secret@db-a:5432,db-b:5432,db-c:5432/app?target=primary&zone=eu-1a
//	host=db-a,db-b,db-c port=5432 user=app dbname=app target=primary zone=eu-1a
//
// Every key pgx and pgxpool know keeps its meaning: host and port lists
// (host=a,b port=5432,5433, or a:5432,b:5433 in a URL), dbname, user,
// password, passfile, sslmode and the other ssl* keys, connect_timeout,
// service, application_name and other runtime parameters,
// statement_cache_capacity, default_query_exec_mode, and the pool keys
// pool_max_conns, pool_min_conns, pool_min_idle_conns,
// pool_max_conn_lifetime, pool_max_conn_lifetime_jitter,
// pool_max_conn_idle_time, pool_health_check_period and pool_ping_timeout.
// The pool_* keys apply to each host's pool on its own: pool_max_conns=10
// with three hosts allows up to 30 connections in all. The PG* environment
// variables and the service file count as they do for pgx.
//
// The keys below belong to this package; this table is their one
// reference (the guide links here). ParseConfig removes them, so none of
// them ever reaches a server as a runtime parameter:
//
//	key                       default     meaning
//	target_session_attrs      read-write  libpq's key: which role to connect to (see below)
//	target                    read-write  the same, shorter; may not disagree with target_session_attrs
//	zone                      ""          the client's zone; hosts in it are tried first by the
//	                                      Reader and by targets that take replicas (read-write
//	                                      and primary go to the primary, whatever its zone)
//	zones                     ""          comma list, one zone per host, positional like port=
//	                                      (a single value applies to every host; "a,,b" leaves
//	                                      the second host without a zone)
//	failover_max_attempts     8           sends of a call's statement to hosts that fail under it,
//	                                      the first included; waiting for a usable host and
//	                                      a host in the wrong role use none; at least 1
//	failover_ready_conns      pool_max_conns  connections opened, while calls wait for a primary,
//	                                      on the replica likeliest to be promoted, one per
//	                                      waiting call at most, never more than pool_max_conns;
//	                                      each parses there the waiting calls' statements (the
//	                                      first 16); 0 for none, for replicas without
//	                                      connection slots to spare; >= 0
//	failover_max_duration     30s         time one call may spend failing over, waiting for a
//	                                      usable host included; > 0
//	failover_backoff_initial  50ms        first backoff base before sending again to a host
//	                                      that failed under the same call; > 0
//	failover_backoff_max      1s          largest backoff base; >= failover_backoff_initial
//	                                      (when unset it is raised to failover_backoff_initial
//	                                      if that is larger than 1s)
//	health_probe_interval     1s          period of the role and zone probes while no call
//	                                      waits for a usable host; > 0
//	health_probe_wait_max     50ms        while calls wait for a usable host, a reachable host
//	                                      is probed 2ms apart at first, then a tenth of the
//	                                      time waited apart, at most this, jittered into
//	                                      [1/2, 1] of that (a host that cannot be reached
//	                                      backs off from 5ms to 150ms instead); larger trades
//	                                      detection delay for load; >= 2ms and
//	                                      <= health_probe_interval (when unset, lowered to it)
//	name_recheck_interval     50ms        while calls wait for a primary and a host's name leads
//	                                      to a standby streaming from a primary elsewhere (an
//	                                      endpoint or DNS name lagging behind a failover), the
//	                                      shortest interval between the probe's fresh
//	                                      connections through the name, each a login on the
//	                                      server it reaches (the interval grows with the wait,
//	                                      to health_probe_interval); larger trades the first
//	                                      write after the name moves for the standby's CPU;
//	                                      >= 0, 0 opens none
//	health_probe_timeout      3s          how long a probe's question may go unanswered on
//	                                      its open connection before the host is judged silent
//	                                      and every connection to it is cut; > 0
//	pin_after_write           1s          for this long after a call that may have written, a
//	                                      read through the Reader goes to a replica only once
//	                                      it has replayed the write, else to the primary
//	                                      (read-your-writes); >= 0, 0 turns it off
//	max_lag                   0           the largest staleness bound a replica may serve the
//	                                      Reader's reads with; 0 = no gate; otherwise
//	                                      > health_probe_interval
//	replica_wait              20ms        how long a read that must see a write (pinned by
//	                                      one, or with a CausalToken) waits for a replica to
//	                                      replay it before going to the primary; >= 0,
//	                                      0 sends it to the primary at once
//	outage_reads              replica     what such a read does while no primary is usable:
//	                                      replica: it goes to a replica that holds every
//	                                      write the replicas received (every acknowledged
//	                                      write, with synchronous replication; see Reader);
//	                                      wait: it waits for a primary
//	patroni_api_urls          ""          comma list of http or https URLs of the Patroni REST
//	                                      API: the hosts, their claimed roles and zones come
//	                                      from GET /cluster, merged with the string's hosts;
//	                                      the string may then name no host at all
//	patroni_refresh_interval  3s          how often GET /cluster is read (and at once when a
//	                                      host fails or a call waits for a usable host); > 0
//	patroni_allowed_hosts     ""          comma list of CIDRs and host-name patterns
//	                                      ("*.db.internal"); a member outside it is never
//	                                      dialled; empty = every member
//	patroni_zone_tag          zone        the Patroni tag that holds a member's zone
//	query_wait_timeout        5s          with fallback_local: a call's failover budget when
//	                                      shorter than failover_max_duration, so the longest
//	                                      a call waits for a host while the local server is
//	                                      down; > 0
//	fallback_local            off         local-first fallback: the string's first host is the
//	                                      local server; when it fails, calls go to a member
//	                                      found by racing the sync standbys, then the others;
//	                                      on or off; needs patroni_api_urls
//	fallback_connect_timeout  5s          local-first fallback: each candidate's connect; > 0
//	fallback_cooldown         30s         local-first fallback: how long the local server is
//	                                      left alone after it fails, and a fallback host is
//	                                      kept; > 0
//	fallback_lifetime         30s         local-first fallback: the longest a connection to
//	                                      a fallback host lives; > 0
//	tcp_user_timeout          10000       libpq's key, in milliseconds: how long data sent to a
//	                                      server may go unacknowledged before the connection is
//	                                      dropped (Linux TCP_USER_TIMEOUT; ignored elsewhere);
//	                                      0 = the operating system's default; >= 0
//	lazy_connect              off         on: New returns at once, like pgxpool's, without
//	                                      reaching any host; the first calls wait for a usable
//	                                      host like any call (see NewWithConfig); on or off
//
// Any other key starting with fallback_ is an error. Durations are written
// in Go syntax ("250ms", "2s", "1m30s") or as a bare whole number of
// milliseconds ("250"). Keys are case-sensitive, as in pgx.
//
// Targets: any; read-write or primary; read-only, standby or replica;
// prefer-standby or prefer-replica. When the string names none, the
// target is read-write, which differs from libpq's "any". As with libpq,
// target_session_attrs may also come from a service file or from the
// PGTARGETSESSIONATTRS environment variable, in that order of precedence
// below the connection string itself; a target= key overrides the
// environment variable without conflict. pgconn's own target_session_attrs
// check is not used: it would reject the extra spellings and does not know
// the Pool's ranking, so ParseConfig keeps it from pgconn and leaves
// ConnConfig.ValidateConnect nil.
//
// tcp_user_timeout and keepalives: ParseConfig sets ConnConfig.DialFunc to
// a dialer like pgconn's with TCP keepalives every 5s after 5s of silence
// (pgconn leaves Go's 15s) and, on Linux, TCP_USER_TIMEOUT on every TCP
// socket, 10s unless tcp_user_timeout says otherwise. libpq's default is
// the operating system's, which lets a statement sent into a network
// blackhole wait about 15 minutes of retransmissions; 10s is far beyond
// any retransmission on a working network and well inside
// failover_max_duration, so such a statement ends with
// ErrCommitOutcomeUnknown instead. With the keepalives, a connection
// waiting for an answer from a peer that vanished is dropped after about
// 10s as well. A DialFunc set on the Config after ParseConfig replaces
// this dialer, and with it tcp_user_timeout and the keepalives.
//
// connect_timeout: when neither the string, a service file nor
// PGCONNECT_TIMEOUT sets it, ParseConfig sets ConnConfig.ConnectTimeout to
// 5s, so a host that silently drops packets cannot stall a walk over the
// hosts. connect_timeout=0 keeps libpq's meaning of no limit for the
// Pool's connections; a health probe's connect (and New's wait for a
// topology source's first report) must never hang, so with
// connect_timeout=0 it is bounded by 5s instead. The timeout covers one
// host (its TLS and plain attempts together); name resolution runs under
// the caller's context.
//
// Errors are *ConfigError values. They name the key and the bad value, and
// never contain the connection string or the password.
func ParseConfig(connString string) (*Config, error) {
	scan, scanErr := connstr.Scan(connString)
	p := &parseState{secrets: scan.Secrets()}

	if scanErr != nil {
		// The scanner follows pgconn's grammar, so pgx rejects the string
		// too and its message is the more precise one.
		if _, err := pgxpool.ParseConfig(connString); err != nil {
			return nil, p.pgxError(err)
		}
		return nil, p.fail(&connkeys.Error{Msg: scanErr.Error()})
	}

	svc := scan.ServiceSettings()
	tsa := scan.TargetSessionAttrs(svc)
	pgxString := scan.WithoutTargetSessionAttrs(tsa.FromEnv || tsa.FromService)
	poolConfig, err := pgxpool.ParseConfig(pgxString)
	if err != nil {
		return nil, p.pgxError(err)
	}
	cc := poolConfig.ConnConfig
	p.secrets = append(p.secrets, cc.Password)

	// Take every key of ours out of RuntimeParams before anything else, so
	// none can be left behind by an early return.
	own := connkeys.Take(cc.RuntimeParams)
	s, kerr := connkeys.Read(own, tsa, int(poolConfig.MaxConns))
	if kerr != nil {
		return nil, p.fail(kerr)
	}
	c := &Config{
		Config:               poolConfig,
		Target:               s.Target,
		Zone:                 s.Zone,
		MaxAttempts:          s.MaxAttempts,
		ReadyConns:           s.ReadyConns,
		MaxDuration:          s.MaxDuration,
		BackoffInitial:       s.BackoffInitial,
		BackoffMax:           s.BackoffMax,
		HealthProbeInterval:  s.HealthProbeInterval,
		HealthProbeWaitMax:   s.HealthProbeWaitMax,
		NameRecheckInterval:  s.NameRecheckInterval,
		HealthProbeTimeout:   s.HealthProbeTimeout,
		LazyConnect:          s.LazyConnect,
		connString:           connString,
		Replica:              ReplicaConfig(s.Replica),
		patroni:              s.Patroni,
		tcpUserTimeout:       s.TCPUserTimeout,
		probeConnectTimeout:  connkeys.DefaultConnectTimeout,
		createdByParseConfig: true,
	}
	cc.DialFunc = netconn.DialFunc(c.tcpUserTimeout)

	// The Pool checks roles itself; pgconn's check must stay out of the way.
	cc.ValidateConnect = nil
	if !scan.ConnectTimeoutSet(&cc.Config, svc) {
		cc.ConnectTimeout = connkeys.DefaultConnectTimeout
	}

	hosts := splitHosts(&cc.Config)
	c.templateTLS = hosts[0].tls
	if cc.TLSConfig != nil {
		c.parsedServerName = cc.TLSConfig.ServerName
	}
	if len(c.patroni.APIURLs) > 0 && !scan.NamesHost(svc) {
		// pgconn filled in its default host; with Patroni the members
		// are the hosts.
		hosts = nil
	}
	zones, kerr := s.HostZones(len(hosts))
	if kerr != nil {
		return nil, p.fail(kerr)
	}
	for i, z := range zones {
		hosts[i].Zone = z
	}
	c.Hosts = dedupHosts(hosts)

	// Each host's pool gets its own Host, Port and TLS variants
	// (Fallbacks) from poolConfig, and the TLSConfig set here when the pool is built.
	cc.Fallbacks = nil
	return c, nil
}
