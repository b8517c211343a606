package main

// Tests of what the middleware does to every request: request ids, the access log, errors that
// become a logged 500, security headers, gzip, the query-string bound and the request deadline.

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestEveryAnswerHasARequestIDAndIsNosniffAndNoStore(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ids := map[string]bool{"": true}
	for _, r := range []response{
		call(t, "GET", "/v1/contacts", c.key, ""), call(t, "GET", "/v1/contacts/abc", c.key, ""),
		call(t, "GET", "/v1/contacts", "", ""), call(t, "GET", "/nope", "", ""), call(t, "GET", "/healthz", "", ""),
	} {
		if r.header.Get("X-Content-Type-Options") != "nosniff" || r.header.Get("Cache-Control") != "no-store" || ids[r.header.Get("X-Request-Id")] {
			t.Errorf("answer %d %s: X-Content-Type-Options %q, Cache-Control %q, X-Request-Id %q; want nosniff, no-store and a fresh id",
				r.status, r.body, r.header.Get("X-Content-Type-Options"), r.header.Get("Cache-Control"), r.header.Get("X-Request-Id"))
		}
		ids[r.header.Get("X-Request-Id")] = true
	}
	// The client's id is echoed when it is sane.
	for id, echoed := range map[string]bool{"client-id.42": true, "has space": false, strings.Repeat("x", 129): false, "<script>": false} {
		if got := call(t, "GET", "/healthz", "", "", "X-Request-Id", id).header.Get("X-Request-Id"); (got == id) != echoed || got == "" {
			t.Errorf("client sent X-Request-Id %q: answered %q; want it echoed: %v, else a fresh id", id, got, echoed)
		}
	}
}

func TestAccessLogIsOneSlogLineWithRouteAndCompanyButNeverTheKey(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	id := "log-test-" + randomHex(4)
	call(t, "GET", "/v1/contacts/999999999", c.key, "", "X-Request-Id", id)
	raw := waitLogLine(t, testEnv.log, `"requestId":"`+id+`"`)
	want := []string{"time", "level", "msg", "requestId", "method", "route", "status", "durationMs", "companyId"}
	if diff := cmp.Diff(want, jsonKeys(t, []byte(raw))); diff != "" {
		t.Errorf("access log line's keys (-want +got):\n%s", diff)
	}
	var line struct {
		Time                      time.Time
		Level, Msg, Method, Route string
		Status, CompanyID         int64
		DurationMs                float64
	}
	err := json.Unmarshal([]byte(raw), &line)
	if got := fmt.Sprint(line.Level, line.Msg, line.Method, line.Route, line.Status, line.CompanyID); err != nil || line.Time.IsZero() ||
		line.DurationMs < 0 || got != fmt.Sprint("INFO", "request", "GET", "GET /v1/contacts/{id}", 404, c.id) {
		t.Errorf("access log line %s (%v); want level INFO, msg request, GET, its route, 404, companyId %d, a time and a duration", raw, err, c.id)
	}
	if log := testEnv.log.String(); strings.Contains(log, c.key) || strings.Contains(log, c.key[len(c.key)-20:]) {
		t.Error("the server log contains an API key")
	}
}

