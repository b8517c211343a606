package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Tests of events.go: the events every change writes and the gap-free feed (API.md section 11).

type eventBody struct {
	ID        int64
	Type      string
	CreatedAt string
	RequestID string
	Data      struct {
		Object             obj
		PreviousAttributes obj
		MergedInto         any   // of a merged object's *.deleted (merge.go)
		MergedIds          []any // of *.merged
	}
}

type feedBody struct {
	Data       []eventBody
	Pagination struct {
		Limit      int
		HasMore    bool
		NextCursor string
	}
}

// readFeed GETs one page of the feed at base after cursor ("": from the start), with query.
func readFeed(t *testing.T, base, key, cursor, query string) feedBody {
	t.Helper()
	path := "/v1/events?" + query
	if cursor != "" {
		path += "&cursor=" + url.QueryEscape(cursor)
	}
	f := decode[feedBody](t, wantStatus(t, callAt(t, nil, base, "GET", path, key, ""), http.StatusOK).body)
	if f.Pagination.NextCursor == "" {
		t.Fatalf("GET %s: no nextCursor to resume from", path)
	}
	return f
}

// walkFeed follows the feed from cursor to its end and returns what it read and the last cursor.
func walkFeed(t *testing.T, key, cursor, query string) ([]eventBody, string) {
	t.Helper()
	var all []eventBody
	for {
		f := readFeed(t, testEnv.baseURL, key, cursor, query)
		all, cursor = append(all, f.Data...), f.Pagination.NextCursor
		if !f.Pagination.HasMore {
			return all, cursor
		}
	}
}

// waitFeed walks the feed from cursor until it has read n events (an event shows once every older
// transaction on the database has ended, and parallel tests hold some), for at most 10 s.
func waitFeed(t *testing.T, key, cursor, query string, n int) ([]eventBody, string) {
	t.Helper()
	var all []eventBody
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var got []eventBody
		got, cursor = walkFeed(t, key, cursor, query)
		if all = append(all, got...); len(all) >= n || time.Now().After(deadline) {
			return all, cursor
		}
	}
}

func typesOf(evs []eventBody) []string {
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	return types
}

func TestEveryChangeWritesItsEvent(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	created := call(t, "POST", "/v1/contacts", c.key, `{"name": "Ana", "city": "Madrid"}`, "X-Request-Id", "create-ana")
	path := itemPath("/v1/contacts", decode[obj](t, wantStatus(t, created, http.StatusCreated).body).id())
	wantStatus(t, call(t, "PATCH", path, c.key, `{"city": "Lisboa", "jobTitle": "CTO"}`), http.StatusOK)
	wantStatus(t, call(t, "PATCH", path, c.key, `{"city": "Lisboa"}`), http.StatusOK) // changes nothing: no event
	wantProblem(t, call(t, "PATCH", path, c.key, `{"name": ""}`), http.StatusUnprocessableEntity, "validation_failed")
	last := mustGet(t, c.key, path)
	wantStatus(t, call(t, "DELETE", path, c.key, ""), http.StatusNoContent)
	deal := wantStatus(t, call(t, "POST", "/v1/business", c.key, `{"title": "Deal"}`), http.StatusCreated).body
	org := wantStatus(t, call(t, "POST", "/v1/organizations", c.key, `{"name": "Acme"}`), http.StatusCreated).body

	evs, _ := waitFeed(t, c.key, "", "", 5)
	want := []string{"contact.created", "contact.updated", "contact.deleted", "business.created", "organization.created"}
	if diff := cmp.Diff(want, typesOf(evs)); diff != "" {
		t.Fatalf("event types (-want +got):\n%s", diff)
	}
	for i, wantObj := range [][]byte{created.body, nil, last.body, deal, org} {
		if wantObj != nil {
			if diff := cmp.Diff(decode[obj](t, wantObj), evs[i].Data.Object); diff != "" {
				t.Errorf("%s: data.object differs from the API's answer (-answer +event):\n%s", evs[i].Type, diff)
			}
		}
	}
	if got := evs[0].RequestID; got != "create-ana" {
		t.Errorf("contact.created requestId = %q; want the request's X-Request-Id", got)
	}
	if diff := cmp.Diff(obj{"city": "Madrid", "jobTitle": nil}, evs[1].Data.PreviousAttributes); diff != "" {
		t.Errorf("contact.updated previousAttributes (-want +got):\n%s", diff)
	}
	if evs[1].Data.Object["city"] != "Lisboa" || evs[0].Data.PreviousAttributes != nil || evs[2].Data.PreviousAttributes != nil {
		t.Errorf("updated object %v; created and deleted previousAttributes %v, %v; want Lisboa, none, none",
			evs[1].Data.Object, evs[0].Data.PreviousAttributes, evs[2].Data.PreviousAttributes)
	}
	// One event, retrieved, is the feed's; another company sees none of them.
	one := fmt.Sprintf("/v1/events/%d", evs[1].ID)
	if diff := cmp.Diff(evs[1], decode[eventBody](t, mustGet(t, c.key, one).body)); diff != "" {
		t.Errorf("GET %s differs from the feed (-feed +got):\n%s", one, diff)
	}
	other := newTestCompany(t)
	wantProblem(t, call(t, "GET", one, other.key, ""), http.StatusNotFound, "not_found")
	if got, _ := walkFeed(t, other.key, "", ""); len(got) != 0 {
		t.Errorf("another company's feed has %d events; want none", len(got))
	}
}

