package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Idempotency keys (API.md section 10, Stripe's semantics): a POST, PATCH or DELETE sent with an
// Idempotency-Key runs once. Its answer is kept with the key, in the transaction of the change it
// answers, and every repeat of the same request within 24 hours gets that answer again.
//
// A write with a key first takes a transaction-level advisory lock on (company, key) without
// waiting: a second request with the key while the first runs is 409 at once, never a second write.
// Under that lock it looks the key up (schema/0005_idempotency.sql). The primary key is the last
// word: if another request with the key committed between that look-up's snapshot and the lock, the
// INSERT of the answer finds its row and this request is 409 too, writing nothing.

// Keys are kept 24 hours (the interval in the statements below).
const (
	maxIdempotencyKeyLen  = 255
	idempotencyExpiration = time.Hour // how often a server deletes the expired keys
)

var (
	errKeyInUse  = errors.New("idempotency key in use") // its first request is still running
	errKeyReused = errors.New("idempotency key reused") // it was used for another request
)

// idempotencyKey is the Idempotency-Key of a write and the fingerprint of the request it names.
type idempotencyKey struct {
	key         string
	fingerprint [32]byte
}

// readIdempotencyKey returns the request's Idempotency-Key (nil when it has none), or a 400 when it
// is not 1 to 255 printable ASCII characters, or is sent twice. The fingerprint covers the method,
// the path with its query, and the body's members as sent.
func readIdempotencyKey(r *http.Request, members []member) (*idempotencyKey, *apiError) {
	vs := r.Header.Values("Idempotency-Key")
	if len(vs) == 0 {
		return nil, nil
	}
	k := vs[0]
	if len(vs) > 1 || k == "" || len(k) > maxIdempotencyKeyLen ||
		strings.IndexFunc(k, func(c rune) bool { return c < ' ' || c > '~' }) >= 0 {
		return nil, badRequest("invalid_idempotency_key",
			fmt.Sprintf("The Idempotency-Key header must be sent once, with 1 to %d printable ASCII characters.", maxIdempotencyKeyLen))
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s %s\n", r.Method, r.URL.RequestURI())
	for _, m := range members { // each value is one whole JSON value, so the sequence reads back one way only
		fmt.Fprintf(h, "%q:%s\n", m.name, m.raw)
	}
	ik := &idempotencyKey{key: k}
	h.Sum(ik.fingerprint[:0])
	return ik, nil
}

// answer is the answer to a write: what is sent, and what an Idempotency-Key keeps and replays.
type answer struct {
	status         int
	location, etag string
	body           []byte // JSON; a problem+json body from status 400 up; empty for 204
	kept           []byte // what an Idempotency-Key keeps instead of body, when not nil
}

// write sends a; replayed marks an answer kept for an Idempotency-Key and sent again.
func (a *answer) write(w http.ResponseWriter, r *http.Request, replayed bool) {
	h := w.Header()
	if a.location != "" {
		h.Set("Location", a.location)
	}
	if a.etag != "" {
		h.Set("ETag", a.etag)
	}
	if replayed {
		h.Set("Idempotent-Replayed", "true")
	}
	switch {
	case a.status >= 400:
		writeProblemBody(w, a.status, a.body)
	case len(a.body) == 0:
		w.WriteHeader(a.status)
	default:
		writeJSON(w, r, a.status, a.body)
	}
}

// keeps reports whether an answer is kept for its key: those of requests that ran (2xx, and the 404
// and 412 that the database found). A request refused before it ran keeps nothing, so that the
// client may correct it and send it again with the same key.
func (a *answer) keeps() bool {
	return a.status < 300 || a.status == http.StatusNotFound || a.status == http.StatusPreconditionFailed
}

// beginWrite begins the transaction of a write of the company. With an Idempotency-Key it takes the
// key's lock without waiting (errKeyInUse when another request holds it) and returns the answer kept
// for the key, if any, having ended the transaction; errKeyReused when that answer is of another
// request.
func (s *store) beginWrite(ctx context.Context, companyID int64, ik *idempotencyKey) (*sql.Tx, *answer, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil || ik == nil {
		return tx, nil, err
	}
	const q = `SELECT pg_try_advisory_xact_lock(hashtextextended($1::text || ' ' || $2, 0)),
			k.fingerprint, coalesce(k.status, 0), coalesce(k.location, ''), coalesce(k.etag, ''), k.body
		FROM (SELECT) AS one LEFT JOIN idempotency_keys k
			ON k.company_id = $1 AND k.key = $2 AND k.created_at > now() - interval '24 hours'`
	var locked bool
	var fingerprint []byte
	var a answer
	err = tx.QueryRowContext(ctx, q, companyID, ik.key).
		Scan(&locked, &fingerprint, &a.status, &a.location, &a.etag, &a.body)
	switch {
	case err != nil:
		err = fmt.Errorf("look up idempotency key: %w", err)
	case !locked:
		err = errKeyInUse
	case fingerprint == nil:
		return tx, nil, nil // a new key: the write goes on
	case string(fingerprint) != string(ik.fingerprint[:]):
		err = errKeyReused
	}
	tx.Rollback()
	if err != nil {
		return nil, nil, err
	}
	return nil, &a, nil
}

// commitWrite keeps a for the Idempotency-Key (when there is one and a is kept) in tx, and commits.
func (s *store) commitWrite(ctx context.Context, tx *sql.Tx, companyID int64, ik *idempotencyKey, a answer) error {
	if ik != nil && a.keeps() {
		body := a.body
		if a.kept != nil {
			body = a.kept
		}
		// An expired row of the key is replaced; a live one was written since the look-up.
		const q = `INSERT INTO idempotency_keys (company_id, key, fingerprint, status, location, etag, body)
			VALUES ($1, $2, $3, $4, $5, $6, coalesce($7::bytea, ''))
			ON CONFLICT (company_id, key) DO UPDATE SET fingerprint = excluded.fingerprint,
				status = excluded.status, location = excluded.location, etag = excluded.etag,
				body = excluded.body, created_at = excluded.created_at
			WHERE excluded.created_at - idempotency_keys.created_at >= interval '24 hours'`
		res, err := tx.ExecContext(ctx, q, companyID, ik.key, ik.fingerprint[:], a.status, a.location, a.etag, body)
		if err != nil {
			return fmt.Errorf("keep idempotency key: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errKeyInUse
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// deleteExpiredKeys deletes up to deleteBatch keys older than 24 hours, oldest first through
// the created_at index (no table scan, and no long lock), and returns how many it deleted.
func (s *store) deleteExpiredKeys(ctx context.Context) (int64, error) {
	const q = `DELETE FROM idempotency_keys WHERE (company_id, key) IN (
		SELECT company_id, key FROM idempotency_keys WHERE created_at <= now() - interval '24 hours'
		ORDER BY created_at LIMIT $1)`
	res, err := s.db.ExecContext(ctx, q, deleteBatch)
	if err != nil {
		return 0, fmt.Errorf("delete expired idempotency keys: %w", err)
	}
	return res.RowsAffected()
}
