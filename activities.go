package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// Activities (API.md section 18): notes, tasks, calls, meetings and e-mails, each about up to 20
// records, its targets. A target is an association without a label (associations.go), written in
// the activity's own write with its association.* events, and read with the activity's row.

// activityTypes are the kinds of activity.
var activityTypes = []string{"note", "task", "call", "meeting", "email"}

// maxTargets is how many objects one activity may be about.
const maxTargets = 20

// activity is a note, task, call, meeting or e-mail (API.md section 18).
type activity struct {
	ID              int64
	Type            string
	Subject         pgtype.Text
	Body            pgtype.Text
	OccurredAt      pgtype.Timestamptz // never null once stored; not given on create: the time of the create
	DueAt           pgtype.Timestamptz
	DoneAt          pgtype.Timestamptz
	DurationSeconds pgtype.Int8
	UserOwnerID     int64 // 0 (not given on create): the key's user
	UserCreatorID   int64
	CreatedAt       time.Time
	UpdatedAt       time.Time
	Version         int64
	Custom          customValues
	Targets         targets
}

func (a *activity) fields() []bodyField {
	return []bodyField{
		{"type", oneOf(&a.Type, activityTypes), true},
		{"subject", nullableText(&a.Subject, 255, checkNotBlank), false},
		{"body", nullableText(&a.Body, 65536, nil), false},
		{"occurredAt", requiredTime(&a.OccurredAt), false},
		{"dueAt", nullableTime(&a.DueAt), false},
		{"doneAt", nullableTime(&a.DoneAt), false},
		{"durationSeconds", nullableInt(&a.DurationSeconds, 0, 604800), false},
		{"userOwnerId", requiredID(&a.UserOwnerID), false},
		{"custom", a.Custom.apply, false},
		{"targets", a.Targets.apply, false},
	}
}

// appendJSON appends a as JSON, keys in a fixed order.
func (a *activity) appendJSON(b []byte) []byte {
	return appendObject(b, "id", &a.ID, "type", &a.Type, "subject", &a.Subject, "body", &a.Body,
		"occurredAt", &a.OccurredAt, "dueAt", &a.DueAt, "doneAt", &a.DoneAt, "durationSeconds", &a.DurationSeconds,
		"userOwnerId", &a.UserOwnerID, "userCreatorId", &a.UserCreatorID, "createdAt", &a.CreatedAt,
		"updatedAt", &a.UpdatedAt, "custom", &a.Custom, "targets", &a.Targets)
}

func (a *activity) key() int64     { return a.ID }
func (a *activity) version() int64 { return a.Version }

func (a *activity) sortKey(sort string) (string, bool) {
	switch sort {
	case "occurredAt":
		return timeKey(a.OccurredAt.Time), false
	case "dueAt":
		return timeKey(a.DueAt.Time), !a.DueAt.Valid
	case "createdAt":
		return timeKey(a.CreatedAt), false
	case "updatedAt":
		return timeKey(a.UpdatedAt), false
	}
	return a.Custom.sortKey(sort)
}

func (a *activity) relatedID(name string) (int64, bool) {
	switch name {
	case "userOwner":
		return a.UserOwnerID, true
	case "userCreator":
		return a.UserCreatorID, true
	}
	return 0, false
}

// relatedIDs are the ids of the targets of kind k (multiRelated, expand.go: expand[]=targets).
func (a *activity) relatedIDs(k relKind) []int64 {
	var ids []int64
	for _, t := range a.Targets.list {
		if t.kind.rel == k {
			ids = append(ids, t.id)
		}
	}
	return ids
}

// appendExpandedJSON is appendJSON with each target's object of rel in its "data".
func (a *activity) appendExpandedJSON(b []byte, rel *related) []byte {
	c := *a
	c.Targets.rel = rel
	return c.appendJSON(b)
}

// target is an object an activity is about.
type target struct {
	kind *assocKind
	id   int64
}

// targets are an activity's targets, in the order of their associations; rel, when set, holds the
// objects expand[]=targets embeds.
type targets struct {
	list []target
	rel  *related
}

