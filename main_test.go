package main

// Tests of main.go: the commands, health and readiness, routing, and the server's lifecycle.

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Health and readiness, and readiness on a schema newer than the server's, for rolling upgrades.
func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	dbURL := freshDatabase(t)
	base := startServer(t, map[string]string{"DATABASE_URL": dbURL}, io.Discard)
	for path, want := range map[string]string{"/healthz": `{"status":"ok"}`,
		"/readyz": fmt.Sprintf(`{"status":"ready","schemaVersion":%d}`, latestSchemaVersion())} {
		r := callAt(t, nil, base, "GET", path, "", "")
		if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" || strings.TrimSpace(string(r.body)) != want {
			t.Errorf("GET %s = %d %q %s; want 200 application/json %s", path, r.status, r.header.Get("Content-Type"), r.body, want)
		}
	}
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// A newer server has migrated the database past what this one knows.
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, name) VALUES (9999, '9999_newer.sql')`); err != nil {
		t.Fatal(err)
	}
	r := callAt(t, nil, base, "GET", "/readyz", "", "")
	if want := `{"status":"ready","schemaVersion":9999}`; r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != want {
		t.Errorf("GET /readyz on a newer schema = %d %s; want 200 %s", r.status, r.body, want)
	}
	if _, err := db.Exec(`DELETE FROM schema_migrations WHERE version >= $1`, latestSchemaVersion()); err != nil {
		t.Fatal(err)
	}
	r = callAt(t, nil, base, "GET", "/readyz", "", "")
	wantProblem(t, r, http.StatusServiceUnavailable, "not_ready")
}

func TestUnknownPathsAre404AndWrongMethods405(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for _, tt := range []struct {
		method, path, key string
		status            int
		allow             string
	}{
		{"GET", "/v2/contacts", c.key, 404, ""}, {"GET", "/nope", c.key, 404, ""}, {"GET", "/", c.key, 404, ""},
		{"GET", "/v1/nope", c.key, 404, ""}, {"GET", "/v1/contacts/1/extra", c.key, 404, ""}, {"GET", "/v1", c.key, 404, ""},
		// Without a key, a /v1 path asks for one first; any other unknown path is simply 404.
		{"GET", "/v1/nope", "", 401, ""}, {"GET", "/v2/contacts", "", 404, ""},
		{"DELETE", "/healthz", "", 405, "GET, HEAD"}, // the API's paths are TestEveryPathAnswersAWrongMethodWith405AndAllow's
	} {
		r := call(t, tt.method, tt.path, tt.key, "")
		wantProblem(t, r, tt.status, map[int]string{401: "unauthorized", 404: "not_found", 405: "method_not_allowed"}[tt.status])
		if got := r.header.Get("Allow"); got != tt.allow {
			t.Errorf("%s %s: Allow = %q; want %q", tt.method, tt.path, got, tt.allow)
		}
	}
}

// A path the mux would clean is 404 with a problem body, not the mux's redirect with an HTML one.
// Go's client cleans paths, so each is sent as written over a connection of its own.
func TestUncleanPathsAre404NotRedirects(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	u, _ := url.Parse(testEnv.baseURL)
	for _, path := range []string{"//v1/contacts", "/./v1/contacts", "/v1//contacts", "/v1/./contacts",
		"/v1/x/../contacts", "/v1/contacts/.", "/v1/contacts//", "//"} {
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\nConnection: close\r\n\r\n", path, u.Host, c.key)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		body, err := io.ReadAll(resp.Body)
		conn.Close()
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		if resp.Header.Get("Location") != "" {
			t.Errorf("GET %s: Location %q; want none", path, resp.Header.Get("Location"))
		}
		wantProblem(t, response{method: "GET", path: path, status: resp.StatusCode, header: resp.Header, body: body}, http.StatusNotFound, "not_found")
	}
	// A trailing slash is clean: the path is just unknown.
	wantProblem(t, call(t, "GET", "/v1/contacts/", c.key, ""), http.StatusNotFound, "not_found")
}

// runCLI runs the rolodex command line with args against the suite's database.
func runCLI(t *testing.T, args ...string) (stdout string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := map[string]string{"DATABASE_URL": testEnv.dbURL}
	err = run(context.Background(), append([]string{"rolodex"}, args...), func(k string) string { return env[k] }, &out, &errOut)
	if err != nil {
		err = fmt.Errorf("%w (stderr %q)", err, errOut.String())
	}
	return out.String(), err
}

func TestCLICompanyCreatePrintsOneJSONLine(t *testing.T) {
	t.Parallel()
	out, err := runCLI(t, "company", "create", "-name", "CLI Co")
	if err != nil || strings.Count(out, "\n") != 1 {
		t.Fatalf("company create = %q, %v; want exactly one line", out, err)
	}
	var got struct {
		CompanyID, UserID int64
		APIKey            string
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil || got.CompanyID <= 0 || got.UserID <= 0 || got.APIKey == "" {
		t.Fatalf("output %+v, %v; want companyId, userId and apiKey", got, err)
	}
	if r := call(t, "GET", "/v1/contacts/count", got.APIKey, ""); r.status != http.StatusOK {
		t.Errorf("the printed key: GET /v1/contacts/count = %d; want 200", r.status)
	}
}

func TestCLIUsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{}, {"bogus"}, {"company", "create"}, {"key", "create"}, {"key", "revoke"}, {"key", "list"}, {"serve", "extra"},
		{"key", "create", "-company", "1", "-scopes", "contacts:delete"}, {"serve", "-event-retention", "0s"},
	} {
		if _, err := runCLI(t, args...); err == nil {
			t.Errorf("rolodex %v: no error; want a usage error", args)
		}
	}
	if out, err := runCLI(t, "version"); err != nil || !strings.HasPrefix(out, "rolodex ") {
		t.Errorf("version = %q, %v", out, err)
	}
	if out, err := runCLI(t, "help"); err != nil || out != usage {
		t.Errorf("help = %q, %v; want the usage on stdout", out, err)
	}
	for _, cmd := range []string{"serve", "migrate", "dev"} {
		if _, err := runCLI(t, cmd, "-h"); err == nil || !strings.Contains(err.Error(), "Usage: rolodex "+cmd) {
			t.Errorf("%s -h: %v; want its usage on stderr", cmd, err)
		}
	}
	// `rolodex dev` prints a key that may do anything: it listens on this machine only, by default.
	for cmd, addr := range map[string]string{"dev": `(default \"127.0.0.1:8080\")`, "serve": `(default \":8080\")`} {
		if _, err := runCLI(t, cmd, "-h"); err == nil || !strings.Contains(err.Error(), addr) {
			t.Errorf("%s -h: %v; want -addr %s", cmd, err, addr)
		}
	}
	for _, proxies := range []string{"10.0.0.0/8,nonsense", "10.0.0.1"} {
		if _, err := runCLI(t, "serve", "-trusted-proxies", proxies); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "not a CIDR") {
			t.Errorf("serve -trusted-proxies %s: %v; want a usage error saying what is wrong", proxies, err)
		}
	}
	getenv := func(k string) string { return map[string]string{"ROLODEX_RATE_LIMIT": "lots"}[k] }
	if err := run(context.Background(), []string{"rolodex", "serve"}, getenv, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "ROLODEX_RATE_LIMIT") {
		t.Errorf("serve with ROLODEX_RATE_LIMIT=lots: %v; want an error naming it", err)
	}
}

