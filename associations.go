package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"time"
)

// Associations: many-to-many links, each with an optional label, between objects of two different
// kinds, read from either end (schema/0016_associations.sql). The single reference fields
// (organizationId, ...) stay as they are; associations say what they cannot: a deal with several
// contacts, each in a role. Every write checks both ends first (they exist and are the company's,
// locked against a delete) and then writes, so an item that fails leaves nothing; an object's delete
// takes its associations with it and a merge moves them (deleteLocked, moveAssociations), each with
// its association.deleted and association.created events.

const maxAssociationItems = 1000 // the most items of a batch of associations

// labelPattern is what a label looks like: a word such as decision_maker; none is the unlabelled one.
var labelPattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)

// assocKind is a kind of object that associates.
type assocKind struct {
	path   string    // its segment of /v1/{kind}/..., and its name in the associations table
	object string    // its name in an association's JSON, and its event family
	res    *resource // its objects
	textID bool      // its ids are written as strings (contacts)
	rel    relKind   // its objects as expand[] embeds them (an activity's targets)
}

// The kinds that associate, any two different ones.
var (
	activityKind     = &assocKind{path: "activities", object: "activity", res: activities, rel: numRelKinds} // never a target
	businessKind     = &assocKind{path: "business", object: "business", res: businesses, rel: relBusiness}
	contactKind      = &assocKind{path: "contacts", object: "contact", res: contacts, textID: true, rel: relContact}
	organizationKind = &assocKind{path: "organizations", object: "organization", res: organizations, rel: relOrganization}
	assocKinds       = []*assocKind{activityKind, businessKind, contactKind, organizationKind}
)

// kindOf returns the kind whose path or object name is name, or nil.
func kindOf(name string) *assocKind {
	for _, k := range assocKinds {
		if k.path == name || k.object == name {
			return k
		}
	}
	return nil
}

// kindOfResource returns the kind of res's objects, or nil when they do not associate.
func kindOfResource(res *resource) *assocKind {
	for _, k := range assocKinds {
		if k.res == res {
			return k
		}
	}
	return nil
}

// association is one association, as seen from its end from.
type association struct {
	from, to     *assocKind
	fromID, toID int64
	label        string // "": none
	createdAt    time.Time
	existed      bool // a create's: it was there already (unchanged)
	err          error
}

// appendJSON writes a as the API returns it: {"from", "to", "label", "createdAt"}.
func (a *association) appendJSON(b []byte) []byte {
	b = appendEnd(append(b, `{"from":`...), a.from, a.fromID)
	b = appendEnd(append(b, `,"to":`...), a.to, a.toID)
	b = append(b, `,"label":`...)
	if a.label == "" {
		b = append(b, "null"...)
	} else {
		b = appendString(b, a.label)
	}
	b = appendTime(append(b, `,"createdAt":`...), a.createdAt)
	return append(b, '}')
}

// appendEnd writes one end of an association: {"object": "contact", "id": "12"}, the id typed as in
// its object.
func appendEnd(b []byte, k *assocKind, id int64) []byte {
	b = appendString(append(b, `{"object":`...), k.object)
	b = append(b, `,"id":`...)
	if k.textID {
		b = appendString(b, strconv.FormatInt(id, 10))
	} else {
		b = strconv.AppendInt(b, id, 10)
	}
	return append(b, '}')
}

// row returns a's ends in the order of its row: the kind first by name is a.
func (a *association) row() (aKind string, aID int64, bKind string, bID int64) {
	if a.from.path < a.to.path {
		return a.from.path, a.fromID, a.to.path, a.toID
	}
	return a.to.path, a.toID, a.from.path, a.fromID
}

// endSQL is the SQL condition on associations that their end of kind k is the object whose id is
// the parameter param, and their other end of kind to; and the column of that other end's id. The
// kinds' names are the server's own, never a client's text.
func endSQL(k, to *assocKind, param string) (cond, other string) {
	if k.path < to.path {
		return fmt.Sprintf("a_kind = '%s' AND a_id = %s AND b_kind = '%s'", k.path, param, to.path), "b_id"
	}
	return fmt.Sprintf("b_kind = '%s' AND b_id = %s AND a_kind = '%s'", k.path, param, to.path), "a_id"
}

// lockEnds locks the company's objects at the ends of items against a change of their key (a
// delete) until the transaction ends, as a foreign key would, and sets the err of each item with an
// end that is not there to errNotFound. Round trips: one, a SELECT for each kind.
func lockEnds(ctx context.Context, tx *tx, companyID int64, items []*association) error {
	ids := map[*assocKind][]int64{}
	for _, a := range items {
		if a.err == nil {
			ids[a.from] = append(ids[a.from], a.fromID)
			ids[a.to] = append(ids[a.to], a.toID)
		}
	}
	found, reads := lockObjects(companyID, ids)
	if reads == nil {
		return nil
	}
	if err := tx.read(ctx, reads...); err != nil {
		return err
	}
	for _, a := range items {
		if a.err == nil && (!found[a.from][a.fromID] || !found[a.to][a.toID]) {
			a.err = errNotFound
		}
	}
	return nil
}

