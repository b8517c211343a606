package main

import (
	"context"
	"fmt"
)

// Citus (docs/scaling.md): on a database with the citus extension, migrate ends by spreading the
// tables over the workers. The schema files are the same as on plain PostgreSQL; this is the one
// step that differs.
//
//   - A table with a company_id column is distributed by it, every one in one colocation group, so
//     that all of a company's rows are on one worker and each request is routed to that worker.
//   - Every other table (companies, countries, currencies, statuses, server_secrets,
//     schema_migrations) becomes a reference table, copied to every node.
//
// What is not of one company asks every shard: a key's look-up by its hash (auth.go, once a
// keyCacheTTL per key and server), and the servers' background work (retention and expiry deletes,
// the webhook worker's claim), none of which may take FOR UPDATE across shards.
//
// Citus distributes a table only without foreign keys to or from plain tables, so the foreign keys
// of the tables still to distribute are dropped, the tables distributed, and the keys made again,
// all in one transaction under the migration lock. A database whose tables are all distributed
// already costs one query.
//
// A database in use moves its rows into the shards (docs/scaling.md). The count triggers are off
// meanwhile: those rows are counted already. The events' trigger is on: each event copied takes the
// id of the copying transaction on its worker, as every event of that worker's feed must (events.go),
// so all of a company's events from before come first in its feed, in id order. Cursors from
// before the move are positions among the old transaction ids, which mean nothing on the workers:
// the key that signs cursors is made anew, and the servers, restarted on the coordinator, refuse
// them (400); clients start their walks again.
func (s *store) distribute(ctx context.Context) error {
	var citus bool
	err := s.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')`).Scan(&citus)
	if err != nil || !citus {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	// Sequential: the shards of the transaction's DDL are made over one connection a worker, so that
	// the foreign keys made later in it see them. Unsafe triggers: Citus's name for triggers on
	// shards; those of schema/0010_citus.sql are safe there, as each writes only rows of the company
	// of the row it fires for, which are on the same worker.
	for _, set := range []string{`SET LOCAL citus.multi_shard_modify_mode = 'sequential'`, `SET LOCAL citus.enable_unsafe_triggers = on`} {
		if _, err := tx.ExecContext(ctx, set); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
		return err
	}
	// The statements, in order: a new cursor key (when the events move), drop the foreign keys of
	// the tables Citus does not have yet, turn their count triggers off, make the reference tables,
	// distribute the others, turn the triggers on, make the keys again.
	const q = `WITH todo AS (
			SELECT c.oid, EXISTS (SELECT FROM pg_attribute a
				WHERE a.attrelid = c.oid AND a.attname = 'company_id' AND NOT a.attisdropped) AS distributed
			FROM pg_class c
			WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
				AND NOT EXISTS (SELECT FROM pg_dist_partition p WHERE p.logicalrelid = c.oid)),
		keys AS (
			SELECT oid, conrelid, confrelid, conname FROM pg_constraint
			WHERE contype = 'f' AND (conrelid IN (SELECT oid FROM todo) OR confrelid IN (SELECT oid FROM todo))),
		counted AS (
			SELECT tgrelid, tgname FROM pg_trigger WHERE tgrelid IN (SELECT oid FROM todo) AND tgfoid = 'count_row'::regproc)
		SELECT q FROM (
			SELECT 1 AS step, format('ALTER TABLE %s DROP CONSTRAINT %I', conrelid::regclass, conname) AS q FROM keys
			UNION ALL
			SELECT 2, format('ALTER TABLE %s DISABLE TRIGGER %I', tgrelid::regclass, tgname) FROM counted
			UNION ALL
			SELECT 3, format('SELECT create_reference_table(%L)', oid::regclass) FROM todo WHERE NOT distributed
			UNION ALL
			SELECT 4, format('SELECT create_distributed_table(%L, ''company_id'', colocate_with => ''default'')', oid::regclass)
			FROM todo WHERE distributed
			UNION ALL
			SELECT 5, format('ALTER TABLE %s ENABLE TRIGGER %I', tgrelid::regclass, tgname) FROM counted
			UNION ALL
			SELECT 6, format('ALTER TABLE %s ADD CONSTRAINT %I %s', conrelid::regclass, conname, pg_get_constraintdef(oid))
			FROM keys
			UNION ALL
			SELECT 0, $$UPDATE server_secrets SET value = sha256(convert_to(gen_random_uuid()::text ||
				gen_random_uuid()::text, 'UTF8')) WHERE name = 'cursor'$$ FROM todo WHERE oid = 'events'::regclass) AS s
		ORDER BY step, q`
	rows, err := tx.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	var stmts []string
	for rows.Next() {
		var stmt string
		if err := rows.Scan(&stmt); err != nil {
			rows.Close()
			return err
		}
		stmts = append(stmts, stmt)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, stmt := range stmts {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("citus: %s: %w", stmt, err)
		}
	}
	return tx.Commit()
}