func TestEventsFeedFiltersPagesAndRefusesBadInput(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	create(t, c.key, "/v1/contacts", `{"name": "Ana"}`)
	create(t, c.key, "/v1/business", `{"title": "Deal"}`)
	create(t, c.key, "/v1/organizations", `{"name": "Acme"}`)
	all, _ := waitFeed(t, c.key, "", "", 3)
	for query, want := range map[string][]string{
		"type=contact.*": {"contact.created"},
		"type=business.created&type=organization.created":     {"business.created", "organization.created"},
		"type=contact.deleted":                                nil,
		"createdAt[gte]=" + url.QueryEscape(all[1].CreatedAt): {"business.created", "organization.created"},
		"createdAt[gt]=2100-01-01T00:00:00Z":                  nil,
	} {
		got, _ := walkFeed(t, c.key, "", query)
		if diff := cmp.Diff(want, typesOf(got)); diff != "" {
			t.Errorf("GET /v1/events?%s types (-want +got):\n%s", query, diff)
		}
	}
	// A page at a time, the same events in the same order.
	var paged []eventBody
	for cursor := ""; ; {
		f := readFeed(t, testEnv.baseURL, c.key, cursor, "limit=1")
		paged, cursor = append(paged, f.Data...), f.Pagination.NextCursor
		if !f.Pagination.HasMore {
			break
		}
	}
	if diff := cmp.Diff(all, paged); diff != "" {
		t.Errorf("the feed a page at a time (-whole +paged):\n%s", diff)
	}

	p := wantProblem(t, call(t, "GET", "/v1/events?type=contact.renamed", c.key, ""), http.StatusBadRequest, "invalid_parameter")
	if !strings.Contains(p.Detail, "contact.renamed") || !strings.Contains(p.Detail, "business.deleted") {
		t.Errorf("unknown type: detail %q; want it to name the type and list the valid ones", p.Detail)
	}
	_, cursor := walkFeed(t, c.key, "", "")
	tampered := cursor[:len(cursor)-2] + "AA"
	if strings.HasSuffix(cursor, "AA") {
		tampered = cursor[:len(cursor)-2] + "AB"
	}
	other := newTestCompany(t)
	_, otherCursor := walkFeed(t, other.key, "", "")
	for what, query := range map[string]string{
		"a tampered cursor":               "cursor=" + url.QueryEscape(tampered),
		"another company's cursor":        "cursor=" + url.QueryEscape(otherCursor),
		"a cursor with other filters":     "type=contact.*&cursor=" + url.QueryEscape(cursor),
		"a list's cursor":                 "cursor=" + url.QueryEscape(*listPage[obj](t, c.key, "/v1/countries?limit=1").Pagination.NextCursor),
		"limit 0":                         "limit=0",
		"a sort":                          "sort=id",
		"an expansion (events have none)": "expand[]=object",
	} {
		r := call(t, "GET", "/v1/events?"+query, c.key, "")
		if r.status != http.StatusBadRequest {
			t.Errorf("%s: GET /v1/events?%s = %d %s; want 400", what, query, r.status, r.body)
		}
	}
}

