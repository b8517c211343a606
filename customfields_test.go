package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// defineField POSTs a custom field definition and returns its id.
func defineField(t *testing.T, key, body string) int64 {
	t.Helper()
	o, _ := create(t, key, "/v1/customFields", body)
	return o.id()
}

// customOf returns the custom member of the object at path, as JSON text.
func customOf(t *testing.T, key, path string) string {
	t.Helper()
	o := decode[map[string]json.RawMessage](t, mustGet(t, key, path).body)
	return string(o["custom"])
}

func TestCustomFieldDefinitions(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	id := defineField(t, c.key, `{"object": "contact", "key": "tier", "label": "Tier", "type": "select",
		"options": [{"value": "gold", "label": "Gold"}, {"value": "silver"}]}`)
	path := itemPath("/v1/customFields", id)
	got := decode[obj](t, mustGet(t, c.key, path).body)
	want := obj{"id": json.Number(fmt.Sprint(id)), "object": "contact", "key": "tier", "label": "Tier", "type": "select",
		"options":  []any{map[string]any{"value": "gold", "label": "Gold"}, map[string]any{"value": "silver", "label": "silver"}},
		"required": false, "unique": false, "createdAt": got["createdAt"], "updatedAt": got["updatedAt"]}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GET %s (-want +got):\n%s", path, diff)
	}

	t.Run("a taken key is 409 field_key_taken, on the same object only", func(t *testing.T) {
		wantProblem(t, call(t, "POST", "/v1/customFields", c.key, `{"object": "contact", "key": "tier", "label": "T", "type": "text"}`),
			http.StatusConflict, "field_key_taken")
		defineField(t, c.key, `{"object": "business", "key": "tier", "label": "T", "type": "text"}`)
	})
	t.Run("bad definitions are 422 naming the member", func(t *testing.T) {
		for body, field := range map[string]string{
			`{"object": "contact", "key": "Tier", "label": "T", "type": "text"}`:                                             "key",
			`{"object": "contact", "key": "a123456789012345678901234567890123456789x", "label": "T", "type": "text"}`:        "key",
			`{"object": "deal", "key": "x", "label": "T", "type": "text"}`:                                                   "object",
			`{"object": "contact", "key": "x", "label": "T", "type": "color"}`:                                               "type",
			`{"object": "contact", "key": "x", "label": "T", "type": "select"}`:                                              "options",
			`{"object": "contact", "key": "x", "label": "T", "type": "select", "options": []}`:                               "options",
			`{"object": "contact", "key": "x", "label": "T", "type": "select", "options": [{"value": "A"}]}`:                 "options",
			`{"object": "contact", "key": "x", "label": "T", "type": "select", "options": [{"value": "a"}, {"value": "a"}]}`: "options",
			`{"object": "contact", "key": "x", "label": "T", "type": "text", "options": [{"value": "a"}]}`:                   "options",
			`{"object": "contact", "key": "x", "label": "T", "type": "boolean", "unique": true}`:                             "unique",
			`{"object": "contact", "key": "x", "label": "T"}`:                                                                "type",
		} {
			wantFields(t, call(t, "POST", "/v1/customFields", c.key, body), field)
		}
	})
	t.Run("object, key and type are fixed; label and options change", func(t *testing.T) {
		for _, body := range []string{`{"key": "rank"}`, `{"type": "text"}`, `{"object": "business"}`} {
			wantFields(t, call(t, "PATCH", path, c.key, body), strings.Split(strings.Trim(body, `{}"`), `"`)[0])
		}
		r := wantStatus(t, call(t, "PATCH", path, c.key, `{"label": "Level", "options": [{"value": "gold", "label": "Gold"}, {"value": "silver"}, {"value": "bronze"}]}`), http.StatusOK)
		if o := decode[obj](t, r.body); o["label"] != "Level" || len(o["options"].([]any)) != 3 {
			t.Errorf("PATCH = %s", r.body)
		}
	})
	t.Run("removing an option in use is 409 option_in_use", func(t *testing.T) {
		create(t, c.key, "/v1/contacts", `{"name": "Ana", "custom": {"tier": "silver"}}`)
		wantProblem(t, call(t, "PATCH", path, c.key, `{"options": [{"value": "gold"}]}`), http.StatusConflict, "option_in_use")
		wantStatus(t, call(t, "PATCH", path, c.key, `{"options": [{"value": "gold"}, {"value": "silver"}]}`), http.StatusOK)
	})
	t.Run("required on a field with objects lacking it is 409 field_values_conflict", func(t *testing.T) {
		create(t, c.key, "/v1/contacts", `{"name": "Bo"}`)
		wantProblem(t, call(t, "PATCH", path, c.key, `{"required": true}`), http.StatusConflict, "field_values_conflict")
		wantProblem(t, call(t, "POST", "/v1/customFields", c.key, `{"object": "contact", "key": "must", "label": "M", "type": "text", "required": true}`),
			http.StatusConflict, "field_values_conflict")
	})
	t.Run("unique on repeated values is 409 field_values_conflict", func(t *testing.T) {
		code := defineField(t, c.key, `{"object": "organization", "key": "code", "label": "Code", "type": "text"}`)
		create(t, c.key, "/v1/organizations", `{"name": "A", "custom": {"code": "X1"}}`)
		create(t, c.key, "/v1/organizations", `{"name": "B", "custom": {"code": "x1"}}`)
		wantProblem(t, call(t, "PATCH", itemPath("/v1/customFields", code), c.key, `{"unique": true}`), http.StatusConflict, "field_values_conflict")
	})
	t.Run("another company's field is 404", func(t *testing.T) {
		other := newTestCompany(t)
		wantProblem(t, call(t, "GET", path, other.key, ""), http.StatusNotFound, "not_found")
		wantProblem(t, call(t, "PATCH", path, other.key, `{"label": "x"}`), http.StatusNotFound, "not_found")
		wantProblem(t, call(t, "DELETE", path, other.key, ""), http.StatusNotFound, "not_found")
	})
	t.Run("the list filters by object", func(t *testing.T) {
		for object, n := range map[string]int{"contact": 1, "business": 1, "organization": 1, "deal": 0} {
			if got := listPage[obj](t, c.key, "/v1/customFields?object="+object).Data; len(got) != n {
				t.Errorf("object=%s: %d fields; want %d", object, len(got), n)
			}
		}
	})
	t.Run("scopes customFields:read and write", func(t *testing.T) {
		ro := decode[obj](t, wantStatus(t, call(t, "POST", "/v1/apiKeys", c.key, `{"scopes": ["customFields:read"]}`), http.StatusCreated).body)["key"].(string)
		mustGet(t, ro, path)
		wantProblem(t, call(t, "PATCH", path, ro, `{"label": "x"}`), http.StatusForbidden, "insufficient_scope")
		none := decode[obj](t, wantStatus(t, call(t, "POST", "/v1/apiKeys", c.key, `{"scopes": ["contacts:read"]}`), http.StatusCreated).body)["key"].(string)
		wantProblem(t, call(t, "GET", "/v1/customFields", none, ""), http.StatusForbidden, "insufficient_scope")
	})
	t.Run("delete frees the key and a new field starts empty", func(t *testing.T) {
		wantStatus(t, call(t, "DELETE", path, c.key, ""), http.StatusNoContent)
		wantProblem(t, call(t, "DELETE", path, c.key, ""), http.StatusNotFound, "not_found")
		defineField(t, c.key, `{"object": "contact", "key": "tier", "label": "Tier", "type": "text"}`)
		for _, o := range listPage[obj](t, c.key, "/v1/contacts").Data {
			if got := o["custom"].(map[string]any); got["tier"] != nil {
				t.Errorf("custom = %v; want tier null", got)
			}
		}
	})
}

