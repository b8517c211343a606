package main

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The authenticator serves a key it has seen valid from its cache for keyCacheTTL, and for a
// limited address looks up only keys that may be valid: known ones, or ones a refresh of the known
// keys begun since the request came has found.
func TestAuthenticatorLooksUpForALimitedAddressOnlyKeysThatMayBeValid(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ctx := context.Background()
	unseen := addKey(t, c.id, 0)
	now := time.Now()
	a := newAuthenticator(testEnv.st)
	a.now = func() time.Time { return now }
	for range 10 {
		now = now.Add(knownRefresh) // a refresh for each
		if _, err := a.resolve(ctx, "rdx_"+randomHex(24), true); !errors.Is(err, errNotFound) {
			t.Fatalf("an unknown key: err = %v; want errNotFound", err)
		}
	}
	// A valid key this server has never seen is served, from a limited address too.
	if got, err := a.resolve(ctx, unseen, true); err != nil || got.companyID != c.id {
		t.Errorf("a valid key never seen: %+v, %v; want company %d", got, err, c.id)
	}
	// Revoked, it is still served from the cache within keyCacheTTL (the time a revocation on another
	// server takes to reach this one).
	if err := testEnv.st.revokeAPIKey(ctx, unseen); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second)
	if _, err := a.resolve(ctx, unseen, true); err != nil {
		t.Errorf("a second after its revocation, a key in the cache: err = %v; want served", err)
	}
	// One made since the known keys were loaded is served at once: its request waits for the next
	// refresh, at most knownRefresh away (here the clock stands still, and it waits knownRefresh).
	// From an address that is not limited, such a key is served without one.
	newer, other := addKey(t, c.id, 0), addKey(t, c.id, 0)
	if _, err := a.resolve(ctx, newer, true); err != nil {
		t.Errorf("a key made since the last refresh: err = %v; want served", err)
	}
	if _, err := a.resolve(ctx, other, false); err != nil {
		t.Errorf("a key made since the last refresh, from an address that is not limited: err = %v; want served", err)
	}
	now = now.Add(keyCacheTTL + time.Second)
	if _, err := a.resolve(ctx, newer, true); err != nil { // not in the cache: known
		t.Errorf("a key made since the last refresh, after keyCacheTTL: err = %v; want served", err)
	}
	// After keyCacheTTL the revoked key is no longer seen valid.
	now = now.Add(time.Minute)
	if _, err := a.resolve(ctx, unseen, true); !errors.Is(err, errNotFound) {
		t.Errorf("revoked: err = %v; want errNotFound", err)
	}
	if _, seen := a.cache[hashKey(unseen)]; seen {
		t.Error("a revoked key is still remembered as seen valid")
	}
}
