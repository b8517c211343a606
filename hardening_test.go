package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestGzipCompressesLargeAnswersOnly(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for i := range 5 {
		mustCreateContact(t, c, `{"name":"Gzip `+strconv.Itoa(i)+`","address":"`+strings.Repeat("street ", 40)+`"}`)
	}
	plain := callAt(t, rawClient, testEnv.baseURL, "GET", "/v1/contacts", c.key, "")
	if len(plain.body) <= gzipMinBytes {
		t.Fatalf("the list is %d bytes; the test needs more than %d", len(plain.body), gzipMinBytes)
	}
	zipped := callAt(t, rawClient, testEnv.baseURL, "GET", "/v1/contacts", c.key, "", "Accept-Encoding", "gzip")
	// The handler's Content-Length is dropped; net/http may set the compressed one.
	if cl := zipped.header.Get("Content-Length"); zipped.header.Get("Content-Encoding") != "gzip" ||
		(cl != "" && cl != strconv.Itoa(len(zipped.body))) {
		t.Fatalf("Accept-Encoding: gzip: Content-Encoding %q, Content-Length %q; want gzip and the compressed length or none",
			zipped.header.Get("Content-Encoding"), cl)
	}
	if got := gunzip(t, zipped.body); !bytes.Equal(got, plain.body) {
		t.Errorf("gunzipped body differs from the plain one:\n%s\n%s", got, plain.body)
	}
	if len(zipped.body) >= len(plain.body) {
		t.Errorf("gzip body %d bytes, plain %d; want smaller", len(zipped.body), len(plain.body))
	}

	id := decodeContact(t, callAt(t, nil, testEnv.baseURL, "POST", "/v1/contacts", c.key, `{"name":"Doomed"}`).body).ID
	tests := []struct {
		name, method, path, accept string
	}{
		{"a small body", "GET", "/v1/contacts/count", "gzip"},
		{"a small problem", "GET", "/v1/contacts/0", "gzip"},
		{"HEAD", "HEAD", "/v1/contacts", "gzip"},
		{"204", "DELETE", "/v1/contacts/" + id, "gzip"},
		{"gzip refused with q=0", "GET", "/v1/contacts", "gzip;q=0, identity"},
		{"no Accept-Encoding", "GET", "/v1/contacts", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := callAt(t, rawClient, testEnv.baseURL, tt.method, tt.path, c.key, "", "Accept-Encoding", tt.accept)
			if ce := r.header.Get("Content-Encoding"); ce != "" {
				t.Errorf("%s %s = %d with Content-Encoding %q; want none", tt.method, tt.path, r.status, ce)
			}
			if v := r.header.Get("Vary"); v != "Accept-Encoding" {
				t.Errorf("Vary = %q; want Accept-Encoding", v)
			}
		})
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

func TestEveryAnswerIsNosniffAndNoStore(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for _, r := range []response{
		call(t, "GET", "/v1/contacts", c.key, ""),
		call(t, "GET", "/v1/contacts/abc", c.key, ""),
		call(t, "GET", "/v1/contacts", "", ""),
		call(t, "GET", "/nope", "", ""),
		call(t, "GET", "/healthz", "", ""),
	} {
		if r.header.Get("X-Content-Type-Options") != "nosniff" || r.header.Get("Cache-Control") != "no-store" {
			t.Errorf("answer %d %s: X-Content-Type-Options %q, Cache-Control %q; want nosniff and no-store",
				r.status, r.body, r.header.Get("X-Content-Type-Options"), r.header.Get("Cache-Control"))
		}
	}
}

func TestRateLimitHeadersOnEveryKeyedAnswer(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	// A server with the default limits (the shared test server's are raised for the suite).
	srv := httptest.NewServer(newHandler(testEnv.st, slog.New(slog.NewJSONHandler(io.Discard, nil))))
	defer srv.Close()
	for _, path := range []string{"/v1/contacts", "/v1/contacts/0", "/v1/nope"} {
		r := callAt(t, nil, srv.URL, "GET", path, c.key, "")
		if got := r.header.Get("RateLimit-Policy"); got != `"per-key";q=200;w=2` {
			t.Errorf("GET %s: RateLimit-Policy %q; want the default, q=200 (burst) per w=2 seconds", path, got)
		}
		if got := r.header.Get("RateLimit"); !strings.HasPrefix(got, `"per-key";r=`) || !strings.Contains(got, ";t=") {
			t.Errorf("GET %s: RateLimit %q; want \"per-key\";r=N;t=S", path, got)
		}
	}
}

func TestRateLimitAnswers429PerKey(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	other, err := testEnv.st.createAPIKey(context.Background(), c.id, 0)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(newHandlerWith(testEnv.st, slog.New(slog.NewJSONHandler(io.Discard, nil)), limits{rate: 1}))
	defer srv.Close()

	// A burst of 2 lets two requests through; the bucket then refills at one a second, so of twelve
	// quick requests most are refused.
	var refused []response
	for range 12 {
		r := callAt(t, nil, srv.URL, "GET", "/v1/contacts/count", c.key, "")
		if r.header.Get("RateLimit-Policy") != `"per-key";q=2;w=2` {
			t.Fatalf("RateLimit-Policy %q; want q=2;w=2", r.header.Get("RateLimit-Policy"))
		}
		if r.status == http.StatusTooManyRequests {
			refused = append(refused, r)
		}
	}
	if len(refused) == 0 {
		t.Fatal("twelve requests at a limit of 1/s: none refused")
	}
	r := refused[0]
	wantProblem(t, r, http.StatusTooManyRequests, "rate_limited")
	if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("Retry-After %q; want whole seconds, at least 1", r.header.Get("Retry-After"))
	}
	if got := r.header.Get("RateLimit"); !strings.HasPrefix(got, `"per-key";r=0;t=`) {
		t.Errorf("RateLimit on a 429: %q; want r=0", got)
	}
	if r := callAt(t, nil, srv.URL, "GET", "/v1/contacts/count", other, ""); r.status != http.StatusOK {
		t.Errorf("another key of the same company: %d; want 200 (each key has its own bucket)", r.status)
	}
}

