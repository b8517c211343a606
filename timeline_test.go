package main

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Tests of timeline.go: an object's activities and events in one list, newest first.

// entry is a timeline entry as the API answers it.
type entry struct {
	Kind     string     `json:"kind"`
	At       string     `json:"at"`
	Activity obj        `json:"activity"`
	Event    *eventBody `json:"event"`
}

// name is the entry as a short string: "call 12" of an activity, "contact.updated 7" of an event.
func (e entry) name() string {
	if e.Kind == "activity" {
		return fmt.Sprintf("%v %d", e.Activity["type"], e.Activity.id())
	}
	return fmt.Sprintf("%s %d", e.Event.Type, e.Event.ID)
}

// timelineNames walks the timeline of path with query, limit 3, and returns its entries' names.
func timelineNames(t *testing.T, key, path, query string, between ...func(page int, got []entry)) []string {
	t.Helper()
	var names []string
	for _, e := range walkList[entry](t, key, path+"/timeline", query, 3, between...) {
		names = append(names, e.name())
	}
	return names
}

func TestTimelineHasActivitiesAndEveryEventNewestFirst(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ana := mustCreate(t, c.key, "/v1/contacts", `{"name": "Ana"}`)
	path := itemPath("/v1/contacts", ana)
	for i := range 10 { // ten quick updates: ten entries, each with its own previousAttributes
		wantStatus(t, call(t, "PATCH", path, c.key, fmt.Sprintf(`{"city": "City %d"}`, i)), http.StatusOK)
	}
	deal := mustCreate(t, c.key, "/v1/business", `{"title": "Deal"}`)
	wantStatus(t, call(t, "PUT", assocPath("business", deal, "contacts", ana), c.key, `{"label": "champion"}`), http.StatusCreated)
	call1 := mustCreate(t, c.key, "/v1/activities", fmt.Sprintf(`{"type": "call", "subject": "Intro", "occurredAt": "2001-01-01T00:00:00Z",
		"targets": [{"object": "contact", "id": "%d"}, {"object": "business", "id": %d}]}`, ana, deal))
	task := mustCreate(t, c.key, "/v1/activities", fmt.Sprintf(`{"type": "task", "subject": "Offer", "occurredAt": "2999-01-01T00:00:00Z",
		"targets": [{"object": "contact", "id": "%d"}]}`, ana))
	mustCreate(t, c.key, "/v1/activities", `{"type": "note", "body": "not about Ana"}`)

	entries := walkList[entry](t, c.key, path+"/timeline", "", 4)
	var names []string
	for i, e := range entries {
		names = append(names, e.name())
		if i > 0 && e.At > entries[i-1].At {
			t.Errorf("entry %d at %s after one at %s: not newest first", i, e.At, entries[i-1].At)
		}
	}
	feed, _ := waitFeed(t, c.key, "", "", 1+10+1+1+3+3) // Ana's, the deal's, the association, and the activities' with their targets
	var want []string
	for _, ev := range slices.Backward(feed) {
		if ev.Type == "contact.created" || ev.Type == "contact.updated" || ev.Type == "association.created" && strings.Contains(fmt.Sprint(ev.Data.Object), "object:contact") {
			want = append(want, fmt.Sprintf("%s %d", ev.Type, ev.ID))
		}
	}
	want = slices.Concat([]string{fmt.Sprintf("task %d", task)}, want, []string{fmt.Sprintf("call %d", call1)})
	if diff := cmp.Diff(want, names); diff != "" {
		t.Fatalf("timeline (-want +got):\n%s", diff)
	}
	if len(want) != 1+3+10+1+1 { // the task, three association.created, ten updates, contact.created, the call
		t.Errorf("%d entries; want 16", len(want))
	}
	updates := 0
	for _, e := range entries {
		if e.Kind == "event" && e.Event.Type == "contact.updated" {
			prev := e.Event.Data.PreviousAttributes
			if want := fmt.Sprintf("City %d", 8-updates); updates < 9 && prev["city"] != want {
				t.Errorf("update %d: previousAttributes %v; want city %q", updates, prev, want)
			}
			updates++
		}
		if e.Kind == "activity" && e.At != e.Activity["occurredAt"] {
			t.Errorf("activity entry at %s; want its occurredAt %v", e.At, e.Activity["occurredAt"])
		}
	}

	// Filters: kind, type (activity types, event types, families), at.
	for query, want := range map[string][]string{
		"kind=activity":                          {fmt.Sprintf("task %d", task), fmt.Sprintf("call %d", call1)},
		"type=call":                              {fmt.Sprintf("call %d", call1)},
		"type=call&type=task&kind=activity":      {fmt.Sprintf("task %d", task), fmt.Sprintf("call %d", call1)},
		"type=association.*&type=call":           slices.Concat(names[1:4], names[len(names)-1:]),
		"at[lt]=2002-01-01T00:00:00Z":            {fmt.Sprintf("call %d", call1)},
		"at[gt]=2100-01-01T00:00:00Z&kind=event": nil,
	} {
		if diff := cmp.Diff(want, timelineNames(t, c.key, path, query)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", query, diff)
		}
	}
	if got := timelineNames(t, c.key, path, "kind=event&type=call&at[gte]=2000-01-01T00:00:00Z"); got != nil {
		t.Errorf("kind=event&type=call: %v; want nothing", got)
	}
	if got := timelineNames(t, c.key, path, "type=contact.updated"); len(got) != 10 {
		t.Errorf("type=contact.updated: %d entries; want 10", len(got))
	}
	// The deal's timeline has the call and the association, and none of Ana's updates.
	if got := timelineNames(t, c.key, itemPath("/v1/business", deal), "type=contact.updated&type=association.created&type=call"); len(got) != 3 {
		t.Errorf("deal's timeline: %v; want its two associations and the call", got)
	}
}