// lockObjects returns the reads that lock the company's objects ids (by kind) FOR KEY SHARE, and
// what they fill once run: whether each is there. An activity's lock is FOR NO KEY UPDATE: the write
// of its targets writes its list (targetsAdded), and two writes of the same activities wait in turn.
func lockObjects(companyID int64, ids map[*assocKind][]int64) (map[*assocKind]map[int64]bool, []read) {
	found := map[*assocKind]map[int64]bool{}
	var reads []read
	for _, k := range assocKinds { // in one order, as each kind's rows in id order: lockers wait in turn
		kindIDs, ok := ids[k]
		if !ok {
			continue
		}
		found[k] = map[int64]bool{}
		lock := "KEY SHARE"
		if k == activityKind {
			lock = "NO KEY UPDATE"
		}
		q := `SELECT id FROM ` + k.res.table + ` WHERE company_id = $1 AND id = ANY($2) ORDER BY id FOR ` + lock
		reads = append(reads, eachRow[fieldID](q, []any{companyID, kindIDs}, func(id *fieldID) { found[k][int64(*id)] = true }))
	}
	return found, reads
}

// createAssociations stores the items without an err in tx, each with its association.created
// event, and sets the createdAt of each, and existed of those that were there already (no event).
// An item whose end is not the company's object fails (errNotFound) and writes nothing. Round trips:
// the lock of the ends (with BEGIN), the INSERT, the read of those that existed; the events go with
// COMMIT.
func createAssociations(ctx context.Context, tx *tx, companyID int64, items []*association) error {
	if err := lockEnds(ctx, tx, companyID, items); err != nil {
		return err
	}
	rows := rowsOf(items)
	if len(rows.labels) == 0 {
		return nil
	}
	created := map[string]time.Time{} // by assocRow.key
	if err := tx.read(ctx, eachRow[assocRow](insertAssociations, rows.args(companyID), func(r *assocRow) { created[r.key()] = r.createdAt })); err != nil {
		return fmt.Errorf("insert associations: %w", err)
	}
	existing := map[string]time.Time{}
	if len(created) < len(rows.labels) {
		const q = `SELECT a_kind, a_id, b_kind, b_id, label, created_at FROM associations
			WHERE company_id = $1 AND (a_kind, a_id, b_kind, b_id, label) IN
				(SELECT * FROM unnest($2::text[], $3::bigint[], $4::text[], $5::bigint[], $6::text[]))`
		if err := tx.read(ctx, eachRow[assocRow](q, rows.args(companyID), func(r *assocRow) { existing[r.key()] = r.createdAt })); err != nil {
			return fmt.Errorf("read associations: %w", err)
		}
	}
	var evs []eventRow
	for _, a := range items {
		if a.err != nil {
			continue
		}
		createdAt, ok := created[a.key()]
		if !ok {
			a.createdAt = existing[a.key()]
			a.existed = true
			continue
		}
		a.createdAt = createdAt
		evs = append(evs, eventRow{"association.created", a.appendJSON(nil), nil})
	}
	recordEvents(tx, companyID, evs)
	return nil
}

// insertAssociations stores the rows of assocRows.args that are not there, in their order, and returns
// those it stored. An activity's target (no label) holds copies of the activity's place and type
// (schema/0020), and is added to its list (targetListSQL).
const insertAssociations = `WITH made AS (INSERT INTO associations (company_id, a_kind, a_id, b_kind, b_id, label, occurred_at, due_at, done_at, type)
	SELECT $1, r.a_kind, r.a_id, r.b_kind, r.b_id, r.label, a.occurred_at, a.due_at, a.done_at, a.type
	FROM unnest($2::text[], $3::bigint[], $4::text[], $5::bigint[], $6::text[]) WITH ORDINALITY AS r (a_kind, a_id, b_kind, b_id, label, n)
	LEFT JOIN activities a ON r.a_kind = 'activities' AND r.label = '' AND a.company_id = $1 AND a.id = r.a_id
	ORDER BY r.n
	ON CONFLICT (company_id, a_kind, a_id, b_kind, b_id, label) DO NOTHING
	RETURNING id, a_kind, a_id, b_kind, b_id, label, created_at), ` + targetsAdded + `
	SELECT a_kind, a_id, b_kind, b_id, label, created_at FROM made ORDER BY id`

// targetsAdded and targetsRemoved keep activities.targets (schema/0022) equal to the activities'
// target rows, in their ids' order, in the statement that writes those rows (made or gone, with
// their ids): each activity's new ones appended, those gone taken out. Each works from the row as
// it is when the statement gets its lock, so that concurrent writes of one activity's targets add
// up. An activity's create writes its list with its row: targetsAdded leaves a list that holds its
// rows already. A delete locks the activities first (in id order), as their own writes do before
// they move or take their rows: a delete of a contact that took the row first, then waited for the
// activity, met a PATCH marking the activity done, which held it and waited for the row (deadlock;
// TestTargetDeletesWaitForTheirActivitiesWrites).
const (
	targetsAdded = `listed AS (UPDATE activities x SET targets = x.targets || n.targets
		FROM (SELECT a_id, array_agg(b_kind || ':' || b_id ORDER BY id) AS targets FROM made
			WHERE ` + targetsSQL + ` GROUP BY a_id) n
		WHERE x.company_id = $1 AND x.id = n.a_id AND NOT x.targets @> n.targets)`
	targetsRemoved = `listed AS (UPDATE activities x
		SET targets = ARRAY(SELECT t FROM unnest(x.targets) WITH ORDINALITY AS u (t, i) WHERE t <> ALL(n.targets) ORDER BY i)
		FROM (SELECT a_id, array_agg(b_kind || ':' || b_id) AS targets FROM gone WHERE ` + targetsSQL + ` GROUP BY a_id) n
		WHERE x.company_id = $1 AND x.id = n.a_id)`
)