func TestRateLimiterBucket(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	l := newRateLimiter(10)
	l.now = func() time.Time { return now }
	k := limitKey{1, "rdx_a"}
	for i := range 20 {
		if ok, left, _, _ := l.take(k); !ok || left != 19-i {
			t.Fatalf("request %d of the burst: ok %v, left %d; want ok, %d left", i+1, ok, left, 19-i)
		}
	}
	ok, left, full, wait := l.take(k)
	if ok || left != 0 || wait != 100*time.Millisecond || full != 2*time.Second {
		t.Errorf("after the burst: ok %v left %d full %v wait %v; want refused, 0, 2s, 100ms", ok, left, full, wait)
	}
	if ok, _, _, _ := l.take(limitKey{1, "rdx_b"}); !ok {
		t.Error("another key was refused")
	}
	now = now.Add(100 * time.Millisecond)
	if ok, _, _, _ := l.take(k); !ok {
		t.Error("after 100ms (one token at 10/s): refused")
	}
	now = now.Add(time.Minute)
	l.take(limitKey{2, "rdx_c"})
	if len(l.buckets) != 1 {
		t.Errorf("after a minute idle: %d buckets; want the idle ones dropped, 1 left", len(l.buckets))
	}
	if newRateLimiter(0) != nil {
		t.Error("rate 0 made a limiter; want none (unlimited)")
	}
}

func TestFailedAuthenticationIsLimitedPerAddress(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	// A server of its own: this test exhausts its address's allowance for a minute.
	srv := httptest.NewServer(newHandler(testEnv.st, slog.New(slog.NewJSONHandler(io.Discard, nil))))
	defer srv.Close()
	for i := range defaultAuthFailureLimit {
		r := callAt(t, nil, srv.URL, "GET", "/v1/contacts", "rdx_guess"+strconv.Itoa(i), "")
		if r.status != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d; want 401", i+1, r.status)
		}
	}
	for _, key := range []string{"rdx_one_more_guess", c.key} {
		r := callAt(t, nil, srv.URL, "GET", "/v1/contacts", key, "")
		wantProblem(t, r, http.StatusTooManyRequests, "rate_limited")
		if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 || ra > 60 {
			t.Errorf("Retry-After %q; want 1 to 60 seconds", r.header.Get("Retry-After"))
		}
	}
	if r := callAt(t, nil, srv.URL, "GET", "/healthz", "", ""); r.status != http.StatusOK {
		t.Errorf("GET /healthz from the limited address = %d; want 200 (needs no key)", r.status)
	}
}

func TestFailureLimiterWindow(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	l := newFailureLimiter(3)
	l.now = func() time.Time { return now }
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	for range 3 {
		if l.blocked(a) != 0 {
			t.Fatal("blocked before 3 failures")
		}
		l.fail(a)
		now = now.Add(10 * time.Second)
	}
	if got := l.blocked(a); got != 30*time.Second {
		t.Errorf("after 3 failures in 30s: blocked for %v; want 30s (until the first is a minute old)", got)
	}
	if l.blocked(b) != 0 {
		t.Error("another address is blocked")
	}
	now = now.Add(30 * time.Second)
	if got := l.blocked(a); got != 0 {
		t.Errorf("a minute after the first failure: blocked for %v; want free", got)
	}
	now = now.Add(2 * time.Minute)
	l.fail(b)
	if len(l.recent) != 1 {
		t.Errorf("%d addresses tracked; want the stale one dropped", len(l.recent))
	}
}