// A walk is one snapshot: entries made after its first page are left to the next walk, an activity
// moved in time stays in its place, an event of a later write is not shown: every entry once.
func TestTimelineWalkShowsEachEntryOnceWhileActivitiesMove(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ana := mustCreate(t, c.key, "/v1/contacts", `{"name": "Ana"}`)
	path := itemPath("/v1/contacts", ana)
	target := fmt.Sprintf(`"targets": [{"object": "contact", "id": "%d"}]`, ana)
	var acts []int64
	for i := range 12 {
		acts = append(acts, mustCreate(t, c.key, "/v1/activities", fmt.Sprintf(`{"type": "call", "subject": "c%d",
			"occurredAt": "2030-01-%02dT00:00:00Z", %s}`, i, i+1, target)))
	}
	before := timelineNames(t, c.key, path, "")
	moves := []string{
		`{"occurredAt": "2019-01-01T00:00:00Z"}`, // the newest, seen on the first page, to the very end
		`{"occurredAt": "2031-01-01T00:00:00Z"}`, // the oldest, not seen yet, to the very front
		`{"occurredAt": "2030-01-06T12:00:00Z", "subject": "moved within"}`,
	}
	pages := 0
	got := timelineNames(t, c.key, path, "", func(page int, _ []entry) {
		pages++
		if page == 1 {
			wantStatus(t, call(t, "PATCH", itemPath("/v1/activities", acts[11]), c.key, moves[0]), http.StatusOK)
			wantStatus(t, call(t, "PATCH", itemPath("/v1/activities", acts[0]), c.key, moves[1]), http.StatusOK)
			wantStatus(t, call(t, "PATCH", itemPath("/v1/activities", acts[9]), c.key, moves[2]), http.StatusOK)
			wantStatus(t, call(t, "PATCH", itemPath("/v1/activities", acts[2]), c.key, moves[2]), http.StatusOK)
		}
		mustCreate(t, c.key, "/v1/activities", fmt.Sprintf(`{"type": "note", "body": "new", "occurredAt": "2030-01-01T12:00:00Z", %s}`, target))
		wantStatus(t, call(t, "PATCH", path, c.key, fmt.Sprintf(`{"city": "C%d"}`, page)), http.StatusOK)
	})
	if diff := cmp.Diff(before, got); diff != "" {
		t.Errorf("a walk while activities move and come (-before +walk):\n%s", diff)
	}
	after := timelineNames(t, c.key, path, "")
	if len(after) != len(before)+3*pages || after[0] != fmt.Sprintf("call %d", acts[0]) || after[len(after)-1] != fmt.Sprintf("call %d", acts[11]) {
		t.Errorf("a new walk = %v; want the moves, and %d new notes with their associations and updates", after, pages)
	}
}