// deleteAssociations deletes the items without an err in tx, each with its association.deleted
// event; an item that is not there fails with errNotFound. Round trips: the DELETE (with BEGIN);
// the events go with COMMIT.
func deleteAssociations(ctx context.Context, tx *tx, companyID int64, items []*association) error {
	rows := rowsOf(items)
	deleted := map[string]time.Time{} // by assocRow.key
	const q = `WITH gone AS (DELETE FROM associations WHERE company_id = $1 AND (a_kind, a_id, b_kind, b_id, label) IN
			(SELECT * FROM unnest($2::text[], $3::bigint[], $4::text[], $5::bigint[], $6::text[]))
		RETURNING a_kind, a_id, b_kind, b_id, label, created_at), ` + targetsRemoved + `
		SELECT * FROM gone`
	if len(rows.labels) > 0 {
		const lock = `SELECT id FROM activities WHERE company_id = $1 AND id IN (SELECT a_id
			FROM unnest($2::text[], $3::bigint[], $4::text[], $5::bigint[], $6::text[]) AS r (a_kind, a_id, b_kind, b_id, label)
			WHERE ` + targetsSQL + `) ORDER BY id FOR NO KEY UPDATE`
		args := rows.args(companyID)
		tx.queue(lock, args...) // before the rows: see targetsRemoved
		if err := tx.read(ctx, eachRow[assocRow](q, args, func(r *assocRow) { deleted[r.key()] = r.createdAt })); err != nil {
			return fmt.Errorf("delete associations: %w", err)
		}
	}
	var evs []eventRow
	for _, a := range items {
		if a.err != nil {
			continue
		}
		createdAt, ok := deleted[a.key()]
		if !ok {
			a.err = errNotFound
			continue
		}
		a.createdAt = createdAt
		evs = append(evs, eventRow{"association.deleted", a.appendJSON(nil), nil})
	}
	recordEvents(tx, companyID, evs)
	return nil
}

// assocRows are rows of associations as the arrays a statement unnests: the ends in the rows' order.
type assocRows struct {
	aKinds, bKinds, labels []string
	aIDs, bIDs             []int64
}

// rowsOf returns the rows of the items without an err.
func rowsOf(items []*association) assocRows {
	var rs assocRows
	for _, a := range items {
		if a.err != nil {
			continue
		}
		aKind, aID, bKind, bID := a.row()
		rs.aKinds = append(rs.aKinds, aKind)
		rs.aIDs = append(rs.aIDs, aID)
		rs.bKinds = append(rs.bKinds, bKind)
		rs.bIDs = append(rs.bIDs, bID)
		rs.labels = append(rs.labels, a.label)
	}
	return rs
}

// args are the arguments of a statement over rs: the company ($1), then the arrays ($2 to $6).
func (rs assocRows) args(companyID int64) []any {
	return []any{companyID, rs.aKinds, rs.aIDs, rs.bKinds, rs.bIDs, rs.labels}
}

// assocRow is a row of associations: its ends in their row's order, its label and when it was made.
type assocRow struct {
	aKind, bKind string
	aID, bID     int64
	label        string
	createdAt    time.Time
}

func (r *assocRow) scanDest() []any {
	return []any{&r.aKind, &r.aID, &r.bKind, &r.bID, &r.label, &r.createdAt}
}

// key identifies the row's association: its ends and its label.
func (r *assocRow) key() string {
	return fmt.Sprintf("%s %d %s %d %s", r.aKind, r.aID, r.bKind, r.bID, r.label)
}

// key is the key of a's row (assocRow.key).
func (a *association) key() string {
	aKind, aID, bKind, bID := a.row()
	r := assocRow{aKind: aKind, aID: aID, bKind: bKind, bID: bID, label: a.label}
	return r.key()
}

// seenFrom is the association of row r seen from its end of kind k whose id is one of ids.
func (r *assocRow) seenFrom(k *assocKind) *association {
	a := &association{from: kindOf(r.aKind), fromID: r.aID, to: kindOf(r.bKind), toID: r.bID, label: r.label, createdAt: r.createdAt}
	if r.aKind != k.path {
		a.from, a.fromID, a.to, a.toID = a.to, a.toID, a.from, a.fromID
	}
	return a
}

// removeAssociations deletes every association of the company's objects ids of kind k in tx, with an
// association.deleted event of each seen from k's end, and returns them: what an object's delete
// takes with it. Round trips: the DELETE; the events go with the next.
func removeAssociations(ctx context.Context, tx *tx, companyID int64, k *assocKind, ids []int64) ([]assocRow, error) {
	var rows []assocRow
	const q = `WITH gone AS (DELETE FROM associations WHERE company_id = $1 AND (a_kind = $2 AND a_id = ANY($3) OR b_kind = $2 AND b_id = ANY($3))
		RETURNING a_kind, a_id, b_kind, b_id, label, created_at), ` + targetsRemoved + `
		SELECT * FROM gone`
	const lock = `SELECT id FROM activities WHERE company_id = $1 AND id IN (SELECT a_id FROM associations
		WHERE company_id = $1 AND (a_kind = $2 AND a_id = ANY($3) OR b_kind = $2 AND b_id = ANY($3)) AND ` + targetsSQL + `)
		ORDER BY id FOR NO KEY UPDATE`
	tx.queue(lock, companyID, k.path, ids) // before the rows: see targetsRemoved
	if err := tx.read(ctx, rowsInto[assocRow](&rows, q, companyID, k.path, ids)); err != nil {
		return nil, fmt.Errorf("delete associations: %w", err)
	}
	evs := make([]eventRow, len(rows))
	for i := range rows {
		evs[i] = eventRow{"association.deleted", rows[i].seenFrom(k).appendJSON(nil), nil}
	}
	recordEvents(tx, companyID, evs)
	return rows, nil
}

