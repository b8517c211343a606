package main

// Tests of expand[] (API.md section 5).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// expSpec is one expand[] value: the property it adds, the id field it follows and the kind of
// object it embeds.
type expSpec struct{ name, idField, kind string }

var (
	contactExps = []expSpec{{"organization", "organizationId", "organization"}, {"country", "countryId", "country"},
		{"stage", "stageId", "stage"}, {"assignedTo", "assignedToId", "user"}, {"userCreator", "userCreatorId", "user"}}
	businessExps = []expSpec{{"organization", "organizationId", "organization"}, {"stage", "stageId", "stage"},
		{"userCreator", "userCreatorId", "user"}}
	expsOf   = map[string][]expSpec{"/v1/contacts": contactExps, "/v1/business": businessExps}
	bareBody = map[string]string{"/v1/contacts": `{"name":"Bare"}`, "/v1/business": `{"title":"Bare"}`}
)

// expNames returns the expand[] values of specs.
func expNames(specs []expSpec) (names []string) {
	for _, s := range specs {
		names = append(names, s.name)
	}
	return names
}

// expQuery returns the query string (without "?") that asks for names, in order.
func expQuery(names ...string) string {
	q := url.Values{}
	for _, n := range names {
		q.Add("expand[]", n)
	}
	return strings.ReplaceAll(q.Encode(), "expand%5B%5D", "expand[]")
}

// refWorld is a company with objects to point at: a second user (with a key of its own), two
// organizations, the contact stages, and the default board with its stages. Names need escaping and
// the first user's surname and email are null, so that any difference between two encoders shows.
type refWorld struct {
	testCompany
	user2   int64
	key2    string // acts as user2
	orgs    [2]int64
	cstages []int64 // contact stages, by position
	board   int64   // the default board
	bstages []int64 // its stages, by position
	refs    map[string][]byte
}

func newRefWorld(t *testing.T) *refWorld {
	t.Helper()
	w := &refWorld{testCompany: newTestCompany(t), refs: map[string][]byte{}}
	w.user2 = sqlID(t, `INSERT INTO users (company_id, name, surname, email) VALUES ($1, 'Zoë "Z" <zz>', 'Gil', 'zoe@example.com') RETURNING id`, w.id)
	w.key2 = addKey(t, w.id, w.user2)
	for i := range w.orgs {
		w.orgs[i] = sqlID(t, `INSERT INTO organizations (company_id, name) VALUES ($1, $2) RETURNING id`,
			w.id, fmt.Sprintf("Ünïcødé \"%d\" \\ <b>&amp; \u2028 tab\t %s", i, randomHex(3)))
	}
	w.cstages = sqlIDs(t, `SELECT id FROM stages WHERE company_id = $1 AND board_id IS NULL ORDER BY position, id`, w.id)
	w.board = sqlID(t, `SELECT id FROM boards WHERE company_id = $1 AND is_default`, w.id)
	w.bstages = sqlIDs(t, `SELECT id FROM stages WHERE company_id = $1 AND board_id = $2 ORDER BY position, id`, w.id, w.board)
	return w
}

// body is an object of the resource that sets every reference: set 0 to the first organization,
// Spain, the first stages and user2; set 1 to the second organization, France, the second stages and
// the first user.
func (w *refWorld) body(resource string, set int) string {
	if resource == "/v1/business" {
		return fmt.Sprintf(`{"title":"Deal %d","organizationId":%d,"boardId":%d,"stageId":%d}`, set, w.orgs[set], w.board, w.bstages[set])
	}
	return fmt.Sprintf(`{"name":"Carla %d","organizationId":%d,"countryId":%d,"stageId":%d,"assignedToId":%d}`,
		set, w.orgs[set], []int{724, 250}[set], w.cstages[set], []int64{w.user2, w.userID}[set])
}

// ref returns a reference object as fetched directly (countries from their list), once each.
func (w *refWorld) ref(t *testing.T, kind, id string) []byte {
	t.Helper()
	if b, ok := w.refs[kind+":"+id]; ok {
		return b
	}
	if kind == "country" {
		for _, raw := range walkList[json.RawMessage](t, w.key, "/v1/countries", "", 100) {
			w.refs["country:"+fmt.Sprint(decode[obj](t, raw).id())] = raw
		}
	} else { // without the newline every answer ends with (the list test checks it)
		w.refs[kind+":"+id] = bytes.TrimSuffix(mustGet(t, w.key, "/v1/"+kind+"s/"+id).body, []byte("\n"))
	}
	return w.refs[kind+":"+id]
}

