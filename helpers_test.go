package main

// The suite's world and the one set of helpers every test uses: a PostgreSQL (DATABASE_URL, or a
// private server), the server started through run(), a company per test, requests through real HTTP,
// and the checks made of their answers.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// testEnv is the suite's shared world: one PostgreSQL database and one server started through run().
// Tests share them safely because each test works inside a company of its own.
var testEnv struct {
	adminURL string // a database on the same server, to create fresh ones from
	dbURL    string // the migrated database the server uses
	st       *store
	baseURL  string
	log      *syncBuffer // the server's log
	citus    bool        // the database is a Citus cluster's (make test-citus)
}

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cleanup, err := setupTestDatabase(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "The tests need PostgreSQL: %v\n"+
			"Install its server binaries (Debian/Ubuntu: sudo apt-get install postgresql) or set DATABASE_URL to a server where the user may create databases.\n", err)
		return 1
	}
	defer cleanup()
	if testEnv.st, err = openStore(dbConfig{url: testEnv.dbURL, maxConns: 8}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer testEnv.st.Close()
	// The shared server's limits are far above what the suite sends (thousands of requests on one
	// key, dozens of 401s from one address); ratelimit_test.go tests the limits on servers of its own.
	testEnv.log = &syncBuffer{}
	env := map[string]string{"DATABASE_URL": testEnv.dbURL, "ROLODEX_RATE_LIMIT": "1000000", "ROLODEX_AUTH_FAILURE_LIMIT": "1000000"}
	var done <-chan error
	if testEnv.baseURL, done, err = runServer(ctx, env, testEnv.log); err != nil {
		fmt.Fprintf(os.Stderr, "server did not start: %v\n%s", err, testEnv.log.String())
		return 1
	}
	err = testEnv.st.db.QueryRow(`SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')`).Scan(&testEnv.citus)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	testEnv.st.citus.Store(testEnv.citus) // as the server's store knows it from its migration (distribute)
	code := m.Run()
	if code != 0 { // the shared server's errors: what a 500 above was
		for line := range strings.Lines(testEnv.log.String()) {
			if strings.Contains(line, `"level":"ERROR"`) {
				fmt.Fprint(os.Stderr, line)
			}
		}
	}
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintf(os.Stderr, "server: %v\n", err)
		return 1
	}
	return code
}

// setupTestDatabase fills testEnv.adminURL and testEnv.dbURL: a fresh database on DATABASE_URL's
// server when it is set, else a private server in a temporary folder. cleanup drops or stops it.
// DATABASE_URL may be a PgBouncer with a wildcard database entry, even in transaction mode (make
// test-pgbouncer): CREATE DATABASE and DROP DATABASE ... WITH (FORCE) go through it like any statement.
func setupTestDatabase(ctx context.Context) (cleanup func(), err error) {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		testEnv.adminURL = u
		name := "rolodex_test_" + randomHex(6)
		testEnv.dbURL, err = createDatabase(ctx, u, name)
		return func() { dropDatabase(u, name) }, err
	}
	dir, err := os.MkdirTemp("", "rolodex-test-pg-")
	if err != nil {
		return nil, err
	}
	pg, err := startLocalPG(ctx, dir, true)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	testEnv.adminURL, testEnv.dbURL = pg.URL("postgres"), pg.URL("rolodex")
	if err := adminExec(ctx, testEnv.adminURL, "CREATE DATABASE rolodex"); err != nil {
		pg.Stop()
		os.RemoveAll(dir)
		return nil, err
	}
	return func() { pg.Stop(); os.RemoveAll(dir) }, nil
}

// createDatabase creates the database name on the server at adminURL and returns its URL, with
// Citus's nodes registered in it when there are some (registerCitusNodes).
func createDatabase(ctx context.Context, adminURL, name string) (string, error) {
	u, err := url.Parse(adminURL)
	if err != nil || u.Scheme == "" {
		return "", fmt.Errorf("DATABASE_URL must be a postgres:// URL for the tests")
	}
	if err := adminExec(ctx, adminURL, "CREATE DATABASE "+quoteIdent(name)); err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), registerCitusNodes(ctx, adminURL, u.String())
}

