package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Tests of associations.go: associations between objects of two kinds, through the HTTP API.

// assocElem is an element of a list of associations.
type assocElem struct {
	Label     *string
	CreatedAt string
	Object    obj
}

// assocPath is the path of the association of kind's object id with toKind's toID.
func assocPath(kind string, id int64, toKind string, toID int64) string {
	return fmt.Sprintf("/v1/%s/%d/associations/%s/%d", kind, id, toKind, toID)
}

// associatedIDs walks the list of kind's object id's associations with toKind (query added) and
// returns "id label" of each element.
func associatedIDs(t *testing.T, key, kind string, id int64, toKind, query string, limit int) []string {
	t.Helper()
	var got []string
	for _, e := range walkList[assocElem](t, key, fmt.Sprintf("/v1/%s/%d/associations/%s", kind, id, toKind), query, limit) {
		label := "-"
		if e.Label != nil {
			label = *e.Label
		}
		got = append(got, fmt.Sprintf("%d %s", e.Object.id(), label))
	}
	return got
}

func TestAssociationsPutGetDeleteFromEitherEnd(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	deal, _ := create(t, c.key, "/v1/business", `{"title": "Deal"}`)
	ana, _ := create(t, c.key, "/v1/contacts", `{"name": "Ana"}`)
	bo, _ := create(t, c.key, "/v1/contacts", `{"name": "Bo"}`)

	// A PUT makes it (201) and again answers it (200); a label makes another one of the same pair.
	r := wantStatus(t, call(t, "PUT", assocPath("business", deal.id(), "contacts", ana.id()), c.key, `{"label": "champion"}`), http.StatusCreated)
	a := decode[obj](t, r.body)
	want := obj{"from": map[string]any{"object": "business", "id": jsonNum(deal.id())},
		"to": map[string]any{"object": "contact", "id": fmt.Sprint(ana.id())}, "label": "champion", "createdAt": a["createdAt"]}
	if diff := cmp.Diff(want, a); diff != "" || a["createdAt"] == nil {
		t.Errorf("PUT answer (-want +got):\n%s", diff)
	}
	again := wantStatus(t, call(t, "PUT", assocPath("business", deal.id(), "contacts", ana.id()), c.key, `{"label": "champion"}`), http.StatusOK)
	if string(again.body) != string(r.body) {
		t.Errorf("PUT again = %s; want %s", again.body, r.body)
	}
	// From the other end it is the same association, seen from there.
	other := decode[obj](t, wantStatus(t, call(t, "PUT", assocPath("contacts", ana.id(), "business", deal.id()), c.key, `{"label": "champion"}`), http.StatusOK).body)
	if other["createdAt"] != a["createdAt"] || fmt.Sprint(other["from"]) != fmt.Sprint(a["to"]) {
		t.Errorf("PUT from the other end = %v; want %v seen from its other end", other, a)
	}
	wantStatus(t, call(t, "PUT", assocPath("business", deal.id(), "contacts", ana.id()), c.key, ""), http.StatusCreated)
	wantStatus(t, call(t, "PUT", assocPath("business", deal.id(), "contacts", bo.id()), c.key, `{"label": null}`), http.StatusCreated)

	// Read from either end, oldest first, paged; a count counts each label.
	if diff := cmp.Diff([]string{fmt.Sprintf("%d champion", ana.id()), fmt.Sprintf("%d -", ana.id()), fmt.Sprintf("%d -", bo.id())},
		associatedIDs(t, c.key, "business", deal.id(), "contacts", "", 2)); diff != "" {
		t.Errorf("the deal's contacts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{fmt.Sprintf("%d champion", deal.id()), fmt.Sprintf("%d -", deal.id())},
		associatedIDs(t, c.key, "contacts", ana.id(), "business", "", 1)); diff != "" {
		t.Errorf("Ana's deals (-want +got):\n%s", diff)
	}
	if got := associatedIDs(t, c.key, "business", deal.id(), "contacts", "label=champion", 10); len(got) != 1 {
		t.Errorf("label=champion: %v; want Ana's alone", got)
	}
	for path, want := range map[string]int64{
		fmt.Sprintf("/v1/business/%d/associations/contacts/count", deal.id()):                3,
		fmt.Sprintf("/v1/business/%d/associations/contacts/count?label=champion", deal.id()): 1,
		fmt.Sprintf("/v1/contacts/%d/associations/business/count", bo.id()):                  1,
		fmt.Sprintf("/v1/contacts/%d/associations/organizations/count", bo.id()):             0,
	} {
		if n := countOf(t, c.key, path); n != want {
			t.Errorf("GET %s = %d; want %d", path, n, want)
		}
	}
	page := listPage[assocElem](t, c.key, fmt.Sprintf("/v1/contacts/%d/associations/business?expand[]=stage", ana.id()))
	if len(page.Data) != 2 || page.Data[0].Object["stage"] == nil || page.Data[0].Object["title"] != "Deal" {
		t.Errorf("Ana's deals with expand[]=stage: %+v; want the deal with its stage", page.Data)
	}

	// A DELETE names its label; a second is 404.
	wantStatus(t, call(t, "DELETE", assocPath("contacts", ana.id(), "business", deal.id())+"?label=champion", c.key, ""), http.StatusNoContent)
	wantProblem(t, call(t, "DELETE", assocPath("contacts", ana.id(), "business", deal.id())+"?label=champion", c.key, ""), http.StatusNotFound, "not_found")
	if got := associatedIDs(t, c.key, "contacts", ana.id(), "business", "", 10); len(got) != 1 || !strings.HasSuffix(got[0], " -") {
		t.Errorf("Ana's deals after the delete: %v; want the unlabelled one", got)
	}
	evs, _ := waitFeed(t, c.key, "", "type=association.*", 5)
	if diff := cmp.Diff([]string{"association.created", "association.created", "association.created", "association.deleted"}, typesOf(evs)); diff != "" {
		t.Errorf("association events (-want +got):\n%s", diff)
	}
}

func TestAssociationsRefuseBadRequestsOtherCompaniesAndScopes(t *testing.T) {
	t.Parallel()
	c, other := newTestCompany(t), newTestCompany(t)
	deal, _ := create(t, c.key, "/v1/business", `{"title": "Deal"}`)
	ana, _ := create(t, c.key, "/v1/contacts", `{"name": "Ana"}`)
	theirs, _ := create(t, other.key, "/v1/contacts", `{"name": "Theirs"}`)
	for _, tc := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"PUT", assocPath("business", deal.id(), "contacts", theirs.id()), "", http.StatusNotFound, "not_found"},
		{"PUT", assocPath("business", 999999999, "contacts", ana.id()), "", http.StatusNotFound, "not_found"},
		{"PUT", assocPath("business", deal.id(), "business", deal.id()), "", http.StatusNotFound, "not_found"},
		{"PUT", assocPath("business", deal.id(), "users", 1), "", http.StatusNotFound, "not_found"},
		{"PUT", assocPath("business", deal.id(), "contacts", ana.id()), `{"label": "Champion"}`, http.StatusUnprocessableEntity, "validation_failed"},
		{"PUT", assocPath("business", deal.id(), "contacts", ana.id()), `{"role": "x"}`, http.StatusUnprocessableEntity, "validation_failed"},
		{"PUT", "/v1/business/x/associations/contacts/1", "", http.StatusBadRequest, "invalid_id"},
		{"GET", fmt.Sprintf("/v1/contacts/%d/associations/business", theirs.id()), "", http.StatusNotFound, "not_found"},
		{"GET", fmt.Sprintf("/v1/contacts/%d/associations/business?label=A", ana.id()), "", http.StatusBadRequest, "invalid_parameter"},
		{"GET", fmt.Sprintf("/v1/contacts/%d/associations/business?cursor=x", ana.id()), "", http.StatusBadRequest, "invalid_parameter"},
		{"DELETE", assocPath("business", deal.id(), "contacts", ana.id()), "", http.StatusNotFound, "not_found"},
	} {
		wantProblem(t, call(t, tc.method, tc.path, c.key, tc.body), tc.status, tc.code)
	}
	// Writing needs write on both kinds, reading read on both.
	contactsOnly := *makeKey(t, c.key, "contacts:write", "business:read").Key
	wantProblem(t, call(t, "PUT", assocPath("contacts", ana.id(), "business", deal.id()), contactsOnly, ""), http.StatusForbidden, "insufficient_scope")
	wantProblem(t, call(t, "PUT", assocPath("business", deal.id(), "contacts", ana.id()), contactsOnly, ""), http.StatusForbidden, "insufficient_scope")
	wantProblem(t, call(t, "GET", fmt.Sprintf("/v1/contacts/%d/associations/organizations", ana.id()), contactsOnly, ""), http.StatusForbidden, "insufficient_scope")
	wantStatus(t, call(t, "GET", fmt.Sprintf("/v1/contacts/%d/associations/business", ana.id()), contactsOnly, ""), http.StatusOK)
	if n := eventCount(t, c.id, "association.created"); n != 0 {
		t.Errorf("%d association.created events after refused requests; want none", n)
	}
}

