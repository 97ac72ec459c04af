package pgtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// A Patroni member: its directories, ports and configuration file.

// newMember prepares the directories of member i and reserves its ports.
func (pc *PatroniCluster) newMember(i int) (*PatroniMember, error) {
	name := "member" + strconv.Itoa(i)
	dir := filepath.Join(pc.base, name)
	// The member directory belongs to the server user: Patroni creates the
	// data directory and the pgpass file in it.
	if err := pc.bins.mkdirOwned(dir, 0o755); err != nil {
		return nil, fmt.Errorf("pgtest: %s: %w", name, err)
	}
	m := &PatroniMember{
		pc:         pc,
		name:       name,
		dir:        dir,
		dataDir:    filepath.Join(dir, "data"),
		sockDir:    filepath.Join(dir, "sock"),
		configPath: filepath.Join(dir, "patroni.yml"),
		logPath:    filepath.Join(dir, "patroni.log"),
	}
	if i < len(pc.opts.Zones) {
		m.zone = pc.opts.Zones[i]
	}
	// A Unix socket path is limited to 107 bytes on Linux.
	if len(m.sockDir)+len("/.s.PGSQL.65535") > 100 {
		s, err := os.MkdirTemp("/tmp", fmt.Sprintf("%s%d-s", dirPrefix, os.Getpid()))
		if err != nil {
			return nil, fmt.Errorf("pgtest: %w", err)
		}
		m.shortSock = s
		if err := os.Chmod(s, 0o755); err != nil {
			return nil, fmt.Errorf("pgtest: %w", err)
		}
		m.sockDir = filepath.Join(s, "s")
	}
	if err := pc.bins.mkdirOwned(m.sockDir, 0o700); err != nil {
		return nil, fmt.Errorf("pgtest: %s: %w", name, err)
	}
	var err error
	if m.pgPort, err = reservePort(); err != nil {
		return nil, err
	}
	if m.apiPort, err = reservePort(); err != nil {
		releasePort(m.pgPort)
		return nil, err
	}
	return m, nil
}

// writeConfig writes the member's Patroni configuration. It is JSON, which
// Patroni's YAML loader reads as is.
func (m *PatroniMember) writeConfig(secrets map[string]string) error {
	pc := m.pc
	secs := func(d time.Duration) int { return int(d / time.Second) }
	loopback := func(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
	// Settings Patroni takes from the DCS only (they must match on every
	// member) go to bootstrap.dcs; the others are local.
	clusterParams := map[string]any{
		"max_connections":       100,
		"max_wal_senders":       10,
		"max_replication_slots": 10,
		"wal_level":             "replica",
		"wal_log_hints":         "on",
		"hot_standby":           "on",
		"wal_keep_size":         "64MB",
	}
	localParams := map[string]any{
		"unix_socket_directories":     m.sockDir,
		"shared_buffers":              "16MB",
		"fsync":                       "off",
		"full_page_writes":            "on", // off breaks pg_rewind
		"wal_retrieve_retry_interval": "200ms",
		"logging_collector":           "off",
	}
	if m.zone != "" {
		localParams["pgfailover.zone"] = m.zone
	}
	cfg := map[string]any{
		"scope":     pc.scope,
		"namespace": "/pgtest/",
		"name":      m.name,
		"log":       map[string]any{"level": "INFO"},
		"restapi": map[string]any{
			"listen":          loopback(m.apiPort),
			"connect_address": loopback(m.apiPort),
		},
		"etcd3":    map[string]any{"hosts": []string{pc.etcd.endpoint()}},
		"watchdog": map[string]any{"mode": "off"},
		"bootstrap": map[string]any{
			"dcs": map[string]any{
				"ttl":                     secs(pc.opts.TTL),
				"loop_wait":               secs(pc.opts.LoopWait),
				"retry_timeout":           secs(pc.opts.RetryTimeout),
				"maximum_lag_on_failover": 1 << 20,
				"synchronous_mode":        !pc.opts.Async,
				// A leader whose postmaster died is failed over at
				// once instead of being restarted in place.
				"primary_start_timeout": 0,
				"postgresql": map[string]any{
					"use_pg_rewind": true,
					"use_slots":     true,
					"parameters":    clusterParams,
				},
			},
			// The first leader copies the harness's initdb template
			// instead of running initdb: faster, and shared with Cluster.
			"method": "pgtest_template",
			"pgtest_template": map[string]any{
				"command":   "cp -a " + shellQuote(m.pc.template) + " " + shellQuote(m.dataDir),
				"no_params": true,
			},
		},
		"postgresql": map[string]any{
			"listen":          loopback(m.pgPort),
			"connect_address": loopback(m.pgPort),
			"data_dir":        m.dataDir,
			"bin_dir":         pc.bins.dir,
			"pgpass":          filepath.Join(m.dir, "pgpass"),
			"use_unix_socket": true,
			// A spread checkpoint at the start of each base backup would
			// pace its few writes over seconds.
			"basebackup": []any{map[string]string{"checkpoint": "fast"}, "no-sync"},
			"authentication": map[string]any{
				"superuser":   map[string]string{"username": "postgres", "password": pc.opts.Password},
				"replication": map[string]string{"username": "replicator", "password": secrets["replication"]},
				"rewind":      map[string]string{"username": "rewinder", "password": secrets["rewind"]},
			},
			"parameters": localParams,
			"pg_hba": []string{
				"local all all trust",
				"local replication all trust",
				"host replication all 127.0.0.1/32 trust",
				"host all all 127.0.0.1/32 scram-sha-256",
			},
		},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(cfg); err != nil {
		return fmt.Errorf("pgtest: %s: config: %w", m.name, err)
	}
	if err := pc.bins.writeOwned(m.configPath, buf.Bytes()); err != nil {
		return fmt.Errorf("pgtest: %s: config: %w", m.name, err)
	}
	return nil
}
