package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// Webhooks (API.md section 12): a company's endpoints, and a worker in every server that posts each
// event to the endpoints that take it, signed, retried, at least once.
//
// The statement that writes an event writes its pending deliveries too (recordEvents): a committed
// change always has them, a failed one none. The worker leases due deliveries with one UPDATE, which
// moves next_attempt_at ahead only where it is still the one read, posts each with no transaction
// open, and records the attempt only while the lease is its own. A server killed mid-delivery leaves
// the lease to run out; any server sends it again, and receivers de-duplicate on Rolodex-Event-Id.
//
// Server-side request forgery: an endpoint's host must resolve only to public addresses when it is
// set, and the worker's dialer checks the address it connects to (a DNS answer that changes later
// cannot reach inside), unless -webhook-allow-cidrs allows it.

const (
	maxWebhookEndpoints   = 16               // per company
	maxWebhookURLLen      = 2048             // characters
	webhookTimeout        = 10 * time.Second // what one attempt may take, answer included
	maxWebhookAnswer      = 64 << 10         // bytes of an answer read; the rest is never received
	webhookGiveUp         = 72 * time.Hour   // 3 days: a delivery fails once its next attempt would be later
	maxWebhookBackoff     = 6 * time.Hour    // the longest wait between two attempts
	webhookLease          = 30 * time.Second // how long a delivery being sent is left to its server
	secretOverlap         = 24 * time.Hour   // how long a rotated secret signs beside its replacement
	webhookPoll           = 250 * time.Millisecond
	webhookEndpointSlots  = 4 // deliveries a server sends to one endpoint at once
	defaultWebhookSlots   = 32
	defaultWebhookBackoff = 30 * time.Second
)

// webhookSettings are a server's webhook settings (rolodex serve -h).
type webhookSettings struct {
	backoff time.Duration  // the wait before a failed delivery is sent again, doubled each time
	allow   []netip.Prefix // addresses webhooks may go to besides public ones
	slots   int            // deliveries the server sends at once; 0: none
	metrics *metrics       // counts the attempts; nil: none
}

// errWebhookLimit is the answer to an endpoint that would pass maxWebhookEndpoints.
var errWebhookLimit error = &apiError{Status: http.StatusUnprocessableEntity, Code: "webhook_limit_reached",
	Detail: fmt.Sprintf("A company may have at most %d webhook endpoints; delete one to add another.", maxWebhookEndpoints)}

