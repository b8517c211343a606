package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// API keys (API.md sections 2 and 13): random, shown once, stored only as a SHA-256 and a display
// prefix; maybe scoped and expiring. No key makes, rolls or revokes a key with scopes it does not have.

// scopeResources are what scopes name: "<resource>:read" or "<resource>:write" (write includes read),
// or "*" for all. reference covers users, stages, boards, statuses, currencies and countries.
var scopeResources = []string{"contacts", "business", "organizations", "activities", "reference", "events", "webhooks", "keys", "customFields"}

const (
	maxKeyLifetime = 7 * 24 * time.Hour // how long a rolled key may live on after its replacement is made
	maxActiveKeys  = 100                // keys a company may have that are neither revoked nor expired
)

// errKeyLimit is the answer to a key that would pass maxActiveKeys.
var errKeyLimit error = &apiError{Status: http.StatusUnprocessableEntity, Code: "key_limit",
	Detail: fmt.Sprintf("A company may have at most %d active API keys; revoke one to make another.", maxActiveKeys)}

// covers reports whether scopes grant need: need itself, the write scope of its resource, or "*".
func covers(scopes []string, need string) bool {
	resource, _, _ := strings.Cut(need, ":")
	return slices.ContainsFunc(scopes, func(s string) bool { return s == "*" || s == need || s == resource+":write" })
}

// validScope reports whether s is a scope.
func validScope(s string) bool {
	resource, access, _ := strings.Cut(s, ":")
	return s == "*" || slices.Contains(scopeResources, resource) && (access == "read" || access == "write")
}

// scopeError returns a 403 naming scope unless scopes cover it.
func scopeError(scopes []string, scope string) *apiError {
	if covers(scopes, scope) {
		return nil
	}
	return &apiError{Status: http.StatusForbidden, Code: "insufficient_scope",
		Detail: fmt.Sprintf("This API key does not have the scope %s that this request needs.", scope)}
}

// grantable returns a 403 unless caller's scopes cover every scope of scopes (a * key only a * key).
func grantable(caller tenant, scopes []string) error {
	for _, s := range scopes {
		if aerr := scopeError(caller.scopes, s); aerr != nil {
			aerr.Detail = fmt.Sprintf("This API key cannot make, roll or revoke a key with the scope %s, which it does not have.", s)
			return aerr
		}
	}
	return nil
}

// keyRulesError returns why caller may not make a key with scopes expiring at expires, else nil: a 403
// unless grantable, a 422 on expiresAt when the key would outlive caller. No key makes a way up.
func keyRulesError(caller tenant, scopes []string, expires pgtype.Timestamptz) error {
	if err := grantable(caller, scopes); err != nil {
		return err
	}
	if !caller.expiresAt.IsZero() && (!expires.Valid || expires.Time.After(caller.expiresAt)) {
		return fieldErrors{{Field: "expiresAt", Message: "must be no later than the expiry of the key that makes it, " +
			string(appendTime(nil, caller.expiresAt))}}
	}
	return nil
}

// randomToken returns prefix and 192 random bits in base64url: an API key ("rdx_") or webhook secret.
func randomToken(prefix string) string {
	var b [24]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// hashKey is what is stored of a key: its SHA-256.
func hashKey(key string) [32]byte { return sha256.Sum256([]byte(key)) }

// apiKey is a key as the API shows it: never the key, never its hash.
type apiKey struct {
	refObject
	ID         int64
	Name       string
	Prefix     string
	Scopes     commaList // stored comma-separated
	UserID     int64
	CreatedAt  time.Time
	ExpiresAt  pgtype.Timestamptz
	LastUsedAt pgtype.Timestamptz
}

func (k *apiKey) key() int64 { return k.ID }

func (k *apiKey) scanDest() []any {
	return []any{&k.ID, &k.Name, &k.Prefix, &k.Scopes, &k.UserID, &k.CreatedAt, &k.ExpiresAt, &k.LastUsedAt}
}

func (k *apiKey) appendJSON(b []byte) []byte {
	return appendObject(b, "id", &k.ID, "name", &k.Name, "prefix", &k.Prefix, "scopes", &k.Scopes, "userId", &k.UserID,
		"createdAt", &k.CreatedAt, "expiresAt", &k.ExpiresAt, "lastUsedAt", &k.LastUsedAt)
}

var apiKeys = &resource{path: "/v1/apiKeys", lists: &listSpec{},
	selectSQL: `SELECT id, name, prefix, scopes, user_id, created_at, expires_at, last_used_at
		FROM api_keys WHERE company_id = $1 AND revoked_at IS NULL`}

// commaList is a list of strings a row holds as one comma-separated text (none has a comma).
type commaList []string

func (l *commaList) Scan(v any) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("scan a comma-separated list from %T", v)
	}
	*l = strings.Split(s, ",")
	return nil
}

