package main

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"
)

// The store: the connection pool, the helpers every resource's SQL (in its own file) runs through,
// the mapping of PostgreSQL's errors, and the embedded schema with its migrations.

//go:embed schema/*.sql
var schemaFS embed.FS

// store is the database: every query of the service runs through its methods.
type store struct {
	db               *sql.DB
	statementTimeout time.Duration          // what a statement may take: 0, no limit
	cursorKey        atomic.Pointer[[]byte] // signs list cursors; see listCursorKey
	shares           *poolShares            // each company's share of db's connections
	citus            atomic.Bool            // the database is Citus's coordinator (distribute)
}

type dbConfig struct {
	url              string
	maxConns         int
	statementTimeout time.Duration
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
	db := stdlib.OpenDB(*pc)
	// Idle connections keep pgx's per-connection prepared statement cache, so keep them all.
	db.SetMaxOpenConns(cfg.maxConns)
	db.SetMaxIdleConns(cfg.maxConns)
	db.SetConnMaxIdleTime(10 * time.Minute)
	return &store{db: db, statementTimeout: cfg.statementTimeout, shares: newPoolShares(max(1, cfg.maxConns/2))}, nil
}

// poolShares holds each company to a share of the pool: at most size of its connections at once (half
// of them), so that one company's requests, however heavy, leave the others connections to be answered
// with; its further requests wait their turn within their deadline (issue 44). A request takes a place
// in its company's share with each connection it takes (withConn), and gives it back with the
// connection. That cannot deadlock: no request takes a connection while it holds one (a write's reads
// go over its own connection, a batch's items over the batch's), so a place is never held while
// another is waited for, and batches wait for their turn (takeTurn, batch.go) holding none. Work of no
// company (migrations, the background loops, the key look-up of withAuth) takes no place.
type poolShares struct {
	size      int
	mu        sync.Mutex
	byCompany map[int64]*poolShare // the companies with a connection taken or waited for
}

// poolShare is one company's share: a place in places for each connection it holds.
type poolShare struct {
	places chan struct{}
	users  int // the requests that hold a place or wait for one: at 0 it is dropped
}

func newPoolShares(size int) *poolShares {
	return &poolShares{size: size, byCompany: map[int64]*poolShare{}}
}

// take waits for a place in the share of companyID (0: none, and nil) and returns the share to give
// it back to; ctx's error when ctx ends first.
func (p *poolShares) take(ctx context.Context, companyID int64) (*poolShare, error) {
	if companyID == 0 {
		return nil, nil
	}
	p.mu.Lock()
	sh, ok := p.byCompany[companyID]
	if !ok {
		sh = &poolShare{places: make(chan struct{}, p.size)}
		p.byCompany[companyID] = sh
	}
	sh.users++
	p.mu.Unlock()
	select {
	case sh.places <- struct{}{}:
		return sh, nil
	case <-ctx.Done():
		p.leave(companyID, sh)
		return nil, ctx.Err()
	}
}

// give gives back the place take returned in sh, the share of companyID (nil: none).
func (p *poolShares) give(companyID int64, sh *poolShare) {
	if sh == nil {
		return
	}
	<-sh.places
	p.leave(companyID, sh)
}

// leave records that a request of companyID no longer holds or waits for a place in sh.
func (p *poolShares) leave(companyID int64, sh *poolShare) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sh.users--
	if sh.users == 0 {
		delete(p.byCompany, companyID)
	}
}

func (s *store) Close() error { return s.db.Close() }

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

// scanner is a pointer to a row type that knows the scan destinations of its columns.
type scanner[T any] interface {
	*T
	scanDest() []any
}

// read is one SELECT of a batch: its statement, its arguments, and what takes its rows.
type read struct {
	sql  string
	args []any
	rows func(rows) error
}

type rows = pgx.Rows // of a read

// planned returns r planned anew for its arguments each time it runs: pgx sends it as the unnamed
// statement, where it would prepare it. After five runs of a prepared statement PostgreSQL may keep
// one plan made for no argument in particular, and a search's best plan depends on its text (a
// common one walks the ids, a rare one reads the trigram index): a search for "name 12" at
// 1,000,000 contacts kept a walk of every id for its one exact hit, 3.4 s against 0.02 ms. Its
// cost is the planning that each run then pays. Only a read that store.read sends alone may be
// planned: a pgx.Batch takes no QueryExecMode.
func (r read) planned() read {
	r.args = append([]any{pgx.QueryExecModeCacheDescribe}, r.args...)
	return r
}

