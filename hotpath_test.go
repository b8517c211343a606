package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Go benchmarks of the per-request hot paths besides encoding (json_test.go has those): the key
// lookup every keyed request makes, the middleware chain around every handler, and a list's query
// building and cursor decoding.

// cachedAuthenticator returns an authenticator that has already resolved key: no database is asked.
func cachedAuthenticator(key string) *authenticator {
	a := newAuthenticator(nil)
	a.cache[sha256.Sum256([]byte(key))] = cachedKey{t: tenant{companyID: 1, userID: 1}, expires: time.Now().Add(time.Hour)}
	return a
}

const benchKey = "rdx_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

// Not parallel: AllocsPerRun counts every allocation of the process.
func TestResolveCachedKeyDoesNotAllocate(t *testing.T) {
	a := cachedAuthenticator(benchKey)
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := a.resolve(ctx, benchKey); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("resolve of a cached key: %v allocations per run; want 0", allocs)
	}
}

func BenchmarkResolveCachedKey(b *testing.B) {
	a := cachedAuthenticator(benchKey)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.resolve(ctx, benchKey); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResolveCachedKeyParallel shows the cache's lock under every core at once.
func BenchmarkResolveCachedKeyParallel(b *testing.B) {
	a := cachedAuthenticator(benchKey)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := a.resolve(ctx, benchKey); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAuthMiddleware is a keyed request through withAuth with a cached key, to an empty handler.
func BenchmarkAuthMiddleware(b *testing.B) {
	h := withAuth(cachedAuthenticator(benchKey), nil, nil, handleHealthz())
	req := httptest.NewRequest("GET", "/v1/contacts/1", nil)
	req.Header.Set("x-api-key", benchKey)
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, req)
	}
}

func BenchmarkAppendStringNoEscape(b *testing.B) {
	s := "ana.perez.1042@example.com"
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		buf = appendString(buf[:0], s)
	}
	b.SetBytes(int64(len(s)))
}

// FuzzAppendTime holds the hand-written appendTime to time's own formatting of the API's layout.
func FuzzAppendTime(f *testing.F) {
	for _, s := range []int64{0, -62135596800, 253402300799, 253402300800, 1795685400, -1, 951782400} {
		f.Add(s, int64(123_456_789))
	}
	f.Fuzz(func(t *testing.T, sec, nsec int64) {
		tm := time.Unix(sec, nsec%1e9)
		want := `"` + tm.UTC().Format("2006-01-02T15:04:05.000Z07:00") + `"`
		if got := string(appendTime(nil, tm)); got != want {
			t.Errorf("appendTime(%v) = %s; want %s", tm, got, want)
		}
	})
}

// benchWorld is a company with 100 contacts that point at users, organizations, stages and a
// country, served in process (no HTTP client, no socket): what one request costs the server and
// the test database, for -benchmem and pprof.
type benchWorld struct {
	h     http.Handler
	key   string
	first int64 // the first of the company's contacts
}

func newBenchWorld(b *testing.B) benchWorld {
	b.Helper()
	ctx := context.Background()
	nc, err := testEnv.st.createCompany(ctx, "Bench "+b.Name())
	if err != nil {
		b.Fatal(err)
	}
	const seed = `
		WITH u AS (INSERT INTO users (company_id, name) SELECT $1, 'User ' || i FROM generate_series(1, 5) i RETURNING id),
		o AS (INSERT INTO organizations (company_id, name) SELECT $1, 'Org ' || i FROM generate_series(1, 20) i RETURNING id)
		INSERT INTO contacts (company_id, name, surname, email, phone, city, country_id, stage_id,
			organization_id, assigned_to_id, user_creator_id)
		SELECT $1, 'Ana ' || i, 'Pérez', 'ana' || i || '@example.com', '+34 600 000 000', 'Madrid', 724,
			(SELECT min(id) FROM stages WHERE company_id = $1 AND board_id IS NULL),
			(SELECT min(id) + i % 20 FROM o), (SELECT min(id) + i % 5 FROM u), $2
		FROM generate_series(1, 100) i`
	if _, err := testEnv.st.db.ExecContext(ctx, seed, nc.CompanyID, nc.UserID); err != nil {
		b.Fatal(err)
	}
	// No rate limit, as in make bench; the request deadline and the logger of `rolodex serve`.
	log := newLogger(io.Discard)
	w := benchWorld{h: newHandlerWith(testEnv.st, log, limits{requestTimeout: 10 * time.Second}), key: nc.APIKey}
	err = testEnv.st.db.QueryRowContext(ctx, `SELECT min(id) FROM contacts WHERE company_id = $1`, nc.CompanyID).Scan(&w.first)
	if err != nil {
		b.Fatal(err)
	}
	return w
}

const benchAll5 = "expand[]=organization&expand[]=country&expand[]=stage&expand[]=assignedTo&expand[]=userCreator"