// scopeList sets a non-empty list of scopes.
func scopeList(p *commaList) func(json.RawMessage) string {
	return func(raw json.RawMessage) string {
		var scopes []string
		if json.Unmarshal(raw, &scopes) != nil || len(scopes) == 0 || len(scopes) > 2*len(scopeResources) {
			return fmt.Sprintf("must be a list of 1 to %d scopes, such as [\"contacts:read\"]", 2*len(scopeResources))
		}
		for _, s := range scopes {
			if !validScope(s) {
				return fmt.Sprintf("names an unknown scope %s; scopes are * or <resource>:read|write, of %s",
					quoteClamped(s), strings.Join(scopeResources, ", "))
			}
		}
		*p = slices.Compact(slices.Sorted(slices.Values(scopes)))
		return ""
	}
}

// expiry sets when a key expires: a time in the future (nullableTime's rules), or null for never.
func expiry(p *pgtype.Timestamptz) func(json.RawMessage) string {
	set := nullableTime(p)
	return func(raw json.RawMessage) string {
		msg := set(raw)
		if msg != "" || !p.Valid || p.Time.After(time.Now()) {
			return msg
		}
		return "must be in the future"
	}
}

// insertAPIKey stores a new key k of the company and returns it with the key itself, kept nowhere
// else; a fieldError for a user the company does not have, errKeyLimit past maxActiveKeys. Round
// trips: the lock and the INSERT (with BEGIN); when it inserted nothing, the user's look-up.
func insertAPIKey(ctx context.Context, tx *tx, companyID int64, k apiKey) (apiKey, string, error) {
	key := randomToken("rdx_")
	hash := hashKey(key)
	k.Prefix = key[:keyPrefixLen]
	// The company's new keys take turns, so that two at once cannot both pass the limit. A lock of the
	// company's row, as createWebhook takes, deadlocks on Citus with the company's own creation, which
	// makes its first key: companies is a reference table there.
	tx.queue(`SELECT pg_advisory_xact_lock(hashtextextended('api_keys ' || $1::bigint::text, 0)) FROM `+onCompanysWorker, companyID)
	const q = `INSERT INTO api_keys (company_id, user_id, prefix, hash, name, scopes, expires_at)
		SELECT $1, id, $3, $4, $5, $6, $7 FROM users WHERE company_id = $1 AND id = $2
			AND (SELECT count(*) FROM api_keys WHERE company_id = $1 AND revoked_at IS NULL
				AND (expires_at IS NULL OR expires_at > now())) < $8
		RETURNING id, created_at`
	args := []any{companyID, k.UserID, k.Prefix, hash[:], k.Name, strings.Join(k.Scopes, ","), k.ExpiresAt, maxActiveKeys}
	err := tx.queryRow(ctx, q, args, &k.ID, &k.CreatedAt)
	switch {
	case errors.Is(err, sql.ErrNoRows): // no such user, or the limit: which?
		var user bool
		const exists = `SELECT EXISTS (SELECT FROM users WHERE company_id = $1 AND id = $2)`
		err = tx.queryRow(ctx, exists, []any{companyID, k.UserID}, &user)
		if err != nil || user {
			return k, "", cmp.Or(err, errKeyLimit)
		}
		return k, "", fieldErrors{{Field: "userId", Message: "must be the id of an existing user"}}
	case err != nil:
		return k, "", fmt.Errorf("insert api key: %w", err)
	}
	return k, key, nil
}