// registerCitusNodes registers in the database at u the Citus nodes of the admin database (make
// test-citus registers them there): Citus keeps its nodes per database. Elsewhere it does nothing.
func registerCitusNodes(ctx context.Context, adminURL, u string) error {
	admin, err := openStore(dbConfig{url: adminURL, maxConns: 1})
	if err != nil {
		return err
	}
	defer admin.Close()
	var nodes string
	err = admin.db.QueryRowContext(ctx, `SELECT coalesce(string_agg(CASE groupid WHEN 0
			THEN format('SELECT citus_set_coordinator_host(%L, %s)', nodename, nodeport)
			ELSE format('SELECT citus_add_node(%L, %s)', nodename, nodeport) END, E'\n' ORDER BY groupid), '')
		FROM pg_dist_node`).Scan(&nodes)
	if pgCode(err) == "42P01" { // undefined_table: not Citus
		return nil
	}
	if err != nil {
		return err
	}
	for q := range strings.Lines(nodes) {
		if err := adminExec(ctx, u, q); err != nil {
			return fmt.Errorf("register Citus node: %w", err)
		}
	}
	return nil
}

// adminExec runs one statement (CREATE or DROP DATABASE name) on the server at adminURL.
func adminExec(ctx context.Context, adminURL, q string) error {
	st, err := openStore(dbConfig{url: adminURL, maxConns: 1})
	if err != nil {
		return err
	}
	defer st.Close()
	_, err = st.db.ExecContext(ctx, q)
	return err
}

// dropDatabase drops the database name, if it is there, and whoever is connected to it.
func dropDatabase(adminURL, name string) {
	adminExec(context.Background(), adminURL, "DROP DATABASE IF EXISTS "+quoteIdent(name)+" WITH (FORCE)")
}

// freshDatabase creates an empty database for one test, dropped when the test ends, and returns its URL.
func freshDatabase(t *testing.T) string {
	t.Helper()
	name := "rolodex_fresh_" + randomHex(6)
	u, err := createDatabase(context.Background(), testEnv.adminURL, name)
	t.Cleanup(func() { dropDatabase(testEnv.adminURL, name) })
	if err != nil {
		t.Fatalf("create database: %v", err)
	}
	return u
}

// randomHex returns n random bytes in hex: names no other test or run uses.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// freeAddr returns a loopback address with a port free to listen on.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitHealthy polls /healthz until it answers 200, the server exits, or 30 seconds pass.
func waitHealthy(base string, done <-chan error) error {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case err := <-done:
			return fmt.Errorf("run returned early: %v", err)
		default:
		}
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return errors.New("timed out waiting for /healthz")
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines to write while a test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}
func (b *syncBuffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.buf.String() }

// runServer runs `rolodex serve` through run() with env, on a free port (env's ROLODEX_ADDR, set here),
// logging to log, until ctx ends; it returns once /healthz answers. done receives what run returned.
func runServer(ctx context.Context, env map[string]string, log io.Writer, flags ...string) (base string, done <-chan error, err error) {
	addr, err := freeAddr()
	if err != nil {
		return "", nil, err
	}
	env["ROLODEX_ADDR"] = addr
	ran := make(chan error, 1)
	go func() {
		ran <- run(ctx, append([]string{"rolodex", "serve"}, flags...), func(k string) string { return env[k] }, io.Discard, log)
	}()
	return "http://" + addr, ran, waitHealthy("http://"+addr, ran)
}

