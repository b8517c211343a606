package main

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// API keys are "rdx_" and 32 base64url characters (192 random bits). Only their SHA-256 is stored,
// with the first keyPrefixLen characters as a display prefix that names the key to revoke it.
const (
	keyPrefixLen = 12
	maxKeyLen    = 128
	// keyCacheTTL is how long a resolved key is trusted without asking the database again: a revoked
	// key stops working within this time on every server.
	keyCacheTTL = 5 * time.Second
	// maxCachedKeys bounds the cache; when full it is emptied and refills from the database.
	maxCachedKeys = 100_000
	knownRefresh  = 200 * time.Millisecond // the least time between two refreshes of the known keys
)

// tenant is who a request acts as: its API key's company and user, and the key with its scopes and expiry.
type tenant struct {
	companyID int64
	userID    int64
	keyID     int64
	scopes    []string
	expiresAt time.Time // zero: never
}

// tenantOf returns the tenant the auth middleware resolved for r.
func tenantOf(r *http.Request) tenant { return requestInfo(r.Context()).tenant }

// authenticator resolves API keys to tenants, trusting a resolved key for keyCacheTTL so that a
// request does not cost a database round trip for its key.
type authenticator struct {
	st  *store
	now func() time.Time

	mu    sync.RWMutex
	cache map[[32]byte]cachedKey

	// known holds the first 8 bytes of the active keys' hashes, for the requests of addresses over
	// their failure limit: a key not in it cannot be valid. Such a request waits for a refresh of
	// known (the keys made since the last, on any server) begun after it asked; waiting requests
	// share it, refreshes are at least knownRefresh apart, and one a keyCacheTTL rebuilds known. So a
	// flood of made-up keys costs one small query a knownRefresh, and a key made a moment ago on any
	// server is served after at most knownRefresh and a query. (A budget of look-ups a second would
	// cost as little, but refuse a new key while a flood spends it.)
	knownMu   sync.RWMutex
	known     map[uint64]bool
	refreshMu sync.Mutex   // held by a refresh, and by a request waiting to start one
	begun     atomic.Int64 // refreshes begun
	fresh     int64        // the number of the last refresh that succeeded (refreshMu)
	loaded    time.Time    // when it began (refreshMu)
	rebuilt   time.Time    // when the last refresh that made known anew began (refreshMu)
}

// cachedKey is a resolved key's tenant, trusted until expires.
type cachedKey struct {
	t       tenant
	expires time.Time
}

// newAuthenticator returns an authenticator of the keys in st, with nothing cached or known.
func newAuthenticator(st *store) *authenticator {
	return &authenticator{
		st:    st,
		now:   time.Now,
		cache: make(map[[32]byte]cachedKey),
		known: make(map[uint64]bool),
	}
}

// resolve returns the tenant of key, errNotFound for a missing, unknown, revoked or expired key, or
// a database error. For a limited address, a key this server has not seen valid is looked up only if
// it may be valid (see known).
func (a *authenticator) resolve(ctx context.Context, key string, limited bool) (tenant, error) {
	if len(key) > maxKeyLen || !strings.HasPrefix(key, "rdx_") {
		return tenant{}, errNotFound
	}
	hash := hashKey(key)
	now := a.now()
	a.mu.RLock()
	c, ok := a.cache[hash]
	a.mu.RUnlock()
	if ok && now.Before(c.expires) {
		return c.t, nil
	}
	if limited && !ok {
		if known, err := a.mayBeValid(ctx, hash); err != nil || !known {
			return tenant{}, cmp.Or(err, errNotFound)
		}
	}
	t, err := a.st.lookupAPIKey(ctx, hash)
	if errors.Is(err, errNotFound) && ok {
		a.forget(hash[:]) // revoked: no longer seen valid
	}
	if err != nil {
		return t, err
	}
	a.mu.Lock()
	if len(a.cache) >= maxCachedKeys {
		clear(a.cache)
	}
	expires := now.Add(keyCacheTTL)
	if !t.expiresAt.IsZero() && t.expiresAt.Before(expires) {
		expires = t.expiresAt // an expiring key is trusted only until it expires
	}
	a.cache[hash] = cachedKey{t: t, expires: expires}
	a.mu.Unlock()
	return t, nil
}

