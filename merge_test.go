package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Tests of merge.go: merging duplicates (API.md section 16), through the HTTP API.

// mergeAnswer is the answer of a merge.
type mergeAnswer struct {
	Object    obj
	MergedIds []any
	Changes   map[string]struct{ From, To any }
	Repointed map[string]int
	DryRun    *bool
}

// merge POSTs a merge of the ids of body into the object at path, and stops the test unless 200
// with "dryRun": false.
func merge(t *testing.T, key, path, body string) (mergeAnswer, response) {
	t.Helper()
	r := wantStatus(t, call(t, "POST", path+"/merge", key, body), http.StatusOK)
	a := decode[mergeAnswer](t, r.body)
	if a.DryRun == nil || *a.DryRun {
		t.Errorf("POST %s/merge: dryRun %v; want false", path, a.DryRun)
	}
	return a, r
}

// dryRunOf decodes a dry run's answer, fails the test unless it says "dryRun": true, and returns it
// as the merge's own would read: "dryRun": false.
func dryRunOf(t *testing.T, r response) mergeAnswer {
	t.Helper()
	a := decode[mergeAnswer](t, wantStatus(t, r, http.StatusOK).body)
	if a.DryRun == nil || !*a.DryRun {
		t.Errorf("%s %s: dryRun %v; want true", r.method, r.path, a.DryRun)
	}
	a.DryRun = new(bool)
	return a
}

// wantMerged checks a 404 "merged" that names into.
func wantMerged(t *testing.T, r response, into any) {
	t.Helper()
	p := decode[struct {
		problemBody
		MergedInto any
	}](t, r.body)
	if r.status != http.StatusNotFound || p.Code != "merged" || p.MergedInto != into || p.Detail == "" ||
		p.RequestID != r.header.Get("X-Request-Id") || r.header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("%s %s = %d %s; want 404 merged into %v", r.method, r.path, r.status, r.body, into)
	}
}

func TestMergeContactsKeepsTheSurvivorAndItsValues(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	s, _ := create(t, c.key, "/v1/contacts", `{"name": "Ana", "email": "ana@x.com"}`)
	l1, _ := create(t, c.key, "/v1/contacts", `{"name": "Ana B", "email": "ana.b@y.com", "city": "Lisboa", "secondaryEmail": "b2@y.com"}`)
	l2, _ := create(t, c.key, "/v1/contacts", `{"name": "A", "phone": "123", "city": "Porto", "email": "ANA@x.com"}`)
	sPath := itemPath("/v1/contacts", s.id())
	a, r := merge(t, c.key, sPath, fmt.Sprintf(`{"mergeIds": ["%d", %d]}`, l1.id(), l2.id()))

	if a.Object.id() != s.id() || a.Object["name"] != "Ana" || a.Object["email"] != "ana@x.com" {
		t.Errorf("survivor %v; want id %d keeping its name and e-mail", a.Object, s.id())
	}
	// The first non-null value in mergeIds order; the losing e-mail fills secondaryEmail before a
	// merged contact's own secondaryEmail; l2's e-mail is the survivor's but for case, so it loses nothing.
	want := map[string]any{"city": "Lisboa", "phone": "123", "secondaryEmail": "ana.b@y.com"}
	for k, v := range want {
		if a.Object[k] != v {
			t.Errorf("%s = %v; want %v", k, a.Object[k], v)
		}
		if ch, ok := a.Changes[k]; !ok || ch.From != nil || ch.To != v {
			t.Errorf("changes[%s] = %+v; want from null to %v", k, ch, v)
		}
	}
	if len(a.Changes) != len(want) {
		t.Errorf("changes %v; want exactly %v", a.Changes, want)
	}
	wantIDs := []any{strconv.FormatInt(l1.id(), 10), strconv.FormatInt(l2.id(), 10)}
	if diff := cmp.Diff(wantIDs, a.MergedIds); diff != "" || len(a.Repointed) != 0 {
		t.Errorf("mergedIds (-want +got):\n%s repointed %v", diff, a.Repointed)
	}
	got := mustGet(t, c.key, sPath)
	if !cmp.Equal(decode[obj](t, got.body), a.Object) || got.header.Get("ETag") != r.header.Get("ETag") {
		t.Errorf("GET survivor = %s %s; want the merge's object %v, ETag %s", got.header.Get("ETag"), got.body, a.Object, r.header.Get("ETag"))
	}
	if n := countOf(t, c.key, "/v1/contacts/count"); n != 1 {
		t.Errorf("%d contacts after the merge; want 1", n)
	}

	// Old ids lead to the survivor, for retrieve, update, delete and the timeline (which has their events).
	for _, l := range []obj{l1, l2} {
		p := itemPath("/v1/contacts", l.id())
		for _, rr := range []response{call(t, "GET", p, c.key, ""), call(t, "PATCH", p, c.key, `{"city": "X"}`),
			call(t, "DELETE", p, c.key, ""), call(t, "GET", p+"/timeline", c.key, "")} {
			wantMerged(t, rr, strconv.FormatInt(s.id(), 10))
		}
	}

	// Events: the survivor's update, a delete per merged contact naming the survivor, one merged.
	evs, _ := waitFeed(t, c.key, "", "type=contact.*", 7)
	if diff := cmp.Diff([]string{"contact.created", "contact.created", "contact.created", "contact.deleted", "contact.deleted",
		"contact.updated", "contact.merged"}, typesOf(evs)); diff != "" {
		t.Fatalf("event types (-want +got):\n%s", diff)
	}
	for _, e := range evs[3:] {
		if e.RequestID != r.header.Get("X-Request-Id") {
			t.Errorf("%s of request %s; want the merge's", e.Type, e.RequestID)
		}
	}
	for i, e := range evs[3:5] {
		if e.Data.MergedInto != strconv.FormatInt(s.id(), 10) || e.Data.Object.id() != []obj{l1, l2}[i].id() {
			t.Errorf("delete event %d data %+v; want the merged contact and mergedInto %d", i, e.Data, s.id())
		}
	}
	if prev := evs[5].Data.PreviousAttributes; !cmp.Equal(prev, obj{"city": nil, "phone": nil, "secondaryEmail": nil}) {
		t.Errorf("previousAttributes %v", prev)
	}
	if m := evs[6].Data; !cmp.Equal(m.MergedIds, wantIDs) || !cmp.Equal(m.Object, a.Object) {
		t.Errorf("contact.merged data %+v; want the survivor and mergedIds %v", m, wantIDs)
	}
}

