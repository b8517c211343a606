package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Tests of expand[] (API.md section 5) and of the reference resources (API.md section 4) whose
// objects the expansions embed.

// expSpec is one expand[] value of a resource: the property it adds, the id field it follows and the
// kind of object it embeds (a key of expFields).
type expSpec struct {
	name    string
	idField string
	kind    string
}

var (
	expContactSpecs = []expSpec{{"organization", "organizationId", "organization"}, {"country", "countryId", "country"},
		{"stage", "stageId", "stage"}, {"assignedTo", "assignedToId", "user"}, {"userCreator", "userCreatorId", "user"}}
	expBusinessSpecs = []expSpec{{"organization", "organizationId", "organization"}, {"stage", "stageId", "stage"},
		{"userCreator", "userCreatorId", "user"}}
)

// expFields are the keys, in order, of each kind of reference object.
var expFields = map[string][]string{
	"user":         {"id", "name", "surname", "email", "createdAt", "updatedAt"},
	"organization": {"id", "name", "createdAt", "updatedAt"},
	"stage":        {"id", "name", "boardId", "position", "createdAt", "updatedAt"},
	"country":      {"id", "code", "name", "alpha3", "createdAt", "updatedAt"},
	"board":        {"id", "name", "isDefault", "createdAt", "updatedAt"},
	"status":       {"id", "code", "name", "createdAt", "updatedAt"},
	"currency":     {"id", "code", "name", "minorUnit", "createdAt", "updatedAt"},
}

// expNames returns the expand[] values of specs.
func expNames(specs []expSpec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.name
	}
	return out
}

// expQuery returns the expand[] query string (without "?") that asks for names, in order.
func expQuery(names ...string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = "expand[]=" + url.QueryEscape(n)
	}
	return strings.Join(parts, "&")
}

// expQueryIDs runs a query that returns a column of ids.
func expQueryIDs(t *testing.T, q string, args ...any) []int64 {
	t.Helper()
	rows, err := testEnv.st.db.QueryContext(context.Background(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// expWorld is a company with related objects to point at: two users (the second with a key of its
// own), two organizations, the default contact stages and the default board with its stages.
type expWorld struct {
	testCompany
	user2   int64  // Ana Gil, with an e-mail address
	key2    string // acts as user2
	orgs    [2]int64
	cstages []int64 // contact stages, by position
	board   int64   // the default board
	bstages []int64 // its stages, by position
}

func expNewWorld(t *testing.T) expWorld {
	t.Helper()
	w := expWorld{testCompany: newTestCompany(t)}
	w.user2 = sqlID(t, `INSERT INTO users (company_id, name, surname, email) VALUES ($1, 'Ana', 'Gil', 'ana@example.com') RETURNING id`, w.id)
	key2, err := testEnv.st.createAPIKey(context.Background(), w.id, w.user2)
	if err != nil {
		t.Fatal(err)
	}
	w.key2 = key2
	for i := range w.orgs {
		w.orgs[i] = sqlID(t, `INSERT INTO organizations (company_id, name) VALUES ($1, $2) RETURNING id`,
			w.id, fmt.Sprintf("Org %d %s", i, randomHex(3)))
	}
	w.cstages = expQueryIDs(t, `SELECT id FROM stages WHERE company_id = $1 AND board_id IS NULL ORDER BY position, id`, w.id)
	w.board = sqlID(t, `SELECT id FROM boards WHERE company_id = $1 AND is_default`, w.id)
	w.bstages = expQueryIDs(t, `SELECT id FROM stages WHERE company_id = $1 AND board_id = $2 ORDER BY position, id`, w.id, w.board)
	if len(w.cstages) < 2 || len(w.bstages) < 2 {
		t.Fatalf("company %d has contact stages %v and board stages %v; want at least two of each", w.id, w.cstages, w.bstages)
	}
	return w
}

// contactBody is a contact that sets every reference: set 0 points at the first organization, Spain,
// the first stage and user2; set 1 at the second organization, France, the second stage and the
// company's first user.
func (w expWorld) contactBody(set int) string {
	if set == 0 {
		return fmt.Sprintf(`{"name":"Carla","organizationId":%d,"countryId":724,"stageId":%d,"assignedToId":%d}`,
			w.orgs[0], w.cstages[0], w.user2)
	}
	return fmt.Sprintf(`{"name":"Bea","organizationId":%d,"countryId":250,"stageId":%d,"assignedToId":%d}`,
		w.orgs[1], w.cstages[1], w.userID)
}

// businessBody is a business record that sets every reference, like contactBody.
func (w expWorld) businessBody(set int) string {
	if set == 0 {
		return fmt.Sprintf(`{"title":"Deal A","organizationId":%d,"boardId":%d,"stageId":%d}`, w.orgs[0], w.board, w.bstages[0])
	}
	return fmt.Sprintf(`{"title":"Deal B","organizationId":%d,"stageId":%d}`, w.orgs[1], w.bstages[1])
}

// expRefNames returns the name of every object an expansion of the company may embed, by
// "kind:id".
func expRefNames(t *testing.T, companyID int64) map[string]string {
	t.Helper()
	const q = `SELECT 'user:' || id, name FROM users WHERE company_id = $1
		UNION ALL SELECT 'organization:' || id, name FROM organizations WHERE company_id = $1
		UNION ALL SELECT 'stage:' || id, name FROM stages WHERE company_id = $1
		UNION ALL SELECT 'country:' || id, name FROM countries`
	rows, err := testEnv.st.db.QueryContext(context.Background(), q, companyID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := make(map[string]string)
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	return out
}

// expObj checks r's status and decodes its body as one JSON object.
func expObj(t *testing.T, what string, r response, status int) map[string]json.RawMessage {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s = %d; want %d (body %s)", what, r.status, status, r.body)
	}
	return expMap(t, r.body)
}

// expMap decodes a JSON object, keeping each member's raw bytes.
func expMap(t *testing.T, raw []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("decode object %s: %v", raw, err)
	}
	return m
}

// expStr decodes a JSON string.
func expStr(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s is not a JSON string: %v", raw, err)
	}
	return s
}

// expID returns an object's id as it goes into a path: contact ids are strings, business ids numbers.
func expID(t *testing.T, obj map[string]json.RawMessage) string {
	t.Helper()
	raw := obj["id"]
	if len(raw) > 0 && raw[0] == '"' {
		return expStr(t, raw)
	}
	if _, err := strconv.ParseInt(string(raw), 10, 64); err != nil {
		t.Fatalf("id %s is not an id", raw)
	}
	return string(raw)
}

// expListBody is the body of a list answer.
type expListBody struct {
	Data       []json.RawMessage `json:"data"`
	Pagination struct {
		Limit      int     `json:"limit"`
		HasMore    bool    `json:"hasMore"`
		NextCursor *string `json:"nextCursor"`
	} `json:"pagination"`
}

// expPage checks that r is a 200 list answer and decodes it strictly.
func expPage(t *testing.T, what string, r response) expListBody {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("%s = %d; want 200 (body %s)", what, r.status, r.body)
	}
	var lb expListBody
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&lb); err != nil {
		t.Fatalf("%s: body %s: %v", what, r.body, err)
	}
	if diff := cmp.Diff([]string{"data", "pagination"}, objectKeys(t, r.body)); diff != "" {
		t.Errorf("%s: top-level keys (-want +got):\n%s", what, diff)
	}
	return lb
}

