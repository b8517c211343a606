package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Tests of the write contract (docs/architecture.md): a write that fails leaves nothing of itself.
// In a batch with "atomic": false, an item that fails, in every way it can, leaves no object, no
// custom value a filter or a count finds, and no event, while the item beside it commits.

// contractWorld is a company with, for each of contacts, business and organizations, a unique
// custom field code and a plain one note, and two objects: holder, whose code is H-1, and target,
// whose code is T-1.
type contractWorld struct {
	testCompany
	holder, target map[string]int64 // by path: "/v1/contacts"
}

func newContractWorld(t *testing.T) contractWorld {
	t.Helper()
	w := contractWorld{testCompany: newTestCompany(t), holder: map[string]int64{}, target: map[string]int64{}}
	for path, object := range map[string]string{"/v1/contacts": "contact", "/v1/business": "business", "/v1/organizations": "organization"} {
		defineField(t, w.key, `{"object": "`+object+`", "key": "code", "label": "Code", "type": "text", "unique": true}`)
		defineField(t, w.key, `{"object": "`+object+`", "key": "note", "label": "Note", "type": "text"}`)
		name := map[string]string{"contact": "name", "business": "title", "organization": "name"}[object]
		h, _ := create(t, w.key, path, `{"`+name+`": "Holder", "custom": {"code": "H-1"}}`)
		g, _ := create(t, w.key, path, `{"`+name+`": "Target", "custom": {"code": "T-1"}}`)
		w.holder[path], w.target[path] = h.id(), g.id()
	}
	return w
}

// state is what a client can see of the company's objects of path: each object as GET answers it,
// in id order, and the count of those that a custom filter finds.
func (w contractWorld) state(t *testing.T, path, filter string) string {
	t.Helper()
	var b strings.Builder
	for _, o := range walkList[obj](t, w.key, path, "", 100) {
		b.WriteString(string(mustGet(t, w.key, itemPath(path, o.id())).body))
	}
	found := walkList[obj](t, w.key, path, filter, 100)
	fmt.Fprintf(&b, "%s: %d\n", filter, len(found))
	return b.String()
}