// moveAssociations moves the associations of the company's objects from (of kind k) to its object
// to, as a merge does: each is deleted (association.deleted) and made again from to
// (association.created), unless to has it already. Round trips: the DELETE, the INSERT.
func moveAssociations(ctx context.Context, tx *tx, companyID int64, k *assocKind, from []int64, to int64) error {
	rows, err := removeAssociations(ctx, tx, companyID, k, from)
	if err != nil || len(rows) == 0 {
		return err
	}
	var items []*association
	for i := range rows {
		a := rows[i].seenFrom(k)
		a.fromID = to
		items = append(items, a)
	}
	var made []assocRow
	if err := tx.read(ctx, rowsInto[assocRow](&made, insertAssociations, rowsOf(items).args(companyID)...)); err != nil {
		return fmt.Errorf("move associations: %w", err)
	}
	evs := make([]eventRow, len(made))
	for i := range made {
		evs[i] = eventRow{"association.created", made[i].seenFrom(k).appendJSON(nil), nil}
	}
	recordEvents(tx, companyID, evs)
	return nil
}

// readAssociation reads the association of a PUT or DELETE of /v1/{kind}/{id}/associations/{toKind}/{toId}
// (from is the route's kind): its ends from the path, and its label from label, the body's or the
// query's. An unknown toKind, or from's own, is 404; a bad id 400; a bad label 422.
func readAssociation(r *http.Request, from *assocKind, label string) (*association, *apiError) {
	to := kindOf(r.PathValue("toKind"))
	if to == nil || to == from || to.path != r.PathValue("toKind") {
		return nil, errNoRoute(r)
	}
	fromID, aerr := pathID(r)
	if aerr != nil {
		return nil, aerr
	}
	toID, ok := parseID(r.PathValue("toId"))
	if !ok {
		return nil, badRequest("invalid_id", fmt.Sprintf("The id in the path must be a positive integer; got %q.", r.PathValue("toId")))
	}
	if label != "" && !labelPattern.MatchString(label) {
		return nil, &apiError{Status: http.StatusUnprocessableEntity, Code: "validation_failed", Detail: "The request has invalid fields.",
			Errors: []fieldError{{Field: "label", Message: "must be a word of a-z, 0-9 and _, starting with a letter, of at most 40 characters"}}}
	}
	return &association{from: from, fromID: fromID, to: to, toID: toID, label: label}, nil
}

// readLabel reads the label of a PUT's body, none or {"label": "..."}; a bad one is 422.
func readLabel(members []member) (string, *apiError) {
	var label string
	errs := applyCreate(members, []bodyField{{"label", func(raw json.RawMessage) string {
		if isNull(raw) {
			return "" // the unlabelled association
		}
		s, msg := jsonString(raw, 40)
		label = s
		return msg
	}, false}})
	if errs != nil {
		return "", clientError(fieldErrors(errs))
	}
	return label, nil
}

// associationScopeError is the 403 of a key that may not write (or read) both ends of a. An
// association with an activity is written with write on activities and read on the other kind.
func associationScopeError(t tenant, a *association, access string) *apiError {
	fromAccess, toAccess := access, access
	switch {
	case access == "write" && a.to == activityKind:
		fromAccess = "read"
	case access == "write" && a.from == activityKind:
		toAccess = "read"
	}
	if aerr := scopeError(t.scopes, a.from.path+":"+fromAccess); aerr != nil {
		return aerr
	}
	return scopeError(t.scopes, a.to.path+":"+toAccess)
}

// handleAssociationPut answers PUT /v1/{kind}/{id}/associations/{toKind}/{toId}, its body none or
// {"label": "..."}: 201 with the association, or 200 with it when it was there already; 404 when an
// end is not the company's object.
func handleAssociationPut(st *store, from *assocKind, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wr, a, aerr := readAssociationPut(w, r, from)
		if aerr != nil {
			writeProblem(w, r, aerr)
			return
		}
		runWrite(w, r, st, log, wr, func(tx *tx) (answer, error) {
			err := createAssociations(r.Context(), tx, tenantOf(r).companyID, []*association{a})
			if err == nil {
				err = a.err
			}
			if err != nil {
				return answer{}, err
			}
			status := http.StatusCreated
			if a.existed {
				status = http.StatusOK
			}
			return answer{status: status, body: append(a.appendJSON(nil), '\n')}, nil
		})
	})
}

// readAssociationPut reads a PUT of an association: no query parameters, a body (none, or a JSON
// object with a label), its Idempotency-Key, the association its path names, and the key's scopes.
func readAssociationPut(w http.ResponseWriter, r *http.Request, from *assocKind) (*write, *association, *apiError) {
	var wr write
	if _, aerr := queryParams(r); aerr != nil {
		return nil, nil, aerr
	}
	if r.ContentLength != 0 || r.Header.Get("Content-Type") != "" { // a body, sent as a POST's
		members, aerr := readObject(w, r)
		if aerr != nil {
			return nil, nil, aerr
		}
		wr.members = members
	}
	label, aerr := readLabel(wr.members)
	if aerr != nil {
		return nil, nil, aerr
	}
	wr.ik, aerr = readIdempotencyKey(r, wr.members)
	if aerr != nil {
		return nil, nil, aerr
	}
	a, aerr := readAssociation(r, from, label)
	if aerr != nil {
		return nil, nil, aerr
	}
	return &wr, a, associationScopeError(tenantOf(r), a, "write")
}

