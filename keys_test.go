package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Tests of keys.go and the scope checks of auth.go: keys in the store, the key commands,
// /v1/apiKeys, scopes, expiry, rolling (API.md sections 2 and 13).

type newKey struct {
	ID         int64
	Name       string
	Prefix     string
	Scopes     []string
	UserID     int64
	CreatedAt  string
	ExpiresAt  *string
	LastUsedAt *string
	Key        *string
}

// makeKey creates a key with scopes through the API, with creator's key, and returns it.
func makeKey(t *testing.T, creator string, scopes ...string) newKey {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"name": "test key", "scopes": scopes})
	k := decode[newKey](t, wantStatus(t, call(t, "POST", "/v1/apiKeys", creator, string(b)), http.StatusCreated).body)
	if k.Key == nil || !strings.HasPrefix(*k.Key, k.Prefix) {
		t.Fatalf("new key %+v: want the key, starting with its prefix", k)
	}
	return k
}

func TestKeyAPIMakesScopedKeysAndRevokesThemAtOnce(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	k := makeKey(t, c.key, "contacts:read", "keys:read")
	if !slices.Equal(k.Scopes, []string{"contacts:read", "keys:read"}) || k.UserID != c.userID || k.ExpiresAt != nil || k.LastUsedAt != nil {
		t.Errorf("new key %+v; want its scopes, the creating key's user, no expiry, never used", k)
	}
	key := *k.Key
	wantStatus(t, call(t, "GET", "/v1/contacts", key, ""), http.StatusOK)
	for _, tc := range []struct{ method, path, body, scope string }{
		{"POST", "/v1/contacts", `{"name": "Ana"}`, "contacts:write"},
		{"GET", "/v1/business", "", "business:read"},
		{"GET", "/v1/contacts?expand[]=organization", "", "organizations:read"},
		{"GET", "/v1/contacts?expand[]=stage", "", "reference:read"},
		{"POST", "/v1/apiKeys", `{"scopes": ["contacts:read"]}`, "keys:write"},
	} {
		p := wantProblem(t, call(t, tc.method, tc.path, key, tc.body), http.StatusForbidden, "insufficient_scope")
		if !strings.Contains(p.Detail, tc.scope) {
			t.Errorf("%s %s: detail %q; want it to name %s", tc.method, tc.path, p.Detail, tc.scope)
		}
	}
	// The list and the key itself show neither the key nor its hash; lastUsedAt is kept.
	list := mustGet(t, key, "/v1/apiKeys").body
	if strings.Contains(string(list), key) || strings.Contains(string(list), "hash") || !strings.Contains(string(list), k.Prefix) {
		t.Errorf("GET /v1/apiKeys = %s; want the key's prefix, never the key or a hash", list)
	}
	got := decode[newKey](t, mustGet(t, key, fmt.Sprintf("/v1/apiKeys/%d", k.ID)).body)
	if got.Key != nil || got.LastUsedAt == nil || !strings.HasSuffix(*got.LastUsedAt, ":00.000Z") {
		t.Errorf("GET the key = %+v; want no key, and lastUsedAt to the minute", got)
	}
	wantStatus(t, call(t, "DELETE", fmt.Sprintf("/v1/apiKeys/%d", k.ID), c.key, ""), http.StatusNoContent)
	wantProblem(t, call(t, "GET", "/v1/contacts", key, ""), http.StatusUnauthorized, "unauthorized") // at once on this server
	wantProblem(t, call(t, "DELETE", fmt.Sprintf("/v1/apiKeys/%d", k.ID), c.key, ""), http.StatusNotFound, "not_found")
	// Another company's key is no key of this one.
	other := newTestCompany(t)
	wantProblem(t, call(t, "GET", fmt.Sprintf("/v1/apiKeys/%d", makeKey(t, c.key, "*").ID), other.key, ""), http.StatusNotFound, "not_found")
}