func TestBatchItemThatFailsLeavesNothing(t *testing.T) {
	t.Parallel()
	const (
		contacts      = "/v1/contacts"
		business      = "/v1/business"
		organizations = "/v1/organizations"
	)
	cases := []struct {
		name, path, op string
		// items returns the batch's two items: one that succeeds, then one that fails.
		items func(t *testing.T, w contractWorld) (good, bad string)
		want  []string // the items' statuses
	}{
		{"create: validation", contacts, "create", func(*testing.T, contractWorld) (string, string) {
			return `{"name": "Good"}`, `{"name": "", "custom": {"note": "bad"}}`
		}, []string{"created", "error:validation_failed"}},
		{"create: a reference to nothing", contacts, "create", func(*testing.T, contractWorld) (string, string) {
			return `{"name": "Good"}`, `{"name": "Bad", "stageId": 999999999, "custom": {"note": "bad"}}`
		}, []string{"created", "error:validation_failed"}},
		{"create: a unique value another object holds", contacts, "create", func(*testing.T, contractWorld) (string, string) {
			return `{"name": "Good"}`, `{"name": "Bad", "custom": {"code": "h-1", "note": "bad"}}`
		}, []string{"created", "error:validation_failed"}},
		{"create: a unique value an earlier item takes", contacts, "create", func(*testing.T, contractWorld) (string, string) {
			return `{"name": "Good", "custom": {"code": "N-1"}}`, `{"name": "Bad", "custom": {"code": "n-1", "note": "bad"}}`
		}, []string{"created", "error:validation_failed"}},
		{"create: a statement the database refuses", contacts, "create", func(*testing.T, contractWorld) (string, string) {
			return `{"name": "Good"}`, `{"name": "Refused by the database", "custom": {"note": "bad"}}`
		}, []string{"created", "error:validation_failed"}},
		{"update: a custom value and a reference to nothing", contacts, "update", func(t *testing.T, w contractWorld) (string, string) {
			return fmt.Sprintf(`{"id": %d, "city": "Good"}`, w.holder[contacts]),
				fmt.Sprintf(`{"id": %d, "stageId": 999999999, "custom": {"code": "T-2", "note": "bad"}}`, w.target[contacts])
		}, []string{"updated", "error:validation_failed"}},
		{"update: a unique value another object holds", contacts, "update", func(t *testing.T, w contractWorld) (string, string) {
			return fmt.Sprintf(`{"id": %d, "city": "Good"}`, w.holder[contacts]),
				fmt.Sprintf(`{"id": %d, "custom": {"code": "H-1", "note": "bad"}}`, w.target[contacts])
		}, []string{"updated", "error:validation_failed"}},
		{"update: ifMatch", contacts, "update", func(t *testing.T, w contractWorld) (string, string) {
			return fmt.Sprintf(`{"id": %d, "city": "Good"}`, w.holder[contacts]),
				fmt.Sprintf(`{"id": %d, "ifMatch": "\"999\"", "custom": {"code": "T-2", "note": "bad"}}`, w.target[contacts])
		}, []string{"updated", "error:precondition_failed"}},
		{"update: not found", contacts, "update", func(t *testing.T, w contractWorld) (string, string) {
			return fmt.Sprintf(`{"id": %d, "city": "Good"}`, w.holder[contacts]), `{"id": 999999999, "custom": {"note": "bad"}}`
		}, []string{"updated", "error:not_found"}},
		{"upsert: ambiguous match", contacts, "upsert", func(t *testing.T, w contractWorld) (string, string) {
			for _, id := range []int64{w.holder[contacts], w.target[contacts]} {
				wantStatus(t, call(t, "PATCH", itemPath(contacts, id), w.key, `{"email": "same@example.com"}`), http.StatusOK)
			}
			return `{"name": "Good", "email": "good@example.com"}`, `{"email": "same@example.com", "custom": {"note": "bad"}}`
		}, []string{"created", "error:ambiguous_match"}},
		{"upsert: a create with a unique value another object holds", contacts, "upsert", func(*testing.T, contractWorld) (string, string) {
			return `{"name": "Good", "email": "good@example.com"}`, `{"name": "Bad", "email": "new@example.com", "custom": {"code": "H-1", "note": "bad"}}`
		}, []string{"created", "error:validation_failed"}},
		{"delete: not found", contacts, "delete", func(t *testing.T, w contractWorld) (string, string) {
			return fmt.Sprint(w.holder[contacts]), "999999999"
		}, []string{"deleted", "error:not_found"}},
		{"create: a business with a unique value another one holds", business, "create", func(*testing.T, contractWorld) (string, string) {
			return `{"title": "Good"}`, `{"title": "Bad", "custom": {"code": "H-1", "note": "bad"}}`
		}, []string{"created", "error:validation_failed"}},
		{"update: a business's custom value and a reference to nothing", business, "update", func(t *testing.T, w contractWorld) (string, string) {
			return fmt.Sprintf(`{"id": %d, "title": "Good"}`, w.holder[business]),
				fmt.Sprintf(`{"id": %d, "stageId": 999999999, "custom": {"code": "T-2", "note": "bad"}}`, w.target[business])
		}, []string{"updated", "error:validation_failed"}},
		{"upsert: an organization with a unique value another one holds", organizations, "upsert", func(*testing.T, contractWorld) (string, string) {
			return `{"name": "Good"}`, `{"name": "Bad", "custom": {"code": "h-1", "note": "bad"}}`
		}, []string{"created", "error:validation_failed"}},
		{"delete: an organization in use", organizations, "delete", func(t *testing.T, w contractWorld) (string, string) {
			create(t, w.key, contacts, fmt.Sprintf(`{"name": "Employee", "organizationId": %d}`, w.target[organizations]))
			return fmt.Sprint(w.holder[organizations]), fmt.Sprint(w.target[organizations])
		}, []string{"deleted", "error:organization_in_use"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newContractWorld(t)
			if strings.Contains(tc.name, "the database refuses") {
				refuseName(t, w.id, "Refused by the database")
			}
			good, bad := tc.items(t, w)
			body := `{"atomic": false, "items": [` + good + `, ` + bad + `]}`
			if tc.op == "delete" {
				body = `{"atomic": false, "ids": [` + good + `, ` + bad + `]}`
			}
			before := w.state(t, tc.path, "custom.note=bad")
			r := postBatch(t, w.key, tc.path+"/batch/"+tc.op, body, http.StatusMultiStatus)
			b := decode[batchBody](t, r.body)
			if diff := cmp.Diff(tc.want, b.statuses()); diff != "" {
				t.Fatalf("statuses (-want +got):\n%s", diff)
			}
			w.wantOnlyTheGoodItem(t, tc.path, tc.op, before, b, r.header.Get("X-Request-Id"))
		})
	}
}