// handleAssociationDelete answers DELETE /v1/{kind}/{id}/associations/{toKind}/{toId}?label=...:
// 204, or 404 when there is no such association.
func handleAssociationDelete(st *store, from *assocKind, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wr, a, aerr := readAssociationDelete(r, from)
		if aerr != nil {
			writeProblem(w, r, aerr)
			return
		}
		runWrite(w, r, st, log, wr, func(tx *tx) (answer, error) {
			err := deleteAssociations(r.Context(), tx, tenantOf(r).companyID, []*association{a})
			if err == nil {
				err = a.err
			}
			return answer{status: http.StatusNoContent}, err
		})
	})
}

// readAssociationDelete reads a DELETE of an association: its label (the query's), its
// Idempotency-Key, the association its path names, and the key's scopes.
func readAssociationDelete(r *http.Request, from *assocKind) (*write, *association, *apiError) {
	var wr write
	q, aerr := queryParams(r, "label")
	if aerr != nil {
		return nil, nil, aerr
	}
	wr.ik, aerr = readIdempotencyKey(r, nil)
	if aerr != nil {
		return nil, nil, aerr
	}
	a, aerr := readAssociation(r, from, q.Get("label"))
	if aerr != nil {
		return nil, nil, aerr
	}
	return &wr, a, associationScopeError(tenantOf(r), a, "write")
}

// associated is an element of a list of associations: an association's id (its place in the list),
// label and time, and the object at its other end.
type associated[T any] struct {
	id        int64
	label     string
	createdAt time.Time
	obj       T
}

// associationList is what a list or count of the associations of one object starts with: its
// ends' kinds, the object, the label asked for (nil: any), and the list's limit and cursor.
type associationList struct {
	from, to *assocKind
	fromID   int64
	label    *string
	lq       *listQuery
	exps     []expansion
}

// readAssociationList reads a GET of /v1/{kind}/{id}/associations/{toKind}[/count] (from: the
// route's kind): the kinds, the id, label, limit, cursor (of a list) and expand[] of toKind's.
func readAssociationList(r *http.Request, st *store, from *assocKind, list bool) (*associationList, error) {
	to := kindOf(r.PathValue("toKind"))
	if to == nil || to == from || to.path != r.PathValue("toKind") {
		return nil, errNoRoute(r)
	}
	if aerr := scopeError(tenantOf(r).scopes, to.path+":read"); aerr != nil {
		return nil, aerr
	}
	id, aerr := pathID(r)
	if aerr != nil {
		return nil, aerr
	}
	params := []string{"label", "expand[]"}
	if list {
		params = append(params, "limit", "cursor")
	}
	q, aerr := queryParams(r, params...)
	if aerr != nil {
		return nil, aerr
	}
	al := &associationList{from: from, to: to, fromID: id}
	if v, ok := q["label"]; ok {
		if !labelPattern.MatchString(v[0]) {
			return nil, badParam("label", "must be a label: a word of a-z, 0-9 and _, starting with a letter")
		}
		al.label = &v[0]
	}
	al.exps, aerr = parseExpand(r, q, to.res.expansions)
	if aerr != nil {
		return nil, aerr
	}
	limit := url.Values{}
	if v, ok := q["limit"]; ok {
		limit["limit"] = v
	}
	al.lq, aerr = (&listSpec{}).parse(limit)
	if aerr != nil {
		return nil, aerr
	}
	if !list {
		return al, nil
	}
	if c, ok := q["cursor"]; ok {
		key, err := st.listCursorKey(r.Context())
		if err != nil {
			return nil, err
		}
		if aerr := al.lq.readCursor(c[0], key, al.scope(tenantOf(r).companyID)); aerr != nil {
			return nil, aerr
		}
	}
	return al, nil
}

// scope is what a cursor of the list is good for: this list of this company, with this label.
func (al *associationList) scope(companyID int64) string {
	s := fmt.Sprintf("associations\n%d\n%s %d %s", companyID, al.from.path, al.fromID, al.to.path)
	if al.label != nil {
		s += "\nlabel=" + *al.label
	}
	return s
}

// where returns the SQL condition on associations of the list ($2: the object, $3: the label, when
// one is asked for), the column of the other end's id, and the arguments from $1.
func (al *associationList) where(companyID int64) (cond, other string, args []any) {
	cond, other = endSQL(al.from, al.to, "$2")
	args = []any{companyID, al.fromID}
	if al.label != nil {
		cond += " AND label = $3"
		args = append(args, *al.label)
	}
	return cond, other, args
}

// exists is the read that sets *found when the list's object is the company's.
func (al *associationList) exists(companyID int64, found *bool) read {
	return read{`SELECT FROM ` + al.from.res.table + ` WHERE company_id = $1 AND id = $2`, []any{companyID, al.fromID},
		func(rs rows) error {
			*found = rs.Next()
			return rs.Err()
		}}
}