// events:read shows only the events of resources the key can also read: in the feed, by id, and in
// what its cursors lead to.
func TestEventsShowOnlyWhatTheKeyCanRead(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	create(t, c.key, "/v1/contacts", `{"name": "Ana"}`)
	create(t, c.key, "/v1/business", `{"title": "Deal"}`)
	create(t, c.key, "/v1/organizations", `{"name": "Acme"}`)
	all, _ := waitFeed(t, c.key, "", "", 3)
	contacts := *makeKey(t, c.key, "events:read", "contacts:read").Key
	others := *makeKey(t, c.key, "events:read", "business:write", "organizations:read").Key
	none := *makeKey(t, c.key, "events:read", "keys:read").Key
	for _, tc := range []struct {
		reads, key string
		want       []string
	}{{"contacts", contacts, []string{"contact.created"}}, {"business and organizations", others, []string{"business.created", "organization.created"}}, {"nothing", none, nil}} {
		got, _ := walkFeed(t, tc.key, "", "")
		if diff := cmp.Diff(tc.want, typesOf(got)); diff != "" {
			t.Errorf("the feed of a key that reads %s (-want +got):\n%s", tc.reads, diff)
		}
		for _, e := range all {
			r := call(t, "GET", fmt.Sprintf("/v1/events/%d", e.ID), tc.key, "")
			if readable := slices.Contains(tc.want, e.Type); readable && r.status != http.StatusOK || !readable && r.status != http.StatusNotFound {
				t.Errorf("GET the %s event with a key that reads %s = %d; want 200 if it reads it, else 404", e.Type, tc.reads, r.status)
			}
		}
	}
	if got, _ := walkFeed(t, contacts, "", "type=contact.created"); !slices.Equal(typesOf(got), []string{"contact.created"}) {
		t.Errorf("type=contact.created: %v", typesOf(got))
	}
	for _, query := range []string{"type=business.*", "type=contact.*&type=organization.created"} {
		p := wantProblem(t, call(t, "GET", "/v1/events?"+query, contacts, ""), http.StatusForbidden, "insufficient_scope")
		if !strings.Contains(p.Detail, "s:read") {
			t.Errorf("GET /v1/events?%s: detail %q; want it to name the read scope", query, p.Detail)
		}
	}
	// A cursor is bound to the families its key reads: another key's is none of this feed.
	_, mine := walkFeed(t, contacts, "", "")
	_, whole := walkFeed(t, c.key, "", "")
	for _, tc := range []struct{ key, cursor string }{{c.key, mine}, {contacts, whole}, {others, mine}} {
		r := call(t, "GET", "/v1/events?cursor="+url.QueryEscape(tc.cursor), tc.key, "")
		wantProblem(t, r, http.StatusBadRequest, "invalid_parameter")
	}
	same := *makeKey(t, c.key, "events:read", "contacts:write").Key
	if got, _ := walkFeed(t, same, mine, ""); len(got) != 0 {
		t.Errorf("a key reading the same families resumed a cursor at the end and read %v", typesOf(got))
	}
}