// webhookEndpoint is where a company wants its events posted.
type webhookEndpoint struct {
	refObject
	ID             int64
	URL            string
	Events         commaList // event types, families ("contact.*") or "*"; none has a comma
	Description    pgtype.Text
	Enabled        bool
	DisabledReason pgtype.Text  // why the server disabled it
	Secret         *pgtype.Text // set only in the answers that make one (secretAnswer)
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

func (e *webhookEndpoint) key() int64 { return e.ID }

func (e *webhookEndpoint) scanDest() []any {
	return []any{&e.ID, &e.URL, &e.Events, &e.Description, &e.Enabled, &e.DisabledReason, &e.CreatedAt, &e.UpdatedAt}
}

func (e *webhookEndpoint) appendJSON(b []byte) []byte {
	kv := []any{"id", &e.ID, "url", &e.URL, "events", &e.Events, "description", &e.Description,
		"enabled", &e.Enabled, "disabledReason", &e.DisabledReason}
	if e.Secret != nil {
		kv = append(kv, "secret", e.Secret)
	}
	kv = append(kv, "createdAt", &e.CreatedAt, "updatedAt", &e.UpdatedAt)
	return appendObject(b, kv...)
}

func (e *webhookEndpoint) fields() []bodyField {
	return []bodyField{
		{"url", webhookURL(&e.URL), true},
		{"events", eventFilterList(&e.Events), true},
		{"description", nullableText(&e.Description, 255, nil), false},
		{"enabled", boolean(&e.Enabled), false},
	}
}

var webhooks = &resource{path: "/v1/webhooks", table: "webhook_endpoints", lists: &listSpec{},
	selectSQL: `SELECT id, url, array_to_string(events, ','), description, enabled, disabled_reason,
		created_at, updated_at FROM webhook_endpoints WHERE company_id = $1`}

// webhookURL sets an endpoint URL: absolute http(s), at most maxWebhookURLLen characters, without
// credentials, with a port (if any) from 1 to 65535. Where its host leads, checkWebhookHost checks.
func webhookURL(p *string) func(json.RawMessage) string {
	return func(raw json.RawMessage) string {
		if isNull(raw) {
			return "is required"
		}
		s, msg := jsonString(raw, maxWebhookURLLen)
		msg = cmp.Or(msg, checkHTTPURL(s))
		if msg != "" {
			return msg
		}
		u, _ := url.Parse(s)
		if u.User != nil {
			return "must not hold credentials (user:password@)"
		}
		if n, err := strconv.ParseUint(cmp.Or(u.Port(), "1"), 10, 16); err != nil || n == 0 { // url.Parse took only digits
			return "must have a port from 1 to 65535"
		}
		*p = s
		return ""
	}
}

// eventFilterList sets an endpoint's events: 1 to 32 event types, families or "*".
func eventFilterList(p *commaList) func(json.RawMessage) string {
	return func(raw json.RawMessage) string {
		var fs []string
		if json.Unmarshal(raw, &fs) != nil || len(fs) == 0 || len(fs) > 32 {
			return "must be an array of 1 to 32 event types"
		}
		for _, f := range fs {
			if f != "*" && len(typesNamed(f)) == 0 {
				return fmt.Sprintf("names no event type (%s); one is a type such as contact.created, a family such as contact.* or *, all of them; GET /v1/openapi.json lists the types",
					quoteClamped(f))
			}
		}
		*p = fs
		return ""
	}
}

// refusedPrefixes are addresses no webhook goes to, besides those netip calls loopback, private
// (with fd00:ec2::254, a cloud metadata address), link-local (with 169.254.169.254, another),
// multicast or unspecified, and IPv6 outside globalIPv6: unless -webhook-allow-cidrs allows them.
var refusedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // this network
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and the broadcast address
	netip.MustParsePrefix("2001::/23"),       // IETF protocol assignments: Teredo, benchmarking, ...
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("3fff::/20"),       // documentation
}

// globalIPv6 is the only IPv6 space allocated for global unicast. Outside it are ::/8 (but for
// the IPv4 it embeds, see ipv4Inside), 100::/64 (discard), fc00::/7 (unique local), fec0::/10
// (site-local), 64:ff9b:1::/48 (local NAT64) and the unallocated rest.
var globalIPv6 = netip.MustParsePrefix("2000::/3")

// ipv4Inside are the IPv6 prefixes that embed or translate to an IPv4 address, and its first byte.
var ipv4Inside = []struct {
	prefix netip.Prefix
	at     int
}{
	{netip.MustParsePrefix("::/96"), 12},           // IPv4-compatible, and :: and ::1
	{netip.MustParsePrefix("::ffff:0:0/96"), 12},   // IPv4-mapped
	{netip.MustParsePrefix("::ffff:0:0:0/96"), 12}, // IPv4-translated
	{netip.MustParsePrefix("64:ff9b::/96"), 12},    // NAT64
	{netip.MustParsePrefix("2002::/16"), 2},        // 6to4
}

// allowedAddr reports whether a webhook may go to ip: a public address, or one inside allow, judged
// by the IPv4 address it embeds if any. checkWebhookHost and the webhook client's dialer both ask it.
func allowedAddr(ip netip.Addr, allow []netip.Prefix) bool {
	inner := ip.WithZone("") // a prefix contains no zoned address
	for _, in := range ipv4Inside {
		if in.prefix.Contains(inner) {
			b := inner.As16()
			inner = netip.AddrFrom4([4]byte(b[in.at : in.at+4]))
			break
		}
	}
	if slices.ContainsFunc(allow, func(p netip.Prefix) bool { return p.Contains(ip) || p.Contains(inner) }) {
		return true
	}
	if !inner.IsGlobalUnicast() || inner.IsPrivate() || inner.Is6() && !globalIPv6.Contains(inner) {
		return false
	}
	return !slices.ContainsFunc(refusedPrefixes, func(p netip.Prefix) bool { return p.Contains(inner) })
}

