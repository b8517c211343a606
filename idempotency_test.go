package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Tests of idempotency.go: Idempotency-Key on POST, PATCH and DELETE (API.md section 10).

// wantReplay fails the test unless again is first sent again: the same status, body, Location and
// ETag, marked Idempotent-Replayed.
func wantReplay(t *testing.T, what string, first, again response) {
	t.Helper()
	if again.status != first.status || !bytes.Equal(again.body, first.body) ||
		again.header.Get("Location") != first.header.Get("Location") || again.header.Get("ETag") != first.header.Get("ETag") {
		t.Errorf("%s replayed %d %s (Location %q, ETag %q); first %d %s (Location %q, ETag %q)", what,
			again.status, again.body, again.header.Get("Location"), again.header.Get("ETag"),
			first.status, first.body, first.header.Get("Location"), first.header.Get("ETag"))
	}
	if got := again.header.Get("Idempotent-Replayed"); got != "true" {
		t.Errorf("%s replayed: Idempotent-Replayed = %q; want true", what, got)
	}
	if got := first.header.Get("Idempotent-Replayed"); got != "" {
		t.Errorf("%s first answer: Idempotent-Replayed = %q; want none", what, got)
	}
}

func TestIdempotentCreateRunsOnceAndReplaysItsAnswer(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for _, tc := range []struct{ path, body, table string }{
		{"/v1/contacts?expand[]=userCreator", `{"name": "Ana"}`, "contacts"},
		{"/v1/business", `{"title": "Deal"}`, "business"},
		{"/v1/organizations", `{"name": "Acme"}`, "organizations"},
	} {
		first := call(t, "POST", tc.path, c.key, tc.body, "Idempotency-Key", "create "+tc.table)
		wantStatus(t, first, http.StatusCreated)
		again := call(t, "POST", tc.path, c.key, tc.body, "Idempotency-Key", "create "+tc.table)
		wantReplay(t, "POST "+tc.path, first, again)
		if n := sqlID(t, `SELECT count(*) FROM `+tc.table+` WHERE company_id = $1`, c.id); tc.table != "organizations" && n != 1 {
			t.Errorf("%s: %d rows after a replayed create; want 1", tc.table, n)
		}
	}
	// The same key string is another key in another company.
	other := newTestCompany(t)
	r := call(t, "POST", "/v1/contacts?expand[]=userCreator", other.key, `{"name": "Ana"}`, "Idempotency-Key", "create contacts")
	wantStatus(t, r, http.StatusCreated)
	if r.header.Get("Idempotent-Replayed") != "" || sqlID(t, `SELECT count(*) FROM contacts WHERE company_id = $1`, other.id) != 1 {
		t.Errorf("another company's request with the same key was replayed: %s", r.body)
	}
}

func TestIdempotentUpdateAndDeleteReplayTheFirstAnswer(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	path := itemPath("/v1/contacts", mustCreate(t, c.key, "/v1/contacts", `{"name": "Ana"}`))
	first := call(t, "PATCH", path, c.key, `{"city": "Madrid"}`, "Idempotency-Key", "patch 1")
	wantStatus(t, first, http.StatusOK)
	wantStatus(t, call(t, "PATCH", path, c.key, `{"city": "Lisboa"}`), http.StatusOK)
	// Byte for byte what the first answered, though the contact has changed since.
	wantReplay(t, "PATCH", first, call(t, "PATCH", path, c.key, `{"city": "Madrid"}`, "Idempotency-Key", "patch 1"))
	if city := decode[obj](t, mustGet(t, c.key, path).body)["city"]; city != "Lisboa" {
		t.Errorf("city = %q after a replayed PATCH; want Lisboa (the replay changes nothing)", city)
	}

	del := call(t, "DELETE", path, c.key, "", "Idempotency-Key", "delete 1")
	wantStatus(t, del, http.StatusNoContent)
	wantReplay(t, "DELETE", del, call(t, "DELETE", path, c.key, "", "Idempotency-Key", "delete 1"))
	wantProblem(t, call(t, "DELETE", path, c.key, ""), http.StatusNotFound, "not_found")

	// A 404 and a 412 that the database found are answers, kept like any other.
	missing := call(t, "PATCH", "/v1/contacts/999999999", c.key, `{"city": "Roma"}`, "Idempotency-Key", "patch missing")
	wantProblem(t, missing, http.StatusNotFound, "not_found")
	wantReplay(t, "PATCH of nothing", missing, call(t, "PATCH", "/v1/contacts/999999999", c.key, `{"city": "Roma"}`, "Idempotency-Key", "patch missing"))
	other := itemPath("/v1/contacts", mustCreate(t, c.key, "/v1/contacts", `{"name": "Bea"}`))
	stale := call(t, "PATCH", other, c.key, `{"city": "Roma"}`, "Idempotency-Key", "patch stale", "If-Match", `"99"`)
	wantProblem(t, stale, http.StatusPreconditionFailed, "precondition_failed")
	wantReplay(t, "PATCH with a stale ETag", stale, call(t, "PATCH", other, c.key, `{"city": "Roma"}`, "Idempotency-Key", "patch stale", "If-Match", `"99"`))
}

