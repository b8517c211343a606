package main

import (
	"context"
	"crypto/sha256"
	"net/http/httptest"
	"testing"
	"time"
)

// Go benchmarks of the per-request hot paths besides encoding (json_test.go has those): the key
// lookup every keyed request makes. Cursor decoding and list query building get theirs with issue 6,
// which rewrites both (signed cursors, sort and filters).

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
