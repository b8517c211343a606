package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io"
	"net"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"
)

//go:embed schema/*.sql
var schemaFS embed.FS

// store is the database: every query of the service runs through its methods.
type store struct {
	db        *sql.DB
	cursorKey atomic.Pointer[[]byte] // signs list cursors; see listCursorKey
}

// dbConfig is how the pool is opened.
type dbConfig struct {
	url              string
	maxConns         int
	statementTimeout time.Duration
	tracer           pgx.QueryTracer // sees every query; for tests that count them
}

// openStore opens a connection pool (without connecting yet). Every connection gets a
// statement_timeout, so no query holds a connection for long.
func openStore(cfg dbConfig) (*store, error) {
	pc, err := pgx.ParseConfig(cfg.url)
	if err != nil {
		return nil, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	if cfg.statementTimeout > 0 {
		pc.RuntimeParams["statement_timeout"] = strconv.FormatInt(cfg.statementTimeout.Milliseconds(), 10)
	}
	pc.ConnectTimeout = 5 * time.Second
	pc.Tracer = cfg.tracer
	db := stdlib.OpenDB(*pc)
	// Idle connections keep pgx's per-connection prepared statement cache, so keep them all.
	db.SetMaxOpenConns(cfg.maxConns)
	db.SetMaxIdleConns(cfg.maxConns)
	db.SetConnMaxIdleTime(10 * time.Minute)
	return &store{db: db}, nil
}

// listCursorKey returns the key that signs list cursors (schema/0003_lists.sql), read once: every
// server on the database shares it, so a cursor from one is good on another and after a restart.
func (s *store) listCursorKey(ctx context.Context) ([]byte, error) {
	if k := s.cursorKey.Load(); k != nil {
		return *k, nil
	}
	var k []byte
	err := s.db.QueryRowContext(ctx, `SELECT value FROM server_secrets WHERE name = 'cursor'`).Scan(&k)
	if err != nil {
		return nil, fmt.Errorf("read the cursor key: %w", err)
	}
	s.cursorKey.Store(&k)
	return k, nil
}

// Close closes the pool.
func (s *store) Close() error { return s.db.Close() }

// inTx runs fn in a transaction and commits it when fn returns nil; otherwise it rolls back.
func (s *store) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// updateLocked changes one row in a transaction of two round trips, on a pgx connection (withPgx):
// BEGIN goes out together with lockSQL, a SELECT ... FOR UPDATE of the row that is scanned into dest,
// and the UPDATE that change asks for goes out together with COMMIT. change sees the locked row in
// dest, may run more queries on conn (reference checks) and returns the UPDATE, its arguments and
// the destinations of what it returns, or update "" when there is nothing to write. A row that is not
// there is errNotFound. Every other way out rolls back, and a connection the rollback cannot clear is
// closed, which ends its transaction and its lock (database/sql then drops it from the pool).
func (s *store) updateLocked(ctx context.Context, lockSQL string, lockArgs, dest []any,
	change func(conn *pgx.Conn) (update string, args, ret []any, err error)) error {
	return withPgx(ctx, s.db, func(conn *pgx.Conn) error {
		err := lockAndUpdate(ctx, conn, lockSQL, lockArgs, dest, change)
		if conn.PgConn().TxStatus() != 'I' {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if _, rerr := conn.Exec(rctx, "ROLLBACK"); rerr != nil {
				conn.Close(rctx)
			}
		}
		return err
	})
}

// lockAndUpdate is updateLocked's conversation with the database; it leaves the rollback to it.
func lockAndUpdate(ctx context.Context, conn *pgx.Conn, lockSQL string, lockArgs, dest []any,
	change func(conn *pgx.Conn) (update string, args, ret []any, err error)) error {
	var b pgx.Batch
	b.Queue("BEGIN")
	b.Queue(lockSQL, lockArgs...)
	br := conn.SendBatch(ctx, &b)
	_, err := br.Exec()
	if err == nil {
		err = br.QueryRow().Scan(dest...)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, sql.ErrNoRows) {
		return errNotFound
	}
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	update, args, ret, err := change(conn)
	if err != nil || update == "" {
		return err
	}
	b = pgx.Batch{}
	b.Queue(update, args...)
	b.Queue("COMMIT")
	br = conn.SendBatch(ctx, &b)
	err = br.QueryRow().Scan(ret...)
	if err != nil {
		err = fmt.Errorf("update: %w", mapWriteError(err))
	} else if _, err = br.Exec(); err != nil {
		err = fmt.Errorf("commit: %w", err)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// rowFunc runs a query that answers one row. The reference checks take one, so they run alike on
// the pool (dbRow) and inside updateLocked's transaction (connRow).
type rowFunc func(ctx context.Context, query string, args ...any) rowScanner

// rowScanner is what *sql.Row and pgx.Row have in common.
type rowScanner interface{ Scan(dest ...any) error }

func dbRow(db *sql.DB) rowFunc {
	return func(ctx context.Context, query string, args ...any) rowScanner {
		return db.QueryRowContext(ctx, query, args...)
	}
}

func connRow(conn *pgx.Conn) rowFunc {
	return func(ctx context.Context, query string, args ...any) rowScanner {
		return conn.QueryRow(ctx, query, args...)
	}
}

// pgCode returns the SQLSTATE of a PostgreSQL error, or "".
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// Mapped SQLSTATEs.
const (
	pgUniqueViolation     = "23505"
	pgForeignKeyViolation = "23503"
	pgCheckViolation      = "23514"
)

// isDBUnavailable reports whether err means the database cannot be reached or is overloaded,
// rather than that the query was wrong: connection failures, server shutdown, too many
// connections, statement timeouts.
func isDBUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	if errors.As(err, &ce) || errors.As(err, &ne) {
		return true
	}
	code := pgCode(err)
	switch {
	case strings.HasPrefix(code, "08"), // connection exception
		strings.HasPrefix(code, "53"),                     // insufficient resources
		code == "57P01", code == "57P02", code == "57P03", // shutdown, cannot connect now
		code == "57014": // statement timeout
		return true
	}
	return false
}

// migrationLock is the pg_advisory_xact_lock key under which migrations run ("rolodex" in ASCII).
const migrationLock = 0x726f6c6f646578

// migration is one embedded schema file.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded schema files in version order. Names are NNNN_name.sql.
func migrations() ([]migration, error) {
	entries, err := schemaFS.ReadDir("schema")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || !strings.HasSuffix(e.Name(), ".sql") {
			return nil, fmt.Errorf("schema file %q is not named NNNN_name.sql", e.Name())
		}
		b, err := schemaFS.ReadFile(path.Join("schema", e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// latestSchemaVersion is the version of the newest embedded schema file.
func latestSchemaVersion() int {
	ms, err := migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// migrate applies the schema files not yet recorded in schema_migrations, each in its own
// transaction that first takes a transaction-level advisory lock: servers starting at once wait for
// each other, and the later ones find nothing left to do. A transaction-level lock ends with its
// transaction, so this is safe behind PgBouncer in transaction mode too (a session lock could be
// left on a pooled connection). It returns the versions it applied.
func (s *store) migrate(ctx context.Context) ([]int, error) {
	ms, err := migrations()
	if err != nil {
		return nil, err
	}
	var done []int
	for _, m := range ms {
		applied, err := s.applyMigration(ctx, m)
		if err != nil {
			return done, err
		}
		if applied {
			done = append(done, m.version)
		}
	}
	return done, nil
}

// applyMigration applies m and records it, in one transaction under the migration lock, unless it
// is recorded already.
func (s *store) applyMigration(ctx context.Context, m migration) (applied bool, err error) {
	const create = `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if _, err := tx.ExecContext(ctx, create); err != nil {
			return fmt.Errorf("create version table: %w", err)
		}
		var recorded bool
		err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT FROM schema_migrations WHERE version = $1)`, m.version).Scan(&recorded)
		if err != nil || recorded {
			return err
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return err
		}
		const record = `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`
		if _, err := tx.ExecContext(ctx, record, m.version, m.name); err != nil {
			return fmt.Errorf("record version: %w", err)
		}
		applied = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("migrate %s: %w", m.name, err)
	}
	return applied, nil
}

// schemaVersion returns the newest applied schema version (0 for an empty database).
func (s *store) schemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.db.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&v)
	if pgCode(err) == "42P01" { // undefined_table: never migrated
		return 0, nil
	}
	return v, err
}

// newCompany is what createCompany made.
type newCompany struct {
	CompanyID int64
	UserID    int64
	APIKey    string
}

// Defaults every company starts with.
var (
	defaultContactStages = []string{"Lead", "Prospect", "Customer"}
	defaultBoardStages   = []string{"Qualified", "Contact made", "Proposal sent", "Negotiation", "Closing"}
)

const defaultCurrencyID = 978 // EUR

// createCompany creates a company with its first user, default contact stages, a default board with
// its stages, EUR as default currency, and an API key for that user, in one transaction.
func (s *store) createCompany(ctx context.Context, name string) (newCompany, error) {
	var nc newCompany
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		const qCompany = `INSERT INTO companies (name, default_currency_id) VALUES ($1, $2) RETURNING id`
		if err := tx.QueryRowContext(ctx, qCompany, name, defaultCurrencyID).Scan(&nc.CompanyID); err != nil {
			return fmt.Errorf("insert company: %w", err)
		}
		const qUser = `INSERT INTO users (company_id, name, surname) VALUES ($1, 'Admin', NULL) RETURNING id`
		if err := tx.QueryRowContext(ctx, qUser, nc.CompanyID).Scan(&nc.UserID); err != nil {
			return fmt.Errorf("insert user: %w", err)
		}
		var boardID int64
		const qBoard = `INSERT INTO boards (company_id, name, is_default) VALUES ($1, 'Sales pipeline', true) RETURNING id`
		if err := tx.QueryRowContext(ctx, qBoard, nc.CompanyID).Scan(&boardID); err != nil {
			return fmt.Errorf("insert board: %w", err)
		}
		const qStages = `INSERT INTO stages (company_id, board_id, name, position)
			SELECT $1, $2, name, ord FROM unnest($3::text[]) WITH ORDINALITY AS s(name, ord)`
		if _, err := tx.ExecContext(ctx, qStages, nc.CompanyID, nil, defaultContactStages); err != nil {
			return fmt.Errorf("insert contact stages: %w", err)
		}
		if _, err := tx.ExecContext(ctx, qStages, nc.CompanyID, boardID, defaultBoardStages); err != nil {
			return fmt.Errorf("insert board stages: %w", err)
		}
		var err error
		nc.APIKey, err = insertAPIKey(ctx, tx, nc.CompanyID, nc.UserID)
		return err
	})
	return nc, err
}

