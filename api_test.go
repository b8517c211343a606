package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"/healthz", "/readyz"} {
		r := call(t, "GET", path, "", "")
		if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" {
			t.Errorf("GET %s = %d %q; want 200 application/json", path, r.status, r.header.Get("Content-Type"))
		}
	}
	var ready struct{ SchemaVersion int }
	json.Unmarshal(call(t, "GET", "/readyz", "", "").body, &ready)
	if ready.SchemaVersion != latestSchemaVersion() {
		t.Errorf("readyz schemaVersion = %d; want %d", ready.SchemaVersion, latestSchemaVersion())
	}
}

func TestUnauthenticatedRequestsGetOne401(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	revoked, err := testEnv.st.createAPIKey(context.Background(), c.id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := testEnv.st.revokeAPIKey(context.Background(), revoked); err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{
		"missing":           "",
		"unknown":           "rdx_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"revoked":           revoked,
		"not a key at all":  "hello",
		"one character off": c.key[:len(c.key)-1] + string(c.key[len(c.key)-1]^1),
	}
	var bodies []problemBody
	for name, key := range keys {
		t.Run(name, func(t *testing.T) {
			r := call(t, "GET", "/v1/contacts", key, "")
			p := wantProblem(t, r, http.StatusUnauthorized, "unauthorized")
			p.RequestID = ""
			bodies = append(bodies, p)
			if r.header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
	for _, b := range bodies[1:] {
		if diff := cmp.Diff(bodies[0], b); diff != "" {
			t.Errorf("401 bodies differ (-first +other):\n%s", diff)
		}
	}
}

func TestUnknownPathsAndVersionsAre404Problems(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for _, path := range []string{"/v2/contacts", "/nope", "/", "/v1/nope", "/v1/contacts/1/extra", "/v1"} {
		r := call(t, "GET", path, c.key, "")
		wantProblem(t, r, http.StatusNotFound, "not_found")
	}
	// Without a key, a /v1 path asks for one first; any other unknown path is simply 404.
	wantProblem(t, call(t, "GET", "/v1/nope", "", ""), http.StatusUnauthorized, "unauthorized")
	wantProblem(t, call(t, "GET", "/v2/contacts", "", ""), http.StatusNotFound, "not_found")
}

func TestWrongMethodIs405WithAllow(t *testing.T) {
	t.Parallel()
	r := call(t, "DELETE", "/healthz", "", "")
	wantProblem(t, r, http.StatusMethodNotAllowed, "method_not_allowed")
	if got := r.header.Get("Allow"); got != "GET, HEAD" {
		t.Errorf("Allow = %q; want %q", got, "GET, HEAD")
	}
}

func TestRequestIDIsEchoedOrMade(t *testing.T) {
	t.Parallel()
	r := call(t, "GET", "/healthz", "", "", "X-Request-Id", "client-id.42")
	if got := r.header.Get("X-Request-Id"); got != "client-id.42" {
		t.Errorf("X-Request-Id = %q; want the client's", got)
	}
	for _, bad := range []string{"has space", strings.Repeat("x", 129), "<script>"} {
		r := call(t, "GET", "/healthz", "", "", "X-Request-Id", bad)
		if got := r.header.Get("X-Request-Id"); got == bad || got == "" {
			t.Errorf("client sent X-Request-Id %q: echoed %q; want a fresh id", bad, got)
		}
	}
	a, b := call(t, "GET", "/healthz", "", ""), call(t, "GET", "/healthz", "", "")
	if a.header.Get("X-Request-Id") == b.header.Get("X-Request-Id") {
		t.Error("two requests got the same generated id")
	}
}

func TestAccessLogNamesRouteAndCompanyButNeverTheKey(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	r := call(t, "GET", "/v1/nope", c.key, "", "X-Request-Id", "log-test-"+randomHex(4))
	id := r.header.Get("X-Request-Id")
	raw := waitLogLine(t, testEnv.log, `"requestId":"`+id+`"`)
	var line map[string]any
	if err := json.Unmarshal([]byte(raw), &line); err != nil {
		t.Fatalf("access log line %s: %v", raw, err)
	}
	if line["method"] != "GET" || line["status"] != float64(404) || line["companyId"] != float64(c.id) || line["route"] != "/" {
		t.Errorf("access log line %v; want method GET, status 404, companyId %d, route /", line, c.id)
	}
	want := []string{"time", "level", "msg", "requestId", "method", "route", "status", "durationMs", "companyId"}
	if diff := cmp.Diff(want, objectKeys(t, []byte(raw))); diff != "" {
		t.Errorf("access log line's keys (-want +got):\n%s", diff)
	}
	if strings.Contains(testEnv.log.String(), c.key[keyPrefixLen:]) {
		t.Error("the server log contains an API key")
	}
}

func TestPanicBecomesLogged500AndServerKeepsServing(t *testing.T) {
	t.Parallel()
	var logBuf syncBuffer
	log := slog.New(slog.NewJSONHandler(&logBuf, nil))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /boom", func(w http.ResponseWriter, r *http.Request) { panic("kaboom") })
	mux.HandleFunc("GET /fine", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, []byte(`{}`)) })
	srv := httptest.NewServer(withRequestLog(log, newRequestIDs(), 0, withPattern(mux)))
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/boom")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	r := response{status: resp.StatusCode, header: resp.Header, body: body}
	p := wantProblem(t, r, http.StatusInternalServerError, "internal_error")
	if strings.Contains(string(body), "kaboom") {
		t.Error("the panic value reached the client")
	}
	logged := logBuf.String()
	if !strings.Contains(logged, "kaboom") || !strings.Contains(logged, p.RequestID) || !strings.Contains(logged, "GET /boom") {
		t.Errorf("log %q; want the panic, the request id %s and the route", logged, p.RequestID)
	}
	resp, err = http.Get(srv.URL + "/fine")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("after the panic: %v %v; want the server to keep serving", resp, err)
	}
}

func TestCLICompanyCreatePrintsOneJSONLine(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	env := map[string]string{"DATABASE_URL": testEnv.dbURL}
	err := run(context.Background(), []string{"rolodex", "company", "create", "-name", "CLI Co"},
		func(k string) string { return env[k] }, &out, &errOut)
	if err != nil {
		t.Fatalf("company create: %v (%s)", err, errOut.String())
	}
	if strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("output %q; want exactly one line", out.String())
	}
	var got struct {
		CompanyID int64  `json:"companyId"`
		UserID    int64  `json:"userId"`
		APIKey    string `json:"apiKey"`
	}
	dec := json.NewDecoder(&out)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil || got.CompanyID <= 0 || got.UserID <= 0 || got.APIKey == "" {
		t.Fatalf("output %+v, %v; want companyId, userId and apiKey", got, err)
	}
	// The key works, and a key made with `key create` works too, until `key revoke`.
	if r := call(t, "GET", "/v1/nope", got.APIKey, ""); r.status != http.StatusNotFound {
		t.Errorf("the printed key: GET /v1/nope = %d; want 404 (authenticated)", r.status)
	}
	out.Reset()
	err = run(context.Background(), []string{"rolodex", "key", "create", "-company", strconv.FormatInt(got.CompanyID, 10)},
		func(k string) string { return env[k] }, &out, &errOut)
	key := strings.TrimSpace(out.String())
	if err != nil || !strings.HasPrefix(key, "rdx_") {
		t.Fatalf("key create = %q, %v", key, err)
	}
	err = run(context.Background(), []string{"rolodex", "key", "revoke", key[:keyPrefixLen]},
		func(k string) string { return env[k] }, io.Discard, &errOut)
	if err != nil {
		t.Fatalf("key revoke: %v", err)
	}
	wantProblem(t, call(t, "GET", "/v1/nope", key, ""), http.StatusUnauthorized, "unauthorized")
}