func TestClientAddrIgnoresForwardedForAndWidensIPv6(t *testing.T) {
	t.Parallel()
	for remote, want := range map[string]string{
		"192.0.2.7:5555":                   "192.0.2.7",
		"[::ffff:192.0.2.7]:5555":          "192.0.2.7",
		"[2001:db8:1:2:aaaa::1]:5555":      "2001:db8:1:2::",
		"[2001:db8:1:2:bbbb:cccc::9]:5555": "2001:db8:1:2::",
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-For", "203.0.113.9")
		if got := clientAddr(r).String(); got != want {
			t.Errorf("clientAddr(%s) = %s; want %s", remote, got, want)
		}
	}
}

func TestLongQueryStringsAre400NotWork(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	tests := []struct {
		name, path, code string
	}{
		{"10,000 expand[] values", "/v1/contacts?" + strings.Repeat("expand[]=organization&", 10_000), "invalid_parameter"},
		{"10,000 short expand[] values", "/v1/contacts/1?" + strings.Repeat("expand[]=x&", 10_000), "invalid_parameter"},
		{"17 expand[] values", "/v1/contacts?" + strings.Repeat("expand[]=organization&", 17), "invalid_expand"},
		{"a 100 KB q", "/v1/contacts?q=" + strings.Repeat("a", 100_000), "invalid_parameter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantProblem(t, call(t, "GET", tt.path, c.key, ""), http.StatusBadRequest, tt.code)
		})
	}
}

// countingReader yields n bytes of a JSON string body and counts what was taken from it.
// The transport may still be reading it after the answer came back, hence the atomic.
type countingReader struct {
	n    int64
	read atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	read := c.read.Load()
	if read >= c.n {
		return 0, io.EOF
	}
	k := min(int64(len(p)), c.n-read)
	for i := range p[:k] {
		p[i] = 'a'
	}
	c.read.Add(k)
	return int(k), nil
}

func TestHugeBodyIs413WithoutBeingRead(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	const size = 100 << 20
	for _, chunked := range []bool{false, true} {
		t.Run("chunked="+strconv.FormatBool(chunked), func(t *testing.T) {
			body := &countingReader{n: size}
			req, _ := http.NewRequest("POST", testEnv.baseURL+"/v1/contacts", io.MultiReader(strings.NewReader(`{"name":"`), body))
			if !chunked {
				req.ContentLength = size + 9
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("x-api-key", c.key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			wantProblem(t, response{status: resp.StatusCode, header: resp.Header, body: b}, http.StatusRequestEntityTooLarge, "body_too_large")
			// What the client managed to send sits in socket buffers; the server stopped at 1 MiB.
			if body.read.Load() > 32<<20 {
				t.Errorf("the client sent %d MiB of a 100 MiB body; want the server to stop reading early", body.read.Load()>>20)
			}
			t.Logf("sent %d KiB of 100 MiB", body.read.Load()>>10)
		})
	}
	if n := contactCount(t, c); n != 0 {
		t.Errorf("%d contacts after the refused bodies; want 0", n)
	}
}

// blackHole is a TCP listener that accepts connections and never answers: a database that hangs.
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

func TestHungDatabaseIs503AtTheDeadlineAndAClientGoneIsNo500(t *testing.T) {
	t.Parallel()
	st, err := openStore(dbConfig{url: "postgres://postgres@" + blackHole(t) + "/x?sslmode=disable", maxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var logBuf syncBuffer
	lim := defaultLimits
	lim.requestTimeout = 300 * time.Millisecond
	srv := httptest.NewServer(newHandlerWith(st, slog.New(slog.NewJSONHandler(&logBuf, nil)), lim))
	defer srv.Close()

	r := callAt(t, nil, srv.URL, "GET", "/v1/contacts", "rdx_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "")
	wantProblem(t, r, http.StatusServiceUnavailable, "timeout")
	if r.header.Get("Retry-After") == "" {
		t.Error("503 at the deadline without Retry-After")
	}

	// Without a server deadline, a client that gives up leaves a request the server answers to nobody.
	srv2 := httptest.NewServer(newHandler(st, slog.New(slog.NewJSONHandler(&logBuf, nil))))
	defer srv2.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv2.URL+"/v1/contacts", nil)
	req.Header.Set("x-api-key", "rdx_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB")
	req.Header.Set("X-Request-Id", "gone-"+randomHex(4))
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("the request finished; want the client's deadline to cut it")
	}
	id := req.Header.Get("X-Request-Id")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logBuf.String(), id) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	logged := logBuf.String()
	if !strings.Contains(logged, id) {
		t.Fatalf("no access log line for the abandoned request %s", id)
	}
	if strings.Contains(logged, `"level":"ERROR"`) || strings.Contains(logged, `"status":500`) {
		t.Errorf("a hung database or a client gone away was logged as an error or a 500:\n%s", logged)
	}
}