// querier is what *sql.DB and *sql.Tx have in common, for helpers that run inside or outside a
// transaction.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// scanner is a pointer to a row type that knows the scan destinations of its columns.
type scanner[T any] interface {
	*T
	scanDest() []any
}

// queryRows runs q and scans every row into a new T; limit sizes the slice.
func queryRows[T any, PT scanner[T]](ctx context.Context, db *sql.DB, limit int, q string, args ...any) ([]T, error) {
	var out []T
	err := withPgx(ctx, db, func(c *pgx.Conn) error {
		rows, err := c.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		out = make([]T, 0, limit)
		var v T
		dest := pgxDest(PT(&v).scanDest()) // every column is scanned on every row, so v needs no reset
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			out = append(out, v)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// queryOne runs q for one row, errNotFound when there is none.
func queryOne[T any, PT scanner[T]](ctx context.Context, db *sql.DB, q string, args ...any) (T, error) {
	var v T
	err := withPgx(ctx, db, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, q, args...).Scan(pgxDest(PT(&v).scanDest())...)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return v, errNotFound
	}
	return v, err
}

// pgxDest returns dest with its *sql.NullString and *sql.NullInt64 wrapped so that pgx scans them
// natively (pgtype's scanner interfaces) rather than through sql.Scanner, which costs an interface
// value and a conversion per column.
func pgxDest(dest []any) []any {
	for i, d := range dest {
		switch d := d.(type) {
		case *sql.NullString:
			dest[i] = pgxNullString{d}
		case *sql.NullInt64:
			dest[i] = pgxNullInt64{d}
		}
	}
	return dest
}

type pgxNullString struct{ p *sql.NullString }

func (n pgxNullString) ScanText(v pgtype.Text) error {
	*n.p = sql.NullString{String: v.String, Valid: v.Valid}
	return nil
}

type pgxNullInt64 struct{ p *sql.NullInt64 }

func (n pgxNullInt64) ScanInt64(v pgtype.Int8) error {
	*n.p = sql.NullInt64{Int64: v.Int64, Valid: v.Valid}
	return nil
}

// withPgx runs fn on a connection of the pool as pgx's own *pgx.Conn: pgx then scans rows into
// their destinations directly, without database/sql's per-column conversion (convertAssign) and
// its allocations, and can send several queries in one round trip (a pgx.Batch). The pool stays
// database/sql's. Like database/sql, it tries another connection when the one it got turns out
// broken before anything was sent.
func withPgx(ctx context.Context, db *sql.DB, fn func(*pgx.Conn) error) error {
	for try := 1; ; try++ {
		conn, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		err = conn.Raw(func(dc any) error {
			err := fn(dc.(*stdlib.Conn).Conn())
			if pgconn.SafeToRetry(err) {
				return driver.ErrBadConn // database/sql drops this connection
			}
			return err
		})
		conn.Close()
		if !errors.Is(err, driver.ErrBadConn) || try == 3 {
			return err
		}
	}
}

// refErrors returns a field error for each reference whose check failed: fields[i] names the field,
// kinds[i] the kind of object it must point at.
func refErrors(ok []bool, fields, kinds []string) []fieldError {
	var errs []fieldError
	for i, good := range ok {
		if !good {
			errs = append(errs, fieldError{Field: fields[i], Message: "must be the id of an existing " + kinds[i]})
		}
	}
	return errs
}

// deleteIfMatch runs q, a DELETE of the company's object id RETURNING its version: on its own when
// there is no If-Match (one round trip), else in a transaction that it rolls back unless If-Match
// admits that version. It returns errNotFound or errPreconditionFailed.
func (s *store) deleteIfMatch(ctx context.Context, q string, companyID, id int64, ifMatch string) error {
	if ifMatch == "" {
		var version int64
		err := s.db.QueryRowContext(ctx, q, companyID, id).Scan(&version)
		if errors.Is(err, sql.ErrNoRows) {
			return errNotFound
		}
		if err != nil {
			return fmt.Errorf("delete %d: %w", id, err)
		}
		return nil
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		var version int64
		err := tx.QueryRowContext(ctx, q, companyID, id).Scan(&version)
		if errors.Is(err, sql.ErrNoRows) {
			return errNotFound
		}
		if err != nil {
			return fmt.Errorf("delete %d: %w", id, err)
		}
		if !ifMatchOK(ifMatch, version) {
			return errPreconditionFailed // rolls the delete back
		}
		return nil
	})
}

// fieldFailure combines the field errors of a body with those of its reference check (a field already
// at fault is not reported twice) into the error a store method returns: nil when there are none.
func fieldFailure(errs, refErrs []fieldError, err error) error {
	if err != nil {
		return err
	}
	for _, e := range refErrs {
		if !hasField(errs, e.Field) {
			errs = append(errs, e)
		}
	}
	if errs == nil {
		return nil
	}
	return validationFailed(errs...)
}

// mapWriteError turns constraint violations that slipped past validation (a referenced object
// deleted meanwhile, a limit only the database knows) into a 422 naming the field; other errors
// are returned as they are.
func mapWriteError(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	switch pe.Code {
	case pgForeignKeyViolation, pgCheckViolation, pgUniqueViolation:
		return validationFailed(fieldError{Field: fieldOfConstraint(pe.ConstraintName), Message: "is not valid here"})
	case "22001", "22003", "22007", "22008", "22P02": // too long, out of range, bad datetime, bad text
		return &apiError{Status: 422, Code: "validation_failed", Detail: "A value in the body is out of the range the database can hold."}
	}
	return err
}

// fieldOfConstraint guesses the JSON field a PostgreSQL constraint name is about, from its last
// column: "contacts_company_id_organization_id_fkey" is organizationId.
func fieldOfConstraint(name string) string {
	name = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_fkey"), "_check"), "_key")
	parts := strings.Split(name, "_")
	// Take the trailing words after the table name, up to and including the last "id".
	end := len(parts)
	start := end - 1
	if parts[start] == "id" && start > 0 {
		start--
	}
	var b strings.Builder
	for i, p := range parts[start:end] {
		if i > 0 && p != "" {
			p = strings.ToUpper(p[:1]) + p[1:]
		}
		b.WriteString(p)
	}
	return b.String()
}
