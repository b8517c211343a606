package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"slices"
	"testing"
	"time"
)

func TestAPIKeyLifecycleKeepsOnlyTheHash(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ctx := context.Background()
	st := testEnv.st
	resolve := func(key string) (tenant, error) { return newAuthenticator(st).resolve(ctx, key, false) }

	key, err := st.createAPIKey(ctx, c.id, c.userID, []string{"*"}, 0)
	if err != nil || key == c.key || len(key) != 36 || key[:4] != "rdx_" {
		t.Fatalf("createAPIKey = %q, %v; want rdx_ and 32 more characters, unlike the first key %q", key, err, c.key)
	}
	// Stored only as its SHA-256, beside a short display prefix.
	var prefix string
	var hash []byte
	err = testEnv.st.db.QueryRow(`SELECT prefix, hash FROM api_keys WHERE company_id = $1 AND prefix = left($2, length(prefix))`,
		c.id, key).Scan(&prefix, &hash)
	if sum := sha256.Sum256([]byte(key)); err != nil || len(prefix) > 12 || !bytes.Equal(hash, sum[:]) {
		t.Errorf("stored prefix %q hash %x (%v); want at most the key's first 12 characters and its SHA-256", prefix, hash, err)
	}
	if got, err := resolve(key); err != nil || got.companyID != c.id || got.userID != c.userID || !slices.Equal(got.scopes, []string{"*"}) {
		t.Fatalf("resolve = %+v, %v; want company %d user %d, scopes *", got, err, c.id, c.userID)
	}
	if err := st.revokeAPIKey(ctx, key); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if _, err := resolve(key); !errors.Is(err, errNotFound) {
		t.Errorf("resolve a revoked key: err = %v; want errNotFound", err)
	}
	if err := st.revokeAPIKey(ctx, key); !errors.Is(err, errNotFound) {
		t.Errorf("second revoke: err = %v; want errNotFound", err)
	}
	// Prefixes are not unique: one that names two keys revokes neither; the whole key revokes one.
	twin, err := st.createAPIKey(ctx, c.id, 0, []string{"*"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.db.Exec(`UPDATE api_keys SET prefix = $2 WHERE company_id = $1 AND prefix = $3`, c.id, c.key[:12], twin[:12]); err != nil {
		t.Fatal(err)
	}
	if err := st.revokeAPIKey(ctx, c.key[:12]); err == nil || errors.Is(err, errNotFound) {
		t.Errorf("revoke a prefix of two keys: err = %v; want a refusal", err)
	}
	if err := st.revokeAPIKey(ctx, twin); err != nil {
		t.Errorf("revoke the whole key of a shared prefix: %v", err)
	}
	if _, err := resolve(c.key); err != nil {
		t.Errorf("the company's other key stopped working: %v", err)
	}
	if _, err := st.createAPIKey(ctx, c.id, c.userID+1_000_000, []string{"*"}, 0); !errors.Is(err, errNotFound) {
		t.Errorf("key for a user that does not exist: err = %v; want errNotFound", err)
	}
}

func TestAuthenticatorCachesForItsTTL(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ctx := context.Background()
	now := time.Now()
	a := newAuthenticator(testEnv.st)
	a.now = func() time.Time { return now }

	if _, err := a.resolve(ctx, c.key, false); err != nil {
		t.Fatal(err)
	}
	if err := testEnv.st.revokeAPIKey(ctx, c.key); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second)
	if _, err := a.resolve(ctx, c.key, false); err != nil {
		t.Errorf("a second later, within the TTL, a cached key still resolves; got %v", err)
	}
	now = now.Add(time.Minute)
	if _, err := a.resolve(ctx, c.key, false); !errors.Is(err, errNotFound) {
		t.Errorf("a minute later, after the TTL, a revoked key: err = %v; want errNotFound", err)
	}
}

func TestAuthenticatorLooksUpForALimitedAddressOnlyKeysThatMayBeValid(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ctx := context.Background()
	unseen, err := testEnv.st.createAPIKey(ctx, c.id, 0, []string{"*"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	a := newAuthenticator(testEnv.st)
	a.now = func() time.Time { return now }
	for range 100 {
		if _, err := a.resolve(ctx, "rdx_"+randomHex(24), true); !errors.Is(err, errNotFound) {
			t.Fatalf("an unknown key: err = %v; want errNotFound", err)
		}
	}
	// A valid key this server has never seen is served, from a limited address too.
	if got, err := a.resolve(ctx, unseen, true); err != nil || got.companyID != c.id {
		t.Errorf("a valid key never seen: %+v, %v; want company %d", got, err, c.id)
	}
	// One made since the known keys were loaded is known within keyCacheTTL.
	newer, err := testEnv.st.createAPIKey(ctx, c.id, 0, []string{"*"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.resolve(ctx, newer, true); !errors.Is(err, errNotFound) {
		t.Errorf("a key made since the last refresh: err = %v; want errNotFound until the next", err)
	}
	if _, err := a.resolve(ctx, newer, false); err != nil {
		t.Errorf("the same key from an address that is not limited: err = %v; want served", err)
	}
	now = now.Add(keyCacheTTL + time.Second)
	if _, err := a.resolve(ctx, newer, true); err != nil {
		t.Errorf("a key made since the last refresh, after keyCacheTTL: err = %v; want served", err)
	}
	// A revoked key is no longer seen valid.
	if err := testEnv.st.revokeAPIKey(ctx, unseen); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	if _, err := a.resolve(ctx, unseen, true); !errors.Is(err, errNotFound) {
		t.Errorf("revoked: err = %v; want errNotFound", err)
	}
	if _, seen := a.cache[hashKey(unseen)]; seen {
		t.Error("a revoked key is still remembered as seen valid")
	}
}