// checkExpanded checks the object obj: each spec named in want holds, byte for byte, the object its
// id field points at as fetched directly, or null where the id is null; the other specs are absent;
// every id field stays; no key appears twice. It returns obj's members.
func (w *refWorld) checkExpanded(t *testing.T, where string, obj []byte, specs []expSpec, want []string) map[string]json.RawMessage {
	t.Helper()
	if keys := jsonKeys(t, obj); len(slices.Compact(slices.Sorted(slices.Values(keys)))) != len(keys) {
		t.Errorf("%s: a key appears more than once in %s", where, obj)
	}
	m := decode[map[string]json.RawMessage](t, obj)
	for _, s := range specs {
		idRaw, exp := m[s.idField], m[s.name]
		switch {
		case idRaw == nil:
			t.Errorf("%s: no %s; want the id field to stay beside the expansion", where, s.idField)
		case !slices.Contains(want, s.name):
			if exp != nil {
				t.Errorf("%s: has %q = %s; want it only when expand[] asks for it", where, s.name, exp)
			}
		case exp == nil:
			t.Errorf("%s: no %q; want it with expand[]=%s", where, s.name, s.name)
		case string(idRaw) == "null":
			if string(exp) != "null" {
				t.Errorf("%s: %s is null but %s = %s; want null", where, s.idField, s.name, exp)
			}
		default:
			if diff := cmp.Diff(string(w.ref(t, s.kind, string(idRaw))), string(exp)); diff != "" {
				t.Errorf("%s: %s differs from the %s fetched directly (-direct +expanded):\n%s", where, s.name, s.kind, diff)
			}
		}
	}
	return m
}

// Each expand[] value alone, on every request that answers an object (lists are
// TestExpandEverySetAndRetrieveAsList's): the expansion is the object its id points at, or null
// where the id is null.
func TestExpandEveryValueOnEveryEndpoint(t *testing.T) {
	t.Parallel()
	w := newRefWorld(t)
	nulls := map[string]string{"/v1/business": `{"organizationId":null}`,
		"/v1/contacts": `{"organizationId":null,"countryId":null,"stageId":null,"assignedToId":null}`}
	for resource, specs := range expsOf {
		for _, s := range specs {
			t.Run(resource+" with expand[]="+s.name, func(t *testing.T) {
				q, want := "?"+expQuery(s.name), []string{s.name}
				nullable := strings.Contains(nulls[resource], s.idField)
				do := func(method, path, body string, status int) map[string]json.RawMessage {
					what := method + " " + path
					m := w.checkExpanded(t, what, wantStatus(t, call(t, method, path, w.key, body), status).body, specs, want)
					if null := string(m[s.idField]) == "null"; null != (nullable && (body == nulls[resource] || body == bareBody[resource])) {
						t.Errorf("%s %s: %s = %s; want null only where the body sets none", what, body, s.idField, m[s.idField])
					}
					return m
				}
				do("POST", resource+q, bareBody[resource], http.StatusCreated)
				created := do("POST", resource+q, w.body(resource, 0), http.StatusCreated)
				path := resource + "/" + strings.Trim(string(created["id"]), `"`) + q
				do("GET", path, "", http.StatusOK)
				patched := do("PATCH", path, w.body(resource, 1), http.StatusOK)
				if s.name != "userCreator" && string(patched[s.idField]) == string(created[s.idField]) {
					t.Errorf("PATCH %s: %s = %s did not change; want the patched reference", path, s.idField, patched[s.idField])
				}
				do("PATCH", path, `{}`, http.StatusOK)
				do("PATCH", path, nulls[resource], http.StatusOK)
			})
		}
	}
}