// keyAnswer is the 201 of a new key: its object with the key. An Idempotency-Key keeps it without
// the key, which is stored nowhere: a replay shows the object, and a lost key is rolled.
func keyAnswer(k apiKey, key string) answer {
	b := k.appendJSON(nil)
	open := b[: len(b)-1 : len(b)-1] // without its closing brace; each append copies
	body := append(open, `,"key":`...)
	body = appendString(body, key)
	body = append(body, "}\n"...)
	kept := append(open, `,"key":null}`+"\n"...)
	return answer{
		status:   http.StatusCreated,
		location: apiKeys.path + "/" + strconv.FormatInt(k.ID, 10),
		body:     body,
		kept:     kept,
	}
}

// handleKeyCreate answers POST /v1/apiKeys: 201, the new key's object with the key itself.
func handleKeyCreate(st *store, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		k := apiKey{UserID: t.userID}
		wr := startWrite(w, r, apiKeys, log, []bodyField{
			{"name", requiredText(&k.Name, 255), false},
			{"scopes", scopeList(&k.Scopes), true},
			{"expiresAt", expiry(&k.ExpiresAt), false},
			{"userId", requiredID(&k.UserID), false},
		})
		if wr == nil {
			return
		}
		if err := keyRulesError(t, k.Scopes, k.ExpiresAt); err != nil {
			writeError(w, r, log, err)
			return
		}
		runWrite(w, r, st, log, wr, func(tx *tx) (answer, error) {
			k, key, err := insertAPIKey(r.Context(), tx, t.companyID, k)
			return keyAnswer(k, key), err
		})
	})
}

// handleKeyRoll answers POST /v1/apiKeys/{id}/roll: 201, a new key with the same name, scopes, user
// and expiry, which the caller's key must cover (keyRulesError), while the old one lives on expiresIn
// seconds (0 to 7 days; 0: it ends now). Round trips: the old key's UPDATE (with BEGIN), the INSERT.
func handleKeyRoll(st *store, auth *authenticator, log *slog.Logger) http.Handler {
	// o is the old key as it was: the new one keeps its expiry (keyRulesError).
	const q = `UPDATE api_keys a SET expires_at = least(a.expires_at, now() + $3 * interval '1 second')
		FROM api_keys o WHERE a.company_id = $1 AND a.id = $2 AND o.company_id = a.company_id AND o.id = a.id
			AND a.revoked_at IS NULL AND (a.expires_at IS NULL OR a.expires_at > now())
		RETURNING a.name, a.scopes, a.user_id, a.hash, o.expires_at`
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		noBodyIsEmpty(r) // every member of roll's body is optional
		var expiresIn pgtype.Int8
		var hash []byte // of the old key, to forget once the roll is committed
		body := []bodyField{{"expiresIn", requiredInt(&expiresIn, 0, int64(maxKeyLifetime.Seconds())), false}}
		handleWrite(st, apiKeys, log, body, func(r *http.Request, tx *tx, t tenant, wr *write) (answer, error) {
			var old apiKey // what the new key keeps of it
			err := tx.queryRow(r.Context(), q, []any{t.companyID, wr.id, expiresIn.Int64}, &old.Name, &old.Scopes, &old.UserID, &hash, &old.ExpiresAt)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				return answer{}, errNotFound
			case err != nil:
				return answer{}, fmt.Errorf("roll key %d: %w", wr.id, err)
			}
			if err := keyRulesError(t, old.Scopes, old.ExpiresAt); err != nil {
				return answer{}, err
			}
			k, key, err := insertAPIKey(r.Context(), tx, t.companyID, old)
			return keyAnswer(k, key), err
		}).ServeHTTP(w, r)
		if hash != nil {
			auth.forget(hash)
		}
	})
}