// expCheckExpanded checks obj's expansions: each spec named in want holds the object its id field
// points at (its fields in order, the same id, the name in names), or null where the id is null; the
// other specs are absent; every id field stays. No key appears twice.
func expCheckExpanded(t *testing.T, where string, obj json.RawMessage, specs []expSpec, want []string, names map[string]string) map[string]json.RawMessage {
	t.Helper()
	keys := objectKeys(t, obj)
	seen := make(map[string]bool)
	for _, k := range keys {
		if seen[k] {
			t.Errorf("%s: key %q appears more than once in %s", where, k, obj)
		}
		seen[k] = true
	}
	m := expMap(t, obj)
	for _, s := range specs {
		idRaw, hasID := m[s.idField]
		if !hasID {
			t.Errorf("%s: no %s; want the id field to stay beside the expansion", where, s.idField)
			continue
		}
		exp, has := m[s.name]
		if !slices.Contains(want, s.name) {
			if has {
				t.Errorf("%s: has %q = %s; want it only when expand[] asks for it", where, s.name, exp)
			}
			continue
		}
		if !has {
			t.Errorf("%s: no %q; want it with expand[]=%s", where, s.name, s.name)
			continue
		}
		if string(idRaw) == "null" {
			if string(exp) != "null" {
				t.Errorf("%s: %s is null but %s = %s; want null", where, s.idField, s.name, exp)
			}
			continue
		}
		if string(exp) == "null" || len(exp) == 0 || exp[0] != '{' {
			t.Errorf("%s: %s = %d but %s = %s; want the %s object", where, s.idField, idRaw, s.name, exp, s.kind)
			continue
		}
		if diff := cmp.Diff(expFields[s.kind], objectKeys(t, exp)); diff != "" {
			t.Errorf("%s: keys of %s (-want +got):\n%s", where, s.name, diff)
		}
		em := expMap(t, exp)
		if string(em["id"]) != string(idRaw) {
			t.Errorf("%s: %s.id = %s; want %s (the %s)", where, s.name, em["id"], idRaw, s.idField)
		}
		if got, want := expStr(t, em["name"]), names[s.kind+":"+string(idRaw)]; got != want {
			t.Errorf("%s: %s.name = %q; want %q", where, s.name, got, want)
		}
	}
	return m
}

// expCount returns how many rows of table the company has.
func expCount(t *testing.T, table string, companyID int64) int64 {
	t.Helper()
	return sqlID(t, `SELECT count(*) FROM `+table+` WHERE company_id = $1`, companyID)
}

// expBody checks r's status and returns its body.
func expBody(t *testing.T, what string, r response, status int) []byte {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s = %d; want %d (body %s)", what, r.status, status, r.body)
	}
	return r.body
}

func TestExpandEveryValueOnEveryEndpoint(t *testing.T) {
	t.Parallel()
	w := expNewWorld(t)
	resources := []struct {
		path  string
		specs []expSpec
		full  [2]string // bodies that set every reference, to different objects
		bare  string    // a body that sets none
	}{
		{"/v1/contacts", expContactSpecs, [2]string{w.contactBody(0), w.contactBody(1)}, `{"name":"Bare"}`},
		{"/v1/business", expBusinessSpecs, [2]string{w.businessBody(0), w.businessBody(1)}, `{"title":"Bare"}`},
	}
	for _, res := range resources {
		// The list holds objects of both users, pointing at different objects, and one pointing at nothing.
		for _, c := range []struct{ key, body string }{{w.key, res.full[0]}, {w.key2, res.full[1]}, {w.key, res.bare}} {
			expBody(t, "POST "+res.path, call(t, "POST", res.path, c.key, c.body), http.StatusCreated)
		}
		names := expRefNames(t, w.id)
		for _, s := range res.specs {
			t.Run(res.path+" with expand[]="+s.name, func(t *testing.T) {
				q := "?" + expQuery(s.name)
				want := []string{s.name}

				what := "POST " + res.path + q
				created := expCheckExpanded(t, what, expBody(t, what, call(t, "POST", res.path+q, w.key, res.full[0]), http.StatusCreated),
					res.specs, want, names)
				if string(created[s.name]) == "null" {
					t.Errorf("%s: %s is null; want an object (the body sets %s)", what, s.name, s.idField)
				}

				path := res.path + "/" + expID(t, created) + q
				what = "GET " + path
				got := expCheckExpanded(t, what, expBody(t, what, call(t, "GET", path, w.key, ""), http.StatusOK), res.specs, want, names)
				if diff := cmp.Diff(string(created[s.name]), string(got[s.name])); diff != "" {
					t.Errorf("%s: %s differs from the POST answer's (-post +get):\n%s", what, s.name, diff)
				}

				what = "PATCH " + path
				patched := expCheckExpanded(t, what, expBody(t, what, call(t, "PATCH", path, w.key, res.full[1]), http.StatusOK),
					res.specs, want, names)
				if s.name != "userCreator" && string(patched[s.idField]) == string(created[s.idField]) {
					t.Errorf("%s: %s = %s did not change; want the patched reference", what, s.idField, patched[s.idField])
				}

				path = res.path + "?limit=100&" + expQuery(s.name)
				what = "GET " + path
				page := expPage(t, what, call(t, "GET", path, w.key, ""))
				nulls, objects := 0, 0
				for i, raw := range page.Data {
					m := expCheckExpanded(t, fmt.Sprintf("%s: data[%d]", what, i), raw, res.specs, want, names)
					if string(m[s.name]) == "null" {
						nulls++
					} else {
						objects++
					}
				}
				wantNulls := 1 // the bare object
				if s.name == "userCreator" || (res.path == "/v1/business" && s.name == "stage") {
					wantNulls = 0 // never null
				}
				// The three objects made first, and one more per subtest so far.
				if len(page.Data) < 4 || nulls != wantNulls || objects < 3 {
					t.Errorf("%s: %d objects, %d with %s null; want at least 4 objects, %d null", what, len(page.Data), nulls, s.name, wantNulls)
				}
			})
		}
	}
}

func TestExpandSeveralValuesAndRepeats(t *testing.T) {
	t.Parallel()
	w := expNewWorld(t)
	contact := expObj(t, "POST /v1/contacts", call(t, "POST", "/v1/contacts", w.key, w.contactBody(0)), http.StatusCreated)
	expObj(t, "POST /v1/contacts", call(t, "POST", "/v1/contacts", w.key2, w.contactBody(1)), http.StatusCreated)
	deal := expObj(t, "POST /v1/business", call(t, "POST", "/v1/business", w.key, w.businessBody(0)), http.StatusCreated)
	expObj(t, "POST /v1/business", call(t, "POST", "/v1/business", w.key2, w.businessBody(1)), http.StatusCreated)
	names := expRefNames(t, w.id)

	sixteen := make([]string, maxExpandValues)
	for i := range sixteen {
		sixteen[i] = expNames(expContactSpecs)[i%len(expContactSpecs)]
	}
	tests := []struct {
		name  string
		path  string // the resource
		id    string // of one object of it
		specs []expSpec
		query []string
		want  []string
	}{
		{"two contact values", "/v1/contacts", expID(t, contact), expContactSpecs, []string{"organization", "assignedTo"}, []string{"organization", "assignedTo"}},
		{"all five contact values", "/v1/contacts", expID(t, contact), expContactSpecs, expNames(expContactSpecs), expNames(expContactSpecs)},
		{"all five in reverse order", "/v1/contacts", expID(t, contact), expContactSpecs, []string{"userCreator", "assignedTo", "stage", "country", "organization"}, expNames(expContactSpecs)},
		{"a contact value given twice", "/v1/contacts", expID(t, contact), expContactSpecs, []string{"stage", "stage"}, []string{"stage"}},
		{"repeats among others", "/v1/contacts", expID(t, contact), expContactSpecs, []string{"country", "organization", "country", "organization"}, []string{"country", "organization"}},
		{"16 values, the most allowed", "/v1/contacts", expID(t, contact), expContactSpecs, sixteen, expNames(expContactSpecs)},
		{"two business values", "/v1/business", expID(t, deal), expBusinessSpecs, []string{"stage", "organization"}, []string{"stage", "organization"}},
		{"all three business values", "/v1/business", expID(t, deal), expBusinessSpecs, expNames(expBusinessSpecs), expNames(expBusinessSpecs)},
		{"a business value given three times", "/v1/business", expID(t, deal), expBusinessSpecs, []string{"userCreator", "userCreator", "userCreator"}, []string{"userCreator"}},
	}
	t.Run("percent-encoded brackets", func(t *testing.T) {
		path := "/v1/contacts/" + expID(t, contact) + "?expand%5B%5D=organization"
		expCheckExpanded(t, "GET "+path, expBody(t, "GET "+path, call(t, "GET", path, w.key, ""), http.StatusOK),
			expContactSpecs, []string{"organization"}, names)
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := expQuery(tt.query...)
			path := tt.path + "/" + tt.id + "?" + q
			expCheckExpanded(t, "GET "+path, expBody(t, "GET "+path, call(t, "GET", path, w.key, ""), http.StatusOK), tt.specs, tt.want, names)

			path = tt.path + "?" + q
			page := expPage(t, "GET "+path, call(t, "GET", path, w.key, ""))
			if len(page.Data) != 2 {
				t.Errorf("GET %s: %d objects; want 2", path, len(page.Data))
			}
			for i, raw := range page.Data {
				expCheckExpanded(t, fmt.Sprintf("GET %s: data[%d]", path, i), raw, tt.specs, tt.want, names)
			}
		})
	}
}

