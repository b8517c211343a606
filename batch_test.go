package main

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Tests of batch.go: batch writes and upsert (API.md section 15), and the organizations' PATCH and
// DELETE that their batches run, all through the HTTP API.

// batchBody is a batch's 200 or 207 answer.
type batchBody struct {
	Data []struct {
		Index  int
		Status string
		Object obj
		Error  *batchProblem
	}
}

// batchProblem is a batch's 422 or 412 answer, and an item's problem in a 207.
type batchProblem struct {
	Type, Title, Detail, Code, RequestID string
	Status                               int
	Errors                               []batchError
	Candidates                           []any
}

type batchError struct {
	Field, Message, Code string
	Index                int
	Candidates           []any
}

// statuses returns each item's status, and its error's code for a failed one ("error:not_found").
func (b batchBody) statuses() []string {
	var out []string
	for i, d := range b.Data {
		s := d.Status
		if d.Error != nil {
			s += ":" + d.Error.Code
		}
		if d.Index != i {
			s += fmt.Sprintf(" (index %d)", d.Index)
		}
		out = append(out, s)
	}
	return out
}

// postBatch POSTs body to path and fails the test unless the answer has status want.
func postBatch(t *testing.T, key, path, body string, want int, hdr ...string) response {
	t.Helper()
	return wantStatus(t, call(t, "POST", path, key, body, hdr...), want)
}

// wantBatch POSTs body to path, wants status want and the items' statuses, and returns the answer.
func wantBatch(t *testing.T, key, path, body string, want int, statuses ...string) batchBody {
	t.Helper()
	b := decode[batchBody](t, postBatch(t, key, path, body, want).body)
	if diff := cmp.Diff(statuses, b.statuses()); diff != "" {
		t.Fatalf("POST %s statuses (-want +got):\n%s", path, diff)
	}
	return b
}

// wantBatchFailure POSTs body to path and wants an atomic failure with status and exactly these
// errors entries, as "field code".
func wantBatchFailure(t *testing.T, key, path, body string, status int, entries ...string) batchProblem {
	t.Helper()
	r := postBatch(t, key, path, body, status)
	p := decode[batchProblem](t, r.body)
	var got []string
	for _, e := range p.Errors {
		got = append(got, e.Field+" "+e.Code)
		if e.Message == "" || !strings.HasPrefix(e.Field, fmt.Sprintf("items[%d]", e.Index)) && !strings.HasPrefix(e.Field, fmt.Sprintf("ids[%d]", e.Index)) {
			t.Errorf("entry %+v: want a message and the index its field names", e)
		}
	}
	if diff := cmp.Diff(entries, got); diff != "" {
		t.Errorf("POST %s errors (-want +got):\n%s\nbody %s", path, diff, r.body)
	}
	if p.Code != "batch_failed" || p.RequestID != r.header.Get("X-Request-Id") || r.header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("POST %s = %s; want a batch_failed problem with the request id", path, r.body)
	}
	return p
}

// eventCount counts the company's events, of type typ when not "".
func eventCount(t *testing.T, companyID int64, typ string) int64 {
	t.Helper()
	return sqlID(t, `SELECT count(*) FROM events WHERE company_id = $1 AND ($2 = '' OR type = $2)`, companyID, typ)
}

// items is a batch body of n items made by item(i), with more members (`"atomic": false`) if given.
func items(n int, item func(i int) string, more string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = item(i)
	}
	if more != "" {
		more = ", " + more
	}
	return `{"items": [` + strings.Join(parts, ",") + `]` + more + `}`
}

func TestBatchCreateRunsEachItemAsASingleCreate(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	r := postBatch(t, c.key, "/v1/contacts/batch/create?expand[]=userCreator&expand[]=organization",
		items(3, func(i int) string { return fmt.Sprintf(`{"name": "Ana %d", "email": "ana%d@example.com"}`, i, i) }, ""), http.StatusOK)
	b := decode[batchBody](t, r.body)
	if diff := cmp.Diff([]string{"created", "created", "created"}, b.statuses()); diff != "" {
		t.Fatalf("statuses (-want +got):\n%s", diff)
	}
	for i, d := range b.Data {
		got := mustGet(t, c.key, itemPath("/v1/contacts", d.Object.id()))
		o := decode[obj](t, got.body)
		if o["name"] != fmt.Sprintf("Ana %d", i) || d.Object["organization"] != nil {
			t.Errorf("item %d: %v; stored %v", i, d.Object, o)
		}
		if u, _ := d.Object["userCreator"].(map[string]any); u == nil || fmt.Sprint(u["id"]) != fmt.Sprint(c.userID) {
			t.Errorf("item %d: userCreator %v; want the key's user expanded", i, d.Object["userCreator"])
		}
	}
	// One event per item, each with the request's id.
	n := sqlID(t, `SELECT count(*) FROM events WHERE company_id = $1 AND type = 'contact.created' AND request_id = $2`,
		c.id, r.header.Get("X-Request-Id"))
	if n != 3 {
		t.Errorf("%d contact.created events with the request id; want 3", n)
	}
	// Business and organizations take the same batches.
	deals := wantBatch(t, c.key, "/v1/business/batch/create", `{"items": [{"title": "Deal", "value": 0.1}, {"title": "Other"}]}`,
		http.StatusOK, "created", "created")
	// Their statements went out side by side, yet each took its own end of the stage, in item order.
	if p0, p1 := deals.Data[0].Object["position"], deals.Data[1].Object["position"]; fmt.Sprint(p0) != "1" || fmt.Sprint(p1) != "2" {
		t.Errorf("positions %v, %v; want 1, 2", p0, p1)
	}
	wantBatch(t, c.key, "/v1/organizations/batch/create", `{"items": [{"name": "Acme"}]}`, http.StatusOK, "created")
}