// Custom values merge field by field: a multiSelect takes the union, and a unique value a merged
// contact held moves to the survivor, in the merge's one transaction, without a conflict.
func TestMergeCustomValues(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	defineField(t, c.key, `{"object": "contact", "key": "tags", "label": "T", "type": "multiSelect", "options": [{"value": "a"}, {"value": "b"}, {"value": "c"}]}`)
	defineField(t, c.key, `{"object": "contact", "key": "code", "label": "C", "type": "text", "unique": true}`)
	defineField(t, c.key, `{"object": "contact", "key": "tier", "label": "Ti", "type": "text"}`)
	s := createPath(t, c.key, "/v1/contacts", `{"name": "S", "custom": {"tags": ["b"], "tier": "gold"}}`)
	l1, _ := create(t, c.key, "/v1/contacts", `{"name": "L1", "custom": {"tags": ["c", "b"], "code": "Z9", "tier": "silver"}}`)
	l2, _ := create(t, c.key, "/v1/contacts", `{"name": "L2", "custom": {"tags": ["a"], "code": "Y8"}}`)
	body := fmt.Sprintf(`{"mergeIds": ["%d", "%d"]}`, l1.id(), l2.id())

	dry := dryRunOf(t, call(t, "POST", s+"/merge", c.key, `{"dryRun": true, `+body[1:]))
	wantFields(t, call(t, "POST", "/v1/contacts", c.key, `{"name": "B", "custom": {"code": "z9"}}`), "custom.code") // l1 still holds it
	a, r := merge(t, c.key, s, body)
	var got struct {
		Object struct{ Custom json.RawMessage }
	}
	want := `{"tags":["b","c","a"],"code":"Z9","tier":"gold"}`
	if json.Unmarshal(r.body, &got); string(got.Object.Custom) != want || customOf(t, c.key, s) != want {
		t.Errorf("merged custom %s, stored %s; want %s", got.Object.Custom, customOf(t, c.key, s), want)
	}
	if diff := cmp.Diff(map[string]struct{ From, To any }{"custom.tags": {[]any{"b"}, []any{"b", "c", "a"}},
		"custom.code": {nil, "Z9"}}, a.Changes); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	delete(dry.Object, "updatedAt")
	delete(a.Object, "updatedAt")
	if diff := cmp.Diff(a, dry); diff != "" {
		t.Errorf("dry run vs merge (-merge +dry):\n%s", diff)
	}
	// The survivor holds the unique value now, and the merged contacts' other values are free.
	if n := countOf(t, c.key, "/v1/contacts/count?custom.code=z9"); n != 1 {
		t.Errorf("%d contacts with code z9; want the survivor", n)
	}
	wantFields(t, call(t, "POST", "/v1/contacts", c.key, `{"name": "B", "custom": {"code": "z9"}}`), "custom.code")
	create(t, c.key, "/v1/contacts", `{"name": "B", "custom": {"code": "y8"}}`)
}