// BenchmarkServe runs the load benchmark's read scenarios in process, one request at a time.
func BenchmarkServe(b *testing.B) {
	w := newBenchWorld(b)
	for _, bc := range []struct{ name, path string }{
		{"retrieve", "/v1/contacts/%d"},
		{"retrieve+5", "/v1/contacts/%d?" + benchAll5},
		{"list100", "/v1/contacts?limit=100"},
		{"list100+5", "/v1/contacts?limit=100&" + benchAll5},
	} {
		b.Run(bc.name, func(b *testing.B) {
			i := int64(0)
			b.ReportAllocs()
			for b.Loop() {
				path := bc.path
				if strings.Contains(path, "%d") {
					path = fmt.Sprintf(path, w.first+i%100)
				}
				i++
				req := httptest.NewRequest("GET", path, nil)
				req.Header.Set("x-api-key", w.key)
				rec := httptest.NewRecorder()
				w.h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("GET %s = %d; want 200: %s", path, rec.Code, rec.Body)
				}
			}
		})
	}
}

// discardWriter is a ResponseWriter that keeps only its header, cleared between requests: what the
// middleware costs without the cost of a recorder.
type discardWriter struct{ h http.Header }

func (d discardWriter) Header() http.Header         { return d.h }
func (d discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d discardWriter) WriteHeader(int)             {}

// newMiddlewareBench is a keyed GET through the whole middleware chain of `rolodex serve` (no rate
// limit, as in make bench; the request deadline; the access log to /dev/null, a real write(2)) to a
// handler that answers a small static body: the server's per-request cost outside the handlers.
func newMiddlewareBench(b *testing.B) (http.Handler, *http.Request) {
	b.Helper()
	nc, err := testEnv.st.createCompany(context.Background(), "Bench "+b.Name())
	if err != nil {
		b.Fatal(err)
	}
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	log := newLogger(devNull)
	b.Cleanup(func() {
		flushLog(log)
		devNull.Close()
	})
	mux := http.NewServeMux()
	body := []byte(`{"id":"1042","name":"Ana"}` + "\n")
	mux.Handle("GET /v1/static/{id}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, body)
	}))
	h := withMiddleware(withPattern(mux), testEnv.st, log, limits{requestTimeout: 10 * time.Second})
	req := httptest.NewRequest("GET", "/v1/static/7", nil)
	req.RemoteAddr = "127.0.0.1:50000"
	req.Header.Set("x-api-key", nc.APIKey)
	w := discardWriter{h: http.Header{}}
	h.ServeHTTP(w, req) // resolves the key into the cache
	if got := w.h.Get("X-Request-Id"); got == "" {
		b.Fatalf("no X-Request-Id after the first request: %v", w.h)
	}
	return h, req
}

func BenchmarkMiddleware(b *testing.B) {
	h, req := newMiddlewareBench(b)
	w := discardWriter{h: http.Header{}}
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, req)
	}
}

// reportCPU reports the CPU time the whole process spent per operation (user and system, every
// goroutine: the log's writer and the GC too), which is steadier than ns/op on a shared machine and
// counts what a request costs the server rather than how long it waits. Call the result at the end.
func reportCPU(b *testing.B) func() {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	return func() { b.ReportMetric(float64(cpu()-start)/float64(b.N), "cpu-ns/op") }
}

// BenchmarkMiddlewareParallel is BenchmarkMiddleware on every core at once, as under load.
func BenchmarkMiddlewareParallel(b *testing.B) {
	h, req := newMiddlewareBench(b)
	b.ReportAllocs()
	defer reportCPU(b)()
	b.RunParallel(func(pb *testing.PB) {
		w := discardWriter{h: http.Header{}}
		for pb.Next() {
			clear(w.h)
			h.ServeHTTP(w, req)
		}
	})
}

// benchListQuery is a list request with a sort, three filters and a page size: what
// BenchmarkListQuery builds and BenchmarkCursorDecode pages.
var benchListQuery = url.Values{"sort": {"-updatedAt"}, "limit": {"100"}, "stageId": {"1,2,3"},
	"withSales": {"true"}, "updatedAt[gte]": {"2026-05-01T00:00:00Z"}}

// BenchmarkListQuery: a list's parameters parsed and its statement built (list.go), per request.
func BenchmarkListQuery(b *testing.B) {
	base := `SELECT ` + contactColumns + ` FROM contacts WHERE company_id = $1`
	b.ReportAllocs()
	for b.Loop() {
		lq, aerr := contactLists.parse(benchListQuery)
		if aerr != nil {
			b.Fatal(aerr)
		}
		if q, args := lq.selectSQL(base, 1); q == "" || len(args) < 4 {
			b.Fatalf("selectSQL = %q, %d args", q, len(args))
		}
	}
}

// BenchmarkCursorDecode: a next-page cursor of that list read back (signature, scope, sort key).
func BenchmarkCursorDecode(b *testing.B) {
	key := make([]byte, 32)
	const scope = "/v1/contacts\n1"
	lq, aerr := contactLists.parse(benchListQuery)
	if aerr != nil {
		b.Fatal(aerr)
	}
	c := lq.cursor(key, scope, 123456, timeKey(time.Date(2026, 6, 1, 12, 0, 0, 123e6, time.UTC)), false)
	b.ReportAllocs()
	for b.Loop() {
		if aerr := lq.readCursor(c, key, scope); aerr != nil {
			b.Fatal(aerr)
		}
	}
}