func TestTimelineScopesAndBadRequests(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ana := mustCreate(t, c.key, "/v1/contacts", `{"name": "Ana"}`)
	deal := mustCreate(t, c.key, "/v1/business", `{"title": "Deal"}`)
	path := itemPath("/v1/contacts", ana)
	wantStatus(t, call(t, "PUT", assocPath("contacts", ana, "business", deal), c.key, ""), http.StatusCreated)
	act := mustCreate(t, c.key, "/v1/activities", fmt.Sprintf(`{"type": "call", "subject": "x", "targets": [{"object": "contact", "id": "%d"}]}`, ana))

	kinds := func(key string) []string {
		var ks []string
		for _, e := range walkList[entry](t, key, path+"/timeline", "", 10) {
			ks = append(ks, e.name())
		}
		return ks
	}
	evs, _ := waitFeed(t, c.key, "", "", 5)
	created, assoc := fmt.Sprintf("contact.created %d", evs[0].ID), ""
	var actAssoc string
	for _, e := range evs {
		if e.Type == "association.created" && assoc == "" {
			assoc = fmt.Sprintf("association.created %d", e.ID)
		} else if e.Type == "association.created" {
			actAssoc = fmt.Sprintf("association.created %d", e.ID)
		}
	}
	call1 := fmt.Sprintf("call %d", act)
	for _, tc := range []struct {
		scopes []string
		want   []string
	}{
		{[]string{"contacts:read", "activities:read"}, []string{call1}},
		{[]string{"contacts:read", "events:read"}, []string{created}},                         // association events need read on both kinds
		{[]string{"contacts:read", "events:read", "business:read"}, []string{assoc, created}}, // the activity's association needs activities:read
		{[]string{"contacts:read", "events:read", "activities:read"}, []string{actAssoc, call1, created}},
	} {
		got := kinds(*makeKey(t, c.key, tc.scopes...).Key)
		slices.Sort(got)
		slices.Sort(tc.want)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("timeline with %v (-want +got):\n%s", tc.scopes, diff)
		}
	}
	onlyEvents := *makeKey(t, c.key, "contacts:read", "events:read").Key
	for _, tc := range []struct{ key, query string }{
		{*makeKey(t, c.key, "contacts:read").Key, ""},
		{*makeKey(t, c.key, "activities:read", "events:read").Key, ""}, // read on the object's kind
		{onlyEvents, "kind=activity"},
		{onlyEvents, "type=call"},
		{onlyEvents, "type=business.*"},
		{*makeKey(t, c.key, "contacts:read", "activities:read").Key, "type=contact.updated"},
	} {
		wantProblem(t, call(t, "GET", path+"/timeline?"+tc.query, tc.key, ""), http.StatusForbidden, "insufficient_scope")
	}

	for _, query := range []string{"kind=note", "type=calls", "type=contact.*,nope", "limit=0", "at[gte]=yesterday", "cursor=abc", "sort=at"} {
		wantProblem(t, call(t, "GET", path+"/timeline?"+query, c.key, ""), http.StatusBadRequest, "invalid_parameter")
	}
	wantProblem(t, call(t, "GET", path+"/timeline?expand[]=targets", c.key, ""), http.StatusBadRequest, "invalid_expand")
	first := listPage[entry](t, c.key, path+"/timeline?limit=1")
	other := mustCreate(t, c.key, "/v1/contacts", `{"name": "Eve"}`)
	for _, p := range []string{itemPath("/v1/contacts", other) + "/timeline?limit=1&cursor=", path + "/timeline?limit=1&kind=event&cursor="} {
		wantProblem(t, call(t, "GET", p+*first.Pagination.NextCursor, c.key, ""), http.StatusBadRequest, "invalid_parameter")
	}
	d := newTestCompany(t)
	wantProblem(t, call(t, "GET", path+"/timeline", d.key, ""), http.StatusNotFound, "not_found")
	wantProblem(t, call(t, "GET", "/v1/organizations/999999/timeline", c.key, ""), http.StatusNotFound, "not_found")
	gone := mustCreate(t, c.key, "/v1/contacts", `{"name": "Gone"}`) // its events stay: contact.created, contact.deleted
	wantStatus(t, call(t, "DELETE", itemPath("/v1/contacts", gone), c.key, ""), http.StatusNoContent)
	wantProblem(t, call(t, "GET", itemPath("/v1/contacts", gone)+"/timeline", c.key, ""), http.StatusNotFound, "not_found")
	wantProblem(t, call(t, "GET", itemPath("/v1/business", deal)+"/timeline", *makeKey(t, c.key, "contacts:read", "events:read").Key, ""),
		http.StatusForbidden, "insufficient_scope")
}
