package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
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

	want := latestSchemaVersion()
	var wg sync.WaitGroup
	results := make([][]int, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = st.migrate(context.Background())
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("migration %d: %v", i, err)
		}
	}
	// Together they applied every version exactly once (which of them applied which may vary).
	all := append(slices.Clone(results[0]), results[1]...)
	slices.Sort(all)
	if len(all) != want || len(slices.Compact(slices.Clone(all))) != want {
		t.Errorf("the two migrations applied %v and %v; want each of the %d versions once", results[0], results[1], want)
	}
	again, err := st.migrate(context.Background())
	if err != nil || len(again) != 0 {
		t.Errorf("third migrate = %v, %v; want nothing applied", again, err)
	}
	v, err := st.schemaVersion(context.Background())
	if err != nil || v != want {
		t.Errorf("schemaVersion = %d, %v; want %d", v, err, want)
	}
	var rows int
	st.db.QueryRow(`SELECT count(*) FROM schema_migrations`).Scan(&rows)
	if rows != want {
		t.Errorf("schema_migrations has %d rows; want %d", rows, want)
	}
}

// TestSchemaQIndexesTakeWritesDirectly: the trigram indexes of q keep no pending list (schema
// version 4), as the write that found one full merged all of it, for seconds (make bench). pg_trgm
// is installed where the tests run, so both indexes exist (TestListPlansUseIndexes).
func TestSchemaQIndexesTakeWritesDirectly(t *testing.T) {
	t.Parallel()
	for _, ix := range []string{"contacts_q", "business_q"} {
		var opts string
		err := testEnv.st.db.QueryRow(`SELECT coalesce(array_to_string(reloptions, ','), '') FROM pg_class
			WHERE oid = to_regclass($1)`, ix).Scan(&opts)
		if err != nil {
			t.Fatalf("%s: %v", ix, err)
		}
		if opts != "fastupdate=off" {
			t.Errorf("%s has options %q; want fastupdate=off", ix, opts)
		}
	}
}

func TestSchemaEveryTenantTableIsKeyedByCompany(t *testing.T) {
	t.Parallel()
	// Every table with a company_id column, and the columns of its primary key in order.
	const q = `
		SELECT c.relname, array_to_string(array_agg(a.attname ORDER BY k.ord), ',')
		FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = current_schema()
		JOIN pg_constraint p ON p.conrelid = c.oid AND p.contype = 'p'
		CROSS JOIN LATERAL unnest(p.conkey) WITH ORDINALITY AS k(attnum, ord)
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
		WHERE EXISTS (SELECT FROM pg_attribute x WHERE x.attrelid = c.oid AND x.attname = 'company_id')
		GROUP BY c.relname ORDER BY c.relname`
	rows, err := testEnv.st.db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]string{}
	for rows.Next() {
		var table, pk string
		if err := rows.Scan(&table, &pk); err != nil {
			t.Fatal(err)
		}
		got[table] = pk
	}
	want := map[string]string{
		"api_keys": "company_id,id", "boards": "company_id,id", "business": "company_id,id",
		"contacts": "company_id,id", "organizations": "company_id,id", "stages": "company_id,id",
		"users": "company_id,id",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("primary keys of tenant tables (-want +got):\n%s", diff)
	}
}

func TestSchemaRejectsCrossCompanyReferences(t *testing.T) {
	t.Parallel()
	a, b := newTestCompany(t), newTestCompany(t)
	ctx := context.Background()
	var orgA int64
	if err := testEnv.st.db.QueryRowContext(ctx,
		`INSERT INTO organizations (company_id, name) VALUES ($1, 'A org') RETURNING id`, a.id).Scan(&orgA); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		q    string
		args []any
	}{
		{"a contact of B pointing at A's organization", `INSERT INTO contacts (company_id, name, organization_id, user_creator_id) VALUES ($1, 'x', $2, $3)`,
			[]any{b.id, orgA, b.userID}},
		{"a contact of B created by A's user", `INSERT INTO contacts (company_id, name, user_creator_id) VALUES ($1, 'x', $2)`,
			[]any{b.id, a.userID}},
		{"an API key of B for A's user", `INSERT INTO api_keys (company_id, user_id, prefix, hash) VALUES ($1, $2, 'rdx_test', $3)`,
			[]any{b.id, a.userID, make([]byte, 32)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := testEnv.st.db.ExecContext(ctx, tt.q, tt.args...)
			if code := pgCode(err); code != pgForeignKeyViolation {
				t.Errorf("insert: err = %v (SQLSTATE %q); want a foreign key violation", err, code)
			}
		})
	}
}