func TestCustomFieldLimit(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for i := range maxCustomFields {
		if err := testEnv.st.write(t.Context(), func(tx *tx) error {
			_, err := createCustomField(t.Context(), tx, tenant{companyID: c.id, userID: c.userID}, customField{Object: "business", Key: fmt.Sprintf("f%d", i), Label: "F", Type: "boolean"})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	wantProblem(t, call(t, "POST", "/v1/customFields", c.key, `{"object": "business", "key": "one_more", "label": "T", "type": "text"}`),
		http.StatusUnprocessableEntity, "field_limit")
	defineField(t, c.key, `{"object": "contact", "key": "one_more", "label": "T", "type": "text"}`)
}

// TestCustomFieldKeysUnderConcurrentDefinitions: creates and deletes of one company's fields, all at
// once, leave every object rendering exactly the live fields (custom_field_keys, which they rewrite).
func TestCustomFieldKeysUnderConcurrentDefinitions(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	var old []int64
	for i := range 4 {
		old = append(old, defineField(t, c.key, fmt.Sprintf(`{"object": "contact", "key": "old%d", "label": "L", "type": "text"}`, i)))
	}
	contact, _ := create(t, c.key, "/v1/contacts", `{"name": "Ada"}`)
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			defineField(t, c.key, fmt.Sprintf(`{"object": "contact", "key": "new%d", "label": "L", "type": "text"}`, i))
		})
	}
	for _, id := range old[:3] {
		wg.Go(func() {
			wantStatus(t, call(t, "DELETE", itemPath("/v1/customFields", id), c.key, ""), http.StatusNoContent)
		})
	}
	wg.Wait()
	got := decode[map[string]any](t, []byte(customOf(t, c.key, itemPath("/v1/contacts", contact.id()))))
	want := map[string]any{"old3": nil}
	for i := range 6 {
		want[fmt.Sprintf("new%d", i)] = nil
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("custom of a contact after concurrent field creates and deletes (-want +got):\n%s", diff)
	}
}

