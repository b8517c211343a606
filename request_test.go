package main

// Tests of reading requests (request.go): the body decoders under fuzzing, and hostile input through
// the real server, which must be a 4xx problem that changes nothing.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var bodySeeds = []string{
	`{}`, `{"name":"Ada"}`, `{"name":"Ada","email":"ada@example.com","countryId":724,"withSales":true}`,
	`{"title":"Deal","value":1234.50,"deadline":"2026-12-01T10:00:00+02:00","private":false}`,
	`{"name":"a","name":"b"}`, `{"name":"\u0000"}`, `{"name":"\ud800"}`, "{\"name\":\"\xff\"}",
	`{"value":1e400}`, `{"value":-0}`, `{"countryId":9223372036854775808}`, `{"position":-0}`,
	`[]`, `"str"`, `null`, `{"a":{"b":{"c":[[[[]]]]}}}`, `{"id":"1","createdAt":"x"}`, `{} {}`, `{"name":"x"`,
	`{"' OR 1=1 --":1}`, `{"urlAvatar":"javascript:alert(1)"}`, `{"deadline":"0000-01-01T00:00:00Z"}`,
}

// fuzzBody checks readObject and applyMembers on any body: no panic; a refused body is a 400 or 413
// problem; an accepted one is one JSON object of distinct names; every field error names a member
// of the body and says what is wrong.
func fuzzBody(f *testing.F, fields func() []bodyField) {
	for _, s := range bodySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest("POST", "/v1/x", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		members, aerr := readObject(httptest.NewRecorder(), req)
		if aerr != nil {
			if aerr.Status != http.StatusBadRequest && aerr.Status != http.StatusRequestEntityTooLarge || aerr.Detail == "" {
				t.Fatalf("readObject(%q) = %+v; want a 400 or 413 with a detail", body, aerr)
			}
			return
		}
		var obj map[string]json.RawMessage
		if !utf8.Valid(body) || json.Unmarshal(body, &obj) != nil || len(obj) != len(members) {
			t.Fatalf("readObject accepted %q: want only one valid UTF-8 JSON object with distinct names", body)
		}
		for _, m := range members {
			if string(m.raw) != string(obj[m.name]) {
				t.Fatalf("body %q: member %q is %q; want %q", body, m.name, m.raw, obj[m.name])
			}
		}
		for _, e := range applyMembers(members, fields(), readOnlyFields) {
			if _, ok := obj[e.Field]; !ok || e.Message == "" {
				t.Fatalf("body %q: field error %+v; want it to name a member and say what is wrong", body, e)
			}
		}
	})
}

func FuzzContactBody(f *testing.F) { fuzzBody(f, func() []bodyField { return (&contact{}).fields() }) }

func FuzzBusinessBody(f *testing.F) {
	fuzzBody(f, func() []bodyField { return (&business{}).fields() })
}

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