func TestCreateCompanyMakesDefaults(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ctx := context.Background()
	db := testEnv.st.db
	var contactStages, boards, boardStages, currency int
	db.QueryRowContext(ctx, `SELECT count(*) FROM stages WHERE company_id = $1 AND board_id IS NULL`, c.id).Scan(&contactStages)
	db.QueryRowContext(ctx, `SELECT count(*) FROM boards WHERE company_id = $1 AND is_default`, c.id).Scan(&boards)
	db.QueryRowContext(ctx, `SELECT count(*) FROM stages s JOIN boards b ON b.company_id = s.company_id AND b.id = s.board_id
		WHERE s.company_id = $1 AND b.is_default`, c.id).Scan(&boardStages)
	db.QueryRowContext(ctx, `SELECT default_currency_id FROM companies WHERE id = $1`, c.id).Scan(&currency)
	got := []int{contactStages, boards, boardStages, currency}
	want := []int{len(defaultContactStages), 1, len(defaultBoardStages), 978}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("contact stages, default boards, board stages, currency (-want +got):\n%s", diff)
	}
}

func TestReferenceDataIsLoaded(t *testing.T) {
	t.Parallel()
	var countries, currencies int
	var spain, euro string
	db := testEnv.st.db
	db.QueryRow(`SELECT count(*) FROM countries`).Scan(&countries)
	db.QueryRow(`SELECT count(*) FROM currencies`).Scan(&currencies)
	db.QueryRow(`SELECT code || ' ' || name FROM countries WHERE id = 724`).Scan(&spain)
	db.QueryRow(`SELECT code || ' ' || name FROM currencies WHERE id = 978`).Scan(&euro)
	if countries != 249 || currencies < 150 || spain != "ES Spain" || euro != "EUR Euro" {
		t.Errorf("countries = %d, currencies = %d, 724 = %q, 978 = %q; want all 249 ISO 3166-1 countries, the ISO 4217 currencies, ES Spain, EUR Euro",
			countries, currencies, spain, euro)
	}
}

func TestAPIKeyIsStoredOnlyAsHash(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	if !strings.HasPrefix(c.key, "rdx_") || len(c.key) != 36 {
		t.Fatalf("key %q: want rdx_ and 32 characters", c.key)
	}
	var prefix string
	var hash []byte
	err := testEnv.st.db.QueryRow(`SELECT prefix, hash FROM api_keys WHERE company_id = $1`, c.id).Scan(&prefix, &hash)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(c.key))
	if prefix != c.key[:keyPrefixLen] || !bytes.Equal(hash, sum[:]) {
		t.Errorf("stored prefix %q hash %x; want %q and the key's SHA-256", prefix, hash, c.key[:keyPrefixLen])
	}
}

func TestAPIKeyLifecycle(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ctx := context.Background()
	st := testEnv.st

	key, err := st.createAPIKey(ctx, c.id, c.userID)
	if err != nil {
		t.Fatal(err)
	}
	if key == c.key {
		t.Fatal("a second key equals the first")
	}
	got, err := st.lookupAPIKey(ctx, sha256.Sum256([]byte(key)))
	if err != nil || got != (tenant{companyID: c.id, userID: c.userID}) {
		t.Fatalf("lookup = %+v, %v; want company %d user %d", got, err, c.id, c.userID)
	}
	if err := st.revokeAPIKey(ctx, key[:keyPrefixLen]); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if _, err := st.lookupAPIKey(ctx, sha256.Sum256([]byte(key))); !errors.Is(err, errNotFound) {
		t.Errorf("lookup of a revoked key: err = %v; want errNotFound", err)
	}
	if err := st.revokeAPIKey(ctx, key[:keyPrefixLen]); !errors.Is(err, errNotFound) {
		t.Errorf("second revoke: err = %v; want errNotFound", err)
	}
	if _, err := st.lookupAPIKey(ctx, sha256.Sum256([]byte(c.key))); err != nil {
		t.Errorf("the company's other key stopped working: %v", err)
	}
	if _, err := st.createAPIKey(ctx, c.id, c.userID+1_000_000); !errors.Is(err, errNotFound) {
		t.Errorf("key for a user that does not exist: err = %v; want errNotFound", err)
	}
}

