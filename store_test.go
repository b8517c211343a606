package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
)

func TestMigrateIsIdempotentAndSafeConcurrently(t *testing.T) {
	t.Parallel()
	st, err := openStore(dbConfig{url: freshDatabase(t), maxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	want := len(ms) // versions may skip a number reserved for a change in flight
	var wg sync.WaitGroup
	results, errs := make([][]int, 2), make([]error, 2)
	for i := range 2 {
		wg.Go(func() { results[i], errs[i] = st.migrate(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("two migrations at once: %v", err)
	}
	// Together they applied every version exactly once (which of them applied which may vary).
	all := slices.Sorted(slices.Values(append(slices.Clone(results[0]), results[1]...)))
	if len(all) != want || len(slices.Compact(all)) != want {
		t.Errorf("the two migrations applied %v and %v; want each of the %d versions once", results[0], results[1], want)
	}
	if again, err := st.migrate(ctx); err != nil || len(again) != 0 {
		t.Errorf("third migrate = %v, %v; want nothing applied", again, err)
	}
	if v, err := st.schemaVersion(ctx); err != nil || v != latestSchemaVersion() {
		t.Errorf("schemaVersion = %d, %v; want %d", v, err, latestSchemaVersion())
	}
}

// A migration is not held to the statement timeout, as one takes minutes at a million rows: here it
// waits for the migration lock, held elsewhere, for longer than the timeout, and then applies.
func TestMigrateOutlastsTheStatementTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := freshDatabase(t)
	st, err := openStore(dbConfig{url: dbURL, maxConns: 2, statementTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	holder, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	// In a transaction, so that through PgBouncer (transaction mode) it stays on one connection.
	lock, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := st.migrate(ctx); done <- err }()
	const waiting = `SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
		WHERE d.datname = current_database() AND l.locktype = 'advisory' AND NOT l.granted`
	for n := 0; n == 0; time.Sleep(10 * time.Millisecond) {
		if err := lock.QueryRow(ctx, waiting).Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond) // three timeouts
	if err := lock.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("migrate after waiting for the lock: %v", err)
	}
	if v, err := st.schemaVersion(ctx); err != nil || v != latestSchemaVersion() {
		t.Errorf("schemaVersion = %d, %v; want %d", v, err, latestSchemaVersion())
	}
}

// PATCHes of different fields of one record sent at once each merge into what the one before wrote:
// every one applies (a version each, no field lost) and the record ends with all of them.
func TestConcurrentPatchesOfOneRecordAllApply(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for _, rec := range []struct {
		path, create string
		bodies       []string
	}{
		{"/v1/contacts", `{"name":"Ana"}`, []string{`{"surname":"Gil"}`, `{"dni":"12345678Z"}`,
			`{"jobTitle":"Buyer"}`, `{"phone":"+34 910 000 001"}`, `{"mobilePhone":"+34 600 000 002"}`,
			`{"address":"Calle Mayor 1"}`, `{"city":"Madrid"}`, `{"withSales":true}`}},
		{"/v1/business", `{"title":"Deal"}`, []string{`{"title":"Big deal"}`, `{"reasonLost":"Price"}`,
			`{"private":true}`, `{"deadline":"2027-01-01T00:00:00.000Z"}`, `{"dateWon":"2027-02-01T00:00:00.000Z"}`}},
	} {
		t.Run(rec.path, func(t *testing.T) {
			created := call(t, "POST", rec.path, c.key, rec.create)
			path := itemPath(rec.path, decode[obj](t, wantStatus(t, created, http.StatusCreated).body).id())
			v0, err := strconv.Atoi(strings.Trim(created.header.Get("ETag"), `"`))
			if err != nil {
				t.Fatalf("ETag %q: %v", created.header.Get("ETag"), err)
			}
			n := len(rec.bodies)
			tags := make([]string, n)
			var wg sync.WaitGroup
			for i, body := range rec.bodies {
				wg.Go(func() {
					r, err := send(nil, testEnv.baseURL, "PATCH", path, c.key, body)
					if err != nil || r.status != http.StatusOK {
						t.Errorf("PATCH %s %s = %d, %v; want 200", path, body, r.status, err)
					}
					tags[i] = r.header.Get("ETag")
				})
			}
			wg.Wait()
			r := call(t, "GET", path, c.key, "")
			var want []string
			for v := v0 + 1; v <= v0+n; v++ {
				want = append(want, fmt.Sprintf(`"%d"`, v))
			}
			if diff := cmp.Diff(want, slices.Sorted(slices.Values(tags))); diff != "" || r.header.Get("ETag") != want[n-1] {
				t.Errorf("ETags of %d concurrent PATCHes (-want +got):\n%s\nthen GET: %s; want %s", n, diff, r.header.Get("ETag"), want[n-1])
			}
			// Every field patched has its value: no PATCH was lost.
			got := decode[map[string]json.RawMessage](t, r.body)
			for _, body := range rec.bodies {
				for k, v := range decode[map[string]json.RawMessage](t, []byte(body)) {
					if string(got[k]) != string(v) {
						t.Errorf("after the PATCHes %s = %s; want %s (from %s): a PATCH was lost", k, got[k], v, body)
					}
				}
			}
		})
	}
}

// Every way a PATCH can fail, on a server with one database connection, leaves the row free for
// another writer and the connection usable.
func TestFailedPatchLeavesNoLock(t *testing.T) {
	t.Parallel()
	base := startServer(t, map[string]string{"ROLODEX_DB_MAX_CONNS": "1"}, &syncBuffer{})
	c := newTestCompany(t)
	contact := createPath(t, c.key, "/v1/contacts", `{"name":"Ana"}`)
	deal := createPath(t, c.key, "/v1/business", `{"title":"Deal"}`)
	for _, tt := range []struct {
		name, path, body, ifMatch string
		status                    int
	}{
		{"a reference to nothing", contact, `{"city":"Sevilla","countryId":999}`, "", 422},
		{"a stale If-Match", contact, `{"city":"Sevilla"}`, `"999"`, 412},
		{"a bad field", contact, `{"email":"x"}`, "", 422},
		{"no change", contact, `{}`, "", 200},
		{"a change", contact, `{"city":"Sevilla"}`, "", 200},
		{"a missing record", "/v1/contacts/999999999", `{"city":"Sevilla"}`, "", 404},
		{"a business status that is not one", deal, `{"statusId":999}`, "", 422},
		{"a business change", deal, `{"title":"Won"}`, "", 200},
	} {
		r := callAt(t, nil, base, "PATCH", tt.path, c.key, tt.body, "If-Match", tt.ifMatch)
		if r.status != tt.status {
			t.Errorf("%s: PATCH %s %s = %d; want %d (body %s)", tt.name, tt.path, tt.body, r.status, tt.status, r.body)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := testEnv.st.db.ExecContext(ctx, `WITH c AS (UPDATE contacts SET company_id = company_id WHERE company_id = $1)
			UPDATE business SET company_id = company_id WHERE company_id = $1`, c.id)
		cancel()
		if err != nil {
			t.Errorf("after %s: another connection could not write the rows: %v", tt.name, err)
		}
	}
	if r := callAt(t, nil, base, "GET", contact, c.key, ""); r.status != http.StatusOK {
		t.Errorf("GET %s after the failures = %d; want 200 (the one connection still works)", contact, r.status)
	}
}

// A write's statements run on kept plans, and only its own: the setting ends with its transaction.
// Where Citus is loaded they do not (it cannot distribute those plans).
func TestWritesRunOnKeptPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	want := "force_generic_plan"
	if testEnv.citus {
		want = "auto"
	}
	var got string
	err := testEnv.st.write(ctx, func(tx *tx) error {
		return tx.queryRow(ctx, `SELECT current_setting('plan_cache_mode')`, nil, &got)
	})
	if err != nil || got != want {
		t.Errorf("plan_cache_mode in a write = %q, %v; want %q", got, err, want)
	}
	err = testEnv.st.withConn(ctx, func(c *pgx.Conn) error { // the pool keeps one: the write's, or another
		return c.QueryRow(ctx, `SELECT current_setting('plan_cache_mode')`).Scan(&got)
	})
	if err != nil || got != "auto" {
		t.Errorf("plan_cache_mode after a write = %q, %v; want auto", got, err)
	}
}

// One company's requests hold at most half of the pool's connections at once: on a server with 4,
// a company whose 6 PATCHes wait for a row lock holds 2 connections, its other 4 PATCHes wait for
// their turn holding none, and another company's retrieve is answered meanwhile.
func TestOneCompanyHoldsAtMostHalfThePool(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(testEnv.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	app := "rolodex_share_" + randomHex(4) // names the server's connections in pg_stat_activity
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	base := startServer(t, map[string]string{"DATABASE_URL": u.String(), "ROLODEX_DB_MAX_CONNS": "4", "ROLODEX_WEBHOOK_SLOTS": "0",
		"ROLODEX_STATEMENT_TIMEOUT": "30s"}, &syncBuffer{})
	busy, other := newTestCompany(t), newTestCompany(t)
	locked := createPath(t, busy.key, "/v1/contacts", `{"name": "Locked"}`)
	retrieve := createPath(t, other.key, "/v1/contacts", `{"name": "Other"}`)
	wantStatus(t, callAt(t, nil, base, "GET", locked, busy.key, ""), http.StatusOK) // both keys in the server's cache
	wantStatus(t, callAt(t, nil, base, "GET", retrieve, other.key, ""), http.StatusOK)

	lock, err := testEnv.st.db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback()
	if _, err := lock.Exec(`SELECT FROM contacts WHERE company_id = $1 FOR UPDATE`, busy.id); err != nil {
		t.Fatal(err)
	}
	var done atomic.Int64
	var wg sync.WaitGroup
	statuses := make([]int, 6)
	for i := range statuses {
		wg.Go(func() {
			r, err := send(nil, base, "PATCH", locked, busy.key, fmt.Sprintf(`{"city": "C%d"}`, i))
			statuses[i] = r.status
			if err != nil {
				t.Error(err)
			}
			done.Add(1)
		})
	}
	waiting := func() int64 { // the server's statements that wait for the lock
		// Not this statement's own backend: through PgBouncer it may carry the server's application_name,
		// which PgBouncer leaves on a server connection for a client that sets none.
		return sqlID(t, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND state = 'active'
			AND query LIKE '%FROM contacts%FOR UPDATE%' AND pid <> pg_backend_pid()`, app)
	}
	for deadline := time.Now().Add(20 * time.Second); waiting() < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the busy company's PATCHes never took 2 connections (%d did)", waiting())
		}
	}
	wantStatus(t, callAt(t, nil, base, "GET", retrieve, other.key, ""), http.StatusOK)
	if n, w := done.Load(), waiting(); n != 0 || w != 2 {
		t.Errorf("while another company was answered: %d of the busy company's PATCHes done, %d holding a connection; want 0 and 2", n, w)
	}
	lock.Rollback()
	wg.Wait()
	if want := slices.Repeat([]int{http.StatusOK}, 6); !slices.Equal(statuses, want) {
		t.Errorf("the busy company's PATCHes = %v; want each 200 once the lock was gone", statuses)
	}
}
