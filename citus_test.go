package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// These tests are of the Citus cluster that make test-citus starts; on one PostgreSQL there is
// nothing of theirs to test.

// needCitus skips the test unless the database is a Citus cluster's, and runs it in parallel.
func needCitus(t *testing.T) {
	if !testEnv.citus {
		t.Skip("not a Citus cluster (make test-citus)")
	}
	t.Parallel()
}

// TestCitusDistributesEveryTenantTableByCompany: migrate made every table with a company_id a
// distributed table by company_id, all in one colocation group, and the others reference tables.
func TestCitusDistributesEveryTenantTableByCompany(t *testing.T) {
	needCitus(t)
	rows, err := testEnv.st.db.Query(`SELECT c.relname, p.partmethod, coalesce(column_to_column_name(p.logicalrelid, p.partkey), ''),
			p.colocationid = (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'contacts'::regclass)
		FROM pg_class c LEFT JOIN pg_dist_partition p ON p.logicalrelid = c.oid
		WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]string{}
	for rows.Next() {
		var table, method, column string
		var colocated bool
		if err := rows.Scan(&table, &method, &column, &colocated); err != nil {
			t.Fatal(err)
		}
		switch {
		case method == "n":
			got[table] = "reference"
		case method == "h" && column == "company_id" && colocated:
			got[table] = "by company"
		default:
			got[table] = method + " " + column
		}
	}
	want := map[string]string{}
	for _, table := range []string{"companies", "countries", "currencies", "schema_migrations", "server_secrets", "statuses"} {
		want[table] = "reference"
	}
	for _, table := range []string{"activities", "api_keys", "associations", "boards", "business", "contacts", "custom_field_keys", "custom_fields", "custom_values", "events", "idempotency_keys", "merged_objects", "object_counts",
		"organizations", "stages", "users", "webhook_deliveries", "webhook_endpoints"} {
		want[table] = "by company"
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tables (-want +got):\n%s", diff)
	}
}

// TestCitusRoutesACompanysStatementsToOneShard: EXPLAIN on the coordinator of what a request of
// one company sends (a retrieve, a list page with a filter and a sort, a count, a page of the
// events feed, and writes) plans one task on one worker's shard: Citus's router, no fan-out.
// go test -v shows the plans.
func TestCitusRoutesACompanysStatementsToOneShard(t *testing.T) {
	needCitus(t)
	c := newTestCompany(t)
	list, aerr := contactLists.parse(url.Values{"sort": {"-updatedAt"}, "stageId": {"1,2"}})
	if aerr != nil {
		t.Fatal(aerr)
	}
	listSQL, listArgs := list.selectSQL(contacts.selectSQL, c.id)
	feed, aerr := events.lists.parse(url.Values{})
	if aerr != nil {
		t.Fatal(aerr)
	}
	feedSQL, feedArgs := feed.selectSQL(events.selectSQL+` AND xid < pg_snapshot_xmin(pg_current_snapshot())`, c.id)
	page, aerr := timelineSpec.parse(url.Values{})
	if aerr != nil {
		t.Fatal(aerr)
	}
	timeline := &timelineQuery{listQuery: page, kind: contactKind, id: 1, acts: activityTypes, evTypes: eventTypes, families: []string{"contact", "activity"},
		after: &timelineKey{at: time.Now(), id: 1}, snapshot: "10:20:"}
	timelineSQL, timelineArgs := timeline.pageSQL(c.id)
	for _, tt := range []struct {
		what string
		q    string
		args []any
	}{
		{"retrieve", contacts.selectSQL + ` AND id = $2`, []any{c.id, 1}},
		{"list", listSQL, listArgs},
		{"count", `SELECT coalesce(sum(n), 0) FROM object_counts WHERE company_id = $1 AND tbl = $2`, []any{c.id, "contacts"}},
		{"events feed", feedSQL, feedArgs},
		{"timeline page", timelineSQL, timelineArgs},
		{"insert", `INSERT INTO contacts (company_id, user_creator_id, name) VALUES ($1, $2, 'Ana') RETURNING id`, []any{c.id, c.userID}},
		{"update", `UPDATE contacts SET name = $3, version = version + 1,
			updated_at = greatest(date_trunc('milliseconds', now()), one_ms_after(updated_at))
			WHERE company_id = $1 AND id = $2`, []any{c.id, 1, "Ana"}},
		{"delete", `DELETE FROM contacts WHERE company_id = $1 AND id = $2`, []any{c.id, 1}},
	} {
		plan := explainSQL(t, testEnv.st.db, "", tt.q, tt.args)
		t.Logf("%s:\n%s", tt.what, plan)
		if !strings.Contains(plan, "Citus Adaptive") || !strings.Contains(plan, "Task Count: 1\n") ||
			len(shardScan.FindAllString(plan, -1)) == 0 {
			t.Errorf("%s is not routed to one shard:\n%s\nplan:\n%s", tt.what, tt.q, plan)
		}
	}
}

// shardScan matches a shard in a plan: contacts_102008.
var shardScan = regexp.MustCompile(`on [a-z_]+_[0-9]+`)

// TestCitusDistributesADatabaseInUse is the move of docs/scaling.md: a database that served on one
// PostgreSQL, with a company's rows and events in it, gets the citus extension and its workers,
// and rolodex migrate distributes it. Every row is there after, the counts hold, it takes writes,
// and the feed serves the events from before the move and then those after it; a feed cursor
// from before is refused.
func TestCitusDistributesADatabaseInUse(t *testing.T) {
	needCitus(t)
	ctx := context.Background()
	dbURL := freshDatabase(t)
	if err := adminExec(ctx, dbURL, `DROP EXTENSION citus`); err != nil { // one PostgreSQL, as before the move
		t.Fatal(err)
	}
	st, err := openStore(dbConfig{url: dbURL, maxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.migrate(ctx); err != nil {
		t.Fatal(err)
	}
	demo, err := st.demoCompany(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	before := startServer(t, map[string]string{"DATABASE_URL": dbURL}, &syncBuffer{})
	wantStatus(t, callAt(t, nil, before, "POST", "/v1/contacts", demo.APIKey, `{"name": "Before the move"}`), http.StatusCreated)
	oldCursor := feedNames(t, before, demo.APIKey, 1)
	const qRows = `SELECT (SELECT count(*) FROM contacts WHERE company_id = $1), (SELECT count(*) FROM business WHERE company_id = $1),
		(SELECT count(*) FROM pg_dist_partition)`
	var contactRows, businessRows, distributed int
	if err := st.db.QueryRow(`SELECT (SELECT count(*) FROM contacts WHERE company_id = $1),
		(SELECT count(*) FROM business WHERE company_id = $1)`, demo.CompanyID).Scan(&contactRows, &businessRows); err != nil {
		t.Fatal(err)
	}

	if err := adminExec(ctx, dbURL, `CREATE EXTENSION citus`); err != nil {
		t.Fatal(err)
	}
	if err := registerCitusNodes(ctx, testEnv.adminURL, dbURL); err != nil {
		t.Fatal(err)
	}
	if _, err := st.migrate(ctx); err != nil {
		t.Fatalf("migrate onto Citus: %v", err)
	}
	var c, b int
	if err := st.db.QueryRow(qRows, demo.CompanyID).Scan(&c, &b, &distributed); err != nil {
		t.Fatal(err)
	}
	if c != contactRows || b != businessRows || c == 0 || distributed < 18 {
		t.Errorf("after the move: %d contacts, %d business, %d Citus tables; want %d, %d and every table",
			c, b, distributed, contactRows, businessRows)
	}
	base := startServer(t, map[string]string{"DATABASE_URL": dbURL}, &syncBuffer{}) // after the move
	wantProblem(t, callAt(t, nil, base, "GET", "/v1/events?cursor="+url.QueryEscape(oldCursor), demo.APIKey, ""),
		http.StatusBadRequest, "invalid_parameter")
	wantCount := func(path string, want int) {
		t.Helper()
		r := callAt(t, nil, base, "GET", path+"/count", demo.APIKey, "")
		if got := decode[struct{ Count int }](t, wantStatus(t, r, http.StatusOK).body).Count; got != want {
			t.Errorf("GET %s/count = %d; want %d", path, got, want)
		}
	}
	wantCount("/v1/contacts", contactRows)
	wantCount("/v1/business", businessRows)
	wantStatus(t, callAt(t, nil, base, "POST", "/v1/contacts", demo.APIKey, `{"name": "After the move"}`), http.StatusCreated)
	wantCount("/v1/contacts", contactRows+1)
	feedNames(t, base, demo.APIKey, 2, "Before the move", "After the move")
}

// feedNames waits until the feed at base has n events, and checks the names of their objects
// (when given); it returns the cursor after them.
func feedNames(t *testing.T, base, key string, n int, names ...string) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		f := readFeed(t, base, key, "", "limit=100")
		if len(f.Data) >= n || time.Now().After(deadline) {
			var got []string
			for _, e := range f.Data {
				got = append(got, fmt.Sprint(e.Data.Object["name"]))
			}
			if len(got) != n || names != nil && !slices.Equal(got, names) {
				t.Errorf("the feed = %q; want %d events %q", got, n, names)
			}
			return f.Pagination.NextCursor
		}
	}
}