// jsonNum is n as decode reads a JSON number.
func jsonNum(n int64) any { return json.Number(fmt.Sprint(n)) }

// A delete takes the object's associations with it, each with its event; a merge moves them to the
// survivor, a duplicate of one the survivor holds only deleted.
func TestAssociationsFollowDeletesAndMerges(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	deal, _ := create(t, c.key, "/v1/business", `{"title": "Deal"}`)
	other, _ := create(t, c.key, "/v1/business", `{"title": "Other deal"}`)
	ana, _ := create(t, c.key, "/v1/contacts", `{"name": "Ana"}`)
	dup, _ := create(t, c.key, "/v1/contacts", `{"name": "Ana (duplicate)"}`)
	gone, _ := create(t, c.key, "/v1/contacts", `{"name": "Gone"}`)
	for _, p := range []string{
		assocPath("contacts", ana.id(), "business", deal.id()),
		assocPath("contacts", dup.id(), "business", deal.id()),  // the survivor has it: only deleted
		assocPath("contacts", dup.id(), "business", other.id()), // moves to Ana
		assocPath("contacts", gone.id(), "business", deal.id()),
	} {
		wantStatus(t, call(t, "PUT", p, c.key, ""), http.StatusCreated)
	}
	wantStatus(t, call(t, "PUT", assocPath("contacts", dup.id(), "business", deal.id()), c.key, `{"label": "champion"}`), http.StatusCreated)

	wantStatus(t, call(t, "DELETE", itemPath("/v1/contacts", gone.id()), c.key, ""), http.StatusNoContent)
	merge(t, c.key, itemPath("/v1/contacts", ana.id()), fmt.Sprintf(`{"mergeIds": ["%d"]}`, dup.id()))

	want := []string{fmt.Sprintf("%d -", ana.id()), fmt.Sprintf("%d champion", ana.id())}
	if diff := cmp.Diff(want, associatedIDs(t, c.key, "business", deal.id(), "contacts", "", 10)); diff != "" {
		t.Errorf("the deal's contacts after the delete and the merge (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{fmt.Sprintf("%d -", ana.id())}, associatedIDs(t, c.key, "business", other.id(), "contacts", "", 10)); diff != "" {
		t.Errorf("the other deal's contacts (-want +got):\n%s", diff)
	}
	evs, _ := waitFeed(t, c.key, "", "type=association.*", 11)
	var got []string
	for _, e := range evs[5:] { // after the 5 PUTs
		from, _ := e.Data.Object["from"].(map[string]any)
		got = append(got, fmt.Sprintf("%s %v", e.Type, from["id"]))
	}
	wantEvents := []string{
		fmt.Sprintf("association.deleted %d", gone.id()), // the delete
		fmt.Sprintf("association.deleted %d", dup.id()), fmt.Sprintf("association.deleted %d", dup.id()), fmt.Sprintf("association.deleted %d", dup.id()),
		fmt.Sprintf("association.created %d", ana.id()), fmt.Sprintf("association.created %d", ana.id()), // other, and champion
	}
	if diff := cmp.Diff(wantEvents, got); diff != "" {
		t.Errorf("events of the delete and the merge (-want +got):\n%s", diff)
	}
}

func TestAssociationsBatches(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	deal, _ := create(t, c.key, "/v1/business", `{"title": "Deal"}`)
	org, _ := create(t, c.key, "/v1/organizations", `{"name": "Org"}`)
	ana, _ := create(t, c.key, "/v1/contacts", `{"name": "Ana"}`)
	item := func(fromKind string, fromID any, toKind string, toID any, label string) string {
		return fmt.Sprintf(`{"from": {"object": %q, "id": %v}, "to": {"object": %q, "id": %v}, "label": %s}`, fromKind, fromID, toKind, toID, label)
	}
	good := item("business", deal.id(), "contact", fmt.Sprintf(`"%d"`, ana.id()), `"champion"`)
	good2 := item("organization", org.id(), "contact", ana.id(), "null")
	missing := item("business", 999999999, "contact", ana.id(), "null")
	bad := item("business", deal.id(), "business", deal.id(), "null")

	// Atomic: one failing item fails the batch and writes nothing.
	wantBatchFailure(t, c.key, "/v1/associations/batch/create", `{"items": [`+good+`, `+missing+`, `+bad+`, `+good+`]}`,
		http.StatusUnprocessableEntity, "items[1] not_found", "items[2].to validation_failed", "items[3].to duplicate_in_request")
	if n := countOf(t, c.key, fmt.Sprintf("/v1/business/%d/associations/contacts/count", deal.id())); n != 0 {
		t.Errorf("%d associations after a failed atomic batch; want 0", n)
	}
	// Not atomic: each item stands alone; one that exists is unchanged.
	b := wantBatch(t, c.key, "/v1/associations/batch/create", `{"atomic": false, "items": [`+good+`, `+missing+`]}`,
		http.StatusMultiStatus, "created", "error:not_found")
	if to, _ := b.Data[0].Object["to"].(map[string]any); to["id"] != fmt.Sprint(ana.id()) || b.Data[0].Object["label"] != "champion" {
		t.Errorf("created item: %v", b.Data[0].Object)
	}
	wantBatch(t, c.key, "/v1/associations/batch/create", `{"items": [`+good+`, `+good2+`]}`, http.StatusOK, "unchanged", "created")
	wantBatch(t, c.key, "/v1/associations/batch/delete", `{"atomic": false, "items": [`+good+`, `+good+`]}`,
		http.StatusMultiStatus, "deleted", "error:duplicate_in_request")
	wantBatch(t, c.key, "/v1/associations/batch/delete", `{"atomic": false, "items": [`+good+`, `+good2+`]}`,
		http.StatusMultiStatus, "error:not_found", "deleted")
	if n := eventCount(t, c.id, ""); n != 3+4 {
		t.Errorf("%d events; want the 3 creates and 4 of the associations", n)
	}
	wantProblem(t, call(t, "POST", "/v1/associations/batch/update", c.key, `{"items": [`+good+`]}`), http.StatusNotFound, "not_found")
	// 1 to 1,000 items; none, or 1,001, is 422 on items, nothing written.
	events := eventCount(t, c.id, "")
	wantFields(t, call(t, "POST", "/v1/associations/batch/create", c.key, `{"items": []}`), "items")
	wantFields(t, call(t, "POST", "/v1/associations/batch/create", c.key, `{"items": [`+strings.Repeat(good2+",", 1000)+good2+`]}`), "items")
	wantProblem(t, call(t, "POST", "/v1/associations/batch/create?x=1", c.key, `{"items": [`+good2+`]}`), http.StatusBadRequest, "invalid_parameter")
	if n := eventCount(t, c.id, ""); n != events {
		t.Errorf("%d events after refused batches; want %d", n, events)
	}
	readOnly := *makeKey(t, c.key, "contacts:write", "business:read").Key
	wantProblem(t, call(t, "POST", "/v1/associations/batch/create", readOnly, `{"items": [`+good+`]}`), http.StatusForbidden, "insufficient_scope")
}

func TestListsFilterByAssociatedObjects(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	deal, _ := create(t, c.key, "/v1/business", `{"title": "Deal"}`)
	var ids []int64
	for i := range 5 {
		o, _ := create(t, c.key, "/v1/contacts", fmt.Sprintf(`{"name": "C%d", "city": "%s"}`, i, []string{"Lisboa", "Porto"}[i%2]))
		ids = append(ids, o.id())
		label := ""
		if i < 2 {
			label = `{"label": "champion"}`
		}
		if i < 4 {
			wantStatus(t, call(t, "PUT", assocPath("business", deal.id(), "contacts", o.id()), c.key, label), http.StatusCreated)
		}
	}
	for query, want := range map[string][]int64{
		fmt.Sprintf("associated.business=%d", deal.id()):                                    ids[:4],
		fmt.Sprintf("associated.business=%d&associatedLabel=champion", deal.id()):           ids[:2],
		fmt.Sprintf("associated.business=%d&sort=-name&limit=1", deal.id()):                 {ids[3], ids[2], ids[1], ids[0]},
		fmt.Sprintf("associated.business=%d&q=C3", deal.id()):                               {ids[3]},
		fmt.Sprintf("associated.business=%d&sort=-id&limit=1", deal.id()):                   {ids[3], ids[2], ids[1], ids[0]},
		fmt.Sprintf("associated.business=%d&withSales=true&limit=1", deal.id()):             nil,
		fmt.Sprintf("associated.business=%d&associatedLabel=champion&sort=name", deal.id()): ids[:2],
		"associated.business=999999999":                                                     nil,
	} {
		limit := 100
		if strings.Contains(query, "limit=1") {
			limit = 1
			query = strings.Replace(query, "&limit=1", "", 1)
		}
		var got []int64
		for _, o := range walkList[obj](t, c.key, "/v1/contacts", query, limit) {
			got = append(got, o.id())
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GET /v1/contacts?%s (-want +got):\n%s", query, diff)
		}
		if !strings.Contains(query, "sort") {
			if n := countOf(t, c.key, "/v1/contacts/count?"+query); n != int64(len(want)) {
				t.Errorf("count?%s = %d; want %d", query, n, len(want))
			}
		}
	}
	if got := listPage[obj](t, c.key, fmt.Sprintf("/v1/business?associated.contacts=%d", ids[0])).Data; len(got) != 1 || got[0].id() != deal.id() {
		t.Errorf("the deals of C0: %v", got)
	}
	contactsOnly := *makeKey(t, c.key, "contacts:read").Key
	wantProblem(t, call(t, "GET", fmt.Sprintf("/v1/contacts?associated.business=%d", deal.id()), contactsOnly, ""), http.StatusForbidden, "insufficient_scope")
	wantProblem(t, call(t, "GET", fmt.Sprintf("/v1/contacts/count?associated.business=%d", deal.id()), contactsOnly, ""), http.StatusForbidden, "insufficient_scope")
	for _, query := range []string{"associated.business=x", "associatedLabel=champion", "associated.contacts=1", "associated.business=1&associatedLabel=A"} {
		wantProblem(t, call(t, "GET", "/v1/contacts?"+query, c.key, ""), http.StatusBadRequest, "invalid_parameter")
	}
}

// Replaying the feed's association events from the start onto nothing rebuilds exactly the live set
// of associations, after a few hundred random writes: PUTs and DELETEs, batches, deletes and merges
// of their objects, some of them at once.
func TestAssociationEventsReplayToTheLiveSet(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	rng := rand.New(rand.NewPCG(45, 17))
	kinds := map[string][]int64{}
	paths := map[string]string{"contacts": "/v1/contacts", "business": "/v1/business", "organizations": "/v1/organizations"}
	bodies := map[string]string{"contacts": `{"name": "C"}`, "business": `{"title": "B"}`, "organizations": `{"name": "O"}`}
	newObject := func(kind string) {
		o, _ := create(t, c.key, paths[kind], bodies[kind])
		kinds[kind] = append(kinds[kind], o.id())
	}
	for _, kind := range []string{"contacts", "business", "organizations"} {
		for range 5 {
			newObject(kind)
		}
	}
	pick := func() (string, int64) {
		kind := []string{"contacts", "business", "organizations"}[rng.IntN(3)]
		ids := kinds[kind]
		return kind, ids[rng.IntN(len(ids))]
	}
	var mu sync.Mutex // kinds, rng
	op := func() {
		mu.Lock()
		from, fromID := pick()
		to, toID := pick()
		label := []string{"", "a", "b"}[rng.IntN(3)]
		n := rng.IntN(100)
		mu.Unlock()
		switch {
		case from == to:
		case n < 55:
			body := ""
			if label != "" {
				body = `{"label": "` + label + `"}`
			}
			call(t, "PUT", assocPath(from, fromID, to, toID), c.key, body)
		case n < 85:
			call(t, "DELETE", assocPath(from, fromID, to, toID)+"?label="+label, c.key, "")
		case n < 92:
			call(t, "DELETE", itemPath(paths[from], fromID), c.key, "")
			mu.Lock()
			newObject(from)
			mu.Unlock()
		case from != "business":
			call(t, "POST", itemPath(paths[from], fromID)+"/merge", c.key, fmt.Sprintf(`{"mergeIds": ["%d"]}`, toIDOf(kinds, from, fromID, rng, &mu)))
		}
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 75 {
				op()
			}
		})
	}
	wg.Wait()

	live := map[string]bool{}
	rows := sqlTexts(t, `SELECT a_kind || ' ' || a_id || ' ' || b_kind || ' ' || b_id || ' ' || label FROM associations WHERE company_id = $1`, c.id)
	for _, r := range rows {
		live[r] = true
	}
	evs, _ := waitFeed(t, c.key, "", "type=association.*", int(eventCount(t, c.id, "association.created")+eventCount(t, c.id, "association.deleted")))
	replayed := map[string]bool{}
	for _, e := range evs {
		k := eventAssociationKey(e.Data.Object)
		switch {
		case e.Type == "association.created" && replayed[k]:
			t.Errorf("event %d creates %s, which the replay holds", e.ID, k)
		case e.Type == "association.deleted" && !replayed[k]:
			t.Errorf("event %d deletes %s, which the replay does not hold", e.ID, k)
		}
		replayed[k] = e.Type == "association.created"
		if !replayed[k] {
			delete(replayed, k)
		}
	}
	merges := eventCount(t, c.id, "contact.merged") + eventCount(t, c.id, "organization.merged")
	deletes := eventCount(t, c.id, "contact.deleted") + eventCount(t, c.id, "business.deleted")
	t.Logf("%d association events replayed onto %d live associations, after %d merges and %d deletes", len(evs), len(live), merges, deletes)
	if merges == 0 || deletes == 0 {
		t.Errorf("%d merges, %d deletes; want some of each among the writes", merges, deletes)
	}
	if diff := cmp.Diff(live, replayed); diff != "" || len(live) == 0 {
		t.Errorf("the replayed associations (-live +replayed), of %d events:\n%s", len(evs), diff)
	}
}