func TestExpandNullReferencesAreNull(t *testing.T) {
	t.Parallel()
	w := expNewWorld(t)
	names := expRefNames(t, w.id)
	nullable := map[string][]string{
		"/v1/contacts": {"organization", "country", "stage", "assignedTo"},
		"/v1/business": {"organization"},
	}
	tests := []struct {
		name   string
		method string
		path   string // the resource
		specs  []expSpec
		setup  string // a body to POST first; the request then goes to the new object
		body   string
	}{
		{"POST a contact without references", "POST", "/v1/contacts", expContactSpecs, "", `{"name":"Nobody"}`},
		{"GET a contact without references", "GET", "/v1/contacts", expContactSpecs, `{"name":"Nobody"}`, ""},
		{"PATCH every reference of a contact to null", "PATCH", "/v1/contacts", expContactSpecs, w.contactBody(0),
			`{"organizationId":null,"countryId":null,"stageId":null,"assignedToId":null}`},
		{"POST a business without organization", "POST", "/v1/business", expBusinessSpecs, "", `{"title":"Lonely"}`},
		{"GET a business without organization", "GET", "/v1/business", expBusinessSpecs, `{"title":"Lonely"}`, ""},
		{"PATCH a business's organization to null", "PATCH", "/v1/business", expBusinessSpecs, w.businessBody(0), `{"organizationId":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.path
			if tt.setup != "" {
				obj := expObj(t, "POST "+path, call(t, "POST", path, w.key, tt.setup), http.StatusCreated)
				path += "/" + expID(t, obj)
			}
			all := expNames(tt.specs)
			path += "?" + expQuery(all...)
			status := http.StatusOK
			if tt.method == "POST" {
				status = http.StatusCreated
			}
			what := tt.method + " " + path
			m := expCheckExpanded(t, what, expBody(t, what, call(t, tt.method, path, w.key, tt.body), status), tt.specs, all, names)
			for _, name := range nullable[tt.path] {
				if string(m[name]) != "null" {
					t.Errorf("%s: %s = %s; want null", what, name, m[name])
				}
			}
			if string(m["userCreator"]) == "null" {
				t.Errorf("%s: userCreator is null; want the key's user", what)
			}
		})
	}
	// And in a list: the only contact has no references.
	c := newTestCompany(t)
	expBody(t, "POST /v1/contacts", call(t, "POST", "/v1/contacts", c.key, `{"name":"Nobody"}`), http.StatusCreated)
	path := "/v1/contacts?" + expQuery(expNames(expContactSpecs)...)
	page := expPage(t, "GET "+path, call(t, "GET", path, c.key, ""))
	if len(page.Data) != 1 {
		t.Fatalf("GET %s: %d objects; want 1", path, len(page.Data))
	}
	m := expCheckExpanded(t, "GET "+path, page.Data[0], expContactSpecs, expNames(expContactSpecs), expRefNames(t, c.id))
	for _, name := range nullable["/v1/contacts"] {
		if string(m[name]) != "null" {
			t.Errorf("GET %s: %s = %s; want null", path, name, m[name])
		}
	}
}

func TestExpandRejectsUnknownValues(t *testing.T) {
	t.Parallel()
	w := expNewWorld(t)
	contact := expObj(t, "POST /v1/contacts", call(t, "POST", "/v1/contacts", w.key, w.contactBody(0)), http.StatusCreated)
	deal := expObj(t, "POST /v1/business", call(t, "POST", "/v1/business", w.key, w.businessBody(0)), http.StatusCreated)
	resources := []struct {
		path, table, id, create, patch string
		specs, others                  []expSpec
	}{
		{"/v1/contacts", "contacts", expID(t, contact), `{"name":"Should not exist"}`, `{"name":"Changed"}`, expContactSpecs, expBusinessSpecs},
		{"/v1/business", "business", expID(t, deal), `{"title":"Should not exist"}`, `{"title":"Changed"}`, expBusinessSpecs, expContactSpecs},
	}
	for _, res := range resources {
		valid := expNames(res.specs)
		values := [][]string{{"bogus"}, {"Organization"}, {""}, {"organizationId"}, {"organization.name"},
			{"<script>"}, {"organization", "bogus"}, {"stage", "stage", "nope"}}
		if res.path == "/v1/business" {
			values = append(values, []string{"country"}, []string{"assignedTo"}, []string{"organization", "country"})
		}
		for _, vals := range values {
			bad := vals[len(vals)-1]
			q := "?" + expQuery(vals...)
			t.Run(res.path+q, func(t *testing.T) {
				checkDetail := func(what string, p problemBody) {
					t.Helper()
					if !strings.Contains(p.Detail, `"`+bad+`"`) {
						t.Errorf("%s: detail %q; want it to name %q", what, p.Detail, bad)
					}
					for _, v := range valid {
						if !strings.Contains(p.Detail, v) {
							t.Errorf("%s: detail %q; want it to list the valid value %q", what, p.Detail, v)
						}
					}
					// Values valid only for the other resource are not offered.
					for _, o := range expNames(res.others) {
						if !slices.Contains(valid, o) && o != bad && strings.Contains(p.Detail, o) {
							t.Errorf("%s: detail %q lists %q; it is not valid for %s", what, p.Detail, o, res.path)
						}
					}
				}
				objPath := res.path + "/" + res.id
				before := expBody(t, "GET "+objPath, call(t, "GET", objPath, w.key, ""), http.StatusOK)
				n := expCount(t, res.table, w.id)

				for _, req := range []struct{ method, path, body string }{
					{"GET", res.path + q, ""},
					{"GET", objPath + q, ""},
					{"POST", res.path + q, res.create},
					{"PATCH", objPath + q, res.patch},
					{"DELETE", objPath + q, ""},
				} {
					what := req.method + " " + req.path
					checkDetail(what, wantProblem(t, call(t, req.method, req.path, w.key, req.body), http.StatusBadRequest, "invalid_expand"))
				}

				if got := expCount(t, res.table, w.id); got != n {
					t.Errorf("after the failed requests the company has %d %s; want %d (nothing created or deleted)", got, res.table, n)
				}
				after := expBody(t, "GET "+objPath, call(t, "GET", objPath, w.key, ""), http.StatusOK)
				if diff := cmp.Diff(string(before), string(after)); diff != "" {
					t.Errorf("GET %s after the failed PATCH and DELETE (-before +after):\n%s", objPath, diff)
				}
			})
		}

		t.Run(res.path+" with more than 16 expand[] values", func(t *testing.T) {
			vals := make([]string, maxExpandValues+1)
			for i := range vals {
				vals[i] = valid[0]
			}
			q := "?" + expQuery(vals...)
			n := expCount(t, res.table, w.id)
			for _, req := range []struct{ method, path, body string }{
				{"GET", res.path + q, ""},
				{"GET", res.path + "/" + res.id + q, ""},
				{"POST", res.path + q, res.create},
				{"PATCH", res.path + "/" + res.id + q, res.patch},
				{"DELETE", res.path + "/" + res.id + q, ""},
			} {
				wantProblem(t, call(t, req.method, req.path, w.key, req.body), http.StatusBadRequest, "invalid_expand")
			}
			if got := expCount(t, res.table, w.id); got != n {
				t.Errorf("the company has %d %s; want %d (nothing created or deleted)", got, res.table, n)
			}
		})
	}

	t.Run("a valid value on DELETE is accepted", func(t *testing.T) {
		obj := expObj(t, "POST /v1/contacts", call(t, "POST", "/v1/contacts", w.key, `{"name":"Doomed"}`), http.StatusCreated)
		path := "/v1/contacts/" + expID(t, obj) + "?" + expQuery("organization")
		if r := call(t, "DELETE", path, w.key, ""); r.status != http.StatusNoContent {
			t.Errorf("DELETE %s = %d; want 204 (body %s)", path, r.status, r.body)
		}
	})
}

func TestExpandIsAcceptedOnCount(t *testing.T) {
	t.Parallel()
	// API.md section 5: expand[] is accepted on every request (and only shapes the response), and an
	// unknown value is the invalid_expand 400. /count has no objects to expand, like DELETE.
	c := newTestCompany(t)
	for _, tt := range []struct{ path, valid string }{{"/v1/contacts/count", "organization"}, {"/v1/business/count", "stage"}} {
		path := tt.path + "?" + expQuery(tt.valid)
		r := call(t, "GET", path, c.key, "")
		if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"count":0}` {
			t.Errorf("GET %s = %d %s; want 200 {\"count\":0}", path, r.status, r.body)
		}
		path = tt.path + "?" + expQuery("bogus")
		wantProblem(t, call(t, "GET", path, c.key, ""), http.StatusBadRequest, "invalid_expand")
	}
}

func TestExpandOnReferenceEndpointsIs400(t *testing.T) {
	t.Parallel()
	w := expNewWorld(t)
	paths := []string{"/v1/users", "/v1/organizations", "/v1/stages", "/v1/boards", "/v1/statuses", "/v1/currencies",
		"/v1/countries", fmt.Sprintf("/v1/users/%d", w.userID), fmt.Sprintf("/v1/organizations/%d", w.orgs[0]),
		fmt.Sprintf("/v1/stages/%d", w.cstages[0]), fmt.Sprintf("/v1/boards/%d", w.board)}
	for _, p := range paths {
		for _, v := range []string{"x", "organization", "userCreator"} {
			path := p + "?" + expQuery(v)
			t.Run("GET "+path, func(t *testing.T) {
				pb := wantProblem(t, call(t, "GET", path, w.key, ""), http.StatusBadRequest, "invalid_expand")
				if !strings.Contains(pb.Detail, `"`+v+`"`) {
					t.Errorf("GET %s: detail %q; want it to name %q", path, pb.Detail, v)
				}
			})
		}
	}
	t.Run("POST /v1/organizations?expand[]=x creates nothing", func(t *testing.T) {
		n := expCount(t, "organizations", w.id)
		wantProblem(t, call(t, "POST", "/v1/organizations?expand[]=x", w.key, `{"name":"Nope"}`), http.StatusBadRequest, "invalid_expand")
		if got := expCount(t, "organizations", w.id); got != n {
			t.Errorf("organizations: %d; want %d", got, n)
		}
	})
}

// expRefObject returns the body of GET path (a reference object) without its trailing newline.
func expRefObject(t *testing.T, path, key string) []byte {
	t.Helper()
	b := expBody(t, "GET "+path, call(t, "GET", path, key, ""), http.StatusOK)
	if !bytes.HasSuffix(b, []byte("\n")) {
		t.Errorf("GET %s: body %q does not end in a newline", path, b)
	}
	return bytes.TrimSuffix(b, []byte("\n"))
}

// expFindCountry walks GET /v1/countries with cursors and returns the raw country with this id.
func expFindCountry(t *testing.T, key string, id int64) []byte {
	t.Helper()
	path := "/v1/countries?limit=100"
	for range 10 {
		page := expPage(t, "GET "+path, call(t, "GET", path, key, ""))
		for _, raw := range page.Data {
			if string(expMap(t, raw)["id"]) == strconv.FormatInt(id, 10) {
				return raw
			}
		}
		if page.Pagination.NextCursor == nil {
			break
		}
		path = "/v1/countries?limit=100&cursor=" + url.QueryEscape(*page.Pagination.NextCursor)
	}
	t.Fatalf("GET /v1/countries: no country %d", id)
	return nil
}

func TestExpandedObjectEqualsDirectFetch(t *testing.T) {
	t.Parallel()
	w := expNewWorld(t)
	// Names that need escaping, so that any difference between two encoders shows.
	orgName := "Ünïcødé \"quoted\" \\ <b>&amp; \u2028 tab\t end " + randomHex(3)
	body, _ := json.Marshal(map[string]string{"name": orgName})
	org := expObj(t, "POST /v1/organizations", call(t, "POST", "/v1/organizations", w.key, string(body)), http.StatusCreated)
	orgID := string(org["id"])
	user := sqlID(t, `INSERT INTO users (company_id, name, surname, email) VALUES ($1, $2, NULL, 'zoe@example.com') RETURNING id`,
		w.id, "Zoë \"Z\" <zz>")

	contactBody := fmt.Sprintf(`{"name":"Eq","organizationId":%s,"countryId":724,"stageId":%d,"assignedToId":%d}`, orgID, w.cstages[2], user)
	dealBody := fmt.Sprintf(`{"title":"Eq","organizationId":%s,"stageId":%d}`, orgID, w.bstages[3])
	spain := expFindCountry(t, w.key, 724)
	direct := func(kind, id string) []byte {
		switch kind {
		case "country":
			if id != "724" {
				t.Fatalf("country %s; want 724", id)
			}
			return spain
		case "user":
			return expRefObject(t, "/v1/users/"+id, w.key)
		case "organization":
			return expRefObject(t, "/v1/organizations/"+id, w.key)
		}
		return expRefObject(t, "/v1/stages/"+id, w.key)
	}

	for _, res := range []struct {
		path, body string
		specs      []expSpec
	}{
		{"/v1/contacts", contactBody, expContactSpecs},
		{"/v1/business", dealBody, expBusinessSpecs},
	} {
		q := "?" + expQuery(expNames(res.specs)...)
		created := expBody(t, "POST "+res.path+q, call(t, "POST", res.path+q, w.key, res.body), http.StatusCreated)
		id := expID(t, expMap(t, created))
		got := map[string][]byte{"POST " + res.path + q: created}
		path := res.path + "/" + id + q
		got["GET "+path] = expBody(t, "GET "+path, call(t, "GET", path, w.key, ""), http.StatusOK)
		got["PATCH "+path] = expBody(t, "PATCH "+path, call(t, "PATCH", path, w.key, `{}`), http.StatusOK)
		path = res.path + q
		for i, raw := range expPage(t, "GET "+path, call(t, "GET", path, w.key, "")).Data {
			got[fmt.Sprintf("GET %s data[%d]", path, i)] = raw
		}
		for what, obj := range got {
			m := expMap(t, obj)
			for _, s := range res.specs {
				t.Run(what+" "+s.name, func(t *testing.T) {
					want := direct(s.kind, string(m[s.idField]))
					if diff := cmp.Diff(string(want), string(m[s.name])); diff != "" {
						t.Errorf("%s: %s differs from the object fetched directly (-direct +expanded):\n%s", what, s.name, diff)
					}
				})
			}
		}
	}
}

// TestRetrieveExpandsAsListDoes: a retrieve joins its expansions into its one statement, a list page
// loads them with a query per kind. For every set of expansions, each object retrieved must be
// byte for byte the one in the list: with its references set, null, or pointing at objects whose
// fields are null.
func TestRetrieveExpandsAsListDoes(t *testing.T) {
	t.Parallel()
	w := expNewWorld(t)
	user := sqlID(t, `INSERT INTO users (company_id, name, surname, email) VALUES ($1, 'Solo', NULL, NULL) RETURNING id`, w.id)
	org := expID(t, expObj(t, "POST /v1/organizations", call(t, "POST", "/v1/organizations", w.key, `{"name":"Org \"x\""}`), http.StatusCreated))
	for _, body := range []string{`{"name":"Bare"}`, w.contactBody(0), w.contactBody(1),
		fmt.Sprintf(`{"name":"Mixed","organizationId":%s,"countryId":250,"assignedToId":%d}`, org, user)} {
		expObj(t, "POST /v1/contacts", call(t, "POST", "/v1/contacts", w.key, body), http.StatusCreated)
	}
	for _, body := range []string{`{"title":"Bare"}`, w.businessBody(0), fmt.Sprintf(`{"title":"Org","organizationId":%s}`, org)} {
		expObj(t, "POST /v1/business", call(t, "POST", "/v1/business", w.key, body), http.StatusCreated)
	}
	for _, res := range []struct {
		path  string
		specs []expSpec
	}{{"/v1/contacts", expContactSpecs}, {"/v1/business", expBusinessSpecs}} {
		names := expNames(res.specs)
		for set := range 1 << len(names) {
			var subset []string
			for i, n := range names {
				if set&(1<<i) != 0 {
					subset = append(subset, n)
				}
			}
			q := expQuery(subset...)
			list := res.path + "?limit=100&" + q
			page := expPage(t, "GET "+list, call(t, "GET", list, w.key, ""))
			if len(page.Data) < 3 {
				t.Fatalf("GET %s: %d objects; want at least 3", list, len(page.Data))
			}
			for _, want := range page.Data {
				path := res.path + "/" + expID(t, expMap(t, want)) + "?" + q
				got := bytes.TrimSpace(expBody(t, "GET "+path, call(t, "GET", path, w.key, ""), http.StatusOK))
				if diff := cmp.Diff(string(want), string(got)); diff != "" {
					t.Errorf("GET %s differs from the object in GET %s (-list +retrieve):\n%s", path, list, diff)
				}
			}
		}
	}
}

// expCallAt sends a GET with an API key to the server at base.
func expCallAt(t *testing.T, base, path, key string) response {
	t.Helper()
	req, err := http.NewRequest("GET", base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func TestQueryCountOfExpansionIsFixed(t *testing.T) {
	t.Parallel()
	counter := &queryCounter{}
	_, base := newTestServer(t, 4, counter)

	// 100 contacts and 100 business records, each pointing at one of several organizations, users,
	// stages and countries.
	c := newTestCompany(t)
	users := []int64{c.userID}
	for i := range 3 {
		users = append(users, sqlID(t, `INSERT INTO users (company_id, name, surname) VALUES ($1, $2, 'Gil') RETURNING id`, c.id, fmt.Sprintf("User %d", i)))
	}
	var orgs []int64
	for i := range 5 {
		orgs = append(orgs, sqlID(t, `INSERT INTO organizations (company_id, name) VALUES ($1, $2) RETURNING id`, c.id, fmt.Sprintf("Org %d", i)))
	}
	cstages := expQueryIDs(t, `SELECT id FROM stages WHERE company_id = $1 AND board_id IS NULL ORDER BY id`, c.id)
	board := sqlID(t, `SELECT id FROM boards WHERE company_id = $1 AND is_default`, c.id)
	bstages := expQueryIDs(t, `SELECT id FROM stages WHERE company_id = $1 AND board_id = $2 ORDER BY id`, c.id, board)
	countries := []int64{724, 250, 276, 380, 620}
	ctx := context.Background()
	_, err := testEnv.st.db.ExecContext(ctx, `INSERT INTO contacts (company_id, name, organization_id, country_id, stage_id,
		assigned_to_id, user_creator_id)
		SELECT $1, 'Contact ' || i, ($2::bigint[])[1 + i % 5], ($3::bigint[])[1 + i % 5], ($4::bigint[])[1 + i % 3],
			($5::bigint[])[1 + i % 4], ($5::bigint[])[1 + (i + 1) % 4]
		FROM generate_series(1, 100) AS i`, c.id, orgs, countries, cstages, users)
	if err != nil {
		t.Fatalf("insert contacts: %v", err)
	}
	_, err = testEnv.st.db.ExecContext(ctx, `INSERT INTO business (company_id, title, status_id, organization_id, currency_id,
		user_owner_id, user_creator_id, board_id, stage_id, position)
		SELECT $1, 'Deal ' || i, 1, ($2::bigint[])[1 + i % 5], 978, ($3::bigint[])[1 + i % 4], ($3::bigint[])[1 + (i + 1) % 4],
			$4, ($5::bigint[])[1 + i % 5], i
		FROM generate_series(1, 100) AS i`, c.id, orgs, users, board, bstages)
	if err != nil {
		t.Fatalf("insert business: %v", err)
	}
	firstContact := sqlID(t, `SELECT min(id) FROM contacts WHERE company_id = $1`, c.id)
	firstDeal := sqlID(t, `SELECT min(id) FROM business WHERE company_id = $1`, c.id)

	// queries returns how many queries GET path costs, with the key already in the cache; every
	// object answered must have every expansion filled in.
	queries := func(t *testing.T, path string, specs []expSpec, wantLen int) int64 {
		t.Helper()
		if r := expCallAt(t, base, "/v1/statuses", c.key); r.status != http.StatusOK {
			t.Fatalf("warm-up GET /v1/statuses = %d; want 200", r.status)
		}
		counter.n.Store(0)
		r := expCallAt(t, base, path, c.key)
		n := counter.n.Load()
		body := expBody(t, "GET "+path, r, http.StatusOK)
		objs := []json.RawMessage{body}
		if wantLen > 0 {
			objs = expPage(t, "GET "+path, r).Data
		}
		if len(objs) != max(wantLen, 1) {
			t.Fatalf("GET %s: %d objects; want %d", path, len(objs), max(wantLen, 1))
		}
		for i, obj := range objs {
			m := expMap(t, obj)
			for _, s := range specs {
				if v := m[s.name]; len(v) == 0 || v[0] != '{' {
					t.Fatalf("GET %s: object %d: %s = %s; want an object", path, i, s.name, v)
				}
			}
		}
		if n == 0 {
			t.Fatalf("GET %s ran no query; the tracer does not see them", path)
		}
		return n
	}

	for _, res := range []struct {
		path  string
		first int64
		specs []expSpec
	}{
		{"/v1/contacts", firstContact, expContactSpecs},
		{"/v1/business", firstDeal, expBusinessSpecs},
	} {
		t.Run(res.path, func(t *testing.T) {
			q := expQuery(expNames(res.specs)...)
			one := queries(t, res.path+"?limit=1&"+q, res.specs, 1)
			hundred := queries(t, res.path+"?limit=100&"+q, res.specs, 100)
			t.Logf("GET %s: %d queries for 1 object, %d for 100", res.path, one, hundred)
			if one != hundred {
				t.Errorf("GET %s with %d expansions: %d queries for 1 object, %d for 100; want the same", res.path, len(res.specs), one, hundred)
			}
			if hundred > 6 {
				t.Errorf("GET %s?limit=100&%s ran %d queries; want at most 6", res.path, q, hundred)
			}
			none := queries(t, res.path+"?limit=100", nil, 100)
			if want := none + int64(len(res.specs)); hundred > want {
				t.Errorf("GET %s: %d queries with expansions, %d without; want at most one more per expansion", res.path, hundred, none)
			}
			plain := fmt.Sprintf("%s/%d", res.path, res.first)
			path := plain + "?" + q
			if n, without := queries(t, path, res.specs, 0), queries(t, plain, nil, 0); n != without {
				t.Errorf("GET %s ran %d queries, %d without expand[]; want the same: a retrieve joins what it expands", path, n, without)
			}
		})
	}
}

func TestExpandNeverCrossesCompanies(t *testing.T) {
	t.Parallel()
	a, b := expNewWorld(t), expNewWorld(t)
	secret := "A-secret-" + randomHex(8)
	db := testEnv.st.db
	ctx := context.Background()
	for _, q := range []string{
		`UPDATE users SET name = $2 || '-user-' || id, surname = $2 || '-surname' WHERE company_id = $1`,
		`UPDATE organizations SET name = $2 || '-org-' || id WHERE company_id = $1`,
		`UPDATE stages SET name = $2 || '-stage-' || id WHERE company_id = $1`,
		`UPDATE boards SET name = $2 || '-board-' || id WHERE company_id = $1`,
	} {
		if _, err := db.ExecContext(ctx, q, a.id, secret); err != nil {
			t.Fatal(err)
		}
	}
	// A's own objects point at A's secrets.
	expBody(t, "A: POST /v1/contacts", call(t, "POST", "/v1/contacts", a.key, a.contactBody(0)), http.StatusCreated)
	expBody(t, "A: POST /v1/business", call(t, "POST", "/v1/business", a.key, a.businessBody(0)), http.StatusCreated)

	bContact := expObj(t, "B: POST /v1/contacts", call(t, "POST", "/v1/contacts", b.key, b.contactBody(0)), http.StatusCreated)
	bDeal := expObj(t, "B: POST /v1/business", call(t, "POST", "/v1/business", b.key, b.businessBody(0)), http.StatusCreated)
	bContactPath := "/v1/contacts/" + expID(t, bContact)
	bDealPath := "/v1/business/" + expID(t, bDeal)

	t.Run("B cannot point at A's objects", func(t *testing.T) {
		tests := []struct {
			path, create, patch, field string
		}{
			{"/v1/contacts", fmt.Sprintf(`{"name":"x","organizationId":%d}`, a.orgs[0]), fmt.Sprintf(`{"organizationId":%d}`, a.orgs[0]), "organizationId"},
			{"/v1/contacts", fmt.Sprintf(`{"name":"x","assignedToId":%d}`, a.user2), fmt.Sprintf(`{"assignedToId":%d}`, a.user2), "assignedToId"},
			{"/v1/contacts", fmt.Sprintf(`{"name":"x","stageId":%d}`, a.cstages[0]), fmt.Sprintf(`{"stageId":%d}`, a.cstages[0]), "stageId"},
			{"/v1/business", fmt.Sprintf(`{"title":"x","organizationId":%d}`, a.orgs[0]), fmt.Sprintf(`{"organizationId":%d}`, a.orgs[0]), "organizationId"},
			{"/v1/business", fmt.Sprintf(`{"title":"x","userOwnerId":%d}`, a.userID), fmt.Sprintf(`{"userOwnerId":%d}`, a.userID), "userOwnerId"},
			{"/v1/business", fmt.Sprintf(`{"title":"x","stageId":%d}`, a.bstages[0]), fmt.Sprintf(`{"stageId":%d}`, a.bstages[0]), "stageId"},
			{"/v1/business", fmt.Sprintf(`{"title":"x","boardId":%d,"stageId":%d}`, a.board, a.bstages[0]),
				fmt.Sprintf(`{"boardId":%d,"stageId":%d}`, a.board, a.bstages[0]), "boardId"},
		}
		for _, tt := range tests {
			objPath := bContactPath
			table := "contacts"
			if tt.path == "/v1/business" {
				objPath, table = bDealPath, "business"
			}
			n := expCount(t, table, b.id)
			before := expBody(t, "GET "+objPath, call(t, "GET", objPath, b.key, ""), http.StatusOK)
			q := "?" + expQuery("organization", "userCreator")
			for _, req := range []struct{ method, path, body string }{{"POST", tt.path + q, tt.create}, {"PATCH", objPath + q, tt.patch}} {
				p := wantProblem(t, call(t, req.method, req.path, b.key, req.body), http.StatusUnprocessableEntity, "validation_failed")
				if !slices.ContainsFunc(p.Errors, func(e fieldProbl) bool { return e.Field == tt.field }) {
					t.Errorf("%s %s %s: errors %+v; want one for %s", req.method, req.path, req.body, p.Errors, tt.field)
				}
			}
			if got := expCount(t, table, b.id); got != n {
				t.Errorf("B has %d %s; want %d", got, table, n)
			}
			after := expBody(t, "GET "+objPath, call(t, "GET", objPath, b.key, ""), http.StatusOK)
			if !bytes.Equal(before, after) {
				t.Errorf("GET %s changed after a refused PATCH:\n%s\n%s", objPath, before, after)
			}
		}
	})

	t.Run("B's answers never contain A's objects", func(t *testing.T) {
		cq := "?" + expQuery(expNames(expContactSpecs)...)
		bq := "?" + expQuery(expNames(expBusinessSpecs)...)
		for _, req := range []struct{ method, path, body string }{
			{"GET", "/v1/contacts" + cq + "&limit=100", ""},
			{"GET", bContactPath + cq, ""},
			{"POST", "/v1/contacts" + cq, b.contactBody(1)},
			{"PATCH", bContactPath + cq, b.contactBody(1)},
			{"GET", "/v1/business" + bq + "&limit=100", ""},
			{"GET", bDealPath + bq, ""},
			{"POST", "/v1/business" + bq, b.businessBody(1)},
			{"PATCH", bDealPath + bq, b.businessBody(1)},
			{"GET", "/v1/users?limit=100", ""},
			{"GET", "/v1/organizations?limit=100", ""},
			{"GET", "/v1/stages?limit=100", ""},
			{"GET", "/v1/boards?limit=100", ""},
		} {
			r := call(t, req.method, req.path, b.key, req.body)
			if r.status != http.StatusOK && r.status != http.StatusCreated {
				t.Errorf("B: %s %s = %d; want success (body %s)", req.method, req.path, r.status, r.body)
			}
			if bytes.Contains(r.body, []byte(secret)) {
				t.Errorf("B: %s %s answered A's objects: %s", req.method, req.path, r.body)
			}
		}
	})
}

func TestReferenceListsHaveDataAndPagination(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	expBody(t, "POST /v1/organizations", call(t, "POST", "/v1/organizations", c.key, `{"name":"Acme"}`), http.StatusCreated)
	tests := []struct {
		path string
		kind string
		n    int // objects on the first page of 25
		more bool
	}{
		{"/v1/users", "user", 1, false},
		{"/v1/organizations", "organization", 1, false},
		{"/v1/stages", "stage", len(defaultContactStages) + len(defaultBoardStages), false},
		{"/v1/boards", "board", 1, false},
		{"/v1/statuses", "status", 3, false},
		{"/v1/currencies", "currency", 25, true},
		{"/v1/countries", "country", 25, true},
	}
	for _, tt := range tests {
		t.Run("GET "+tt.path, func(t *testing.T) {
			r := call(t, "GET", tt.path, c.key, "")
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("GET %s: Content-Type %q; want application/json", tt.path, ct)
			}
			page := expPage(t, "GET "+tt.path, r)
			if len(page.Data) != tt.n || page.Pagination.Limit != 25 || page.Pagination.HasMore != tt.more ||
				(page.Pagination.NextCursor != nil) != tt.more {
				t.Errorf("GET %s: %d objects, pagination %+v; want %d objects, limit 25, hasMore %v, a nextCursor only with more",
					tt.path, len(page.Data), page.Pagination, tt.n, tt.more)
			}
			var last int64
			for i, raw := range page.Data {
				if diff := cmp.Diff(expFields[tt.kind], objectKeys(t, raw)); diff != "" {
					t.Errorf("GET %s: data[%d] keys (-want +got):\n%s", tt.path, i, diff)
				}
				id, err := strconv.ParseInt(string(expMap(t, raw)["id"]), 10, 64)
				if err != nil || id <= last {
					t.Errorf("GET %s: data[%d].id = %s; want numbers in ascending order", tt.path, i, expMap(t, raw)["id"])
				}
				last = id
			}
		})
	}
}

func TestReferenceRetrieveAndTenancy(t *testing.T) {
	t.Parallel()
	a, b := expNewWorld(t), expNewWorld(t)
	tests := []struct {
		path string
		aID  int64 // an object of A's
		kind string
	}{
		{"/v1/users", a.user2, "user"},
		{"/v1/organizations", a.orgs[1], "organization"},
		{"/v1/stages", a.cstages[0], "stage"},
		{"/v1/stages", a.bstages[0], "stage"},
		{"/v1/boards", a.board, "board"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.path, tt.aID), func(t *testing.T) {
			path := fmt.Sprintf("%s/%d", tt.path, tt.aID)
			got := expRefObject(t, path, a.key)
			if diff := cmp.Diff(expFields[tt.kind], objectKeys(t, got)); diff != "" {
				t.Errorf("GET %s keys (-want +got):\n%s", path, diff)
			}
			if id := string(expMap(t, got)["id"]); id != strconv.FormatInt(tt.aID, 10) {
				t.Errorf("GET %s: id %s; want %d", path, id, tt.aID)
			}
			// The same bytes as the object in A's list.
			list := expPage(t, "GET "+tt.path, call(t, "GET", tt.path+"?limit=100", a.key, ""))
			found := false
			for _, raw := range list.Data {
				if string(expMap(t, raw)["id"]) == strconv.FormatInt(tt.aID, 10) {
					found = true
					if diff := cmp.Diff(string(raw), string(got)); diff != "" {
						t.Errorf("GET %s differs from its element in GET %s (-list +retrieve):\n%s", path, tt.path, diff)
					}
				}
			}
			if !found {
				t.Errorf("GET %s?limit=100 of A does not list %d", tt.path, tt.aID)
			}

			// B sees neither the object nor it in its list, exactly as for an id that does not exist.
			other := wantProblem(t, call(t, "GET", path, b.key, ""), http.StatusNotFound, "not_found")
			missing := wantProblem(t, call(t, "GET", tt.path+"/999999999999", a.key, ""), http.StatusNotFound, "not_found")
			other.RequestID, missing.RequestID = "", ""
			if diff := cmp.Diff(missing, other); diff != "" {
				t.Errorf("GET %s as B differs from an unknown id (-unknown +other company):\n%s", path, diff)
			}
			for _, raw := range expPage(t, "GET "+tt.path, call(t, "GET", tt.path+"?limit=100", b.key, "")).Data {
				if string(expMap(t, raw)["id"]) == strconv.FormatInt(tt.aID, 10) {
					t.Errorf("B's GET %s lists A's %d", tt.path, tt.aID)
				}
			}
			for _, bad := range []string{"abc", "0", "-1", "99999999999999999999"} {
				wantProblem(t, call(t, "GET", tt.path+"/"+bad, a.key, ""), http.StatusBadRequest, "invalid_id")
			}
		})
	}
}

func TestReferenceCreateOrganization(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	r := call(t, "POST", "/v1/organizations", c.key, `{"name":"Acme"}`)
	org := expObj(t, "POST /v1/organizations", r, http.StatusCreated)
	if diff := cmp.Diff(expFields["organization"], objectKeys(t, r.body)); diff != "" {
		t.Errorf("POST /v1/organizations keys (-want +got):\n%s", diff)
	}
	if name := expStr(t, org["name"]); name != "Acme" {
		t.Errorf("name = %q; want Acme", name)
	}
	loc := r.header.Get("Location")
	if want := "/v1/organizations/" + string(org["id"]); loc != want {
		t.Errorf("Location = %q; want %q", loc, want)
	}
	if got := expBody(t, "GET "+loc, call(t, "GET", loc, c.key, ""), http.StatusOK); !bytes.Equal(got, r.body) {
		t.Errorf("GET %s = %s; want the POST answer %s", loc, got, r.body)
	}
	long := strings.Repeat("é", 255)
	if r := call(t, "POST", "/v1/organizations", c.key, `{"name":"`+long+`"}`); r.status != http.StatusCreated {
		t.Errorf("POST a 255-character name = %d; want 201 (body %s)", r.status, r.body)
	}

	n := expCount(t, "organizations", c.id)
	tests := []struct {
		name, body, field string
	}{
		{"missing name", `{}`, "name"},
		{"empty name", `{"name":""}`, "name"},
		{"blank name", `{"name":"   "}`, "name"},
		{"null name", `{"name":null}`, "name"},
		{"256 characters", `{"name":"` + strings.Repeat("x", 256) + `"}`, "name"},
		{"a number", `{"name":5}`, "name"},
		{"an unknown field", `{"name":"x","website":"x.com"}`, "website"},
		{"a read-only field", `{"name":"x","id":5}`, "id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := wantProblem(t, call(t, "POST", "/v1/organizations", c.key, tt.body), http.StatusUnprocessableEntity, "validation_failed")
			if !slices.ContainsFunc(p.Errors, func(e fieldProbl) bool { return e.Field == tt.field }) {
				t.Errorf("POST %s: errors %+v; want one for %s", tt.body, p.Errors, tt.field)
			}
		})
	}
	t.Run("without a JSON content type", func(t *testing.T) {
		for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded"} {
			r := call(t, "POST", "/v1/organizations", c.key, `{"name":"x"}`, "Content-Type", ct)
			wantProblem(t, r, http.StatusUnsupportedMediaType, "unsupported_media_type")
		}
	})
	t.Run("malformed JSON", func(t *testing.T) {
		wantProblem(t, call(t, "POST", "/v1/organizations", c.key, `{"name":`), http.StatusBadRequest, "invalid_json")
	})
	if got := expCount(t, "organizations", c.id); got != n {
		t.Errorf("after the refused requests the company has %d organizations; want %d", got, n)
	}
}

