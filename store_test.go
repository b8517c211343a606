package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgconn"
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

// The trigram indexes of q keep no pending list (schema version 4): the write that found one full
// merged all of it, for seconds.
func TestSchemaQIndexesTakeWritesDirectly(t *testing.T) {
	t.Parallel()
	var opts string
	err := testEnv.st.db.QueryRow(`SELECT string_agg(relname || ' ' || array_to_string(reloptions, ','), ', ' ORDER BY relname)
		FROM pg_class WHERE oid IN (to_regclass('contacts_q'), to_regclass('business_q'))`).Scan(&opts)
	if want := "business_q fastupdate=off, contacts_q fastupdate=off"; err != nil || opts != want {
		t.Errorf("the q indexes and their options: %q (%v); want %q", opts, err, want)
	}
}

func TestSchemaEveryTenantTableIsKeyedByCompany(t *testing.T) {
	t.Parallel()
	// Every table with a company_id column, and the columns of its primary key in order.
	var got string
	err := testEnv.st.db.QueryRow(`SELECT string_agg(relname || ' ' || pk, ', ' ORDER BY relname) FROM (
		SELECT c.relname, array_to_string(array_agg(a.attname ORDER BY k.ord), ',') AS pk
		FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = current_schema()
		JOIN pg_constraint p ON p.conrelid = c.oid AND p.contype = 'p'
		CROSS JOIN LATERAL unnest(p.conkey) WITH ORDINALITY AS k(attnum, ord)
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
		WHERE EXISTS (SELECT FROM pg_attribute x WHERE x.attrelid = c.oid AND x.attname = 'company_id')
		GROUP BY c.relname) AS tables`).Scan(&got)
	want := "api_keys company_id,id, boards company_id,id, business company_id,id, contacts company_id,id, events company_id,id, idempotency_keys company_id,key, object_counts company_id,tbl,stripe, " +
		"organizations company_id,id, stages company_id,id, users company_id,id, webhook_deliveries company_id,id, webhook_endpoints company_id,id"
	if err != nil || got != want {
		t.Errorf("tenant tables and their primary keys:\n got %s (%v)\nwant %s", got, err, want)
	}
}

func TestSchemaRejectsCrossCompanyReferences(t *testing.T) {
	t.Parallel()
	a, b := newTestCompany(t), newTestCompany(t)
	orgA := sqlID(t, `INSERT INTO organizations (company_id, name) VALUES ($1, 'A org') RETURNING id`, a.id)
	for _, tt := range []struct {
		name, q string
		args    []any
	}{
		{"a contact of B pointing at A's organization", `INSERT INTO contacts (company_id, name, organization_id, user_creator_id) VALUES ($1, 'x', $2, $3)`,
			[]any{b.id, orgA, b.userID}},
		{"a contact of B created by A's user", `INSERT INTO contacts (company_id, name, user_creator_id) VALUES ($1, 'x', $2)`,
			[]any{b.id, a.userID}},
		{"an API key of B for A's user", `INSERT INTO api_keys (company_id, user_id, prefix, hash) VALUES ($1, $2, 'rdx_test', $3)`,
			[]any{b.id, a.userID, make([]byte, 32)}},
	} {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			_, err := testEnv.st.db.Exec(tt.q, tt.args...)
			if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.Code != "23503" {
				t.Errorf("insert: err = %v; want a foreign key violation (23503)", err)
			}
		})
	}
}

func TestCreateCompanyMakesDefaults(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	var got string
	err := testEnv.st.db.QueryRow(`SELECT concat_ws(' | ',
		(SELECT string_agg(name, ',' ORDER BY position, id) FROM stages WHERE company_id = $1 AND board_id IS NULL),
		(SELECT string_agg(b.name || ': ' || (SELECT string_agg(s.name, ',' ORDER BY s.position, s.id) FROM stages s
			WHERE s.company_id = b.company_id AND s.board_id = b.id), ';') FROM boards b WHERE b.company_id = $1 AND b.is_default),
		(SELECT default_currency_id FROM companies WHERE id = $1))`, c.id).Scan(&got)
	want := "Lead,Prospect,Customer | Sales pipeline: Qualified,Contact made,Proposal sent,Negotiation,Closing | 978"
	if err != nil || got != want {
		t.Errorf("a new company's contact stages | default board: its stages | currency:\n got %s (%v)\nwant %s", got, err, want)
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