// checkWebhookHost returns an error naming rawURL's host unless it resolves, and only to addresses
// allowedAddr admits. Either way the error is the same and names no address: it maps no internal DNS.
func checkWebhookHost(ctx context.Context, rawURL string, allow []netip.Prefix) []fieldError {
	u, _ := url.Parse(rawURL) // webhookURL parsed it
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", u.Hostname())
	if err == nil && len(ips) > 0 && !slices.ContainsFunc(ips, func(ip netip.Addr) bool { return !allowedAddr(ip, allow) }) {
		return nil
	}
	return []fieldError{{Field: "url", Message: fmt.Sprintf("must have a host that resolves only to public addresses, and %s does not "+
		"(ROLODEX_WEBHOOK_ALLOW_CIDRS can allow others)", clampText(u.Hostname(), 80))}}
}

// errRefusedAddress is the error of a connection the webhook client refused to open.
var errRefusedAddress = errors.New("not a public address, nor one the server allows")

// newWebhookClient returns the client deliveries are posted with: every phase timed, no redirects
// followed (the 3xx is the answer), no proxy (one would connect for it, unchecked), and a dialer
// that refuses, before connecting, any address allowedAddr does not admit.
func newWebhookClient(allow []netip.Prefix) *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !allowedAddr(ap.Addr(), allow) {
			return errRefusedAddress // the error names the address
		}
		return nil
	}}
	return &http.Client{
		Timeout:       webhookTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{
			DialContext:           dialer.DialContext,
			TLSHandshakeTimeout:   5 * time.Second,
			ResponseHeaderTimeout: webhookTimeout,
			MaxIdleConnsPerHost:   webhookEndpointSlots,
			IdleConnTimeout:       90 * time.Second,
		},
	}
}

// handleWebhookCreate answers POST /v1/webhooks: 201, the endpoint with its secret, shown only here.
// The key must read the events the endpoint takes, and then the URL's host is resolved, before the
// write: a key that may not make the endpoint learns nothing of a host (and costs no look-up).
func handleWebhookCreate(st *store, allow []netip.Prefix, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		v := webhookEndpoint{Enabled: true}
		wr := startWrite(w, r, webhooks, log, v.fields())
		if wr == nil {
			return
		}
		if aerr := eventScopeError(t.scopes, v.Events); aerr != nil {
			writeProblem(w, r, aerr)
			return
		}
		if errs := checkWebhookHost(r.Context(), v.URL, allow); errs != nil {
			writeError(w, r, log, fieldErrors(errs))
			return
		}
		runWrite(w, r, st, log, wr, func(tx *tx) (answer, error) {
			v, err := createWebhook(r.Context(), tx, t, v)
			return secretAnswer(v), err
		})
	})
}

// handleWebhookUpdate answers PATCH /v1/webhooks/{id} (updateWebhook): 404, or the answer kept for its
// key, before the body is checked; the events and then a new URL's host, as at creation, before the write.
func handleWebhookUpdate(st *store, allow []netip.Prefix, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		wr := startWrite(w, r, webhooks, log, nil)
		if wr == nil {
			return
		}
		if _, _, err := getObject[webhookEndpoint](r.Context(), st.read, webhooks, t.companyID, wr.id, nil); err != nil {
			runWrite(w, r, st, log, wr, func(*tx) (answer, error) { return answer{}, err })
			return
		}
		var scratch webhookEndpoint // the body alone, checked before the write
		if errs := applyMembers(wr.members, scratch.fields(), readOnlyFields); errs != nil {
			writeError(w, r, log, fieldErrors(errs))
			return
		}
		if aerr := eventScopeError(t.scopes, scratch.Events); aerr != nil {
			writeProblem(w, r, aerr)
			return
		}
		if hasMember(wr.members, "url") {
			if errs := checkWebhookHost(r.Context(), scratch.URL, allow); errs != nil {
				writeError(w, r, log, fieldErrors(errs))
				return
			}
		}
		runWrite(w, r, st, log, wr, func(tx *tx) (answer, error) {
			v, err := updateWebhook(r.Context(), tx, t, wr.id, patch{members: wr.members})
			return answer{status: http.StatusOK, body: append(v.appendJSON(nil), '\n')}, err
		})
	})
}

