package main

import (
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// These tests are of the Citus cluster that make test-citus starts; on one PostgreSQL there is
// nothing of theirs to test.

// TestCitusDistributesEveryTenantTableByCompany: migrate made every table with a company_id a
// distributed table by company_id, all in one colocation group, and the others reference tables.
func TestCitusDistributesEveryTenantTableByCompany(t *testing.T) {
	if !testEnv.citus {
		t.Skip("not a Citus cluster (make test-citus)")
	}
	t.Parallel()
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
	for _, table := range []string{"api_keys", "boards", "business", "contacts", "events", "idempotency_keys", "object_counts",
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
	if !testEnv.citus {
		t.Skip("not a Citus cluster (make test-citus)")
	}
	t.Parallel()
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
	for _, tt := range []struct {
		what string
		q    string
		args []any
	}{
		{"retrieve", contacts.selectSQL + ` AND id = $2`, []any{c.id, 1}},
		{"list", listSQL, listArgs},
		{"count", `SELECT coalesce(sum(n), 0) FROM object_counts WHERE company_id = $1 AND tbl = $2`, []any{c.id, "contacts"}},
		{"events feed", feedSQL, feedArgs},
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
