package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Idempotency keys (API.md section 10, Stripe's semantics): a POST, PATCH or DELETE sent with an
// Idempotency-Key runs once. Its answer is kept with the key in the change's transaction, and every
// repeat of the request within 24 hours (the interval in the statements below) gets it again.
//
// A write with a key first takes a transaction-level advisory lock on (company, key) without
// waiting: a second request with the key while the first runs is 409 at once, never a second write.
// Under that lock it looks the key up (schema/0005_idempotency.sql). The primary key is the last
// word: if another request with the key committed between that look-up's snapshot and the lock, the
// INSERT of the answer finds its row and this request is 409 too, writing nothing. The look-up goes
// out with the write's first round trip (lookUpKey), all in store.writeOnce.

const (
	maxIdempotencyKeyLen  = 255
	idempotencyExpiration = time.Hour // how often a server deletes the expired keys
)

// The answers to a key whose first request is still running, and to a key used for another request.
var (
	errKeyInUse error = &apiError{Status: http.StatusConflict, Code: "idempotency_key_in_use",
		Detail: "A request with this Idempotency-Key is still running; retry later."}
	errKeyReused error = &apiError{Status: http.StatusUnprocessableEntity, Code: "idempotency_key_reused",
		Detail: "This Idempotency-Key was used for another request (method, path or body)."}
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
	return &idempotencyKey{key: k, fingerprint: [32]byte(h.Sum(nil))}, nil
}

// answer is the answer to a write: what is sent, and what an Idempotency-Key keeps and replays.
type answer struct {
	status   int
	location string // the Location header; "": none
	etag     string // the ETag header; "": none
	body     []byte // JSON; a problem+json body from status 400 up; empty for 204
	kept     []byte // what an Idempotency-Key keeps instead of body, when not nil
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

// errReplay fails the round trip of a look-up that found this request's answer kept for its key:
// the write stops there, its statements are rolled back, and writeOnce returns the kept answer.
var errReplay = errors.New("the idempotency key has an answer kept")

// writeOnce runs do, a write of the company, in one transaction (store.write) and returns its answer.
// With an Idempotency-Key ik, an answer kept for the same request is returned instead, replayed, and
// nothing is written; else do's answer (any it returns without an error: 2xx, and the 404 and 412
// the database found) is kept for ik in the same transaction. A request refused before it ran keeps
// nothing, so that the client may correct it and send it again with the same key.
func (s *store) writeOnce(ctx context.Context, companyID int64, ik *idempotencyKey, do func(*tx) (answer, error)) (a answer, replayed bool, err error) {
	var kept answer
	err = s.write(ctx, func(tx *tx) (err error) {
		if ik != nil {
			lookUpKey(tx, companyID, ik, &kept)
		}
		a, err = do(tx)
		if err == nil && ik != nil {
			keepAnswer(tx, companyID, ik, a)
		}
		return err
	})
	if errors.Is(err, errReplay) {
		return kept, true, nil
	}
	// lookUpKey's division by zero, or keepAnswer's INSERT: the one unique violation the committing
	// round trip can have (Citus does not pass on the constraint's name).
	code := pgCode(err)
	if code == "22012" || code == "23505" && errors.Is(err, errCommit) {
		err = errKeyInUse
	}
	return a, false, err
}

// lookUpKey queues in tx the look-up of ik, to go out with the write's next round trip. That round
// trip then fails with errKeyInUse when another request holds the key's lock, errKeyReused when the
// answer kept is of another request, and errReplay (the answer in kept) when it is of this one. A
// held lock fails the look-up itself, by a division by zero, so the statements sent with it never
// run and none waits for the lock's holder. After a kept answer they run and are rolled back (an
// INSERT of keepAnswer's fails on the key's row first).
func lookUpKey(tx *tx, companyID int64, ik *idempotencyKey, kept *answer) {
	const q = `SELECT 1 / pg_try_advisory_xact_lock(hashtextextended($1::text || ' ' || $2, 0))::int,
			k.fingerprint, coalesce(k.status, 0), coalesce(k.location, ''), coalesce(k.etag, ''), k.body
		FROM (SELECT) AS one LEFT JOIN idempotency_keys k
			ON k.company_id = $1 AND k.key = $2 AND k.created_at > now() - interval '24 hours'`
	tx.queueRow(q, []any{companyID, ik.key}, func(row pgx.Row) error {
		var fingerprint []byte
		if err := row.Scan(nil, &fingerprint, &kept.status, &kept.location, &kept.etag, &kept.body); err != nil {
			return fmt.Errorf("look up idempotency key: %w", err)
		}
		switch {
		case fingerprint == nil:
			return nil // a new key: the write goes on
		case string(fingerprint) != string(ik.fingerprint[:]):
			return errKeyReused
		}
		return errReplay
	})
}

// keepAnswer queues in tx, to go out with COMMIT, the statements that keep a for ik, replacing an
// expired row of the key. A live row was written since the look-up: the INSERT fails (errKeyInUse).
func keepAnswer(tx *tx, companyID int64, ik *idempotencyKey, a answer) {
	body := a.body
	if a.kept != nil {
		body = a.kept
	}
	tx.queue(`DELETE FROM idempotency_keys WHERE company_id = $1 AND key = $2
		AND created_at <= now() - interval '24 hours'`, companyID, ik.key)
	tx.queue(`INSERT INTO idempotency_keys (company_id, key, fingerprint, status, location, etag, body)
		VALUES ($1, $2, $3, $4, $5, $6, coalesce($7::bytea, ''))`,
		companyID, ik.key, ik.fingerprint[:], a.status, a.location, a.etag, body)
}

// deleteExpiredKeys deletes up to deleteBatch keys older than 24 hours, oldest first through the
// created_at index (no table scan, no long lock), and returns how many it deleted.
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