func TestBatchItemsThatReadAlikeFailAlone(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	defineField(t, c.key, `{"object": "contact", "key": "tier", "label": "Tier", "type": "select", "required": true,
		"options": [{"value": "gold", "label": "Gold"}]}`)
	defineField(t, c.key, `{"object": "contact", "key": "arr", "label": "ARR", "type": "number"}`)
	// Items 0 and 1 send their reads alike, and so do 2 and 3: the batch sends each of them once.
	// 4, 5 and 6 differ from them in one reference or custom value.
	body := `{"atomic": false, "items": [
		{"name": "A", "countryId": 724, "custom": {"tier": "gold"}},
		{"name": "B", "countryId": 724, "custom": {"tier": "gold"}},
		{"name": "C", "countryId": 724, "custom": {"tier": "gold", "arr": 7}},
		{"name": "D", "countryId": 724, "custom": {"tier": "gold", "arr": 8}},
		{"name": "E", "countryId": 999999999, "custom": {"tier": "gold"}},
		{"name": "F", "countryId": 724, "stageId": 999999999, "custom": {"tier": "gold"}},
		{"name": "G", "countryId": 724, "custom": {"arr": 9}}]}`
	b := wantBatch(t, c.key, "/v1/contacts/batch/create", body, http.StatusMultiStatus, "created", "created", "created", "created",
		"error:validation_failed", "error:validation_failed", "error:validation_failed")
	var got []string
	for _, d := range b.Data {
		if d.Error != nil {
			got = append(got, d.Error.Errors[0].Field+" "+d.Error.Errors[0].Message)
		} else {
			got = append(got, fmt.Sprint(d.Object["custom"]))
		}
	}
	want := []string{"map[arr:<nil> tier:gold]", "map[arr:<nil> tier:gold]", "map[arr:7 tier:gold]", "map[arr:8 tier:gold]",
		"items[4].countryId must be the id of an existing country", "items[5].stageId must be the id of an existing contact stage",
		"items[6].custom.tier is required"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("items (-want +got):\n%s", diff)
	}
	if n := eventCount(t, c.id, "contact.created"); n != 4 {
		t.Errorf("%d contact.created events; want 4, of the items created", n)
	}
}

func TestBatchRefusesBadBodies(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for _, tc := range []struct{ path, body, field string }{
		{"/v1/contacts/batch/create", `{"items": []}`, "items"},
		{"/v1/contacts/batch/create", items(101, func(int) string { return `{"name": "A"}` }, ""), "items"},
		{"/v1/contacts/batch/create", `{}`, "items"},
		{"/v1/contacts/batch/create", `{"items": {"name": "A"}}`, "items"},
		{"/v1/contacts/batch/create", `{"items": [{"name": "A"}], "atomic": "yes"}`, "atomic"},
		{"/v1/contacts/batch/create", `{"items": [{"name": "A"}], "extra": 1}`, "extra"},
		{"/v1/contacts/batch/delete", `{"items": ["1"]}`, "items"},
		{"/v1/contacts/batch/upsert", `{"matchOn": "name", "items": [{"name": "A"}]}`, "matchOn"},
		{"/v1/contacts/batch/upsert", `{"matchOn": "custom.tier", "items": [{"name": "A"}]}`, "matchOn"},
	} {
		r := call(t, "POST", tc.path, c.key, tc.body)
		p := wantProblem(t, r, http.StatusUnprocessableEntity, "validation_failed")
		if len(p.Errors) == 0 || p.Errors[0].Field != tc.field {
			t.Errorf("POST %s %.60s: errors %+v; want one on %s", tc.path, tc.body, p.Errors, tc.field)
		}
	}
	wantProblem(t, call(t, "POST", "/v1/business/batch/upsert", c.key, `{"items": [{"title": "A"}]}`), http.StatusNotFound, "not_found")
	wantProblem(t, call(t, "POST", "/v1/contacts/batch/frobnicate", c.key, `{"items": [{"name": "A"}]}`), http.StatusNotFound, "not_found")
	wantProblem(t, call(t, "GET", "/v1/contacts/batch/create", c.key, ""), http.StatusMethodNotAllowed, "method_not_allowed")
	wantProblem(t, call(t, "POST", "/v1/contacts/batch/create", c.key, `{"items": [`), http.StatusBadRequest, "invalid_json")
	if n := countOf(t, c.key, "/v1/contacts/count"); n != 0 {
		t.Errorf("%d contacts after refused batches; want 0", n)
	}
}

func TestBatchAtomicFailureListsEveryFailingItemAndChangesNothing(t *testing.T) {
	t.Parallel()
	c, other := newTestCompany(t), newTestCompany(t)
	theirs, _ := create(t, other.key, "/v1/organizations", `{"name": "Theirs"}`)
	body := fmt.Sprintf(`{"items": [{"name": "Bad", "email": "nope"}, {"name": "Good"}, {"surname": "No name"}, {"name": "Good too"},
		[1], {"name": "Ref", "organizationId": %d}, {"name": "Two", "id": "5", "email": "x"}]}`, theirs.id())
	wantBatchFailure(t, c.key, "/v1/contacts/batch/create", body, http.StatusUnprocessableEntity,
		"items[0].email validation_failed", "items[2].name validation_failed", "items[4] validation_failed",
		"items[5].organizationId validation_failed", "items[6].id validation_failed", "items[6].email validation_failed")
	if n := countOf(t, c.key, "/v1/contacts/count"); n != 0 {
		t.Errorf("%d contacts after a failed atomic batch; want 0", n)
	}
	if n := eventCount(t, c.id, ""); n != 0 {
		t.Errorf("%d events after a failed atomic batch; want 0", n)
	}
}

