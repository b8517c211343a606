package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// Events (API.md section 11): every change of a contact, business record or organization writes an
// event in its transaction (recordEvent); GET /v1/events is a feed of them that a client can follow
// to its end and resume later without ever missing one.
//
// Why gap-free: ids come from a sequence and transactions commit out of id order, so "id > cursor"
// would skip an event whose transaction took a lower id and committed after a higher one was read.
// So each event records its transaction's id (xid, pg_current_xact_id()), the feed is ordered by
// (xid, id), and it serves only events of transactions older than every one still running (xid <
// pg_snapshot_xmin(pg_current_snapshot())): those have all ended and later writers get larger xids,
// so nothing appears in front of a position already served. Each object's events are still in
// commit order (its row lock orders them). The price: an event shows once every older transaction
// has ended, usually within milliseconds; a long transaction delays the feed, never loses from it.

// eventTypes are the types of events; "contact.*" in a filter names a family.
var eventTypes = []string{"contact.created", "contact.updated", "contact.deleted", "contact.merged",
	"business.created", "business.updated", "business.deleted",
	"organization.created", "organization.updated", "organization.deleted", "organization.merged",
	"activity.created", "activity.updated", "activity.deleted",
	"association.created", "association.deleted"}

// typesNamed returns the event types that filter names: itself, or those of its family ("contact.*").
func typesNamed(filter string) []string {
	family, isFamily := strings.CutSuffix(filter, ".*")
	return slices.DeleteFunc(slices.Clone(eventTypes), func(et string) bool {
		return et != filter && !(isFamily && strings.HasPrefix(et, family+"."))
	})
}

// eventFamilies are the event families and the scopes that read them: a key sees only the events of
// the families it reads; an endpoint, those its last writer's key read (webhooks.go). Associations
// have no scope of their own: a key reads those between two kinds it reads (readsAssociation).
var eventFamilies = []struct{ name, scope string }{
	{"contact", "contacts:read"}, {"business", "business:read"}, {"organization", "organizations:read"},
	{"activity", "activities:read"}, {"association", ""}}

// readableFamilies returns the names of the families of events that scopes read: association when
// they read two kinds of objects at least.
func readableFamilies(scopes []string) []string {
	names := make([]string, 0, len(eventFamilies))
	for _, f := range eventFamilies {
		if f.scope != "" && covers(scopes, f.scope) {
			names = append(names, f.name)
		}
	}
	if len(names) >= 2 {
		names = append(names, "association")
	}
	return names
}

// readsAssociation reports whether families (readableFamilies) read the association event whose
// object is object: both its ends' kinds.
func readsAssociation(families []string, object []byte) bool {
	ends := objectMembers(object)
	for _, end := range []string{"from", "to"} {
		kind, _ := jsonString(memberRaw(objectMembers(memberRaw(ends, end)), "object"), 20)
		if !slices.Contains(families, kind) {
			return false
		}
	}
	return true
}

// associationsReadSQL is the condition on events that an association event is of two kinds of %[1]s,
// an array of readable families: readsAssociation in SQL, of the events feed, of deliveries and of
// timelines. An association event's ends are its about and about_other ("contact:12", eventAbout),
// which it reads in place of parsing the event's JSON (a timeline page's 50 association events: 2
// parses each).
const associationsReadSQL = `(split_part(%[2]stype, '.', 1) <> 'association' OR split_part(%[2]sabout, ':', 1) = ANY(%[1]s)
	AND split_part(%[2]sabout_other, ':', 1) = ANY(%[1]s))`

// eventScopeError returns a 403 unless scopes read the events of every filter: an event type, a
// family ("contact.*"), or "*" (every family).
func eventScopeError(scopes, filters []string) *apiError {
	families := readableFamilies(scopes)
	for _, v := range filters {
		for _, f := range eventFamilies {
			if v != "*" && !strings.HasPrefix(v, f.name+".") || slices.Contains(families, f.name) {
				continue // v names none of the family's events, or they are read
			}
			if f.scope == "" {
				return &apiError{Status: http.StatusForbidden, Code: "insufficient_scope",
					Detail: "This API key reads association events only with the scopes of two kinds of objects at least."}
			}
			return scopeError(scopes, f.scope)
		}
	}
	return nil
}