func TestAuthenticatorCachesForTTL(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ctx := context.Background()
	now := time.Now()
	a := newAuthenticator(testEnv.st)
	a.now = func() time.Time { return now }

	if _, err := a.resolve(ctx, c.key); err != nil {
		t.Fatal(err)
	}
	if err := testEnv.st.revokeAPIKey(ctx, c.key); err != nil {
		t.Fatal(err)
	}
	if _, err := a.resolve(ctx, c.key); err != nil {
		t.Errorf("within the TTL a cached key still resolves; got %v", err)
	}
	now = now.Add(keyCacheTTL + time.Millisecond)
	if _, err := a.resolve(ctx, c.key); !errors.Is(err, errNotFound) {
		t.Errorf("after the TTL a revoked key: err = %v; want errNotFound", err)
	}
}

// TestConcurrentPatchesOfOneRecordAllApply sends PATCHes of different fields of one record at once:
// each waits for the row lock of the one before and merges into what that one wrote, so every one
// applies (a version each, no field lost) and the record ends with all of them.
func TestConcurrentPatchesOfOneRecordAllApply(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ct, created := mustCreateContact(t, c, `{"name":"Ana"}`)
	b, createdBiz := bizCreate(t, c.key, `{"title": "Deal"}`)
	for _, rec := range []struct {
		path, tag string
		bodies    []string
	}{
		{"/v1/contacts/" + ct.ID, created.header.Get("ETag"), []string{`{"surname":"Gil"}`, `{"dni":"12345678Z"}`,
			`{"jobTitle":"Buyer"}`, `{"phone":"+34 910 000 001"}`, `{"mobilePhone":"+34 600 000 002"}`,
			`{"address":"Calle Mayor 1"}`, `{"city":"Madrid"}`, `{"withSales":true}`}},
		{bizPath(b.ID), createdBiz.header.Get("ETag"), []string{`{"title":"Big deal"}`, `{"reasonLost":"Price"}`,
			`{"private":true}`, `{"deadline":"2027-01-01T00:00:00.000Z"}`, `{"dateWon":"2027-02-01T00:00:00.000Z"}`}},
	} {
		t.Run(rec.path, func(t *testing.T) {
			v0, err := strconv.ParseInt(strings.Trim(rec.tag, `"`), 10, 64)
			if err != nil {
				t.Fatalf("ETag %q: %v", rec.tag, err)
			}
			n := len(rec.bodies)
			tags := make([]string, n)
			var wg sync.WaitGroup
			for i, body := range rec.bodies {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r, err := send(nil, testEnv.baseURL, "PATCH", rec.path, c.key, body)
					if err != nil {
						t.Error(err)
						return
					}
					if r.status != http.StatusOK {
						t.Errorf("PATCH %s = %d; want 200", body, r.status)
					}
					tags[i] = r.header.Get("ETag")
				}()
			}
			wg.Wait()
			var want []string
			for v := v0 + 1; v <= v0+int64(n); v++ {
				want = append(want, etag(v))
			}
			slices.Sort(tags)
			slices.Sort(want)
			if diff := cmp.Diff(want, tags); diff != "" {
				t.Errorf("ETags of %d concurrent PATCHes (-want +got):\n%s", n, diff)
			}
			r := call(t, "GET", rec.path, c.key, "")
			if r.header.Get("ETag") != etag(v0+int64(n)) {
				t.Errorf("GET %s after the PATCHes: ETag %s; want %s", rec.path, r.header.Get("ETag"), etag(v0+int64(n)))
			}
			var got map[string]any
			if err := json.Unmarshal(r.body, &got); err != nil {
				t.Fatal(err)
			}
			for _, body := range rec.bodies {
				var patch map[string]any
				if err := json.Unmarshal([]byte(body), &patch); err != nil {
					t.Fatal(err)
				}
				for k, v := range patch {
					if !cmp.Equal(got[k], v) {
						t.Errorf("after the PATCHes %s = %v; want %v (from %s): a PATCH was lost", k, got[k], v, body)
					}
				}
			}
		})
	}
}