// createWebhook stores v, a new endpoint of the company sent the families of events the tenant's key
// reads, in tx with a new secret; errWebhookLimit past maxWebhookEndpoints. Round trips: the company's
// lock and the INSERT (with BEGIN).
func createWebhook(ctx context.Context, tx *tx, t tenant, v webhookEndpoint) (webhookEndpoint, error) {
	// The company's creates take turns, so that two at once cannot both pass the limit. No other
	// write waits for this lock: theirs on the company row (foreign keys') are weaker.
	tx.queue(`SELECT FROM companies WHERE id = $1 FOR NO KEY UPDATE`, t.companyID)
	const q = `INSERT INTO webhook_endpoints (company_id, url, events, description, enabled, secret, families)
		SELECT $1, $2, $3, $4, $5, $6, $8 WHERE (SELECT count(*) FROM webhook_endpoints WHERE company_id = $1) < $7
		RETURNING id, created_at, updated_at`
	v.Secret = &pgtype.Text{String: randomToken("whsec_"), Valid: true}
	args := []any{t.companyID, v.URL, []string(v.Events), v.Description, v.Enabled, v.Secret.String, maxWebhookEndpoints,
		readableFamilies(t.scopes)}
	err := tx.queryRow(ctx, q, args, &v.ID, &v.CreatedAt, &v.UpdatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		err = errWebhookLimit
	} else if err != nil {
		err = fmt.Errorf("insert webhook endpoint: %w", mapWriteError(err))
	}
	return v, err
}

// updateWebhook applies p to the company's endpoint id in tx: enabling clears disabledReason, a
// change sets the families the tenant's key reads. Round trips: the lock (with BEGIN), the UPDATE.
func updateWebhook(ctx context.Context, tx *tx, t tenant, id int64, p patch) (webhookEndpoint, error) {
	_, v, changed, err := lockObject[webhookEndpoint](ctx, tx, webhooks, t.companyID, id, p)
	if err != nil || !changed {
		return v, err
	}
	if v.Enabled {
		v.DisabledReason = pgtype.Text{}
	}
	const q = `UPDATE webhook_endpoints SET url = $3, events = $4, description = $5, enabled = $6,
		disabled_reason = $7, families = $8, ` + touched + `
		WHERE company_id = $1 AND id = $2 RETURNING updated_at`
	args := []any{t.companyID, id, v.URL, []string(v.Events), v.Description, v.Enabled, v.DisabledReason, readableFamilies(t.scopes)}
	err = tx.queryRow(ctx, q, args, &v.UpdatedAt)
	if err != nil {
		return v, fmt.Errorf("update webhook endpoint %d: %w", id, mapWriteError(err))
	}
	return v, nil
}

// secretAnswer is the 201 of v with its new secret. An Idempotency-Key keeps it with "secret": null:
// a replay never shows the secret, and a lost one is rotated.
func secretAnswer(v webhookEndpoint) answer {
	a := answer{
		status:   http.StatusCreated,
		body:     append(v.appendJSON(nil), '\n'),
		location: webhooks.path + "/" + strconv.FormatInt(v.ID, 10),
	}
	v.Secret = &pgtype.Text{} // "secret": null
	a.kept = append(v.appendJSON(nil), '\n')
	return a
}