// event is a change as the events feed shows it (API.md section 11).
type event struct {
	ID        int64
	xid       int64
	Type      string
	CreatedAt time.Time
	RequestID string
	Object    string      // the object as the API returns it, after the change (before, for *.deleted)
	Previous  pgtype.Text // previousAttributes, of an update; of another, more members of data (merge.go)
}

func (e *event) scanDest() []any {
	return []any{&e.ID, &e.xid, &e.Type, &e.CreatedAt, &e.RequestID, &e.Object, &e.Previous}
}

func (e *event) appendJSON(b []byte) []byte {
	b = appendObject(b, "id", &e.ID, "type", &e.Type, "createdAt", &e.CreatedAt, "requestId", &e.RequestID)
	b = b[:len(b)-1] // reopen the object
	b = append(b, `,"data":{"object":`...)
	b = append(b, e.Object...)
	p := e.Previous.String
	switch {
	case e.Previous.Valid && strings.HasSuffix(e.Type, ".updated"):
		b = append(b, `,"previousAttributes":`...)
		b = append(b, p...)
	case e.Previous.Valid: // an object of more members of data: {"mergedInto": "1042"}
		b = append(b, ',')
		b = append(b, p[1:len(p)-1]...)
	}
	return append(b, "}}"...)
}

var events = &resource{path: "/v1/events", lists: &listSpec{ranges: true},
	selectSQL: `SELECT id, xid::text::bigint, type, created_at, request_id, object, previous
		FROM events WHERE company_id = $1`}

// recordEvent adds to tx the event of a change: of type typ, the object as the API returns it, and
// for an update (was, the object before it: else nil) the old values of the fields it changed.
func recordEvent(tx *tx, companyID int64, typ string, object, was []byte) {
	recordEvents(tx, companyID, []eventRow{{typ, object, previousAttributes(was, object)}})
}

// eventRow is an event of recordEvents; previous (nil: none) is previousAttributes or more of data.
type eventRow struct {
	typ      string
	object   []byte
	previous []byte
}

// recordEvents adds to tx the events of a change, of the company's objects. They are written when the
// transaction commits (queueEvents), all of them: a batch item's with its batch's.
func recordEvents(tx *tx, companyID int64, evs []eventRow) {
	tx.companyID, tx.events = companyID, append(tx.events, evs...)
}

// queueEvents queues in t the statement that writes the events recorded since it last ran, one for
// up to 13,000 (5 parameters each, within PostgreSQL's 65,535): a write's events cost one statement
// whatever wrote them (a merge that re-points many objects, a batch's items). An activity created
// with 3 targets sent two, its own event's and its targets'. It writes their deliveries too
// (webhooks.go): one to each enabled webhook endpoint of the company whose events name the event's
// type, its family ("contact.*") or "*", and whose families have it.
func (t *tx) queueEvents(ctx context.Context) {
	for chunk := range slices.Chunk(t.events, 13000) {
		args := []any{t.companyID, requestInfo(ctx).id}
		var values []byte
		for _, e := range chunk {
			n := len(args)
			values = fmt.Appendf(values, ", ($1, $2, $%d, $%d, $%d, $%d, $%d)", n+1, n+2, n+3, n+4, n+5)
			about, other := eventAbout(e.typ, e.object)
			args = append(args, e.typ, string(e.object), pgtype.Text{String: string(e.previous), Valid: e.previous != nil}, about, other)
		}
		t.queue(`WITH e AS (
				INSERT INTO events (company_id, request_id, type, object, previous, about, about_other) VALUES `+string(values[2:])+`
				RETURNING company_id, id, type, about, about_other)
			INSERT INTO webhook_deliveries (company_id, endpoint_id, event_id, event_type)
			SELECT e.company_id, w.id, e.id, e.type FROM e JOIN webhook_endpoints w ON w.company_id = e.company_id
				AND w.enabled AND w.events && ARRAY[e.type, split_part(e.type, '.', 1) || '.*', '*']
				AND split_part(e.type, '.', 1) = ANY(w.families) AND `+fmt.Sprintf(associationsReadSQL, "w.families", "e."), args...)
	}
	requestInfo(ctx).events.Add(int64(len(t.events)))
	t.events = nil
}