// mustCreate creates an object and returns its id.
func mustCreate(t *testing.T, key, path, body string) int64 {
	t.Helper()
	o, _ := create(t, key, path, body)
	return o.id()
}

func TestIdempotencyKeyOfAnotherRequestIsRefused(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	wantStatus(t, call(t, "POST", "/v1/contacts", c.key, `{"name": "Ana"}`, "Idempotency-Key", "k"), http.StatusCreated)
	id := sqlID(t, `SELECT id FROM contacts WHERE company_id = $1`, c.id)
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/v1/contacts", `{"name": "Bea"}`},                  // another body
		{"POST", "/v1/contacts", `{"name": "Ana", "city": "X"}`},     // another body again
		{"POST", "/v1/contacts?expand[]=country", `{"name": "Ana"}`}, // another query
		{"POST", "/v1/organizations", `{"name": "Ana"}`},             // another path
		{"PATCH", itemPath("/v1/contacts", id), `{"name": "Ana"}`},   // another method
		{"DELETE", itemPath("/v1/contacts", id), ""},
	} {
		r := call(t, tc.method, tc.path, c.key, tc.body, "Idempotency-Key", "k")
		wantProblem(t, r, http.StatusUnprocessableEntity, "idempotency_key_reused")
	}
	if n := sqlID(t, `SELECT count(*) FROM contacts WHERE company_id = $1`, c.id); n != 1 {
		t.Errorf("%d contacts; want 1 (a reused key changes nothing)", n)
	}
}

func TestRequestsRefusedBeforeTheyRunKeepNothing(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for _, bad := range []string{strings.Repeat("k", 256), "tab\there", "ñ"} {
		r := call(t, "POST", "/v1/contacts", c.key, `{"name": "Ana"}`, "Idempotency-Key", bad)
		wantProblem(t, r, http.StatusBadRequest, "invalid_idempotency_key")
	}
	wantStatus(t, call(t, "POST", "/v1/contacts", c.key, `{"name": "Ana"}`, "Idempotency-Key", strings.Repeat("k", 255)), http.StatusCreated)
	// A 422, 415 and 400 keep nothing: the client corrects the request and sends the same key again.
	wantProblem(t, call(t, "POST", "/v1/contacts", c.key, `{"name": ""}`, "Idempotency-Key", "fix me"), http.StatusUnprocessableEntity, "validation_failed")
	wantProblem(t, call(t, "POST", "/v1/contacts", c.key, `{"organizationId": 999999999, "name": "Ana"}`, "Idempotency-Key", "fix me"), http.StatusUnprocessableEntity, "validation_failed")
	wantProblem(t, call(t, "POST", "/v1/contacts", c.key, `{"name": "Ana"}`, "Idempotency-Key", "fix me", "Content-Type", "text/plain"), http.StatusUnsupportedMediaType, "unsupported_media_type")
	wantProblem(t, call(t, "POST", "/v1/contacts?limit=1", c.key, `{"name": "Ana"}`, "Idempotency-Key", "fix me"), http.StatusBadRequest, "invalid_parameter")
	r := call(t, "POST", "/v1/contacts", c.key, `{"name": "Ana"}`, "Idempotency-Key", "fix me")
	wantStatus(t, r, http.StatusCreated)
	if r.header.Get("Idempotent-Replayed") != "" {
		t.Errorf("the corrected request was answered as a replay: %s", r.body)
	}
	if n := sqlID(t, `SELECT count(*) FROM idempotency_keys WHERE company_id = $1`, c.id); n != 2 {
		t.Errorf("%d keys kept; want 2 (the two requests that ran)", n)
	}
}

func TestConcurrentRequestsWithOneKeyWriteOnce(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	const n = 20
	answers := make([]response, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			r, err := send(nil, testEnv.baseURL, "POST", "/v1/contacts", c.key, `{"name": "Once"}`, "Idempotency-Key", "at once")
			if err != nil {
				t.Error(err)
			}
			answers[i] = r
		})
	}
	close(start)
	wg.Wait()
	var created []response
	for _, r := range answers {
		switch r.status {
		case http.StatusCreated:
			created = append(created, r)
		case http.StatusConflict:
			wantProblem(t, r, http.StatusConflict, "idempotency_key_in_use")
		default:
			t.Errorf("a concurrent request was answered %d %s; want 201 or 409", r.status, r.body)
		}
	}
	if len(created) == 0 {
		t.Fatal("no request of 20 with one key was answered 201")
	}
	for _, r := range created[1:] {
		if !bytes.Equal(r.body, created[0].body) {
			t.Errorf("two 201 answers for one key differ:\n%s\n%s", r.body, created[0].body)
		}
	}
	if got := sqlID(t, `SELECT count(*) FROM contacts WHERE company_id = $1`, c.id); got != 1 {
		t.Errorf("20 concurrent requests with one key made %d contacts; want 1", got)
	}
}