// A write the database refuses (a constraint only it knows) is a 422. An unexpected error (a column
// renamed under the server; a panic in a handler cannot be caused from outside) is a 500 with a
// generic problem, logged at ERROR with the request id and route, and the server goes on serving.
func TestDatabaseRefusalIs422AndInternalErrorIsLogged500(t *testing.T) {
	t.Parallel()
	dbURL := freshDatabase(t)
	log := &syncBuffer{}
	base := startServer(t, map[string]string{"DATABASE_URL": dbURL}, log)
	st, err := openStore(dbConfig{url: dbURL, maxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	nc, err := st.createCompany(context.Background(), "Broken")
	for _, q := range []string{`ALTER TABLE organizations RENAME COLUMN name TO broken_name`,
		`ALTER TABLE contacts ADD CONSTRAINT contacts_strict_city_check CHECK (city <> 'Nowhere')`} {
		if _, err2 := st.db.Exec(q); err != nil || err2 != nil {
			t.Fatal(err, err2)
		}
	}
	ana := decode[obj](t, callAt(t, nil, base, "POST", "/v1/contacts", nc.APIKey, `{"name":"Ana"}`).body).id()
	for method, path := range map[string]string{"POST": "/v1/contacts", "PATCH": itemPath("/v1/contacts", ana)} {
		wantProblem(t, callAt(t, nil, base, method, path, nc.APIKey, `{"city":"Nowhere","name":"Ana"}`), 422, "validation_failed")
	}
	id := "boom-" + randomHex(4)
	r := callAt(t, nil, base, "GET", "/v1/organizations", nc.APIKey, "", "X-Request-Id", id)
	wantProblem(t, r, http.StatusInternalServerError, "internal_error")
	if bytes.Contains(r.body, []byte("broken_name")) || bytes.Contains(r.body, []byte("column")) {
		t.Errorf("SQL or driver text reached the client: %s", r.body)
	}
	line := waitLogLine(t, log, `"level":"ERROR"`)
	if !strings.Contains(line, id) || !strings.Contains(line, "/v1/organizations") {
		t.Errorf("error log line %s; want the request id %s and the route", line, id)
	}
	if r := callAt(t, nil, base, "GET", "/v1/contacts/count", nc.APIKey, ""); r.status != http.StatusOK {
		t.Errorf("after the 500: GET /v1/contacts/count = %d; want 200", r.status)
	}
}

func TestGzipCompressesLargeAnswersOnly(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for i := range 10 {
		create(t, c.key, "/v1/contacts", `{"name":"Gzip `+strconv.Itoa(i)+`","address":"`+strings.Repeat("street ", 60)+`"}`)
	}
	plain := callAt(t, rawClient, testEnv.baseURL, "GET", "/v1/contacts", c.key, "")
	if len(plain.body) < 4<<10 {
		t.Fatalf("the list is %d bytes; the test needs several KiB", len(plain.body))
	}
	zipped := callAt(t, rawClient, testEnv.baseURL, "GET", "/v1/contacts", c.key, "", "Accept-Encoding", "gzip")
	// The handler's Content-Length is dropped; net/http may set the compressed one.
	if cl := zipped.header.Get("Content-Length"); zipped.header.Get("Content-Encoding") != "gzip" ||
		(cl != "" && cl != strconv.Itoa(len(zipped.body))) {
		t.Fatalf("Accept-Encoding: gzip: Content-Encoding %q, Content-Length %q; want gzip and the compressed length or none",
			zipped.header.Get("Content-Encoding"), cl)
	}
	zr, err := gzip.NewReader(bytes.NewReader(zipped.body))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(zr); err != nil || !bytes.Equal(got, plain.body) || len(zipped.body) >= len(plain.body) {
		t.Errorf("gzip body of %d bytes unzips to\n%s\nwant fewer than %d, unzipping to the plain body\n%s", len(zipped.body), got, len(plain.body), plain.body)
	}

	doomed := createPath(t, c.key, "/v1/contacts", `{"name":"Doomed"}`)
	for _, tt := range []struct{ name, method, path, accept string }{
		{"a small body", "GET", "/v1/contacts/count", "gzip"},
		{"a small problem", "GET", "/v1/contacts/0", "gzip"},
		{"HEAD", "HEAD", "/v1/contacts", "gzip"},
		{"204", "DELETE", doomed, "gzip"},
		{"gzip refused with q=0", "GET", "/v1/contacts", "gzip;q=0, identity"},
		{"no Accept-Encoding", "GET", "/v1/contacts", ""},
	} {
		r := callAt(t, rawClient, testEnv.baseURL, tt.method, tt.path, c.key, "", "Accept-Encoding", tt.accept)
		if ce, v := r.header.Get("Content-Encoding"), r.header.Get("Vary"); ce != "" || v != "Accept-Encoding" {
			t.Errorf("%s (%s %s = %d): Content-Encoding %q, Vary %q; want none and Accept-Encoding", tt.name, tt.method, tt.path, r.status, ce, v)
		}
	}
}

func TestAcceptsGzip(t *testing.T) {
	t.Parallel()
	for header, want := range map[string]bool{
		"": false, "gzip": true, "GZIP": true, "deflate, gzip;q=0.5": true, "gzip;q=0": false,
		"*": true, "*;q=0": false, "gzip;q=0, *": false, "br, *;q=0.1": true, "identity": false, "gzipx": false,
	} {
		if got := acceptsGzip(header); got != want {
			t.Errorf("acceptsGzip(%q) = %v; want %v", header, got, want)
		}
	}
}

func TestLongQueryStringsAre400NotWork(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for _, tt := range []struct{ name, path, code string }{
		{"10,000 expand[] values", "/v1/contacts?" + strings.Repeat("expand[]=organization&", 10_000), "invalid_parameter"},
		{"10,000 short expand[] values", "/v1/contacts/1?" + strings.Repeat("expand[]=x&", 10_000), "invalid_parameter"},
		{"a 100 KB q", "/v1/contacts?q=" + strings.Repeat("a", 100_000), "invalid_parameter"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantProblem(t, call(t, "GET", tt.path, c.key, ""), http.StatusBadRequest, tt.code)
		})
	}
}

// A database away or hung is a 503, never a 500, and a client gone is no error.
func TestDatabaseAwayOrHungIs503AndAClientGoneIsNo500(t *testing.T) {
	t.Parallel()
	proxy, dbURL := newDBProxy(t, testEnv.dbURL)
	log := &syncBuffer{}
	base := startServer(t, map[string]string{"DATABASE_URL": dbURL}, log, "-statement-timeout", "500ms")
	gone, err := freeAddr() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	proxy.point(gone)
	for _, path := range []string{"/v1/contacts", "/readyz"} {
		// Resolving an unknown key needs the database.
		r := callAt(t, nil, base, "GET", path, "rdx_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "")
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" ||
			bytes.Contains(r.body, []byte("connect")) || bytes.Contains(r.body, []byte(gone)) {
			t.Errorf("GET %s with the database away = %d (Retry-After %q) %s; want 503 with Retry-After, without driver text",
				path, r.status, r.header.Get("Retry-After"), r.body)
		}
	}
	proxy.point("") // from now on the database accepts connections and never answers
	start := time.Now()
	r := callAt(t, &http.Client{Timeout: 5 * time.Second}, base, "GET", "/v1/contacts", "rdx_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "")
	wantProblem(t, r, http.StatusServiceUnavailable, "timeout")
	if r.header.Get("Retry-After") == "" {
		t.Errorf("503 after %v without Retry-After", time.Since(start))
	}
	// A client that gives up before the deadline leaves a request the server answers to nobody.
	id := "gone-" + randomHex(4)
	if _, err := send(&http.Client{Timeout: 150 * time.Millisecond}, base, "GET", "/v1/contacts", "rdx_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB", "", "X-Request-Id", id); err == nil {
		t.Fatal("the request finished; want the client's deadline to cut it")
	}
	waitLogLine(t, log, `"requestId":"`+id+`","method"`)
	if logged := log.String(); strings.Contains(logged, `"level":"ERROR"`) || strings.Contains(logged, `"status":500`) {
		t.Errorf("a hung database or a client gone away was logged as an error or a 500:\n%s", logged)
	}
}

// A panic in a handler becomes a logged 500 problem, and the server goes on serving.
func TestPanicBecomesLogged500AndServerKeepsServing(t *testing.T) {
	t.Parallel()
	var logBuf syncBuffer
	log := slog.New(slog.NewJSONHandler(&logBuf, nil))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /boom", func(w http.ResponseWriter, r *http.Request) { panic("kaboom") })
	mux.HandleFunc("GET /fine", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, r, 200, []byte(`{}`)) })
	srv := httptest.NewServer(withRequestLog(log, newRequestIDs(), 0, withPattern(mux)))
	defer srv.Close()

	r := callAt(t, nil, srv.URL, "GET", "/boom", "", "")
	p := wantProblem(t, r, http.StatusInternalServerError, "internal_error")
	if strings.Contains(string(r.body), "kaboom") {
		t.Error("the panic value reached the client")
	}
	logged := logBuf.String()
	if !strings.Contains(logged, "kaboom") || !strings.Contains(logged, p.RequestID) || !strings.Contains(logged, "GET /boom") {
		t.Errorf("log %q; want the panic, the request id %s and the route", logged, p.RequestID)
	}
	if r := callAt(t, nil, srv.URL, "GET", "/fine", "", ""); r.status != http.StatusOK {
		t.Errorf("after the panic: GET /fine = %d; want the server to keep serving", r.status)
	}
}