// loadResult counts a load's answers by status, and the contacts acknowledged with 201.
type loadResult struct {
	mu       sync.Mutex
	byStatus map[int]int
	errs     []string
	acked    map[string]string // id: name
}

func newLoadResult() *loadResult {
	return &loadResult{byStatus: map[int]int{}, acked: map[string]string{}}
}

// createContact posts one contact named name, records the answer, and returns the contact's id ("":
// not created).
func (lr *loadResult) createContact(client *http.Client, base, key, name string) string {
	r, err := send(client, base, "POST", "/v1/contacts", key, `{"name":"`+name+`"}`)
	lr.mu.Lock()
	defer lr.mu.Unlock()
	if err != nil {
		lr.errs = append(lr.errs, err.Error())
		return ""
	}
	lr.byStatus[r.status]++
	var c struct{ ID, Name string }
	if r.status == http.StatusCreated {
		if json.Unmarshal(r.body, &c) != nil || c.Name != name {
			lr.errs = append(lr.errs, fmt.Sprintf("201 with a cut or wrong body %q", r.body))
			return ""
		}
		lr.acked[c.ID] = name
	}
	return c.ID
}

// storedContacts is the company's contacts by id, read with SQL.
func storedContacts(t *testing.T, dbURL string, companyID int64) map[string]string {
	t.Helper()
	st, err := openStore(dbConfig{url: dbURL, maxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var b []byte
	got := map[string]string{}
	err = st.db.QueryRow(`SELECT coalesce(json_object_agg(id, name), '{}') FROM contacts WHERE company_id = $1`, companyID).Scan(&b)
	if err != nil || json.Unmarshal(b, &got) != nil {
		t.Fatalf("contacts of company %d: %v", companyID, err)
	}
	return got
}

func TestSIGTERMFinishesRequestsInFlightAndExits0(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	p := startProcess(t, buildServer(t), []string{"-shutdown-timeout", "10s"}, "DATABASE_URL="+testEnv.dbURL, "ROLODEX_RATE_LIMIT=0")
	base, stderr := p.base, p.log

	// A load of creates, and one slow create whose body is still arriving when SIGTERM comes.
	lr := newLoadResult()
	client := &http.Client{Transport: &http.Transport{}}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				lr.createContact(client, base, c.key, fmt.Sprintf("load %d-%d", w, i))
			}
		})
	}
	pr, pw := io.Pipe()
	slow := make(chan response, 1)
	go func() {
		req, _ := http.NewRequest("POST", base+"/v1/contacts", pr)
		req.Header = http.Header{"Content-Type": {"application/json"}, "X-Api-Key": {c.key}, "X-Request-Id": {"slow-one"}}
		r, err := exchange(nil, req)
		if err != nil {
			r.status = -1
		}
		slow <- r
	}()
	pw.Write([]byte(`{"name":`))
	time.Sleep(500 * time.Millisecond) // load runs; the slow request is in flight
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	pw.Write([]byte(`"slow one"}`))
	pw.Close()
	stop.Store(true)
	wg.Wait()

	select {
	case err := <-p.exited:
		if err != nil {
			t.Errorf("exit: %v; want status 0\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no exit 30s after SIGTERM\n%s", stderr.String())
	}
	if r := <-slow; r.status != http.StatusCreated {
		t.Errorf("the request in flight at SIGTERM: %d %s; want 201 with its body", r.status, r.body)
	} else {
		var got struct{ ID, Name string }
		json.Unmarshal(r.body, &got)
		lr.acked[got.ID] = got.Name
	}
	// Requests refused after the listener closed never reached a handler; every one that did was
	// answered in full: what the database holds is exactly what was acknowledged.
	if diff := cmp.Diff(lr.acked, storedContacts(t, testEnv.dbURL, c.id)); diff != "" {
		t.Errorf("contacts acknowledged with 201 and stored differ (-acknowledged +stored):\n%s", diff)
	}
	for status, n := range lr.byStatus {
		if status != http.StatusCreated {
			t.Errorf("%d answers with status %d during shutdown; want only 201 (or refused connections)", n, status)
		}
	}
	// The log, written to the end, has the slow request's line and ends with "stopped".
	if log := stderr.String(); !strings.Contains(log, `"requestId":"slow-one"`) || !strings.HasSuffix(log, `"msg":"stopped"}`+"\n") {
		t.Errorf("the log does not have the slow request's line and end with \"stopped\":\n%s", log)
	}
}