func TestExpiredKeysAreNewAndDeletedByTheServer(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ctx := context.Background()
	const old = `INSERT INTO idempotency_keys (company_id, key, fingerprint, status, location, etag, body, created_at)
		VALUES ($1, $2, sha256('another request'), 201, '', '', '{}', now() - interval '25 hours')`
	for _, k := range []string{"old 1", "old 2"} {
		if _, err := testEnv.st.db.ExecContext(ctx, old, c.id, k); err != nil {
			t.Fatal(err)
		}
	}
	// Older than 24 hours, a key is as good as new: this is no reuse, and no replay.
	r := call(t, "POST", "/v1/contacts", c.key, `{"name": "Ana"}`, "Idempotency-Key", "old 1")
	wantStatus(t, r, http.StatusCreated)
	wantReplay(t, "POST with a renewed key", r, call(t, "POST", "/v1/contacts", c.key, `{"name": "Ana"}`, "Idempotency-Key", "old 1"))
	// A server deletes the expired keys when it starts (and every hour).
	var log syncBuffer
	startServer(t, map[string]string{"DATABASE_URL": testEnv.dbURL}, &log)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		n := sqlID(t, `SELECT count(*) FROM idempotency_keys WHERE company_id = $1 AND key = 'old 2'`, c.id)
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the expired key is still there 10 s after a server started; its log:\n%s", log.String())
		}
	}
	if strings.Contains(log.String(), "expire") {
		t.Errorf("the server logged:\n%s", log.String())
	}
	if n := sqlID(t, `SELECT count(*) FROM idempotency_keys WHERE company_id = $1 AND key = 'old 1'`, c.id); n != 1 {
		t.Errorf("the renewed key was deleted too")
	}
}

// A request with the key that committed between this one's look-up and its end (the look-up's
// snapshot is taken before its lock) makes this one 409, writing nothing: the INSERT of the answer
// fails on the primary key, and COMMIT, sent after it, never runs.
func TestKeyKeptMeanwhileRefusesTheWrite(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ctx := context.Background()
	ik := &idempotencyKey{key: "meanwhile"}
	_, _, err := testEnv.st.writeOnce(ctx, c.id, ik, func(tx *tx) (answer, error) {
		if err := tx.read(ctx); err != nil { // sends BEGIN and the look-up of a new key
			return answer{}, fmt.Errorf("look-up of a new key: %w", err)
		}
		tx.queue(`INSERT INTO organizations (company_id, name) VALUES ($1, 'Meanwhile')`, c.id)
		const other = `INSERT INTO idempotency_keys (company_id, key, fingerprint, status, location, etag, body)
			VALUES ($1, $2, sha256('another request'), 201, '', '', '{}')`
		_, err := testEnv.st.db.ExecContext(ctx, other, c.id, ik.key)
		return answer{status: http.StatusCreated, body: []byte("{}\n")}, err
	})
	if !errors.Is(err, errKeyInUse) {
		t.Errorf("write with a key kept meanwhile: %v; want errKeyInUse", err)
	}
	if n := sqlID(t, `SELECT count(*) FROM organizations WHERE company_id = $1 AND name = 'Meanwhile'`, c.id); n != 0 {
		t.Errorf("the refused write made %d organizations; want none", n)
	}
}

// A request whose key another request holds is 409 without waiting for that request, even when
// the statement sent with its look-up would wait for it (a DELETE locks the object first).
func TestKeyInUseIsRefusedWithoutWaiting(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ctx := context.Background()
	path := createPath(t, c.key, "/v1/contacts", `{"name": "Held"}`)
	id, _ := strings.CutPrefix(path, "/v1/contacts/")
	// The other request: it holds the key's lock and the contact's row lock.
	tx, err := testEnv.st.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	const hold = `SELECT pg_advisory_xact_lock(hashtextextended($1::bigint::text || ' ' || $2, 0)),
		(SELECT 1 FROM contacts WHERE company_id = $1 AND id = $3::bigint FOR UPDATE)`
	if _, err := tx.ExecContext(ctx, hold, c.id, "held", id); err != nil {
		t.Fatal(err)
	}
	answered := make(chan response, 1)
	go func() {
		r, err := send(nil, testEnv.baseURL, "DELETE", path, c.key, "", "Idempotency-Key", "held")
		if err != nil {
			t.Error(err)
		}
		answered <- r
	}()
	select {
	case r := <-answered:
		wantProblem(t, r, http.StatusConflict, "idempotency_key_in_use")
	case <-time.After(10 * time.Second):
		tx.Rollback()
		<-answered
		t.Fatal("DELETE with a key in use waited for the request that holds it")
	}
	tx.Rollback()
	wantStatus(t, call(t, "GET", path, c.key, ""), http.StatusOK) // the refused DELETE deleted nothing
}