func TestMergeDryRunAnswersTheMergeAndWritesNothing(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	s := createPath(t, c.key, "/v1/contacts", `{"name": "Ana"}`)
	l, _ := create(t, c.key, "/v1/contacts", `{"name": "Ana B", "city": "Lisboa"}`)
	lPath := itemPath("/v1/contacts", l.id())
	before, beforeL := mustGet(t, c.key, s), mustGet(t, c.key, lPath)
	body := fmt.Sprintf(`{"mergeIds": ["%d"], "dryRun": true}`, l.id())
	dry := dryRunOf(t, call(t, "POST", s+"/merge?expand[]=userCreator", c.key, body, "Idempotency-Key", "dry-1"))
	wantUnchanged(t, c.key, s, before)
	wantUnchanged(t, c.key, lPath, beforeL)
	if n := countOf(t, c.key, "/v1/contacts/count"); n != 2 {
		t.Errorf("%d contacts after a dry run; want 2", n)
	}
	if n := eventCount(t, c.id, ""); n != 2 {
		t.Errorf("%d events after a dry run; want the 2 creates", n)
	}
	real := decode[mergeAnswer](t, wantStatus(t, call(t, "POST", s+"/merge?expand[]=userCreator", c.key,
		fmt.Sprintf(`{"mergeIds": ["%d"]}`, l.id())), http.StatusOK).body)
	// The same answer but for the moment of the change, and dryRun (false here: dryRunOf set it so).
	delete(dry.Object, "updatedAt")
	delete(real.Object, "updatedAt")
	if diff := cmp.Diff(real, dry); diff != "" || dry.Object["userCreator"] == nil || dry.Object["city"] != "Lisboa" {
		t.Errorf("dry run vs merge (-merge +dry):\n%s", diff)
	}
}

