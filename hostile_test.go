package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Hostile input through the real server: every answer is a 4xx problem (never a 5xx) and the
// company's data is byte-identical before and after.

var injections = []string{
	`' OR 1=1 --`, `'; DROP TABLE contacts; --`, `1; DELETE FROM contacts`, `1 OR 1=1`, `" OR ""="`,
	`1' UNION SELECT hash FROM api_keys --`, `$1`, `admin'/*`, `1)) OR ((1=1`,
}

// badNumbers are JSON numbers no integer, id or amount field takes; badIDNumbers are also refused
// by id fields (-0 is 0, a fine classification or position).
var (
	badNumbers   = []string{"1e400", "9223372036854775808", "-9223372036854775809", "1.555", "-0.5"}
	badIDNumbers = append([]string{"-0", "0", "-1"}, badNumbers...)
)

// hostileCase is one request and what its answer must be: a 4xx problem, or (freeText) anything
// but a 5xx, for parameters where the hostile text is a valid search.
type hostileCase struct {
	method, path, body string
	freeText           bool
}

// dumpCompany is every row of the company, as text in order, by table: the companies row and every
// table with a company_id column.
func dumpCompany(t *testing.T, companyID int64) map[string]string {
	t.Helper()
	db := testEnv.st.db
	rows, err := db.Query(`SELECT table_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND column_name = 'company_id'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		rows.Scan(&name)
		tables = append(tables, name)
	}
	rows.Close()
	dump := map[string]string{}
	var company string
	if err := db.QueryRow(`SELECT c::text FROM companies c WHERE id = $1`, companyID).Scan(&company); err != nil {
		t.Fatal(err)
	}
	dump["companies"] = company
	for _, table := range tables {
		var rows string
		q := `SELECT coalesce(string_agg(x::text, E'\n' ORDER BY x::text), '') FROM ` + quoteIdent(table) + ` x WHERE company_id = $1`
		if err := db.QueryRow(q, companyID).Scan(&rows); err != nil {
			t.Fatalf("dump %s: %v", table, err)
		}
		dump[table] = rows
	}
	return dump
}

// hostileCases builds the corpus against the company's objects: a contact, a business and an
// organization with these ids.
func hostileCases(contactID, businessID, orgID string) []hostileCase {
	var cs []hostileCase
	add := func(method, path, body string) { cs = append(cs, hostileCase{method: method, path: path, body: body}) }
	q := url.QueryEscape

	// Path ids.
	singles := []string{"/v1/users/", "/v1/organizations/", "/v1/stages/", "/v1/boards/", "/v1/contacts/", "/v1/business/"}
	badIDs := append(append([]string{"%00", "%FF", "1%00"}, badIDNumbers...), injections...)
	for _, id := range badIDs {
		esc := id
		if !strings.HasPrefix(id, "%") && id != "1%00" {
			esc = url.PathEscape(id)
		}
		for _, p := range singles {
			add("GET", p+esc, "")
		}
		for _, p := range singles[4:] {
			add("PATCH", p+esc, `{"name":"changed","title":"changed"}`)
			add("DELETE", p+esc, "")
		}
	}

	// Query parameters, on every endpoint.
	lists := []string{"/v1/contacts", "/v1/business", "/v1/users", "/v1/organizations", "/v1/stages", "/v1/boards",
		"/v1/statuses", "/v1/currencies", "/v1/countries", "/v1/contacts/count", "/v1/business/count"}
	gets := []string{"/v1/contacts/" + contactID, "/v1/business/" + businessID, "/v1/organizations/" + orgID}
	typed := []string{"expand[]", "limit", "cursor", "sort", "organizationId", "stageId", "boardId", "withSales",
		"private", "createdAt[gte]", "updatedAt[lt]", "userOwnerId"}
	values := append(append([]string{"%00", "%FF", strings.Repeat("9", 400)}, badIDNumbers...), injections...)
	for _, v := range values {
		ev := v
		if !strings.HasPrefix(v, "%") {
			ev = q(v)
		}
		for _, p := range append(lists, gets...) {
			for _, name := range typed {
				add("GET", p+"?"+q(name)+"="+ev, "")
			}
			add("GET", p+"?"+ev+"=1", "") // an unknown parameter
			for _, name := range []string{"q", "email"} {
				cs = append(cs, hostileCase{method: "GET", path: p + "?" + name + "=" + ev, freeText: true})
			}
		}
		for _, p := range gets[:2] {
			add("PATCH", p+"?expand[]="+ev, `{"name":"changed","title":"changed"}`)
			add("DELETE", p+"?expand[]="+ev, "")
			add("DELETE", p+"?"+ev+"=1", "")
		}
		add("POST", "/v1/contacts?expand[]="+ev, `{"name":"x"}`)
		add("POST", "/v1/business?"+ev+"=1", `{"title":"x"}`)
		add("POST", "/v1/organizations?limit="+ev, `{"name":"x"}`)
	}
	for _, p := range append(lists, gets...) {
		add("GET", p+"?"+strings.Repeat("expand[]=organization&", 10_000), "")
	}

	// Bodies: each writable endpoint with one hostile field beside a good one.
	type target struct {
		method, path, good string
		typed, ids, ints   []string
	}
	contactTyped := []string{"email", "secondaryEmail", "urlAvatar", "withSales", "countryId", "classification",
		"stageId", "organizationId", "assignedToId"}
	contactIDs := []string{"countryId", "stageId", "organizationId", "assignedToId"}
	bizTyped := []string{"value", "deadline", "private", "position", "dateWon", "statusId", "organizationId",
		"currencyId", "userOwnerId", "boardId", "stageId"}
	bizIDs := []string{"statusId", "organizationId", "currencyId", "userOwnerId", "boardId", "stageId"}
	targets := []target{
		{"POST", "/v1/contacts", `"name":"x"`, contactTyped, contactIDs, []string{"classification"}},
		{"PATCH", "/v1/contacts/" + contactID, `"name":"changed"`, contactTyped, contactIDs, []string{"classification"}},
		{"POST", "/v1/business", `"title":"x"`, bizTyped, bizIDs, []string{"value", "position"}},
		{"PATCH", "/v1/business/" + businessID, `"title":"changed"`, bizTyped, bizIDs, []string{"value", "position"}},
		{"POST", "/v1/organizations", `"name":"x"`, nil, nil, nil},
	}
	for _, tg := range targets {
		with := func(member string) string { return "{" + tg.good + "," + member + "}" }
		for _, inj := range injections {
			s, _ := json.Marshal(inj)
			for _, f := range append(tg.typed, readOnlyFields...) {
				add(tg.method, tg.path, with(`"`+f+`":`+string(s)))
			}
			add(tg.method, tg.path, with(string(s)+`:1`)) // an unknown field
		}
		for _, n := range badIDNumbers {
			for _, f := range tg.ids {
				add(tg.method, tg.path, with(`"`+f+`":`+n))
			}
		}
		for _, n := range badNumbers {
			for _, f := range tg.ints {
				add(tg.method, tg.path, with(`"`+f+`":`+n))
			}
		}
		nested := strings.Repeat(`{"a":`, 20_000) + "1" + strings.Repeat("}", 20_000)
		for _, body := range []string{
			"", "[]", `"str"`, "null", "1", `[{"name":"x","title":"x"}]`, "{" + tg.good + "} {}", "{" + tg.good,
			with(tg.good), // the same name twice
			with(`"x":"a` + "\x00" + `"`), with(`"name":"a\u0000"`), with(`"title":"a\u0000"`),
			with(`"x":"` + "\xff\xfe" + `"`), "{\"name\":\"\xc3\x28\",\"title\":\"\xc3\x28\"}",
			with(`"name":["x"]`), with(`"title":{"x":1}`), with(`"name":` + nested), nested,
			strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000),
		} {
			add(tg.method, tg.path, body)
		}
	}
	return cs
}

func TestHostileInputIs4xxAndChangesNothing(t *testing.T) {
	t.Parallel()
	serverLog := &syncBuffer{}
	base := startServer(t, map[string]string{"ROLODEX_RATE_LIMIT": "0"}, serverLog)
	c, other := newTestCompany(t), newTestCompany(t)
	contact, _ := mustCreateContact(t, c, `{"name":"Victim","email":"victim@example.com"}`)
	biz := callAt(t, nil, base, "POST", "/v1/business", c.key, `{"title":"Victim deal","value":10}`)
	org := callAt(t, nil, base, "POST", "/v1/organizations", c.key, `{"name":"Victim org"}`)
	var b, o struct{ ID int64 }
	json.Unmarshal(biz.body, &b)
	json.Unmarshal(org.body, &o)
	if b.ID == 0 || o.ID == 0 {
		t.Fatalf("seeding: business %d %s, organization %d %s", biz.status, biz.body, org.status, org.body)
	}
	before, otherBefore := dumpCompany(t, c.id), dumpCompany(t, other.id)

	cases := hostileCases(contact.ID, strconv.FormatInt(b.ID, 10), strconv.FormatInt(o.ID, 10))
	t.Logf("%d hostile requests", len(cases))
	var wg sync.WaitGroup
	work := make(chan hostileCase)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for hc := range work {
				checkHostile(t, base, c.key, hc)
			}
		}()
	}
	for _, hc := range cases {
		work <- hc
	}
	close(work)
	wg.Wait()

	if diff := cmp.Diff(before, dumpCompany(t, c.id)); diff != "" {
		t.Errorf("the company's rows changed (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(otherBefore, dumpCompany(t, other.id)); diff != "" {
		t.Errorf("another company's rows changed (-before +after):\n%s", diff)
	}
	if strings.Contains(serverLog.String(), `"level":"ERROR"`) {
		t.Errorf("the server logged errors:\n%s", serverLog.String())
	}
}

// checkHostile sends one hostile request and checks its answer.
func checkHostile(t *testing.T, base, key string, hc hostileCase) {
	req, err := http.NewRequestWithContext(context.Background(), hc.method, base+hc.path, strings.NewReader(hc.body))
	if err != nil {
		t.Errorf("%s %.80s: %v", hc.method, hc.path, err)
		return
	}
	req.Header.Set("x-api-key", key)
	if hc.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("%s %.80s: %v", hc.method, hc.path, err)
		return
	}
	var p problemBody
	decErr := json.NewDecoder(resp.Body).Decode(&p)
	resp.Body.Close()
	what := hc.method + " " + hc.path[:min(len(hc.path), 120)] + " body " + hc.body[:min(len(hc.body), 80)]
	switch {
	case resp.StatusCode >= 500:
		t.Errorf("%s = %d; want a 4xx", what, resp.StatusCode)
	case hc.freeText && resp.StatusCode < 400:
		// A search for the hostile text: a valid request that finds nothing.
	case resp.StatusCode < 400:
		t.Errorf("%s = %d; want a 4xx", what, resp.StatusCode)
	case resp.Header.Get("Content-Type") != "application/problem+json" || decErr != nil || p.Status != resp.StatusCode || p.Code == "":
		t.Errorf("%s = %d %q; want a problem+json body (decode: %v)", what, resp.StatusCode, resp.Header.Get("Content-Type"), decErr)
	}
}

func TestInjectionTextInFreeTextFieldsIsStoredVerbatim(t *testing.T) {
	t.Parallel()
	c, other := newTestCompany(t), newTestCompany(t)
	before, otherBefore := dumpCompany(t, c.id), dumpCompany(t, other.id)
	for _, inj := range injections {
		s, _ := json.Marshal(inj)
		created, _ := mustCreateContact(t, c, `{"name":`+string(s)+`,"surname":`+string(s)+`,"address":`+string(s)+`}`)
		got := decodeContact(t, mustGetContact(t, c, created.ID).body)
		if got.Name != inj || got.Surname == nil || *got.Surname != inj || got.Address == nil || *got.Address != inj {
			t.Errorf("contact %q read back as name %q surname %v address %v; want it verbatim", inj, got.Name, got.Surname, got.Address)
		}
	}
	if n := contactCount(t, c); n != int64(len(injections)) {
		t.Errorf("%d contacts; want the %d created", n, len(injections))
	}
	// Besides the new contacts nothing changed, here or elsewhere.
	after := dumpCompany(t, c.id)
	delete(after, "contacts")
	delete(before, "contacts")
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("creating contacts changed other rows (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(otherBefore, dumpCompany(t, other.id)); diff != "" {
		t.Errorf("another company's rows changed (-before +after):\n%s", diff)
	}
}