// handleAssociationList answers GET /v1/{kind}/{id}/associations/{toKind}: the associations of the
// company's object id with objects of toKind, oldest first, each {"label", "createdAt", "object"}
// with the object as its retrieve returns it (expand[] of toKind's). byKind has the list of each kind.
func handleAssociationList(st *store, from *assocKind, log *slog.Logger) http.Handler {
	byKind := map[string]func(http.ResponseWriter, *http.Request, *associationList){
		"business":      associatedPage[business](st, log),
		"contacts":      associatedPage[contact](st, log),
		"organizations": associatedPage[organization](st, log),
		"activities":    associatedPage[activity](st, log),
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		al, err := readAssociationList(r, st, from, true)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		byKind[al.to.path](w, r, al)
	})
}

// associatedPage answers a page of al, whose other ends are Ts: one round trip for the page (with
// the check of al's object), one for each expanded kind, as a list page.
func associatedPage[T any, P object[T]](st *store, log *slog.Logger) func(http.ResponseWriter, *http.Request, *associationList) {
	return func(w http.ResponseWriter, r *http.Request, al *associationList) {
		companyID := tenantOf(r).companyID
		cond, other, args := al.where(companyID)
		if al.lq.after != nil {
			args = append(args, al.lq.after.id)
			cond += " AND id > $" + strconv.Itoa(len(args))
		}
		// The page of associations and the row after it, and for each the object at its other end, as
		// its retrieve reads it.
		q := `SELECT p.id, p.label, p.created_at, x.* FROM (SELECT id, label, created_at, ` + other + ` AS other
			FROM associations WHERE company_id = $1 AND ` + cond + ` ORDER BY id` + al.lq.limitSQL() + `) AS p
			CROSS JOIN LATERAL (` + al.to.res.selectSQL + ` AND id = p.other) AS x ORDER BY p.id`
		page := make([]associated[T], 0, al.lq.limit+1)
		found := false
		err := st.read(r.Context(), al.exists(companyID, &found), read{q, args, func(rs rows) error {
			for rs.Next() {
				var e associated[T]
				if err := rs.Scan(append([]any{&e.id, &e.label, &e.createdAt}, P(&e.obj).scanDest()...)...); err != nil {
					return err
				}
				page = append(page, e)
			}
			return rs.Err()
		}})
		if err == nil && !found {
			err = notFound(r.Context(), st.read, al.from.res, companyID, al.fromID)
		}
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		writeAssociatedPage[T, P](w, r, st, log, al, page)
	}
}