// wantOnlyTheGoodItem fails the test unless, of a batch of op on path whose first item succeeded and
// second failed (b, answered to the request requestID), only the first item's change shows: in the
// objects (state, against before), in a custom filter of the failed item's note, in the unique
// values and in the events feed.
func (w contractWorld) wantOnlyTheGoodItem(t *testing.T, path, op, before string, b batchBody, requestID string) {
	t.Helper()
	goodID := w.holder[path]
	if op != "delete" {
		goodID = b.Data[0].Object.id()
	}
	kind := map[string]string{"/v1/contacts": "contact", "/v1/business": "business", "/v1/organizations": "organization"}[path]
	event := kind + "." + b.Data[0].Status
	evs, _ := waitFeed(t, w.key, "", "", int(eventCount(t, w.id, "")))
	var got []string
	for _, e := range evs {
		if e.RequestID == requestID {
			got = append(got, fmt.Sprintf("%s %v", e.Type, e.Data.Object["id"]))
		}
	}
	if diff := cmp.Diff([]string{fmt.Sprintf("%s %d", event, goodID)}, got); diff != "" {
		t.Errorf("events after the batch (-want +got):\n%s", diff)
	}
	// Undo the good item's change in the expected state: the state then must equal before.
	after := w.state(t, path, "custom.note=bad")
	if !strings.HasSuffix(after, "custom.note=bad: 0\n") {
		t.Errorf("the failed item's custom value is found by a filter:\n%s", after)
	}
	if path != "/v1/organizations" { // organizations have no count
		if n := countOf(t, w.key, path+"/count?custom.note=bad"); n != 0 {
			t.Errorf("count?custom.note=bad = %d; want 0", n)
		}
	}
	var goodNow string
	if op != "delete" {
		goodNow = string(mustGet(t, w.key, itemPath(path, goodID)).body)
	}
	wantBefore := before
	switch op {
	case "create", "upsert":
		after = strings.Replace(after, goodNow, "", 1)
	case "update":
		after = strings.Replace(after, goodNow, "", 1)
		wantBefore = dropObject(t, w, path, before, goodID)
	case "delete":
		wantBefore = dropObject(t, w, path, before, goodID)
	}
	if after != wantBefore {
		t.Errorf("objects after the batch, but the good item's:\n%s\nwant as before:\n%s", after, wantBefore)
	}
	// The stored unique values still hold: each stays its object's, and no other object can take it.
	for _, code := range []string{"H-1", "T-1"} {
		found := walkList[obj](t, w.key, path, "custom.code="+url.QueryEscape(code), 100)
		if (op != "delete" || code != "H-1") && len(found) != 1 {
			t.Errorf("custom.code=%s finds %d objects; want 1", code, len(found))
		}
	}
	name := map[string]string{"contact": "name", "business": "title", "organization": "name"}[kind]
	r := call(t, "POST", path, w.key, `{"`+name+`": "Thief", "custom": {"code": "t-1"}}`)
	wantFields(t, r, "custom.code")
}