// ScanText reads the targets column of selectSQL, the activity's targets in order: "contacts:12,business:7",
// or "" for none.
func (ts *targets) ScanText(v pgtype.Text) error {
	ts.list = nil
	if v.String == "" {
		return nil
	}
	for s := range strings.SplitSeq(v.String, ",") {
		path, idText, _ := strings.Cut(s, ":")
		id, err := strconv.ParseInt(idText, 10, 64)
		k := kindOf(path)
		if err != nil || k == nil {
			return fmt.Errorf("activity target %q", s)
		}
		ts.list = append(ts.list, target{k, id})
	}
	return nil
}

// stored is the list as activities.targets holds it (schema/0022).
func (ts *targets) stored() []string {
	out := make([]string, len(ts.list))
	for i, t := range ts.list {
		out[i] = t.kind.path + ":" + strconv.FormatInt(t.id, 10)
	}
	return out
}

// appendJSON writes the targets: [{"object": "contact", "id": "12"}, ...], each with "data" when expanded.
func (ts *targets) appendJSON(b []byte) []byte {
	b = append(b, '[')
	for i, t := range ts.list {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendEnd(b, t.kind, t.id)
		if ts.rel == nil {
			continue
		}
		b = append(b[:len(b)-1], `,"data":`...) // reopen the end
		if data, ok := ts.rel[t.kind.rel][t.id]; ok {
			b = append(b, data...)
		} else {
			b = append(b, "null"...)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// apply is the rule of the body member targets: 0 to maxTargets distinct objects, replacing the
// targets whole. The kept ones stay first, in their order, then the new ones as sent: the order of
// their associations. Whether they exist is checkActivity's.
func (ts *targets) apply(raw json.RawMessage) string {
	var raws []json.RawMessage
	if json.Unmarshal(raw, &raws) != nil || raws == nil || len(raws) > maxTargets {
		return fmt.Sprintf(`must be an array of at most %d objects {"object": "contact", "business" or "organization", "id": its id}`, maxTargets)
	}
	sent := make([]target, len(raws))
	for i, r := range raws {
		if msg := readEnd(&sent[i].kind, &sent[i].id)(r); msg != "" || sent[i].kind == activityKind {
			return fmt.Sprintf(`item %d must be {"object": "contact", "business" or "organization", "id": its id}`, i)
		}
		if slices.Contains(sent[:i], sent[i]) {
			return fmt.Sprintf("item %d names the same object as an earlier one", i)
		}
	}
	var list []target
	for _, t := range ts.list {
		if slices.Contains(sent, t) {
			list = append(list, t)
		}
	}
	for _, t := range sent {
		if !slices.Contains(ts.list, t) {
			list = append(list, t)
		}
	}
	ts.list = list
	return ""
}

// associations returns the associations of activity id with each of ts.
func associationsOf(id int64, ts []target) []*association {
	out := make([]*association, len(ts))
	for i, t := range ts {
		out[i] = &association{from: activityKind, fromID: id, to: t.kind, toID: t.id}
	}
	return out
}

// SQL of activities. Every statement is scoped by company_id.

func (a *activity) scanDest() []any {
	return append([]any{&a.ID, &a.Type, &a.Subject, &a.Body, &a.OccurredAt, &a.DueAt, &a.DoneAt, &a.DurationSeconds,
		&a.UserOwnerID, &a.UserCreatorID, &a.CreatedAt, &a.UpdatedAt, &a.Version}, append(a.Custom.scanDest(), &a.Targets)...)
}

// targetsSQL is the condition on associations that they are targets of an activity of a's column
// a_id: an activity is always an association's a end ("activities" sorts first).
const targetsSQL = `a_kind = 'activities' AND label = ''`

var activities = &resource{
	path:  "/v1/activities",
	table: "activities",
	selectSQL: `SELECT id, type, subject, body, occurred_at, due_at, done_at, duration_seconds, user_owner_id,
		user_creator_id, created_at, updated_at, version, ` + customColumns("activities", "activity") + `,
		array_to_string(targets, ',') FROM activities WHERE company_id = $1`,
	countSQL:   `SELECT count(*) FROM activities WHERE company_id = $1`,
	event:      "activity",
	lists:      activityLists,
	expansions: activityExpansions,
}

// activityLists is what GET /v1/activities and /v1/activities/count take (API.md section 18).
// schema/0017_activities.sql has an index for each sort and filter.
var activityLists = &listSpec{
	sorts: []sortField{
		{name: "occurredAt", col: "occurred_at", kind: keyTime, copied: true},
		{name: "dueAt", col: "due_at", kind: keyTime, nullable: true, copied: true},
		{name: "createdAt", col: "created_at", kind: keyTime},
		{name: "updatedAt", col: "updated_at", kind: keyTime},
	},
	filters: slices.Concat([]filter{
		{name: "type", col: "type", kind: filterOneOf, values: activityTypes, copied: true},
		{name: "userOwnerId", col: "user_owner_id"},
		{name: "done", col: "(done_at IS NOT NULL)", kind: filterBool, copied: true},
		{name: "target", col: "activities", kind: filterTarget},
	}, copied(timeRange("occurredAt", "occurred_at")), copied(timeRange("dueAt", "due_at"))),
	ranges:     true,
	custom:     "activity",
	associates: "activities",
	q:          `(coalesce(subject, '') || E'\n' || coalesce(body, ''))`,
	qDoc:       searchDoc("subject", "body"),
	times: []summaryField{{name: "occurredAt", col: "occurred_at"}, {name: "dueAt", col: "due_at"}, {name: "doneAt", col: "done_at"},
		{name: "createdAt", col: "created_at"}, {name: "updatedAt", col: "updated_at"}},
	numbers: []summaryField{{name: "durationSeconds", col: "duration_seconds"}},
}

// copied marks filters whose column an activity's target rows copy (schema/0020).
func copied(fs []filter) []filter {
	for i := range fs {
		fs[i].copied = true
	}
	return fs
}

// activityExpansions: the users, and expand[]=targets, the targets' objects, read by kind.
var activityExpansions = []expansion{
	{name: "userOwner", kind: relUser, col: "user_owner_id"},
	{name: "userCreator", kind: relUser, col: "user_creator_id"},
	{name: "targets", kind: relContact, ids: targetIDsSQL("contacts")},
	{name: "targets", kind: relBusiness, ids: targetIDsSQL("business")},
	{name: "targets", kind: relOrganization, ids: targetIDsSQL("organizations")},
}

// targetIDsSQL is the SELECT of the ids of the targets of kind (a path) of the activities whose id
// is %s ("= $2", "= ANY($2)").
func targetIDsSQL(kind string) string {
	return `SELECT b_id FROM associations WHERE company_id = $1 AND ` + targetsSQL + ` AND a_id %s AND b_kind = '` + kind + `'`
}

// targetPageSQL returns the statement maker of a page of activities filtered by target (lq.conds[i];
// walk: its condition on associations) in an order their target rows copy (schema/0020): a walk of
// the target's rows in that order through their index, checking the filters the copies answer, each
// activity then read by its key with the list's other filters; it stops at the page's end. Read
// whole and sorted, the first 100 of a business record's 200 open tasks (of 400 activities) probed
// activities_pkey 400 times (docs/scaling.md has the pages' rates).
func (lq *listQuery) targetPageSQL(i int, walk string) func(string, int64) (string, []any) {
	return func(base string, companyID int64) (string, []any) {
		args := append([]any{companyID}, lq.args...)
		dir := ""
		if lq.desc {
			dir = " DESC"
		}
		cols, outer := "a_id", ""
		for j, k := range lq.sort.keys(lq.desc) {
			cols += fmt.Sprintf(", %s AS k%d", k, j)
			outer += fmt.Sprintf("w.k%d%s, ", j, dir)
		}
		where := "company_id = $1 AND " + walk + " AND label = ''"
		for _, c := range lq.copied {
			where += " AND " + c
		}
		after, order := lq.seek("a_id", &args)
		if after != "" {
			where += " AND " + after
		}
		return `SELECT x.* FROM (SELECT ` + cols + ` FROM associations WHERE ` + where + ` ORDER BY ` + order + `) AS w
			CROSS JOIN LATERAL (` + lq.lateralSQL(base, "w.a_id", i) + `) AS x ORDER BY ` + outer + `w.a_id` + dir + lq.limitSQL(), args
	}
}

// checkActivity returns the fieldErrors of a that span its fields (a note needs a body, others a
// subject), and when checkRefs, of its owner (a user of the company) and of the targets added (objects
// of the company: else 422 on targets[i]), which it locks against a delete until the write ends. A
// target of a kind the key does not read is 403 (changed: the targets added and removed). Round
// trips: one when checkRefs.
func checkActivity(ctx context.Context, tx *tx, t tenant, a *activity, checkRefs bool, added, changed []target) error {
	var errs fieldErrors
	if a.Type == "note" && strings.TrimSpace(a.Body.String) == "" {
		errs = append(errs, fieldError{Field: "body", Message: "is required for a note"})
	}
	if a.Type != "note" && !a.Subject.Valid {
		errs = append(errs, fieldError{Field: "subject", Message: "is required unless type is note"})
	}
	if errs != nil {
		return errs
	}
	for _, tg := range changed {
		if aerr := scopeError(t.scopes, tg.kind.path+":read"); aerr != nil {
			return aerr
		}
	}
	if !checkRefs {
		return nil
	}
	ids := map[*assocKind][]int64{}
	for _, tg := range added {
		ids[tg.kind] = append(ids[tg.kind], tg.id)
	}
	found, reads := lockObjects(t.companyID, ids)
	owner := false
	reads = append(reads, eachRow[fieldID](`SELECT 1 FROM users WHERE company_id = $1 AND id = $2`, []any{t.companyID, a.UserOwnerID},
		func(*fieldID) { owner = true }))
	if err := tx.read(ctx, reads...); err != nil {
		return fmt.Errorf("check activity references: %w", err)
	}
	if !owner {
		errs = append(errs, fieldError{Field: "userOwnerId", Message: "must be the id of an existing user"})
	}
	for i, tg := range a.Targets.list {
		if slices.Contains(added, tg) && !found[tg.kind][tg.id] {
			errs = append(errs, fieldError{Field: "targets[" + strconv.Itoa(i) + "]", Message: "must be an object of the company"})
		}
	}
	if errs != nil {
		return errs
	}
	return nil
}

// createActivity stores a new activity a for the tenant in tx (its user is the creator), with its
// targets' associations and the events of both. Round trips: the check of the owner and targets (with
// BEGIN), the INSERT, the targets' INSERT when it has targets; the events go with COMMIT.
func createActivity(ctx context.Context, tx *tx, t tenant, a activity) (activity, error) {
	a.UserOwnerID = cmp.Or(a.UserOwnerID, t.userID)
	fields := queueCustomFields(tx, t.companyID, "activity", nil, &a.Custom) // read with the check
	if err := checkActivity(ctx, tx, t, &a, true, a.Targets.list, a.Targets.list); err != nil {
		return a, err
	}
	if err := checkCustom(ctx, tx, t.companyID, "activity", 0, &a.Custom, fields); err != nil {
		return a, err
	}
	const q = `INSERT INTO activities (company_id, user_creator_id, type, subject, body, occurred_at, due_at, done_at,
		duration_seconds, user_owner_id, custom, targets)
		VALUES ($1, $2, $3, $4, $5, coalesce($6, date_trunc('milliseconds', now())), $7, $8, $9, $10, $11::json, $12)
		RETURNING id, occurred_at, created_at, updated_at, version`
	a.UserCreatorID = t.userID
	err := tx.queryRow(ctx, q, append([]any{t.companyID, t.userID}, append(a.writableValues(), a.Targets.stored())...),
		&a.ID, &a.OccurredAt, &a.CreatedAt, &a.UpdatedAt, &a.Version)
	if err != nil {
		return a, fmt.Errorf("insert activity: %w", mapWriteError(err))
	}
	if err := saveCustom(ctx, tx, t.companyID, a.ID, &a.Custom); err != nil {
		return a, err
	}
	recordEvent(tx, t.companyID, "activity.created", a.appendJSON(nil), nil)
	return a, saveTargets(ctx, tx, t.companyID, a.ID, nil, a.Targets.list)
}

// updateActivity applies p to the company's activity id in tx (lockObject), moving updatedAt and the
// version, with its event; targets, when p sends them, replace the activity's whole, with their
// associations' events. Round trips: the lock (with BEGIN), the check when the owner or targets
// changed, the UPDATE, the targets' DELETE and INSERT when some go and come; the events go with COMMIT.
func updateActivity(ctx context.Context, tx *tx, t tenant, id int64, p patch) (activity, error) {
	fields := queueCustomFields(tx, t.companyID, "activity", p.members, nil) // read with the lock
	old, a, changed, err := lockObject[activity](ctx, tx, activities, t.companyID, id, p)
	if err != nil || !changed {
		return a, err
	}
	removed := slices.DeleteFunc(slices.Clone(old.Targets.list), func(tg target) bool { return slices.Contains(a.Targets.list, tg) })
	added := slices.DeleteFunc(slices.Clone(a.Targets.list), func(tg target) bool { return slices.Contains(old.Targets.list, tg) })
	if err := checkCustom(ctx, tx, t.companyID, "activity", id, &a.Custom, fields); err != nil {
		return a, err
	}
	checkRefs := a.UserOwnerID != old.UserOwnerID || len(added) > 0
	if err := checkActivity(ctx, tx, t, &a, checkRefs, added, slices.Concat(added, removed)); err != nil {
		return a, err
	}
	q := `UPDATE activities SET type = $3, subject = $4, body = $5, occurred_at = $6, due_at = $7, done_at = $8,
		duration_seconds = $9, user_owner_id = $10, custom = coalesce($11::json, custom), ` + bumpVersion + `
		WHERE company_id = $1 AND id = $2
		RETURNING updated_at, version`
	err = tx.queryRow(ctx, q, append([]any{t.companyID, id}, a.writableValues()...), &a.UpdatedAt, &a.Version)
	if err != nil {
		return a, fmt.Errorf("update activity %d: %w", id, mapWriteError(err))
	}
	if err := saveCustom(ctx, tx, t.companyID, id, &a.Custom); err != nil {
		return a, err
	}
	if moved(old, a) { // its target rows' copies of its place and type (schema/0020), with the next round trip
		const q = `UPDATE associations SET occurred_at = $3, due_at = $4, done_at = $5, type = $6
			WHERE company_id = $1 AND a_id = $2 AND ` + targetsSQL
		tx.queue(q, t.companyID, id, a.OccurredAt, a.DueAt, a.DoneAt, a.Type)
	}
	recordEvent(tx, t.companyID, "activity.updated", a.appendJSON(nil), old.appendJSON(nil))
	return a, saveTargets(ctx, tx, t.companyID, id, removed, added)
}

// moved reports whether b's place or type differs from a's: the columns its target rows copy.
func moved(a, b activity) bool {
	same := func(x, y pgtype.Timestamptz) bool { return x.Valid == y.Valid && x.Time.Equal(y.Time) }
	return !same(a.OccurredAt, b.OccurredAt) || !same(a.DueAt, b.DueAt) || !same(a.DoneAt, b.DoneAt) || a.Type != b.Type
}

// saveTargets deletes the associations of the company's activity id with removed and makes those
// with added, each with its association.* event. Round trips: the DELETE, the INSERT, each when it
// has rows.
func saveTargets(ctx context.Context, tx *tx, companyID, id int64, removed, added []target) error {
	if len(removed) > 0 {
		// One gone meanwhile (a DELETE of its association) is simply gone: its item's errNotFound.
		if err := deleteAssociations(ctx, tx, companyID, associationsOf(id, removed)); err != nil {
			return err
		}
	}
	if len(added) == 0 {
		return nil
	}
	var made []assocRow
	if err := tx.read(ctx, rowsInto[assocRow](&made, insertAssociations, rowsOf(associationsOf(id, added)).args(companyID)...)); err != nil {
		return fmt.Errorf("insert activity targets: %w", err)
	}
	evs := make([]eventRow, len(made))
	for i := range made {
		evs[i] = eventRow{"association.created", made[i].seenFrom(activityKind).appendJSON(nil), nil}
	}
	recordEvents(tx, companyID, evs)
	return nil
}

// writableValues are the values of the columns a client sets, in the order of the statements above.
func (a *activity) writableValues() []any {
	return []any{a.Type, a.Subject, a.Body, a.OccurredAt, a.DueAt, a.DoneAt, a.DurationSeconds, a.UserOwnerID, a.Custom.stored()}
}
