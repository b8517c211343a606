package main

// The suite's shared world and the one set of helpers every test uses: a PostgreSQL (DATABASE_URL, or a
// private server), the server started through run(), a company per test, and requests through real HTTP.

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// testEnv is the suite's shared world: one PostgreSQL database and one server started through run().
// Tests share them safely because each test works inside a company of its own.
var testEnv struct {
	adminURL string // a database on the same server, to create fresh ones from
	dbURL    string // the migrated database the server uses
	st       *store
	baseURL  string
	log      *syncBuffer // the server's log
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

	st, err := openStore(dbConfig{url: testEnv.dbURL, maxConns: 8})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer st.Close()
	testEnv.st = st

	addr, err := freeAddr()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	testEnv.baseURL = "http://" + addr
	testEnv.log = &syncBuffer{}
	// The shared server's limits are far above what the suite sends (thousands of requests on one
	// key, dozens of 401s from one address); hardening_test.go tests the limits on servers of its own.
	env := map[string]string{"DATABASE_URL": testEnv.dbURL, "ROLODEX_ADDR": addr,
		"ROLODEX_RATE_LIMIT": "1000000", "ROLODEX_AUTH_FAILURE_LIMIT": "1000000"}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"rolodex", "serve"}, func(k string) string { return env[k] }, io.Discard, testEnv.log)
	}()
	if err := waitHealthy(testEnv.baseURL, done); err != nil {
		fmt.Fprintf(os.Stderr, "server did not start: %v\n%s", err, testEnv.log.String())
		return 1
	}

	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintf(os.Stderr, "server: %v\n", err)
		return 1
	}
	return code
}

// setupTestDatabase fills testEnv.adminURL and testEnv.dbURL: a fresh database on DATABASE_URL's
// server when it is set, else a private server in a temporary folder. cleanup drops or stops it.
func setupTestDatabase(ctx context.Context) (cleanup func(), err error) {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		testEnv.adminURL = u
		name := "rolodex_test_" + randomHex(6)
		if err := createDatabase(ctx, u, name); err != nil {
			return nil, err
		}
		testEnv.dbURL, err = withDatabase(u, name)
		return func() { dropDatabase(u, name) }, err
	}
	dir, err := os.MkdirTemp("", "rolodex-test-pg-")
	if err != nil {
		return nil, err
	}
	pg, err := startLocalPG(ctx, dir, io.Discard, true)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	testEnv.adminURL = pg.URL("postgres")
	if err := createDatabase(ctx, testEnv.adminURL, "rolodex"); err != nil {
		pg.Stop()
		os.RemoveAll(dir)
		return nil, err
	}
	testEnv.dbURL = pg.URL("rolodex")
	return func() { pg.Stop(); os.RemoveAll(dir) }, nil
}

func createDatabase(ctx context.Context, adminURL, name string) error {
	st, err := openStore(dbConfig{url: adminURL, maxConns: 1})
	if err != nil {
		return err
	}
	defer st.Close()
	_, err = st.db.ExecContext(ctx, "CREATE DATABASE "+quoteIdent(name))
	return err
}

func dropDatabase(adminURL, name string) {
	st, err := openStore(dbConfig{url: adminURL, maxConns: 1})
	if err != nil {
		return
	}
	defer st.Close()
	st.db.Exec("DROP DATABASE IF EXISTS " + quoteIdent(name) + " WITH (FORCE)")
}

// withDatabase returns the URL u with its database name replaced.
func withDatabase(u, name string) (string, error) {
	pu, err := url.Parse(u)
	if err != nil || pu.Scheme == "" {
		return "", fmt.Errorf("DATABASE_URL must be a postgres:// URL for the tests")
	}
	pu.Path = "/" + name
	return pu.String(), nil
}

// freshDatabase creates an empty database for one test and drops it afterwards.
func freshDatabase(t *testing.T) string {
	t.Helper()
	name := "rolodex_fresh_" + randomHex(6)
	if err := createDatabase(context.Background(), testEnv.adminURL, name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() { dropDatabase(testEnv.adminURL, name) })
	u, err := withDatabase(testEnv.adminURL, name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

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
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			return fmt.Errorf("run returned early: %v", err)
		default:
		}
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
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

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testCompany is a company of the test's own, with its first user and an API key.
type testCompany struct {
	id     int64
	userID int64
	key    string
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

// response is a finished HTTP exchange.
type response struct {
	status int
	header http.Header
	body   []byte
}

// call sends a request to the test server. key "" sends no x-api-key; body "" sends no body; a
// body gets Content-Type: application/json unless hdr sets one. hdr is "Name", "value" pairs.
func call(t *testing.T, method, path, key, body string, hdr ...string) response {
	t.Helper()
	return callAt(t, nil, testEnv.baseURL, method, path, key, body, hdr...)
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
	var p problemBody
	if r.status != status {
		t.Errorf("status = %d; want %d (body %s)", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q; want application/problem+json", ct)
	}
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("problem body %s: %v", r.body, err)
	}
	if p.Status != status || p.Code != code || p.Title == "" || p.Detail == "" || p.Type == "" {
		t.Errorf("problem = %+v; want status %d, code %q, a title, a detail and a type", p, status, code)
	}
	if p.RequestID == "" || p.RequestID != r.header.Get("X-Request-Id") {
		t.Errorf("problem requestId %q; want the X-Request-Id header %q", p.RequestID, r.header.Get("X-Request-Id"))
	}
	return p
}

// startServer runs `rolodex serve` through run() on a free port with env (DATABASE_URL defaults to
// the suite's database), logging to log, and returns its base URL; the server stops when the test ends.
func startServer(t *testing.T, env map[string]string, log io.Writer) string {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]string{"DATABASE_URL": testEnv.dbURL, "ROLODEX_ADDR": addr}
	for k, v := range env {
		all[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"rolodex", "serve"}, func(k string) string { return all[k] }, io.Discard, log)
	}()
	base := "http://" + addr
	if err := waitHealthy(base, done); err != nil {
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

// callAt is call against the server at base, through client (nil: http.DefaultClient).
func callAt(t *testing.T, client *http.Client, base, method, path, key, body string, hdr ...string) response {
	t.Helper()
	r, err := send(client, base, method, path, key, body, hdr...)
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
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: read body: %w", method, path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// rawClient leaves Content-Encoding to the test instead of undoing gzip itself.
var rawClient = &http.Client{Transport: &http.Transport{DisableCompression: true}}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("gunzip: %v", err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("gunzip: %v", err)
	}
	return out
}

func sqlID(t *testing.T, q string, args ...any) int64 {
	t.Helper()
	var id int64
	if err := testEnv.st.db.QueryRowContext(context.Background(), q, args...).Scan(&id); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return id
}