// eventAbout returns what the event of type typ and object (as the API returns it) is about, for the
// timeline (timeline.go): the object, as "contact:12"; of an association event, its from end, and its
// to end as other.
func eventAbout(typ string, object []byte) (about, other pgtype.Text) {
	members := objectMembers(object)
	if family, _, _ := strings.Cut(typ, "."); family != "association" {
		return objectRef(family, memberRaw(members, "id")), other
	}
	end := func(name string) pgtype.Text {
		ends := objectMembers(memberRaw(members, name))
		kind, _ := jsonString(memberRaw(ends, "object"), 20)
		return objectRef(kind, memberRaw(ends, "id"))
	}
	return end("from"), end("to")
}

// objectRef is "contact:12", of the object name and its id as JSON (a contact's a string).
func objectRef(object string, id []byte) pgtype.Text {
	return pgtype.Text{String: object + ":" + strings.Trim(string(id), `"`), Valid: true}
}

// previousAttributes returns, of the encoded objects old and v, the members of old whose values v
// changed, as a JSON object; updatedAt, which every change moves, is left out. Without old, nil.
func previousAttributes(old, v []byte) []byte {
	if old == nil {
		return nil
	}
	was, now := objectMembers(old), objectMembers(v)
	var changed []member
	for i, m := range was {
		switch {
		case m.name == "updatedAt" || string(m.raw) == string(now[i].raw): // one encoder: the same members in order
		case m.name == "custom": // exactly the custom values that changed
			changed = append(changed, member{m.name, previousAttributes(m.raw, now[i].raw)})
		default:
			changed = append(changed, m)
		}
	}
	return appendMembers(nil, changed)
}

// handleEvents answers GET /v1/events: the company's events in feed order (above), with the list
// shape of section 6 and a nextCursor also on the last page, to resume from. A cursor older than
// retention is 410: events after it may have been deleted.
func handleEvents(st *store, retention time.Duration, log *slog.Logger) http.Handler {
	allowed := append(events.lists.params(true), "type")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		q, lq, _, err := listRequest(r, st, events, allowed) // an event expands nothing: any expand[] is a 400
		if err == nil {
			err = lq.whereTypes(q["type"], t.scopes)
		}
		var key []byte
		if err == nil {
			key, err = st.listCursorKey(r.Context())
		}
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		scope := "events\n" + strconv.FormatInt(t.companyID, 10) + "\n" + lq.binding + "\n"
		var after [3]uint64 // a feed position: after the event (xid, id), created at [2] (Unix ms)
		if c, ok := q["cursor"]; ok {
			if text, ok := openCursor(c[0], key, scope, after[:]); !ok || text != "" {
				writeProblem(w, r, badParam("cursor", "is not a cursor of this feed; pass pagination.nextCursor unchanged, with the same filters"))
				return
			}
			if time.Since(time.UnixMilli(int64(after[2]))) > retention {
				writeProblem(w, r, &apiError{Status: http.StatusGone, Code: "cursor_expired",
					Detail: fmt.Sprintf("The cursor is older than the events are kept (%s); start again without one.", retention)})
				return
			}
		}
		// Ordered by the columns (events.xid), not by the bigint that the select list also names xid:
		// that order the events_feed index serves, where sorting the output column cost a scan and sort
		// of the company's events (15.7 ms against 0.15 ms at 20,000 events, EXPLAIN ANALYZE).
		sqlText, args := lq.countSQL(events.selectSQL+` AND xid < pg_snapshot_xmin(pg_current_snapshot())`, t.companyID)
		args = append(args, int64(after[0]), int64(after[1]), lq.limit+1)
		n := len(args)
		sqlText += fmt.Sprintf(` AND (xid, id) > ($%d::bigint::text::xid8, $%d) ORDER BY events.xid, events.id LIMIT $%d`, n-2, n-1, n)
		var evs []event
		if err := st.read(r.Context(), rowsInto[event](&evs, sqlText, args...)); err != nil {
			writeError(w, r, log, err)
			return
		}
		more := len(evs) > lq.limit
		evs = evs[:min(len(evs), lq.limit)]
		after[2] = uint64(time.Now().UnixMilli()) // with no events, nothing was missed up to now
		b := make([]byte, 0, 1024*len(evs)+256)
		b = append(b, `{"data":[`...)
		for i, e := range evs {
			if i > 0 {
				b = append(b, ',')
			}
			b = e.appendJSON(b)
			after = [3]uint64{uint64(e.xid), uint64(e.ID), uint64(e.CreatedAt.UnixMilli())}
		}
		next := sealCursor(key, scope, after[:], "")
		limit := int64(lq.limit)
		b = append(b, `],"pagination":`...)
		b = appendObject(b, "limit", &limit, "hasMore", &more, "nextCursor", &next)
		writeJSON(w, r, http.StatusOK, append(b, "}\n"...))
	})
}

