package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// Tests of companies.go: what a new company starts with, the demo company of `rolodex dev`, and
// `rolodex migrate` on an empty database, which it needs first.

func TestMigrateCommandThenDemoCompanyKeepsItsKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := freshDatabase(t)
	env := map[string]string{"DATABASE_URL": dbURL}
	for _, want := range []string{"applied schema versions [1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24]", "schema is current (version 24)"} {
		var out, errOut bytes.Buffer
		if err := run(ctx, []string{"rolodex", "migrate"}, func(k string) string { return env[k] }, &out, &errOut); err != nil {
			t.Fatalf("rolodex migrate: %v (stderr %q)", err, errOut.String())
		}
		if got := strings.TrimSpace(out.String()); got != want {
			t.Errorf("rolodex migrate printed %q; want %q", got, want)
		}
	}
	st, err := openStore(dbConfig{url: dbURL, maxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	first, err := st.demoCompany(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	wantSeeded := func(companyID int64) {
		t.Helper()
		var contacts, business int
		st.db.QueryRow(`SELECT (SELECT count(*) FROM contacts WHERE company_id = $1), (SELECT count(*) FROM business WHERE company_id = $1)`,
			companyID).Scan(&contacts, &business)
		if contacts != 60 || business != 20 {
			t.Errorf("demo company has %d contacts and %d business records; want 60 and 20", contacts, business)
		}
	}
	wantSeeded(first.CompanyID)
	// The key an earlier run printed is kept; one that no longer works is replaced, once.
	again, err := st.demoCompany(ctx, first.APIKey)
	if err != nil || again.CompanyID != first.CompanyID || again.APIKey != first.APIKey {
		t.Errorf("demoCompany with its own key = %+v, %v; want %+v", again, err, first)
	}
	if err := st.revokeAPIKey(ctx, first.APIKey); err != nil {
		t.Fatal(err)
	}
	renewed, err := st.demoCompany(ctx, first.APIKey)
	if err != nil || renewed.CompanyID != first.CompanyID || renewed.APIKey == first.APIKey || !strings.HasPrefix(renewed.APIKey, "rdx_") {
		t.Errorf("demoCompany with a revoked key = %+v, %v; want company %d with a new key", renewed, err, first.CompanyID)
	}
	r := callAt(t, nil, startServer(t, env, io.Discard), "GET", "/v1/contacts?q=garc", renewed.APIKey, "")
	if r.status != 200 || !strings.Contains(string(r.body), `"surname":"García"`) {
		t.Errorf("GET /v1/contacts?q=garc with the demo key = %d %.200s; want García contacts", r.status, r.body)
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