// handleKeyRevoke answers DELETE /v1/apiKeys/{id}: 204; the key stops working at once here, and
// within keyCacheTTL on every other server. A key with scopes beyond the caller's is 403, and stays
// (grantable). Round trips: the UPDATE (with BEGIN).
func handleKeyRevoke(st *store, auth *authenticator, log *slog.Logger) http.Handler {
	const q = `UPDATE api_keys SET revoked_at = date_trunc('milliseconds', now())
		WHERE company_id = $1 AND id = $2 AND revoked_at IS NULL RETURNING hash, scopes`
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var hash []byte // of the key revoked, to forget once the revocation is committed
		handleWrite(st, apiKeys, log, nil, func(r *http.Request, tx *tx, t tenant, wr *write) (answer, error) {
			var scopes commaList
			err := tx.queryRow(r.Context(), q, []any{t.companyID, wr.id}, &hash, &scopes)
			if errors.Is(err, sql.ErrNoRows) {
				err = errNotFound
			}
			return answer{status: http.StatusNoContent}, cmp.Or(err, grantable(t, scopes)) // a refusal rolls it back
		}).ServeHTTP(w, r)
		if hash != nil {
			auth.forget(hash)
		}
	})
}

// cmdKeyCreate is `rolodex key create`: it prints a new key for a user of a company.
func cmdKeyCreate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("key create", "key create -company ID [-user ID] [-scopes a,b] [-expires 720h] [flags]", stderr)
	company := fs.Int64("company", 0, "company id (required)")
	user := fs.Int64("user", 0, "user id (default: the company's first user)")
	scopes := fs.String("scopes", "*", "comma-separated scopes: * or <resource>:read|write, of "+strings.Join(scopeResources, ", "))
	expires := fs.Duration("expires", 0, "how long the key lives (default: until revoked)")
	return withStore(fs, getenv, args, 0, func(st *store) error {
		list := strings.Split(*scopes, ",")
		if *company <= 0 || *user < 0 || *expires < 0 || slices.ContainsFunc(list, func(s string) bool { return !validScope(s) }) {
			fs.Usage()
			return fmt.Errorf("-company must be a positive id, -scopes known scopes, -expires positive: %w", errUsage)
		}
		key, err := st.createAPIKey(ctx, *company, *user, list, *expires)
		if errors.Is(err, errNotFound) {
			err = fmt.Errorf("no company %d with user %d", *company, *user)
		} else if err == nil {
			fmt.Fprintln(stdout, key)
		}
		return err
	})
}

// cmdKeyList is `rolodex key list`: it prints a company's active keys, one JSON object a line.
func cmdKeyList(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("key list", "key list -company ID [flags]", stderr)
	company := fs.Int64("company", 0, "company id (required)")
	return withStore(fs, getenv, args, 0, func(st *store) error {
		if *company <= 0 {
			fs.Usage()
			return fmt.Errorf("-company must be a positive id: %w", errUsage)
		}
		return st.read(ctx, eachRow(apiKeys.selectSQL+` ORDER BY id`, []any{*company}, func(k *apiKey) {
			fmt.Fprintf(stdout, "%s\n", k.appendJSON(nil))
		}))
	})
}

// cmdKeyRevoke is `rolodex key revoke`: it revokes the active key with a prefix.
func cmdKeyRevoke(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("key revoke", "key revoke [flags] KEY_PREFIX", stderr)
	return withStore(fs, getenv, args, 1, func(st *store) error {
		prefix := fs.Arg(0)
		err := st.revokeAPIKey(ctx, prefix)
		if errors.Is(err, errNotFound) {
			err = fmt.Errorf("no active key with prefix %q", prefix)
		} else if err == nil {
			fmt.Fprintf(stdout, "revoked %s (servers stop accepting it within %s)\n", prefix[:min(len(prefix), keyPrefixLen)], keyCacheTTL)
		}
		return err
	})
}