func TestMergeOrganizationsRepointsWhatReferencesThem(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	org := func(name string) int64 {
		o, _ := create(t, c.key, "/v1/organizations", `{"name": "`+name+`"}`)
		return o.id()
	}
	o1, o2, o3 := org("Acme"), org("ACME Inc"), org("Acme SL")
	c1, _ := create(t, c.key, "/v1/contacts", fmt.Sprintf(`{"name": "c1", "organizationId": %d}`, o2))
	c2, _ := create(t, c.key, "/v1/contacts", fmt.Sprintf(`{"name": "c2", "organizationId": %d}`, o3))
	c3, _ := create(t, c.key, "/v1/contacts", fmt.Sprintf(`{"name": "c3", "organizationId": %d}`, o1))
	b1, _ := create(t, c.key, "/v1/business", fmt.Sprintf(`{"title": "b1", "organizationId": %d}`, o2))
	path := itemPath("/v1/organizations", o1)
	body := fmt.Sprintf(`{"mergeIds": [%d, "%d"]}`, o2, o3)

	// An organization merge needs write on contacts and business too.
	for _, scopes := range [][]string{{"organizations:write"}, {"organizations:write", "contacts:write"},
		{"organizations:write", "business:write"}} {
		wantProblem(t, call(t, "POST", path+"/merge", *makeKey(t, c.key, scopes...).Key, body), http.StatusForbidden, "insufficient_scope")
	}
	a, r := merge(t, *makeKey(t, c.key, "organizations:write", "contacts:write", "business:write").Key, path, body)
	num := func(id int64) json.Number { return json.Number(strconv.FormatInt(id, 10)) }
	if diff := cmp.Diff(map[string]int{"contacts": 2, "business": 1}, a.Repointed); diff != "" {
		t.Errorf("repointed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]any{num(o2), num(o3)}, a.MergedIds); diff != "" || a.Object["name"] != "Acme" || len(a.Changes) != 0 {
		t.Errorf("mergedIds (-want +got):\n%s object %v changes %v", diff, a.Object, a.Changes)
	}
	for _, p := range []string{itemPath("/v1/contacts", c1.id()), itemPath("/v1/contacts", c2.id()),
		itemPath("/v1/contacts", c3.id()), itemPath("/v1/business", b1.id())} {
		if got := decode[obj](t, mustGet(t, c.key, p).body)["organizationId"]; got != num(o1) {
			t.Errorf("%s organizationId = %v; want %d", p, got, o1)
		}
	}
	wantMerged(t, call(t, "GET", itemPath("/v1/organizations", o3), c.key, ""), num(o1))

	// Each re-pointed object has its *.updated event, as if patched; the merged ones their deletes.
	all, _ := waitFeed(t, c.key, "", "", 13)
	var types []string
	for _, e := range all[7:] {
		types = append(types, e.Type)
		if e.RequestID != r.header.Get("X-Request-Id") {
			t.Errorf("%s event of request %v; want the merge's", e.Type, e.RequestID)
		}
		was := e.Data.PreviousAttributes["organizationId"]
		if e.Type != "organization.deleted" && e.Type != "organization.merged" && (len(e.Data.PreviousAttributes) != 1 || was != num(o2) && was != num(o3)) {
			t.Errorf("%s previousAttributes %v; want the old organizationId alone", e.Type, e.Data.PreviousAttributes)
		}
	}
	if diff := cmp.Diff([]string{"contact.updated", "contact.updated", "business.updated", "organization.deleted",
		"organization.deleted", "organization.merged"}, types); diff != "" {
		t.Errorf("the merge's events (-want +got):\n%s", diff)
	}
	if into := all[10].Data.MergedInto; into != num(o1) {
		t.Errorf("organization.deleted mergedInto %v; want %d", into, o1)
	}
}

func TestMergeRefusesBadMergeIdsAndChangesNothing(t *testing.T) {
	t.Parallel()
	c, other := newTestCompany(t), newTestCompany(t)
	s, _ := create(t, c.key, "/v1/contacts", `{"name": "Ana"}`)
	l, _ := create(t, c.key, "/v1/contacts", `{"name": "Ana B"}`)
	o, _ := create(t, other.key, "/v1/contacts", `{"name": "Other's"}`)
	sPath, lPath := itemPath("/v1/contacts", s.id()), itemPath("/v1/contacts", l.id())
	before, beforeL := mustGet(t, c.key, sPath), mustGet(t, c.key, lPath)
	ls, ss, os := strconv.FormatInt(l.id(), 10), strconv.FormatInt(s.id(), 10), strconv.FormatInt(o.id(), 10)
	ten := `"` + ls + `"`
	for range 9 {
		ten += `, "` + ls + `"`
	}
	for _, tc := range []struct {
		body   string
		fields []string
	}{
		{`{"mergeIds": []}`, []string{"mergeIds"}},
		{`{"mergeIds": [` + ten + `]}`, []string{"mergeIds"}},
		{`{}`, []string{"mergeIds"}},
		{`{"mergeIds": "` + ls + `"}`, []string{"mergeIds"}},
		{`{"mergeIds": ["` + ls + `"], "dryRun": "yes"}`, []string{"dryRun"}},
		{`{"mergeIds": ["` + ls + `"], "into": 1}`, []string{"into"}},
		{`{"mergeIds": ["` + ls + `", ` + ls + `]}`, []string{"mergeIds[1]"}},
		{`{"mergeIds": ["` + ss + `", "` + ls + `"]}`, []string{"mergeIds[0]"}},
		{`{"mergeIds": [1.5, "abc", "0", "01", null]}`, []string{"mergeIds[0]", "mergeIds[1]", "mergeIds[2]", "mergeIds[3]", "mergeIds[4]"}},
		{`{"mergeIds": ["` + ls + `", "` + os + `", "999999999"], "dryRun": true}`, []string{"mergeIds[1]", "mergeIds[2]"}},
	} {
		wantFields(t, call(t, "POST", sPath+"/merge", c.key, tc.body), tc.fields...)
	}
	// An unknown survivor, or another company's, is 404; a stale If-Match 412.
	body := `{"mergeIds": ["` + ls + `"]}`
	wantProblem(t, call(t, "POST", "/v1/contacts/999999999/merge", c.key, body), http.StatusNotFound, "not_found")
	wantProblem(t, call(t, "POST", itemPath("/v1/contacts", o.id())+"/merge", c.key, `{}`), http.StatusNotFound, "not_found")
	wantProblem(t, call(t, "POST", sPath+"/merge", c.key, body, "If-Match", `"999"`), http.StatusPreconditionFailed, "precondition_failed")
	wantProblem(t, call(t, "POST", sPath+"/merge", *makeKey(t, c.key, "contacts:read").Key, body), http.StatusForbidden, "insufficient_scope")
	wantUnchanged(t, c.key, sPath, before)
	wantUnchanged(t, c.key, lPath, beforeL)
	if n := eventCount(t, c.id, ""); n != 2 {
		t.Errorf("%d events; want the 2 creates", n)
	}
	// The right If-Match merges; the same Idempotency-Key answers the same again.
	hdr := []string{"If-Match", before.header.Get("ETag"), "Idempotency-Key", "m1"}
	r := wantStatus(t, call(t, "POST", sPath+"/merge", c.key, body, hdr...), http.StatusOK)
	again := wantStatus(t, call(t, "POST", sPath+"/merge", c.key, body, hdr...), http.StatusOK)
	if string(again.body) != string(r.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay %s; want %s replayed", again.body, r.body)
	}
}

// A merged id merged into an object that is merged in turn leads to the last survivor.
func TestMergedIdsFollowLaterMerges(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	a := createPath(t, c.key, "/v1/contacts", `{"name": "a"}`)
	b, _ := create(t, c.key, "/v1/contacts", `{"name": "b"}`)
	d, _ := create(t, c.key, "/v1/contacts", `{"name": "d"}`)
	merge(t, c.key, a, fmt.Sprintf(`{"mergeIds": ["%d"]}`, b.id()))
	merge(t, c.key, itemPath("/v1/contacts", d.id()), `{"mergeIds": ["`+a[len("/v1/contacts/"):]+`"]}`)
	for _, p := range []string{a, itemPath("/v1/contacts", b.id())} {
		wantMerged(t, call(t, "GET", p, c.key, ""), strconv.FormatInt(d.id(), 10))
	}
	// Merging a merged id is merging nothing that exists; so is merging into one.
	wantFields(t, call(t, "POST", itemPath("/v1/contacts", d.id())+"/merge", c.key, fmt.Sprintf(`{"mergeIds": ["%d"]}`, b.id())), "mergeIds[0]")
	wantMerged(t, call(t, "POST", a+"/merge", c.key, fmt.Sprintf(`{"mergeIds": ["%d"]}`, d.id())), strconv.FormatInt(d.id(), 10))
}

// Two merges racing over the same contacts: one wins, the other answers 404 or 422, and every
// contact ends either alive or a merged id that leads to the winner's survivor.
func TestMergeConcurrentMergesOneWins(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for round := range 8 {
		var ids [3]int64
		for i := range ids {
			o, _ := create(t, c.key, "/v1/contacts", fmt.Sprintf(`{"name": "r%d-%d", "city": "c%d"}`, round, i, i))
			ids[i] = o.id()
		}
		// Survivor and merged ids: each into the other; or two survivors after one contact.
		merges := [2][]int64{{ids[0], ids[1], ids[2]}, {ids[1], ids[0], ids[2]}}
		if round%2 == 1 {
			merges = [2][]int64{{ids[0], ids[1]}, {ids[2], ids[1]}}
		}
		var wg sync.WaitGroup
		var got [2]response
		for i, m := range merges {
			wg.Go(func() {
				body := fmt.Sprintf(`{"mergeIds": ["%d"]}`, m[1])
				if len(m) == 3 {
					body = fmt.Sprintf(`{"mergeIds": ["%d", "%d"]}`, m[1], m[2])
				}
				got[i], _ = send(nil, testEnv.baseURL, "POST", itemPath("/v1/contacts", m[0])+"/merge", c.key, body)
			})
		}
		wg.Wait()
		winner := -1
		for i, r := range got {
			switch r.status {
			case http.StatusOK:
				if winner >= 0 {
					t.Errorf("round %d: both merges won", round)
				}
				winner = i
			case http.StatusNotFound, http.StatusUnprocessableEntity:
			default:
				t.Errorf("round %d merge %d: %d %s", round, i, r.status, r.body)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no merge won (%d %s, %d %s)", round, got[0].status, got[0].body, got[1].status, got[1].body)
		}
		survivor := merges[winner][0]
		for _, id := range ids {
			r := call(t, "GET", itemPath("/v1/contacts", id), c.key, "")
			switch {
			case r.status == http.StatusOK && !slices.Contains(merges[winner][1:], id):
			case r.status == http.StatusNotFound && slices.Contains(merges[winner][1:], id):
				wantMerged(t, r, strconv.FormatInt(survivor, 10))
			default:
				t.Errorf("round %d: GET contact %d = %d %s after merge %v won", round, id, r.status, r.body, merges[winner])
			}
		}
	}
}

// Two organization merges racing, each into the other: one wins, the other answers 404 or 422, and
// every contact of both points at the winner's survivor: no reference dangles.
func TestMergeConcurrentOrganizationMergesLeaveNoDanglingReference(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for round := range 4 {
		var orgs [2]int64
		for i := range orgs {
			o, _ := create(t, c.key, "/v1/organizations", fmt.Sprintf(`{"name": "o%d-%d"}`, round, i))
			orgs[i] = o.id()
			create(t, c.key, "/v1/contacts", fmt.Sprintf(`{"name": "c%d-%d", "organizationId": %d}`, round, i, o.id()))
		}
		var wg sync.WaitGroup
		var got [2]response
		for i := range orgs {
			wg.Go(func() {
				got[i], _ = send(nil, testEnv.baseURL, "POST", itemPath("/v1/organizations", orgs[i])+"/merge", c.key,
					fmt.Sprintf(`{"mergeIds": [%d]}`, orgs[1-i]))
			})
		}
		wg.Wait()
		won := slices.IndexFunc(got[:], func(r response) bool { return r.status == http.StatusOK })
		if lost := got[1-max(won, 0)].status; won < 0 || lost != http.StatusNotFound && lost != http.StatusUnprocessableEntity {
			t.Fatalf("round %d: %d %s, %d %s; want one 200 and one 404 or 422", round, got[0].status, got[0].body, got[1].status, got[1].body)
		}
		if n := countOf(t, c.key, fmt.Sprintf("/v1/contacts/count?organizationId=%d", orgs[won])); n != 2 {
			t.Errorf("round %d: %d contacts of the survivor; want both", round, n)
		}
		wantMerged(t, call(t, "GET", itemPath("/v1/organizations", orgs[1-won]), c.key, ""), json.Number(strconv.FormatInt(orgs[won], 10)))
	}
}

// mergeContacts is how many contacts TestMergeRepointsManyContacts re-points: `go test -run
// TestMergeRepointsManyContacts -merge-contacts 10000 -v .` measures the issue's case.
var mergeContacts = flag.Int("merge-contacts", 1000, "contacts TestMergeRepointsManyContacts re-points")

// An organization merge re-points many contacts in a fixed number of statements, within the request
// deadline; the test logs how long it took.
func TestMergeRepointsManyContacts(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	o1 := createPath(t, c.key, "/v1/organizations", `{"name": "Keep"}`)
	o2, _ := create(t, c.key, "/v1/organizations", `{"name": "Dup"}`)
	sqlIDs(t, `INSERT INTO contacts (company_id, user_creator_id, name, organization_id)
		SELECT $1, $2, 'c' || g, $3 FROM generate_series(1, $4::int) g RETURNING 0`, c.id, c.userID, o2.id(), *mergeContacts)
	start := time.Now()
	a, _ := merge(t, c.key, o1, fmt.Sprintf(`{"mergeIds": [%d]}`, o2.id()))
	t.Logf("merged an organization of %d contacts in %v", *mergeContacts, time.Since(start))
	if a.Repointed["contacts"] != *mergeContacts {
		t.Errorf("repointed %v; want %d contacts", a.Repointed, *mergeContacts)
	}
	if n := countOf(t, c.key, "/v1/contacts/count?organizationId="+o1[len("/v1/organizations/"):]); n != int64(*mergeContacts) {
		t.Errorf("%d contacts of the survivor; want %d", n, *mergeContacts)
	}
	if n := eventCount(t, c.id, "contact.updated"); n != int64(*mergeContacts) {
		t.Errorf("%d contact.updated events; want %d", n, *mergeContacts)
	}
}