// TestCustomFieldLockWaitsOnCitus: on Citus, field deletes (distributed transactions: each has
// updated its field on a worker) and a create (which has sent nothing to a worker) wait in turn for
// the company's field lock, held here, while Citus's deadlock detector runs at least twice (every
// 2 s). Taken on the coordinator, the lock's queue made it see a cycle that is not there (citus
// issue 1803) and cancel a delete: 500.
func TestCustomFieldLockWaitsOnCitus(t *testing.T) {
	needCitus(t)
	c := newTestCompany(t)
	first, second := defineField(t, c.key, `{"object": "contact", "key": "a", "label": "A", "type": "text"}`),
		defineField(t, c.key, `{"object": "contact", "key": "b", "label": "B", "type": "text"}`)
	holder, err := testEnv.st.db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.Exec(lockCustomFields, c.id); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, w := range []struct {
		method, path, body string
		status             int
	}{
		{"DELETE", itemPath("/v1/customFields", first), "", http.StatusNoContent},
		{"POST", "/v1/customFields", `{"object": "contact", "key": "c", "label": "C", "type": "text"}`, http.StatusCreated},
		{"DELETE", itemPath("/v1/customFields", second), "", http.StatusNoContent},
	} {
		wg.Go(func() { wantStatus(t, call(t, w.method, w.path, c.key, w.body), w.status) })
		time.Sleep(500 * time.Millisecond) // it waits for the lock, behind the one before it
	}
	time.Sleep(4500 * time.Millisecond)
	if err := holder.Commit(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got := customOf(t, c.key, createPath(t, c.key, "/v1/contacts", `{"name": "Ada"}`)); got != `{"c":null}` {
		t.Errorf("custom = %s; want only the new field c", got)
	}
}

func TestDeletedFieldValuesArePurged(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	field := defineField(t, c.key, `{"object": "contact", "key": "gone", "label": "G", "type": "multiSelect", "options": [{"value": "a"}, {"value": "b"}]}`)
	for range 3 {
		create(t, c.key, "/v1/contacts", `{"name": "V", "custom": {"gone": ["a", "b"]}}`)
	}
	wantStatus(t, call(t, "DELETE", itemPath("/v1/customFields", field), c.key, ""), http.StatusNoContent)
	// The server's purge, run here until it is done (it takes deleted fields of every company in turn).
	for i := 0; sqlID(t, `SELECT count(*) FROM custom_fields WHERE company_id = $1 AND id = $2`, c.id, field) > 0; i++ {
		if _, err := testEnv.st.purgeCustomValues(context.Background()); err != nil || i == 100 {
			t.Fatalf("purge %d: %v; the deleted field is still there", i, err)
		}
	}
	if n := sqlID(t, `SELECT count(*) FROM custom_values WHERE company_id = $1 AND field_id = $2`, c.id, field); n != 0 {
		t.Errorf("%d values of the purged field are left", n)
	}
}

// purgeStatement tells the statements of the server's purge of deleted fields' values
// (purgeCustomValues), which counts of a request's statements leave out: it runs whenever a test
// left such values, once a second while it finds more.
func purgeStatement(sql string) bool {
	return strings.HasPrefix(sql, "SELECT company_id, id FROM custom_fields WHERE deleted_at IS NOT NULL") ||
		strings.HasPrefix(sql, "WITH d AS (DELETE FROM custom_values WHERE company_id = $1 AND field_id = $2 AND object_id IN") ||
		sql == "DELETE FROM custom_fields WHERE company_id = $1 AND id = $2"
}

// contactFields defines one field of each type on contacts and returns the user id a user field
// may take.
func contactFields(t *testing.T, key string) {
	t.Helper()
	for _, def := range []string{
		`{"key": "note", "type": "text"}`, `{"key": "arr", "type": "number"}`, `{"key": "fee", "type": "money"}`,
		`{"key": "born", "type": "date"}`, `{"key": "seen", "type": "datetime"}`, `{"key": "vip", "type": "boolean"}`,
		`{"key": "tier", "type": "select", "options": [{"value": "gold"}, {"value": "silver"}]}`,
		`{"key": "tags", "type": "multiSelect", "options": [{"value": "a"}, {"value": "b"}, {"value": "c"}]}`,
		`{"key": "site", "type": "url"}`, `{"key": "mail", "type": "email", "unique": true}`, `{"key": "owner", "type": "user"}`,
	} {
		defineField(t, key, `{"object": "contact", "label": "L", `+def[1:])
	}
}

func TestCustomValues(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	contactFields(t, c.key)
	o, r := create(t, c.key, "/v1/contacts", `{"name": "Ana"}`)
	path := itemPath("/v1/contacts", o.id())
	const empty = `{"note":null,"arr":null,"fee":null,"born":null,"seen":null,"vip":null,"tier":null,"tags":null,"site":null,"mail":null,"owner":null}`
	if got := string(decode[map[string]json.RawMessage](t, r.body)["custom"]); got != empty {
		t.Errorf("POST custom = %s; want %s", got, empty)
	}
	if got := customOf(t, c.key, path); got != empty {
		t.Errorf("GET custom = %s; want %s", got, empty)
	}

	set := fmt.Sprintf(`{"custom": {"note": "<b>", "arr": 1200.50, "fee": 1e2, "born": "2026-12-01", "seen": "2026-11-21T10:30:00.1234+01:00",
		"vip": true, "tier": "gold", "tags": ["b", "a"], "site": "https://x.example/", "mail": "Ana@X.example", "owner": %d}}`, c.userID)
	r = wantStatus(t, call(t, "PATCH", path, c.key, set), http.StatusOK)
	want := fmt.Sprintf(`{"note":"\u003cb\u003e","arr":1200.50,"fee":100,"born":"2026-12-01","seen":"2026-11-21T09:30:00.123Z","vip":true,"tier":"gold","tags":["b","a"],"site":"https://x.example/","mail":"Ana@X.example","owner":%d}`, c.userID)
	if got := string(decode[map[string]json.RawMessage](t, r.body)["custom"]); got != want {
		t.Errorf("PATCH custom =\n%s; want\n%s", got, want)
	}
	if got := customOf(t, c.key, path); got != want {
		t.Errorf("GET custom =\n%s; want\n%s", got, want)
	}
	if got := listPage[map[string]json.RawMessage](t, c.key, "/v1/contacts").Data[0]["custom"]; string(got) != want {
		t.Errorf("list custom = %s", got)
	}

	t.Run("a merge patch: absent unchanged, null clears, {} changes nothing", func(t *testing.T) {
		before := mustGet(t, c.key, path)
		wantStatus(t, call(t, "PATCH", path, c.key, `{"custom": {}}`), http.StatusOK)
		wantStatus(t, call(t, "PATCH", path, c.key, `{"custom": {"tier": "gold"}}`), http.StatusOK)
		wantUnchanged(t, c.key, path, before)
		wantStatus(t, call(t, "PATCH", path, c.key, `{"custom": {"note": null}}`), http.StatusOK)
		if got := customOf(t, c.key, path); got != strings.Replace(want, `"\u003cb\u003e"`, "null", 1) {
			t.Errorf("custom = %s", got)
		}
	})
	t.Run("bad values are 422 naming custom.<key>, and change nothing", func(t *testing.T) {
		before := mustGet(t, c.key, path)
		other := newTestCompany(t)
		for body, field := range map[string]string{
			`{"nope": 1}`: "custom.nope", `{"note": 5}`: "custom.note", `{"arr": "5"}`: "custom.arr",
			`{"arr": 1234567890123456789}`: "custom.arr", `{"fee": 1.234}`: "custom.fee", `{"fee": -1}`: "custom.fee",
			`{"born": "2026-02-30"}`: "custom.born", `{"seen": "yesterday"}`: "custom.seen", `{"vip": "true"}`: "custom.vip",
			`{"tier": "platinum"}`: "custom.tier", `{"tags": ["a", "a"]}`: "custom.tags", `{"tags": "a"}`: "custom.tags",
			`{"site": "ftp://x"}`: "custom.site", `{"mail": "not mail"}`: "custom.mail", `{"owner": "1"}`: "custom.owner",
			fmt.Sprintf(`{"owner": %d}`, other.userID): "custom.owner", `{"note": "` + strings.Repeat("x", 1001) + `"}`: "custom.note",
		} {
			wantFields(t, call(t, "PATCH", path, c.key, `{"custom": `+body+`}`), field)
		}
		wantFields(t, call(t, "PATCH", path, c.key, `{"custom": [1]}`), "custom")
		wantFields(t, call(t, "POST", "/v1/contacts", c.key, `{"name": "X", "custom": {"nope": 1, "tier": "x"}}`), "custom.nope", "custom.tier")
		wantUnchanged(t, c.key, path, before)
	})
	t.Run("previousAttributes holds exactly the changed custom keys", func(t *testing.T) {
		wantStatus(t, call(t, "PATCH", path, c.key, `{"city": "Oslo", "custom": {"tier": "silver", "arr": -3}}`), http.StatusOK)
		evs, _ := waitFeed(t, c.key, "", "type=contact.updated", 3)
		want := obj{"city": nil, "custom": map[string]any{"arr": json.Number("1200.50"), "tier": "gold"}}
		if diff := cmp.Diff(want, evs[2].Data.PreviousAttributes); diff != "" {
			t.Errorf("previousAttributes (-want +got):\n%s", diff)
		}
		if got := evs[2].Data.Object["custom"].(map[string]any)["arr"]; got != json.Number("-3") {
			t.Errorf("event object custom.arr = %v; want -3", got)
		}
	})
	t.Run("required fields", func(t *testing.T) {
		d := newTestCompany(t)
		defineField(t, d.key, `{"object": "business", "key": "region", "label": "R", "type": "text", "required": true}`)
		wantFields(t, call(t, "POST", "/v1/business", d.key, `{"title": "T"}`), "custom.region")
		b, _ := create(t, d.key, "/v1/business", `{"title": "T", "custom": {"region": "north"}}`)
		wantFields(t, call(t, "PATCH", itemPath("/v1/business", b.id()), d.key, `{"custom": {"region": null}}`), "custom.region")
	})
	t.Run("organizations carry custom, also expanded", func(t *testing.T) {
		defineField(t, c.key, `{"object": "organization", "key": "size", "label": "S", "type": "number"}`)
		org, _ := create(t, c.key, "/v1/organizations", `{"name": "Acme", "custom": {"size": 12}}`)
		ct, _ := create(t, c.key, "/v1/contacts", fmt.Sprintf(`{"name": "Bo", "organizationId": %d}`, org.id()))
		r := mustGet(t, c.key, itemPath("/v1/contacts", ct.id())+"?expand[]=organization")
		exp := decode[map[string]map[string]json.RawMessage](t, []byte(`{"x":`+string(decode[map[string]json.RawMessage](t, r.body)["organization"])+`}`))
		if got := string(exp["x"]["custom"]); got != `{"size":12}` {
			t.Errorf("expanded organization custom = %s", got)
		}
	})
	t.Run("an idempotent replay carries custom", func(t *testing.T) {
		body := `{"name": "Cy", "custom": {"tier": "gold"}}`
		a := wantStatus(t, call(t, "POST", "/v1/contacts", c.key, body, "Idempotency-Key", "cf-1"), http.StatusCreated)
		b := wantStatus(t, call(t, "POST", "/v1/contacts", c.key, body, "Idempotency-Key", "cf-1"), http.StatusCreated)
		if string(a.body) != string(b.body) || !strings.Contains(string(b.body), `"tier":"gold"`) {
			t.Errorf("replay = %s; first %s", b.body, a.body)
		}
	})
}

func TestCustomUniqueConcurrent(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	defineField(t, c.key, `{"object": "contact", "key": "code", "label": "C", "type": "text", "unique": true}`)
	held, _ := create(t, c.key, "/v1/contacts", `{"name": "Holder", "custom": {"code": "Z9"}}`)
	p := wantFields(t, call(t, "POST", "/v1/contacts", c.key, `{"name": "B", "custom": {"code": "z9"}}`), "custom.code")
	if !strings.Contains(p.Errors[0].Message, fmt.Sprint(held.id())) {
		t.Errorf("message %q does not name the holder %d", p.Errors[0].Message, held.id())
	}
	const n = 16
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := call(t, "POST", "/v1/contacts", c.key, `{"name": "Racer", "custom": {"code": "SAME"}}`)
			statuses[i] = r.status
		}()
	}
	wg.Wait()
	won := 0
	for _, s := range statuses {
		switch s {
		case http.StatusCreated:
			won++
		case http.StatusUnprocessableEntity:
		default:
			t.Errorf("status %d", s)
		}
	}
	if won != 1 || countOf(t, c.key, "/v1/contacts/count?custom.code=same") != 1 {
		t.Errorf("%d creates won; want exactly 1 (%v)", won, statuses)
	}
	// Sent again beside a change, an unchanged value keeps its rows: the filter and the index hold it.
	wantStatus(t, call(t, "PATCH", itemPath("/v1/contacts", held.id()), c.key, `{"name": "Holder 2", "custom": {"code": "Z9"}}`), http.StatusOK)
	wantFields(t, call(t, "POST", "/v1/contacts", c.key, `{"name": "C", "custom": {"code": "z9"}}`), "custom.code")
	if n := countOf(t, c.key, "/v1/contacts/count?custom.code=z9"); n != 1 {
		t.Errorf("custom.code=z9 counts %d after a PATCH that sent it again; want 1", n)
	}
	wantStatus(t, call(t, "DELETE", itemPath("/v1/contacts", held.id()), c.key, ""), http.StatusNoContent)
	create(t, c.key, "/v1/contacts", `{"name": "Next", "custom": {"code": "z9"}}`)
}