func TestBatchUpdateNotFoundPreconditionsAndDuplicates(t *testing.T) {
	t.Parallel()
	c, other := newTestCompany(t), newTestCompany(t)
	mine, r := create(t, c.key, "/v1/contacts", `{"name": "Mine", "city": "Madrid"}`)
	etag := r.header.Get("ETag")
	theirs, _ := create(t, other.key, "/v1/contacts", `{"name": "Theirs"}`)
	path := itemPath("/v1/contacts", mine.id())
	before := mustGet(t, c.key, path)

	// Another company's id is not_found, like one that does not exist; a stale ifMatch fails alone: 412.
	wantBatchFailure(t, c.key, "/v1/contacts/batch/update",
		fmt.Sprintf(`{"items": [{"id": "%d", "city": "Lisboa"}, {"id": "%d", "city": "Roma"}]}`, mine.id(), theirs.id()),
		http.StatusUnprocessableEntity, "items[1].id not_found")
	wantBatchFailure(t, c.key, "/v1/contacts/batch/update",
		fmt.Sprintf(`{"items": [{"id": "%d", "ifMatch": "\"999\"", "city": "Lisboa"}]}`, mine.id()),
		http.StatusPreconditionFailed, "items[0].ifMatch precondition_failed")
	wantBatchFailure(t, c.key, "/v1/contacts/batch/update",
		fmt.Sprintf(`{"items": [{"id": "%d", "city": "Lisboa"}, {"id": %d, "city": "Roma"}, {"city": "x"}, {"id": "01"}]}`, mine.id(), mine.id()),
		http.StatusUnprocessableEntity, "items[1].id duplicate_in_request", "items[2].id validation_failed", "items[3].id validation_failed")
	wantUnchanged(t, c.key, path, before)
	wantUnchanged(t, other.key, itemPath("/v1/contacts", theirs.id()), mustGet(t, other.key, itemPath("/v1/contacts", theirs.id())))

	// A current ifMatch updates; an item that changes nothing is unchanged and writes no event.
	b := wantBatch(t, c.key, "/v1/contacts/batch/update",
		fmt.Sprintf(`{"items": [{"id": "%d", "ifMatch": %q, "city": "Lisboa"}]}`, mine.id(), etag), http.StatusOK, "updated")
	if b.Data[0].Object["city"] != "Lisboa" || eventCount(t, c.id, "contact.updated") != 1 {
		t.Errorf("update: %v, %d events", b.Data[0].Object, eventCount(t, c.id, "contact.updated"))
	}
	after := mustGet(t, c.key, path)
	wantBatch(t, c.key, "/v1/contacts/batch/update", fmt.Sprintf(`{"atomic": false, "items": [{"id": "%d", "city": "Lisboa"}, {"id": "%d"}]}`, mine.id(), mine.id()),
		http.StatusMultiStatus, "unchanged", "error:duplicate_in_request")
	wantUnchanged(t, c.key, path, after)
	if n := eventCount(t, c.id, "contact.updated"); n != 1 {
		t.Errorf("%d contact.updated events after an unchanged item; want 1", n)
	}
}

func TestBatchNotAtomicCommitsTheItemsThatSucceed(t *testing.T) {
	t.Parallel()
	c, other := newTestCompany(t), newTestCompany(t)
	theirs, _ := create(t, other.key, "/v1/contacts", `{"name": "Theirs"}`)
	b := wantBatch(t, c.key, "/v1/contacts/batch/create",
		`{"atomic": false, "items": [{"name": "One"}, {"name": ""}, {"name": "Three"}]}`, http.StatusMultiStatus,
		"created", "error:validation_failed", "created")
	if e := b.Data[1].Error; e.Status != 422 || len(e.Errors) != 1 || e.Errors[0].Field != "items[1].name" || b.Data[1].Object != nil {
		t.Errorf("item 1: %+v; want a 422 problem naming items[1].name", b.Data[1])
	}
	if n := countOf(t, c.key, "/v1/contacts/count"); n != 2 {
		t.Errorf("%d contacts; want the 2 that succeeded", n)
	}
	one, three := b.Data[0].Object.id(), b.Data[2].Object.id()
	b = wantBatch(t, c.key, "/v1/contacts/batch/delete",
		fmt.Sprintf(`{"atomic": false, "ids": ["%d", "%d", "x", %d]}`, one, theirs.id(), one), http.StatusMultiStatus,
		"deleted", "error:not_found", "error:validation_failed", "error:duplicate_in_request")
	if f := b.Data[1].Error.Errors; len(f) != 1 || f[0].Field != "ids[1]" {
		t.Errorf("not found item: %+v; want it named ids[1]", f)
	}
	if f := b.Data[3].Error.Errors; len(f) != 1 || f[0].Field != "ids[3]" || f[0].Message != "is the same as in item 0" {
		t.Errorf("repeated id: %+v; want it named ids[3], the same as in item 0", f)
	}
	wantStatus(t, call(t, "GET", itemPath("/v1/contacts", one), c.key, ""), http.StatusNotFound)
	mustGet(t, other.key, itemPath("/v1/contacts", theirs.id()))
	if n := eventCount(t, c.id, "contact.deleted"); n != 1 {
		t.Errorf("%d contact.deleted events; want 1", n)
	}
	// All succeeded: 200.
	wantBatch(t, c.key, "/v1/contacts/batch/delete", fmt.Sprintf(`{"atomic": false, "ids": ["%d"]}`, three), http.StatusOK, "deleted")
}