// For every set of expand[] values, each object of a list holds those expansions, and retrieving it
// with the same set gives it byte for byte; repeats and order in the query change nothing.
func TestExpandEverySetAndRetrieveAsList(t *testing.T) {
	t.Parallel()
	w := newRefWorld(t)
	for resource, specs := range expsOf {
		// Besides those with every reference and none, one with some, to a user whose fields are null;
		// one is user2's, whom the others point at.
		mixed := map[string]string{"/v1/business": fmt.Sprintf(`{"title":"Mixed","organizationId":%d}`, w.orgs[1]),
			"/v1/contacts": fmt.Sprintf(`{"name":"Mixed","organizationId":%d,"countryId":250,"assignedToId":%d}`, w.orgs[1], w.userID)}
		for _, body := range []string{bareBody[resource], w.body(resource, 0), mixed[resource]} {
			create(t, w.key, resource, body)
		}
		create(t, w.key2, resource, w.body(resource, 1))
		names := expNames(specs)
		for set := range 1 << len(names) {
			var subset []string
			for i, n := range names {
				if set&(1<<i) != 0 {
					subset = append(subset, n)
				}
			}
			q := expQuery(subset...)
			list := resource + "?limit=100&" + q
			for i, want := range listPage[json.RawMessage](t, w.key, list).Data {
				w.checkExpanded(t, fmt.Sprintf("GET %s: data[%d]", list, i), want, specs, subset)
				path := itemPath(resource, decode[obj](t, want).id()) + "?" + q
				got := bytes.TrimSpace(wantStatus(t, call(t, "GET", path, w.key, ""), http.StatusOK).body)
				if diff := cmp.Diff(string(want), string(got)); diff != "" {
					t.Errorf("GET %s differs from the object in GET %s (-list +retrieve):\n%s", path, list, diff)
				}
			}
		}
	}
	sixteen := slices.Repeat(expNames(contactExps), 4)[:16]
	for _, tt := range []struct{ resource, query, same string }{
		{"/v1/contacts", expQuery("userCreator", "assignedTo", "stage", "country", "organization"), expQuery(expNames(contactExps)...)},
		{"/v1/contacts", expQuery("stage", "stage"), expQuery("stage")},
		{"/v1/contacts", expQuery("country", "organization", "country", "organization"), expQuery("organization", "country")},
		{"/v1/contacts", expQuery(sixteen...), expQuery(expNames(contactExps)...)},
		{"/v1/contacts", "expand%5B%5D=organization", expQuery("organization")},
		{"/v1/business", expQuery("userCreator", "userCreator", "userCreator"), expQuery("userCreator")},
		{"/v1/business", expQuery("stage", "organization"), expQuery("organization", "stage")},
	} {
		got, want := listPage[json.RawMessage](t, w.key, tt.resource+"?"+tt.query), listPage[json.RawMessage](t, w.key, tt.resource+"?"+tt.same)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GET %s?%s differs from GET %s?%s (-want +got):\n%s", tt.resource, tt.query, tt.resource, tt.same, diff)
		}
	}
}