func TestKeysNeverGrantMoreThanTheirOwnScopes(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	limited := makeKey(t, c.key, "contacts:read", "keys:write")
	for _, scopes := range []string{`["contacts:write"]`, `["*"]`, `["keys:write", "business:read"]`} {
		r := call(t, "POST", "/v1/apiKeys", *limited.Key, `{"scopes": `+scopes+`}`)
		wantProblem(t, r, http.StatusForbidden, "insufficient_scope")
	}
	wantStatus(t, call(t, "POST", "/v1/apiKeys", *limited.Key, `{"scopes": ["contacts:read", "keys:read"]}`), http.StatusCreated)
	// Nor roll a key with more: not even itself into one.
	wide := makeKey(t, c.key, "*")
	wantProblem(t, call(t, "POST", fmt.Sprintf("/v1/apiKeys/%d/roll", wide.ID), *limited.Key, `{}`), http.StatusForbidden, "insufficient_scope")
	wantStatus(t, call(t, "GET", "/v1/contacts", *wide.Key, ""), http.StatusOK) // the refused roll changed nothing
	if n := sqlID(t, `SELECT count(*) FROM api_keys WHERE company_id = $1 AND scopes = '*'`, c.id); n != 2 {
		t.Errorf("%d keys with every scope; want the company's first and wide", n)
	}
}

// No way up: a key revokes only keys whose scopes lie within its own; a * key only a * key.
func TestKeysRevokeOnlyKeysWithinTheirOwnScopes(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	limited := makeKey(t, c.key, "contacts:write", "keys:write")
	wide := makeKey(t, c.key, "*")
	for _, k := range []newKey{wide, makeKey(t, c.key, "business:read"), makeKey(t, c.key, "contacts:read", "webhooks:read")} {
		path := itemPath("/v1/apiKeys", k.ID)
		wantProblem(t, call(t, "DELETE", path, *limited.Key, ""), http.StatusForbidden, "insufficient_scope")
		mustGet(t, c.key, path) // the refused revocation changed nothing
	}
	wantStatus(t, call(t, "GET", "/v1/contacts", *wide.Key, ""), http.StatusOK)
	for _, k := range []newKey{makeKey(t, c.key, "contacts:read"), makeKey(t, c.key, "contacts:write", "keys:read"), limited} {
		wantStatus(t, call(t, "DELETE", itemPath("/v1/apiKeys", k.ID), *limited.Key, ""), http.StatusNoContent)
	}
	wantStatus(t, call(t, "DELETE", itemPath("/v1/apiKeys", wide.ID), c.key, ""), http.StatusNoContent)
}

func TestKeyBadInputIs422(t *testing.T) {
	t.Parallel()
	c, other := newTestCompany(t), newTestCompany(t)
	id := makeKey(t, c.key, "contacts:read").ID
	for body, field := range map[string]string{
		`{"scopes": ["contacts:delete"]}`: "scopes",
		`{"scopes": []}`:                  "scopes",
		`{"name": "x"}`:                   "scopes",
		`{"scopes": ["*"], "expiresAt": "2020-01-01T00:00:00Z"}`:     "expiresAt",
		fmt.Sprintf(`{"scopes": ["*"], "userId": %d}`, other.userID): "userId",
		`{"scopes": ["*"], "hash": "x"}`:                             "hash",
	} {
		p := wantFields(t, call(t, "POST", "/v1/apiKeys", c.key, body), field)
		if field == "scopes" && strings.Contains(body, "delete") && !strings.Contains(p.Errors[0].Message, "contacts:delete") {
			t.Errorf("unknown scope: %q; want it named", p.Errors[0].Message)
		}
	}
	for _, body := range []string{`{"expiresIn": 604801}`, `{"expiresIn": -1}`, `{"expiresIn": "1h"}`} {
		wantFields(t, call(t, "POST", fmt.Sprintf("/v1/apiKeys/%d/roll", id), c.key, body), "expiresIn")
	}
	if n := sqlID(t, `SELECT count(*) FROM api_keys WHERE company_id = $1`, c.id); n != 2 {
		t.Errorf("%d keys after refused requests; want 2", n)
	}
}

