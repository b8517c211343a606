package main

import (
	"bytes"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Tests of activities.go: notes, tasks, calls, meetings and e-mails, and their targets.

// targetsOf returns an activity's targets as "object id" strings.
func targetsOf(t *testing.T, a obj) []string {
	t.Helper()
	list, ok := a["targets"].([]any)
	if !ok {
		t.Fatalf("targets of %v: not an array", a)
	}
	out := []string{}
	for _, x := range list {
		m, _ := x.(map[string]any)
		out = append(out, fmt.Sprintf("%v %v", m["object"], m["id"]))
	}
	return out
}

// activityIDs walks the list of activities with query and returns their ids in order.
func activityIDs(t *testing.T, key, query string) []int64 {
	t.Helper()
	ids := []int64{}
	for _, a := range walkList[obj](t, key, "/v1/activities", query, 2) {
		ids = append(ids, a.id())
	}
	return ids
}

func TestActivitiesCreateReadUpdateDelete(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	before := time.Now().UTC().Add(-time.Second)
	note, r := create(t, c.key, "/v1/activities", `{"type": "note", "body": "  Called back;\n\tverbatim  "}`)
	wantKeys := []string{"id", "type", "subject", "body", "occurredAt", "dueAt", "doneAt", "durationSeconds", "userOwnerId",
		"userCreatorId", "createdAt", "updatedAt", "custom", "targets"}
	if diff := cmp.Diff(wantKeys, jsonKeys(t, r.body)); diff != "" {
		t.Errorf("keys of an activity (-want +got):\n%s", diff)
	}
	occurred, err := time.Parse(time.RFC3339Nano, fmt.Sprint(note["occurredAt"]))
	if err != nil || occurred.Before(before) || note["occurredAt"] != note["createdAt"] || note["subject"] != nil ||
		note["body"] != "  Called back;\n\tverbatim  " || note["userOwnerId"] != jsonNum(c.userID) || note["userCreatorId"] != jsonNum(c.userID) ||
		len(targetsOf(t, note)) != 0 || r.header.Get("Location") != itemPath("/v1/activities", note.id()) {
		t.Errorf("note with defaults = %s (Location %s)", r.body, r.header.Get("Location"))
	}
	if got := mustGet(t, c.key, itemPath("/v1/activities", note.id())); !bytes.Equal(got.body, r.body) || got.header.Get("ETag") != `"1"` {
		t.Errorf("GET = %s %s; want the create's answer %s", got.header.Get("ETag"), got.body, r.body)
	}

	task, _ := create(t, c.key, "/v1/activities", `{"type": "task", "subject": "Send the offer", "occurredAt": "2030-01-02T03:04:05.678+02:00",
		"dueAt": "2030-01-05T00:00:00Z", "durationSeconds": 604800}`)
	if task["occurredAt"] != "2030-01-02T01:04:05.678Z" || task["dueAt"] != "2030-01-05T00:00:00.000Z" || task["doneAt"] != nil ||
		task["durationSeconds"] != jsonNum(604800) {
		t.Errorf("task = %v", task)
	}
	path := itemPath("/v1/activities", task.id())
	done := decode[obj](t, wantStatus(t, call(t, "PATCH", path, c.key, `{"doneAt": "2030-01-04T10:00:00Z", "durationSeconds": null}`), http.StatusOK).body)
	if done["doneAt"] != "2030-01-04T10:00:00.000Z" || done["durationSeconds"] != nil || done["subject"] != "Send the offer" {
		t.Errorf("PATCH = %v", done)
	}

	// Every field rule, on create and on PATCH.
	for _, tc := range []struct {
		body   string
		fields []string
	}{
		{`{}`, []string{"type"}},
		{`{"type": "lunch", "subject": "x"}`, []string{"type"}},
		{`{"type": null, "subject": "x"}`, []string{"type"}},
		{`{"type": "call"}`, []string{"subject"}},
		{`{"type": "call", "subject": "  "}`, []string{"subject"}},
		{`{"type": "call", "subject": "` + strings.Repeat("x", 256) + `"}`, []string{"subject"}},
		{`{"type": "note"}`, []string{"body"}},
		{`{"type": "note", "body": " "}`, []string{"body"}},
		{`{"type": "email", "subject": "x", "body": "` + strings.Repeat("é", 65537) + `"}`, []string{"body"}},
		{`{"type": "call", "subject": "x", "occurredAt": null}`, []string{"occurredAt"}},
		{`{"type": "call", "subject": "x", "occurredAt": "yesterday", "dueAt": "2030-13-01T00:00:00Z", "doneAt": 5}`, []string{"occurredAt", "dueAt", "doneAt"}},
		{`{"type": "call", "subject": "x", "durationSeconds": 604801}`, []string{"durationSeconds"}},
		{`{"type": "call", "subject": "x", "durationSeconds": -1}`, []string{"durationSeconds"}},
		{`{"type": "call", "subject": "x", "durationSeconds": 1.5}`, []string{"durationSeconds"}},
		{`{"type": "call", "subject": "x", "userOwnerId": 999999999}`, []string{"userOwnerId"}},
		{`{"type": "call", "subject": "x", "userCreatorId": 1, "id": 3}`, []string{"userCreatorId", "id"}},
		{`{"type": "call", "subject": "x", "targets": null}`, []string{"targets"}},
		{`{"type": "call", "subject": "x", "targets": [{"object": "activity", "id": 1}]}`, []string{"targets"}},
		{`{"type": "call", "subject": "x", "targets": [{"object": "contact"}]}`, []string{"targets"}},
		{`{"type": "call", "subject": "x", "unknown": 1}`, []string{"unknown"}},
	} {
		wantFields(t, call(t, "POST", "/v1/activities", c.key, tc.body), tc.fields...)
	}
	before2 := mustGet(t, c.key, path)
	wantFields(t, call(t, "PATCH", path, c.key, `{"type": "note"}`), "body")
	wantFields(t, call(t, "PATCH", path, c.key, `{"subject": null}`), "subject")
	wantFields(t, call(t, "PATCH", path, c.key, `{"occurredAt": null, "userOwnerId": null}`), "occurredAt", "userOwnerId")
	wantUnchanged(t, c.key, path, before2)
	// A note may drop its subject; a PATCH that changes nothing changes nothing.
	wantStatus(t, call(t, "PATCH", path, c.key, `{"type": "note", "body": "done", "subject": null}`), http.StatusOK)
	same := mustGet(t, c.key, path)
	wantStatus(t, call(t, "PATCH", path, c.key, `{"body": "done", "targets": []}`), http.StatusOK)
	wantUnchanged(t, c.key, path, same)

	wantStatus(t, call(t, "DELETE", path, c.key, ""), http.StatusNoContent)
	wantProblem(t, call(t, "DELETE", path, c.key, ""), http.StatusNotFound, "not_found")
	if n := countOf(t, c.key, "/v1/activities/count"); n != 1 {
		t.Errorf("count = %d; want 1", n)
	}
}

func TestActivityTargetsAreAssociations(t *testing.T) {
	t.Parallel()
	c, other := newTestCompany(t), newTestCompany(t)
	ana := mustCreate(t, c.key, "/v1/contacts", `{"name": "Ana"}`)
	deal := mustCreate(t, c.key, "/v1/business", `{"title": "Deal"}`)
	org := mustCreate(t, c.key, "/v1/organizations", `{"name": "Org"}`)
	theirs := mustCreate(t, other.key, "/v1/contacts", `{"name": "Theirs"}`)

	call1, _ := create(t, c.key, "/v1/activities", fmt.Sprintf(`{"type": "call", "subject": "Intro",
		"targets": [{"object": "business", "id": %d}, {"object": "contact", "id": "%d"}]}`, deal, ana))
	want := []string{fmt.Sprintf("business %d", deal), fmt.Sprintf("contact %d", ana)}
	if diff := cmp.Diff(want, targetsOf(t, call1)); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}
	// The same links, read from the other end.
	if got := associatedIDs(t, c.key, "contacts", ana, "activities", "", 10); !slices.Equal(got, []string{fmt.Sprintf("%d -", call1.id())}) {
		t.Errorf("Ana's activities = %v", got)
	}
	// Another company's object, or none: 422 on targets[i], nothing written.
	wantFields(t, call(t, "POST", "/v1/activities", c.key, fmt.Sprintf(`{"type": "call", "subject": "x",
		"targets": [{"object": "contact", "id": %d}, {"object": "contact", "id": %d}, {"object": "organization", "id": 999999999}]}`, ana, theirs)),
		"targets[1]", "targets[2]")
	path := itemPath("/v1/activities", call1.id())
	before := mustGet(t, c.key, path)
	wantFields(t, call(t, "PATCH", path, c.key, fmt.Sprintf(`{"targets": [{"object": "contact", "id": %d}]}`, theirs)), "targets[0]")
	wantFields(t, call(t, "PATCH", path, c.key, `{"targets": [`+strings.Repeat(`{"object": "contact", "id": 1},`, 20)+`{"object": "contact", "id": 1}]}`), "targets")
	wantFields(t, call(t, "PATCH", path, c.key, fmt.Sprintf(`{"targets": [{"object": "contact", "id": %d}, {"object": "contact", "id": "%d"}]}`, ana, ana)), "targets")
	wantUnchanged(t, c.key, path, before)

	// A PATCH replaces them whole: the kept first, then the new.
	got := decode[obj](t, wantStatus(t, call(t, "PATCH", path, c.key, fmt.Sprintf(`{"targets": [{"object": "organization", "id": %d},
		{"object": "contact", "id": %d}]}`, org, ana)), http.StatusOK).body)
	if diff := cmp.Diff([]string{fmt.Sprintf("contact %d", ana), fmt.Sprintf("organization %d", org)}, targetsOf(t, got)); diff != "" {
		t.Errorf("targets after the PATCH (-want +got):\n%s", diff)
	}
	if n := countOf(t, c.key, fmt.Sprintf("/v1/business/%d/associations/activities/count", deal)); n != 0 {
		t.Errorf("the deal has %d activities; want 0", n)
	}
	// Events: the activity's, and its associations'.
	evs, _ := waitFeed(t, c.key, "", "type=activity.*&type=association.*", 6)
	wantTypes := []string{"activity.created", "association.created", "association.created", "activity.updated", "association.deleted", "association.created"}
	if diff := cmp.Diff(wantTypes, typesOf(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if prev := evs[3].Data.PreviousAttributes; fmt.Sprint(prev["targets"]) == "" || len(prev) != 1 {
		t.Errorf("previousAttributes = %v; want the old targets", prev)
	}
	if from, _ := evs[4].Data.Object["from"].(map[string]any); from["object"] != "activity" || from["id"] != jsonNum(call1.id()) {
		t.Errorf("association.deleted = %v; want from the activity", evs[4].Data.Object)
	}

	// Deleting a target leaves the activity with its other targets; merging contacts moves it.
	wantStatus(t, call(t, "DELETE", itemPath("/v1/organizations", org), c.key, ""), http.StatusNoContent)
	dup := mustCreate(t, c.key, "/v1/contacts", `{"name": "Ana again"}`)
	wantStatus(t, call(t, "PATCH", path, c.key, fmt.Sprintf(`{"targets": [{"object": "contact", "id": %d}]}`, dup)), http.StatusOK)
	merge(t, c.key, itemPath("/v1/contacts", ana), fmt.Sprintf(`{"mergeIds": ["%d"]}`, dup))
	if diff := cmp.Diff([]string{fmt.Sprintf("contact %d", ana)}, targetsOf(t, decode[obj](t, mustGet(t, c.key, path).body))); diff != "" {
		t.Errorf("targets after the delete and the merge (-want +got):\n%s", diff)
	}
	// A target made from its other end joins the list, last; deleted there, it leaves it.
	fromDeal := fmt.Sprintf("/v1/business/%d/associations/activities/%d", deal, call1.id())
	wantStatus(t, call(t, "PUT", fromDeal, c.key, ""), http.StatusCreated)
	if diff := cmp.Diff([]string{fmt.Sprintf("contact %d", ana), fmt.Sprintf("business %d", deal)}, targetsOf(t, decode[obj](t, mustGet(t, c.key, path).body))); diff != "" {
		t.Errorf("targets after the PUT from the deal (-want +got):\n%s", diff)
	}
	wantStatus(t, call(t, "DELETE", fromDeal, c.key, ""), http.StatusNoContent)
	if diff := cmp.Diff([]string{fmt.Sprintf("contact %d", ana)}, targetsOf(t, decode[obj](t, mustGet(t, c.key, path).body))); diff != "" {
		t.Errorf("targets after the DELETE from the deal (-want +got):\n%s", diff)
	}
	// Deleting the activity takes its associations with it.
	wantStatus(t, call(t, "DELETE", path, c.key, ""), http.StatusNoContent)
	if n := countOf(t, c.key, fmt.Sprintf("/v1/contacts/%d/associations/activities/count", ana)); n != 0 {
		t.Errorf("Ana has %d activities after its delete; want 0", n)
	}
}

func TestActivityScopes(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ana := mustCreate(t, c.key, "/v1/contacts", `{"name": "Ana"}`)
	deal := mustCreate(t, c.key, "/v1/business", `{"title": "Deal"}`)
	a := mustCreate(t, c.key, "/v1/activities", `{"type": "note", "body": "x"}`)
	writer := *makeKey(t, c.key, "activities:write", "contacts:read").Key
	reader := *makeKey(t, c.key, "activities:read").Key
	target := func(kind string, id int64) string {
		return fmt.Sprintf(`{"type": "call", "subject": "x", "targets": [{"object": %q, "id": %d}]}`, kind, id)
	}
	wantStatus(t, call(t, "POST", "/v1/activities", writer, target("contact", ana)), http.StatusCreated)
	p := wantProblem(t, call(t, "POST", "/v1/activities", writer, target("business", deal)), http.StatusForbidden, "insufficient_scope")
	if !strings.Contains(p.Detail, "business:read") {
		t.Errorf("detail %q; want it to name business:read", p.Detail)
	}
	wantProblem(t, call(t, "POST", "/v1/activities", reader, `{"type": "note", "body": "x"}`), http.StatusForbidden, "insufficient_scope")
	wantProblem(t, call(t, "GET", "/v1/activities", *makeKey(t, c.key, "contacts:write").Key, ""), http.StatusForbidden, "insufficient_scope")
	mustGet(t, reader, itemPath("/v1/activities", a))
	// An association with an activity: write on activities and read on the other kind.
	wantStatus(t, call(t, "PUT", assocPath("contacts", ana, "activities", a), writer, ""), http.StatusCreated)
	wantProblem(t, call(t, "PUT", assocPath("business", deal, "activities", a), writer, ""), http.StatusForbidden, "insufficient_scope")
	wantProblem(t, call(t, "PUT", assocPath("contacts", ana, "business", deal), writer, ""), http.StatusForbidden, "insufficient_scope")
	// expand[]=targets embeds contacts, business and organizations: it needs read on each.
	wantProblem(t, call(t, "GET", "/v1/activities?expand[]=targets", writer, ""), http.StatusForbidden, "insufficient_scope")
}

func TestActivityListsFilterAndSort(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ana := mustCreate(t, c.key, "/v1/contacts", `{"name": "Ana"}`)
	deal := mustCreate(t, c.key, "/v1/business", `{"title": "Deal"}`)
	user2 := sqlID(t, `INSERT INTO users (company_id, name, surname, email) VALUES ($1, 'Bo', 'B', 'bo@example.com') RETURNING id`, c.id)
	mk := func(body string) int64 { return mustCreate(t, c.key, "/v1/activities", body) }
	a1 := mk(fmt.Sprintf(`{"type": "task", "subject": "Quote 100%%", "occurredAt": "2030-01-03T00:00:00Z", "dueAt": "2030-02-01T00:00:00Z",
		"targets": [{"object": "contact", "id": %d}]}`, ana))
	a2 := mk(fmt.Sprintf(`{"type": "task", "subject": "Follow up", "occurredAt": "2030-01-01T00:00:00Z", "dueAt": "2030-01-15T00:00:00Z",
		"doneAt": "2030-01-10T00:00:00Z", "userOwnerId": %d, "targets": [{"object": "business", "id": %d}, {"object": "contact", "id": %d}]}`, user2, deal, ana))
	a3 := mk(`{"type": "call", "subject": "Intro call", "body": "Talked about the QUOTE", "occurredAt": "2030-01-02T00:00:00Z"}`)
	a4 := mk(`{"type": "note", "body": "nothing due", "occurredAt": "2030-01-04T00:00:00Z"}`)
	for _, tc := range []struct {
		query string
		want  []int64
	}{
		{"", []int64{a1, a2, a3, a4}},
		{"sort=-id", []int64{a4, a3, a2, a1}},
		{"type=task", []int64{a1, a2}},
		{"type=task&type=note", []int64{a1, a2, a4}},
		{"type=note,call", []int64{a3, a4}},
		{fmt.Sprintf("userOwnerId=%d", user2), []int64{a2}},
		{"done=true", []int64{a2}},
		{"done=false", []int64{a1, a3, a4}},
		{fmt.Sprintf("target=contact:%d", ana), []int64{a1, a2}},
		{fmt.Sprintf("target=business:%d&done=false", deal), []int64{}},
		{fmt.Sprintf("associated.business=%d", deal), []int64{a2}},
		{"occurredAt[gte]=2030-01-02T00:00:00Z&occurredAt[lt]=2030-01-04T00:00:00Z", []int64{a1, a3}},
		{"occurredAt[gt]=2030-01-02T00:00:00Z&occurredAt[lte]=2030-01-04T00:00:00Z", []int64{a1, a4}},
		{"dueAt[gte]=2030-01-16T00:00:00Z", []int64{a1}},
		{"dueAt[lt]=2030-01-16T00:00:00Z&dueAt[gt]=2030-01-01T00:00:00Z&dueAt[lte]=2030-03-01T00:00:00Z", []int64{a2}},
		{"createdAt[gte]=2000-01-01T00:00:00Z&updatedAt[lt]=2100-01-01T00:00:00Z", []int64{a1, a2, a3, a4}},
		{"q=quote", []int64{a1, a3}},
		{"q=100%25", []int64{a1}},
		{"sort=occurredAt", []int64{a2, a3, a1, a4}},
		{"sort=-occurredAt", []int64{a4, a1, a3, a2}},
		{"sort=dueAt", []int64{a2, a1, a3, a4}},
		{"sort=-dueAt", []int64{a1, a2, a4, a3}},
		{"sort=createdAt", []int64{a1, a2, a3, a4}},
		{"sort=-updatedAt", []int64{a4, a3, a2, a1}},
	} {
		if diff := cmp.Diff(tc.want, activityIDs(t, c.key, tc.query)); diff != "" {
			t.Errorf("GET /v1/activities?%s (-want +got):\n%s", tc.query, diff)
		}
		if tc.query != "" && !strings.HasPrefix(tc.query, "sort") {
			if n := countOf(t, c.key, "/v1/activities/count?"+tc.query); n != int64(len(tc.want)) {
				t.Errorf("count?%s = %d; want %d", tc.query, n, len(tc.want))
			}
		}
	}
	for _, q := range []string{"type=lunch", "done=yes", "target=contact", "target=contact:0", "target=activity:1", "target=contacts:1", "dueAt[eq]=x", "sort=subject"} {
		wantProblem(t, call(t, "GET", "/v1/activities?"+q, c.key, ""), http.StatusBadRequest, "invalid_parameter")
	}
}

func TestActivityExpansionsCostAFixedNumberOfQueries(t *testing.T) {
	t.Parallel()
	proxy, dbURL := newDBProxy(t, testEnv.dbURL)
	base := startServer(t, map[string]string{"DATABASE_URL": dbURL, "ROLODEX_DB_MAX_CONNS": "2", "ROLODEX_WEBHOOK_SLOTS": "0"}, &syncBuffer{})
	c := newTestCompany(t)
	ana := mustCreate(t, c.key, "/v1/contacts", `{"name": "Ana"}`)
	deal := mustCreate(t, c.key, "/v1/business", `{"title": "Deal"}`)
	org := mustCreate(t, c.key, "/v1/organizations", `{"name": "Org"}`)
	body := fmt.Sprintf(`{"type": "call", "subject": "x", "targets": [{"object": "contact", "id": %d}, {"object": "business", "id": %d},
		{"object": "organization", "id": %d}]}`, ana, deal, org)
	first := mustCreate(t, c.key, "/v1/activities", body)
	queries := func(path string) (int64, []byte) {
		t.Helper()
		var fewest int64
		var b []byte
		for try := range 3 {
			wantStatus(t, callAt(t, nil, base, "GET", "/v1/statuses", c.key, ""), http.StatusOK) // the key in the server's cache
			proxy.queries.Store(0)
			r := wantStatus(t, callAt(t, nil, base, "GET", path, c.key, ""), http.StatusOK)
			if n := proxy.queries.Load(); try == 0 || n < fewest {
				fewest, b = n, r.body
			}
		}
		return fewest, b
	}
	exp := "expand[]=userOwner&expand[]=userCreator&expand[]=targets"
	one, _ := queries("/v1/activities?limit=100&" + exp)
	for range 9 {
		mustCreate(t, c.key, "/v1/activities", body)
	}
	plain, _ := queries("/v1/activities?limit=100")
	ten, page := queries("/v1/activities?limit=100&" + exp)
	if one != ten || ten-plain != 4 {
		t.Errorf("a page with expansions: %d queries for 1 activity, %d for 10, %d without; want the same, 4 more (users and 3 kinds)", one, ten, plain)
	}
	a := readPage[obj](t, response{status: http.StatusOK, body: page, method: "GET", path: "page"}).Data[0]
	ts, _ := a["targets"].([]any)
	if owner, _ := a["userOwner"].(map[string]any); len(ts) != 3 || owner["id"] != jsonNum(c.userID) || a["userCreator"] == nil {
		t.Fatalf("expanded activity = %v", a)
	}
	for i, want := range []string{"Ana", "Deal", "Org"} {
		m, _ := ts[i].(map[string]any)
		data, _ := m["data"].(map[string]any)
		if !slices.Equal(slices.Sorted(maps.Keys(m)), []string{"data", "id", "object"}) || data["name"] != want && data["title"] != want {
			t.Errorf("targets[%d] = %v; want object, id and data of %s", i, m, want)
		}
	}
	// A retrieve embeds the same.
	got := decode[obj](t, mustGet(t, c.key, itemPath("/v1/activities", first)+"?"+exp).body)
	if fmt.Sprint(got["targets"]) != fmt.Sprint(a["targets"]) {
		t.Errorf("retrieve's targets = %v; want %v", got["targets"], a["targets"])
	}
	wantProblem(t, call(t, "GET", "/v1/activities?expand[]=owner", c.key, ""), http.StatusBadRequest, "invalid_expand")
}

func TestActivityBatches(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ana := mustCreate(t, c.key, "/v1/contacts", `{"name": "Ana"}`)
	good := fmt.Sprintf(`{"type": "call", "subject": "Call", "targets": [{"object": "contact", "id": %d}]}`, ana)
	wantBatchFailure(t, c.key, "/v1/activities/batch/create", `{"items": [`+good+`, {"type": "note"}, {"type": "call", "subject": "x",
		"targets": [{"object": "contact", "id": 999999999}]}]}`, http.StatusUnprocessableEntity, "items[1].body validation_failed", "items[2].targets[0] validation_failed")
	if n := eventCount(t, c.id, ""); n != 1 || countOf(t, c.key, "/v1/activities/count") != 0 {
		t.Fatalf("%d events after a failed atomic batch; want the contact's only, and no activity", n)
	}
	b := wantBatch(t, c.key, "/v1/activities/batch/create", `{"atomic": false, "items": [`+good+`, {"type": "note"}, `+good+`]}`,
		http.StatusMultiStatus, "created", "error:validation_failed", "created")
	id0, id2 := b.Data[0].Object.id(), b.Data[2].Object.id()
	if n := countOf(t, c.key, fmt.Sprintf("/v1/activities/count?target=contact:%d", ana)); n != 2 {
		t.Errorf("%d activities of Ana; want 2", n)
	}
	b = wantBatch(t, c.key, "/v1/activities/batch/update", fmt.Sprintf(`{"items": [{"id": %d, "subject": "Called", "targets": []}, {"id": %d, "subject": "Call"}]}`, id0, id2),
		http.StatusOK, "updated", "unchanged")
	if b.Data[0].Object["subject"] != "Called" || len(targetsOf(t, b.Data[0].Object)) != 0 {
		t.Errorf("updated item = %v", b.Data[0].Object)
	}
	wantStatus(t, call(t, "POST", "/v1/activities/batch/upsert", c.key, `{"matchOn": "subject", "items": [`+good+`]}`), http.StatusNotFound)
	wantBatch(t, c.key, "/v1/activities/batch/delete", fmt.Sprintf(`{"ids": [%d, "%d"]}`, id0, id2), http.StatusOK, "deleted", "deleted")
	if n := countOf(t, c.key, "/v1/activities/count"); n != 0 {
		t.Errorf("%d activities after the batch delete; want 0", n)
	}
	evs, _ := waitFeed(t, c.key, "", "type=activity.*&type=association.*", 10)
	// Items' events go out together, in the order of their statements: as many of each type.
	want := []string{"activity.created", "activity.created", "activity.deleted", "activity.deleted", "activity.updated",
		"association.created", "association.created", "association.deleted", "association.deleted"}
	if diff := cmp.Diff(want, slices.Sorted(slices.Values(typesOf(evs)))); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestActivityCustomFieldsAndIdempotency(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	wantStatus(t, call(t, "POST", "/v1/customFields", c.key, `{"object": "activity", "key": "outcome", "label": "Outcome", "type": "select",
		"options": [{"value": "won", "label": "Won"}, {"value": "lost", "label": "Lost"}], "required": true}`), http.StatusCreated)
	wantFields(t, call(t, "POST", "/v1/activities", c.key, `{"type": "call", "subject": "x"}`), "custom.outcome")
	body := `{"type": "call", "subject": "x", "custom": {"outcome": "won"}}`
	r := wantStatus(t, call(t, "POST", "/v1/activities", c.key, body, "Idempotency-Key", "ik-1"), http.StatusCreated)
	again := wantStatus(t, call(t, "POST", "/v1/activities", c.key, body, "Idempotency-Key", "ik-1"), http.StatusCreated)
	if !bytes.Equal(r.body, again.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay = %s; want %s, replayed", again.body, r.body)
	}
	a := decode[obj](t, r.body)
	if custom, _ := a["custom"].(map[string]any); custom["outcome"] != "won" {
		t.Errorf("custom = %v", a["custom"])
	}
	mustCreate(t, c.key, "/v1/activities", `{"type": "call", "subject": "y", "custom": {"outcome": "lost"}}`)
	if diff := cmp.Diff([]int64{a.id()}, activityIDs(t, c.key, "custom.outcome=won")); diff != "" {
		t.Errorf("custom.outcome=won (-want +got):\n%s", diff)
	}
	if n := countOf(t, c.key, "/v1/activities/count"); n != 2 {
		t.Errorf("count = %d; want 2", n)
	}
}

// A target's pages sorted by occurredAt or dueAt, and its timeline's first page, walk the target
// rows' copies of each activity's place and type (schema/0020): they follow an activity through a
// PATCH of its place, type or targets, a target made through the associations API, and a merge of its target.
// Each page equals the company's list with the same query, less the activities of other targets.
func TestTargetPagesFollowTheirActivities(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ana := mustCreate(t, c.key, "/v1/contacts", `{"name": "Ana"}`)
	bea := mustCreate(t, c.key, "/v1/contacts", `{"name": "Bea"}`)
	deal := mustCreate(t, c.key, "/v1/business", `{"title": "Deal"}`)
	task := func(day int, due string, kind string, id int64) int64 {
		return mustCreate(t, c.key, "/v1/activities", fmt.Sprintf(`{"type": "task", "subject": "T%d",
			"occurredAt": "2030-01-%02dT00:00:00Z", "dueAt": %s, "targets": [{"object": "%s", "id": %d}]}`, day, day, due, kind, id))
	}
	a1, a2 := task(1, `"2030-03-01T00:00:00Z"`, "contact", ana), task(2, `null`, "contact", ana)
	a3, a4 := task(3, `"2030-02-01T00:00:00Z"`, "contact", ana), task(4, `"2030-02-01T00:00:00Z"`, "contact", bea)
	a5, a6 := task(5, `"2030-04-01T00:00:00Z"`, "business", deal), task(6, `"2030-01-20T00:00:00Z"`, "contact", ana)
	task(7, `"2030-01-01T00:00:00Z"`, "business", deal) // never Ana's
	for id, body := range map[int64]string{
		a1: `{"occurredAt": "2030-01-09T00:00:00Z", "dueAt": null}`,
		a2: `{"dueAt": "2030-01-15T00:00:00Z", "doneAt": "2030-01-16T00:00:00Z"}`,
		a3: `{"doneAt": "2030-01-04T00:00:00Z", "occurredAt": "2029-12-31T00:00:00Z"}`,
		a4: `{"type": "call"}`,
		a6: fmt.Sprintf(`{"targets": [{"object": "business", "id": %d}]}`, deal),
	} {
		wantStatus(t, call(t, "PATCH", itemPath("/v1/activities", id), c.key, body), http.StatusOK)
	}
	wantStatus(t, call(t, "PATCH", itemPath("/v1/activities", a1), c.key, `{"type": "call"}`), http.StatusOK) // its type alone
	wantStatus(t, call(t, "PUT", fmt.Sprintf("/v1/contacts/%d/associations/activities/%d", ana, a5), c.key, ""), http.StatusCreated)
	merge(t, c.key, itemPath("/v1/contacts", ana), fmt.Sprintf(`{"mergeIds": ["%d"]}`, bea))
	anas := []int64{a1, a2, a3, a4, a5}
	for _, q := range []string{"sort=occurredAt", "sort=-occurredAt", "sort=dueAt", "sort=dueAt&done=false", "sort=-dueAt",
		"sort=occurredAt&dueAt[gte]=2030-02-01T00:00:00Z", "sort=-occurredAt&occurredAt[lt]=2030-01-05T00:00:00Z&done=false",
		"sort=dueAt&done=true&occurredAt[gt]=2029-01-01T00:00:00Z", "sort=occurredAt&type=task", "sort=dueAt&type=call,note"} {
		want := slices.DeleteFunc(activityIDs(t, c.key, q), func(id int64) bool { return !slices.Contains(anas, id) })
		if diff := cmp.Diff(want, activityIDs(t, c.key, q+fmt.Sprintf("&target=contact:%d", ana))); diff != "" {
			t.Errorf("GET /v1/activities?%s&target=contact:Ana (-want +got):\n%s", q, diff)
		}
	}
	var timeline []int64
	for _, e := range listPage[obj](t, c.key, fmt.Sprintf("/v1/contacts/%d/timeline?kind=activity", ana)).Data {
		timeline = append(timeline, obj(e["activity"].(map[string]any)).id())
	}
	if want := []int64{a1, a5, a4, a2, a3}; !slices.Equal(timeline, want) {
		t.Errorf("Ana's timeline: activities %v; want %v", timeline, want)
	}
	calls := listPage[obj](t, c.key, fmt.Sprintf("/v1/contacts/%d/timeline?type=call", ana)).Data
	if len(calls) != 2 || obj(calls[0]["activity"].(map[string]any)).id() != a1 || obj(calls[1]["activity"].(map[string]any)).id() != a4 {
		t.Errorf("Ana's timeline of calls = %v; want activities %d and %d", calls, a1, a4)
	}
}

// A target's delete and a write of its activity that moves the activity's target rows run at once
// without a deadlock: the delete locks the activities of the rows it takes before it takes them, as
// the activity's write does.
func TestTargetDeletesWaitForTheirActivitiesWrites(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	const n = 12
	contacts, tasks := make([]int64, n), make([]int64, n)
	deal := mustCreate(t, c.key, "/v1/business", `{"title": "Deal"}`)
	for i := range n {
		contacts[i] = mustCreate(t, c.key, "/v1/contacts", `{"name": "Ana"}`)
		tasks[i] = mustCreate(t, c.key, "/v1/activities", fmt.Sprintf(`{"type": "task", "subject": "T",
			"targets": [{"object": "contact", "id": %d}, {"object": "business", "id": %d}]}`, contacts[i], deal))
	}
	var wg sync.WaitGroup
	statuses := make([][2]int, n)
	for i := range n {
		wg.Go(func() {
			r := call(t, "PATCH", itemPath("/v1/activities", tasks[i]), c.key, `{"doneAt": "2030-01-04T10:00:00Z"}`)
			statuses[i][0] = r.status
		})
		wg.Go(func() { statuses[i][1] = call(t, "DELETE", itemPath("/v1/contacts", contacts[i]), c.key, "").status })
	}
	wg.Wait()
	for i, s := range statuses {
		if s != [2]int{http.StatusOK, http.StatusNoContent} {
			t.Errorf("PATCH of task %d and DELETE of its contact at once: %v; want 200 and 204", i, s)
		}
		a := decode[obj](t, mustGet(t, c.key, itemPath("/v1/activities", tasks[i])).body)
		if got := targetsOf(t, a); !slices.Equal(got, []string{fmt.Sprintf("business %d", deal)}) || a["doneAt"] == nil {
			t.Errorf("task %d after both: targets %v, doneAt %v; want the deal's alone, done", i, got, a["doneAt"])
		}
	}
}