func TestBatchUpsertMatchesCreatesAndLeavesUnchanged(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ana, _ := create(t, c.key, "/v1/contacts", `{"name": "Ana", "email": "ana@example.com", "city": "Madrid"}`)
	path := itemPath("/v1/contacts", ana.id())
	before := mustGet(t, c.key, path)
	events := eventCount(t, c.id, "")

	// The same values: unchanged, no write, no event.
	b := wantBatch(t, c.key, "/v1/contacts/batch/upsert?expand[]=userCreator",
		`{"matchOn": "email", "items": [{"email": "ana@example.com", "name": "Ana", "city": "Madrid"}]}`, http.StatusOK, "unchanged")
	wantUnchanged(t, c.key, path, before)
	if b.Data[0].Object.id() != ana.id() || b.Data[0].Object["userCreator"] == nil || eventCount(t, c.id, "") != events {
		t.Errorf("unchanged upsert: %v, %d events; want Ana expanded and no event", b.Data[0].Object, eventCount(t, c.id, "")-events)
	}

	// Another case matches (matchOn defaults to email); a new value creates.
	b = wantBatch(t, c.key, "/v1/contacts/batch/upsert",
		`{"items": [{"email": "ANA@example.com", "city": "Lisboa"}, {"email": "bo@example.com", "name": "Bo"}]}`, http.StatusOK, "updated", "created")
	if b.Data[0].Object.id() != ana.id() || b.Data[0].Object["city"] != "Lisboa" || b.Data[0].Object["name"] != "Ana" {
		t.Errorf("upsert of Ana: %v; want her, patched", b.Data[0].Object)
	}
	if n := eventCount(t, c.id, "contact.updated"); n != 1 {
		t.Errorf("%d contact.updated events; want 1", n)
	}

	// E-mails compare ignoring case, and one with spaces around it is no e-mail: its item fails,
	// whether an object holds the e-mail trimmed (Ana) or none does.
	wantBatchFailure(t, c.key, "/v1/contacts/batch/upsert", `{"items": [{"email": "  ana@example.com "}, {"email": " new@example.com", "name": "New"}]}`,
		http.StatusUnprocessableEntity, "items[0].email validation_failed", "items[1].email validation_failed")

	// Two items for one value; an item without the value; a create that fails validation.
	wantBatchFailure(t, c.key, "/v1/contacts/batch/upsert",
		`{"items": [{"email": "cy@example.com", "name": "Cy"}, {"email": "CY@example.com", "name": "Cy 2"}, {"name": "No e-mail"}, {"email": "dee@example.com"}]}`,
		http.StatusUnprocessableEntity, "items[1].email duplicate_in_request", "items[2].email validation_failed", "items[3].name validation_failed")

	// Two contacts with one e-mail: ambiguous_match, with both as candidates.
	d1, _ := create(t, c.key, "/v1/contacts", `{"name": "Dup 1", "email": "dup@example.com"}`)
	d2, _ := create(t, c.key, "/v1/contacts", `{"name": "Dup 2", "email": "Dup@example.com"}`)
	want := []any{fmt.Sprint(d1.id()), fmt.Sprint(d2.id())}
	p := wantBatchFailure(t, c.key, "/v1/contacts/batch/upsert", `{"items": [{"email": "dup@example.com", "city": "X"}]}`,
		http.StatusUnprocessableEntity, "items[0].email ambiguous_match")
	if diff := cmp.Diff(want, p.Errors[0].Candidates); diff != "" {
		t.Errorf("candidates (-want +got):\n%s", diff)
	}
	b = wantBatch(t, c.key, "/v1/contacts/batch/upsert", `{"atomic": false, "items": [{"email": "dup@example.com", "city": "X"}]}`,
		http.StatusMultiStatus, "error:ambiguous_match")
	if diff := cmp.Diff(want, b.Data[0].Error.Candidates); diff != "" || b.Data[0].Error.Status != http.StatusConflict {
		t.Errorf("207 item: status %d, candidates (-want +got):\n%s", b.Data[0].Error.Status, diff)
	}

	// Organizations match on the name, trimmed and ignoring case.
	acme, _ := create(t, c.key, "/v1/organizations", `{"name": "Acme"}`)
	b = wantBatch(t, c.key, "/v1/organizations/batch/upsert", `{"matchOn": "name", "items": [{"name": " ACME "}, {"name": "Initech"}]}`,
		http.StatusOK, "updated", "created")
	if b.Data[0].Object.id() != acme.id() || b.Data[0].Object["name"] != " ACME " {
		t.Errorf("organization upsert: %v; want Acme renamed", b.Data[0].Object)
	}
}

func TestBatchConcurrentUpsertsOfOneNewValueCreateOneObject(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	n := int64(upsertInParallel(t, c.key, func(i int) string {
		// Each request also carries a value of its own, and the shared ones in another order.
		body := fmt.Sprintf(`{"items": [{"email": "own%d@example.com", "name": "Own"}, {"email": "new@example.com", "name": "New"},
			{"email": "other@example.com", "name": "Other %d"}]}`, i, i%2)
		if i%3 == 0 {
			body = fmt.Sprintf(`{"items": [{"email": "OTHER@example.com", "name": "Other %d"}, {"email": "New@example.com", "name": "New"}]}`, i%2)
		}
		return body
	}))
	for _, email := range []string{"new@example.com", "other@example.com"} {
		if got := sqlID(t, `SELECT count(*) FROM contacts WHERE company_id = $1 AND lower(email) = $2`, c.id, email); got != 1 {
			t.Errorf("%d contacts with %s; want exactly 1", got, email)
		}
	}
	if got := eventCount(t, c.id, "contact.created"); got != 2+n-(n+2)/3 {
		t.Errorf("%d contact.created events; want %d", got, 2+n-(n+2)/3)
	}
}

func TestBatchIdempotencyKeyCoversTheBatch(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	body := `{"items": [{"name": "One"}, {"name": "Two"}]}`
	first := postBatch(t, c.key, "/v1/contacts/batch/create", body, http.StatusOK, "Idempotency-Key", "import-1")
	again := postBatch(t, c.key, "/v1/contacts/batch/create", body, http.StatusOK, "Idempotency-Key", "import-1")
	if string(again.body) != string(first.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay = %s (replayed %q); want %s", again.body, again.header.Get("Idempotent-Replayed"), first.body)
	}
	if n := countOf(t, c.key, "/v1/contacts/count"); n != 2 {
		t.Errorf("%d contacts after a replayed batch; want 2", n)
	}
	wantProblem(t, call(t, "POST", "/v1/contacts/batch/create", c.key, `{"items": [{"name": "Other"}]}`, "Idempotency-Key", "import-1"),
		http.StatusUnprocessableEntity, "idempotency_key_reused")
	// A failed atomic batch keeps nothing: corrected, it runs with the same key.
	postBatch(t, c.key, "/v1/contacts/batch/create", `{"items": [{"name": ""}]}`, http.StatusUnprocessableEntity, "Idempotency-Key", "import-2")
	postBatch(t, c.key, "/v1/contacts/batch/create", `{"items": [{"name": "Fixed"}]}`, http.StatusOK, "Idempotency-Key", "import-2")
}

