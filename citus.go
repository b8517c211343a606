package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// onCompanysWorker is the FROM item of a statement that takes advisory locks of the company $1. Its
// count is of no use: on Citus it has the statement run on the company's worker, in the request's
// distributed transaction. On the coordinator a lock's waiters that have sent nothing to a worker yet
// all count as one transaction; Citus's deadlock detector then sees cycles that are not there and
// cancels a request (citus issue 1803; TestCustomFieldLockWaitsOnCitus).
const onCompanysWorker = `(SELECT count(*) FROM api_keys WHERE company_id = $1) AS on_companys_worker`

// distribute ends migrate on a database with the citus extension (docs/scaling.md): every table with
// a company_id column is distributed by it, all in one colocation group, so that each request goes to
// the one worker of its company; every other table becomes a reference table. What is not of one
// company (a key's look-up by its hash, the servers' background work) asks every shard, and none of it
// may take FOR UPDATE across shards.
//
// Citus distributes a table only without foreign keys to or from plain tables: the keys of the tables
// still to distribute are dropped, the tables distributed, and the keys made again, all in one
// transaction under the migration lock. A database in use moves its rows into the shards with the
// count triggers off, as those rows are counted already, and the events' trigger on, so that each
// copied event takes the id of the copying transaction on its worker (events.go) and a company's old
// events come first in its feed. Old cursors mean nothing on the workers: the cursor key is made anew,
// and the servers refuse them (400).
func (s *store) distribute(ctx context.Context) error {
	var citus bool
	err := s.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')`).Scan(&citus)
	if err != nil || !citus {
		return err
	}
	s.citus.Store(true)
	// The migration lock, and three settings for this transaction (set_config's true: SET LOCAL).
	// No statement timeout: moving a database in use into the shards takes minutes at a million rows,
	// as a migration does (applyMigration). Sequential: the shards of the transaction's DDL are made
	// over one connection a worker, so that the foreign keys made later in it see them. Unsafe
	// triggers: Citus's name for triggers on shards; those of schema/0010_citus.sql are safe there, as
	// each writes only rows of the company of the row it fires for, which are on the same worker.
	const setUp = `SELECT set_config('statement_timeout', '0', true), pg_advisory_xact_lock($1),
		set_config('citus.multi_shard_modify_mode', 'sequential', true), set_config('citus.enable_unsafe_triggers', 'on', true)`
	// In order: a new cursor key (when the events move); drop the foreign keys of the tables Citus
	// does not have yet, their count triggers off, the reference tables, the others distributed, the
	// triggers on, the keys made again.
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
	return s.withConn(ctx, func(c *pgx.Conn) error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, setUp, migrationLock); err != nil {
				return err
			}
			rows, _ := tx.Query(ctx, q) // an error is CollectRows's
			stmts, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
			for _, stmt := range stmts {
				if _, err := tx.Exec(ctx, stmt); err != nil {
					return fmt.Errorf("citus: %s: %w", stmt, err)
				}
			}
			return nil
		})
	})
}