// whereTypes adds the type filter: each value an event type or a family ("contact.*") that scopes
// read (else 403). Without one, a key that does not read every family is shown the events of those
// it reads (of none: no events), and its cursors are bound to them like a filter's.
func (lq *listQuery) whereTypes(values, scopes []string) error {
	var types []string
	for _, v := range values {
		named := typesNamed(v)
		if len(named) == 0 {
			aerr := badParam("type", fmt.Sprintf("names no event type (%s); one is a type such as contact.created or a family such as contact.*", quoteClamped(v)))
			aerr.Detail = fmt.Sprintf("Query parameter type names no event type (%s); the types are %s, and contact.*, business.*, organization.*, association.* name their families.",
				quoteClamped(v), strings.Join(eventTypes, ", ")) // a detail may be longer than an entry's message
			return aerr
		}
		types = append(types, named...)
	}
	if aerr := eventScopeError(scopes, values); aerr != nil {
		return aerr
	}
	families := readableFamilies(scopes)
	if values == nil && len(families) < len(eventFamilies) {
		types = slices.DeleteFunc(slices.Clone(eventTypes), func(et string) bool { return eventScopeError(scopes, []string{et}) != nil })
		lq.binding += "families=" + strconv.Quote(strings.Join(families, ",")) + "\n"
	} else if values != nil {
		slices.Sort(values)
		lq.binding += "type=" + strconv.Quote(strings.Join(values, ",")) + "\n"
	}
	if types != nil {
		lq.where("type = ANY(%s::text[])", types)
	}
	if slices.Contains(families, "association") && len(families) < len(eventFamilies) {
		lq.where(fmt.Sprintf(associationsReadSQL, "%[1]s::text[]", ""), families) // of the kinds it reads
	}
	return nil
}

// handleEventGet answers GET /v1/events/{id}: the event, or 404 when it is of a family the key does
// not read, as when it does not exist.
func handleEventGet(st *store, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		id, _, aerr := objectRequest(r, events)
		if aerr != nil {
			writeProblem(w, r, aerr)
			return
		}
		var evs []event
		err := st.read(r.Context(), rowsInto[event](&evs, events.selectSQL+` AND id = $2`, t.companyID, id))
		if err == nil && (evs == nil || eventScopeError(t.scopes, []string{evs[0].Type}) != nil ||
			strings.HasPrefix(evs[0].Type, "association.") && !readsAssociation(readableFamilies(t.scopes), []byte(evs[0].Object))) {
			err = errNotFound
		}
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		writeJSON(w, r, http.StatusOK, append(evs[0].appendJSON(nil), '\n'))
	})
}

// deleteOldEvents deletes up to a batch of the events older than retention, oldest first through
// the created_at index, and returns how many it deleted.
func (s *store) deleteOldEvents(ctx context.Context, retention time.Duration) (int64, error) {
	const q = `DELETE FROM events WHERE (company_id, id) IN (
		SELECT company_id, id FROM events WHERE created_at < now() - $1 * interval '1 millisecond'
		ORDER BY created_at LIMIT $2)`
	res, err := s.db.ExecContext(ctx, q, retention.Milliseconds(), deleteBatch)
	if err != nil {
		return 0, fmt.Errorf("delete old events: %w", err)
	}
	return res.RowsAffected()
}