// handleWebhookRotate answers POST /v1/webhooks/{id}/rotateSecret (body {} or none): 201, the endpoint with a
// new secret. The old one signs too for secretOverlap, so that receivers switch without refusing any.
// Round trips: the lock (lockObject, with BEGIN), the UPDATE.
func handleWebhookRotate(st *store, log *slog.Logger) http.Handler {
	const q = `UPDATE webhook_endpoints SET previous_secret = secret, secret = $3, secret_rotated_at = now(),
			` + touched + `
		WHERE company_id = $1 AND id = $2 RETURNING updated_at`
	rotate := handleWrite(st, webhooks, log, []bodyField{}, func(r *http.Request, tx *tx, t tenant, wr *write) (answer, error) {
		v, _, _, err := lockObject[webhookEndpoint](r.Context(), tx, webhooks, t.companyID, wr.id, patch{})
		if err != nil {
			return answer{}, err
		}
		v.Secret = &pgtype.Text{String: randomToken("whsec_"), Valid: true}
		if err := tx.queryRow(r.Context(), q, []any{t.companyID, wr.id, v.Secret.String}, &v.UpdatedAt); err != nil {
			return answer{}, fmt.Errorf("rotate secret of webhook endpoint %d: %w", wr.id, err)
		}
		return secretAnswer(v), nil
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		noBodyIsEmpty(r) // the body is {} or none, as roll's may be
		rotate.ServeHTTP(w, r)
	})
}

// delivery is one event owed to one endpoint, as GET /v1/webhooks/{id}/deliveries lists it.
type delivery struct {
	refObject
	ID             int64
	EventID        int64
	EventType      string
	Status         string // pending, delivered or failed
	Attempts       int64
	LastStatusCode pgtype.Int8
	LastError      pgtype.Text
	NextAttemptAt  time.Time // shown while pending
	DeliveredAt    pgtype.Timestamptz
	CreatedAt      time.Time
}

func (d *delivery) key() int64 { return d.ID }

func (d *delivery) scanDest() []any {
	return []any{&d.ID, &d.EventID, &d.EventType, &d.Status, &d.Attempts, &d.LastStatusCode, &d.LastError,
		&d.NextAttemptAt, &d.DeliveredAt, &d.CreatedAt}
}

func (d *delivery) appendJSON(b []byte) []byte {
	next := pgtype.Timestamptz{Time: d.NextAttemptAt, Valid: d.Status == "pending"}
	return appendObject(b, "id", &d.ID, "eventId", &d.EventID, "eventType", &d.EventType, "status", &d.Status,
		"attempts", &d.Attempts, "lastStatusCode", &d.LastStatusCode, "lastError", &d.LastError,
		"nextAttemptAt", &next, "deliveredAt", &d.DeliveredAt, "createdAt", &d.CreatedAt)
}

// deliveries are listed by GET /v1/webhooks/{id}/deliveries: the endpoint's, newest first (handleList).
var deliveries = &resource{path: "/v1/webhooks/deliveries", lists: &listSpec{newestFirst: true}, parent: webhooks, parentCol: "endpoint_id",
	selectSQL: `SELECT ` + deliveryColumns + ` FROM webhook_deliveries WHERE company_id = $1`}

const deliveryColumns = `id, event_id, event_type, status, attempts, last_status_code, last_error, next_attempt_at,
	delivered_at, created_at`

// handleWebhookRetry answers POST /v1/webhooks/{id}/deliveries/{deliveryId}/retry (body {}): 202,
// the delivery, pending and due now, whatever its status was. Round trips: the UPDATE (with BEGIN).
func handleWebhookRetry(st *store, log *slog.Logger) http.Handler {
	const q = `UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = now()
		WHERE company_id = $1 AND endpoint_id = $2 AND id = $3 RETURNING ` + deliveryColumns
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deliveryID, ok := parseID(r.PathValue("deliveryId"))
		if !ok {
			writeProblem(w, r, badRequest("invalid_id", fmt.Sprintf("The delivery id in the path must be a positive integer; got %q.", r.PathValue("deliveryId"))))
			return
		}
		handleWrite(st, deliveries, log, []bodyField{}, func(r *http.Request, tx *tx, t tenant, wr *write) (answer, error) {
			var d delivery
			err := tx.queryRow(r.Context(), q, []any{t.companyID, wr.id, deliveryID}, d.scanDest()...)
			if errors.Is(err, sql.ErrNoRows) {
				err = errNotFound
			}
			return answer{status: http.StatusAccepted, body: append(d.appendJSON(nil), '\n')}, err
		}).ServeHTTP(w, r)
	})
}