func TestReferenceStagesFilterByBoard(t *testing.T) {
	t.Parallel()
	w, other := expNewWorld(t), expNewWorld(t)
	type stageJSON struct {
		ID       int64  `json:"id"`
		Name     string `json:"name"`
		BoardID  *int64 `json:"boardId"`
		Position int64  `json:"position"`
	}
	stagesOf := func(t *testing.T, path string) []stageJSON {
		t.Helper()
		var out []stageJSON
		for _, raw := range expPage(t, "GET "+path, call(t, "GET", path, w.key, "")).Data {
			if !bytes.Contains(raw, []byte(`"boardId":`)) {
				t.Errorf("GET %s: %s has no boardId", path, raw)
			}
			var s stageJSON
			if err := json.Unmarshal(raw, &s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		return out
	}

	path := fmt.Sprintf("/v1/stages?boardId=%d&limit=100", w.board)
	var names []string
	for _, s := range stagesOf(t, path) {
		names = append(names, s.Name)
		if s.BoardID == nil || *s.BoardID != w.board {
			t.Errorf("GET %s: stage %d has boardId %v; want %d", path, s.ID, s.BoardID, w.board)
		}
	}
	if diff := cmp.Diff(defaultBoardStages, names); diff != "" {
		t.Errorf("GET %s names (-want +got):\n%s", path, diff)
	}

	var contactStages []string
	all := stagesOf(t, "/v1/stages?limit=100")
	for _, s := range all {
		if s.BoardID == nil {
			contactStages = append(contactStages, s.Name)
		}
	}
	if diff := cmp.Diff(defaultContactStages, contactStages); diff != "" || len(all) != len(defaultContactStages)+len(defaultBoardStages) {
		t.Errorf("GET /v1/stages: %d stages; contact stages (boardId null) (-want +got):\n%s", len(all), diff)
	}
	stagePath := fmt.Sprintf("/v1/stages/%d", w.cstages[0])
	if m := expMap(t, expRefObject(t, stagePath, w.key)); string(m["boardId"]) != "null" {
		t.Errorf("GET %s: boardId %s; want null for a contact stage", stagePath, m["boardId"])
	}

	// Another company's board filters to nothing.
	path = fmt.Sprintf("/v1/stages?boardId=%d", other.board)
	if got := stagesOf(t, path); len(got) != 0 {
		t.Errorf("GET %s: %v; want no stages (the board is another company's)", path, got)
	}
	for _, bad := range []string{"abc", "0", "-1", "", "1.5", "1e3"} {
		path := "/v1/stages?boardId=" + url.QueryEscape(bad)
		t.Run("GET "+path, func(t *testing.T) {
			wantProblem(t, call(t, "GET", path, w.key, ""), http.StatusBadRequest, "invalid_parameter")
		})
	}
	path = fmt.Sprintf("/v1/stages?boardId=%d&boardId=%d", w.board, w.board)
	wantProblem(t, call(t, "GET", path, w.key, ""), http.StatusBadRequest, "invalid_parameter")
}

func TestReferenceStagesBoardIDBeyond32Bits(t *testing.T) {
	t.Parallel()
	// A board id is a bigint: one that does not exist, however large, filters to nothing.
	c := newTestCompany(t)
	path := "/v1/stages?boardId=9999999999"
	page := expPage(t, "GET "+path, call(t, "GET", path, c.key, ""))
	if len(page.Data) != 0 {
		t.Errorf("GET %s: %d stages; want none", path, len(page.Data))
	}
}

func TestReferenceListsSurviveCursorsBeyond32BitIDs(t *testing.T) {
	t.Parallel()
	// A cursor past every id (well-formed, as the server writes them) is either an empty last page or
	// a 400 for a tampered cursor; never a 500.
	c := newTestCompany(t)
	cursor := base64.RawURLEncoding.EncodeToString([]byte("id:9999999999"))
	for _, p := range []string{"/v1/countries", "/v1/currencies", "/v1/statuses", "/v1/users", "/v1/organizations", "/v1/stages", "/v1/boards"} {
		path := p + "?cursor=" + cursor
		r := call(t, "GET", path, c.key, "")
		switch r.status {
		case http.StatusOK:
			if page := expPage(t, "GET "+path, r); len(page.Data) != 0 || page.Pagination.HasMore {
				t.Errorf("GET %s: %d objects, hasMore %v; want an empty last page", path, len(page.Data), page.Pagination.HasMore)
			}
		case http.StatusBadRequest:
			wantProblem(t, r, http.StatusBadRequest, "invalid_parameter")
		default:
			t.Errorf("GET %s = %d; want 200 (empty page) or 400 (body %s)", path, r.status, r.body)
		}
	}
}

// expWalk returns every object of a list, walking its pages of limit=100, and how many pages it took.
func expWalk(t *testing.T, path, key string) ([]map[string]json.RawMessage, int) {
	t.Helper()
	var out []map[string]json.RawMessage
	next := path + "?limit=100"
	for pages := 1; pages <= 100; pages++ {
		page := expPage(t, "GET "+next, call(t, "GET", next, key, ""))
		for _, raw := range page.Data {
			out = append(out, expMap(t, raw))
		}
		if page.Pagination.NextCursor == nil {
			if page.Pagination.HasMore {
				t.Errorf("GET %s: hasMore without a nextCursor", next)
			}
			return out, pages
		}
		next = path + "?limit=100&cursor=" + url.QueryEscape(*page.Pagination.NextCursor)
	}
	t.Fatalf("GET %s: more than 100 pages", path)
	return nil, 0
}

func TestReferenceCountriesCurrenciesStatuses(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)

	t.Run("countries", func(t *testing.T) {
		all, pages := expWalk(t, "/v1/countries", c.key)
		seen := make(map[string]bool)
		for _, m := range all {
			if seen[string(m["id"])] {
				t.Errorf("country %s listed twice", m["id"])
			}
			seen[string(m["id"])] = true
		}
		if len(all) != 249 || len(seen) != 249 || pages != 3 {
			t.Errorf("walking /v1/countries: %d countries (%d distinct) in %d pages; want 249 in 3", len(all), len(seen), pages)
		}
		var spain map[string]json.RawMessage
		for _, m := range all {
			if string(m["id"]) == "724" {
				spain = m
			}
		}
		if spain == nil {
			t.Fatal("no country 724")
		}
		got := [3]string{expStr(t, spain["code"]), expStr(t, spain["alpha3"]), expStr(t, spain["name"])}
		if want := [3]string{"ES", "ESP", "Spain"}; got != want {
			t.Errorf("country 724 = %v; want %v", got, want)
		}
	})

	t.Run("currencies", func(t *testing.T) {
		all, _ := expWalk(t, "/v1/currencies", c.key)
		var eur map[string]json.RawMessage
		for _, m := range all {
			if expStr(t, m["code"]) == "EUR" {
				eur = m
			}
		}
		if eur == nil {
			t.Fatalf("no EUR among %d currencies", len(all))
		}
		if string(eur["id"]) != "978" || string(eur["minorUnit"]) != "2" || expStr(t, eur["name"]) != "Euro" {
			t.Errorf("EUR = id %s, minorUnit %s, name %s; want 978, 2, Euro", eur["id"], eur["minorUnit"], eur["name"])
		}
		if len(all) < 150 {
			t.Errorf("%d currencies; want the ISO 4217 list", len(all))
		}
	})

	t.Run("statuses", func(t *testing.T) {
		all, _ := expWalk(t, "/v1/statuses", c.key)
		var got []string
		for _, m := range all {
			got = append(got, string(m["id"])+" "+expStr(t, m["code"]))
		}
		if diff := cmp.Diff([]string{"1 open", "2 won", "3 lost"}, got); diff != "" {
			t.Errorf("statuses (-want +got):\n%s", diff)
		}
	})
}