func TestCustomListsFilterSortAndCount(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for _, def := range []string{
		`{"key": "tier", "type": "select", "options": [{"value": "gold"}, {"value": "silver"}]}`,
		`{"key": "arr", "type": "number"}`, `{"key": "seen", "type": "datetime"}`, `{"key": "note", "type": "text"}`,
		`{"key": "tags", "type": "multiSelect", "options": [{"value": "a"}, {"value": "b"}]}`, `{"key": "vip", "type": "boolean"}`,
	} {
		defineField(t, c.key, `{"object": "contact", "label": "L", `+def[1:])
	}
	type row struct {
		tier, note string
		arr        any // nil: unset
		seen       string
		tags       string
		vip        bool
	}
	rows := []row{
		{"gold", "Beta", 10, "2026-01-02T00:00:00Z", `["a"]`, true}, {"silver", "alpha", -5.5, "", `["a", "b"]`, false},
		{"gold", "", nil, "2026-01-01T00:00:00Z", `[]`, true}, {"", "beta", 10, "", `["b"]`, false},
		{"gold", "Gamma", 300, "2026-03-01T00:00:00Z", `null`, false}, {"", "", nil, "", `null`, false},
		{"silver", "delta", 0.25, "2026-02-01T00:00:00Z", `["a"]`, true},
	}
	ids := make([]int64, len(rows))
	str := func(s string) string {
		if s == "" {
			return "null"
		}
		return `"` + s + `"`
	}
	for i, r := range rows {
		arr := "null"
		if r.arr != nil {
			arr = fmt.Sprint(r.arr)
		}
		o, _ := create(t, c.key, "/v1/contacts", fmt.Sprintf(`{"name": "C%d", "withSales": %v, "custom": {"tier": %s, "note": %s, "arr": %s, "seen": %s, "tags": %s, "vip": %v}}`,
			i, i%2 == 0, str(r.tier), str(r.note), arr, str(r.seen), r.tags, r.vip))
		ids[i] = o.id()
	}
	pick := func(idx ...int) []int64 {
		out := []int64{}
		for _, i := range idx {
			out = append(out, ids[i])
		}
		return out
	}
	walkIDs := func(query string) []int64 {
		got := []int64{}
		for _, o := range walkList[obj](t, c.key, "/v1/contacts", query, 2) {
			got = append(got, o.id())
		}
		return got
	}
	for _, tc := range []struct {
		query string
		want  []int64
	}{
		{"custom.tier=gold", pick(0, 2, 4)},
		{"custom.tier=gold&withSales=true", pick(0, 2, 4)},
		{"custom.tier=gold&withSales=false", pick()},
		{"custom.note=BETA", pick(0, 3)},
		{"custom.arr=10", pick(0, 3)},
		{"custom.arr[gte]=0.25", pick(0, 3, 4, 6)},
		{"custom.arr[lt]=0.25", pick(1)},
		{"custom.arr[gt]=-6&custom.arr[lte]=10", pick(0, 1, 3, 6)},
		{"custom.seen[gte]=2026-01-02T00:00:00Z", pick(0, 4, 6)},
		{"custom.tags=a", pick(0, 1, 6)},
		{"custom.vip=true", pick(0, 2, 6)},
		{"sort=custom.arr", pick(1, 6, 0, 3, 4, 2, 5)},
		{"sort=-custom.arr", pick(4, 3, 0, 6, 1, 5, 2)}, // without a value last, as a built-in sort's NULLs
		{"sort=custom.note", pick(0, 4, 1, 3, 6, 2, 5)},
		{"sort=custom.seen", pick(2, 0, 6, 4, 1, 3, 5)},
		{"sort=-custom.tier&custom.arr[gte]=0", pick(6, 4, 0, 3)},
		{"sort=-custom.seen", pick(4, 6, 0, 2, 5, 3, 1)},
	} {
		if diff := cmp.Diff(tc.want, walkIDs(tc.query)); diff != "" {
			t.Errorf("walk %s (-want +got):\n%s", tc.query, diff)
		}
		if count, _, _ := strings.Cut(tc.query, "sort="); !strings.HasPrefix(tc.query, "sort=") {
			if got := countOf(t, c.key, "/v1/contacts/count?"+count); got != int64(len(tc.want)) {
				t.Errorf("count %s = %d; want %d", count, got, len(tc.want))
			}
		}
	}
	// A lone custom filter's count reads the values alone: a deleted object's must go with it.
	wantStatus(t, call(t, "DELETE", fmt.Sprintf("/v1/contacts/%d", ids[4]), c.key, ""), http.StatusNoContent)
	if got := countOf(t, c.key, "/v1/contacts/count?custom.tier=gold"); got != 2 {
		t.Errorf("count custom.tier=gold after a delete = %d; want 2", got)
	}
	t.Run("a PATCH's values replace the old ones in filters: cleared, fewer options, beside a unique one", func(t *testing.T) {
		defineField(t, c.key, `{"object": "contact", "key": "code", "label": "C", "type": "text", "unique": true}`)
		path := func(i int) string { return itemPath("/v1/contacts", ids[i]) }
		wantStatus(t, call(t, "PATCH", path(1), c.key, `{"custom": {"tier": null, "tags": ["b"], "arr": 7}}`), http.StatusOK)
		wantStatus(t, call(t, "PATCH", path(0), c.key, `{"custom": {"code": "K1"}}`), http.StatusOK)
		wantStatus(t, call(t, "PATCH", path(0), c.key, `{"custom": {"code": "K2", "arr": 11}}`), http.StatusOK)
		for query, want := range map[string]int64{"custom.tier=silver": 1, "custom.tags=a": 2, "custom.tags=b": 2, "custom.arr=7": 1,
			"custom.arr=-5.5": 0, "custom.arr=10": 1, "custom.arr=11": 1, "custom.code=k1": 0, "custom.code=k2": 1} {
			if got := countOf(t, c.key, "/v1/contacts/count?"+query); got != want {
				t.Errorf("count %s = %d; want %d", query, got, want)
			}
		}
		create(t, c.key, "/v1/contacts", `{"name": "Next", "custom": {"code": "k1"}}`)
	})
	t.Run("an unknown key or an operator its type lacks is 400 naming the parameter", func(t *testing.T) {
		for _, q := range []string{"custom.nope=1", "custom.tier[gte]=gold", "custom.arr=abc", "custom.arr[like]=1", "custom.seen=yesterday", "custom.tags[gt]=a"} {
			name, _, _ := strings.Cut(q, "=")
			p := wantProblem(t, call(t, "GET", "/v1/contacts?"+q, c.key, ""), http.StatusBadRequest, "invalid_parameter")
			if len(p.Errors) != 1 || p.Errors[0].Field != name {
				t.Errorf("GET ?%s: errors %+v; want one naming %s", q, p.Errors, name)
			}
			wantProblem(t, call(t, "GET", "/v1/contacts/count?"+q, c.key, ""), http.StatusBadRequest, "invalid_parameter")
		}
		for _, q := range []string{"sort=custom.tags", "sort=custom.nope"} {
			wantProblem(t, call(t, "GET", "/v1/contacts?"+q, c.key, ""), http.StatusBadRequest, "invalid_parameter")
		}
		other := newTestCompany(t)
		wantProblem(t, call(t, "GET", "/v1/contacts?custom.tier=gold", other.key, ""), http.StatusBadRequest, "invalid_parameter")
	})
	t.Run("a cursor is good only for its sort and filters", func(t *testing.T) {
		p := listPage[obj](t, c.key, "/v1/contacts?limit=1&sort=custom.arr")
		cur := url.QueryEscape(*p.Pagination.NextCursor)
		wantProblem(t, call(t, "GET", "/v1/contacts?limit=1&sort=custom.note&cursor="+cur, c.key, ""), http.StatusBadRequest, "invalid_parameter")
		wantProblem(t, call(t, "GET", "/v1/contacts?limit=1&sort=custom.arr&custom.tier=gold&cursor="+cur, c.key, ""), http.StatusBadRequest, "invalid_parameter")
	})
	t.Run("business and organizations filter too", func(t *testing.T) {
		defineField(t, c.key, `{"object": "organization", "key": "size", "label": "S", "type": "number"}`)
		org, _ := create(t, c.key, "/v1/organizations", `{"name": "Big", "custom": {"size": 500}}`)
		create(t, c.key, "/v1/organizations", `{"name": "Small", "custom": {"size": 5}}`)
		if got := listPage[obj](t, c.key, "/v1/organizations?custom.size[gt]=100").Data; len(got) != 1 || got[0].id() != org.id() {
			t.Errorf("organizations size>100 = %v", got)
		}
		defineField(t, c.key, `{"object": "business", "key": "renewal", "label": "R", "type": "date"}`)
		create(t, c.key, "/v1/business", `{"title": "B1", "custom": {"renewal": "2027-01-31"}}`)
		create(t, c.key, "/v1/business", `{"title": "B2", "custom": {"renewal": "2026-06-30"}}`)
		if got := walkList[obj](t, c.key, "/v1/business", "sort=-custom.renewal&custom.renewal[lt]=2028-01-01", 1); len(got) != 2 || got[0]["title"] != "B1" {
			t.Errorf("business by -renewal = %v", got)
		}
	})
}