// mayBeValid reports whether hash is one of an active key's, as far as known knows after a
// refresh that began after the call (see known).
func (a *authenticator) mayBeValid(ctx context.Context, hash [32]byte) (bool, error) {
	h := binary.BigEndian.Uint64(hash[:8])
	asked := a.begun.Load()
	if a.isKnown(h) {
		return true, nil
	}
	a.refreshMu.Lock()
	defer a.refreshMu.Unlock()
	if a.fresh > asked { // a refresh began since, and did not find it
		return a.isKnown(h), nil
	}
	if wait := knownRefresh - a.now().Sub(a.loaded); wait > 0 {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(wait):
		}
	}
	n := a.begun.Add(1)
	began := a.now()
	since := a.loaded.Add(-time.Minute) // a key's created_at is its transaction's start
	anew := began.Sub(a.rebuilt) > keyCacheTTL
	if anew {
		since = time.Time{} // every active key
	}
	hashes, err := a.st.activeKeyHashes(ctx, since)
	if err != nil {
		return false, err
	}
	a.knownMu.Lock()
	if anew {
		a.known = make(map[uint64]bool, len(hashes))
		a.rebuilt = began
	}
	for _, h := range hashes {
		a.known[binary.BigEndian.Uint64(h)] = true
	}
	a.knownMu.Unlock()
	a.fresh = n
	a.loaded = began
	return a.isKnown(h), nil
}

// isKnown reports whether h, the first 8 bytes of a key's hash, is in known.
func (a *authenticator) isKnown(h uint64) bool {
	a.knownMu.RLock()
	defer a.knownMu.RUnlock()
	return a.known[h]
}

// forget drops a key from the cache, so that this server looks it up again at its next use: a key
// revoked or rolled here stops working here at once (elsewhere within keyCacheTTL).
func (a *authenticator) forget(hash []byte) {
	a.mu.Lock()
	delete(a.cache, [32]byte(hash))
	a.mu.Unlock()
}

// errUnauthorized is the 401 of a request without a valid key.
var errUnauthorized = &apiError{Status: http.StatusUnauthorized, Code: "unauthorized",
	Detail: "A valid API key is required in the x-api-key header."}

// withAuth maps the x-api-key header to a tenant for every keyed request: all under /v1/ but the
// OpenAPI document asked for without the header (isPublic). A missing, unknown or revoked key, or two
// headers, get the same 401 and count as failures of the client's address; an address over the
// failure limit gets 429 for them instead, but a valid key is served from any address.
func withAuth(a *authenticator, fails *failureLimiter, trusted []netip.Prefix, log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isPublic(r) {
			next.ServeHTTP(w, r)
			return
		}
		key := r.Header.Get("x-api-key")
		if len(r.Header.Values("x-api-key")) > 1 {
			key = "" // two keys are no key
		}
		addr := clientAddr(r, trusted)
		wait := fails.blocked(addr)
		t, err := a.resolve(r.Context(), key, wait > 0)
		switch {
		case errors.Is(err, errNotFound) && wait > 0:
			writeTooMany(w, r, wait, "Too many requests with invalid API keys came from this address.")
		case errors.Is(err, errNotFound):
			fails.fail(addr)
			w.Header().Set("WWW-Authenticate", `ApiKey header="x-api-key"`)
			writeProblem(w, r, errUnauthorized)
		case err != nil:
			writeError(w, r, log, err)
		default:
			requestInfo(r.Context()).tenant = t
			next.ServeHTTP(w, r)
		}
	})
}

// withScope answers 403 insufficient_scope unless the request's key covers scope (scopeError,
// keys.go). addRoutes wraps every keyed route in it, inside withAuth, which found the key.
func withScope(scope string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if aerr := scopeError(tenantOf(r).scopes, scope); aerr != nil {
			writeProblem(w, r, aerr)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isPublic reports whether r needs no key: a path outside /v1/, or the OpenAPI document without an
// x-api-key header. With one, the document describes the key's company, so the key is checked, limited
// and counted like any other (an empty or unknown key is 401, not the public document).
func isPublic(r *http.Request) bool {
	if !strings.HasPrefix(r.URL.Path, "/v1/") {
		return true
	}
	return r.URL.Path == "/v1/openapi.json" && len(r.Header.Values("x-api-key")) == 0
}