func TestKeysExpireAndRoll(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	soon := time.Now().Add(1500 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	r := call(t, "POST", "/v1/apiKeys", c.key, `{"scopes": ["*"], "expiresAt": "`+soon+`"}`)
	expiring := decode[newKey](t, wantStatus(t, r, http.StatusCreated).body)
	wantStatus(t, call(t, "GET", "/v1/contacts", *expiring.Key, ""), http.StatusOK)
	time.Sleep(time.Until(time.Now().Add(1600 * time.Millisecond)))
	wantProblem(t, call(t, "GET", "/v1/contacts", *expiring.Key, ""), http.StatusUnauthorized, "unauthorized")

	// Rolled with expiresIn 0, the old key stops at once; the new one has its name and scopes.
	old := makeKey(t, c.key, "contacts:read")
	wantStatus(t, call(t, "GET", "/v1/contacts", *old.Key, ""), http.StatusOK)
	r = call(t, "POST", fmt.Sprintf("/v1/apiKeys/%d/roll", old.ID), c.key, `{}`)
	rolled := decode[newKey](t, wantStatus(t, r, http.StatusCreated).body)
	if rolled.ID == old.ID || rolled.Name != old.Name || !slices.Equal(rolled.Scopes, old.Scopes) || rolled.Key == nil {
		t.Errorf("rolled %+v from %+v; want a new key with the same name and scopes", rolled, old)
	}
	wantProblem(t, call(t, "GET", "/v1/contacts", *old.Key, ""), http.StatusUnauthorized, "unauthorized")
	wantStatus(t, call(t, "GET", "/v1/contacts", *rolled.Key, ""), http.StatusOK)
	// With expiresIn, both work meanwhile.
	wantProblem(t, call(t, "POST", fmt.Sprintf("/v1/apiKeys/%d/roll", rolled.ID), *rolled.Key, `{"expiresIn": 3600}`), http.StatusForbidden, "insufficient_scope")
	again := decode[newKey](t, wantStatus(t, call(t, "POST", fmt.Sprintf("/v1/apiKeys/%d/roll", rolled.ID), c.key, `{"expiresIn": 3600}`), http.StatusCreated).body)
	wantStatus(t, call(t, "GET", "/v1/contacts", *rolled.Key, ""), http.StatusOK)
	wantStatus(t, call(t, "GET", "/v1/contacts", *again.Key, ""), http.StatusOK)
	got := decode[newKey](t, mustGet(t, c.key, fmt.Sprintf("/v1/apiKeys/%d", rolled.ID)).body)
	if exp, err := time.Parse(time.RFC3339, *got.ExpiresAt); got.ExpiresAt == nil || err != nil || time.Until(exp) < 59*time.Minute || time.Until(exp) > time.Hour {
		t.Errorf("the rolled key expires at %v; want in an hour", got.ExpiresAt)
	}
}

// No way up: a key that expires makes and rolls only keys that expire no later than it does, and a
// roll keeps the old key's expiresAt, whoever rolls it.
func TestExpiringKeysMakeOnlyKeysThatExpireNoLater(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	in := func(d time.Duration) string { return `"` + time.Now().Add(d).UTC().Format(time.RFC3339) + `"` }
	body := func(expiresAt string) string {
		return `{"scopes": ["contacts:read", "keys:write"], "expiresAt": ` + expiresAt + `}`
	}
	r := call(t, "POST", "/v1/apiKeys", c.key, body(in(time.Hour)))
	expiring := decode[newKey](t, wantStatus(t, r, http.StatusCreated).body)
	for _, b := range []string{body("null"), body(in(2 * time.Hour)), `{"scopes": ["contacts:read"]}`} {
		wantFields(t, call(t, "POST", "/v1/apiKeys", *expiring.Key, b), "expiresAt")
	}
	wantStatus(t, call(t, "POST", "/v1/apiKeys", *expiring.Key, body(`"`+*expiring.ExpiresAt+`"`)), http.StatusCreated)
	sooner := decode[newKey](t, wantStatus(t, call(t, "POST", "/v1/apiKeys", *expiring.Key, body(in(30*time.Minute))), http.StatusCreated).body)

	// Nor roll a key that never expires into a new one.
	forever := makeKey(t, c.key, "contacts:read")
	wantFields(t, call(t, "POST", fmt.Sprintf("/v1/apiKeys/%d/roll", forever.ID), *expiring.Key, `{}`), "expiresAt")
	wantStatus(t, call(t, "GET", "/v1/contacts", *forever.Key, ""), http.StatusOK) // the refused roll changed nothing
	rolled := decode[newKey](t, wantStatus(t, call(t, "POST", fmt.Sprintf("/v1/apiKeys/%d/roll", sooner.ID), *expiring.Key, `{}`), http.StatusCreated).body)
	again := decode[newKey](t, wantStatus(t, call(t, "POST", fmt.Sprintf("/v1/apiKeys/%d/roll", rolled.ID), c.key, `{}`), http.StatusCreated).body)
	for _, k := range []newKey{rolled, again} {
		if k.ExpiresAt == nil || *k.ExpiresAt != *sooner.ExpiresAt {
			t.Errorf("rolled key %+v; want the old key's expiresAt %s", k, *sooner.ExpiresAt)
		}
	}
}

func TestRevocationReachesAnotherServerWithin10Seconds(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	k := makeKey(t, c.key, "contacts:read")
	other := startServer(t, nil, nil) // the same database
	wantStatus(t, callAt(t, nil, other, "GET", "/v1/contacts", *k.Key, ""), http.StatusOK)
	wantStatus(t, call(t, "DELETE", fmt.Sprintf("/v1/apiKeys/%d", k.ID), c.key, ""), http.StatusNoContent)
	start := time.Now()
	for callAt(t, nil, other, "GET", "/v1/contacts", *k.Key, "").status != http.StatusUnauthorized {
		if time.Since(start) > 10*time.Second {
			t.Fatal("a key revoked on one server still works on another after 10 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the other server refused the revoked key after %v", time.Since(start).Round(100*time.Millisecond))
}

// TestEveryRouteNeedsItsScope walks every operation of the OpenAPI document, which is the route table
// (openapi_test.go): a key with every scope but one the operation names is 403, and a key of another
// company is 404 for another company's object. An operation on associations names two scopes, one of
// each kind, in a requirement for each pair of kinds it takes: each requirement is walked with its
// second kind as {toKind} (and in a batch's item), and a key lacking either scope is 403.
func TestEveryRouteNeedsItsScope(t *testing.T) {
	t.Parallel()
	c, other := newTestCompany(t), newTestCompany(t)
	var doc struct {
		Paths map[string]map[string]json.RawMessage
	}
	b, err := os.ReadFile("api/openapi.json")
	if err != nil || json.Unmarshal(b, &doc) != nil {
		t.Fatal(err)
	}
	ids := map[string]int64{ // an object of c at each {id} path
		"/v1/contacts/{id}":      mustCreate(t, c.key, "/v1/contacts", `{"name": "Ana"}`),
		"/v1/business/{id}":      mustCreate(t, c.key, "/v1/business", `{"title": "Deal"}`),
		"/v1/organizations/{id}": mustCreate(t, c.key, "/v1/organizations", `{"name": "Acme"}`),
		"/v1/activities/{id}":    mustCreate(t, c.key, "/v1/activities", `{"type": "note", "body": "x"}`),
		"/v1/customFields/{id}":  mustCreate(t, c.key, "/v1/customFields", `{"object": "contact", "key": "k", "label": "K", "type": "text"}`),
		"/v1/apiKeys/{id}":       makeKey(t, c.key, "contacts:read").ID,
		"/v1/apiKeys/{id}/roll":  makeKey(t, c.key, "contacts:read").ID,
		"/v1/users/{id}":         c.userID,
		"/v1/stages/{id}":        sqlID(t, `SELECT min(id) FROM stages WHERE company_id = $1`, c.id),
		"/v1/boards/{id}":        sqlID(t, `SELECT min(id) FROM boards WHERE company_id = $1`, c.id),
	}
	evs, _ := waitFeed(t, c.key, "", "", 1)
	ids["/v1/events/{id}"] = evs[0].ID
	ids["/v1/contacts/{id}/merge"], ids["/v1/organizations/{id}/merge"] = ids["/v1/contacts/{id}"], ids["/v1/organizations/{id}"]
	// A disabled endpoint on loopback, and a failed delivery of it, that nothing ever sends.
	hook := sqlID(t, `INSERT INTO webhook_endpoints (company_id, url, events, secret, enabled)
		VALUES ($1, 'http://127.0.0.1:9/never', '{*}', 'whsec_test', false) RETURNING id`, c.id)
	delivery := sqlID(t, `INSERT INTO webhook_deliveries (company_id, endpoint_id, event_id, event_type, status)
		VALUES ($1, $2, $3, 'contact.created', 'failed') RETURNING id`, c.id, hook, evs[0].ID)
	for _, p := range []string{"/v1/webhooks/{id}", "/v1/webhooks/{id}/deliveries", "/v1/webhooks/{id}/deliveries/{deliveryId}/retry", "/v1/webhooks/{id}/rotateSecret"} {
		ids[p] = hook
	}
	for _, k := range assocKinds {
		for _, p := range []string{"", "/count", "/{toId}"} {
			ids["/v1/"+k.path+"/{id}/associations/{toKind}"+p] = ids["/v1/"+k.path+"/{id}"]
		}
		ids["/v1/"+k.path+"/{id}/timeline"] = ids["/v1/"+k.path+"/{id}"]
	}
	lackingKeys := map[string]string{}       // made once for each need: a company has at most 100 keys
	keyLacking := func(need string) string { // a key with every scope but need and what covers it
		if key, ok := lackingKeys[need]; ok {
			return key
		}
		resource, _, _ := strings.Cut(need, ":")
		var lacking []string
		for _, s := range scopeResources {
			switch {
			case s != resource:
				lacking = append(lacking, s+":write")
			case strings.HasSuffix(need, ":write"):
				lacking = append(lacking, s+":read")
			}
		}
		lackingKeys[need] = *makeKey(t, c.key, lacking...).Key
		return lackingKeys[need]
	}
	tested := 0
	for path, item := range doc.Paths {
		for method, raw := range item {
			var op struct{ Security []map[string][]string }
			if method == "parameters" || json.Unmarshal(raw, &op) != nil || len(op.Security) == 0 || len(op.Security[0]["apiKey"]) == 0 {
				continue // no key needed, or any key will do (the OpenAPI document): no scope to lack
			}
			method = strings.ToUpper(method)
			for _, req := range op.Security {
				needs := req["apiKey"]
				real, body := scopeWalkRequest(method, path, needs, ids, delivery)
				for _, need := range needs {
					p := wantProblem(t, call(t, method, real, keyLacking(need), body), http.StatusForbidden, "insufficient_scope")
					if !strings.Contains(p.Detail, need) {
						t.Errorf("%s %s: detail %q; want it to name %s", method, real, p.Detail, need)
					}
				}
				if strings.Contains(path, "{id}") {
					r := call(t, method, real, other.key, body)
					if r.status != http.StatusNotFound {
						t.Errorf("%s %s with another company's key = %d %s; want 404", method, real, r.status, r.body)
					}
				}
			}
			tested++
		}
	}
	if tested < 30 {
		t.Errorf("%d operations tested; want every keyed operation of the document", tested)
	}
}

// scopeWalkRequest is the request of TestEveryRouteNeedsItsScope for the operation method path with
// the scopes needs of one security requirement: path with c's objects of ids, and a body. An
// association's second scope names the kind of its other end ({toKind}, the batch item's "to").
func scopeWalkRequest(method, path string, needs []string, ids map[string]int64, delivery int64) (real, body string) {
	toKind := ""
	if len(needs) == 2 {
		toKind, _, _ = strings.Cut(needs[1], ":")
	}
	real = strings.NewReplacer("{id}", fmt.Sprint(ids[path]), "{deliveryId}", fmt.Sprint(delivery), "{op}", "create",
		"{toKind}", toKind, "{toId}", fmt.Sprint(ids["/v1/"+toKind+"/{id}"])).Replace(path)
	body = map[string]string{"POST": "{}", "PATCH": "{}"}[method]
	if strings.HasSuffix(path, "/timeline") { // the entries of the scope it needs besides the object's
		real += map[string]string{"activities": "?kind=activity", "events": "?kind=event"}[toKind]
	}
	if path == "/v1/associations/batch/{op}" { // an item between objects of the two kinds: the scopes it needs
		from, _, _ := strings.Cut(needs[0], ":")
		body = fmt.Sprintf(`{"items": [{"from": {"object": %q, "id": %d}, "to": {"object": %q, "id": %d}}]}`,
			kindOf(from).object, ids["/v1/"+from+"/{id}"], kindOf(toKind).object, ids["/v1/"+toKind+"/{id}"])
	}
	return real, body
}

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
	twin := addKey(t, c.id, 0)
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

// A key made with `rolodex key create` works at once with its scopes, `key list` shows it, and after
// `key revoke` a server that never saw it refuses it.
func TestKeyCommandsCreateListAndRevoke(t *testing.T) {
	t.Parallel()
	company := strconv.FormatInt(newTestCompany(t).id, 10)
	out, err := runCLI(t, "key", "create", "-company", company, "-scopes", "contacts:read,events:read", "-expires", "720h")
	key := strings.TrimSpace(out)
	if err != nil || !strings.HasPrefix(key, "rdx_") {
		t.Fatalf("key create = %q, %v", key, err)
	}
	if r := call(t, "GET", "/v1/contacts/count", key, ""); r.status != http.StatusOK {
		t.Errorf("the created key: GET /v1/contacts/count = %d; want 200", r.status)
	}
	wantProblem(t, call(t, "GET", "/v1/business/count", key, ""), http.StatusForbidden, "insufficient_scope")
	out, err = runCLI(t, "key", "list", "-company", company)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); err != nil || len(lines) != 2 || !strings.Contains(lines[1], key[:12]) ||
		!strings.Contains(lines[1], `"scopes":["contacts:read","events:read"]`) || strings.Contains(lines[1], `"expiresAt":null`) {
		t.Errorf("key list = %q, %v; want the first key and the new one with its scopes and expiry", out, err)
	}
	if out, err := runCLI(t, "key", "revoke", key[:12]); err != nil || !strings.Contains(out, "revoked") {
		t.Fatalf("key revoke = %q, %v", out, err)
	}
	// A server trusts a key it has seen for a few seconds; one that never saw it refuses it at once.
	base := startServer(t, nil, io.Discard)
	wantProblem(t, callAt(t, nil, base, "GET", "/v1/contacts/count", key, ""), http.StatusUnauthorized, "unauthorized")
	if _, err := runCLI(t, "key", "revoke", key[:12]); err == nil {
		t.Error("revoking the key again: no error; want one")
	}
}

// A company has at most 100 active keys, however they are made; revoked and expired keys, and a key
// rolled at once, leave room. Creates take turns, so that two at once cannot both pass the limit.
func TestKeysAreAtMost100ActivePerCompany(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for range 97 {
		addKey(t, c.id, 0) // through `rolodex key create`'s function
	}
	last, spare := makeKey(t, c.key, "contacts:read"), makeKey(t, c.key, "contacts:read")
	roll := fmt.Sprintf("/v1/apiKeys/%d/roll", last.ID)
	wantProblem(t, call(t, "POST", "/v1/apiKeys", c.key, `{"scopes": ["*"]}`), http.StatusUnprocessableEntity, "key_limit")
	wantProblem(t, call(t, "POST", roll, c.key, `{"expiresIn": 60}`), http.StatusUnprocessableEntity, "key_limit")
	if out, err := runCLI(t, "key", "create", "-company", strconv.FormatInt(c.id, 10)); err == nil || !strings.Contains(err.Error(), "100") {
		t.Errorf("key create past the limit = %q, %v; want an error naming it", out, err)
	}
	wantStatus(t, call(t, "POST", roll, c.key, `{}`), http.StatusCreated)
	wantStatus(t, call(t, "DELETE", itemPath("/v1/apiKeys", spare.ID), c.key, ""), http.StatusNoContent)
	expired := makeKey(t, c.key, "contacts:read")
	if _, err := testEnv.st.db.Exec(`UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE company_id = $1 AND id = $2`,
		c.id, expired.ID); err != nil {
		t.Fatal(err)
	}
	// With room for one, a create waits for another's transaction, and then finds no room.
	ctx := context.Background()
	pidOf, blockedBy := `SELECT pg_backend_pid()`, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`
	if testEnv.citus { // the lock is on the company's worker (onCompanysWorker)
		pidOf, blockedBy = `SELECT citus_backend_gpid()`, `SELECT count(*) FROM citus_lock_waits WHERE blocking_gpid = $1`
	}
	held, release, done := make(chan int64, 1), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- testEnv.st.write(ctx, func(tx *tx) error {
			_, _, err := insertAPIKey(ctx, tx, c.id, apiKey{Scopes: []string{"contacts:read"}, UserID: c.userID})
			var pid int64
			if err == nil {
				err = tx.queryRow(ctx, pidOf, nil, &pid)
			}
			held <- pid
			<-release
			return err
		})
	}()
	released := false
	defer func() {
		if !released {
			close(release)
			<-done
		}
	}()
	pid := <-held
	answered := make(chan response, 1)
	go func() {
		r, err := send(nil, testEnv.baseURL, "POST", "/v1/apiKeys", c.key, `{"scopes": ["contacts:read"]}`)
		if err != nil {
			t.Error(err)
		}
		answered <- r
	}()
	var r *response
	for r == nil && sqlID(t, blockedBy, pid) == 0 {
		select {
		case a := <-answered:
			r = &a // made without waiting for the other
		case <-time.After(10 * time.Millisecond):
		}
	}
	released = true
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r == nil {
		a := <-answered
		r = &a
	}
	wantProblem(t, *r, http.StatusUnprocessableEntity, "key_limit")
	if n := sqlID(t, `SELECT count(*) FROM api_keys WHERE company_id = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())`, c.id); n != 100 {
		t.Errorf("%d active keys; want 100", n)
	}
}

// No server's memory grows with keys revoked or expired: the keys an authenticator knows for
// limited addresses are made anew from the active ones.
func TestAuthenticatorForgetsRevokedAndExpiredKeys(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ctx := context.Background()
	revoked, expired, active := addKey(t, c.id, 0), addKey(t, c.id, 0), addKey(t, c.id, 0)
	now := time.Now()
	a := newAuthenticator(testEnv.st)
	a.now = func() time.Time { return now }
	known := func(key string) bool {
		ok, err := a.mayBeValid(ctx, hashKey(key))
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !known(revoked) || !known(expired) || !known(active) {
		t.Fatal("three active keys: not all known")
	}
	if err := testEnv.st.revokeAPIKey(ctx, revoked); err != nil {
		t.Fatal(err)
	}
	if _, err := testEnv.st.db.Exec(`UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE company_id = $1 AND prefix = $2`,
		c.id, expired[:keyPrefixLen]); err != nil {
		t.Fatal(err)
	}
	now = now.Add(keyCacheTTL + time.Second)
	if known(randomToken("rdx_")) { // a key it does not know: a refresh, which makes known anew
		t.Fatal("a made-up key is known")
	}
	has := func(key string) bool { h := hashKey(key); return a.isKnown(binary.BigEndian.Uint64(h[:8])) }
	if has(revoked) || has(expired) || !has(active) {
		t.Errorf("after a refresh, known: revoked %v, expired %v, active %v; want only the active key", has(revoked), has(expired), has(active))
	}
}