// claimed is a delivery a worker took, with what sending it needs.
type claimed struct {
	companyID  int64
	id         int64
	endpointID int64
	attempts   int64
	lease      time.Time // its next_attempt_at while this server sends it
	url        string
	secret     string
	previous   pgtype.Text        // the secret the last rotation replaced
	rotatedAt  pgtype.Timestamptz // when: previous signs too for secretOverlap
	enabled    bool
	event      event
}

func (c *claimed) scanDest() []any {
	return append([]any{&c.companyID, &c.id, &c.endpointID, &c.attempts, &c.lease, &c.url, &c.secret,
		&c.previous, &c.rotatedAt, &c.enabled}, c.event.scanDest()...)
}

// claimDeliveries takes up to n due deliveries for this server to send, and leases them: at most
// webhookEndpointSlots to one endpoint, counting sending[i] already being sent to endpoints[i].
func (s *store) claimDeliveries(ctx context.Context, n int, endpoints, sending []int64) ([]claimed, error) {
	// due: the first due deliveries, but of endpoints with no slot left. picked: of those, the first
	// that fit their endpoint's slots. No FOR UPDATE: Citus refuses it across shards; the UPDATE's
	// own check of next_attempt_at keeps a delivery to the server that moved it first.
	const q = `WITH busy (endpoint_id, sending) AS (SELECT * FROM unnest($1::bigint[], $2::bigint[])),
		due AS (
			SELECT company_id, id, endpoint_id, next_attempt_at FROM webhook_deliveries
			WHERE status = 'pending' AND next_attempt_at <= now()
				AND endpoint_id NOT IN (SELECT endpoint_id FROM busy WHERE sending >= $3)
			ORDER BY next_attempt_at LIMIT $6),
		picked AS (
			SELECT company_id, id, next_attempt_at FROM (
				SELECT due.company_id, due.id, due.next_attempt_at, coalesce(busy.sending, 0) +
					row_number() OVER (PARTITION BY due.endpoint_id ORDER BY due.next_attempt_at) AS nth
				FROM due LEFT JOIN busy USING (endpoint_id)) ranked
			WHERE nth <= $3 ORDER BY next_attempt_at LIMIT $4)
		UPDATE webhook_deliveries d SET next_attempt_at = now() + $5 * interval '1 millisecond'
		FROM picked, webhook_endpoints w, events e
		WHERE d.company_id = picked.company_id AND d.id = picked.id AND d.next_attempt_at = picked.next_attempt_at
			AND w.company_id = d.company_id AND w.id = d.endpoint_id
			AND e.company_id = d.company_id AND e.id = d.event_id
		RETURNING d.company_id, d.id, d.endpoint_id, d.attempts, d.next_attempt_at, w.url, w.secret,
			w.previous_secret, w.secret_rotated_at, w.enabled,
			e.id, e.xid::text::bigint, e.type, e.created_at, e.request_id, e.object, e.previous`
	ctx, cancel := backgroundContext(ctx) // a database that hangs holds up no worker
	defer cancel()
	var out []claimed // an error is logged as "take webhook deliveries" (runWebhooks)
	err := s.read(ctx, rowsInto[claimed](&out, q, endpoints, sending, webhookEndpointSlots, n, webhookLease.Milliseconds(),
		n*webhookEndpointSlots))
	return out, err
}