// startServer runs `rolodex serve [flags]` through run() on a free port with env (DATABASE_URL
// defaults to the suite's database), logging to log (nil: nowhere), and returns its base URL; the
// server stops when the test ends.
func startServer(t *testing.T, env map[string]string, log io.Writer, flags ...string) string {
	t.Helper()
	all := map[string]string{"DATABASE_URL": testEnv.dbURL}
	maps.Copy(all, env)
	if log == nil {
		log = io.Discard
	}
	ctx, cancel := context.WithCancel(context.Background())
	base, done, err := runServer(ctx, all, log, flags...)
	if err != nil {
		cancel()
		t.Fatalf("server did not start: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	return base
}

// testCompany is a company of the test's own, with its first user and an API key.
type testCompany struct {
	id, userID int64
	key        string
}

// newTestCompany creates a fresh company through the same code as `rolodex company create`.
func newTestCompany(t *testing.T) testCompany {
	t.Helper()
	nc, err := testEnv.st.createCompany(context.Background(), "Test "+t.Name())
	if err != nil {
		t.Fatalf("create company: %v", err)
	}
	return testCompany{id: nc.CompanyID, userID: nc.UserID, key: nc.APIKey}
}

// addKey makes another key of the company, with every scope, acting as user (0: the first user).
func addKey(t *testing.T, companyID, user int64) string {
	t.Helper()
	key, err := testEnv.st.createAPIKey(context.Background(), companyID, user, []string{"*"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// revokedKey makes a key of the company and revokes it.
func revokedKey(t *testing.T, companyID int64) string {
	t.Helper()
	key := addKey(t, companyID, 0)
	if err := testEnv.st.revokeAPIKey(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	return key
}

// response is a finished HTTP exchange.
type response struct {
	method, path string // of the request
	status       int
	header       http.Header
	body         []byte
}

// call sends a request to the test server. key "" sends no x-api-key; body "" sends no body; a
// body gets Content-Type: application/json unless hdr sets one. hdr is "Name", "value" pairs.
func call(t *testing.T, method, path, key, body string, hdr ...string) response {
	t.Helper()
	return callAt(t, nil, testEnv.baseURL, method, path, key, body, hdr...)
}

// callAt is call against the server at base, through client (nil: http.DefaultClient).
func callAt(t *testing.T, client *http.Client, base, method, path, key, body string, hdr ...string) response {
	t.Helper()
	r, err := send(client, base, method, path, key, body, hdr...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// doRequest sends req, built by the test, and reads the answer, failing the test on a transport error.
func doRequest(t *testing.T, req *http.Request) response {
	t.Helper()
	r, err := exchange(nil, req)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// send is callAt without a test: goroutines, which may not call t.Fatal, use it. hdr is pairs of
// header name and value; an empty value removes the header.
func send(client *http.Client, base, method, path, key, body string, hdr ...string) (response, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		return response{}, err
	}
	if key != "" {
		req.Header.Set("x-api-key", key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	return exchange(client, req)
}

// exchange sends req through client (nil: http.DefaultClient) and reads the whole answer.
func exchange(client *http.Client, req *http.Request) (response, error) {
	if client == nil {
		client = http.DefaultClient
	}
	r := response{method: req.Method, path: req.URL.RequestURI()}
	resp, err := client.Do(req)
	if err != nil {
		return r, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	defer resp.Body.Close()
	r.status, r.header = resp.StatusCode, resp.Header
	if r.body, err = io.ReadAll(resp.Body); err != nil {
		return r, fmt.Errorf("%s %s: read body: %w", r.method, r.path, err)
	}
	return r, nil
}

// rawClient leaves Content-Encoding to the test instead of undoing gzip itself.
var rawClient = &http.Client{Transport: &http.Transport{DisableCompression: true}}

// wantStatus stops the test unless r has the status want, and returns r.
func wantStatus(t *testing.T, r response, want int) response {
	t.Helper()
	if r.status != want {
		t.Fatalf("%s %s = %d; want %d (body %.500s)", r.method, r.path, r.status, want, r.body)
	}
	return r
}

// decode decodes body strictly as one T: no unknown members (for a struct T), nothing after the
// value, numbers in any interface value kept as json.Number (exact, also beyond 2^53).
func decode[T any](t *testing.T, body []byte) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %T from %s: %v", v, body, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("decode %T: more after the value in %s", v, body)
	}
	return v
}

// obj is a JSON object as the API wrote it, numbers as json.Number.
type obj map[string]any

// id returns the object's id, a JSON string of digits (contacts) or a number (the rest).
func (o obj) id() int64 {
	s, ok := o["id"].(string)
	if n, isNum := o["id"].(json.Number); isNum {
		s, ok = n.String(), true
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if !ok || err != nil {
		panic(fmt.Sprintf("object id %#v", o["id"]))
	}
	return n
}

// itemPath is the path of the object id in the collection at path: itemPath("/v1/contacts", 7).
func itemPath(path string, id int64) string { return path + "/" + strconv.FormatInt(id, 10) }

// create POSTs body to path as key, stops the test unless the answer is 201, and returns the new
// object and the answer.
func create(t *testing.T, key, path, body string) (obj, response) {
	t.Helper()
	r := wantStatus(t, call(t, "POST", path, key, body), http.StatusCreated)
	return decode[obj](t, r.body), r
}

// createPath creates an object with POST collection as key, failing unless 201, and returns its path.
func createPath(t *testing.T, key, collection, body string) string {
	t.Helper()
	o, _ := create(t, key, collection, body)
	return itemPath(collection, o.id())
}

// mustGet GETs path as key and stops the test unless the answer is 200.
func mustGet(t *testing.T, key, path string) response {
	t.Helper()
	return wantStatus(t, call(t, "GET", path, key, ""), http.StatusOK)
}

// wantUnchanged fails the test unless GET path answers before's body and ETag again.
func wantUnchanged(t *testing.T, key, path string, before response) {
	t.Helper()
	after := mustGet(t, key, path)
	if !bytes.Equal(after.body, before.body) || after.header.Get("ETag") != before.header.Get("ETag") {
		t.Errorf("%s changed:\nnow %s %s\nwas %s %s", path, after.header.Get("ETag"), after.body, before.header.Get("ETag"), before.body)
	}
}

// countOf GETs a count path (/v1/contacts/count?...) and returns its count.
func countOf(t *testing.T, key, path string) int64 {
	t.Helper()
	return decode[struct{ Count int64 }](t, mustGet(t, key, path).body).Count
}

// problemBody is the RFC 9457 error body.
type problemBody struct {
	Type      string       `json:"type"`
	Title     string       `json:"title"`
	Status    int          `json:"status"`
	Detail    string       `json:"detail"`
	Code      string       `json:"code"`
	RequestID string       `json:"requestId"`
	Errors    []fieldProbl `json:"errors"`
}

type fieldProbl struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// wantProblem fails the test unless r is a problem+json answer with this status and code.
func wantProblem(t *testing.T, r response, status int, code string) problemBody {
	t.Helper()
	if ct := r.header.Get("Content-Type"); r.status != status || ct != "application/problem+json" {
		t.Errorf("status %d, Content-Type %q; want %d, application/problem+json (body %s)", r.status, ct, status, r.body)
	}
	p := decode[problemBody](t, r.body)
	if p.Status != status || p.Code != code || p.Title == "" || p.Detail == "" || p.Type == "" {
		t.Errorf("problem = %+v; want status %d, code %q, a title, a detail and a type", p, status, code)
	}
	if p.RequestID == "" || p.RequestID != r.header.Get("X-Request-Id") {
		t.Errorf("problem requestId %q; want the X-Request-Id header %q", p.RequestID, r.header.Get("X-Request-Id"))
	}
	return p
}

// wantFields fails the test unless r is a 422 validation_failed naming exactly fields, in that
// order, each with a message.
func wantFields(t *testing.T, r response, fields ...string) problemBody {
	t.Helper()
	p := wantProblem(t, r, http.StatusUnprocessableEntity, "validation_failed")
	var got []string
	for _, e := range p.Errors {
		got = append(got, e.Field)
		if e.Message == "" {
			t.Errorf("error on %s has no message", e.Field)
		}
	}
	if diff := cmp.Diff(fields, got); diff != "" {
		t.Errorf("errors[].field (-want +got):\n%s\nbody %s", diff, r.body)
	}
	return p
}

// sqlID runs q (a SELECT of one id or count, or an INSERT ... RETURNING id) and returns the number.
func sqlID(t *testing.T, q string, args ...any) int64 {
	t.Helper()
	ids := sqlIDs(t, q, args...)
	if len(ids) != 1 {
		t.Fatalf("%s: %d rows; want 1", q, len(ids))
	}
	return ids[0]
}

// sqlIDs runs q and returns the first column of every row: a list of ids.
func sqlIDs(t *testing.T, q string, args ...any) []int64 {
	t.Helper()
	rows, err := testEnv.st.db.QueryContext(context.Background(), q, args...)
	var ids []int64
	for err == nil && rows.Next() {
		ids = append(ids, 0)
		err = rows.Scan(&ids[len(ids)-1])
	}
	if rows != nil {
		rows.Close()
		err = errors.Join(err, rows.Err())
	}
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return ids
}

// jsonKeys returns the member names of the JSON object b in order, repeats included.
func jsonKeys(t *testing.T, b []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%.300s is not a JSON object", b)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("%.300s: %v", b, err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatalf("%.300s: %v", b, err)
		}
	}
	return keys
}

// listAnswer is one page of a list; T is obj, or json.RawMessage to keep each object's bytes.
type listAnswer[T any] struct {
	Data       []T `json:"data"`
	Pagination struct {
		Limit      int     `json:"limit"`
		HasMore    bool    `json:"hasMore"`
		NextCursor *string `json:"nextCursor"`
	} `json:"pagination"`
}

// readPage decodes r strictly as a 200 list answer, failing unless it holds data (an array) then
// pagination, with a cursor exactly when hasMore, and a full page when there are more.
func readPage[T any](t *testing.T, r response) listAnswer[T] {
	t.Helper()
	p := decode[listAnswer[T]](t, wantStatus(t, r, http.StatusOK).body)
	pg := p.Pagination
	switch {
	case !slices.Equal(jsonKeys(t, r.body), []string{"data", "pagination"}) || p.Data == nil:
		t.Fatalf("%s %s = %.300s; want data, an array, then pagination", r.method, r.path, r.body)
	case pg.HasMore != (pg.NextCursor != nil):
		t.Fatalf("%s %s: pagination %+v; want a cursor exactly when hasMore", r.method, r.path, pg)
	case len(p.Data) > pg.Limit || pg.HasMore && len(p.Data) != pg.Limit:
		t.Fatalf("%s %s: %d objects for %+v", r.method, r.path, len(p.Data), pg)
	}
	return p
}

// listPage GETs one page of a list as key (see readPage).
func listPage[T any](t *testing.T, key, path string) listAnswer[T] {
	t.Helper()
	return readPage[T](t, call(t, "GET", path, key, ""))
}

// walkList follows nextCursor from the first page of path?limit=limit&query to the last, and
// returns every object. between, when given, runs after each page but the last.
func walkList[T any](t *testing.T, key, path, query string, limit int, between ...func(page int, got []T)) []T {
	t.Helper()
	base := path + "?limit=" + strconv.Itoa(limit)
	if query != "" {
		base += "&" + query
	}
	var all []T
	next := base
	for page := 1; ; page++ {
		p := listPage[T](t, key, next)
		all = append(all, p.Data...)
		if p.Pagination.Limit != limit {
			t.Fatalf("GET %s: limit %d; want %d", next, p.Pagination.Limit, limit)
		}
		if !p.Pagination.HasMore {
			return all
		}
		if page > 2000 {
			t.Fatalf("walking %s does not end", base)
		}
		for _, f := range between {
			f(page, all)
		}
		next = base + "&cursor=" + url.QueryEscape(*p.Pagination.NextCursor)
	}
}

// waitLogLine returns the first line of log that contains s, waiting up to 10 seconds for it.
func waitLogLine(t *testing.T, log *syncBuffer, s string) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		for _, l := range strings.Split(log.String(), "\n") {
			if strings.Contains(l, s) {
				return l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %s in:\n%s", s, log.String())
		}
	}
}

// dbProxy is a TCP proxy between a server under test and PostgreSQL. It counts the statements sent
// through it (the frontend's Query and Execute messages) but the background purge's (purgeStatement)
// and pgx's pings (of a pooled connection idle over a second), and point makes the database go away
// without stopping it.
type dbProxy struct {
	target  atomic.Pointer[string]
	queries atomic.Int64
	mu      sync.Mutex
	conns   map[net.Conn]bool // open, on both sides
}

// newDBProxy proxies to the server of the database URL dbURL, and returns dbURL through the proxy.
func newDBProxy(t *testing.T, dbURL string) (*dbProxy, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	ln, lerr := net.Listen("tcp", "127.0.0.1:0")
	if err != nil || lerr != nil {
		t.Fatal(err, lerr)
	}
	p, target := &dbProxy{conns: map[net.Conn]bool{}}, u.Host
	p.target.Store(&target)
	go func() {
		for c, err := ln.Accept(); err == nil; c, err = ln.Accept() {
			go p.forward(c)
		}
	}()
	t.Cleanup(func() { ln.Close(); p.point(target) })
	u.Host = ln.Addr().String()
	return p, u.String()
}

// point sends new connections to target and closes the open ones. Or, with target "", the database
// hangs: new connections are held unanswered and what open ones send is dropped.
func (p *dbProxy) point(target string) {
	p.target.Store(&target)
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		if target != "" {
			c.Close()
		}
	}
}

// track adds c to the open connections until the returned func is called.
func (p *dbProxy) track(c net.Conn) func() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns[c] = true
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.conns, c)
		c.Close()
	}
}

func (p *dbProxy) forward(c net.Conn) {
	defer p.track(c)()
	target := *p.target.Load()
	if target == "" {
		io.Copy(io.Discard, c) // until the client gives up
		return
	}
	up, err := net.DialTimeout("tcp", target, 2*time.Second)
	if err != nil {
		return
	}
	defer p.track(up)()
	go io.Copy(c, up)
	// What the client sends, message by message: a startup message (an int32 length and a code) that
	// may first be an encryption request, then messages of a type byte and an int32 length.
	r := bufio.NewReader(c)
	stmts, bound := map[string]string{}, "" // the SQL of the connection's statements by name; of the last Bind's
	for startup := true; ; {
		head := 5
		if startup {
			head = 4
		}
		msg := make([]byte, head)
		if _, err := io.ReadFull(r, msg); err != nil {
			return
		}
		msg = append(msg, make([]byte, int(binary.BigEndian.Uint32(msg[head-4:]))-4)...)
		if _, err := io.ReadFull(r, msg[head:]); err != nil {
			return
		}
		fields := bytes.Split(msg[min(5, len(msg)):], []byte{0})
		switch {
		case startup:
			code := binary.BigEndian.Uint32(msg[4:])
			startup = code == 80877103 || code == 80877104 // SSL or GSS encryption request
		case msg[0] == 'P': // Parse: a statement's name and SQL
			stmts[string(fields[0])] = string(fields[1])
		case msg[0] == 'B': // Bind: a portal's name and its statement's
			bound = stmts[string(fields[1])]
		case msg[0] == 'Q' && string(fields[0]) != "-- ping" || msg[0] == 'E' && !purgeStatement(bound):
			p.queries.Add(1)
		}
		if *p.target.Load() == "" {
			continue
		}
		if _, err := up.Write(msg); err != nil {
			return
		}
	}
}

// buildServer builds the rolodex binary into a temporary folder of the test and returns its path.
func buildServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "rolodex")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// process is `rolodex serve` running as a process of its own.
type process struct {
	cmd    *exec.Cmd
	base   string
	log    *syncBuffer // its stderr
	exited chan error  // receives what Wait returned, then is closed
}

// startProcess runs the binary bin as `rolodex serve [flags]` with env on a free port, and returns
// once it is healthy; it is killed when the test ends, if it still runs.
func startProcess(t *testing.T, bin string, flags []string, env ...string) *process {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: exec.Command(bin, append([]string{"serve"}, flags...)...), base: "http://" + addr,
		log: &syncBuffer{}, exited: make(chan error, 1)}
	p.cmd.Env = append(os.Environ(), append(env, "ROLODEX_ADDR="+addr)...)
	p.cmd.Stderr = p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
	})
	if err := waitHealthy(p.base, p.exited); err != nil {
		t.Fatalf("rolodex serve: %v\n%s", err, p.log.String())
	}
	return p
}