// An unknown expand[] value is a 400 on every request that takes expand[], naming it and listing the
// valid ones, and changes nothing; so are more than 16 values, and any value on the reference
// endpoints, which expand nothing.
func TestExpandRejectsUnknownValues(t *testing.T) {
	t.Parallel()
	w := newRefWorld(t)
	contact := createPath(t, w.key, "/v1/contacts", w.body("/v1/contacts", 0))
	deal := createPath(t, w.key, "/v1/business", w.body("/v1/business", 0))
	before := dumpCompany(t, w.id)
	for _, res := range []struct {
		path, object, body string
		valid, notValid    []string
	}{
		{"/v1/contacts", contact, `{"name":"x"}`, expNames(contactExps), nil},
		{"/v1/business", deal, `{"title":"x"}`, expNames(businessExps), []string{"country", "assignedTo"}},
	} {
		for _, vals := range [][]string{{"bogus"}, {"Organization"}, {""}, {"organizationId"}, {"organization.name"},
			{"<script>"}, {"organization", "bogus"}, {"stage", "stage", "nope"}, {"organization", "country"}, {"assignedTo"},
			slices.Repeat(res.valid[:1], 17)} {
			if len(vals) <= 16 && slices.Contains(res.valid, vals[len(vals)-1]) {
				continue // valid here: only for business
			}
			bad, q := vals[len(vals)-1], "?"+expQuery(vals...)
			for _, req := range []struct{ method, path, body string }{{"GET", res.path + q, ""}, {"GET", res.object + q, ""},
				{"GET", res.path + "/count" + q, ""}, {"POST", res.path + q, res.body}, {"PATCH", res.object + q, res.body},
				{"DELETE", res.object + q, ""}} {
				p := wantProblem(t, call(t, req.method, req.path, w.key, req.body), http.StatusBadRequest, "invalid_expand")
				if len(vals) > 16 {
					continue
				}
				ok := strings.Contains(p.Detail, `"`+bad+`"`)
				for _, v := range res.valid {
					ok = ok && strings.Contains(p.Detail, v)
				}
				for _, v := range res.notValid {
					ok = ok && (v == bad || !strings.Contains(p.Detail, v))
				}
				if !ok {
					t.Errorf("%s %s: detail %q; want it to name %q and list %v, only", req.method, req.path, p.Detail, bad, res.valid)
				}
			}
		}
	}
	for _, p := range []string{"/v1/users", "/v1/organizations", "/v1/stages", "/v1/boards", "/v1/statuses",
		"/v1/currencies", "/v1/countries", fmt.Sprintf("/v1/users/%d", w.userID), fmt.Sprintf("/v1/organizations/%d", w.orgs[0]),
		fmt.Sprintf("/v1/stages/%d", w.cstages[0]), fmt.Sprintf("/v1/boards/%d", w.board)} {
		for _, v := range []string{"x", "organization", "userCreator"} {
			path := p + "?" + expQuery(v)
			if pb := wantProblem(t, call(t, "GET", path, w.key, ""), http.StatusBadRequest, "invalid_expand"); !strings.Contains(pb.Detail, `"`+v+`"`) {
				t.Errorf("GET %s: detail %q; want it to name %q", path, pb.Detail, v)
			}
		}
	}
	wantProblem(t, call(t, "POST", "/v1/organizations?expand[]=x", w.key, `{"name":"Nope"}`), http.StatusBadRequest, "invalid_expand")
	if diff := cmp.Diff(before, dumpCompany(t, w.id)); diff != "" {
		t.Errorf("the refused requests changed rows (-before +after):\n%s", diff)
	}
	// A valid value is accepted where there is nothing to expand: on a count, and on DELETE.
	q := "?" + expQuery("organization")
	if r := call(t, "GET", "/v1/business/count"+q, w.key, ""); r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"count":1}` {
		t.Errorf("GET /v1/business/count%s = %d %s; want 200 {\"count\":1}", q, r.status, r.body)
	}
	if r := call(t, "DELETE", contact+q, w.key, ""); r.status != http.StatusNoContent {
		t.Errorf("DELETE %s%s = %d; want 204 (body %s)", contact, q, r.status, r.body)
	}
}

// A list page costs a fixed number of queries whatever its length: 1 object or 100, with or without
// expansions. The queries are counted by a proxy between a server of the test's own and PostgreSQL.
func TestExpandCostsAFixedNumberOfQueries(t *testing.T) {
	t.Parallel()
	proxy, dbURL := newDBProxy(t, testEnv.dbURL)
	// No webhook worker: its statements would be counted too.
	base := startServer(t, map[string]string{"DATABASE_URL": dbURL, "ROLODEX_DB_MAX_CONNS": "2", "ROLODEX_WEBHOOK_SLOTS": "0"}, &syncBuffer{})

	// 100 contacts and 100 business records, each pointing at one of several organizations, users,
	// stages and countries.
	w := newRefWorld(t)
	_, err := testEnv.st.db.Exec(`INSERT INTO contacts (company_id, name, organization_id, country_id, stage_id,
			assigned_to_id, user_creator_id)
		SELECT $1, 'Contact ' || i, ($2::bigint[])[1 + i % 2], (ARRAY[724, 250, 276])[1 + i % 3],
			($3::bigint[])[1 + i % 3], ($4::bigint[])[1 + i % 2], ($4::bigint[])[1 + (i + 1) % 2]
		FROM generate_series(1, 100) AS i`, w.id, w.orgs[:], w.cstages, []int64{w.userID, w.user2})
	if err == nil {
		_, err = testEnv.st.db.Exec(`INSERT INTO business (company_id, title, status_id, organization_id, currency_id,
				user_owner_id, user_creator_id, board_id, stage_id, position)
			SELECT $1, 'Deal ' || i, 1, ($2::bigint[])[1 + i % 2], 978, $3, $3, $4, ($5::bigint[])[1 + i % 4], i
			FROM generate_series(1, 100) AS i`, w.id, w.orgs[:], w.user2, w.board, w.bstages)
	}
	if err != nil {
		t.Fatal(err)
	}

	// queries returns how many queries GET path costs, with the key already in the server's cache. The
	// answer must hold every object expanded (the last one's expansions can only be objects).
	queries := func(t *testing.T, path string, n int) int64 {
		t.Helper()
		wantStatus(t, callAt(t, nil, base, "GET", "/v1/statuses", w.key, ""), http.StatusOK)
		proxy.queries.Store(0)
		r := callAt(t, nil, base, "GET", path, w.key, "")
		count := proxy.queries.Load()
		if got := bytes.Count(r.body, []byte(`"createdAt"`)); r.status != http.StatusOK || count == 0 || got != n {
			t.Fatalf("GET %s = %d with %d objects and nested objects after %d queries; want 200 with %d", path, r.status, got, count, n)
		}
		return count
	}
	for resource, specs := range expsOf {
		t.Run(resource, func(t *testing.T) {
			q, m := expQuery(expNames(specs)...), 1+len(specs) // objects with createdAt in one object, expanded
			one, hundred := queries(t, resource+"?limit=1", 1), queries(t, resource+"?limit=100", 100)
			oneExp, hundredExp := queries(t, resource+"?limit=1&"+q, m), queries(t, resource+"?limit=100&"+q, 100*m)
			t.Logf("GET %s: %d queries for 1 object, %d for 100; with %d expansions %d and %d", resource, one, hundred, len(specs), oneExp, hundredExp)
			if one != hundred || oneExp != hundredExp || hundredExp-hundred > int64(len(specs)) {
				t.Errorf("GET %s: %d queries for 1 object and %d for 100; with %d expansions %d and %d; want the same for 1 and 100, and at most one more per expansion",
					resource, one, hundred, len(specs), oneExp, hundredExp)
			}
			path := itemPath(resource, listPage[obj](t, w.key, resource+"?limit=1").Data[0].id())
			if plain, exp := queries(t, path, 1), queries(t, path+"?"+q, m); exp-plain > int64(len(specs)) {
				t.Errorf("GET %s: %d queries, %d with %d expansions; want at most one more each", path, plain, exp, len(specs))
			}
		})
	}
}

func TestExpandNeverCrossesCompanies(t *testing.T) {
	t.Parallel()
	a, b := newRefWorld(t), newRefWorld(t)
	secret := "A-secret-" + randomHex(8)
	_, err := testEnv.st.db.Exec(`WITH u AS (UPDATE users SET name = $2, surname = $2 WHERE company_id = $1),
		o AS (UPDATE organizations SET name = $2 WHERE company_id = $1),
		s AS (UPDATE stages SET name = $2 WHERE company_id = $1)
		UPDATE boards SET name = $2 WHERE company_id = $1`, a.id, secret)
	if err != nil {
		t.Fatal(err)
	}
	type request struct{ method, path, body string }
	var reqs []request
	for resource, specs := range expsOf {
		create(t, a.key, resource, a.body(resource, 0)) // A's own objects point at A's secrets
		q, object := "?"+expQuery(expNames(specs)...), createPath(t, b.key, resource, b.body(resource, 0))
		reqs = append(reqs, request{"GET", resource + q + "&limit=100", ""}, request{"GET", object + q, ""},
			request{"POST", resource + q, b.body(resource, 1)}, request{"PATCH", object + q, b.body(resource, 1)})
	}
	for _, path := range []string{"/v1/users", "/v1/organizations", "/v1/stages", "/v1/boards"} {
		reqs = append(reqs, request{"GET", path + "?limit=100", ""})
	}
	for _, req := range reqs {
		r := call(t, req.method, req.path, b.key, req.body)
		if r.status != http.StatusOK && r.status != http.StatusCreated || bytes.Contains(r.body, []byte(secret)) {
			t.Errorf("B: %s %s = %d %s; want success, without A's objects", req.method, req.path, r.status, r.body)
		}
	}
}