// recordAttempt writes how an attempt at c went (status 0: no answer, or none for a disabled
// endpoint): delivered on a 2xx; else due again after backoff, doubled for each earlier attempt up
// to maxWebhookBackoff, or failed when that is past webhookGiveUp from its creation or the endpoint
// is disabled. A failure disables an endpoint with no success within webhookGiveUp; recordAttempt
// reports whether it did. A lost lease writes nothing.
func (s *store) recordAttempt(ctx context.Context, c claimed, status int, errText string, backoff time.Duration) (bool, error) {
	// The times are worked out once, in t: on Citus a CASE may not call now(), and now() + interval
	// may not take a column.
	const q = `WITH d AS (
			UPDATE webhook_deliveries SET attempts = attempts + $6::boolean::int, last_status_code = $4, last_error = $5,
				status = CASE WHEN $4 BETWEEN 200 AND 299 THEN 'delivered'
					WHEN NOT $6 OR created_at < t.give_up THEN 'failed' ELSE 'pending' END,
				delivered_at = CASE WHEN $4 BETWEEN 200 AND 299 THEN t.now ELSE delivered_at END,
				next_attempt_at = t.next
			FROM (SELECT date_trunc('milliseconds', now()) AS now, now() + $7 * interval '1 millisecond' AS next,
				now() + ($7::bigint - $8::bigint) * interval '1 millisecond' AS give_up,
				now() - $8 * interval '1 millisecond' AS delivered_since) AS t
			WHERE company_id = $1 AND id = $2 AND next_attempt_at = $3
			RETURNING company_id, endpoint_id, status, t.delivered_since)
		UPDATE webhook_endpoints w SET enabled = false, disabled_reason = $9, ` + touched + `
		FROM d WHERE d.status = 'failed' AND w.company_id = d.company_id AND w.id = d.endpoint_id AND w.enabled
			AND NOT EXISTS (SELECT FROM webhook_deliveries x WHERE x.company_id = w.company_id
				AND x.endpoint_id = w.id AND x.delivered_at > d.delivered_since)`
	delay := backoff
	for i := int64(0); i < c.attempts && delay < maxWebhookBackoff; i++ {
		delay *= 2
	}
	reason := "No delivery succeeded for 3 days; the last attempt: " + cmp.Or(errText, "HTTP status "+strconv.Itoa(status)) + "."
	ctx, cancel := backgroundContext(ctx) // a sent delivery is recorded also when the server is stopping
	defer cancel()
	res, err := s.db.ExecContext(ctx, q, c.companyID, c.id, c.lease, pgtype.Int8{Int64: int64(status), Valid: status != 0},
		pgtype.Text{String: errText, Valid: errText != ""}, c.enabled, min(delay, maxWebhookBackoff).Milliseconds(),
		webhookGiveUp.Milliseconds(), reason)
	if err != nil {
		return false, fmt.Errorf("record delivery %d: %w", c.id, err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// webhookWorker sends the due deliveries of every company: at most its slots at once, and
// webhookEndpointSlots of them to one endpoint, so that a slow or dead endpoint holds up only itself.
type webhookWorker struct {
	st     *store
	client *http.Client
	set    webhookSettings
	log    *slog.Logger
	freed  chan struct{} // a send ended: there is room to take more

	mu      sync.Mutex
	sending map[int64]int64 // deliveries being sent, by endpoint
}

// runWebhooks runs a worker until ctx is done (at once when set.slots is 0): it takes due
// deliveries every webhookPoll, and whenever a send ends. At the end it waits for the sends, which
// ctx cancels: their deliveries stay leased, and any server sends them once the lease runs out.
func runWebhooks(ctx context.Context, st *store, set webhookSettings, log *slog.Logger) {
	wk := &webhookWorker{
		st:      st,
		client:  newWebhookClient(set.allow),
		set:     set,
		log:     log,
		freed:   make(chan struct{}, 1),
		sending: map[int64]int64{},
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for set.slots > 0 {
		wait := webhookPoll
		if err := wk.claim(ctx, &wg); err != nil && ctx.Err() == nil {
			log.Warn("take webhook deliveries", "err", err)
			wait = 4 * webhookPoll // the database is likely away: ask less often
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		case <-wk.freed:
		}
	}
}

// claim takes as many due deliveries as there are free slots, and starts sending each.
func (wk *webhookWorker) claim(ctx context.Context, wg *sync.WaitGroup) error {
	wk.mu.Lock()
	room := wk.set.slots
	var endpoints []int64
	var sending []int64 // sending[i] deliveries to endpoints[i]
	for id, n := range wk.sending {
		endpoints = append(endpoints, id)
		sending = append(sending, n)
		room -= int(n)
	}
	wk.mu.Unlock()
	if room == 0 {
		return nil
	}
	cs, err := wk.st.claimDeliveries(ctx, room, endpoints, sending)
	if err != nil {
		return err
	}
	wk.mu.Lock()
	defer wk.mu.Unlock()
	for _, c := range cs {
		wk.sending[c.endpointID]++
		wg.Go(func() {
			wk.send(ctx, c)
			wk.mu.Lock()
			wk.sending[c.endpointID]--
			if wk.sending[c.endpointID] == 0 {
				delete(wk.sending, c.endpointID)
			}
			wk.mu.Unlock()
			select {
			case wk.freed <- struct{}{}:
			default:
			}
		})
	}
	return nil
}

// send posts c's event to its endpoint, unless the endpoint is disabled, and records the attempt.
func (wk *webhookWorker) send(ctx context.Context, c claimed) {
	status, errText := 0, "the endpoint is disabled"
	if c.enabled {
		status, errText = wk.post(ctx, c)
		if ctx.Err() != nil {
			return // the server is stopping: the lease runs out, and a server sends it again
		}
	}
	disabled, err := wk.st.recordAttempt(ctx, c, status, errText, wk.set.backoff)
	if c.enabled {
		wk.set.metrics.attempt(status) // once recorded: a scrape then sees the backlog without it
	}
	if err != nil && ctx.Err() == nil {
		wk.log.Warn("record webhook delivery", "delivery", c.id, "err", err) // the lease runs out: it is sent again
	}
	if disabled {
		wk.log.Info("webhook endpoint disabled", "company", c.companyID, "endpoint", c.endpointID, "after", webhookGiveUp)
	}
}

// post sends c's event, signed (also with the previous secret within secretOverlap of a rotation),
// and returns the answer's status (0: none) and what went wrong, if the status does not say it.
func (wk *webhookWorker) post(ctx context.Context, c claimed) (int, string) {
	body := append(c.event.appendJSON(nil), '\n') // what GET /v1/events/{id} answers
	t := strconv.FormatInt(time.Now().Unix(), 10)
	sig := "t=" + t + ",v1=" + sign(c.secret, t, body)
	if c.previous.Valid && time.Since(c.rotatedAt.Time) < secretOverlap {
		sig += ",v1=" + sign(c.previous.String, t, body)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return 0, "the URL cannot be requested"
	}
	req.Header = http.Header{"Content-Type": {"application/json"}, "User-Agent": {"Rolodex-Webhooks"},
		"Rolodex-Event-Id": {strconv.FormatInt(c.event.ID, 10)}, "Rolodex-Signature": {sig}}
	resp, err := wk.client.Do(req)
	if err != nil {
		err = cmp.Or(errors.Unwrap(err), err) // the *url.Error's cause, without the method and URL, which the client knows
		if errors.Is(err, errRefusedAddress) {
			err = errRefusedAddress // without the address the host led to: as checkWebhookHost, no map of internal DNS
		}
		return 0, err.Error()
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxWebhookAnswer)) // closing with more unread drops the connection
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return resp.StatusCode, "redirects are not followed"
	}
	return resp.StatusCode, ""
}

// sign returns the hex HMAC-SHA256, keyed with secret, of t, "." and body.
func sign(secret, t string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(t + "."))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}