// A request takes at most 10 custom filters (a range's each end counts): the 11th, in name order,
// is a 400 naming it, before any database work.
func TestCustomFiltersAreAtMostTen(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	var filters []string
	for i := range 11 {
		defineField(t, c.key, fmt.Sprintf(`{"object": "contact", "key": "n%02d", "label": "N", "type": "number"}`, i))
		filters = append(filters, fmt.Sprintf("custom.n%02d=1", i))
	}
	create(t, c.key, "/v1/contacts", `{"name": "All ones", "custom": {"n00": 1, "n01": 1, "n02": 1, "n03": 1, "n04": 1, "n05": 1, "n06": 1, "n07": 1, "n08": 1, "n09": 1, "n10": 1}}`)
	ten := strings.Join(filters[:10], "&")
	if got := countOf(t, c.key, "/v1/contacts/count?"+ten); got != 1 {
		t.Errorf("count with 10 custom filters = %d; want 1", got)
	}
	if got := listPage[obj](t, c.key, "/v1/contacts?sort=-custom.n00&"+ten).Data; len(got) != 1 {
		t.Errorf("list with 10 custom filters and a custom sort: %v; want the contact", got)
	}
	for _, q := range []string{strings.Join(filters, "&"), strings.Join(filters[:9], "&") + "&custom.n10[gte]=0&custom.n10[lte]=2"} {
		for _, path := range []string{"/v1/contacts?", "/v1/contacts/count?"} {
			p := wantProblem(t, call(t, "GET", path+q, c.key, ""), http.StatusBadRequest, "invalid_parameter")
			if len(p.Errors) != 1 || !strings.HasPrefix(p.Errors[0].Field, "custom.n10") || !strings.Contains(p.Errors[0].Message, "at most 10") {
				t.Errorf("GET %s with 11 custom filters: errors %+v; want one naming custom.n10, and the bound", path, p.Errors)
			}
		}
	}
}