// hostileCases builds the corpus against a contact, a business record and an organization of the
// company, at these paths.
func hostileCases(contact, deal, org string) []hostileCase {
	var cs []hostileCase
	add := func(method, path, body string) { cs = append(cs, hostileCase{method: method, path: path, body: body}) }
	// Query parameters, on every endpoint. (Hostile path ids are TestBadPathIDsAre400's.)
	lists := []string{"/v1/contacts", "/v1/business", "/v1/users", "/v1/organizations", "/v1/stages", "/v1/boards",
		"/v1/statuses", "/v1/currencies", "/v1/countries", "/v1/contacts/count", "/v1/business/count"}
	gets := []string{contact, deal, org}
	typed := []string{"expand[]", "limit", "cursor", "sort", "organizationId", "stageId", "boardId", "withSales",
		"private", "createdAt[gte]", "updatedAt[lt]", "userOwnerId"}
	for _, v := range append(append([]string{"%00", "%FF", strings.Repeat("9", 400)}, badIDNumbers...), injections...) {
		ev := v
		if !strings.HasPrefix(v, "%") { // raw percent-escapes go as they are
			ev = url.QueryEscape(v)
		}
		for _, p := range append(lists, gets...) {
			for _, name := range typed {
				add("GET", p+"?"+url.QueryEscape(name)+"="+ev, "")
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

	// Bodies: each writable endpoint with one hostile field beside a good one. (10,000 expand[] values
	// are TestLongQueryStringsAre400NotWork's, malformed JSON TestMalformedBodiesAre400's.)
	contactTyped := []string{"email", "secondaryEmail", "urlAvatar", "withSales", "countryId", "classification",
		"stageId", "organizationId", "assignedToId"}
	bizTyped := []string{"value", "deadline", "private", "position", "dateWon", "statusId", "organizationId",
		"currencyId", "userOwnerId", "boardId", "stageId"}
	contactIDs := []string{"countryId", "stageId", "organizationId", "assignedToId"}
	for _, tg := range []struct {
		method, path, good string
		typed, ids, ints   []string
	}{
		{"POST", "/v1/contacts", `"name":"x"`, contactTyped, contactIDs, []string{"classification"}},
		{"PATCH", contact, `"name":"changed"`, contactTyped, contactIDs, []string{"classification"}},
		{"POST", "/v1/business", `"title":"x"`, bizTyped, bizTyped[5:], []string{"value", "position"}},
		{"PATCH", deal, `"title":"changed"`, bizTyped, bizTyped[5:], []string{"value", "position"}},
		{"POST", "/v1/organizations", `"name":"x"`, nil, nil, nil},
	} {
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
			`[{"name":"x","title":"x"}]`, with(`"x":"a` + "\x00" + `"`), with(`"name":"a\u0000"`), with(`"title":"a\u0000"`),
			with(`"x":"` + "\xff\xfe" + `"`), "{\"name\":\"\xc3\x28\",\"title\":\"\xc3\x28\"}",
			with(`"name":["x"]`), with(`"title":{"x":1}`), with(`"name":` + nested), nested,
			strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000),
		} {
			add(tg.method, tg.path, body)
		}
	}
	return cs
}

// dumpCompany is every row of the company, as text in order, by table: the companies row and every
// table with a company_id column.
func dumpCompany(t *testing.T, companyID int64) map[string]string {
	t.Helper()
	rows, err := testEnv.st.db.Query(`SELECT table_name, query_to_xml(format(
			'SELECT to_jsonb(x) - ''last_used_at'' FROM %I x WHERE company_id = %s ORDER BY x::text', -- using a key is no change
			table_name, $1::bigint), false, false, '')::text
		FROM information_schema.columns WHERE table_schema = current_schema() AND column_name = 'company_id'
		UNION ALL SELECT 'companies', c::text FROM companies c WHERE id = $1`, companyID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	dump := map[string]string{}
	for rows.Next() {
		var table, text string
		if err := rows.Scan(&table, &text); err != nil {
			t.Fatal(err)
		}
		dump[table] = text
	}
	return dump
}

func TestHostileInputIs4xxAndChangesNothing(t *testing.T) {
	t.Parallel()
	serverLog := &syncBuffer{}
	base := startServer(t, map[string]string{"ROLODEX_RATE_LIMIT": "0"}, serverLog)
	c, other := newTestCompany(t), newTestCompany(t)
	cases := hostileCases(createPath(t, c.key, "/v1/contacts", `{"name":"Victim","email":"victim@example.com"}`),
		createPath(t, c.key, "/v1/business", `{"title":"Victim deal","value":10}`),
		createPath(t, c.key, "/v1/organizations", `{"name":"Victim org"}`))
	before, otherBefore := dumpCompany(t, c.id), dumpCompany(t, other.id)
	t.Logf("%d hostile requests", len(cases))
	var wg sync.WaitGroup
	busy := make(chan bool, 3) // requests at once
	for _, hc := range cases {
		busy <- true
		wg.Go(func() { checkHostile(t, base, c.key, hc); <-busy })
	}
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
	r, err := send(nil, base, hc.method, hc.path, key, hc.body)
	what := hc.method + " " + hc.path[:min(len(hc.path), 120)] + " body " + hc.body[:min(len(hc.body), 80)]
	var p problemBody
	switch {
	case err != nil:
		t.Errorf("%s: %v", what, err)
	case r.status >= 500:
		t.Errorf("%s = %d; want a 4xx", what, r.status)
	case hc.freeText && r.status < 400:
		// A search for the hostile text: a valid request that finds nothing.
	case r.status < 400:
		t.Errorf("%s = %d; want a 4xx", what, r.status)
	case r.header.Get("Content-Type") != "application/problem+json" || json.Unmarshal(r.body, &p) != nil ||
		p.Status != r.status || p.Code == "":
		t.Errorf("%s = %d %q %.200s; want a problem+json body", what, r.status, r.header.Get("Content-Type"), r.body)
	}
}

func TestInjectionTextInFreeTextFieldsIsStoredVerbatim(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	before := dumpCompany(t, c.id)
	for _, inj := range injections {
		s, _ := json.Marshal(inj)
		path := createPath(t, c.key, "/v1/contacts", `{"name":`+string(s)+`,"surname":`+string(s)+`,"address":`+string(s)+`}`)
		var got struct{ Name, Surname, Address string }
		json.Unmarshal(wantStatus(t, call(t, "GET", path, c.key, ""), http.StatusOK).body, &got)
		if got.Name != inj || got.Surname != inj || got.Address != inj {
			t.Errorf("contact %q read back as name %q surname %q address %q; want it verbatim", inj, got.Name, got.Surname, got.Address)
		}
	}
	if n := sqlID(t, `SELECT count(*) FROM contacts WHERE company_id = $1`, c.id); n != int64(len(injections)) {
		t.Errorf("%d contacts; want the %d created", n, len(injections))
	}
	// Besides the new contacts, their events and counts nothing changed.
	after := dumpCompany(t, c.id)
	if diff := cmp.Diff(before, after, cmpopts.IgnoreMapEntries(func(k, _ string) bool { return k == "contacts" || k == "events" || k == "object_counts" })); diff != "" {
		t.Errorf("creating contacts changed other rows (-before +after):\n%s", diff)
	}
}

// countingReader yields n bytes of a JSON string body and counts what was taken from it.
// The transport may still be reading it after the answer came back, hence the atomic.
type countingReader struct {
	n    int64
	read atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	read := c.read.Load()
	if read >= c.n {
		return 0, io.EOF
	}
	k := min(int64(len(p)), c.n-read)
	for i := range p[:k] {
		p[i] = 'a'
	}
	c.read.Add(k)
	return int(k), nil
}

func TestHugeBodyIs413WithoutBeingRead(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	before := dumpCompany(t, c.id)
	const size = 100 << 20
	for _, chunked := range []bool{false, true} {
		t.Run("chunked="+strconv.FormatBool(chunked), func(t *testing.T) {
			body := &countingReader{n: size}
			req, _ := http.NewRequest("POST", testEnv.baseURL+"/v1/contacts", io.MultiReader(strings.NewReader(`{"name":"`), body))
			if !chunked {
				req.ContentLength = size + 9
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("x-api-key", c.key)
			wantProblem(t, doRequest(t, req), http.StatusRequestEntityTooLarge, "body_too_large")
			// What the client managed to send sits in socket buffers; the server stopped at 1 MiB.
			if body.read.Load() > 32<<20 {
				t.Errorf("the client sent %d MiB of a 100 MiB body; want the server to stop reading early", body.read.Load()>>20)
			}
		})
	}
	if diff := cmp.Diff(before, dumpCompany(t, c.id)); diff != "" {
		t.Errorf("the refused bodies changed rows (-before +after):\n%s", diff)
	}
}

// BenchmarkJSONMembers splits a custom object of 52 fields, as a write with custom values does
// several times, as a body (jsonMembers) and as its own (go test -run '^$' -bench JSONMembers .).
func BenchmarkJSONMembers(b *testing.B) {
	obj := []byte(`{"tier":"silver","arr":123456`)
	for i := range 50 {
		obj = fmt.Appendf(obj, `,"extra_field_%d":null`, i)
	}
	obj = append(obj, '}')
	for name, split := range map[string]func([]byte) []member{"body": func(b []byte) []member { m, _, _ := jsonMembers(b); return m }, "own": objectMembers} {
		b.Run(name, func(b *testing.B) {
			for b.ReportAllocs(); b.Loop(); {
				if m := split(obj); len(m) != 52 {
					b.Fatalf("%d members; want 52", len(m))
				}
			}
		})
	}
}