// reader runs reads: store.read on the pool, or tx.read inside a write's transaction.
type reader func(ctx context.Context, reads ...read) error

// read runs reads, the SELECTs of one answer, in one round trip on pgx's own connection (withConn):
// pgx scans each column straight into its destination, where database/sql boxes and converts every
// value, and several SELECTs go out as one pgx.Batch. It pays: `make bench` against the same tree
// reading through database/sql (20,000 contacts, wrk -c32, 3 paired rounds) measured list100 1.41x,
// retrieve+5 1.41x, list100+5 1.26x, retrieve 1.04x.
func (s *store) read(ctx context.Context, reads ...read) error {
	return s.withConn(ctx, func(c *pgx.Conn) error {
		if len(reads) != 1 {
			return (&tx{c: c}).read(ctx, reads...) // a batch, as a write's reads go
		}
		rows, err := c.Query(ctx, reads[0].sql, reads[0].args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		return reads[0].rows(rows)
	})
}

// withConn runs f on pgx's own connection under the pool (conn.Raw), within the share of the pool of
// the request's company (poolShares; ctx's requestInfo names it). When f fails having sent nothing
// (pgconn.SafeToRetry: say, a connection the server closed while it sat idle), database/sql drops
// the connection and f runs again on another, up to three times in all. f must not call withConn.
func (s *store) withConn(ctx context.Context, f func(*pgx.Conn) error) error {
	companyID := requestInfo(ctx).companyID
	sh, err := s.shares.take(ctx, companyID)
	if err != nil {
		return err
	}
	defer s.shares.give(companyID, sh)
	for try := 1; ; try++ {
		conn, err := s.db.Conn(ctx)
		if err != nil {
			return err
		}
		retry := false
		err = conn.Raw(func(dc any) error {
			err := f(dc.(*stdlib.Conn).Conn())
			if pgconn.SafeToRetry(err) {
				retry = true
				return driver.ErrBadConn
			}
			return err
		})
		conn.Close()
		if !retry || try == 3 {
			return err
		}
	}
}

// tx is the transaction of a write (store.write), on pgx's own connection as in store.read. A
// statement whose result the write does not wait for (BEGIN, a DELETE, an event, an Idempotency-Key's
// answer, COMMIT) is queued, and goes out with the next one it does wait for: a create is three round
// trips where one statement each took five. Only statements whose failure aborts the transaction are
// queued, and one whose result Go reads ends its round trip, so nothing runs on a result Go has not
// checked. The exceptions, queueRow and queueRead, are reads nothing sent with them depends on: an
// Idempotency-Key's look-up (lookUpKey says why it is safe) and a write's custom fields.
type tx struct {
	c         *pgx.Conn
	queued    pgx.Batch
	pipe      *pipeline                   // a batch item's: its round trips go out with the other items' (runItems, batch.go)
	alike     map[*pgx.QueuedQuery]string // a batch item's reads that items send alike (queueAlike), by statement and arguments
	events    []eventRow                  // the events of its writes (recordEvents), which COMMIT's round trip writes (queueEvents)
	companyID int64                       // the company of the events
}

// queue adds q to what goes out with the next round trip. If it fails, that round trip returns its
// error, and the transaction is aborted.
func (t *tx) queue(q string, args ...any) { t.queued.Queue(q, args...) }

// queueRow queues q, whose one row check reads when the round trip that sends it returns; an error
// of check is that round trip's.
func (t *tx) queueRow(q string, args []any, check func(pgx.Row) error) {
	t.queued.Queue(q, args...).QueryRow(check)
}

// queueRead queues r, whose rows it reads when the round trip that sends it returns.
func (t *tx) queueRead(r read) {
	t.queued.Queue(r.sql, r.args...).Query(r.rows)
}

// queueAlike is queueRead of a read of what a batch's writes do not change (the company's custom
// fields, a reference check), which then returns the same rows to every item that sends it with the
// same arguments: the batch sends it once, where the first item has it, and gives each its rows
// (pipeline.stopped). Outside a batch it is queueRead.
func (t *tx) queueAlike(r read) {
	qq := t.queued.Queue(r.sql, r.args...)
	qq.Query(r.rows)
	if t.pipe != nil {
		if t.alike == nil {
			t.alike = map[*pgx.QueuedQuery]string{}
		}
		t.alike[qq] = r.sql + "\x00" + fmt.Sprintf("%#v", r.args) // Go syntax: one text for one list of values
	}
}

// queryRowAlike is queryRow of a read that queueAlike takes.
func (t *tx) queryRowAlike(ctx context.Context, q string, args []any, dest ...any) error {
	t.queueAlike(read{q, args, func(rows rows) error {
		if !rows.Next() {
			return cmp.Or(rows.Err(), pgx.ErrNoRows)
		}
		return rows.Scan(dest...)
	}})
	return t.read(ctx)
}

// read sends what is queued and then reads, in one round trip: the reader of a write's transaction,
// whose reads see what it wrote.
func (t *tx) read(ctx context.Context, reads ...read) error {
	for _, r := range reads {
		t.queueRead(r)
	}
	b := t.queued
	t.queued = pgx.Batch{}
	return t.send(ctx, &b)
}

// queryRow sends what is queued and then q, and scans q's one row into dest (an error where
// errors.Is(err, sql.ErrNoRows) when there is none).
func (t *tx) queryRow(ctx context.Context, q string, args []any, dest ...any) error {
	t.queued.Queue(q, args...).QueryRow(func(row pgx.Row) error { return row.Scan(dest...) })
	return t.read(ctx)
}

// pipeline sends the round trips of a batch's items, which run at once, each on a tx of its own over
// the batch's connection: when every item still running waits, their statements go out together,
// in item order, a read they send alike once (queueAlike). A create of 100 items is then 2 round
// trips where one after the other it was 200, and 103 statements where each item's were 5.
type pipeline struct {
	c       *pgx.Conn
	txs     []*tx // each item's
	mu      sync.Mutex
	running int                  // items neither done nor waiting
	waiting map[*tx]chan<- error // the items waiting, each for the round trip of its statements
	pending map[*tx][]*pgx.QueuedQuery
	blamed  int // the item whose statement failed a round trip first
}

// send is tx.read's round trip: over the connection, or for an item through its pipeline.
func (t *tx) send(ctx context.Context, b *pgx.Batch) error {
	if t.pipe == nil {
		return t.c.SendBatch(ctx, b).Close()
	}
	p := t.pipe
	done := make(chan error, 1)
	p.mu.Lock()
	p.waiting[t], p.pending[t] = done, b.QueuedQueries
	p.mu.Unlock()
	p.stopped(ctx) // till then t counts as running: no round trip goes out without its statements
	return <-done
}

// stopped records that an item stopped running: it waits (send), or it is done. When none runs, it
// sends the waiting items' statements in item order as one round trip, and wakes them with its
// error; the first item whose statement failed is blamed.
func (p *pipeline) stopped(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running--
	if p.running > 0 || len(p.waiting) == 0 {
		return
	}
	var b pgx.Batch
	sent := map[string]*keptRows{} // the reads sent alike, by statement and arguments
	for i, t := range p.txs {
		for _, qq := range p.pending[t] {
			fn := qq.Fn
			if fn == nil {
				fn = func(br pgx.BatchResults) error { _, err := br.Exec(); return err }
			}
			qq.Fn = func(br pgx.BatchResults) error {
				err := fn(br)
				if err != nil {
					p.blamed = i
				}
				return err
			}
			key, alike := t.alike[qq]
			if kept, ok := sent[key]; alike && ok {
				kept.readers = append(kept.readers, qq.Fn)
				continue
			}
			if alike {
				kept := &keptRows{typeMap: p.c.TypeMap(), readers: []func(pgx.BatchResults) error{qq.Fn}}
				sent[key], qq.Fn = kept, kept.share
			}
			b.QueuedQueries = append(b.QueuedQueries, qq)
		}
		clear(t.alike)
	}
	err := p.c.SendBatch(ctx, &b).Close()
	for _, done := range p.waiting {
		done <- err
	}
	p.running += len(p.waiting)
	clear(p.waiting)
	clear(p.pending)
}

// keptRows are the rows of a read that items of a batch sent alike (queueAlike), read once and given
// to each of its readers as if each had sent it: pgx.BatchResults and pgx.Rows over kept values.
type keptRows struct {
	typeMap *pgtype.Map
	readers []func(pgx.BatchResults) error // each item's, in item order
	fields  []pgconn.FieldDescription
	values  [][][]byte
	tag     pgconn.CommandTag
	err     error
	next    int // the row Next moves to
}

// share reads the rows of the statement and passes them to each reader; a reader's error ends it.
// A failed read is the first reader's error.
func (k *keptRows) share(br pgx.BatchResults) error {
	rows, err := br.Query()
	if err == nil {
		k.fields = slices.Clone(rows.FieldDescriptions())
		for rows.Next() {
			values := make([][]byte, 0, len(k.fields))
			for _, v := range rows.RawValues() { // pgx reuses its buffer
				values = append(values, bytes.Clone(v))
			}
			k.values = append(k.values, values)
		}
		rows.Close()
		k.tag, err = rows.CommandTag(), rows.Err()
	}
	k.err = err
	for _, read := range k.readers {
		k.next = 0
		if err := read(keptResults{k}); err != nil {
			return err
		}
	}
	return nil
}

// keptResults is the pgx.BatchResults of kept rows, for each of their readers in turn.
type keptResults struct{ k *keptRows }

func (r keptResults) Exec() (pgconn.CommandTag, error) { return r.k.tag, r.k.err }
func (r keptResults) Query() (pgx.Rows, error)         { return r.k, r.k.err }
func (r keptResults) QueryRow() pgx.Row                { return r.k }
func (r keptResults) Close() error                     { return nil }
func (r keptResults) Tx() pgx.Tx                       { return nil }

func (k *keptRows) Close()                                       {}
func (k *keptRows) TypeMap() *pgtype.Map                         { return k.typeMap }
func (k *keptRows) Err() error                                   { return k.err }
func (k *keptRows) CommandTag() pgconn.CommandTag                { return k.tag }
func (k *keptRows) FieldDescriptions() []pgconn.FieldDescription { return k.fields }
func (k *keptRows) RawValues() [][]byte                          { return k.values[k.next-1] }
func (k *keptRows) Conn() *pgx.Conn                              { return nil }

func (k *keptRows) Next() bool {
	if k.err != nil || k.next == len(k.values) {
		return false
	}
	k.next++
	return true
}

// Scan scans the current row; as pgx.Row (QueryRow), it moves to the first.
func (k *keptRows) Scan(dest ...any) error {
	if k.next == 0 && !k.Next() {
		return cmp.Or(k.err, pgx.ErrNoRows)
	}
	return pgx.ScanRow(k.typeMap, k.fields, k.RawValues(), dest...)
}

func (k *keptRows) Values() ([]any, error) {
	return nil, errors.New("the values of a read sent alike are scanned, not decoded")
}

// errPartWritten marks the error of a write function that failed after a statement of its own had
// changed data: a check only the database can make, at the write itself (a unique custom value a
// concurrent write took, saveCustom). Every other error of a write function comes before its first
// such statement and leaves nothing of it (docs/architecture.md, "The write contract"). The caller
// undoes this one with the transaction: a single write rolls back, a batch runs again without the
// item (runBatch).
var errPartWritten = errors.New("failed after writing")

// errCommit marks the error of the round trip that commits a write (COMMIT's, or a statement queued last).
var errCommit = errors.New("commit")

// write runs fn in a transaction (tx) and commits it, unless fn fails: then it rolls back and returns
// fn's error. fn may run again on another connection when a round trip fails unsent (withConn), so it
// must keep nothing of a run but what it writes in tx. The transaction runs on kept plans
// (keepPlansSQL): a write's statements find rows by key, and with an array for a parameter
// (id = ANY($2), unnest($2)) PostgreSQL planned them anew at every run, as those plans looked cheaper
// for the array's length. An activity created with 3 targets spent 1.05 ms of PostgreSQL's 2.6 in
// planning four of its statements (pg_stat_statements, track_planning; 1,000,000 activities, wrk
// -c32).
//
// The queued statements pay: `make bench BASELINE=0213f72 ROUNDS=9` against the tree before, which
// wrote through database/sql's Tx one statement at a time (20,000 contacts, wrk -c32), measured,
// paired by round, create 1.04x, patch 1.02x, and with an Idempotency-Key 1.29x and 1.20x; two
// earlier runs of 7 rounds 1.12-1.15x for each. One client (wrk -c1): create 1.30x, patch 1.18x.
func (s *store) write(ctx context.Context, fn func(*tx) error) error {
	return s.withConn(ctx, func(c *pgx.Conn) error {
		t := &tx{c: c}
		t.queue("BEGIN")
		t.queue(keepPlansSQL)
		err := fn(t)
		if err == nil {
			t.queueEvents(ctx)
			t.queue("COMMIT")
			if err = t.read(ctx); err != nil {
				err = fmt.Errorf("%w: %w", errCommit, err)
			}
		}
		st := c.PgConn().TxStatus()
		if st == 'T' || st == 'E' { // fn failed, or COMMIT did
			rctx, cancel := backgroundContext(ctx)
			_, rerr := c.Exec(rctx, "ROLLBACK")
			cancel()
			if rerr != nil {
				return errors.Join(err, driver.ErrBadConn) // the pool must not have it back in a transaction
			}
		}
		return err
	})
}

// keepPlansSQL has PostgreSQL run the statements sent after it in its transaction (a write's, or a
// read's round trip, one implicit transaction) on the plan it keeps for each text, made once for any
// values of its parameters, where it may otherwise plan a text anew at every run. Not where Citus is
// loaded: it cannot distribute such a plan ("could not create distributed plan"), and the processes
// that never migrate (the key commands) would not know it is there (distribute).
const keepPlansSQL = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true) WHERE current_setting('citus.version', true) IS NULL`

// eachRow returns a read of q that scans each of its rows into one T and passes it to take.
func eachRow[T any, P scanner[T]](q string, args []any, take func(P)) read {
	return read{q, args, func(rows rows) error {
		var v T
		dest := P(&v).scanDest() // every row sets every column: v is scanned into again
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			take(&v)
		}
		return rows.Err()
	}}
}

// rowsInto returns a read of q that scans its rows into new Ts appended to *out.
func rowsInto[T any, P scanner[T]](out *[]T, q string, args ...any) read {
	return eachRow[T, P](q, args, func(v P) { *out = append(*out, *v) })
}

const (
	deleteBatch       = 1000             // the most rows a retention DELETE removes: none holds its locks long
	backgroundTimeout = 10 * time.Second // bounds one statement of the servers' background work
)

// backgroundContext is the context of one statement of background work: a stopping server (ctx done)
// lets it finish within backgroundTimeout. An interrupted one makes pgx send a cancel request, which
// PgBouncer 1.18 can die of (pgbouncer#822): make test-pgbouncer saw it in 2 of 4 runs.
func backgroundContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), backgroundTimeout)
}

// deleteInBatches runs del, a DELETE of at most deleteBatch rows of what, at start and then every
// interval until ctx is done; while it deletes whole batches, again after a second.
func deleteInBatches(ctx context.Context, log *slog.Logger, what string, interval time.Duration, del func(context.Context) (int64, error)) {
	for {
		dctx, cancel := backgroundContext(ctx)
		n, err := del(dctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			log.Warn("delete "+what, "err", err)
		}
		wait := interval
		if n == deleteBatch {
			wait = min(wait, time.Second) // more are due: soon, without hogging the database
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// refErrors returns fieldErrors naming each reference whose check failed (fields[i] names the field,
// kinds[i] the kind of object it must point at), or nil when all passed.
func refErrors(ok []bool, fields, kinds []string) error {
	var errs fieldErrors
	for i, good := range ok {
		if !good {
			errs = append(errs, fieldError{Field: fields[i], Message: "must be the id of an existing " + kinds[i]})
		}
	}
	if errs == nil {
		return nil
	}
	return errs
}

// mapWriteError turns what PostgreSQL refused of a write that passed validation (a referenced object
// deleted meanwhile, a limit only it knows) into fieldErrors naming the field, or errOutOfRange.
func mapWriteError(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	switch pe.Code {
	case "23503", "23514", "23505": // foreign key, check, unique
		return fieldErrors{{Field: fieldOfConstraint(pe.ConstraintName), Message: "is not valid here"}}
	case "22001", "22003", "22007", "22008", "22P02": // too long, out of range, bad datetime, bad text
		return fmt.Errorf("%w: %w", errOutOfRange, err)
	}
	return err
}

// fieldOfConstraint guesses the JSON field a PostgreSQL constraint name is about, from its last
// column: "contacts_company_id_organization_id_fkey" is organizationId.
func fieldOfConstraint(name string) string {
	for _, suffix := range []string{"_fkey", "_check", "_key"} {
		name = strings.TrimSuffix(name, suffix)
	}
	words := strings.Split(name, "_")
	last := words[len(words)-1]
	if last == "id" && len(words) > 1 {
		return words[len(words)-2] + "Id"
	}
	return last
}

// pgCode returns the SQLSTATE of a PostgreSQL error, or "".
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// isDBUnavailable reports whether err means the database cannot be reached or is overloaded (not
// that the query was wrong): connection failures, shutdown, too many connections, statement timeouts.
func isDBUnavailable(err error) bool {
	var ce *pgconn.ConnectError
	var ne net.Error
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.As(err, &ce) || errors.As(err, &ne) {
		return true
	}
	code := pgCode(err)
	return strings.HasPrefix(code, "08") || // connection exception
		strings.HasPrefix(code, "53") || // insufficient resources
		code == "57P01" || code == "57P02" || code == "57P03" || // shutdown, cannot connect now
		code == "57014" // statement timeout
}

// migrationLock is the pg_advisory_xact_lock key under which migrations run ("rolodex" in ASCII).
const migrationLock = 0x726f6c6f646578

type migration struct { // one embedded schema file
	version int
	name    string
	sql     string
}

// migrations returns the embedded schema files in version order: each name, NNNN_name.sql, starts
// with its version in four digits, and fs.ReadDir sorts by name.
func migrations() ([]migration, error) {
	entries, err := schemaFS.ReadDir("schema")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		num, _, _ := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if len(num) != 4 || err != nil || !strings.HasSuffix(e.Name(), ".sql") {
			return nil, fmt.Errorf("schema file %q is not named NNNN_name.sql", e.Name())
		}
		b, err := schemaFS.ReadFile("schema/" + e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(b)})
	}
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

// migrate applies the schema files not recorded in schema_migrations and returns their versions. Each
// runs in a transaction under a transaction-level advisory lock: servers starting at once wait for each
// other, and a lock that ends with its transaction is safe behind PgBouncer in transaction mode too.
func (s *store) migrate(ctx context.Context) ([]int, error) {
	ms, err := migrations()
	if err != nil {
		return nil, err
	}
	var done []int
	for _, m := range ms {
		applied, err := s.applyMigration(ctx, m)
		if err != nil {
			return done, fmt.Errorf("migrate %s: %w", m.name, err)
		}
		if applied {
			done = append(done, m.version)
		}
	}
	return done, s.distribute(ctx)
}

// applyMigration applies m and records it, in one transaction under the migration lock, unless it
// is recorded already.
func (s *store) applyMigration(ctx context.Context, m migration) (applied bool, err error) {
	const create = `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`
	const record = `INSERT INTO schema_migrations (version, name) VALUES ($1, $2) ON CONFLICT DO NOTHING`
	err = s.withConn(ctx, func(c *pgx.Conn) error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			// A migration rewrites what is there, minutes of work at a million rows: no -statement-timeout.
			if _, err := tx.Exec(ctx, `SET LOCAL statement_timeout = 0`); err != nil {
				return err
			}
			// The lock comes first: CREATE TABLE IF NOT EXISTS can fail when another transaction runs it too.
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, create); err != nil {
				return err
			}
			if tag, err := tx.Exec(ctx, record, m.version, m.name); err != nil || tag.RowsAffected() == 0 {
				return err // no row: recorded already
			}
			_, err := tx.Exec(ctx, m.sql)
			applied = err == nil
			return err
		})
	})
	return applied, err
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
