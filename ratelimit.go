package main

import (
	"container/list"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Rate limits: a token bucket per API key, reported in the RateLimit-Policy and RateLimit headers of
// draft-ietf-httpapi-ratelimit-headers-11 (structured fields), and a cap on failed authentications
// per client address so that keys cannot be guessed at speed.

const (
	defaultRateLimit        = 100 // requests per second per API key
	defaultAuthFailureLimit = 30  // failed authentications per minute per client address
)

// limitKey names one API key: its primary key.
type limitKey struct {
	companyID int64
	keyID     int64
}

// bucket is one key's token bucket as of last. The zero bucket, refilling since the zero time, is
// full: it is a new key's.
type bucket struct {
	tokens float64
	last   time.Time
}

// rateLimiter is a token bucket per API key: rate tokens a second, holding at most burst (2 × rate).
// A bucket that has refilled is the same as a new one, so idle buckets are dropped and memory stays
// bounded by the keys active in the last few seconds.
type rateLimiter struct {
	rate   float64 // tokens a second
	burst  float64 // the most tokens a bucket holds
	policy string  // the RateLimit-Policy header's value
	now    func() time.Time

	mu        sync.Mutex
	buckets   map[limitKey]bucket
	lastSweep time.Time
}

// newRateLimiter limits each key to perSecond requests a second in bursts of 2×perSecond; 0 means no
// limit (nil).
func newRateLimiter(perSecond int) *rateLimiter {
	if perSecond <= 0 {
		return nil
	}
	return &rateLimiter{
		rate:  float64(perSecond),
		burst: float64(2 * perSecond),
		// The bucket holds q requests and refills from empty in w seconds: 2, as burst is 2 × rate.
		policy:  fmt.Sprintf(`"per-key";q=%d;w=2`, 2*perSecond),
		now:     time.Now,
		buckets: make(map[limitKey]bucket),
	}
}

// take spends one token of k's bucket. It reports whether there was one, the whole tokens left, how
// long until the bucket is full again, and (when refused) how long until the next token.
func (l *rateLimiter) take(k limitKey) (ok bool, left int, full, wait time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	b := l.buckets[k]
	b.tokens = min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	b.last = now
	ok = b.tokens >= 1
	if ok {
		b.tokens--
	} else {
		wait = l.seconds(1 - b.tokens)
	}
	l.buckets[k] = b
	return ok, int(b.tokens), l.seconds(l.burst - b.tokens), wait
}

// seconds is how long the bucket takes to gain n tokens.
func (l *rateLimiter) seconds(n float64) time.Duration {
	return time.Duration(n / l.rate * float64(time.Second))
}

// sweep drops, at most once a second, the buckets that have had time to fill up again.
func (l *rateLimiter) sweep(now time.Time) {
	if now.Sub(l.lastSweep) < time.Second {
		return
	}
	l.lastSweep = now
	refill := l.seconds(l.burst)
	for k, b := range l.buckets {
		if now.Sub(b.last) > refill {
			delete(l.buckets, k)
		}
	}
}

// withRateLimit spends a token of the request's API key (known after withAuth) and answers 429 when
// there is none. Every keyed answer carries the RateLimit-Policy and RateLimit headers.
func withRateLimit(l *rateLimiter, next http.Handler) http.Handler {
	if l == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ri := requestInfo(r.Context())
		if ri.companyID == 0 { // not a keyed path
			next.ServeHTTP(w, r)
			return
		}
		ok, left, full, wait := l.take(limitKey{ri.companyID, ri.keyID})
		w.Header().Set("RateLimit-Policy", l.policy)
		w.Header().Set("RateLimit", fmt.Sprintf(`"per-key";r=%d;t=%d`, left, int(math.Ceil(full.Seconds()))))
		if !ok {
			writeTooMany(w, r, wait, "This API key sent more requests than its rate limit allows.")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// writeTooMany answers 429 with a Retry-After of the whole seconds in wait (at least 1).
func writeTooMany(w http.ResponseWriter, r *http.Request, wait time.Duration, detail string) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
	writeProblem(w, r, &apiError{Status: http.StatusTooManyRequests, Code: "rate_limited", Detail: detail})
}

// maxTrackedAddrs bounds the failure limiter's memory: an address costs it about 120 bytes
// (TestFailureLimiterMemoryIsBounded), so its whole state stays under 8 MiB at any load. Beyond
// it the least recently failed address is forgotten.
const maxTrackedAddrs = 50_000

// failureLimiter allows max failed authentications per client address in a window opened by its first
// failure, then refuses it until the window ends. (Across a window's end an address may fail 2×max
// times in a short while, as with any fixed-size counter: it costs a few bytes, not max timestamps.)
type failureLimiter struct {
	max    int // failures an address may have in a window
	size   int // addresses tracked at most (maxTrackedAddrs)
	window time.Duration
	now    func() time.Time

	mu    sync.Mutex
	addrs map[[16]byte]*list.Element // of *failures, in lru
	lru   *list.List                 // the most recently failed address first
}

// failures are an address's failures in its window.
type failures struct {
	addr  [16]byte // netip.Addr.As16
	start int64    // the window's first failure, in Unix nanoseconds
	n     int32    // failures in the window
}

// newFailureLimiter allows perMinute failures a minute per address; 0 means no limit (nil).
func newFailureLimiter(perMinute int) *failureLimiter {
	if perMinute <= 0 {
		return nil
	}
	return &failureLimiter{
		max:    perMinute,
		size:   maxTrackedAddrs,
		window: time.Minute,
		now:    time.Now,
		addrs:  make(map[[16]byte]*list.Element),
		lru:    list.New(),
	}
}

// failuresOf returns the failures an element of the limiter's lru holds, which is all it holds.
func failuresOf(e *list.Element) *failures {
	f, ok := e.Value.(*failures)
	if !ok {
		panic(fmt.Sprintf("failureLimiter: an element of lru holds a %T", e.Value))
	}
	return f
}

// blocked returns how long a is still refused (0: it is not).
func (l *failureLimiter) blocked(a netip.Addr) time.Duration {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.addrs[a.As16()]
	if e == nil {
		return 0
	}
	f := failuresOf(e)
	if int(f.n) < l.max {
		return 0
	}
	return max(0, time.Duration(f.start+int64(l.window)-l.now().UnixNano()))
}

// fail records a failed authentication from a.
func (l *failureLimiter) fail(a netip.Addr) {
	if l == nil {
		return
	}
	now := l.now().UnixNano()
	key := a.As16()
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.addrs[key]
	if e == nil {
		e = l.lru.PushFront(&failures{addr: key})
		l.addrs[key] = e
	}
	l.lru.MoveToFront(e)
	f := failuresOf(e)
	if now-f.start >= int64(l.window) {
		f.start, f.n = now, 0
	}
	f.n = min(f.n+1, int32(l.max))
	// Forget, least recent first, addresses beyond size and those whose window has ended, but not a.
	for b := l.lru.Back(); b != e; b = l.lru.Back() {
		old := failuresOf(b)
		if l.lru.Len() <= l.size && now-old.start < int64(l.window) {
			break
		}
		delete(l.addrs, old.addr)
		l.lru.Remove(b)
	}
}

// limitedAddrs is how many client addresses the limiter refuses now: a gauge of GET /metrics.
func (l *failureLimiter) limitedAddrs() int {
	if l == nil {
		return 0
	}
	now := l.now().UnixNano()
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.addrs {
		f := failuresOf(e)
		if int(f.n) >= l.max && now-f.start < int64(l.window) {
			n++
		}
	}
	return n
}

// clientAddr is the address a request came from: the TCP peer or, while that is a trusted proxy, the
// X-Forwarded-For address it names, walking from the right (all header lines as one list; a
// non-address ends the walk). An IPv6 address is widened to its /64, the block one client holds.
func clientAddr(r *http.Request, trusted []netip.Prefix) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	a := ap.Addr().Unmap()
	xff := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(xff) - 1; i >= 0 && isTrusted(a, trusted); i-- {
		next, err := netip.ParseAddr(strings.TrimSpace(xff[i]))
		if err != nil {
			break
		}
		a = next.Unmap()
	}
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// isTrusted reports whether a is the address of a trusted proxy: inside one of trusted.
func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	return slices.ContainsFunc(trusted, func(p netip.Prefix) bool { return p.Contains(a) })
}