// createAPIKey makes a key for the CLI, of a user of the company (0: its first user), expiring after
// lifetime (0: never); errNotFound when there is no such company or user.
func (s *store) createAPIKey(ctx context.Context, companyID, userID int64, scopes []string, lifetime time.Duration) (string, error) {
	k := apiKey{Scopes: scopes, ExpiresAt: pgtype.Timestamptz{Valid: lifetime > 0,
		Time: time.Now().Add(lifetime).UTC().Truncate(time.Millisecond)}}
	var key string
	err := s.write(ctx, func(tx *tx) (err error) {
		const q = `SELECT id FROM users WHERE company_id = $1 AND ($2::bigint = 0 OR id = $2) ORDER BY id LIMIT 1`
		if err := tx.queryRow(ctx, q, []any{companyID, userID}, &k.UserID); err != nil {
			return fmt.Errorf("find user: %w", err)
		}
		_, key, err = insertAPIKey(ctx, tx, companyID, k)
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return "", errNotFound
	}
	return key, err
}

// revokeAPIKey revokes the active key that is prefixOrKey or has it as display prefix; errNotFound
// when there is none. A prefix of several keys (random, not unique) revokes none: give the whole key.
func (s *store) revokeAPIKey(ctx context.Context, prefixOrKey string) error {
	// A whole key is longer than a prefix: it matches only by its hash, and a prefix only as itself.
	const q = `WITH r AS (UPDATE api_keys SET revoked_at = date_trunc('milliseconds', now())
		WHERE revoked_at IS NULL AND (prefix = $1 OR hash = $2) RETURNING 1) SELECT count(*) FROM r`
	hash := hashKey(prefixOrKey)
	return s.write(ctx, func(tx *tx) error {
		var n int
		switch err := tx.queryRow(ctx, q, []any{prefixOrKey, hash[:]}, &n); {
		case err != nil:
			return fmt.Errorf("revoke key: %w", err)
		case n == 0:
			return errNotFound
		case n > 1:
			return fmt.Errorf("%d active keys have the prefix %s: give the whole key", n, prefixOrKey)
		}
		return nil
	})
}

// activeKeyHashes returns the hashes of the keys neither revoked nor expired made since since.
func (s *store) activeKeyHashes(ctx context.Context, since time.Time) ([][]byte, error) {
	const q = `SELECT coalesce(array_agg(hash), '{}') FROM api_keys
		WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()) AND created_at >= $1`
	var out [][]byte
	if err := s.withConn(ctx, func(c *pgx.Conn) error { return c.QueryRow(ctx, q, since).Scan(&out) }); err != nil {
		return nil, fmt.Errorf("active key hashes: %w", err)
	}
	return out, nil
}

// lookupAPIKey returns the tenant of the active key with this hash, or errNotFound, and keeps its
// lastUsedAt to the minute: at most one lookup a keyCacheTTL per key and server, writing in a new minute.
func (s *store) lookupAPIKey(ctx context.Context, hash [32]byte) (tenant, error) {
	const q = `WITH k AS (
			SELECT company_id, id, user_id, scopes, expires_at, last_used_at FROM api_keys
			WHERE hash = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())),
		used AS (
			UPDATE api_keys a SET last_used_at = date_trunc('minute', now()) FROM k
			WHERE a.company_id = k.company_id AND a.id = k.id
				AND k.last_used_at IS DISTINCT FROM date_trunc('minute', now()))
		SELECT company_id, id, user_id, scopes, expires_at FROM k`
	var t tenant
	var expires pgtype.Timestamptz
	err := s.db.QueryRowContext(ctx, q, hash[:]).Scan(&t.companyID, &t.keyID, &t.userID, (*commaList)(&t.scopes), &expires)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return t, errNotFound
	case err != nil:
		return t, fmt.Errorf("look up key: %w", err)
	}
	t.expiresAt = expires.Time
	return t, nil
}