func TestOrganizationsUpdateDeleteAndInUse(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	org, _ := create(t, c.key, "/v1/organizations", `{"name": "Acme"}`)
	path := itemPath("/v1/organizations", org.id())
	r := wantStatus(t, call(t, "PATCH", path, c.key, `{"name": "Acme Inc"}`), http.StatusOK)
	if o := decode[obj](t, r.body); o["name"] != "Acme Inc" || o["updatedAt"] == org["updatedAt"] {
		t.Errorf("PATCH = %v; want the new name and updatedAt", o)
	}
	before := mustGet(t, c.key, path)
	wantStatus(t, call(t, "PATCH", path, c.key, `{}`), http.StatusOK)
	wantUnchanged(t, c.key, path, before)
	wantFields(t, call(t, "PATCH", path, c.key, `{"name": ""}`), "name")

	contact, _ := create(t, c.key, "/v1/contacts", fmt.Sprintf(`{"name": "Ana", "organizationId": %d}`, org.id()))
	wantProblem(t, call(t, "DELETE", path, c.key, ""), http.StatusConflict, "organization_in_use")
	b := wantBatch(t, c.key, "/v1/organizations/batch/delete", fmt.Sprintf(`{"atomic": false, "ids": [%d]}`, org.id()),
		http.StatusMultiStatus, "error:organization_in_use")
	if e := b.Data[0].Error; e.Status != http.StatusConflict || e.Errors[0].Field != "ids[0]" {
		t.Errorf("in use item: %+v", e)
	}
	mustGet(t, c.key, path)
	wantStatus(t, call(t, "DELETE", itemPath("/v1/contacts", contact.id()), c.key, ""), http.StatusNoContent)
	wantStatus(t, call(t, "DELETE", path, c.key, ""), http.StatusNoContent)
	wantStatus(t, call(t, "DELETE", path, c.key, ""), http.StatusNotFound)
	want := []string{"organization.created", "organization.updated", "organization.deleted"}
	var got []string
	for _, typ := range want {
		if eventCount(t, c.id, typ) == 1 {
			got = append(got, typ)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("one event of each type (-want +got):\n%s", diff)
	}
	// A key that only reads organizations may not change them.
	ro := *makeKey(t, c.key, "organizations:read").Key
	wantProblem(t, call(t, "POST", "/v1/organizations/batch/create", ro, `{"items": [{"name": "X"}]}`), http.StatusForbidden, "insufficient_scope")
}

func TestBatchUpdatesOfTheSameObjectsInAnyOrderDoNotDeadlock(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	b := wantBatch(t, c.key, "/v1/contacts/batch/create", items(30, func(i int) string { return `{"name": "Same"}` }, ""), http.StatusOK,
		strings.Split(strings.Repeat("created ", 30), " ")[:30]...)
	var wg sync.WaitGroup
	fails := make(chan string, 10)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			up := make([]string, len(b.Data))
			for j, d := range b.Data { // half the requests in one order, half in the other
				if i%2 == 1 {
					d = b.Data[len(b.Data)-1-j]
				}
				up[j] = fmt.Sprintf(`{"id": "%d", "city": "City %d"}`, d.Object.id(), i)
			}
			for range 3 { // each client waits for its answer before it sends again
				r, err := send(nil, testEnv.baseURL, "POST", "/v1/contacts/batch/update", c.key, `{"items": [`+strings.Join(up, ",")+`]}`)
				if err != nil || r.status != http.StatusOK {
					fails <- fmt.Sprintf("request %d: %v %d %.300s", i, err, r.status, r.body)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(fails)
	for f := range fails {
		t.Error(f)
	}
}

// customValue returns the value of the custom field key in the object o.
func customValue(o obj, key string) any {
	custom, _ := o["custom"].(map[string]any)
	return custom[key]
}

func TestBatchUpsertMatchesOnAUniqueCustomField(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	defineField(t, c.key, `{"object": "contact", "key": "ext", "label": "External id", "type": "text", "unique": true}`)
	defineField(t, c.key, `{"object": "contact", "key": "site", "label": "Site", "type": "url", "unique": true}`)
	defineField(t, c.key, `{"object": "contact", "key": "note", "label": "Note", "type": "text"}`)
	ana, _ := create(t, c.key, "/v1/contacts", `{"name": "Ana", "email": "ana@example.com", "custom": {"ext": "A-1", "site": "https://example.com/Ana"}}`)
	path := itemPath("/v1/contacts", ana.id())

	// Text compares ignoring case; a new value creates; the same values leave the object unchanged.
	b := wantBatch(t, c.key, "/v1/contacts/batch/upsert?expand[]=userCreator",
		`{"matchOn": "custom.ext", "items": [{"custom": {"ext": "a-1"}, "city": "Lisboa"}, {"name": "Bo", "custom": {"ext": "B-2"}}]}`,
		http.StatusOK, "updated", "created")
	if o := b.Data[0].Object; o.id() != ana.id() || o["city"] != "Lisboa" || o["name"] != "Ana" || customValue(o, "ext") != "a-1" || o["userCreator"] == nil {
		t.Errorf("upsert of Ana: %v; want her, patched and expanded", o)
	}
	events := eventCount(t, c.id, "")
	wantBatch(t, c.key, "/v1/contacts/batch/upsert", `{"matchOn": "custom.ext", "items": [{"custom": {"ext": "A-1"}, "city": "Lisboa"}]}`,
		http.StatusOK, "updated") // the value's case is part of the object
	wantBatch(t, c.key, "/v1/contacts/batch/upsert", `{"matchOn": "custom.ext", "items": [{"custom": {"ext": "A-1"}, "city": "Lisboa"}]}`,
		http.StatusOK, "unchanged")
	if eventCount(t, c.id, "") != events+1 {
		t.Errorf("%d events; want the one of the update", eventCount(t, c.id, "")-events)
	}
	wantUnchanged(t, c.key, path, mustGet(t, c.key, path))

	// A url compares as it is: another case is another value.
	b = wantBatch(t, c.key, "/v1/contacts/batch/upsert", `{"matchOn": "custom.site", "items": [
		{"name": "Ana again", "custom": {"site": "https://example.com/Ana"}}, {"name": "Cy", "custom": {"site": "https://example.com/ana"}}]}`,
		http.StatusOK, "updated", "created")
	if b.Data[0].Object.id() != ana.id() || b.Data[1].Object.id() == ana.id() {
		t.Errorf("url upsert: %v", b.Data)
	}

	// Each item needs a valid value; two items for one value; a value another item's create holds.
	wantBatchFailure(t, c.key, "/v1/contacts/batch/upsert", `{"matchOn": "custom.ext", "items": [{"name": "No value"},
		{"name": "Null", "custom": {"ext": null}}, {"name": "Number", "custom": {"ext": 5}}, {"name": "Dee", "custom": {"ext": "D-4"}},
		{"name": "Dee 2", "custom": {"ext": "d-4"}}, {"custom": {"ext": "b-2"}, "email": "nope"}, {"name": "Cee", "custom": "C-3"}]}`,
		http.StatusUnprocessableEntity, "items[0].custom.ext validation_failed", "items[1].custom.ext validation_failed",
		"items[2].custom.ext validation_failed", "items[4].custom.ext duplicate_in_request", "items[5].email validation_failed",
		"items[6].custom.ext validation_failed")
	if n := countOf(t, c.key, "/v1/contacts/count"); n != 3 {
		t.Errorf("%d contacts after a failed batch; want 3", n)
	}

	// Only a unique custom field of the object is a match.
	for _, matchOn := range []string{"custom.note", "custom.nope", "custom.", "custom.rank"} {
		r := call(t, "POST", "/v1/contacts/batch/upsert", c.key, `{"matchOn": "`+matchOn+`", "items": [{"name": "A", "custom": {"note": "x"}}]}`)
		if p := wantProblem(t, r, http.StatusUnprocessableEntity, "validation_failed"); len(p.Errors) != 1 || p.Errors[0].Field != "matchOn" {
			t.Errorf("matchOn %s: %+v; want an error on matchOn", matchOn, p.Errors)
		}
	}
	defineField(t, c.key, `{"object": "organization", "key": "rank", "label": "Rank", "type": "number", "unique": true}`)

	// Numbers compare as numbers: 1.5 is 1.50 and 15e-1. With atomic false, each item stands alone.
	org, _ := create(t, c.key, "/v1/organizations", `{"name": "Acme", "custom": {"rank": 1.50}}`)
	b = wantBatch(t, c.key, "/v1/organizations/batch/upsert", `{"matchOn": "custom.rank", "atomic": false, "items": [
		{"name": "Acme Inc", "custom": {"rank": 15e-1}}, {"name": "Initech", "custom": {"rank": 2}}, {"name": "Bad", "custom": {"rank": "x"}},
		{"name": "Initech 2", "custom": {"rank": 2.0}}]}`,
		http.StatusMultiStatus, "updated", "created", "error:validation_failed", "error:duplicate_in_request")
	if o := b.Data[0].Object; o.id() != org.id() || o["name"] != "Acme Inc" {
		t.Errorf("organization upsert: %v; want Acme renamed", o)
	}
	if e := b.Data[3].Error; e.Errors[0].Field != "items[3].custom.rank" || !strings.Contains(e.Errors[0].Message, "item 1") {
		t.Errorf("duplicate: %+v; want it named items[3].custom.rank, the same as item 1", e)
	}
	b = wantBatch(t, c.key, "/v1/organizations/batch/upsert", `{"matchOn": "custom.rank", "items": [{"name": "Initech", "custom": {"rank": 2.00}}]}`,
		http.StatusOK, "updated")
	if fmt.Sprint(customValue(b.Data[0].Object, "rank")) != "2.00" {
		t.Errorf("rank %v; want 2.00 as written", customValue(b.Data[0].Object, "rank"))
	}
}

func TestBatchConcurrentUpsertsOfOneNewCustomValueCreateOneObject(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	field := defineField(t, c.key, `{"object": "contact", "key": "ext", "label": "External id", "type": "text", "unique": true}`)
	n := int64(upsertInParallel(t, c.key, func(i int) string {
		// Each request also carries a value of its own, and the shared ones in another order and case.
		body := fmt.Sprintf(`{"matchOn": "custom.ext", "items": [{"name": "Own", "custom": {"ext": "own-%d"}},
			{"name": "New", "custom": {"ext": "new-1"}}, {"name": "Other %d", "custom": {"ext": "other-2"}}]}`, i, i%2)
		if i%3 == 0 {
			body = fmt.Sprintf(`{"matchOn": "custom.ext", "items": [{"name": "Other %d", "custom": {"ext": "OTHER-2"}},
				{"name": "New", "custom": {"ext": "NEW-1"}}]}`, i%2)
		}
		return body
	}))
	for _, v := range []string{"new-1", "other-2"} {
		if got := countOf(t, c.key, "/v1/contacts/count?custom.ext="+v); got != 1 {
			t.Errorf("%d contacts with %s; want exactly 1", got, v)
		}
	}
	if got := sqlID(t, `SELECT count(*) FROM custom_values WHERE company_id = $1 AND field_id = $2`, c.id, field); got != 2+n-(n+2)/3 {
		t.Errorf("%d values; want %d", got, 2+n-(n+2)/3)
	}
	if got := eventCount(t, c.id, "contact.created"); got != 2+n-(n+2)/3 {
		t.Errorf("%d contact.created events; want %d", got, 2+n-(n+2)/3)
	}
}

// An atomic batch of which an item fails changes nothing; the corrected batch, the same items, then
// writes each object once, and once more changes nothing.
func TestBatchAtomicFailureThenTheCorrectedBatchWritesEachObjectOnce(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	field := defineField(t, c.key, `{"object": "contact", "key": "ext", "label": "External id", "type": "text", "unique": true}`)
	old, _ := create(t, c.key, "/v1/contacts", `{"name": "Old", "custom": {"ext": "old"}}`)
	before := mustGet(t, c.key, itemPath("/v1/contacts", old.id()))
	state := func() string {
		return fmt.Sprint(countOf(t, c.key, "/v1/contacts/count"), eventCount(t, c.id, ""),
			sqlID(t, `SELECT count(*) FROM custom_values WHERE company_id = $1 AND field_id = $2`, c.id, field))
	}
	failing := map[string]string{
		// The second item's value is the first's, which only its create in the batch holds.
		"create": `{"items": [{"name": "P", "custom": {"ext": "p"}}, {"name": "Q", "custom": {"ext": "P"}}, {"name": "R"}]}`,
		// The second item fails its check; the third would update Old.
		"upsert": `{"matchOn": "custom.ext", "items": [{"name": "A", "custom": {"ext": "a"}}, {"name": "B", "email": "nope", "custom": {"ext": "b"}},
			{"name": "Old renamed", "custom": {"ext": "OLD"}}]}`,
	}
	fixed := map[string]string{
		"create": strings.Replace(failing["create"], `"ext": "P"`, `"ext": "q"`, 1),
		"upsert": strings.Replace(failing["upsert"], `"nope"`, `"b@example.com"`, 1),
	}
	for _, op := range []string{"create", "upsert"} {
		path, start := "/v1/contacts/batch/"+op, state()
		wantBatchFailure(t, c.key, path, failing[op], http.StatusUnprocessableEntity,
			map[string]string{"create": "items[1].custom.ext validation_failed", "upsert": "items[1].email validation_failed"}[op])
		if got := state(); got != start {
			t.Errorf("%s: contacts, events and values %s after a failed atomic batch; want %s", op, got, start)
		}
		wantUnchanged(t, c.key, itemPath("/v1/contacts", old.id()), before)
		want := map[string][]string{"create": {"created", "created", "created"}, "upsert": {"created", "created", "updated"}}[op]
		b := wantBatch(t, c.key, path, fixed[op], http.StatusOK, want...)
		for i, d := range b.Data {
			ext, _ := customValue(d.Object, "ext").(string)
			n := sqlID(t, `SELECT count(*) FROM events WHERE company_id = $1 AND (object::json ->> 'id')::bigint = $2`, c.id, d.Object.id())
			if got := countOf(t, c.key, "/v1/contacts/count?custom.ext="+ext); ext != "" && got != 1 || n != 1+int64(strings.Count(want[i], "updated")) {
				t.Errorf("%s item %d: %d contacts with %q, %d events; want one, with an event for each write", op, i, got, ext, n)
			}
		}
		before = mustGet(t, c.key, itemPath("/v1/contacts", old.id()))
		if op == "upsert" {
			after := state()
			wantBatch(t, c.key, path, fixed[op], http.StatusOK, "unchanged", "unchanged", "unchanged")
			if got := state(); got != after {
				t.Errorf("upsert again: contacts, events and values %s; want %s", got, after)
			}
		}
	}
}

// expand[] on a batch's answer costs what it costs a list page: a fixed number of queries, whatever
// the number of items. They are counted by a proxy between a server of the test's own and PostgreSQL.
func TestBatchExpandCostsTheQueriesOfAListPage(t *testing.T) {
	t.Parallel()
	proxy, dbURL := newDBProxy(t, testEnv.dbURL)
	// No webhook worker, whose statements would be counted too; time enough for a batch of 100 on a
	// busy machine (Citus), as only the queries count here.
	base := startServer(t, map[string]string{"DATABASE_URL": dbURL, "ROLODEX_DB_MAX_CONNS": "2", "ROLODEX_WEBHOOK_SLOTS": "0",
		"ROLODEX_STATEMENT_TIMEOUT": "25s"}, &syncBuffer{})
	w := newRefWorld(t)
	// The fewest of three tries: on Citus a batch of 100 takes seconds, and background work the proxy
	// does not leave out (it does the purge's and pgx's pings) may run beside it.
	queries := func(t *testing.T, method, path, body string, status, objects int) (fewest int64) {
		t.Helper()
		for try := range 3 {
			wantStatus(t, callAt(t, nil, base, "GET", "/v1/statuses", w.key, ""), http.StatusOK) // the key in the server's cache
			proxy.queries.Store(0)
			r := callAt(t, nil, base, method, path, w.key, body)
			count := proxy.queries.Load()
			if got := bytes.Count(r.body, []byte(`"createdAt"`)); r.status != status || count == 0 || got != objects {
				t.Fatalf("%s %s = %d with %d objects and nested objects after %d queries; want %d with %d", method, path, r.status, got, count, status, objects)
			}
			if try == 0 || count < fewest {
				fewest = count
			}
		}
		return fewest
	}
	for resource, specs := range expsOf {
		t.Run(resource, func(t *testing.T) {
			q, m := expQuery(expNames(specs)...), 1+len(specs) // objects with createdAt in one object, expanded
			batch := func(n int, expand bool) int64 {
				path, objects := resource+"/batch/create", n
				if expand {
					path, objects = path+"?"+q, n*m
				}
				return queries(t, "POST", path, items(n, func(int) string { return w.body(resource, 0) }, ""), http.StatusOK, objects)
			}
			one, oneExp, hundred, hundredExp := batch(1, false), batch(1, true), batch(100, false), batch(100, true)
			list, listExp := queries(t, "GET", resource+"?limit=100", "", http.StatusOK, 100), queries(t, "GET", resource+"?limit=100&"+q, "", http.StatusOK, 100*m)
			t.Logf("POST %s/batch/create: %d queries for 1 item, %d with %d expansions; %d and %d for 100; a list page %d and %d",
				resource, one, oneExp, len(specs), hundred, hundredExp, list, listExp)
			if oneExp-one != hundredExp-hundred || hundredExp-hundred != listExp-list {
				t.Errorf("POST %s/batch/create: expansions cost %d queries for 1 item and %d for 100; want the same, as on a list page (%d)",
					resource, oneExp-one, hundredExp-hundred, listExp-list)
			}
		})
	}
}

// upsertInParallel sends 24 upserts of contacts at once, body(i) the i-th, alternately to two servers
// on the same database, wants every one answered 200, and returns how many it sent.
func upsertInParallel(t *testing.T, key string, body func(i int) string) int {
	second := startServer(t, nil, nil)
	statuses := make([]string, 24)
	var wg sync.WaitGroup
	for i := range statuses {
		wg.Go(func() {
			base := map[bool]string{false: testEnv.baseURL, true: second}[i%2 == 1]
			r, err := send(nil, base, "POST", "/v1/contacts/batch/upsert", key, body(i))
			switch {
			case err != nil:
				statuses[i] = err.Error()
			case r.status != http.StatusOK:
				statuses[i] = fmt.Sprintf("%d %s", r.status, r.body)
			}
		})
	}
	wg.Wait()
	for i, s := range statuses {
		if s != "" {
			t.Errorf("request %d: %s", i, s)
		}
	}
	return len(statuses)
}

// selectFieldsOf500 gives the company's contacts n select fields s0, s1, ... of 500 options of 64
// characters each: the longest list an "option value" message could name.
func selectFieldsOf500(t *testing.T, key string, n int) {
	t.Helper()
	opts := make([]string, 500)
	for i := range opts {
		opts[i] = fmt.Sprintf(`{"value": "%s%03d"}`, strings.Repeat("o", 61), i)
	}
	for i := range n {
		create(t, key, "/v1/customFields", fmt.Sprintf(`{"object": "contact", "key": "s%d", "label": "S", "type": "select", "options": [%s]}`,
			i, strings.Join(opts, ",")))
	}
}

// wantBounded fails the test unless r's body is under 256 KiB and every errors entry in it (of the
// body, or of a 207's items) has a field and a message of at most 200 characters.
func wantBounded(t *testing.T, r response, entries []batchError) {
	t.Helper()
	if len(r.body) >= 256<<10 {
		t.Errorf("POST %s = %d, %d bytes; want under 256 KiB", r.path, r.status, len(r.body))
	}
	for _, e := range entries {
		if len([]rune(e.Field)) > 200 || len([]rune(e.Message)) > 200 || e.Message == "" {
			t.Fatalf("entry %+v: want a field and a message of at most 200 characters", e)
		}
	}
}

// A batch of 100 items with 5 bad select values each answered 16.5 MB (issue 44): each message
// named all 500 options. Now a message names a few and counts the rest, and the body stays small.
func TestBatchErrorsOfBadSelectValuesAreBounded(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	selectFieldsOf500(t, c.key, 5)
	items := make([]string, 100)
	for i := range items {
		items[i] = fmt.Sprintf(`{"name": "n%d", "custom": {"s0": "x", "s1": "x", "s2": "x", "s3": "x", "s4": "x"}}`, i)
	}
	r := postBatch(t, c.key, "/v1/contacts/batch/create", `{"items": [`+strings.Join(items, ",")+`]}`, http.StatusUnprocessableEntity)
	p := decode[batchProblem](t, r.body)
	wantBounded(t, r, p.Errors)
	size422 := len(r.body)
	if len(p.Errors) != 500 {
		t.Errorf("%d errors entries; want 500, each item's 5", len(p.Errors))
	}
	want := "must be an option value of the field: " + strings.Repeat("o", 61) + "000, " + strings.Repeat("o", 61) + "001 and 498 more"
	if p.Errors[499].Field != "items[99].custom.s4" || p.Errors[499].Message != want {
		t.Errorf("last entry %+v; want items[99].custom.s4: %q", p.Errors[499], want)
	}

	r = postBatch(t, c.key, "/v1/contacts/batch/create", `{"atomic": false, "items": [`+strings.Join(items, ",")+`]}`,
		http.StatusMultiStatus, "Idempotency-Key", "bounded-"+randomHex(4))
	b := decode[batchBody](t, r.body)
	for i, d := range b.Data {
		if d.Error == nil || len(d.Error.Errors) != 5 {
			t.Fatalf("item %d: %+v; want its problem with 5 entries", i, d)
		}
		wantBounded(t, r, d.Error.Errors)
	}
	t.Logf("100 items x 5 bad select values: 422 of %d bytes, 207 of %d bytes", size422, len(r.body))
}

// An item lists at most 10 errors and then one that counts the others; past a budget of the whole
// answer, an item has only that one, so every failing item is named and the body stays small.
func TestBatchErrorsPerItemAndPerAnswerAreBounded(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	custom := make([]string, 15) // 15 unknown custom fields, with long keys
	for i := range custom {
		custom[i] = fmt.Sprintf(`"%s%02d": 1`, strings.Repeat("k", 190), i)
	}
	items := make([]string, 100)
	for i := range items {
		items[i] = `{"name": "n", "custom": {` + strings.Join(custom, ",") + `}}`
	}
	body := `{"items": [` + strings.Join(items, ",") + `]}`
	r := postBatch(t, c.key, "/v1/contacts/batch/create", body, http.StatusUnprocessableEntity)
	p := decode[batchProblem](t, r.body)
	wantBounded(t, r, p.Errors)
	byItem := map[int][]batchError{}
	for _, e := range p.Errors {
		byItem[e.Index] = append(byItem[e.Index], e)
	}
	first, last := byItem[0], byItem[99]
	switch {
	case len(byItem) != 100:
		t.Errorf("entries name %d items; want all 100", len(byItem))
	case len(first) != 11 || first[10].Field != "items[0]" || first[10].Message != "and 5 more" || first[10].Code != "validation_failed":
		t.Errorf("item 0: %d entries, the last %+v; want 10 and one that counts 5 more", len(first), first[len(first)-1])
	case len(last) != 1 || !strings.HasPrefix(last[0].Message, "15 errors, not listed"):
		t.Errorf("item 99: %+v; want one entry that counts its 15 errors", last)
	case !strings.HasSuffix(first[0].Field, "...") || !strings.HasPrefix(first[0].Field, "items[0].custom.kkk"):
		t.Errorf("item 0's first field %q; want it cut to 200 characters", first[0].Field)
	}

	size422 := len(r.body)
	r = postBatch(t, c.key, "/v1/contacts/batch/create", `{"atomic": false, `+body[1:], http.StatusMultiStatus)
	t.Logf("100 items x 15 long unknown fields: 422 of %d bytes, 207 of %d bytes", size422, len(r.body))
	b := decode[batchBody](t, r.body)
	for i, d := range b.Data {
		if d.Error == nil || len(d.Error.Errors) == 0 || len(d.Error.Errors) > 11 {
			t.Fatalf("item %d: %+v; want its problem with 1 to 11 entries", i, d)
		}
		wantBounded(t, r, d.Error.Errors)
	}

	// A single request lists 10 errors too, and counts the others.
	pb := wantProblem(t, call(t, "POST", "/v1/contacts", c.key, items[0]), http.StatusUnprocessableEntity, "validation_failed")
	if len(pb.Errors) != 11 || pb.Errors[10] != (fieldProbl{Field: "", Message: "and 5 more"}) {
		t.Errorf("a create with 15 bad fields: %+v; want 10 entries and one that counts 5 more", pb.Errors)
	}
}

// An ambiguous match names at most 10 candidates, and says how many objects hold the value.
func TestUpsertNamesTenCandidatesAtMost(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	items := make([]string, 12)
	for i := range items {
		items[i] = fmt.Sprintf(`{"name": "Dup %d", "email": "same@example.com"}`, i)
	}
	created := wantBatch(t, c.key, "/v1/contacts/batch/create", `{"items": [`+strings.Join(items, ",")+`]}`, http.StatusOK,
		slices.Repeat([]string{"created"}, 12)...)
	var want []any
	for _, d := range created.Data[:10] {
		want = append(want, fmt.Sprint(d.Object.id()))
	}
	b := wantBatch(t, c.key, "/v1/contacts/batch/upsert", `{"atomic": false, "items": [{"email": "same@example.com", "city": "X"}]}`,
		http.StatusMultiStatus, "error:ambiguous_match")
	if diff := cmp.Diff(want, b.Data[0].Error.Candidates); diff != "" {
		t.Errorf("candidates (-want +got):\n%s", diff)
	}
	if d := b.Data[0].Error.Detail; d != "12 objects hold this email; candidates lists the first 10." {
		t.Errorf("detail %q; want it to say 12 hold it and 10 are listed", d)
	}
}
