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

	"github.com/jackc/pgx/v5"
)

// The timeline (API.md section 19): GET /v1/{contacts|business|organizations}/{id}/timeline, what
// happened to one object, newest first: the activities that target it and the events about it (its
// own, and the association events that name it: eventAbout, events.go), none folded.
//
// A walk of it is one snapshot: the first page's (pg_current_snapshot()), which its cursors carry.
// Its events are those of the transactions that snapshot saw committed; its activities are in their
// place as of then: an activity created since is left to the next walk, and one moved in time since
// stays where it was, read from the first of its later activity.updated events that changed
// occurredAt. So a walk shows each entry once while activities are added and moved; ties in at break
// by kind (events first) and then by id, descending.

// timelineSpec is what a timeline takes besides kind and type: limit, cursor and at[gte|gt|lte|lt].
var timelineSpec = &listSpec{filters: timeRange("at", "at")}

// Ranks of the kinds of entries, their order within one at.
const (
	rankActivity = 0
	rankEvent    = 1
)

// timelineQuery is a parsed timeline request.
type timelineQuery struct {
	*listQuery              // limit, the at ranges (conditions on at) and the cursor's binding
	kind       *assocKind   // the object's
	id         int64        // the object's
	acts       []string     // the activity types shown; nil: no activities
	evTypes    []string     // the event types shown; nil: no events
	families   []string     // the event families the key reads (readableFamilies)
	after      *timelineKey // the last entry of the page before; nil: the first page
	snapshot   string       // the walk's snapshot; "": the first page's, now
}

// timelineKey is an entry's place in a timeline, and the snapshot of the walk that read it; an
// event's entry holds the event, read with its place (timelineEventsSQL).
type timelineKey struct {
	rank     int64
	at       time.Time
	id       int64
	snapshot string
	ev       event
}

func (k *timelineKey) scanDest() []any {
	e := &k.ev
	return []any{&k.rank, &k.at, &k.id, &k.snapshot, &e.xid, &e.Type, &e.CreatedAt, &e.RequestID, &e.Object, &e.Previous}
}

// timelineRow is a row of a page's statement (pageSQL): an entry's place, with its event or, in the
// columns after, its activity; an event's row has NULL there.
type timelineRow struct {
	key   timelineKey
	act   activity
	isAct bool     // the row has an activity
	dest  [2][]any // the scan's destinations: the event's row's, the activity's row's
}

func (r *timelineRow) scanDest() []any { return []any{r} }

// ScanRow scans a row of the page (pgx.RowScanner), leaving an event's NULL activity unread.
func (r *timelineRow) ScanRow(rows pgx.Rows) error {
	if r.dest[1] == nil {
		keys, act := r.key.scanDest(), r.act.scanDest()
		r.dest = [2][]any{append(keys, make([]any, len(act))...), append(keys, act...)}
	}
	r.isAct = rows.RawValues()[len(r.dest[0])-1] != nil // the activity's last column: its targets, never NULL
	if r.isAct {
		return rows.Scan(r.dest[1]...)
	}
	return rows.Scan(r.dest[0]...)
}

// timelinePage is a page's entries, each with its object's JSON at its span of objs; an activity
// deleted since its place was read has none (-1).
type timelinePage struct {
	keys  []timelineKey
	spans [][2]int
	objs  []byte
}

// take adds the entry of row r (eachRow reuses r: what is kept is copied, its object as JSON).
func (p *timelinePage) take(r *timelineRow) {
	span := [2]int{-1, -1}
	switch {
	case r.key.rank == rankEvent:
		r.key.ev.ID = r.key.id
		span[0], p.objs = len(p.objs), r.key.ev.appendJSON(p.objs)
	case r.isAct:
		span[0], p.objs = len(p.objs), r.act.appendJSON(p.objs)
	}
	if span[0] >= 0 {
		span[1] = len(p.objs)
	}
	p.keys, p.spans = append(p.keys, r.key), append(p.spans, span)
}

// The columns of an event (events.selectSQL's but its id) that a page's places carry, and what an
// activity's place carries in their stead.
const (
	timelineEventColumns = `xid::text::bigint AS xid, type, created_at, request_id, object, previous`
	timelineNoEvent      = `0::bigint AS xid, ''::text AS type, now() AS created_at, ''::text AS request_id, ''::text AS object, NULL::text AS previous`
)