// writeAssociatedPage sends page, read for al (with one element more than its limit when there is a
// next page), with the objects' expansions.
func writeAssociatedPage[T any, P object[T]](w http.ResponseWriter, r *http.Request, st *store, log *slog.Logger, al *associationList, page []associated[T]) {
	companyID := tenantOf(r).companyID
	next := ""
	if len(page) > al.lq.limit {
		page = page[:al.lq.limit]
		key, err := st.listCursorKey(r.Context())
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		next = al.lq.cursor(key, al.scope(companyID), page[len(page)-1].id, "", false)
	}
	objs := make([]T, len(page))
	for i := range page {
		objs[i] = page[i].obj
	}
	rel, err := loadRelated[T, P](r.Context(), st.read, companyID, al.exps, objs)
	if err != nil {
		writeError(w, r, log, err)
		return
	}
	b := []byte(`{"data":[`)
	for i := range page {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"label":`...)
		if page[i].label == "" {
			b = append(b, "null"...)
		} else {
			b = appendString(b, page[i].label)
		}
		b = appendTime(append(b, `,"createdAt":`...), page[i].createdAt)
		b = appendExpanded(append(b, `,"object":`...), P(&objs[i]), al.exps, rel)
		b = append(b, '}')
	}
	b = appendPagination(append(b, "],"...), al.lq.limit, next)
	writeJSON(w, r, http.StatusOK, append(b, "}\n"...))
}

// handleAssociationCount answers GET /v1/{kind}/{id}/associations/{toKind}/count: {"count": n}, the
// associations of the company's object id with objects of toKind (a pair with two labels counts 2).
func handleAssociationCount(st *store, from *assocKind, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		al, err := readAssociationList(r, st, from, false)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		companyID := tenantOf(r).companyID
		cond, _, args := al.where(companyID)
		var n fieldID // a count read from a row
		found := false
		err = st.read(r.Context(), al.exists(companyID, &found),
			eachRow[fieldID](`SELECT count(*) FROM associations WHERE company_id = $1 AND `+cond, args, func(c *fieldID) { n = *c }))
		if err == nil && !found {
			err = notFound(r.Context(), st.read, al.from.res, companyID, al.fromID)
		}
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		writeJSON(w, r, http.StatusOK, appendCount(nil, int64(n)))
	})
}

// handleAssociationBatch answers POST /v1/associations/batch/{create|delete}, {"items": [{"from":
// {"object", "id"}, "to": {...}, "label"}, ...]} (1 to maxAssociationItems) and "atomic" (default
// true): 200 {"data": [{"index", "status": created|unchanged|deleted, "object"}]} (207 when atomic is
// false and some item failed), else 422 with an errors entry per failing item, nothing changed. The
// key needs write on both kinds of every item (403 for the whole batch otherwise).
func handleAssociationBatch(st *store, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := r.PathValue("op")
		if op != "create" && op != "delete" { // op is one of the four routesOf routes
			writeProblem(w, r, errNoRoute(r))
			return
		}
		wr, items, atomic, err := readAssociationBatchRequest(w, r)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		write := createAssociations
		if op == "delete" {
			write = deleteAssociations
		}
		assocs := make([]*association, len(items))
		for i, it := range items {
			assocs[i] = &it.obj
		}
		var failure answer // an atomic batch's, which errBatchFailed rolls back
		a, replayed, err := st.writeOnce(r.Context(), tenantOf(r).companyID, wr.ik, func(tx *tx) (answer, error) {
			if err := write(r.Context(), tx, tenantOf(r).companyID, assocs); err != nil {
				return answer{}, err
			}
			var err error
			failure, err = associationBatchAnswer(r, items, atomic, op)
			return failure, err
		})
		if errors.Is(err, errBatchFailed) {
			a, err = failure, nil
		}
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		a.write(w, r, replayed)
	})
}

// readAssociationBatchRequest reads a batch of associations: no query parameters, its body
// (readAssociationBatch), its Idempotency-Key, and the key's scopes for every item.
func readAssociationBatchRequest(w http.ResponseWriter, r *http.Request) (*write, []*batchItem[association], bool, error) {
	var wr write
	if _, aerr := queryParams(r); aerr != nil {
		return nil, nil, false, aerr
	}
	members, aerr := readObject(w, r)
	if aerr != nil {
		return nil, nil, false, aerr
	}
	wr.members = members
	wr.ik, aerr = readIdempotencyKey(r, wr.members)
	if aerr != nil {
		return nil, nil, false, aerr
	}
	items, atomic, err := readAssociationBatch(wr.members)
	if err != nil {
		return nil, nil, false, err
	}
	return &wr, items, atomic, batchScopeError(tenantOf(r), items)
}

// readAssociationBatch reads a batch's body: its items, each an association or its failure (its
// obj.err), and "atomic". The whole body's failure is fieldErrors.
func readAssociationBatch(members []member) (items []*batchItem[association], atomic bool, err error) {
	atomic = true
	errs := applyCreate(members, []bodyField{{"items", func(raw json.RawMessage) string {
		var raws []json.RawMessage
		if json.Unmarshal(raw, &raws) != nil || len(raws) == 0 || len(raws) > maxAssociationItems {
			return fmt.Sprintf("must be an array of 1 to %d items", maxAssociationItems)
		}
		for i, raw := range raws {
			items = append(items, readAssociationItem("items["+strconv.Itoa(i)+"]", raw))
		}
		return ""
	}, true}, {"atomic", boolean(&atomic), false}})
	if errs != nil {
		return nil, atomic, fieldErrors(errs)
	}
	seen := map[string]int{}
	for i, it := range items { // two items for one association: its status would be a guess
		if it.obj.err != nil {
			continue
		}
		if first, dup := seen[it.obj.key()]; dup {
			it.obj.err = duplicateError("to", first)
			continue
		}
		seen[it.obj.key()] = i
	}
	return items, atomic, nil
}

// readAssociationItem reads one item, {"from": {"object", "id"}, "to": {...}, "label"}, at at.
func readAssociationItem(at string, raw json.RawMessage) *batchItem[association] {
	it := &batchItem[association]{at: at}
	members, dup, ok := jsonMembers(raw)
	switch {
	case dup != "":
		it.obj.err = fieldErrors{{Field: dup, Message: "is given more than once"}}
	case !ok:
		it.obj.err = fieldErrors{{Message: "must be a JSON object"}}
	}
	if it.obj.err != nil {
		return it
	}
	a := &it.obj
	errs := applyCreate(members, []bodyField{
		{"from", readEnd(&a.from, &a.fromID), true},
		{"to", readEnd(&a.to, &a.toID), true},
		{"label", func(raw json.RawMessage) string {
			if isNull(raw) {
				return ""
			}
			s, msg := jsonString(raw, 40)
			a.label = s
			if msg == "" && !labelPattern.MatchString(s) {
				msg = "must be a word of a-z, 0-9 and _, starting with a letter, of at most 40 characters"
			}
			return msg
		}, false}})
	if errs == nil && a.from == a.to {
		errs = append(errs, fieldError{Field: "to", Message: "must be an object of another kind than from"})
	}
	if errs != nil {
		a.err = fieldErrors(errs)
	}
	return it
}

// readEnd is the rule of an end of an association: {"object": "contact", "id": "12"}, the id a string
// of digits or a number.
func readEnd(k **assocKind, id *int64) func(json.RawMessage) string {
	return func(raw json.RawMessage) string {
		members, dup, ok := jsonMembers(raw)
		object, _ := jsonString(memberRaw(members, "object"), 20)
		*k = nil
		for _, kind := range assocKinds {
			if kind.object == object {
				*k = kind
			}
		}
		*id = readItemID(memberRaw(members, "id"))
		if dup != "" || !ok || len(members) != 2 || *k == nil || *id == 0 {
			return `must be {"object": "contact", "business", "organization" or "activity", "id": the object's id}`
		}
		return ""
	}
}

// batchScopeError is the 403 of a key that may not write both kinds of every item of a batch.
func batchScopeError(t tenant, items []*batchItem[association]) error {
	for _, it := range items {
		if it.obj.err != nil {
			continue
		}
		if aerr := associationScopeError(t, &it.obj, "write"); aerr != nil {
			return aerr
		}
	}
	return nil
}