// TestFailedPatchReleasesItsLock runs every way a PATCH can end after it has locked the row on a
// server with a pool of one connection: a writer from another connection must not wait for the row,
// and the server must go on with the same connection, rolled back rather than dropped; unless the
// ROLLBACK cannot be sent, when the connection must be closed and replaced.
func TestFailedPatchReleasesItsLock(t *testing.T) {
	t.Parallel()
	st, base := newTestServer(t, 1, nil)
	backend := func() (pid int) {
		if err := st.db.QueryRow(`SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			t.Fatalf("the server's connection: %v", err)
		}
		return pid
	}
	pid := backend()
	c := newTestCompany(t)
	ct, _ := mustCreateContact(t, c, `{"name":"Ana"}`)
	b, _ := bizCreate(t, c.key, `{"title": "Deal"}`)
	tests := []struct {
		name, path, body, ifMatch string
		status                    int
	}{
		{"a reference to nothing", "/v1/contacts/" + ct.ID, `{"city":"Sevilla","countryId":999}`, "", 422},
		{"a stale If-Match", "/v1/contacts/" + ct.ID, `{"city":"Sevilla"}`, `"999"`, 412},
		{"a bad field", "/v1/contacts/" + ct.ID, `{"email":"x"}`, "", 422},
		{"no change", "/v1/contacts/" + ct.ID, `{}`, "", 200},
		{"a change", "/v1/contacts/" + ct.ID, `{"city":"Sevilla"}`, "", 200},
		{"a missing record", "/v1/contacts/999999999", `{"city":"Sevilla"}`, "", 404},
		{"a business status that is not one", bizPath(b.ID), `{"statusId": 999}`, "", 422},
		{"a business change", bizPath(b.ID), `{"title": "Won"}`, "", 200},
	}
	// writable checks that the row is not locked any more; released, that and that the server kept
	// its connection.
	writable := func(name, table string, id any) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if _, err := testEnv.st.db.ExecContext(ctx, `UPDATE `+table+` SET company_id = company_id WHERE id = $1`, id); err != nil {
			t.Errorf("%s: another connection could not write the row: %v", name, err)
		}
	}
	released := func(name, table string, id any) {
		t.Helper()
		writable(name, table, id)
		if got := backend(); got != pid {
			t.Errorf("%s: the server's connection is now backend %d; want %d still (rolled back, kept)", name, got, pid)
		}
	}
	for _, tt := range tests {
		r := callAt(t, nil, base, "PATCH", tt.path, c.key, tt.body, "If-Match", tt.ifMatch)
		if r.status != tt.status {
			t.Errorf("%s: PATCH %s %s = %d; want %d (body %s)", tt.name, tt.path, tt.body, r.status, tt.status, r.body)
		}
		if strings.HasPrefix(tt.path, "/v1/contacts/") {
			released(tt.name, "contacts", ct.ID)
		} else {
			released(tt.name, "business", b.ID)
		}
	}

	// The body's checks leave the database no UPDATE to refuse; the constraints still can, and then
	// the transaction is aborted with COMMIT unsent.
	var version int64
	lock := `SELECT version FROM contacts WHERE company_id = $1 AND id = $2 FOR UPDATE`
	err := st.updateLocked(context.Background(), lock, []any{c.id, ct.ID}, []any{&version},
		func(*pgx.Conn) (string, []any, []any, error) {
			return `UPDATE contacts SET name = '' WHERE company_id = $1 AND id = $2 RETURNING version`,
				[]any{c.id, ct.ID}, []any{&version}, nil
		})
	var ae *apiError
	if !errors.As(err, &ae) || ae.Status != http.StatusUnprocessableEntity {
		t.Errorf("an UPDATE the database refuses: %v; want a 422 *apiError", err)
	}
	released("an UPDATE the database refuses", "contacts", ct.ID)

	// A change that leaves the connection busy (a result it never reads) makes the ROLLBACK fail on a
	// live connection: the server must close it, which ends the transaction and its lock, and the
	// pool must go on with a new one instead of handing out one still in the transaction.
	boom := errors.New("a change that leaves its connection busy")
	err = st.updateLocked(context.Background(), lock, []any{c.id, ct.ID}, []any{&version},
		func(conn *pgx.Conn) (string, []any, []any, error) {
			if _, err := conn.Query(context.Background(), `SELECT 1`); err != nil {
				return "", nil, nil, err
			}
			return "", nil, nil, boom
		})
	if !errors.Is(err, boom) {
		t.Errorf("a change that leaves its connection busy: %v; want its error", err)
	}
	writable("after a ROLLBACK that could not be sent", "contacts", ct.ID)
	if got := backend(); got == pid {
		t.Errorf("after a ROLLBACK that could not be sent: the server still has backend %d; want it closed and a new one", pid)
	}
	if r := callAt(t, nil, base, "PATCH", "/v1/contacts/"+ct.ID, c.key, `{"city":"Cádiz"}`); r.status != http.StatusOK {
		t.Errorf("a PATCH after the closed connection = %d; want 200 (body %s)", r.status, r.body)
	}
}

// queryCounter counts what a store sends PostgreSQL (a pgx.QueryTracer and pgx.BatchTracer): each
// statement, alone or in a batch; or, perBatch, each round trip (a batch once, whatever it holds).
type queryCounter struct {
	n        atomic.Int64
	perBatch bool
}

func (c *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *queryCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	if c.perBatch {
		c.n.Add(1)
	}
	return ctx
}

func (c *queryCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	if !c.perBatch {
		c.n.Add(1)
	}
}

func (c *queryCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// TestWriteRoundTrips pins how many round trips each write takes: a PATCH locks in one and writes in
// a second, and checks references in a third only when it changes one; a business record is created
// in three; a DELETE without If-Match is one statement.
func TestWriteRoundTrips(t *testing.T) {
	t.Parallel()
	rt := &queryCounter{perBatch: true}
	_, base := newTestServer(t, 2, rt)
	c := newTestCompany(t)
	org := sqlID(t, `INSERT INTO organizations (company_id, name) VALUES ($1, 'Org') RETURNING id`, c.id)
	other := sqlID(t, `INSERT INTO organizations (company_id, name) VALUES ($1, 'Other') RETURNING id`, c.id)
	ct, _ := mustCreateContact(t, c, fmt.Sprintf(`{"name":"Ana","organizationId":%d}`, org))
	gone, _ := bizCreate(t, c.key, `{"title":"Lost deal"}`)
	contact := "/v1/contacts/" + ct.ID
	callAt(t, nil, base, "GET", contact, c.key, "") // the key into this server's cache
	tests := []struct {
		name, method, path, body string
		status                   int
		want                     int64
	}{
		{"a PATCH of a field", "PATCH", contact, `{"jobTitle":"Buyer"}`, 200, 2},
		{"a PATCH of a reference", "PATCH", contact, fmt.Sprintf(`{"organizationId":%d}`, other), 200, 3},
		{"a PATCH that changes nothing (locks, then rolls back)", "PATCH", contact, `{"jobTitle":"Buyer"}`, 200, 2},
		{"a business POST that takes the defaults", "POST", "/v1/business", `{"title":"New deal"}`, 201, 3},
		{"a DELETE", "DELETE", bizPath(gone.ID), "", 204, 1},
	}
	for _, tt := range tests {
		rt.n.Store(0)
		r := callAt(t, nil, base, tt.method, tt.path, c.key, tt.body)
		if r.status != tt.status {
			t.Fatalf("%s: %s %s = %d; want %d (body %s)", tt.name, tt.method, tt.path, r.status, tt.status, r.body)
		}
		if got := rt.n.Load(); got != tt.want {
			t.Errorf("%s: %d round trips; want %d", tt.name, got, tt.want)
		}
	}
}

// newTestServer is a server of its own on the suite's database, with a pool of maxConns connections
// that tracer (nil: none) watches, and a log thrown away; it stops when the test ends.
func newTestServer(t *testing.T, maxConns int, tracer pgx.QueryTracer) (*store, string) {
	t.Helper()
	st, err := openStore(dbConfig{url: testEnv.dbURL, maxConns: maxConns, tracer: tracer})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(newHandler(st, slog.New(slog.NewTextHandler(io.Discard, nil))))
	t.Cleanup(func() {
		srv.Close()
		st.Close()
	})
	return st, srv.URL
}
