package main

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/big"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Custom fields (API.md section 14): the definitions at /v1/customFields, and the values that
// contacts, business records and organizations carry in "custom". schema/0012_custom_fields.sql
// says how the values are stored, docs/scaling.md why.

const (
	maxCustomFields  = 200 // live fields per object per company
	maxOptions       = 500
	maxMultiSelected = 50
	maxNumberDigits  = 18 // significant digits of a number
)

var (
	customKeyPattern    = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)
	customOptionPattern = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)
	customObjects       = []string{"contact", "business", "organization"}
	customTypes         = []string{"text", "number", "money", "date", "datetime", "boolean", "select", "multiSelect", "url", "email", "user"}
	customTables        = map[string]string{"contact": "contacts", "business": "business", "organization": "organizations"}
)

// uniqueModes is, for each type that may be unique, how custom_values compares its values: 1
// case-insensitive text, 2 text as it is, 3 number.
var uniqueModes = map[string]int16{"text": 1, "email": 1, "url": 2, "number": 3}

// customField is the definition of a field a company added to one kind of object.
type customField struct {
	refObject
	ID        int64
	Object    string
	Key       string
	Label     string
	Type      string
	Options   pgtype.Text // the JSON array of options, as the API writes it; null for other types
	Required  bool
	Unique    bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

func (f *customField) key() int64 { return f.ID }

func (f *customField) scanDest() []any {
	return []any{&f.ID, &f.Object, &f.Key, &f.Label, &f.Type, &f.Options, &f.Required, &f.Unique, &f.CreatedAt, &f.UpdatedAt}
}

// appendJSON writes options as the JSON text it is kept as (a decimal's text is written as it is).
func (f *customField) appendJSON(b []byte) []byte {
	return appendObject(b, "id", &f.ID, "object", &f.Object, "key", &f.Key, "label", &f.Label, "type", &f.Type,
		"options", (*decimal)(&f.Options), "required", &f.Required, "unique", &f.Unique,
		"createdAt", &f.CreatedAt, "updatedAt", &f.UpdatedAt)
}

func (f *customField) fields() []bodyField {
	return []bodyField{
		{"object", oneOf(&f.Object, customObjects), true},
		{"key", func(raw json.RawMessage) string {
			s, msg := jsonString(raw, 40)
			if msg == "" && !customKeyPattern.MatchString(s) {
				msg = "must match ^[a-z][a-z0-9_]{0,39}$"
			}
			f.Key = s
			return msg
		}, true},
		{"label", requiredText(&f.Label, 255), true},
		{"type", oneOf(&f.Type, customTypes), true},
		{"options", f.applyOptions, false},
		{"required", boolean(&f.Required), false},
		{"unique", boolean(&f.Unique), false},
	}
}

// oneOf sets a string that is one of values.
func oneOf(p *string, values []string) func(json.RawMessage) string {
	return func(raw json.RawMessage) string {
		s, _ := jsonString(raw, 64)
		if !slices.Contains(values, s) {
			return "must be one of " + strings.Join(values, ", ")
		}
		*p = s
		return ""
	}
}

// customOption is one choice of a select or multiSelect field.
type customOption struct {
	Value string `json:"value"`
	Label string `json:"label"`
}

// applyOptions sets the options from a JSON array of {"value", "label"} (label defaults to value).
func (f *customField) applyOptions(raw json.RawMessage) string {
	if isNull(raw) {
		f.Options = pgtype.Text{}
		return ""
	}
	var opts []customOption
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if dec.Decode(&opts) != nil || len(opts) < 1 || len(opts) > maxOptions {
		return fmt.Sprintf(`must be an array of 1 to %d options {"value": "gold", "label": "Gold"}`, maxOptions)
	}
	b := []byte{'['}
	for i, o := range opts {
		if !customOptionPattern.MatchString(o.Value) {
			return fmt.Sprintf("[%d].value must match ^[a-z0-9_-]{1,64}$", i)
		}
		if slices.ContainsFunc(opts[:i], func(p customOption) bool { return p.Value == o.Value }) {
			return fmt.Sprintf("[%d].value %q is there twice", i, o.Value)
		}
		label, msg := jsonString(strconv.AppendQuote(nil, cmp.Or(o.Label, o.Value)), 255)
		if msg != "" {
			return fmt.Sprintf("[%d].label %s", i, msg)
		}
		b = append(appendObject(b, "value", &o.Value, "label", &label), ',')
	}
	f.Options = pgtype.Text{String: string(append(b[:len(b)-1], ']')), Valid: true} // over the last comma
	return ""
}

// optionValues returns the values of the field's options, split out of f.Options as applyOptions
// wrote it (compact; values of [a-z0-9_-], never escaped) by hand: 1.2 us for 3 options, where
// json.Unmarshal took 3.2-4.2 (a throwaway go test -bench), at each select value a write checks.
func (f *customField) optionValues() (values []string) {
	b := []byte(f.Options.String)
	for i := 1; i < len(b) && b[i] == '{'; i++ { // [{...},{...}]: i steps over each comma
		end := jsonEnd(b, i)
		v := memberRaw(objectMembers(b[i:end]), "value")
		values, i = append(values, string(v[1:len(v)-1])), end
	}
	return values
}

// checkDefinition returns the fieldErrors of a definition whose members do not go together.
func (f *customField) checkDefinition() (errs fieldErrors) {
	isSelect := f.Type == "select" || f.Type == "multiSelect"
	switch {
	case isSelect && !f.Options.Valid:
		errs = append(errs, fieldError{Field: "options", Message: "is required for a select or multiSelect field"})
	case !isSelect && f.Options.Valid:
		errs = append(errs, fieldError{Field: "options", Message: "is only for select and multiSelect fields"})
	}
	if _, ok := uniqueModes[f.Type]; f.Unique && !ok {
		errs = append(errs, fieldError{Field: "unique", Message: "is only for text, email, url and number fields"})
	}
	return errs
}

var customFields = &resource{path: "/v1/customFields", table: "custom_fields",
	lists: &listSpec{filters: []filter{{name: "object", col: "object", kind: filterEmail}}},
	selectSQL: `SELECT id, object, key, label, type, options, required, is_unique, created_at, updated_at
		FROM custom_fields WHERE company_id = $1 AND deleted_at IS NULL`}

func conflict(code, detail string) error {
	return &apiError{Status: http.StatusConflict, Code: code, Detail: detail}
}

// createCustomField stores f, a new field of the company, in tx: 409 field_key_taken when a live field
// of the object has its key, 422 field_limit past maxCustomFields, 409 field_values_conflict when it is
// required and the object has objects. A company's creates take turns (an advisory lock): the limit holds.
func createCustomField(ctx context.Context, tx *tx, t tenant, f customField) (customField, error) {
	if errs := f.checkDefinition(); errs != nil {
		return f, errs
	}
	var live int64
	var hasObjects bool
	q := `SELECT (SELECT count(*) FROM custom_fields WHERE company_id = $1 AND object = $2 AND deleted_at IS NULL),
		EXISTS (SELECT FROM ` + customTables[f.Object] + ` WHERE company_id = $1)`
	tx.queue(lockCustomFields, t.companyID)
	if err := tx.queryRow(ctx, q, []any{t.companyID, f.Object}, &live, &hasObjects); err != nil {
		return f, err
	}
	if live >= maxCustomFields {
		return f, &apiError{Status: http.StatusUnprocessableEntity, Code: "field_limit",
			Detail: fmt.Sprintf("A company has at most %d live custom fields per object.", maxCustomFields)}
	}
	if f.Required && hasObjects {
		return f, conflict("field_values_conflict", "A new field cannot be required: objects without a value for it exist.")
	}
	const insert = `INSERT INTO custom_fields (company_id, object, key, label, type, options, required, is_unique)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		RETURNING id, object, key, label, type, options, required, is_unique, created_at, updated_at`
	err := tx.queryRow(ctx, insert, []any{t.companyID, f.Object, f.Key, f.Label, f.Type, f.Options, f.Required, f.Unique}, f.scanDest()...)
	if pgCode(err) == "23505" {
		return f, conflict("field_key_taken", fmt.Sprintf("The %s field key %q is taken by a live field.", f.Object, f.Key))
	}
	saveCustomKeys(tx, t.companyID) // after an error, never sent
	return f, err
}

// lockCustomFields is the lock of a company's ($1) field creates and deletes: they take turns.
const lockCustomFields = `SELECT pg_advisory_xact_lock(hashtextextended('custom_fields ' || $1::bigint, 0)) FROM ` + onCompanysWorker

// saveCustomKeys queues the rewrite of the company's rows of custom_field_keys (customColumns reads
// them) from its live fields, after a field's create or delete, behind the company's other such writes.
func saveCustomKeys(tx *tx, companyID int64) {
	tx.queue(lockCustomFields, companyID)
	tx.queue(`DELETE FROM custom_field_keys WHERE company_id = $1`, companyID)
	tx.queue(`INSERT INTO custom_field_keys (company_id, object, keys) SELECT company_id, object, string_agg(id || ':' || key, ',' ORDER BY id)
		FROM custom_fields WHERE company_id = $1 AND deleted_at IS NULL GROUP BY company_id, object`, companyID)
}

// updateCustomField applies p (label, options, required, unique) to the company's field id in tx;
// object, key and type are fixed (422). 409 option_in_use: it removes an option stored values hold;
// 409 field_values_conflict: it makes the field required or unique, and stored values break that.
func updateCustomField(ctx context.Context, tx *tx, t tenant, id int64, p patch) (customField, error) {
	var fixed fieldErrors
	for _, name := range []string{"object", "key", "type"} {
		if hasMember(p.members, name) {
			fixed = append(fixed, fieldError{Field: name, Message: "cannot be changed; define a new field instead"})
		}
	}
	if fixed != nil {
		return customField{}, fixed
	}
	old, f, changed, err := lockObject[customField](ctx, tx, customFields, t.companyID, id, p)
	if err != nil || !changed {
		return f, err
	}
	if errs := f.checkDefinition(); errs != nil {
		return f, errs
	}
	args := []any{t.companyID, id}
	if removed := slices.DeleteFunc(old.optionValues(), func(v string) bool { return slices.Contains(f.optionValues(), v) }); len(removed) > 0 {
		var held pgtype.Text
		const q = `SELECT min(text_value) FROM custom_values WHERE company_id = $1 AND field_id = $2
			AND text_value IS NOT NULL AND text_value COLLATE "C" = ANY($3)`
		if err := tx.queryRow(ctx, q, append(args, removed), &held); err != nil || held.Valid {
			return f, cmp.Or(err, conflict("option_in_use", fmt.Sprintf("The option %q is held by stored values; clear them first.", held.String)))
		}
	}
	if f.Required && !old.Required {
		var missing bool
		q := `SELECT EXISTS (SELECT FROM ` + customTables[f.Object] + ` o WHERE o.company_id = $1 AND NOT EXISTS (
			SELECT FROM custom_values v WHERE v.company_id = $1 AND v.field_id = $2 AND v.object_id = o.id))`
		if err := tx.queryRow(ctx, q, args, &missing); err != nil || missing {
			return f, cmp.Or(err, conflict("field_values_conflict", "The field cannot be required: objects without a value for it exist."))
		}
	}
	if f.Unique != old.Unique {
		mode := map[bool]int16{true: uniqueModes[f.Type]}[f.Unique] // 0: not unique
		// The partial UNIQUE indexes of schema/0012 refuse values that are already there twice.
		err := tx.queryRow(ctx, `WITH u AS (UPDATE custom_values SET unique_mode = $3 WHERE company_id = $1 AND field_id = $2 RETURNING 1)
			SELECT count(*) FROM u`, append(args, mode), new(int64))
		if pgCode(err) == "23505" {
			return f, conflict("field_values_conflict", "The field cannot be unique: stored values repeat.")
		} else if err != nil {
			return f, err
		}
	}
	const q = `UPDATE custom_fields SET label = $3, options = $4, required = $5, is_unique = $6,
		updated_at = greatest(date_trunc('milliseconds', now()), one_ms_after(updated_at))
		WHERE company_id = $1 AND id = $2 RETURNING updated_at`
	return f, tx.queryRow(ctx, q, append(args, f.Label, f.Options, f.Required, f.Unique), &f.UpdatedAt)
}

// handleCustomFieldDelete answers DELETE /v1/customFields/{id}: 204. The field and its values go at
// once (a new field with its key starts empty); purgeCustomValues removes their rows later.
func handleCustomFieldDelete(st *store, log *slog.Logger) http.Handler {
	return handleWrite(st, customFields, log, nil, func(r *http.Request, tx *tx, t tenant, wr *write) (answer, error) {
		var n int64
		const q = `WITH d AS (UPDATE custom_fields SET deleted_at = now() WHERE company_id = $1 AND id = $2
			AND deleted_at IS NULL RETURNING 1) SELECT count(*) FROM d`
		if err := tx.queryRow(r.Context(), q, []any{t.companyID, wr.id}, &n); err != nil || n == 0 {
			return answer{}, cmp.Or(err, errNotFound)
		}
		saveCustomKeys(tx, t.companyID)
		return answer{status: http.StatusNoContent}, nil
	})
}

// purgeCustomValues deletes at most deleteBatch rows of custom_values of one deleted field, and the
// field's definition once none is left. The server runs it in the background (deleteInBatches).
func (s *store) purgeCustomValues(ctx context.Context) (int64, error) {
	var companyID, fieldID, n int64
	const q = `SELECT company_id, id FROM custom_fields WHERE deleted_at IS NOT NULL LIMIT 1`
	if err := s.db.QueryRowContext(ctx, q).Scan(&companyID, &fieldID); errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	err := s.db.QueryRowContext(ctx, `WITH d AS (DELETE FROM custom_values WHERE company_id = $1 AND field_id = $2 AND object_id IN (
		SELECT object_id FROM custom_values WHERE company_id = $1 AND field_id = $2 LIMIT $3) RETURNING 1)
		SELECT count(*) FROM d`, companyID, fieldID, deleteBatch).Scan(&n)
	if err == nil && n == 0 {
		_, err = s.db.ExecContext(ctx, `DELETE FROM custom_fields WHERE company_id = $1 AND id = $2`, companyID, fieldID)
		n = deleteBatch // maybe more fields to purge: again soon
	}
	return n, err
}

// customValues are an object's custom field values: "custom" in its JSON.
type customValues struct {
	json []byte       // {"key": value, ...}: every live field, as read, or as a body's patch left it
	defs []byte       // the live fields, as customColumns reads them
	w    *customWrite // what a body set and checkCustom made of it: nil on an object only read
}

// customWrite is what a write of custom needs beyond the JSON: apart, so a list's objects carry none.
type customWrite struct {
	sent   []string         // the keys a body's custom set: checkCustom checks json and sets what follows
	old    []member         // the values those keys held before the write (an update's), as stored
	stored pgtype.Text      // {"fieldID": value, ...} of the set values, for the row's custom column
	rows   []customRow      // the values for custom_values
	keys   map[int64]string // the fields whose custom_values rows the write replaces: their keys by id
	drop   []int64          // of those, an update's whose old rows its INSERT may not overwrite (saveCustom)
	update bool             // an update's: its rows may meet their fields' old ones
}

// stored is the custom column a write stores: what checkCustom made, or NULL to keep the row's.
func (cv *customValues) stored() pgtype.Text {
	if cv.w == nil {
		return pgtype.Text{}
	}
	return cv.w.stored
}

// fieldID is a field id read from a row.
type fieldID int64

func (f *fieldID) scanDest() []any { return []any{(*int64)(f)} }

// customRow is one row of custom_values.
type customRow struct {
	fieldID int64
	text    pgtype.Text
	num     pgtype.Text
	time    pgtype.Timestamptz
	unique  int16
	folded  bool  // text and email: in custom_values_folded, for their case-insensitive filters
	n       int16 // of a multiSelect's values
}

// customColumns is the SQL of the two columns custom is read from in table: the company's live fields
// of object, "id:key,..." by id or NULL, from custom_field_keys (schema/0014 says why there), and the
// row's values by field id; storedCustom renders custom in Go.
func customColumns(table, object string) string {
	return `(SELECT k.keys FROM custom_field_keys k WHERE k.company_id = $1 AND k.object = '` + object + `'), ` + table + `.custom::text`
}

// scanDest is where customColumns are scanned; the second renders custom once the first is read.
func (cv *customValues) scanDest() []any { return []any{&cv.defs, (*storedCustom)(cv)} }

// storedCustom scans the custom column of a row into the customValues it is.
type storedCustom customValues

// ScanText renders the row's values v ({"fieldID": value}) as custom: every live field of cv.defs,
// by key, with its value or null. A deleted field's value is left out.
func (s *storedCustom) ScanText(v pgtype.Text) error {
	cv := (*customValues)(s)
	if cv.json = nil; len(cv.defs) == 0 {
		return nil // appendJSON writes {}
	}
	values := objectMembers([]byte(v.String))
	b := []byte{'{'}
	for def := range bytes.SplitSeq(cv.defs, []byte{','}) {
		id, key, _ := bytes.Cut(def, []byte{':'})
		b = append(appendString(b, string(key)), ':')
		raw := memberRaw(values, string(id)) // nil: the row holds no value of the field
		b = append(append(appendNull(b, raw != nil), raw...), ',')
	}
	cv.json = append(b[:len(b)-1], '}') // over the last comma: defs names a field at least
	return nil
}

func (cv *customValues) appendJSON(b []byte) []byte {
	if len(cv.json) == 0 {
		return append(b, "{}"...)
	}
	return append(b, cv.json...)
}

// apply is the rule of the body member custom: a JSON object merged into the values (a merge patch:
// a key sets, null clears). Its keys and values are checked by checkCustom in the write.
func (cv *customValues) apply(raw json.RawMessage) string {
	patch, dup, ok := jsonMembers(raw)
	if dup != "" {
		return fmt.Sprintf("names %q more than once", dup)
	}
	if !ok {
		return `must be an object of custom field values, such as {"tier": "gold"}`
	}
	cur := objectMembers(cv.json)
	cv.w = &customWrite{sent: []string{}}
	for _, m := range patch {
		var c bytes.Buffer
		json.Compact(&c, m.raw)
		if i := slices.IndexFunc(cur, func(o member) bool { return o.name == m.name }); i >= 0 {
			cv.w.old = append(cv.w.old, cur[i])
			cur[i].raw = c.Bytes()
		} else {
			cur = append(cur, member{m.name, c.Bytes()})
		}
		cv.w.sent = append(cv.w.sent, m.name)
	}
	cv.json = appendMembers(nil, cur)
	return ""
}

// appendMembers appends members as a JSON object.
func appendMembers(b []byte, members []member) []byte {
	b = append(b, '{')
	for i, m := range members {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(append(appendString(b, m.name), ':'), m.raw...)
	}
	return append(b, '}')
}

// sortKey is the object's key in a list sorted by custom field (customSort names the sort).
func (cv *customValues) sortKey(sort string) (string, bool) {
	key, isTime := strings.CutPrefix(sort, "custom@")
	key, isCustom := strings.CutPrefix(key, "custom.")
	if !isTime && !isCustom {
		return "", false // not a custom sort: id
	}
	raw := memberRaw(objectMembers(cv.json), key)
	if raw == nil || isNull(raw) {
		return "", true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return string(raw), false // a number, a user id, a boolean
	}
	if isTime {
		t, _ := time.Parse(time.RFC3339Nano, s)
		return timeKey(t), false
	}
	return s, false
}

// loadCustomFields reads the company's live fields of object that have these keys, by id.
func loadCustomFields(ctx context.Context, rd reader, companyID int64, object string, keys []string) ([]customField, error) {
	fields := []customField{}
	err := rd(ctx, rowsInto[customField](&fields, customFields.selectSQL+` AND object = $2 AND key = ANY($3) ORDER BY id`, companyID, object, keys))
	return fields, err
}

// queueCustomFields queues, with the write's next round trip (so they cost none of their own), the
// reads checkCustom needs of the company's live fields of object: the definitions of those the write
// sets (a create's cv.w.sent, an update's keys in the custom of its patch's members; no read when it
// has none) and a create's (cv not nil) required ones, with every field's key into cv.defs (an
// update reads those with its object). The write must send one before checkCustom.
func queueCustomFields(tx *tx, companyID int64, object string, members []member, cv *customValues) *[]customField {
	keys := []string{}
	switch {
	case cv != nil && cv.w != nil:
		keys = cv.w.sent
	case cv == nil && !hasMember(members, "custom"):
		return nil
	}
	for _, m := range objectMembers(memberRaw(members, "custom")) {
		keys = append(keys, m.name)
	}
	fields := []customField{}
	tx.queueRead(rowsInto[customField](&fields, customFields.selectSQL+` AND object = $2 AND (key = ANY($3) OR $4 AND required)
		ORDER BY id`, companyID, object, keys, cv != nil))
	if cv != nil {
		tx.queueRead(read{`SELECT keys FROM custom_field_keys WHERE company_id = $1 AND object = $2`, []any{companyID, object},
			func(rows rows) error {
				_, err := pgx.ForEachRow(rows, []any{&cv.defs}, func() error { return nil })
				return err
			}})
	}
	return &fields
}

// checkCustom checks the custom values a body set (cv.w.sent) on an object of kind object against the
// fields queueCustomFields read (read; nil: it reads them now), and makes cv's JSON, column and rows.
// It checks the fields the write sets and, on a create, the required ones (each error named
// custom.<key>). The others (cv.defs) are null on a create, and on an update keep their values,
// checked when they were written. An update also writes the rows of the values it changes
// (saveCustom): a value sent again as it is stored keeps its rows, as an integration that sends the
// whole object back would otherwise rewrite every index entry of its values. Reading and
// checking only those pays, in server CPU a write that sets 2 fields of 52 (a million contacts, wrk
// -c32, paired rounds): a PATCH 544-600 us, 588-631 reading all 52; a POST 422-490, 470-597.
func checkCustom(ctx context.Context, tx *tx, companyID int64, object string, objectID int64, cv *customValues, read *[]customField) error {
	if cv.w == nil && objectID != 0 {
		return nil // an update whose patch sets no custom value
	}
	body := cmp.Or(cv.w, &customWrite{})
	if read == nil { // a create that queued none
		read = queueCustomFields(tx, companyID, object, nil, cv)
		if err := tx.read(ctx); err != nil {
			return err
		}
	}
	fields, checked := *read, map[string]*customField{}
	for i := range fields {
		checked[fields[i].Key] = &fields[i]
	}
	members, found := objectMembers(cv.json), []string{} // found: the checked keys the object has
	var errs, valueErrs fieldErrors
	out, stored := []member{}, []member{}
	var userFields, users []int64 // the fields of type user the write sets, and their values
	cv.w = &customWrite{sent: body.sent, keys: map[int64]string{}, update: objectID != 0}
	for def := range strings.SplitSeq(string(cv.defs), ",") { // the object's live fields, "id:key" by id
		id, key, ok := strings.Cut(def, ":")
		if !ok {
			continue // no fields: defs is empty
		}
		f, value, rows, msg := checked[key], memberRaw(members, key), []customRow(nil), "" // value nil: unset
		if f != nil {
			found = append(found, key)
			if value, rows, msg = f.checkValue(value); msg == "" && f.Required && isNull(value) {
				msg = "is required"
			}
		}
		if msg != "" {
			valueErrs = append(valueErrs, fieldError{Field: "custom." + key, Message: msg})
			continue
		}
		if out = append(out, member{key, appendNull(value, value != nil)}); value != nil && !isNull(value) {
			stored = append(stored, member{id, value})
		}
		if f != nil && (objectID == 0 || !bytes.Equal(value, memberRaw(body.old, key))) { // an unchanged value keeps its rows
			cv.w.keys[f.ID] = key
			cv.w.rows = append(cv.w.rows, rows...)
			if cv.w.update && (len(rows) == 0 || f.Type == "multiSelect" || f.Unique) {
				cv.w.drop = append(cv.w.drop, f.ID)
			}
			if f.Type == "user" && len(rows) > 0 {
				n, _ := strconv.ParseInt(rows[0].num.String, 10, 64)
				userFields, users = append(userFields, f.ID), append(users, n)
			}
		}
	}
	for _, key := range body.sent {
		if !slices.Contains(found, key) {
			errs = append(errs, fieldError{Field: "custom." + key, Message: "is not a custom field of " + object + " objects"})
		}
	}
	errs = append(errs, valueErrs...)
	if errs == nil && len(users) > 0 {
		var missing []fieldID
		const q = `SELECT f FROM unnest($2::bigint[], $3::bigint[]) AS v (f, u) WHERE NOT EXISTS (SELECT FROM users WHERE company_id = $1 AND id = v.u)`
		if err := tx.read(ctx, rowsInto[fieldID](&missing, q, companyID, userFields, users)); err != nil {
			return err
		}
		for _, f := range missing {
			errs = append(errs, fieldError{Field: "custom." + cv.w.keys[int64(f)], Message: "is not a user of the company"})
		}
	}
	if errs != nil {
		return errs
	}
	cv.json = appendMembers(nil, out)
	cv.w.stored = pgtype.Text{String: string(appendMembers(nil, stored)), Valid: true}
	if objectID != 0 {
		return saveCustom(ctx, tx, companyID, objectID, cv)
	}
	return nil
}

// saveCustom writes the custom_values rows of the fields a write set on the company's object id, in
// tx. An update's row overwrites its field's old one in place (ON CONFLICT DO UPDATE; the bench's PATCH
// in pgbench: 227 us of statement time against 316 for a DELETE and an INSERT). Old rows go first
// (cv.w.drop) where new ones may not overwrite them: a value cleared, a multiSelect's (it may hold
// fewer), a unique one; and then all of them, as the ON CONFLICT DO NOTHING that finds a unique value's
// holder would keep them. That holder is a fieldError: DO NOTHING waits for a concurrent writer's
// transaction, and the loser finds the winner committed. Round trips: the DELETE goes with the INSERT,
// which waits only when a value is unique.
func saveCustom(ctx context.Context, tx *tx, companyID, objectID int64, cv *customValues) error {
	unique := slices.ContainsFunc(cv.w.rows, func(r customRow) bool { return r.unique != 0 })
	if drop := cv.w.drop; len(drop) > 0 {
		if unique {
			drop = slices.Collect(maps.Keys(cv.w.keys))
		}
		tx.queue(`DELETE FROM custom_values WHERE company_id = $1 AND object_id = $2 AND field_id = ANY($3)`,
			companyID, objectID, drop)
	}
	if len(cv.w.rows) == 0 {
		return nil
	}
	args := []any{companyID, objectID}
	var values []string
	for _, r := range cv.w.rows {
		n := len(args)
		values = append(values, fmt.Sprintf("($1, $2, $%d, $%d, $%d::numeric, $%d, $%d::smallint, $%d::smallint, $%d::boolean)", n+1, n+2, n+3, n+4, n+5, n+6, n+7))
		args = append(args, r.fieldID, r.text, r.num, r.time, r.unique, r.n, r.folded)
	}
	q := `INSERT INTO custom_values (company_id, object_id, field_id, text_value, num_value, time_value, unique_mode, n, folded) VALUES ` +
		strings.Join(values, ", ")
	if !unique {
		if cv.w.update { // a create's rows are new: a plain INSERT spares each a probe and a WAL record
			q += ` ON CONFLICT (company_id, object_id, field_id, n) DO UPDATE SET text_value = excluded.text_value,
				num_value = excluded.num_value, time_value = excluded.time_value, unique_mode = excluded.unique_mode,
				folded = excluded.folded`
		}
		tx.queue(q, args...)
		return nil
	}
	var inserted []fieldID
	if err := tx.read(ctx, rowsInto[fieldID](&inserted, q+` ON CONFLICT DO NOTHING RETURNING field_id`, args...)); err != nil {
		return err
	}
	var errs fieldErrors
	for _, r := range cv.w.rows {
		if r.unique == 0 || slices.Contains(inserted, fieldID(r.fieldID)) {
			continue
		}
		var holder int64
		const q = `SELECT min(object_id) FROM custom_values WHERE company_id = $1 AND field_id = $2 AND object_id <> $3
			AND CASE unique_mode WHEN 1 THEN lower(text_value) = lower($4) WHEN 2 THEN text_value = $4 ELSE num_value = $5::numeric END`
		if err := tx.queryRow(ctx, q, []any{companyID, r.fieldID, objectID, r.text, r.num}, &holder); err != nil {
			return err
		}
		errs = append(errs, fieldError{Field: "custom." + cv.w.keys[r.fieldID], Message: fmt.Sprintf("must be unique; object %d holds this value", holder)})
	}
	if errs != nil {
		return errs
	}
	return nil
}

// checkValue checks raw, a JSON value sent for field f (nil: none), and returns it as the API writes
// it, with its rows of custom_values, or what is wrong with it.
func (f *customField) checkValue(raw json.RawMessage) (json.RawMessage, []customRow, string) {
	if raw == nil || isNull(raw) {
		return json.RawMessage("null"), nil, ""
	}
	row := customRow{fieldID: f.ID, unique: map[bool]int16{true: uniqueModes[f.Type]}[f.Unique], folded: f.Type == "text" || f.Type == "email"}
	var msg string
	var user pgtype.Int8
	switch f.Type { // the rules of the built-in fields, where one fits
	case "number":
		row.num.String, msg = parseNumber(string(raw))
		row.num.Valid = msg == ""
	case "money":
		msg = money(&row.num)(raw)
	case "user":
		if msg = nullableID(&user)(raw); msg == "" {
			row.num = pgtype.Text{String: strconv.FormatInt(user.Int64, 10), Valid: true}
		}
	case "boolean":
		msg, row.text = boolean(new(bool))(raw), pgtype.Text{String: string(raw), Valid: true}
	case "datetime":
		msg = nullableTime(&row.time)(raw)
	case "text", "url", "email", "date", "select":
		check := map[string]func(string) string{"url": checkHTTPURL, "email": checkEmail, "date": checkDate, "select": f.checkOption}[f.Type]
		msg = nullableText(&row.text, map[bool]int{true: 255, false: 1000}[f.Type == "email"], check)(raw)
	case "multiSelect":
		var ss []string
		if json.Unmarshal(raw, &ss) != nil || raw[0] != '[' || len(ss) > maxMultiSelected {
			return nil, nil, fmt.Sprintf("must be an array of at most %d option values", maxMultiSelected)
		}
		rows := []customRow{}
		for i, s := range ss {
			if msg := f.checkOption(s); msg != "" || slices.Contains(ss[:i], s) {
				return nil, nil, fmt.Sprintf("[%d] %s", i, cmp.Or(msg, "is there twice"))
			}
			rows = append(rows, customRow{fieldID: f.ID, text: pgtype.Text{String: s, Valid: true}, n: int16(i)})
		}
		return appendStrings(nil, ss), rows, ""
	}
	switch {
	case msg != "":
		return nil, nil, msg
	case row.num.Valid:
		return json.RawMessage(row.num.String), []customRow{row}, ""
	case row.time.Valid:
		return appendTime(nil, row.time.Time), []customRow{row}, ""
	case f.Type == "boolean":
		return raw, []customRow{row}, ""
	}
	return appendString(nil, row.text.String), []customRow{row}, ""
}

// checkOption accepts an option value of f.
func (f *customField) checkOption(s string) string {
	if options := f.optionValues(); !slices.Contains(options, s) {
		return "must be an option value of the field: " + strings.Join(options, ", ")
	}
	return ""
}

// checkDate accepts a calendar day: 2026-12-01.
func checkDate(s string) string {
	if d, err := time.Parse(time.DateOnly, s); err != nil || d.Format(time.DateOnly) != s {
		return "must be a calendar day like 2026-12-01"
	}
	return ""
}

// jsonNumber is the grammar of a JSON number.
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.([0-9]+))?([eE]([+-]?[0-9]+))?$`)

// parseNumber returns the decimal text of a JSON number (an exponent applied; digits as written
// otherwise, so 1.50 stays 1.50) of at most maxNumberDigits significant digits, or what is wrong.
func parseNumber(s string) (string, string) {
	const msg = "must be a number of at most 18 significant digits"
	m := jsonNumber.FindStringSubmatch(s)
	if m != nil && m[4] != "" {
		exp, err := strconv.Atoi(m[5])
		r, ok := new(big.Rat).SetString(s)
		if err != nil || !ok || exp > 40 || exp < -40 {
			return "", msg
		}
		s = r.FloatString(max(0, len(m[3])-exp))
	}
	_, frac, _ := strings.Cut(s, ".") // at most 20 places, as a cursor carries it (isDecimal)
	if m == nil || len(frac) > 20 || len(strings.TrimLeft(strings.NewReplacer("-", "", ".", "").Replace(s), "0")) > maxNumberDigits {
		return "", msg
	}
	return s, ""
}

// customSortAndFilters adds to lq the custom.<key> filters and sort that the list request of res asked
// for (lq.custom), with the company's fields of res's object. An unknown key, a bad value, or an
// operator or sort the field's type lacks is 400 naming the parameter.
func customSortAndFilters(ctx context.Context, st *store, companyID int64, res *resource, lq *listQuery) error {
	if len(lq.custom) == 0 {
		return nil
	}
	refs, keys := map[string]string{}, []string{} // the custom.<key>[op] each parameter names
	for name, v := range lq.custom {
		if refs[name] = strings.TrimPrefix(v[0], "-"); name != "sort" { // sort=-custom.<key>
			refs[name] = name
		}
		key, _, _ := strings.Cut(strings.TrimPrefix(refs[name], "custom."), "[")
		keys = append(keys, key)
	}
	fields, err := loadCustomFields(ctx, st.read, companyID, res.lists.custom, keys)
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(lq.custom)) {
		v := lq.custom[name][0]
		lq.binding += name + "=" + strconv.Quote(v) + "\n"
		desc := strings.HasPrefix(v, "-")
		key, op, _ := strings.Cut(strings.TrimPrefix(refs[name], "custom."), "[")
		i := slices.IndexFunc(fields, func(f customField) bool { return f.Key == key })
		if i < 0 {
			return badParam(name, fmt.Sprintf("names no custom field of %s objects", res.lists.custom))
		}
		if name != "sort" {
			if aerr := lq.addCustomFilter(name, &fields[i], strings.TrimSuffix(op, "]"), v, res.table); aerr != nil {
				return aerr
			}
			continue
		}
		col, kind := fields[i].valueColumn()
		if fields[i].Type == "multiSelect" || op != "" {
			return badParam("sort", "cannot sort by a multiSelect field")
		}
		// The sort's name tells sortKey how the cursor carries the value (custom@: a time).
		lq.sort = &sortField{name: map[bool]string{false: "custom.", true: "custom@"}[kind == keyTime] + key, kind: kind, nullable: true}
		lq.desc, lq.pageSQL = desc, lq.customSortSQL(res.table, fields[i].ID, col, kind)
	}
	return nil
}

// valueColumn is the column of custom_values that holds f's values, and its kind as a sort key.
func (f *customField) valueColumn() (string, keyKind) {
	switch f.Type {
	case "number", "money", "user":
		return "num_value", keyNumeric
	case "datetime":
		return "time_value", keyTime
	}
	return `text_value COLLATE "C"`, keyText
}

var customOps = map[string]string{"": "=", "gte": ">=", "gt": ">", "lte": "<=", "lt": "<"}

// addCustomFilter adds the filter param (custom.<key> or custom.<key>[op]) of field f with value v.
func (lq *listQuery) addCustomFilter(param string, f *customField, op, v, table string) *apiError {
	sqlOp, ok := customOps[op]
	if !ok || op != "" && !slices.Contains([]string{"number", "money", "date", "datetime"}, f.Type) {
		return badParam(param, "is not a filter of a "+f.Type+" field")
	}
	raw := json.RawMessage(v) // the value as the field takes it in a body
	if !slices.Contains([]string{"number", "money", "user", "boolean"}, f.Type) {
		raw = appendString(nil, v)
	}
	g := *f // checks v as a value: of a multiSelect, as one option; any option value is a filter
	g.Type = strings.Replace(g.Type, "multiSelect", "select", 1)
	g.Options = pgtype.Text{String: `[{"value":` + string(appendString(nil, v)) + `}]`, Valid: true}
	_, rows, msg := g.checkValue(raw)
	if msg != "" || len(rows) == 0 {
		return badParam(param, "must be a value of the field: it "+cmp.Or(msg, "is empty"))
	}
	col, _ := f.valueColumn()
	bare, arg := strings.Fields(col)[0], any(rows[0].text)
	switch {
	case f.Type == "text" || f.Type == "email":
		col, sqlOp, bare = "lower(text_value)", "= lower", "folded AND text_value" // custom_values_folded holds only these (schema/0015)
	case rows[0].num.Valid:
		col, arg = "num_value", rows[0].num
	case rows[0].time.Valid:
		arg = rows[0].time
	}
	values := fmt.Sprintf(`FROM custom_values WHERE company_id = $1 AND field_id = %d AND %s IS NOT NULL AND %s %s(%%s%s)`,
		f.ID, bare, col, sqlOp, map[string]string{"num_value": "::numeric"}[bare])
	lq.where(table+".id IN (SELECT object_id "+values+")", arg)
	// An object holds a value at most once, and only a live one (schema/0012's delete trigger), so
	// where this filter is the only one a count reads the values' index alone, with no semi-join on
	// the objects' primary key: at a million contacts, custom.tier=gold (a third) went from 4.99x the
	// time of stageId='s count to 0.75x (make bench BENCH_CUSTOM=1 BENCH_CONTACTS=1000000, paired medians).
	lq.countValues = "SELECT count(*) " + fmt.Sprintf(values, "$"+strconv.Itoa(len(lq.args)+1))
	return nil
}

// takeCustom moves custom.<key> parameters and sort=custom.<key> out of q, for customSortAndFilters.
func takeCustom(q url.Values) url.Values {
	custom := url.Values{}
	for name, v := range q {
		if strings.HasPrefix(name, "custom.") || name == "sort" && strings.HasPrefix(strings.TrimPrefix(v[0], "-"), "custom.") {
			custom[name] = v
			delete(q, name)
		}
	}
	return custom
}

// customSortSQL returns the statement maker of a list page sorted by the custom field fieldID, whose
// values are col of custom_values: the objects with a value in the order of col's index (company_id,
// field_id, col, object_id), then the others by id (reversed descending). Each part is an index walk
// that stops at the page's end, where one ORDER BY would sort every object of the company.
func (lq *listQuery) customSortSQL(table string, fieldID int64, col string, kind keyKind) func(string, int64) (string, []any) {
	return func(base string, companyID int64) (string, []any) {
		unset, args := lq.countSQL(base, companyID) // base and the filters
		conds := unset[len(base):]
		param := func(v any, cast string) string {
			args = append(args, v)
			return "$" + strconv.Itoa(len(args)) + cast
		}
		dir, cmp := "", " > "
		if lq.desc {
			dir, cmp = " DESC", " < "
		}
		bare, field := strings.Fields(col)[0], strconv.FormatInt(fieldID, 10)
		head := base[:strings.LastIndex(base, "FROM "+table+" WHERE company_id = $1")]
		valued := head + "FROM custom_values v JOIN " + table + " ON " + table + ".company_id = $1 AND " + table + ".id = v.object_id" +
			" WHERE v.company_id = $1 AND v.field_id = " + field + " AND v." + bare + " IS NOT NULL" + conds
		unset += " AND NOT EXISTS (SELECT FROM custom_values v WHERE v.company_id = $1 AND v.field_id = " + field +
			" AND v.object_id = " + table + ".id AND v." + bare + " IS NOT NULL)"
		a := lq.after
		switch {
		case a != nil && a.null:
			unset += " AND " + table + ".id" + cmp + param(a.id, "::bigint")
		case a != nil:
			valued += " AND (v." + col + ", v.object_id)" + cmp + "(" + param(a.arg(kind), "::text::"+keyTypes[kind].sql) + ", " + param(a.id, "::bigint") + ")"
		}
		limit := param(lq.limit+1, "")
		parts := []string{"(" + valued + " ORDER BY v." + col + dir + ", v.object_id" + dir + " LIMIT " + limit + ")",
			"(" + unset + " ORDER BY " + table + ".id" + dir + " LIMIT " + limit + ")"}
		if lq.desc { // the objects without a value first
			slices.Reverse(parts)
		}
		if a != nil && a.null != lq.desc { // past the first part
			return parts[1], args
		}
		return strings.Join(parts, " UNION ALL ") + " LIMIT " + limit, args
	}
}
