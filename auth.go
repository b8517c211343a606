package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
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

// limitedLookups bounds what a flood of keys from addresses over their failure limit costs the
// database: of the keys this server has not seen valid, all such addresses together get at most
// limitedLookups looked up a second, in bursts of twice that (in any t seconds at most 100 + 50t),
// and the rest get 429. A key it has seen valid is looked up as from any address, once a keyCacheTTL.
const limitedLookups = 50

// tenant is who a request acts as: the company that owns the key and the key's user.
type tenant struct {
	companyID int64
	userID    int64
}

// tenantOf returns the tenant the auth middleware resolved for r.
func tenantOf(r *http.Request) tenant {
	ri := requestInfo(r.Context())
	return tenant{companyID: ri.companyID, userID: ri.userID}
}

// newAPIKey returns a new random key.
func newAPIKey() string {
	var b [24]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return "rdx_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// hashKey is what is stored of a key: its SHA-256.
func hashKey(key string) [32]byte { return sha256.Sum256([]byte(key)) }

// execer is what *sql.DB and *sql.Tx have in common for a write.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// insertAPIKey stores a new key for the user of the company (inside a transaction, or not) and returns
// the key, which is kept nowhere else.
func insertAPIKey(ctx context.Context, tx execer, companyID, userID int64) (string, error) {
	key := newAPIKey()
	hash := hashKey(key)
	const q = `INSERT INTO api_keys (company_id, user_id, prefix, hash) VALUES ($1, $2, $3, $4)`
	if _, err := tx.ExecContext(ctx, q, companyID, userID, key[:keyPrefixLen], hash[:]); err != nil {
		return "", fmt.Errorf("insert api key: %w", err)
	}
	return key, nil
}

// createAPIKey makes a new key for a user of the company (userID 0: the company's first user).
// It returns errNotFound when there is no such company or user.
func (s *store) createAPIKey(ctx context.Context, companyID, userID int64) (string, error) {
	const q = `SELECT id FROM users WHERE company_id = $1 AND ($2::bigint = 0 OR id = $2) ORDER BY id LIMIT 1`
	err := s.db.QueryRowContext(ctx, q, companyID, userID).Scan(&userID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", errNotFound
	}
	if err != nil {
		return "", fmt.Errorf("find user: %w", err)
	}
	return insertAPIKey(ctx, s.db, companyID, userID)
}

// revokeAPIKey revokes the active key whose display prefix starts prefixOrKey (a whole key works
// too). It returns errNotFound when no active key has that prefix.
func (s *store) revokeAPIKey(ctx context.Context, prefixOrKey string) error {
	if len(prefixOrKey) > keyPrefixLen {
		prefixOrKey = prefixOrKey[:keyPrefixLen]
	}
	const q = `UPDATE api_keys SET revoked_at = date_trunc('milliseconds', now())
		WHERE prefix = $1 AND revoked_at IS NULL`
	res, err := s.db.ExecContext(ctx, q, prefixOrKey)
	if err != nil {
		return fmt.Errorf("revoke key: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errNotFound
	}
	return nil
}

// lookupAPIKey returns the tenant of the active key with this hash, or errNotFound.
func (s *store) lookupAPIKey(ctx context.Context, hash [32]byte) (tenant, error) {
	const q = `SELECT company_id, user_id FROM api_keys WHERE hash = $1 AND revoked_at IS NULL`
	var t tenant
	err := s.db.QueryRowContext(ctx, q, hash[:]).Scan(&t.companyID, &t.userID)
	if errors.Is(err, sql.ErrNoRows) {
		return t, errNotFound
	}
	if err != nil {
		return t, fmt.Errorf("look up key: %w", err)
	}
	return t, nil
}

// authenticator resolves API keys to tenants, trusting a resolved key for keyCacheTTL so that a
// request does not cost a database round trip for its key.
type authenticator struct {
	st      *store
	now     func() time.Time
	lookups *rateLimiter // of limitedLookups

	mu    sync.RWMutex
	cache map[[32]byte]cachedKey
}

type cachedKey struct {
	t       tenant
	expires time.Time
}

func newAuthenticator(st *store) *authenticator {
	return &authenticator{st: st, now: time.Now, lookups: newRateLimiter(limitedLookups), cache: make(map[[32]byte]cachedKey)}
}

// resolve returns the tenant of key, errNotFound for a missing, unknown or revoked key, or a
// database error. For a limited address, a key this server has not seen valid (since its cache was
// last emptied) is looked up only while limitedLookups allows, else it is errNotFound too.
func (a *authenticator) resolve(ctx context.Context, key string, limited bool) (tenant, error) {
	if key == "" || len(key) > maxKeyLen || !strings.HasPrefix(key, "rdx_") {
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
		if took, _, _, _ := a.lookups.take(limitKey{}); !took {
			return tenant{}, errNotFound
		}
	}
	t, err := a.st.lookupAPIKey(ctx, hash)
	if errors.Is(err, errNotFound) && ok {
		a.mu.Lock()
		delete(a.cache, hash) // revoked: no longer seen valid
		a.mu.Unlock()
	}
	if err != nil {
		return t, err
	}
	a.mu.Lock()
	if len(a.cache) >= maxCachedKeys {
		clear(a.cache)
	}
	a.cache[hash] = cachedKey{t: t, expires: now.Add(keyCacheTTL)}
	a.mu.Unlock()
	return t, nil
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
		if errors.Is(err, errNotFound) && wait > 0 {
			writeTooMany(w, r, wait, "Too many requests with invalid API keys came from this address.")
			return
		}
		if errors.Is(err, errNotFound) {
			fails.fail(addr)
			w.Header().Set("WWW-Authenticate", `ApiKey header="x-api-key"`)
			writeProblem(w, r, errUnauthorized)
			return
		}
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		ri := requestInfo(r.Context())
		ri.companyID, ri.userID, ri.keyPrefix = t.companyID, t.userID, key[:min(len(key), keyPrefixLen)]
		next.ServeHTTP(w, r)
	})
}
