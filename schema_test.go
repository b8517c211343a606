package main

// Tests of schema/: what the migrations leave in the database, beyond what the requests show.

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// The trigram indexes of q and search keep no pending list (schema versions 4 and 19): the write
// that found one full merged all of it, for seconds.
func TestSchemaQIndexesTakeWritesDirectly(t *testing.T) {
	t.Parallel()
	var opts string
	err := testEnv.st.db.QueryRow(`SELECT string_agg(relname || ' ' || array_to_string(reloptions, ','), ', ' ORDER BY relname)
		FROM pg_class WHERE relname LIKE '%\_search' AND relkind = 'i'`).Scan(&opts)
	want := "activities_search fastupdate=off, business_search fastupdate=off, contacts_search fastupdate=off, " +
		"custom_values_search fastupdate=off, organizations_search fastupdate=off"
	if err != nil || opts != want {
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
	want := "activities company_id,id, api_keys company_id,id, associations company_id,id, boards company_id,id, business company_id,id, contacts company_id,id, custom_field_keys company_id,object, custom_fields company_id,id, custom_values company_id,object_id,field_id,n, events company_id,id, idempotency_keys company_id,key, merged_objects company_id,tbl,id, object_counts company_id,tbl,stripe, " +
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