// handleTimeline answers GET /v1/{kind}/{id}/timeline, for k's objects: a page of entries, as a list.
// Round trips: the page (with its events and activities); when it is empty, whether the object is there.
func handleTimeline(st *store, k *assocKind, log *slog.Logger) http.Handler {
	allowed := append(timelineSpec.params(true), "kind", "type")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		tq, err := timelineRequest(r, st, k, allowed)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		p := &timelinePage{}
		q, args := tq.pageSQL(t.companyID)
		err = st.read(r.Context(), eachRow[timelineRow](q, args, p.take))
		if err == nil && len(p.keys) == 0 { // none, or no object: the page holds entries only of an object that is there
			found := false
			err = st.read(r.Context(), eachRow[fieldID](`SELECT 1 FROM `+k.res.table+` WHERE company_id = $1 AND id = $2`,
				[]any{t.companyID, tq.id}, func(*fieldID) { found = true }))
			if err == nil && !found {
				err = notFound(r.Context(), st.read, k.res, t.companyID, tq.id)
			}
		}
		var b []byte
		if err == nil {
			b, err = tq.appendPage(r.Context(), st, t.companyID, p)
		}
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		writeJSON(w, r, http.StatusOK, b)
	})
}

// timelineRequest reads a timeline request: the path id, limit, the at ranges, kind and type (each
// shown kind of entry needs its scope), and the cursor.
func timelineRequest(r *http.Request, st *store, k *assocKind, allowed []string) (*timelineQuery, error) {
	id, aerr := pathID(r)
	if aerr != nil {
		return nil, aerr
	}
	q, aerr := queryParams(r, allowed...)
	if aerr != nil {
		return nil, aerr
	}
	lq, aerr := timelineSpec.parse(q)
	if aerr != nil {
		return nil, aerr
	}
	if _, aerr := parseExpand(r, q, nil); aerr != nil {
		return nil, aerr
	}
	scopes := tenantOf(r).scopes
	tq := &timelineQuery{listQuery: lq, kind: k, id: id, families: readableFamilies(scopes)}
	if err := tq.setShown(q["kind"], q["type"], scopes); err != nil {
		return nil, err
	}
	c, ok := q["cursor"]
	if !ok {
		return tq, nil
	}
	key, err := st.listCursorKey(r.Context())
	if err != nil {
		return nil, err
	}
	if aerr := tq.readCursor(c[0], key, tenantOf(r).companyID); aerr != nil {
		return nil, aerr
	}
	return tq, nil
}

// setShown sets which entries the timeline shows: by kind ("activity" or "event"), by type
// (activity types, event types and families), and by the key's scopes: activities:read for
// activities, events:read for events (of the families it reads), one of them at least. Naming
// entries the key cannot read is 403, as in the events feed.
func (tq *timelineQuery) setShown(kinds, types, scopes []string) error {
	readsActs, readsEvents := covers(scopes, "activities:read"), covers(scopes, "events:read")
	if !readsActs && !readsEvents {
		return &apiError{Status: http.StatusForbidden, Code: "insufficient_scope",
			Detail: "This API key has neither activities:read nor events:read, one of which a timeline needs."}
	}
	if len(kinds) > 0 && kinds[0] != "activity" && kinds[0] != "event" {
		return badParam("kind", "must be activity or event")
	}
	var acts, evTypes, evFilters []string
	for _, v := range types {
		for v := range strings.SplitSeq(v, ",") {
			named := typesNamed(v)
			switch {
			case slices.Contains(activityTypes, v):
				acts = append(acts, v)
			case len(named) > 0:
				evTypes, evFilters = append(evTypes, named...), append(evFilters, v)
			default:
				return badParam("type", fmt.Sprintf("names neither an activity type (%s) nor an event type or family such as contact.updated or contact.* (%s)",
					strings.Join(activityTypes, ", "), quoteClamped(v)))
			}
		}
	}
	if types == nil {
		acts, evTypes = activityTypes, slices.Concat(typesNamed(tq.kind.object+".*"), typesNamed("association.*"))
	}
	showActs := len(acts) > 0 && (len(kinds) == 0 || kinds[0] == "activity")
	showEvents := len(evTypes) > 0 && (len(kinds) == 0 || kinds[0] == "event")
	if aerr := timelineScopeError(scopes, kinds, showActs && types != nil, showEvents && types != nil, evFilters); aerr != nil {
		return aerr
	}
	if showActs && readsActs {
		tq.acts = acts
	}
	if showEvents && readsEvents {
		tq.evTypes = evTypes
	}
	slices.Sort(types)
	tq.binding += "kind=" + strconv.Quote(strings.Join(kinds, ",")) + "\ntype=" + strconv.Quote(strings.Join(types, ",")) + "\n"
	return nil
}

// timelineScopeError is the 403 of a timeline request that names entries scopes cannot read: by
// kind, by an activity type (namesActs), or by event types (namesEvents, evFilters as sent).
func timelineScopeError(scopes, kinds []string, namesActs, namesEvents bool, evFilters []string) *apiError {
	if namesActs || slices.Contains(kinds, "activity") {
		if aerr := scopeError(scopes, "activities:read"); aerr != nil {
			return aerr
		}
	}
	if namesEvents || slices.Contains(kinds, "event") {
		if aerr := scopeError(scopes, "events:read"); aerr != nil {
			return aerr
		}
	}
	return eventScopeError(scopes, evFilters)
}

