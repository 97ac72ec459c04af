package sqlclass

// deniedFunction is a built-in function whose call makes a statement
// unsafe to run twice. write: it changes something outside the session
// (data, the server, another connection); session: it changes or depends
// on state kept by this one session or transaction. An entry may be both.
type deniedFunction struct {
	name    string // lower case; compared ASCII case-insensitively
	prefix  bool   // name is a prefix: every function starting with it matches
	write   bool
	session bool
	reason  string // "unsafe function " + name (+ "*" for a prefix)
}

// deniedFunctions is the single list of functions that the classifier
// refuses to replay. A name matches when it is called: followed by "(",
// with only white space or comments between. The schema qualifier is
// ignored (pg_catalog.nextval and myschema.nextval both match) and so is
// quoting ("nextval"), so a user function that shares a name with one of
// these is refused too.
//
// Order matters only within one first letter: the first match wins, so
// exact names come before a prefix that also covers them.
//
// Deliberately allowed, because re-running them is harmless for a read:
// random (another value is as good as the first), pg_sleep,
// txid_current_if_assigned and pg_current_xact_id_if_assigned (they never
// assign an ID), pg_read_file and the other pg_read_* / pg_ls_* / pg_stat_*
// readers, current_setting, pg_backend_pid.
var deniedFunctions = [...]deniedFunction{
	// Sequences. currval and lastval read a value kept by the session.
	{name: "nextval", write: true, reason: "unsafe function nextval"},
	{name: "setval", write: true, reason: "unsafe function setval"},
	{name: "currval", session: true, reason: "unsafe function currval"},
	{name: "lastval", session: true, reason: "unsafe function lastval"},

	// Settings and per-session state.
	{name: "set_config", session: true, reason: "unsafe function set_config"},
	{name: "setseed", session: true, reason: "unsafe function setseed"},
	{name: "pg_my_temp_schema", session: true, reason: "unsafe function pg_my_temp_schema"},
	{name: "pg_export_snapshot", session: true, reason: "unsafe function pg_export_snapshot"},

	// Advisory locks, session and transaction level, taken or released.
	{name: "pg_advisory_", prefix: true, session: true, reason: "unsafe function pg_advisory_*"},
	{name: "pg_try_advisory_", prefix: true, session: true, reason: "unsafe function pg_try_advisory_*"},

	// Notifications (grouped with LISTEN/NOTIFY).
	{name: "pg_notify", session: true, reason: "unsafe function pg_notify"},

	// These assign a transaction ID: a write, and an error on a standby.
	{name: "txid_current", write: true, reason: "unsafe function txid_current"},
	{name: "pg_current_xact_id", write: true, reason: "unsafe function pg_current_xact_id"},

	// Large objects. The descriptor-based calls need a descriptor opened
	// earlier in the same transaction; the rest create, change or export.
	{name: "lo_open", session: true, reason: "unsafe function lo_open"},
	{name: "lo_close", session: true, reason: "unsafe function lo_close"},
	{name: "lo_lseek", session: true, reason: "unsafe function lo_lseek"},
	{name: "lo_lseek64", session: true, reason: "unsafe function lo_lseek64"},
	{name: "lo_tell", session: true, reason: "unsafe function lo_tell"},
	{name: "lo_tell64", session: true, reason: "unsafe function lo_tell64"},
	{name: "lo_truncate", write: true, session: true, reason: "unsafe function lo_truncate"},
	{name: "lo_truncate64", write: true, session: true, reason: "unsafe function lo_truncate64"},
	{name: "loread", session: true, reason: "unsafe function loread"},
	{name: "lowrite", write: true, session: true, reason: "unsafe function lowrite"},
	{name: "lo_", prefix: true, write: true, reason: "unsafe function lo_*"},

	// dblink runs arbitrary SQL elsewhere; its named connections live in
	// the session.
	{name: "dblink", prefix: true, write: true, session: true, reason: "unsafe function dblink*"},

	// Server administration and replication.
	{name: "pg_terminate_backend", write: true, reason: "unsafe function pg_terminate_backend"},
	{name: "pg_cancel_backend", write: true, reason: "unsafe function pg_cancel_backend"},
	{name: "pg_reload_conf", write: true, reason: "unsafe function pg_reload_conf"},
	{name: "pg_rotate_logfile", prefix: true, write: true, reason: "unsafe function pg_rotate_logfile*"},
	{name: "pg_log_backend_memory_contexts", write: true, reason: "unsafe function pg_log_backend_memory_contexts"},
	{name: "pg_log_standby_snapshot", write: true, reason: "unsafe function pg_log_standby_snapshot"},
	{name: "pg_switch_wal", write: true, reason: "unsafe function pg_switch_wal"},
	{name: "pg_switch_xlog", write: true, reason: "unsafe function pg_switch_xlog"},
	{name: "pg_create_", prefix: true, write: true, reason: "unsafe function pg_create_*"},
	{name: "pg_copy_physical_replication_slot", write: true, reason: "unsafe function pg_copy_physical_replication_slot"},
	{name: "pg_copy_logical_replication_slot", write: true, reason: "unsafe function pg_copy_logical_replication_slot"},
	{name: "pg_drop_replication_slot", write: true, reason: "unsafe function pg_drop_replication_slot"},
	{name: "pg_replication_slot_advance", write: true, reason: "unsafe function pg_replication_slot_advance"},
	{name: "pg_sync_replication_slots", write: true, reason: "unsafe function pg_sync_replication_slots"},
	{name: "pg_logical_slot_get_", prefix: true, write: true, reason: "unsafe function pg_logical_slot_get_*"},
	{name: "pg_logical_emit_message", write: true, reason: "unsafe function pg_logical_emit_message"},
	{name: "pg_replication_origin_", prefix: true, write: true, session: true, reason: "unsafe function pg_replication_origin_*"},
	{name: "pg_promote", write: true, reason: "unsafe function pg_promote"},
	{name: "pg_wal_replay_", prefix: true, write: true, reason: "unsafe function pg_wal_replay_*"},
	{name: "pg_xlog_replay_", prefix: true, write: true, reason: "unsafe function pg_xlog_replay_*"},
	{name: "pg_backup_start", write: true, session: true, reason: "unsafe function pg_backup_start"},
	{name: "pg_backup_stop", write: true, session: true, reason: "unsafe function pg_backup_stop"},
	{name: "pg_start_backup", write: true, session: true, reason: "unsafe function pg_start_backup"},
	{name: "pg_stop_backup", write: true, session: true, reason: "unsafe function pg_stop_backup"},
	{name: "pg_stat_reset", prefix: true, write: true, reason: "unsafe function pg_stat_reset*"},
	{name: "pg_stat_statements_reset", write: true, reason: "unsafe function pg_stat_statements_reset"},
	{name: "pg_import_system_collations", write: true, reason: "unsafe function pg_import_system_collations"},
	{name: "pg_nextoid", write: true, reason: "unsafe function pg_nextoid"},
	{name: "pg_restore_relation_stats", write: true, reason: "unsafe function pg_restore_relation_stats"},
	{name: "pg_restore_attribute_stats", write: true, reason: "unsafe function pg_restore_attribute_stats"},
	{name: "pg_clear_relation_stats", write: true, reason: "unsafe function pg_clear_relation_stats"},
	{name: "pg_clear_attribute_stats", write: true, reason: "unsafe function pg_clear_attribute_stats"},
	{name: "binary_upgrade_", prefix: true, write: true, reason: "unsafe function binary_upgrade_*"},

	// These run SQL given to them as text, which the lexer cannot see.
	{name: "query_to_xml", prefix: true, write: true, reason: "unsafe function query_to_xml*"},
	{name: "cursor_to_xml", prefix: true, session: true, reason: "unsafe function cursor_to_xml*"},
	{name: "ts_stat", write: true, reason: "unsafe function ts_stat"},
	{name: "ts_rewrite", write: true, reason: "unsafe function ts_rewrite"},

	// Index maintenance callable from a SELECT.
	{name: "brin_summarize_", prefix: true, write: true, reason: "unsafe function brin_summarize_*"},
	{name: "brin_desummarize_range", write: true, reason: "unsafe function brin_desummarize_range"},
	{name: "gin_clean_pending_list", write: true, reason: "unsafe function gin_clean_pending_list"},

	// Reads of state that only this session has.
	{name: "pg_listening_channels", session: true, reason: "unsafe function pg_listening_channels"},

	// Contrib modules that ship with the server.
	{name: "pg_file_", prefix: true, write: true, reason: "unsafe function pg_file_*"}, // adminpack: write, rename, unlink, sync
	{name: "pg_truncate_visibility_map", write: true, reason: "unsafe function pg_truncate_visibility_map"},
	{name: "pg_buffercache_evict", prefix: true, write: true, reason: "unsafe function pg_buffercache_evict*"},
	{name: "heap_force_", prefix: true, write: true, reason: "unsafe function heap_force_*"},   // pg_surgery
	{name: "autoprewarm_", prefix: true, write: true, reason: "unsafe function autoprewarm_*"}, // pg_prewarm
	{name: "postgres_fdw_disconnect", prefix: true, session: true, reason: "unsafe function postgres_fdw_disconnect*"},
}

// deniedByLetter indexes deniedFunctions by the first letter of the name,
// so that a call of count() or lower() costs a handful of comparisons.
// It is computed once and never changed.
var deniedByLetter = func() (idx [26][]uint8) {
	for i := range deniedFunctions {
		c := deniedFunctions[i].name[0] - 'a'
		idx[c] = append(idx[c], uint8(i))
	}
	return idx
}()

// lookupDenied returns the entry matching a called function name, or nil.
func lookupDenied(name string) *deniedFunction {
	if len(name) < 3 {
		return nil
	}
	c := name[0] | 0x20
	if c < 'a' || c > 'z' {
		return nil
	}
	for _, i := range deniedByLetter[c-'a'] {
		f := &deniedFunctions[i]
		if f.prefix {
			if len(name) >= len(f.name) && equalFold(name[:len(f.name)], f.name) {
				return f
			}
		} else if equalFold(name, f.name) {
			return f
		}
	}
	return nil
}