// toIDOf returns an id of kinds[kind] other than id, or id when it is the only one.
func toIDOf(kinds map[string][]int64, kind string, id int64, rng *rand.Rand, mu *sync.Mutex) int64 {
	mu.Lock()
	defer mu.Unlock()
	ids := kinds[kind] // under mu: another op's newObject writes the map
	other := ids[rng.IntN(len(ids))]
	if other == id && len(ids) > 1 {
		other = ids[(slices.Index(ids, id)+1)%len(ids)]
	}
	return other
}

// eventAssociationKey is the row of the association an event's object holds, as the live set names it.
func eventAssociationKey(o obj) string {
	end := func(name string) (string, string) {
		e, _ := o[name].(map[string]any)
		return map[string]string{"contact": "contacts", "business": "business", "organization": "organizations"}[fmt.Sprint(e["object"])], fmt.Sprint(e["id"])
	}
	fk, fid := end("from")
	tk, tid := end("to")
	if tk < fk {
		fk, fid, tk, tid = tk, tid, fk, fid
	}
	label, _ := o["label"].(string)
	return fmt.Sprintf("%s %s %s %s %s", fk, fid, tk, tid, label)
}

// sqlTexts runs q and returns the first column of every row, as text.
func sqlTexts(t *testing.T, q string, args ...any) []string {
	t.Helper()
	rows, err := testEnv.st.db.QueryContext(context.Background(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

// A walk of an object's associations returns each that existed throughout the walk exactly once,
// while others are made and removed between its pages.
func TestAssociationListWalksOnceUnderConcurrentWrites(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ana, _ := create(t, c.key, "/v1/contacts", `{"name": "Ana"}`)
	var items []string
	for i := range 60 {
		deal, _ := create(t, c.key, "/v1/business", fmt.Sprintf(`{"title": "D%d"}`, i))
		items = append(items, fmt.Sprintf(`{"from": {"object": "contact", "id": %d}, "to": {"object": "business", "id": %d}}`, ana.id(), deal.id()))
	}
	wantStatus(t, call(t, "POST", "/v1/associations/batch/create", c.key, `{"items": [`+strings.Join(items, ",")+`]}`), http.StatusOK)
	stay := map[string]bool{}
	for i, it := range items {
		if i%3 != 0 { // every third is removed during the walk
			stay[it] = true
		}
	}
	seen := map[int64]int{}
	all := walkList[assocElem](t, c.key, fmt.Sprintf("/v1/contacts/%d/associations/business", ana.id()), "", 7, func(page int, _ []assocElem) {
		for i := page - 1; i < len(items); i += 9 { // removes, and makes new ones
			body := `{"atomic": false, "items": [` + items[i-i%3] + `]}`
			call(t, "POST", "/v1/associations/batch/delete", c.key, body)
			deal, _ := create(t, c.key, "/v1/business", `{"title": "New"}`)
			wantStatus(t, call(t, "PUT", assocPath("contacts", ana.id(), "business", deal.id()), c.key, ""), http.StatusCreated)
		}
	})
	for _, e := range all {
		seen[e.Object.id()]++
	}
	for it := range stay {
		var id int64
		fmt.Sscanf(it[strings.LastIndex(it, `"id": `)+6:], "%d", &id)
		if seen[id] != 1 {
			t.Errorf("deal %d, associated throughout the walk, was seen %d times", id, seen[id])
		}
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("deal %d was seen %d times", id, n)
		}
	}
}

// A key reads the association events between two kinds it reads, and no others.
func TestAssociationEventsNeedReadOnBothKinds(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	deal, _ := create(t, c.key, "/v1/business", `{"title": "Deal"}`)
	org, _ := create(t, c.key, "/v1/organizations", `{"name": "Org"}`)
	ana, _ := create(t, c.key, "/v1/contacts", `{"name": "Ana"}`)
	wantStatus(t, call(t, "PUT", assocPath("contacts", ana.id(), "business", deal.id()), c.key, ""), http.StatusCreated)
	wantStatus(t, call(t, "PUT", assocPath("contacts", ana.id(), "organizations", org.id()), c.key, ""), http.StatusCreated)
	all, _ := waitFeed(t, c.key, "", "type=association.created", 2)
	if len(all) != 2 {
		t.Fatalf("%d association events with a * key; want 2", len(all))
	}
	two := *makeKey(t, c.key, "events:read", "contacts:read", "business:read").Key
	one := *makeKey(t, c.key, "events:read", "contacts:read").Key
	for key, want := range map[string][]string{two: {"association.created"}, one: nil} {
		evs, _ := walkFeed(t, key, "", "")
		var got []string
		for _, e := range evs {
			if strings.HasPrefix(e.Type, "association.") {
				got = append(got, e.Type)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("association events of a key (-want +got):\n%s", diff)
		}
	}
	wantStatus(t, call(t, "GET", fmt.Sprintf("/v1/events/%d", all[0].ID), two, ""), http.StatusOK)
	wantProblem(t, call(t, "GET", fmt.Sprintf("/v1/events/%d", all[1].ID), two, ""), http.StatusNotFound, "not_found")
	wantProblem(t, call(t, "GET", "/v1/events?type=association.*", one, ""), http.StatusForbidden, "insufficient_scope")
	if got := readFeed(t, testEnv.baseURL, two, "", "type=association.*").Data; len(got) != 1 || got[0].ID != all[0].ID {
		t.Errorf("type=association.* with read on contacts and business: %v; want the first event alone", got)
	}
}

// An endpoint is sent the association events between two kinds its families read (those of the key
// that last wrote it), and no others.
func TestAssociationDeliveriesNeedBothKindsFamilies(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	deal, _ := create(t, c.key, "/v1/business", `{"title": "Deal"}`)
	org, _ := create(t, c.key, "/v1/organizations", `{"name": "Org"}`)
	ana, _ := create(t, c.key, "/v1/contacts", `{"name": "Ana"}`)
	// Enabled, as deliveries go only to enabled endpoints, on an address the suite's server refuses
	// to dial (it allows no loopback address).
	endpoint := sqlID(t, `INSERT INTO webhook_endpoints (company_id, url, events, secret, families)
		VALUES ($1, 'http://127.0.0.1:9/hooks', '{association.*}', 'whsec_test', '{contact,business,association}') RETURNING id`, c.id)
	wantStatus(t, call(t, "PUT", assocPath("contacts", ana.id(), "business", deal.id()), c.key, ""), http.StatusCreated)
	wantStatus(t, call(t, "PUT", assocPath("contacts", ana.id(), "organizations", org.id()), c.key, ""), http.StatusCreated)
	got := sqlTexts(t, `SELECT event_type FROM webhook_deliveries WHERE company_id = $1 AND endpoint_id = $2`, c.id, endpoint)
	if diff := cmp.Diff([]string{"association.created"}, got); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}
}

// A page of associations costs the same queries whatever its length, expansions included.
func TestAssociationListCostsAFixedNumberOfQueries(t *testing.T) {
	t.Parallel()
	proxy, dbURL := newDBProxy(t, testEnv.dbURL)
	base := startServer(t, map[string]string{"DATABASE_URL": dbURL, "ROLODEX_DB_MAX_CONNS": "2", "ROLODEX_WEBHOOK_SLOTS": "0"}, &syncBuffer{})
	c := newTestCompany(t)
	deal, _ := create(t, c.key, "/v1/business", `{"title": "Deal"}`)
	org, _ := create(t, c.key, "/v1/organizations", `{"name": "Org"}`)
	var items []string
	for range 50 {
		o, _ := create(t, c.key, "/v1/contacts", fmt.Sprintf(`{"name": "C", "organizationId": %d}`, org.id()))
		items = append(items, fmt.Sprintf(`{"from": {"object": "business", "id": %d}, "to": {"object": "contact", "id": %d}}`, deal.id(), o.id()))
	}
	wantStatus(t, call(t, "POST", "/v1/associations/batch/create", c.key, `{"items": [`+strings.Join(items, ",")+`]}`), http.StatusOK)
	queries := func(limit int) int64 {
		fewest := int64(-1)
		for range 3 { // the fewest of three: background work the proxy does not leave out may run beside
			wantStatus(t, callAt(t, nil, base, "GET", "/v1/statuses", c.key, ""), http.StatusOK) // the key in the server's cache
			proxy.queries.Store(0)
			path := fmt.Sprintf("/v1/business/%d/associations/contacts?limit=%d&expand[]=organization&expand[]=userCreator", deal.id(), limit)
			r := wantStatus(t, callAt(t, nil, base, "GET", path, c.key, ""), http.StatusOK)
			if n := strings.Count(string(r.body), `"organization":{`); n != limit {
				t.Fatalf("GET %s: %d expanded organizations; want %d", path, n, limit)
			}
			if n := proxy.queries.Load(); fewest < 0 || n < fewest {
				fewest = n
			}
		}
		return fewest
	}
	if one, fifty := queries(1), queries(50); one != fifty {
		t.Errorf("a page of 1 association cost %d queries, of 50 %d; want the same", one, fifty)
	}
}