// The cursor of a timeline: the last entry's at (Unix microseconds moved by atOffset: times before
// 1970 are negative), rank and id, and the walk's snapshot.
const atOffset = 1 << 62

// scope is what the timeline's cursors are good for: this object's timeline, with the same filters.
func (tq *timelineQuery) scope(companyID int64) string {
	return fmt.Sprintf("timeline\n%d\n%s:%d\n%s", companyID, tq.kind.path, tq.id, tq.binding)
}

// readCursor sets where the page starts, and the walk's snapshot, from a cursor of the same timeline.
func (tq *timelineQuery) readCursor(s string, key []byte, companyID int64) *apiError {
	var nums [3]uint64
	text, ok := openCursor(s, key, tq.scope(companyID), nums[:])
	if !ok || nums[1] > rankEvent || nums[2] == 0 || text == "" {
		return badParam("cursor", "is not a cursor of this timeline; pass pagination.nextCursor unchanged, with the same filters")
	}
	tq.after = &timelineKey{at: time.UnixMicro(int64(nums[0] - atOffset)), rank: int64(nums[1]), id: int64(nums[2])}
	tq.snapshot = text
	return nil
}

// cursor returns the cursor of the page after entry k.
func (tq *timelineQuery) cursor(key []byte, companyID int64, k timelineKey) string {
	return sealCursor(key, tq.scope(companyID), []uint64{uint64(k.at.UnixMicro() + atOffset), uint64(k.rank), uint64(k.id)}, k.snapshot)
}

// The places (rank, at, id) of the activities that target the object of kind %[1]s and id %[2]s, of
// the types %[3]s, as of the snapshot %[4]s, are in two parts, by whether the snapshot saw the
// transaction that last wrote the target row's copy of its place (placed, schema/0020). When it did,
// the activity is where the copy says: timelinePlacedSQL, a walk of the copies (with the type's)
// newest first through their index, index-only, until the page is full. When it did not, the
// activity moved, or it or its target is new, since: timelineMovedSQL, from its events (an activity
// with an activity.created event the snapshot did not see is not there yet; one with a later
// activity.updated that changed occurredAt is where that event's previousAttributes says it was). A
// first page's snapshot is its statement's own, which sees every row it reads placed: it has no moved
// part, and reads no event. Read whole, a record's 400 activities were most of a page's cost. The
// moved part reads the rows placed at or after the snapshot's xmin (every row it did not see is),
// through their index (schema/0023), not all of the object's target rows.
const timelinePlacedSQL = `SELECT 0 AS rank, t.occurred_at AS at, t.a_id AS id, ` + timelineNoEvent + ` FROM associations t
	WHERE t.company_id = $1 AND t.b_kind = %[1]s AND t.b_id = %[2]s AND t.` + targetsSQL + `
		AND pg_visible_in_snapshot(t.placed, %[4]s) AND t.type = ANY(%[3]s::text[])`

const timelineMovedSQL = `SELECT 0 AS rank, coalesce(m.was, t.occurred_at) AS at, t.a_id AS id, ` + timelineNoEvent + `
	FROM associations t LEFT JOIN LATERAL (
		SELECT e.type, (e.previous::json ->> 'occurredAt')::timestamptz AS was FROM events e
		WHERE e.company_id = $1 AND e.about = 'activity:' || t.a_id AND NOT pg_visible_in_snapshot(e.xid, %[4]s)
			AND (e.type = 'activity.created' OR e.type = 'activity.updated' AND e.previous::json -> 'occurredAt' IS NOT NULL)
		ORDER BY e.id LIMIT 1) m ON true
	WHERE t.company_id = $1 AND t.b_kind = %[1]s AND t.b_id = %[2]s AND t.` + targetsSQL + ` AND t.placed >= pg_snapshot_xmin(%[4]s)
		AND NOT pg_visible_in_snapshot(t.placed, %[4]s) AND t.type = ANY(%[3]s::text[]) AND m.type IS DISTINCT FROM 'activity.created'`

// timelineEventsSQL is the SELECT of the places of the events whose column %[1]s (about or
// about_other) is the object %[2]s, of the types %[3]s, that the snapshot %[4]s saw, of the kinds of
// objects the key reads (%[5]s, associationsReadSQL), with the events: the walk reads each event's
// row, and a second read of a page's events by key cost 4 buffers each.
const timelineEventsSQL = `SELECT 1 AS rank, created_at AS at, id, ` + timelineEventColumns + ` FROM events
	WHERE company_id = $1 AND %[1]s = %[2]s AND pg_visible_in_snapshot(xid, %[4]s) AND type = ANY(%[3]s::text[]) AND %[5]s`