func TestEventsFeedIsGapFreeWhenTransactionsCommitOutOfOrder(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ctx := context.Background()
	create(t, c.key, "/v1/contacts", `{"name": "Before"}`)
	_, cursor := waitFeed(t, c.key, "", "", 1)

	// A writing transaction takes its event id and stays open. (It writes only the event: a contact
	// would hold its stripe of the company's count, which a later create may need to wait for.)
	held, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- testEnv.st.write(ctx, func(tx *tx) error {
			recordEvent(tx, c.id, "contact.created", []byte(`{"name":"Held"}`), nil)
			tx.queueEvents(ctx)
			err := tx.read(ctx) // sends BEGIN and the event
			close(held)
			<-release
			return err
		})
	}()
	<-held
	committed := false
	defer func() {
		if !committed {
			close(release)
			<-done
		}
	}()
	// ...while later ones, with higher ids, commit: a feed of "id > cursor" would serve these and
	// never the held one.
	for i := range 3 {
		create(t, c.key, "/v1/contacts", fmt.Sprintf(`{"name": "After %d"}`, i))
	}
	got, cursor := walkFeed(t, c.key, cursor, "")
	if len(got) != 0 {
		t.Errorf("while an older transaction is open the feed served %v; want nothing after it yet", typesOf(got))
	}
	committed = true
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got, _ = waitFeed(t, c.key, cursor, "", 4)
	var names []any
	for _, e := range got {
		names = append(names, e.Data.Object["name"])
	}
	if diff := cmp.Diff([]any{"Held", "After 0", "After 1", "After 2"}, names); diff != "" {
		t.Errorf("the feed resumed after the held transaction committed (-want +got):\n%s", diff)
	}
}

func TestEventsFeedConcurrentWritersAndATailingConsumer(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	const writers, each = 8, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				r, err := send(nil, testEnv.baseURL, "POST", "/v1/contacts", c.key, fmt.Sprintf(`{"name": "W%d %d"}`, w, i))
				if err != nil || r.status != http.StatusCreated {
					t.Errorf("POST = %d %s (%v)", r.status, r.body, err)
				}
			}
		})
	}
	seen := map[int64]int{}
	cursor := ""
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for deadline := time.Now().Add(30 * time.Second); len(seen) < writers*each && time.Now().Before(deadline); {
		f := readFeed(t, testEnv.baseURL, c.key, cursor, "limit=7")
		for _, e := range f.Data {
			seen[e.ID]++
		}
		cursor = f.Pagination.NextCursor
		if !f.Pagination.HasMore {
			time.Sleep(5 * time.Millisecond)
		}
	}
	<-done
	for id, n := range seen {
		if n != 1 {
			t.Errorf("event %d seen %d times; want once", id, n)
		}
	}
	stored := sqlIDs(t, `SELECT id FROM events WHERE company_id = $1`, c.id)
	if len(seen) != len(stored) || len(stored) != writers*each {
		t.Errorf("the consumer saw %d events; %d are stored, %d were written", len(seen), len(stored), writers*each)
	}
	for _, id := range stored {
		if seen[id] == 0 {
			t.Errorf("event %d is stored but the consumer never saw it", id)
		}
	}
}

func TestEventsPastTheRetentionAreDeletedAndTheirCursorsExpire(t *testing.T) {
	t.Parallel()
	dbURL := freshDatabase(t) // the server deletes old events of every company on its database
	// 3s: the event must show in the feed before it is deleted, and the feed waits for every older
	// transaction on the node, which other tests may hold open for a second on a loaded Citus worker.
	base := startServer(t, map[string]string{"DATABASE_URL": dbURL, "ROLODEX_EVENT_RETENTION": "3s"}, nil, "-rate-limit", "0")
	st, err := openStore(dbConfig{url: dbURL, maxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	nc, err := st.createCompany(context.Background(), "Retention")
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, callAt(t, nil, base, "POST", "/v1/contacts", nc.APIKey, `{"name": "Ana"}`), http.StatusCreated)
	var f feedBody
	for deadline := time.Now().Add(5 * time.Second); len(f.Data) == 0 && time.Now().Before(deadline); {
		f = readFeed(t, base, nc.APIKey, "", "")
	}
	if len(f.Data) != 1 {
		t.Fatalf("the feed has %d events; want the 1 just written", len(f.Data))
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var n int64
		if err := st.db.QueryRow(`SELECT count(*) FROM events`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an event older than the retention of 3s is still there after 10s")
		}
	}
	r := callAt(t, nil, base, "GET", "/v1/events?cursor="+url.QueryEscape(f.Pagination.NextCursor), nc.APIKey, "")
	wantProblem(t, r, http.StatusGone, "cursor_expired")
}
