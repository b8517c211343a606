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
	"time"
)

// API keys look like "rdx_" followed by 32 base64url characters (192 random bits). Only their SHA-256
// is stored, with the first keyPrefixLen characters as a display prefix that names the key when
// revoking it.
const (
	keyPrefixLen = 12
	maxKeyLen    = 128
)

// keyCacheTTL is how long a resolved key is trusted without asking the database again: a revoked key
// stops working within this time on every server.
const keyCacheTTL = 5 * time.Second

// maxCachedKeys bounds the cache; when full it is emptied (forgetting which keys it saw valid) and
// refills from the database.
const maxCachedKeys = 100_000

// tenant is who a request acts as: the company that owns the key, the key's user, and the key
// itself with its scopes and expiry.
type tenant struct {
	companyID int64
	userID    int64
	keyID     int64
	scopes    []string
	expiresAt time.Time // zero: never
}

// tenantOf returns the tenant the auth middleware resolved for r.
func tenantOf(r *http.Request) tenant {
	return requestInfo(r.Context()).tenant
}

// authenticator resolves API keys to tenants, trusting a resolved key for keyCacheTTL so that a
// request does not cost a database round trip for its key.
type authenticator struct {
	st  *store
	now func() time.Time

	mu    sync.RWMutex
	cache map[[32]byte]cachedKey

	// known holds the first 8 bytes of the active keys' hashes, as of loaded (made anew at most once
	// a keyCacheTTL: no revoked or expired key stays), for the requests of addresses over their failure
	// limit: a key not in it cannot be valid, so a flood of made-up keys from such addresses costs
	// the database one refresh a keyCacheTTL however many keys it sends, and a valid key is still
	// served (one made within the last keyCacheTTL, on any server, once the next refresh knows it:
	// the time a revocation takes to reach every server).
	knownMu sync.Mutex
	known   map[uint64]bool
	loaded  time.Time
}

type cachedKey struct {
	t       tenant
	expires time.Time
}

func newAuthenticator(st *store) *authenticator {
	return &authenticator{st: st, now: time.Now, cache: make(map[[32]byte]cachedKey), known: make(map[uint64]bool)}
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

// mayBeValid reports whether hash is one of an active key's, as far as known knows.
func (a *authenticator) mayBeValid(ctx context.Context, hash [32]byte) (bool, error) {
	a.knownMu.Lock()
	defer a.knownMu.Unlock()
	if now := a.now(); now.Sub(a.loaded) > keyCacheTTL {
		hashes, err := a.st.activeKeyHashes(ctx)
		if err != nil {
			return false, err
		}
		a.known = make(map[uint64]bool, len(hashes))
		for _, h := range hashes {
			a.known[binary.BigEndian.Uint64(h)] = true
		}
		a.loaded = now
	}
	return a.known[binary.BigEndian.Uint64(hash[:8])], nil
}

// forget drops a key from the cache, so that this server looks it up again at its next use: a key
// revoked or rolled here stops working here at once (elsewhere within keyCacheTTL).
func (a *authenticator) forget(hash []byte) {
	a.mu.Lock()
	delete(a.cache, [32]byte(hash))
	a.mu.Unlock()
}

// needsKey reports whether a path is part of the keyed API: everything under /v1/ except the
// OpenAPI document.
func needsKey(path string) bool {
	return strings.HasPrefix(path, "/v1/") && path != "/v1/openapi.json"
}

var errUnauthorized = &apiError{Status: http.StatusUnauthorized, Code: "unauthorized",
	Detail: "A valid API key is required in the x-api-key header."}

// withAuth maps the x-api-key header to a tenant for every keyed path. Missing, unknown and revoked
// keys, and more than one x-api-key header, all get the same 401, and count as failures of the
// client's address. An address over the failure limit gets 429 for them instead, but a valid key is
// served from any address: see resolve for what such an address may cost the database.
func withAuth(a *authenticator, fails *failureLimiter, trusted []netip.Prefix, log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !needsKey(r.URL.Path) {
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