// pageSQL returns the statement of the places of a page's entries, and one more, newest first: each
// kind's newest after the cursor within the at ranges (an index walk of the object's events, the
// object's activities sorted), merged. Every row carries the walk's snapshot, and its event or its
// activity (activities.selectSQL's columns, read by key: an event's row looks up id NULL, which reads
// nothing, where "AND p.rank = 0" probed the index with the event's id). It has no rows when the
// object is not there. Reading the page's activities in a statement of their own was a second round
// trip.
func (tq *timelineQuery) pageSQL(companyID int64) (string, []any) {
	args := append([]any{companyID}, tq.args...) // $1, then the at ranges' values, as tq.where numbered them
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	snapshot := "pg_current_snapshot()"
	if tq.snapshot != "" {
		snapshot = arg(tq.snapshot) + "::text::pg_snapshot"
	}
	conds := tq.conds
	if a := tq.after; a != nil {
		at, rank, id := arg(a.at), arg(a.rank), arg(a.id)
		conds = append(conds, fmt.Sprintf("at <= %[1]s AND (at < %[1]s OR rank < %[2]s OR rank = %[2]s AND id < %[3]s)", at, rank, id))
	}
	where := ""
	if len(conds) > 0 {
		where = " WHERE " + strings.Join(conds, " AND ")
	}
	limit := arg(tq.limit + 1)
	var branches []string
	page := func(inner string) {
		branches = append(branches, "(SELECT * FROM ("+inner+") b"+where+" ORDER BY at DESC, id DESC LIMIT "+limit+")")
	}
	if tq.acts != nil {
		kind, id, types := arg(tq.kind.path), arg(tq.id), arg(tq.acts)
		page(fmt.Sprintf(timelinePlacedSQL, kind, id, types, snapshot))
		if tq.snapshot != "" {
			page(fmt.Sprintf(timelineMovedSQL, kind, id, types, snapshot))
		}
	}
	if tq.evTypes != nil {
		ref, types := arg(tq.kind.object+":"+strconv.FormatInt(tq.id, 10)), arg(tq.evTypes)
		readable := fmt.Sprintf(associationsReadSQL, arg(tq.families)+"::text[]", "")
		page(fmt.Sprintf(timelineEventsSQL, "about", ref, types, snapshot, readable))
		page(fmt.Sprintf(timelineEventsSQL, "about_other", ref, types, snapshot, readable))
	}
	if branches == nil { // kind and type leave nothing to show
		page(`SELECT 0 AS rank, now() AS at, $1::bigint AS id, ` + timelineNoEvent + ` WHERE false`)
	}
	self := arg(tq.id)
	return `SELECT p.*, x.* FROM (SELECT rank, at, id, ` + snapshot + `::text, xid, type, created_at, request_id, object, previous
			FROM (` + strings.Join(branches, " UNION ALL ") + `) u
			ORDER BY at DESC, rank DESC, id DESC LIMIT ` + limit + `) p
		LEFT JOIN LATERAL (` + activities.selectSQL + ` AND id = CASE p.rank WHEN 0 THEN p.id END) x ON true
		WHERE EXISTS (SELECT FROM ` + tq.kind.res.table + ` WHERE company_id = $1 AND id = ` + self + `)
		ORDER BY p.at DESC, p.rank DESC, p.id DESC`, args
}

// appendPage returns the body of the answer of the page p. An entry without its object is left out
// (none is expected: an activity's row and its target rows go together).
func (tq *timelineQuery) appendPage(ctx context.Context, st *store, companyID int64, p *timelinePage) ([]byte, error) {
	keys, next := p.keys, ""
	if len(keys) > tq.limit {
		keys = keys[:tq.limit]
		key, err := st.listCursorKey(ctx)
		if err != nil {
			return nil, err
		}
		next = tq.cursor(key, companyID, keys[len(keys)-1])
	}
	b := append(make([]byte, 0, len(p.objs)+64*len(keys)+256), `{"data":[`...)
	for i, k := range keys {
		span := p.spans[i]
		if span[0] < 0 {
			continue
		}
		kind := "event"
		if k.rank == rankActivity {
			kind = "activity"
		}
		if b[len(b)-1] != '[' {
			b = append(b, ',')
		}
		b = appendObject(b, "kind", &kind, "at", &k.at)
		b = append(append(append(b[:len(b)-1], `,"`+kind+`":`...), p.objs[span[0]:span[1]]...), '}')
	}
	b = appendPagination(append(b, "],"...), tq.limit, next)
	return append(b, "}\n"...), nil
}