// associationBatchAnswer is the answer of a batch of op whose items ran: 200 with every item's status
// and association, 207 when some failed; an atomic one batchFailure's and errBatchFailed.
func associationBatchAnswer(r *http.Request, items []*batchItem[association], atomic bool, op string) (answer, error) {
	failed := 0
	for _, it := range items {
		it.err = it.obj.err
		if it.err != nil {
			failed++
		}
	}
	if atomic && failed > 0 {
		return batchFailure(r, items, failed), errBatchFailed
	}
	a := answer{status: http.StatusOK, body: []byte(`{"data":[`)}
	if failed > 0 {
		a.status = http.StatusMultiStatus
	}
	spent := 0 // bytes of the failed items' problems
	for i, it := range items {
		if i > 0 {
			a.body = append(a.body, ',')
		}
		a.body = strconv.AppendInt(append(a.body, `{"index":`...), int64(i), 10)
		status := "deleted"
		switch {
		case it.err != nil:
			p := encodeProblem(r, it.problem(itemEntries(spent)))
			spent += len(p)
			a.body = append(append(a.body, `,"status":"error","error":`...), p[:len(p)-1]...)
			a.body = append(a.body, '}')
			continue
		case op == "create" && it.obj.existed:
			status = "unchanged"
		case op == "create":
			status = "created"
		}
		a.body = appendString(append(a.body, `,"status":`...), status)
		if status != "deleted" { // as a batch of objects answers a delete: no object
			a.body = it.obj.appendJSON(append(a.body, `,"object":`...))
		}
		a.body = append(a.body, '}')
	}
	a.body = append(a.body, "]}\n"...)
	return a, nil
}

// associatedParams are the query parameters of the associated filters of a list of kind k's objects.
func associatedParams(k *assocKind) []string {
	var ps []string
	for _, from := range assocKinds {
		if from != k {
			ps = append(ps, "associated."+from.path)
		}
	}
	return append(ps, "associatedLabel")
}

// associatedScopeError is the 403 of a list or count whose associated.{kind} filter names a kind the
// key does not read: which objects are associated with one says something of it.
func associatedScopeError(t tenant, q url.Values) *apiError {
	for _, k := range assocKinds {
		if _, ok := q["associated."+k.path]; ok {
			if aerr := scopeError(t.scopes, k.path+":read"); aerr != nil {
				return aerr
			}
		}
	}
	return nil
}

// addAssociated adds to a list or count of kind k's objects the filters of q: associated.{kind}=ID,
// the objects associated with the company's object ID of that kind, and associatedLabel, with that
// label (it needs one associated.{kind}). Each is one index walk of the associations of ID.
func (lq *listQuery) addAssociated(q url.Values, k *assocKind) *apiError {
	label, hasLabel := q["associatedLabel"]
	if hasLabel && !labelPattern.MatchString(label[0]) {
		return badParam("associatedLabel", "must be a label: a word of a-z, 0-9 and _, starting with a letter")
	}
	named := false
	for _, from := range assocKinds {
		v, ok := q["associated."+from.path]
		if from == k || !ok {
			continue
		}
		id, valid := parseID(v[0])
		if !valid {
			return badParam("associated."+from.path, "must be an id")
		}
		named = true
		lq.args = append(lq.args, id)
		cond, other := endSQL(from, k, "$"+strconv.Itoa(len(lq.args)+1)) // $1 is the company
		if hasLabel {
			lq.args = append(lq.args, label[0])
			cond += " AND label = $" + strconv.Itoa(len(lq.args)+1)
		}
		lq.conds = append(lq.conds, "id IN (SELECT "+other+" FROM associations WHERE company_id = $1 AND "+cond+")")
		if lq.pageSQL == nil && lq.sort.isID() { // the first associated filter of a list by id
			lq.pageSQL = lq.associatedPageSQL(len(lq.conds)-1, "company_id = $1 AND "+cond, other)
		}
		lq.binding += "associated." + from.path + "=" + strconv.Quote(v[0]) + "\n"
	}
	if hasLabel && !named {
		return badParam("associatedLabel", "needs an associated.{kind} filter to apply to")
	}
	if hasLabel {
		lq.binding += "associatedLabel=" + strconv.Quote(label[0]) + "\n"
	}
	return nil
}

// associatedPageSQL returns the statement maker of a page of a list by id whose filter lq.conds[i] is
// associated.{kind} (where: its condition on associations, other: the column of the list's ids): a
// walk of the other ends' ids in order through their index, each object then read by its key with
// the list's other filters, which stops at the page's end. As a semi-join (as the count has it) the
// filter reads every association of the object first: with 1,000,000 business records, 500 of them
// associated with a contact, a page took 8.7 ms of statement time that way and 1.3 ms as this walk
// (EXPLAIN ANALYZE), against 0.18 ms filtered by organizationId (docs/scaling.md has the pages' rates).
func (lq *listQuery) associatedPageSQL(i int, where, other string) func(string, int64) (string, []any) {
	return func(base string, companyID int64) (string, []any) {
		args := append([]any{companyID}, lq.args...)
		dir, cmp := "", " > "
		if lq.desc {
			dir, cmp = " DESC", " < "
		}
		walk := where
		if lq.after != nil {
			args = append(args, lq.after.id)
			walk += " AND " + other + cmp + "$" + strconv.Itoa(len(args))
		}
		return `SELECT x.* FROM (SELECT DISTINCT ` + other + ` AS other FROM associations WHERE ` + walk + ` ORDER BY 1` + dir + `) AS a
			CROSS JOIN LATERAL (` + lq.lateralSQL(base, "a.other", i) + `) AS x ORDER BY a.other` + dir + lq.limitSQL(), args
	}
}