// dropObject returns state without the object id of path as GET answered it in state.
func dropObject(t *testing.T, w contractWorld, path, state string, id int64) string {
	t.Helper()
	prefix := fmt.Sprintf(`{"id":%d,`, id)
	if path == "/v1/contacts" {
		prefix = fmt.Sprintf(`{"id":"%d",`, id)
	}
	i := strings.Index(state, prefix)
	if i < 0 {
		t.Fatalf("state has no object %d:\n%s", id, state)
	}
	j := strings.Index(state[i:], "}\n")
	return state[:i] + state[i+j+2:]
}

// refuseName makes the database refuse a contact of the company companyID named name, as a
// constraint the server's checks know nothing of, until the test ends: a statement that fails in
// PostgreSQL after every check passed.
func refuseName(t *testing.T, companyID int64, name string) {
	t.Helper()
	constraint := fmt.Sprintf("contract_test_%d_name_check", companyID)
	exec := func(q string) {
		if _, err := testEnv.st.db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(fmt.Sprintf(`ALTER TABLE contacts ADD CONSTRAINT %s CHECK (company_id <> %d OR name <> '%s')`, constraint, companyID, name))
	t.Cleanup(func() { exec(`ALTER TABLE contacts DROP CONSTRAINT ` + constraint) })
}

// A merge that fails at its last write, the survivor's update, after it re-pointed contacts and
// deleted the merged organization, leaves all of it as it was: one transaction, rolled back.
func TestMergeThatFailsAtTheSurvivorsUpdateChangesNothing(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	var options, mine, theirs []string
	for i := range 60 {
		options = append(options, fmt.Sprintf(`{"value": "o%d"}`, i))
		if i < 30 {
			mine = append(mine, fmt.Sprintf(`"o%d"`, i))
		} else {
			theirs = append(theirs, fmt.Sprintf(`"o%d"`, i))
		}
	}
	defineField(t, c.key, `{"object": "organization", "key": "tags", "label": "Tags", "type": "multiSelect", "options": [`+strings.Join(options, ",")+`]}`)
	s, _ := create(t, c.key, "/v1/organizations", `{"name": "Acme", "custom": {"tags": [`+strings.Join(mine, ",")+`]}}`)
	l, _ := create(t, c.key, "/v1/organizations", `{"name": "Acme Inc", "custom": {"tags": [`+strings.Join(theirs, ",")+`]}}`)
	employee, _ := create(t, c.key, "/v1/contacts", fmt.Sprintf(`{"name": "Employee", "organizationId": %d}`, l.id()))
	paths := []string{itemPath("/v1/organizations", s.id()), itemPath("/v1/organizations", l.id()), itemPath("/v1/contacts", employee.id())}
	var before []response
	for _, p := range paths {
		before = append(before, mustGet(t, c.key, p))
	}
	events := eventCount(t, c.id, "")

	// The union of the tags is 60 values, past a multiSelect's 50.
	r := call(t, "POST", paths[0]+"/merge", c.key, fmt.Sprintf(`{"mergeIds": [%d]}`, l.id()))
	wantFields(t, r, "custom.tags")
	for i, p := range paths {
		wantUnchanged(t, c.key, p, before[i])
	}
	if n := eventCount(t, c.id, ""); n != events {
		t.Errorf("%d events after a failed merge; want %d", n, events)
	}
	if got := listPage[obj](t, c.key, "/v1/organizations?custom.tags=o45").Data; len(got) != 1 || got[0].id() != l.id() {
		t.Errorf("custom.tags=o45 finds %v; want the merged organization alone", got)
	}
}