func TestCLIUsageErrors(t *testing.T) {
	t.Parallel()
	getenv := func(string) string { return "" }
	for _, args := range [][]string{
		{"rolodex"}, {"rolodex", "bogus"}, {"rolodex", "company", "create"}, {"rolodex", "key", "create"},
		{"rolodex", "key", "revoke"}, {"rolodex", "serve", "extra"},
	} {
		if err := run(context.Background(), args, getenv, io.Discard, io.Discard); err == nil {
			t.Errorf("run %v: no error; want a usage error", args)
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"rolodex", "version"}, getenv, &out, io.Discard); err != nil || !strings.HasPrefix(out.String(), "rolodex ") {
		t.Errorf("version = %q, %v", out.String(), err)
	}
	var help bytes.Buffer
	for _, cmd := range []string{"serve", "migrate", "dev"} {
		help.Reset()
		err := run(context.Background(), []string{"rolodex", cmd, "-h"}, getenv, io.Discard, &help)
		if err == nil || !strings.Contains(help.String(), "Usage: rolodex "+cmd) {
			t.Errorf("%s -h: %v, %q; want its usage", cmd, err, help.String())
		}
	}
}

func TestUnreachableDatabaseIs503NotA500(t *testing.T) {
	t.Parallel()
	addr, err := freeAddr() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	st, err := openStore(dbConfig{url: "postgres://postgres@" + addr + "/x?sslmode=disable&connect_timeout=2", maxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var logBuf syncBuffer
	srv := httptest.NewServer(newHandler(st, slog.New(slog.NewJSONHandler(&logBuf, nil))))
	defer srv.Close()

	for _, path := range []string{"/v1/contacts", "/readyz"} {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.Header.Set("x-api-key", "rdx_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA") // resolving it needs the database
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("GET %s with the database away = %d (Retry-After %q); want 503 with Retry-After. Body %s",
				path, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
		if strings.Contains(string(body), "connect") || strings.Contains(string(body), addr) {
			t.Errorf("GET %s: driver text reached the client: %s", path, body)
		}
	}
}

// TestTuneGC: the server process collects only as its memory nears ROLODEX_MEMORY_LIMIT, unless the
// Go runtime's own variables are set or the limit is 0; a bad value is an error. (It changes the
// test process's collector for a moment and puts it back.)
func TestTuneGC(t *testing.T) {
	prevLimit, prevPercent := debug.SetMemoryLimit(-1), debug.SetGCPercent(100)
	restore := func() { debug.SetMemoryLimit(prevLimit); debug.SetGCPercent(prevPercent) }
	defer restore()
	for _, tt := range []struct {
		env       map[string]string
		wantLimit int64 // 0: left as it was
		wantErr   bool
	}{
		{env: nil, wantLimit: defaultMemoryLimit << 20},
		{env: map[string]string{"ROLODEX_MEMORY_LIMIT": "64"}, wantLimit: 64 << 20},
		{env: map[string]string{"ROLODEX_MEMORY_LIMIT": "0"}},
		{env: map[string]string{"GOGC": "200"}},
		{env: map[string]string{"GOMEMLIMIT": "100MiB"}},
		{env: map[string]string{"ROLODEX_MEMORY_LIMIT": "-1"}, wantErr: true},
		{env: map[string]string{"ROLODEX_MEMORY_LIMIT": "40MiB"}, wantErr: true},
	} {
		debug.SetMemoryLimit(prevLimit)
		debug.SetGCPercent(100)
		err := tuneGC(func(k string) string { return tt.env[k] })
		limit, percent := debug.SetMemoryLimit(-1), debug.SetGCPercent(100)
		switch {
		case tt.wantErr:
			if err == nil {
				t.Errorf("tuneGC(%v) = nil; want an error", tt.env)
			}
		case err != nil:
			t.Errorf("tuneGC(%v) = %v", tt.env, err)
		case tt.wantLimit != 0 && (limit != tt.wantLimit || percent != -1):
			t.Errorf("tuneGC(%v): memory limit %d, GOGC %d; want %d and off", tt.env, limit, percent, tt.wantLimit)
		case tt.wantLimit == 0 && (limit != prevLimit || percent != 100):
			t.Errorf("tuneGC(%v): memory limit %d, GOGC %d; want them untouched", tt.env, limit, percent)
		}
	}
}

// waitLogLine returns the first line of log that contains s, waiting up to 10 seconds for it: the
// server writes its log asynchronously.
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

// The access log's line is written by hand for speed; it must stay the bytes slog writes.
func TestAccessLineIsSlogs(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 21, 9, 30, 0, 123456789, time.UTC)
	cases := []struct {
		name      string
		end       time.Time
		id        string
		method    string
		route     string
		status    int
		companyID int64
	}{
		{"a retrieve", start.Add(1234567 * time.Nanosecond), "a1b2c3d4e5f6-1", "GET", "GET /v1/contacts/{id}", 200, 42},
		{"no route, no company", start, "client-id.42", "GET", "", 0, 0},
		{"whole milliseconds", start.Add(3 * time.Millisecond), "x", "DELETE", "/", 404, 1},
		{"one microsecond", start.Add(time.Microsecond), "x", "PATCH", "/", 503, 1<<63 - 1},
		{"an hour and a half", start.Add(90*time.Minute + 7*time.Microsecond), strings.Repeat("z", 128), "POST", "POST /v1/business", 201, 7},
		{"an instant in whole seconds, another zone", time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("", 2*3600)), "x", "GET", "/", 200, 1},
		{"the local zone", start.Add(time.Millisecond).Local(), "x", "GET", "/", 200, 1},
		{"a token method with & < >", start.Add(time.Millisecond), "x", "A&B<C>", "/", 405, 1},
		// Strings that need escaping take slog's own path.
		{"a quote and a backslash", start, `i"d\`, "GET", "/", 200, 1},
		{"control bytes and UTF-8", start, "\b\f\n\x00é\u2028\xff", "GET", "/", 200, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ri := &reqInfo{id: c.id, pattern: c.route, companyID: c.companyID}
			var want, got bytes.Buffer
			logAccess(context.Background(), slog.New(slog.NewJSONHandler(&want, nil)), nil, ri, c.method, c.status, start, c.end)
			log := newLogger(&got)
			logAccess(context.Background(), log, logWriterOf(log), ri, c.method, c.status, start, c.end)
			flushLog(log)
			if diff := cmp.Diff(want.String(), got.String()); diff != "" {
				t.Errorf("access line (-slog +by hand):\n%s", diff)
			}
		})
	}
}

// lineWriter records what a logWriter writes, failing the test when two writes overlap.
type lineWriter struct {
	t      *testing.T
	busy   atomic.Bool
	mu     sync.Mutex
	writes [][]byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	if !w.busy.CompareAndSwap(false, true) {
		w.t.Error("two writes to the log's output at once")
	}
	defer w.busy.Store(false)
	time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond) // lets lines pile up into batches
	w.mu.Lock()
	w.writes = append(w.writes, bytes.Clone(p))
	w.mu.Unlock()
	return len(p), nil
}

func TestLogLinesWrittenConcurrentlyNeverInterleave(t *testing.T) {
	t.Parallel()
	out := &lineWriter{t: t}
	log := newLogger(out)
	lw := logWriterOf(log)
	const goroutines, lines = 8, 300
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for n := range lines {
				id := fmt.Sprintf("g%d-n%d", g, n)
				switch {
				case n%100 == 99: // longer than the whole buffer
					log.Info("big", "id", id, "pad", strings.Repeat("b", logBufferBytes+n))
				case n%2 == 0:
					log.Info("other", "id", id, "pad", strings.Repeat("p", n))
				default:
					ri := &reqInfo{id: id, pattern: "GET /v1/contacts/{id}", companyID: int64(g)}
					logAccess(context.Background(), log, lw, ri, "GET", 200, time.Now(), time.Now())
				}
			}
		})
	}
	wg.Wait()
	flushLog(log)

	var all []byte
	seen := map[string]bool{}
	for _, w := range out.writes {
		if len(w) == 0 || w[len(w)-1] != '\n' {
			t.Fatalf("a write that does not end a line: %.80q", w)
		}
		if len(w) > logBufferBytes && bytes.Count(w, []byte("\n")) > 1 {
			t.Errorf("a write of %d bytes and several lines; want at most %d bytes, or one line", len(w), logBufferBytes)
		}
		all = append(all, w...)
	}
	for _, l := range strings.Split(strings.TrimSuffix(string(all), "\n"), "\n") {
		var v struct {
			ID        string
			RequestID string
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("a log line that is not JSON: %.200q: %v", l, err)
		}
		seen[v.ID+v.RequestID] = true
	}
	if len(seen) != goroutines*lines {
		t.Errorf("%d distinct lines; want %d", len(seen), goroutines*lines)
	}
	if len(out.writes) >= goroutines*lines {
		t.Errorf("%d writes for %d lines; want lines batched", len(out.writes), goroutines*lines)
	}
}

// blockedWriter is a log output that does not return until it is released.
type blockedWriter struct {
	entered chan struct{} // receives when a write starts
	release chan struct{}
	buf     syncBuffer
}

func (w *blockedWriter) Write(p []byte) (int, error) {
	select {
	case w.entered <- struct{}{}:
	default:
	}
	<-w.release
	return w.buf.Write(p)
}

func TestLogWriterWaitsWhenFullAndNeverDrops(t *testing.T) {
	t.Parallel()
	out := &blockedWriter{entered: make(chan struct{}), release: make(chan struct{})}
	lw := newLogWriter(out)
	line := []byte(strings.Repeat("x", 99) + "\n")
	lw.Write(line)
	<-out.entered // the flusher took the line and is blocked in out
	n := 1
	for range logBufferBytes / len(line) { // fills the queue
		lw.Write(line)
		n++
	}
	returned := make(chan struct{})
	go func() {
		lw.Write(line)
		close(returned)
	}()
	select {
	case <-returned:
		t.Fatal("a write to a full queue returned; want it to wait for room")
	case <-time.After(100 * time.Millisecond):
	}
	close(out.release)
	<-returned
	n++
	lw.Flush()
	if got, want := out.buf.String(), strings.Repeat(string(line), n); got != want {
		t.Errorf("wrote %d bytes; want all %d lines (%d bytes)", len(got), n, len(want))
	}
}

// slowWriter is a log output that takes its time over every write.
type slowWriter struct{ buf syncBuffer }

func (w *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(20 * time.Millisecond)
	return w.buf.Write(p)
}

// The log is written asynchronously: when run returns, the last request's access line and the
// "stopped" line must have been written all the same.
func TestShutdownWritesTheWholeLog(t *testing.T) {
	t.Parallel()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DATABASE_URL": testEnv.dbURL, "ROLODEX_ADDR": addr}
	out := &slowWriter{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"rolodex", "serve"}, func(k string) string { return env[k] }, io.Discard, out)
	}()
	base := "http://" + addr
	if err := waitHealthy(base, done); err != nil {
		t.Fatal(err)
	}
	id := "last-" + randomHex(4)
	callAt(t, nil, base, "GET", "/healthz", "", "", "X-Request-Id", id)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	logged := out.buf.String()
	for _, want := range []string{`"requestId":"` + id + `"`, `"msg":"stopped"`} {
		if !strings.Contains(logged, want) {
			t.Errorf("no %s in the log when run returned:\n%s", want, logged)
		}
	}
	if !strings.HasSuffix(logged, `"msg":"stopped"}`+"\n") {
		t.Errorf("the log does not end with the \"stopped\" line:\n%s", logged)
	}
}