// Servers keep no state a client depends on: two on one database answer as one.
func TestTwoServersOnOneDatabaseAnswerAsOne(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	a, b := testEnv.baseURL, startServer(t, nil, nil)
	for i := range 3 {
		create(t, c.key, "/v1/contacts", fmt.Sprintf(`{"name": "Two %d"}`, i))
	}
	// A cursor of one server walks on at the other.
	first := readPage[json.RawMessage](t, callAt(t, nil, a, "GET", "/v1/contacts?limit=2&sort=name", c.key, ""))
	next := readPage[json.RawMessage](t, callAt(t, nil, b, "GET", "/v1/contacts?limit=2&sort=name&cursor="+url.QueryEscape(*first.Pagination.NextCursor), c.key, ""))
	if len(first.Data) != 2 || len(next.Data) != 1 || next.Pagination.NextCursor != nil {
		t.Errorf("pages of 2 across servers: %d then %d items; want 2 then the last 1", len(first.Data), len(next.Data))
	}
	// An ETag of one is an If-Match at the other.
	path := itemPath("/v1/contacts", decode[obj](t, first.Data[0]).id())
	tag := callAt(t, nil, a, "GET", path, c.key, "").header.Get("ETag")
	wantStatus(t, callAt(t, nil, b, "PATCH", path, c.key, `{"city": "Oslo"}`, "If-Match", tag), http.StatusOK)
	wantProblem(t, callAt(t, nil, a, "PATCH", path, c.key, `{"city": "Rome"}`, "If-Match", tag), http.StatusPreconditionFailed, "precondition_failed")
	// An Idempotency-Key used at one is replayed by the other.
	firstPost := callAt(t, nil, a, "POST", "/v1/contacts", c.key, `{"name": "Once"}`, "Idempotency-Key", "two servers")
	wantReplay(t, "POST at B after A", firstPost, callAt(t, nil, b, "POST", "/v1/contacts", c.key, `{"name": "Once"}`, "Idempotency-Key", "two servers"))
	// The events of writes at either server are one feed.
	evs, _ := waitFeed(t, c.key, "", "", 5)
	if len(evs) != 5 {
		t.Errorf("%d events of 3 creates and a patch at A, a create at B; want 5", len(evs))
	}
}
