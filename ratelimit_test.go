package main

import (
	"encoding/binary"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The shared test server's limits are far above what the suite sends; these tests start servers of
// their own with the limits they test.

// guessKeys sends n made-up keys to the server at base, the i-th with X-Forwarded-For xff(i) (""
// for none), and fails the test unless the first limit are 401 and the rest 429.
func guessKeys(t *testing.T, base string, n, limit int, xff func(i int) string) {
	t.Helper()
	for i := range n {
		want := http.StatusUnauthorized
		if i >= limit {
			want = http.StatusTooManyRequests
		}
		if r := callAt(t, nil, base, "GET", "/v1/contacts", "rdx_guess"+strconv.Itoa(i), "", "X-Forwarded-For", xff(i)); r.status != want {
			t.Fatalf("bad key %d (X-Forwarded-For %q): %d; want %d", i+1, xff(i), r.status, want)
		}
	}
}

// noXFF sends no X-Forwarded-For.
func noXFF(int) string { return "" }

func TestRateLimitHeadersAnd429PerKey(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	other := addKey(t, c.id, 0)
	base := startServer(t, map[string]string{"ROLODEX_RATE_LIMIT": "1"}, &syncBuffer{})
	// A burst of 2 lets two requests through; the bucket then refills at one a second, so of twelve
	// quick requests most are refused. Every answer to a key, whatever its status, reports the limit.
	var refused []response
	for i := range 12 {
		path := []string{"/v1/contacts/count", "/v1/contacts/0", "/v1/nope"}[i%3]
		r := callAt(t, nil, base, "GET", path, c.key, "")
		if p, rl := r.header.Get("RateLimit-Policy"), r.header.Get("RateLimit"); p != `"per-key";q=2;w=2` ||
			!strings.HasPrefix(rl, `"per-key";r=`) || !strings.Contains(rl, ";t=") {
			t.Errorf("GET %s = %d: RateLimit-Policy %q, RateLimit %q; want \"per-key\";q=2;w=2 and \"per-key\";r=N;t=S", path, r.status, p, rl)
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
	if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 || !strings.HasPrefix(r.header.Get("RateLimit"), `"per-key";r=0;t=`) {
		t.Errorf("429 with Retry-After %q, RateLimit %q; want whole seconds, at least 1, and r=0", r.header.Get("Retry-After"), r.header.Get("RateLimit"))
	}
	if r := callAt(t, nil, base, "GET", "/v1/contacts/count", other, ""); r.status != http.StatusOK {
		t.Errorf("another key of the same company: %d; want 200 (each key has its own bucket)", r.status)
	}
}

func TestRateLimiterBucket(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	l := newRateLimiter(10)
	l.now = func() time.Time { return now }
	k := limitKey{1, 1}
	for i := range 20 {
		if ok, left, _, _ := l.take(k); !ok || left != 19-i {
			t.Fatalf("request %d of the burst: ok %v, left %d; want ok, %d left", i+1, ok, left, 19-i)
		}
	}
	ok, left, full, wait := l.take(k)
	if ok || left != 0 || wait != 100*time.Millisecond || full != 2*time.Second {
		t.Errorf("after the burst: ok %v left %d full %v wait %v; want refused, 0, 2s, 100ms", ok, left, full, wait)
	}
	if ok, _, _, _ := l.take(limitKey{1, 2}); !ok {
		t.Error("another key was refused")
	}
	now = now.Add(100 * time.Millisecond)
	if ok, _, _, _ := l.take(k); !ok {
		t.Error("after 100ms (one token at 10/s): refused")
	}
	now = now.Add(time.Minute)
	l.take(limitKey{2, 3})
	if len(l.buckets) != 1 {
		t.Errorf("after a minute idle: %d buckets; want the idle ones dropped, 1 left", len(l.buckets))
	}
	if newRateLimiter(0) != nil || newRateLimiter(defaultRateLimit).policy != `"per-key";q=200;w=2` {
		t.Error("rate 0 made a limiter, or the default is not 100/s in bursts of 200; want none, and it")
	}
}

// Failed authentication is limited per address: after 3 failures a bad key, or none, is a 429; a
// valid key is still served, and /healthz needs no key.
func TestValidKeysAreServedFromALimitedAddress(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	revoked := revokedKey(t, c.id)
	base := startServer(t, map[string]string{"ROLODEX_AUTH_FAILURE_LIMIT": "3"}, &syncBuffer{})
	guessKeys(t, base, 20, 3, noXFF)
	// The address is limited; this server has never seen the company's key.
	for _, key := range []string{c.key, c.key, "rdx_one_more_guess", revoked, ""} {
		r := callAt(t, nil, base, "GET", "/v1/contacts/count", key, "")
		if key == c.key {
			wantStatus(t, r, http.StatusOK)
			continue
		}
		wantProblem(t, r, http.StatusTooManyRequests, "rate_limited")
		if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 || ra > 60 {
			t.Errorf("Retry-After %q; want 1 to 60 seconds", r.header.Get("Retry-After"))
		}
	}
	wantStatus(t, callAt(t, nil, base, "GET", "/healthz", "", ""), http.StatusOK)
}

// From a limited address, a key made or rolled a moment ago on another server, or by the CLI's
// store calls, is served at once (API.md 8); made-up keys are still 429.
func TestKeysMadeElsewhereAreServedAtOnceFromALimitedAddress(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	base := startServer(t, map[string]string{"ROLODEX_AUTH_FAILURE_LIMIT": "3"}, &syncBuffer{})
	guessKeys(t, base, 6, 3, noXFF) // limited, and its known keys loaded
	made := addKey(t, c.id, 0)
	elsewhere := makeKey(t, c.key, "contacts:read") // on the suite's server
	rolled := decode[newKey](t, wantStatus(t, call(t, "POST", fmt.Sprintf("/v1/apiKeys/%d/roll", elsewhere.ID), c.key, `{"expiresIn": 60}`), http.StatusCreated).body)
	for _, k := range []struct{ what, key string }{{"made", made}, {"made on another server", *elsewhere.Key}, {"rolled on another server", *rolled.Key}} {
		if r := callAt(t, nil, base, "GET", "/v1/contacts/count", k.key, ""); r.status != http.StatusOK {
			t.Errorf("a key %s a moment ago, from a limited address: %d %s; want 200", k.what, r.status, r.body)
		}
	}
	for range 3 {
		wantProblem(t, callAt(t, nil, base, "GET", "/v1/contacts/count", "rdx_"+randomHex(24), ""), http.StatusTooManyRequests, "rate_limited")
	}
}

func TestAFloodOfKeysFromALimitedAddressHasBoundedLookups(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	proxy, dbURL := newDBProxy(t, testEnv.dbURL)
	// One pooled connection, which pings the database before a query only after an idle second, and
	// no webhook worker asking for deliveries.
	base := startServer(t, map[string]string{"DATABASE_URL": dbURL, "ROLODEX_DB_MAX_CONNS": "1", "ROLODEX_AUTH_FAILURE_LIMIT": "3",
		"ROLODEX_WEBHOOK_SLOTS": "0"}, &syncBuffer{})
	wantStatus(t, callAt(t, nil, base, "GET", "/v1/contacts/count", c.key, ""), http.StatusOK)
	guessKeys(t, base, 3, 3, noXFF)
	// 256 distinct random keys from 16 connections: none is looked up, and the refreshes of the
	// known keys they wait for are at least knownRefresh apart, each shared by all that wait.
	const n, workers = 256, 16
	statuses := make(chan int, n)
	before, start := proxy.queries.Load(), time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n / workers {
				r, err := send(nil, base, "GET", "/v1/contacts", "rdx_"+randomHex(24), "")
				if err != nil {
					r.status = 0
				}
				statuses <- r.status
			}
		}()
	}
	wg.Wait()
	lookups, secs := proxy.queries.Load()-before, time.Since(start).Seconds()
	close(statuses)
	for s := range statuses {
		if s != http.StatusTooManyRequests {
			t.Fatalf("a random key from the limited address: %d; want 429", s)
		}
	}
	// One refresh of the known keys a knownRefresh, and a ping before a query after an idle second.
	if bound := 2 + secs/knownRefresh.Seconds() + secs; float64(lookups) > bound {
		t.Errorf("%d random keys in %.1fs: %d statements reached the database; want at most %.0f", n, secs, lookups, bound)
	}
	wantStatus(t, callAt(t, nil, base, "GET", "/v1/contacts/count", c.key, ""), http.StatusOK)
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
	if l.lru.Len() != 1 || len(l.addrs) != 1 {
		t.Errorf("%d addresses tracked; want the stale one dropped", l.lru.Len())
	}
	if off := newFailureLimiter(0); off != nil || off.blocked(a) != 0 {
		t.Error("a limit of 0 made a limiter, or blocks; want none (unlimited)")
	}
}

func TestFailureLimiterForgetsTheLeastRecentlyFailedAddress(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	l := newFailureLimiter(2)
	l.now = func() time.Time { return now }
	l.size = 3
	var addr [6]netip.Addr
	for i := range addr {
		addr[i] = netip.AddrFrom4([4]byte{192, 0, 2, byte(i)})
	}
	failTwice := func(a netip.Addr) {
		for range 2 {
			now = now.Add(time.Second)
			l.fail(a)
		}
	}
	// Full with 0, 1 and 2, all blocked; 0 fails again, so 1 is now the least recent.
	failTwice(addr[0])
	failTwice(addr[1])
	failTwice(addr[2])
	failTwice(addr[0])
	for _, step := range []struct {
		arrives int
		blocked [6]bool
	}{
		{3, [6]bool{true, false, true, true}},               // 1 goes
		{4, [6]bool{true, false, false, true, true}},        // 2 goes
		{5, [6]bool{false, false, false, true, true, true}}, // 0 goes
	} {
		failTwice(addr[step.arrives])
		for i, a := range addr {
			if got := l.blocked(a) > 0; got != step.blocked[i] {
				t.Errorf("after %v failed: %v blocked = %v; want %v", addr[step.arrives], a, got, step.blocked[i])
			}
		}
		if l.lru.Len() != 3 || len(l.addrs) != 3 {
			t.Errorf("after %v failed: %d addresses tracked (map %d); want the 3 most recent", addr[step.arrives], l.lru.Len(), len(l.addrs))
		}
	}
}

// The failure limiter's whole state stays under 8 MiB (API.md 8) however many addresses fail, each
// still limited while it is among the maxTrackedAddrs most recent. Not parallel: it weighs the heap.
func TestFailureLimiterMemoryIsBounded(t *testing.T) {
	addr := func(i int) netip.Addr { // IPv4 and IPv6 /64s, as clientAddr gives them
		if i%2 == 0 {
			return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		}
		var b [16]byte
		b[0], b[1] = 0x20, 0x01
		binary.BigEndian.PutUint32(b[4:], uint32(i))
		return netip.AddrFrom16(b)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	now := time.Unix(1000, 0)
	l := newFailureLimiter(defaultAuthFailureLimit)
	l.now = func() time.Time { return now }
	const n = maxTrackedAddrs + maxTrackedAddrs/8
	for i := range n {
		for range l.max {
			l.fail(addr(i))
		}
		now = now.Add(time.Microsecond) // all within the window: none is forgotten for its age
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	used := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d addresses tracked in %d bytes, %d an address", len(l.addrs), used, used/int64(len(l.addrs)))
	if used > 8<<20 {
		t.Errorf("%d addresses failed: the limiter holds %.1f MiB; want under 8 MiB", n, float64(used)/(1<<20))
	}
	if len(l.addrs) != maxTrackedAddrs || l.lru.Len() != maxTrackedAddrs {
		t.Errorf("%d addresses failed: %d tracked (list %d); want the %d most recent", n, len(l.addrs), l.lru.Len(), maxTrackedAddrs)
	}
	for _, i := range []int{n - 1, n - maxTrackedAddrs} {
		if l.blocked(addr(i)) == 0 {
			t.Errorf("address %d of %d (%v), among the most recent: not blocked", i, n, addr(i))
		}
	}
	if i := n - maxTrackedAddrs - 1; l.blocked(addr(i)) != 0 {
		t.Errorf("address %d of %d (%v), the least recent: still blocked; want it forgotten", i, n, addr(i))
	}
	runtime.KeepAlive(l)
}

// clientAddr is the peer, an IPv6 one widened to its /64, unless the peer is a trusted proxy: then
// X-Forwarded-For names the client.
func TestClientAddrBelievesOnlyTrustedProxies(t *testing.T) {
	t.Parallel()
	trusted := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8")}
	for _, tc := range []struct {
		name, remote string
		xff          []string
		want         string
	}{
		{"with no trusted proxies X-Forwarded-For is ignored", "127.0.0.1:1", []string{"203.0.113.9"}, "127.0.0.1"},
		{"an IPv4-mapped peer is IPv4", "[::ffff:192.0.2.7]:5555", []string{"203.0.113.9"}, "192.0.2.7"},
		{"an IPv6 peer is its /64", "[2001:db8:1:2:bbbb:cccc::9]:5555", []string{"203.0.113.9"}, "2001:db8:1:2::"},
		{"an untrusted peer is the client", "192.0.2.7:1", []string{"203.0.113.9"}, "192.0.2.7"},
		{"a trusted peer without X-Forwarded-For is the client", "127.0.0.1:1", nil, "127.0.0.1"},
		{"a trusted peer names the client", "127.0.0.1:1", []string{"203.0.113.9"}, "203.0.113.9"},
		{"entries left of the first untrusted one are ignored", "127.0.0.1:1", []string{"198.51.100.1, 203.0.113.9"}, "203.0.113.9"},
		{"trusted proxies in the list are skipped", "127.0.0.1:1", []string{"203.0.113.9, 10.0.0.5 ,10.1.2.3"}, "203.0.113.9"},
		{"header lines are one list", "127.0.0.1:1", []string{"198.51.100.1, 203.0.113.9", "10.0.0.5"}, "203.0.113.9"},
		{"a bad entry ends the walk", "127.0.0.1:1", []string{"203.0.113.9, nonsense, 10.0.0.5"}, "10.0.0.5"},
		{"an address with a port is a bad entry", "127.0.0.1:1", []string{"203.0.113.9:4444"}, "127.0.0.1"},
		{"only trusted proxies: the left-most", "[::ffff:127.0.0.1]:1", []string{"10.0.0.5, 10.0.0.6"}, "10.0.0.5"},
		{"an IPv6 client is its /64", "127.0.0.1:1", []string{"2001:db8:1:2:aaaa::1"}, "2001:db8:1:2::"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		for _, v := range tc.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		proxies := trusted
		if strings.HasPrefix(tc.name, "with no trusted proxies") {
			proxies = nil
		}
		if got := clientAddr(r, proxies).String(); got != tc.want {
			t.Errorf("%s: clientAddr(%s, X-Forwarded-For %q) = %s; want %s", tc.name, tc.remote, tc.xff, got, tc.want)
		}
	}
}

func TestFailureLimitBelievesForwardedForOnlyFromTrustedProxies(t *testing.T) {
	t.Parallel()
	const limit = "ROLODEX_AUTH_FAILURE_LIMIT"
	guess := func(base, xff string) int {
		return callAt(t, nil, base, "GET", "/v1/contacts", "rdx_guess", "", "X-Forwarded-For", xff).status
	}
	t.Run("by default X-Forwarded-For is ignored", func(t *testing.T) {
		t.Parallel()
		base := startServer(t, map[string]string{limit: "3"}, &syncBuffer{})
		guessKeys(t, base, 4, 3, func(i int) string { return "203.0.113." + strconv.Itoa(i) })
	})
	t.Run("behind a trusted proxy each client has its own limit", func(t *testing.T) {
		t.Parallel()
		base := startServer(t, map[string]string{limit: "3", "ROLODEX_TRUSTED_PROXIES": "10.0.0.0/8, 127.0.0.0/8"}, &syncBuffer{})
		guessKeys(t, base, 3, 3, func(int) string { return "203.0.113.1" })
		for xff, want := range map[string]int{
			"203.0.113.1":               http.StatusTooManyRequests, // limited
			"198.51.100.7, 203.0.113.1": http.StatusTooManyRequests, // a forged entry on the left changes nothing
			"203.0.113.1, 10.0.0.5":     http.StatusTooManyRequests, // through a second trusted proxy
			"203.0.113.2":               http.StatusUnauthorized,    // another client
			"203.0.113.1, 203.0.113.3":  http.StatusUnauthorized,    // the right-most untrusted entry is the client
		} {
			if got := guess(base, xff); got != want {
				t.Errorf("bad key with X-Forwarded-For %q: %d; want %d", xff, got, want)
			}
		}
	})
}
