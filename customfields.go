package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
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
		label, msg := jsonString(strconv.AppendQuote(nil, cmpOr(o.Label, o.Value)), 255)
		if msg != "" {
			return fmt.Sprintf("[%d].label %s", i, msg)
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = appendObject(b, "value", &o.Value, "label", &label)
	}
	f.Options = pgtype.Text{String: string(append(b, ']')), Valid: true}
	return ""
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// optionValues returns the values of the field's options.
func (f *customField) optionValues() []string {
	var opts []customOption
	json.Unmarshal([]byte(f.Options.String), &opts) // written by applyOptions
	values := make([]string, len(opts))
	for i, o := range opts {
		values[i] = o.Value
	}
	return values
}

// checkDefinition returns the fieldErrors of a definition whose members do not go together.
func (f *customField) checkDefinition() error {
	var errs fieldErrors
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
	if errs != nil {
		return errs
	}
	return nil
}

var customFields = &resource{path: "/v1/customFields", table: "custom_fields",
	lists: &listSpec{filters: []filter{{name: "object", col: "object", kind: filterEmail}}},
	selectSQL: `SELECT id, object, key, label, type, options, required, is_unique, created_at, updated_at
		FROM custom_fields WHERE company_id = $1 AND deleted_at IS NULL`}

func conflict(code, detail string) *apiError {
	return &apiError{Status: http.StatusConflict, Code: code, Detail: detail}
}

// createCustomField stores a new field definition f of the company in tx. Its key taken by a live
// field of the object is 409 field_key_taken; the object's 200th field is the last (422
// field_limit); a required field on an object that has objects is 409 field_values_conflict. Creates
// of one company take turns (an advisory lock), so that the limit holds.
func createCustomField(ctx context.Context, tx *tx, t tenant, f customField) (customField, error) {
	if err := f.checkDefinition(); err != nil {
		return f, err
	}
	var live int64
	var hasObjects bool
	q := `SELECT (SELECT count(*) FROM custom_fields WHERE company_id = $1 AND object = $2 AND deleted_at IS NULL),
		EXISTS (SELECT FROM ` + customTables[f.Object] + ` WHERE company_id = $1)`
	tx.queue(`SELECT pg_advisory_xact_lock(hashtextextended('custom_fields ' || $1::bigint, 0))`, t.companyID)
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
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return f, conflict("field_key_taken", fmt.Sprintf("The %s field key %q is taken by a live field.", f.Object, f.Key))
	}
	return f, err
}

// updateCustomField applies p (label, options, required, unique) to the company's field id in tx.
// object, key and type are fixed (422). Removing an option a stored value holds is 409
// option_in_use; making a field required or unique that stored values break is 409
// field_values_conflict.
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
	if err := f.checkDefinition(); err != nil {
		return f, err
	}
	args := []any{t.companyID, id}
	if removed := slices.DeleteFunc(old.optionValues(), func(v string) bool { return slices.Contains(f.optionValues(), v) }); len(removed) > 0 {
		var held pgtype.Text
		const q = `SELECT min(text_value) FROM custom_values WHERE company_id = $1 AND field_id = $2
			AND text_value IS NOT NULL AND text_value COLLATE "C" = ANY($3)`
		if err := tx.queryRow(ctx, q, append(args, removed), &held); err != nil {
			return f, err
		}
		if held.Valid {
			return f, conflict("option_in_use", fmt.Sprintf("The option %q is held by stored values; clear them first.", held.String))
		}
	}
	if f.Required && !old.Required {
		var missing bool
		q := `SELECT EXISTS (SELECT FROM ` + customTables[f.Object] + ` o WHERE o.company_id = $1 AND NOT EXISTS (
			SELECT FROM custom_values v WHERE v.company_id = $1 AND v.field_id = $2 AND v.object_id = o.id))`
		if err := tx.queryRow(ctx, q, args, &missing); err != nil {
			return f, err
		}
		if missing {
			return f, conflict("field_values_conflict", "The field cannot be required: objects without a value for it exist.")
		}
	}
	if f.Unique != old.Unique {
		mode := int16(0)
		if f.Unique {
			mode = uniqueModes[f.Type]
		}
		// The partial UNIQUE indexes of schema/0012 refuse values that are already there twice.
		err := tx.queryRow(ctx, `WITH u AS (UPDATE custom_values SET unique_mode = $3 WHERE company_id = $1 AND field_id = $2 RETURNING 1)
			SELECT count(*) FROM u`, append(args, mode), new(int64))
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" {
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

// handleCustomFieldDelete answers DELETE /v1/customFields/{id}: 204. The definition goes at once,
// and with it its values from every object (they are no longer rendered, and a new field with the
// key starts empty); purgeCustomValues removes their rows later.
func handleCustomFieldDelete(st *store, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		wr := startWrite(w, r, customFields, log, nil)
		if wr == nil {
			return
		}
		runWrite(w, r, st, log, wr, func(tx *tx) (answer, error) {
			var n int64
			const q = `WITH d AS (UPDATE custom_fields SET deleted_at = now() WHERE company_id = $1 AND id = $2
				AND deleted_at IS NULL RETURNING 1) SELECT count(*) FROM d`
			if err := tx.queryRow(r.Context(), q, []any{t.companyID, wr.id}, &n); err != nil || n == 0 {
				return answer{}, cmpErr(err, errNotFound)
			}
			return answer{status: http.StatusNoContent}, nil
		})
	})
}

func cmpErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

// purgeCustomValues deletes at most deleteBatch rows of custom_values of one deleted field, and the
// field's definition once none is left. The server runs it in the background (deleteInBatches).
func (s *store) purgeCustomValues(ctx context.Context) (int64, error) {
	var companyID, fieldID int64
	err := s.db.QueryRowContext(ctx, `SELECT company_id, id FROM custom_fields WHERE deleted_at IS NOT NULL LIMIT 1`).Scan(&companyID, &fieldID)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	res, err := s.db.ExecContext(ctx, `DELETE FROM custom_values WHERE company_id = $1 AND field_id = $2 AND object_id IN (
		SELECT object_id FROM custom_values WHERE company_id = $1 AND field_id = $2 LIMIT $3)`, companyID, fieldID, deleteBatch)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err == nil && n == 0 {
		_, err = s.db.ExecContext(ctx, `DELETE FROM custom_fields WHERE company_id = $1 AND id = $2`, companyID, fieldID)
		n = deleteBatch // maybe more fields to purge: again soon
	}
	return n, err
}

// customValues are an object's custom field values: "custom" in its JSON.
type customValues struct {
	json   []byte      // {"key": value, ...}: every live field, as read, or as a body's patch left it
	sent   []string    // the keys a body's custom set (not nil when it sent custom): checkCustom checks json and sets what follows
	stored pgtype.Text // {"fieldID": value, ...} of the set values, for the row's custom column
	rows   []customRow // the values for custom_values
	fields []int64     // the fields whose custom_values rows the write replaces
	keys   map[int64]string
}

// customRow is one row of custom_values.
type customRow struct {
	fieldID int64
	text    pgtype.Text
	num     pgtype.Text
	time    pgtype.Timestamptz
	unique  int16
	n       int16 // of a multiSelect's values
}

// customColumn is the SQL of the custom JSON of a row of table, for the select of a resource: the
// company's live fields of object, each with the row's value or null.
func customColumn(table, object string) string {
	return `coalesce((SELECT '{' || string_agg('"' || f.key || '":' || coalesce((` + table + `.custom -> f.id::text)::text, 'null'), ',' ORDER BY f.id) || '}'
		FROM custom_fields f WHERE f.company_id = $1 AND f.object = '` + object + `' AND f.deleted_at IS NULL), '{}')`
}

// scanDest is where customColumn is scanned.
func (cv *customValues) scanDest() any { return &cv.json }

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
	cur, _, _ := jsonMembers(cv.json)
	for _, m := range patch {
		var c bytes.Buffer
		json.Compact(&c, m.raw)
		if i := slices.IndexFunc(cur, func(o member) bool { return o.name == m.name }); i >= 0 {
			cur[i].raw = c.Bytes()
		} else {
			cur = append(cur, member{m.name, c.Bytes()})
		}
	}
	cv.json, cv.sent = appendMembers(nil, cur), []string{}
	for _, m := range patch {
		cv.sent = append(cv.sent, m.name)
	}
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
	members, _, _ := jsonMembers(cv.json)
	i := slices.IndexFunc(members, func(m member) bool { return m.name == key })
	if i < 0 || isNull(members[i].raw) {
		return "", true
	}
	raw := members[i].raw
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

// loadCustomFields reads the company's live fields of object, by id.
func loadCustomFields(ctx context.Context, rd reader, companyID int64, object string) ([]customField, error) {
	fields := []customField{}
	err := rd(ctx, rowsInto[customField](&fields, customFields.selectSQL+` AND object = $2 ORDER BY id`, companyID, object))
	return fields, err
}

// checkCustom checks the custom values of an object of kind object that a body set (cv.sent) against
// the company's fields in tx, and makes cv's stored JSON and rows; an object created without custom
// gets every field null, and its required fields are errors. Each error names custom.<key>. When
// objectID is not 0 (an update), it writes the changed values' rows too (saveCustom).
func checkCustom(ctx context.Context, tx *tx, companyID int64, object string, objectID int64, cv *customValues, create bool) error {
	if cv.sent == nil && !create {
		return nil
	}
	fields, err := loadCustomFields(ctx, tx.read, companyID, object)
	if err != nil {
		return err
	}
	values, _, _ := jsonMembers(cv.json)
	var errs fieldErrors
	for _, m := range values {
		if !slices.ContainsFunc(fields, func(f customField) bool { return f.Key == m.name }) {
			errs = append(errs, fieldError{Field: "custom." + m.name, Message: "is not a custom field of " + object + " objects"})
		}
	}
	out := make([]member, 0, len(fields))
	stored := []member{}
	var users []int64
	cv.rows, cv.fields, cv.keys = nil, nil, map[int64]string{}
	for _, f := range fields {
		i := slices.IndexFunc(values, func(m member) bool { return m.name == f.Key })
		raw := json.RawMessage("null")
		if i >= 0 {
			raw = values[i].raw
		}
		value, rows, msg := f.checkValue(raw)
		if msg == "" && f.Required && isNull(value) {
			msg = "is required"
		}
		if msg != "" {
			errs = append(errs, fieldError{Field: "custom." + f.Key, Message: msg})
			continue
		}
		out = append(out, member{f.Key, value})
		if !isNull(value) {
			stored = append(stored, member{strconv.FormatInt(f.ID, 10), value})
		}
		if create || slices.Contains(cv.sent, f.Key) {
			cv.fields, cv.keys[f.ID] = append(cv.fields, f.ID), f.Key
			cv.rows = append(cv.rows, rows...)
			if f.Type == "user" && len(rows) > 0 {
				users = append(users, f.ID)
			}
		}
	}
	if errs == nil && len(users) > 0 {
		errs, err = checkCustomUsers(ctx, tx, companyID, cv, users)
		if err != nil {
			return err
		}
	}
	if errs != nil {
		return errs
	}
	cv.json, cv.sent = appendMembers(nil, out), nil
	cv.stored = pgtype.Text{String: string(appendMembers(nil, stored)), Valid: true}
	if objectID != 0 {
		return saveCustom(ctx, tx, companyID, objectID, cv)
	}
	return nil
}

// checkCustomUsers returns an error for each value of the fields of type user that is not a user of
// the company.
func checkCustomUsers(ctx context.Context, tx *tx, companyID int64, cv *customValues, userFields []int64) (fieldErrors, error) {
	var ids []string
	for _, r := range cv.rows {
		if slices.Contains(userFields, r.fieldID) {
			ids = append(ids, r.num.String)
		}
	}
	var found []int64
	err := tx.queryRow(ctx, `SELECT coalesce(array_agg(id), '{}') FROM users WHERE company_id = $1 AND id = ANY($2::bigint[])`,
		[]any{companyID, ids}, &found)
	if err != nil {
		return nil, err
	}
	var errs fieldErrors
	for _, r := range cv.rows {
		if n, _ := strconv.ParseInt(r.num.String, 10, 64); slices.Contains(userFields, r.fieldID) && !slices.Contains(found, n) {
			errs = append(errs, fieldError{Field: "custom." + cv.keys[r.fieldID], Message: "is not a user of the company"})
		}
	}
	return errs, nil
}

// saveCustom replaces the custom_values rows of the fields a write set on the company's object id
// with cv's, in tx. A unique value that another object holds is a fieldError naming it: the
// database decides between concurrent writes (ON CONFLICT DO NOTHING waits for the other
// transaction), and the loser finds the winner committed. Round trips: the DELETE goes with the
// INSERT, which waits only when a value is unique.
func saveCustom(ctx context.Context, tx *tx, companyID, objectID int64, cv *customValues) error {
	if len(cv.fields) == 0 {
		return nil
	}
	tx.queue(`DELETE FROM custom_values WHERE company_id = $1 AND object_id = $2 AND field_id = ANY($3)`, companyID, objectID, cv.fields)
	if len(cv.rows) == 0 {
		return nil
	}
	q := `INSERT INTO custom_values (company_id, object_id, field_id, text_value, num_value, time_value, unique_mode, n) VALUES `
	args := []any{companyID, objectID}
	var unique []customRow
	for i, r := range cv.rows {
		if i > 0 {
			q += ", "
		}
		n := len(args)
		q += fmt.Sprintf("($1, $2, $%d, $%d, $%d::numeric, $%d, $%d::smallint, $%d::smallint)", n+1, n+2, n+3, n+4, n+5, n+6)
		args = append(args, r.fieldID, r.text, r.num, r.time, r.unique, r.n)
		if r.unique != 0 {
			unique = append(unique, r)
		}
	}
	if len(unique) == 0 {
		tx.queue(q, args...)
		return nil
	}
	var inserted []int64
	err := tx.read(ctx, read{q + ` ON CONFLICT DO NOTHING RETURNING field_id`, args, func(rs rows) error {
		for rs.Next() {
			var id int64
			if err := rs.Scan(&id); err != nil {
				return err
			}
			inserted = append(inserted, id)
		}
		return rs.Err()
	}})
	if err != nil {
		return err
	}
	var errs fieldErrors
	for _, r := range unique {
		if slices.Contains(inserted, r.fieldID) {
			continue
		}
		var holder int64
		const q = `SELECT min(object_id) FROM custom_values WHERE company_id = $1 AND field_id = $2 AND object_id <> $3
			AND CASE unique_mode WHEN 1 THEN lower(text_value) = lower($4) WHEN 2 THEN text_value = $4 ELSE num_value = $5::numeric END`
		if err := tx.queryRow(ctx, q, []any{companyID, r.fieldID, objectID, r.text, r.num}, &holder); err != nil {
			return err
		}
		errs = append(errs, fieldError{Field: "custom." + cv.keys[r.fieldID], Message: fmt.Sprintf("must be unique; object %d holds this value", holder)})
	}
	if errs != nil {
		return errs
	}
	return nil
}

// checkValue checks raw, a JSON value sent for field f, and returns it as the API writes it, with
// its rows of custom_values, or what is wrong with it.
func (f *customField) checkValue(raw json.RawMessage) (json.RawMessage, []customRow, string) {
	if isNull(raw) {
		return raw, nil, ""
	}
	row := customRow{fieldID: f.ID}
	if f.Unique {
		row.unique = uniqueModes[f.Type]
	}
	text := func(s string) (json.RawMessage, []customRow, string) {
		row.text = pgtype.Text{String: s, Valid: true}
		return appendString(nil, s), []customRow{row}, ""
	}
	switch f.Type {
	case "number", "money", "user":
		var s, msg string
		switch f.Type {
		case "number":
			s, msg = parseNumber(string(raw))
		case "money":
			s, msg = parseMoney(string(raw))
		default:
			var n int64
			n, msg = jsonInt(raw, 1, 1<<63-1)
			s, msg = strconv.FormatInt(n, 10), cmpOr(msg, "")
			if msg != "" {
				msg = "must be a user id"
			}
		}
		if msg != "" {
			return nil, nil, msg
		}
		row.num = pgtype.Text{String: s, Valid: true}
		return json.RawMessage(s), []customRow{row}, ""
	case "boolean":
		if s := string(raw); s != "true" && s != "false" {
			return nil, nil, "must be true or false"
		}
		row.text = pgtype.Text{String: string(raw), Valid: true}
		return raw, []customRow{row}, ""
	case "multiSelect":
		var ss []string
		if json.Unmarshal(raw, &ss) != nil || raw[0] != '[' || len(ss) > maxMultiSelected {
			return nil, nil, fmt.Sprintf("must be an array of at most %d option values", maxMultiSelected)
		}
		options, rows := f.optionValues(), []customRow{}
		for i, s := range ss {
			if !slices.Contains(options, s) || slices.Contains(ss[:i], s) {
				return nil, nil, fmt.Sprintf("[%d] must be a distinct option value of the field: %s", i, strings.Join(options, ", "))
			}
			rows = append(rows, customRow{fieldID: f.ID, text: pgtype.Text{String: s, Valid: true}, n: int16(i)})
		}
		return appendStrings(nil, ss), rows, ""
	}
	max := 1000
	if f.Type == "email" {
		max = 255
	}
	s, msg := jsonString(raw, max)
	if msg != "" {
		return nil, nil, msg
	}
	switch f.Type {
	case "email":
		msg = checkEmail(s)
	case "url":
		msg = checkHTTPURL(s)
	case "select":
		if options := f.optionValues(); !slices.Contains(options, s) {
			msg = "must be an option value of the field: " + strings.Join(options, ", ")
		}
	case "date":
		if d, err := time.Parse(time.DateOnly, s); err != nil || d.Format(time.DateOnly) != s {
			msg = "must be a calendar day like 2026-12-01"
		}
	case "datetime":
		t, err := time.Parse(time.RFC3339Nano, s)
		if t = t.UTC(); err != nil || t.Year() < 1 || t.Year() > 9999 {
			return nil, nil, "must be an RFC 3339 timestamp like 2026-11-21T09:30:00.123Z"
		}
		row.time = pgtype.Timestamptz{Time: t.Truncate(time.Millisecond), Valid: true}
		return appendTime(nil, row.time.Time), []customRow{row}, ""
	}
	if msg != "" {
		return nil, nil, msg
	}
	return text(s)
}

// parseNumber returns the decimal text of a JSON number (an exponent applied; digits as written
// otherwise, so 1.50 stays 1.50) of at most maxNumberDigits significant digits, or what is wrong.
func parseNumber(s string) (string, string) {
	const msg = "must be a number of at most 18 significant digits"
	sign, abs := "", s
	if strings.HasPrefix(s, "-") {
		sign, abs = "-", s[1:]
	}
	mant, expText, hasExp := strings.Cut(strings.ToLower(abs), "e")
	intPart, frac, hasPoint := strings.Cut(mant, ".")
	if !allDigits(intPart) || (len(intPart) > 1 && intPart[0] == '0') || (hasPoint && !allDigits(frac)) {
		return "", msg
	}
	exp := 0
	if hasExp {
		e, err := strconv.Atoi(expText)
		if err != nil || !allDigits(strings.TrimLeft(expText, "+-")) || e > 40 || e < -40 {
			return "", msg
		}
		exp = e
	}
	digits, point := intPart+frac, len(intPart)+exp
	if point > len(digits) {
		digits += strings.Repeat("0", point-len(digits))
	}
	if point < 0 {
		digits, point = strings.Repeat("0", -point)+digits, 0
	}
	whole, fraction := cmpOr(strings.TrimLeft(digits[:point], "0"), "0"), digits[point:]
	if len(strings.TrimLeft(whole+fraction, "0")) > maxNumberDigits {
		return "", msg
	}
	if strings.Trim(whole+fraction, "0") == "" {
		sign = ""
	}
	if fraction == "" {
		return sign + whole, ""
	}
	return sign + whole + "." + fraction, ""
}

// customSortAndFilters adds to lq the custom.<key> filters and the sort by a custom field that
// the list request of res asked for (lq.custom), with the company's fields of res's object. An
// unknown key, a bad value, or an operator or sort the field's type lacks is 400 naming the
// parameter.
func customSortAndFilters(ctx context.Context, st *store, companyID int64, res *resource, lq *listQuery) error {
	if len(lq.custom) == 0 {
		return nil
	}
	fields, err := loadCustomFields(ctx, st.read, companyID, res.lists.custom)
	if err != nil {
		return err
	}
	field := func(param, key string) (*customField, *apiError) {
		if i := slices.IndexFunc(fields, func(f customField) bool { return f.Key == key }); i >= 0 {
			return &fields[i], nil
		}
		return nil, badParam(param, fmt.Sprintf("names no custom field of %s objects", res.lists.custom))
	}
	for _, name := range slices.Sorted(maps.Keys(lq.custom)) {
		v := lq.custom[name][0]
		if name == "sort" {
			key, desc := strings.CutPrefix(v, "-")
			f, aerr := field("sort", strings.TrimPrefix(key, "custom."))
			if aerr != nil {
				return aerr
			}
			col, kind := f.valueColumn()
			if f.Type == "multiSelect" {
				return badParam("sort", "cannot sort by a multiSelect field")
			}
			name := "custom." + f.Key
			if kind == keyTime {
				name = "custom@" + f.Key
			}
			lq.sort = &sortField{name: name, kind: kind, nullable: true, nullsFirstDesc: true,
				col: fmt.Sprintf(`(SELECT v.%s FROM custom_values v WHERE v.company_id = $1 AND v.field_id = %d AND v.object_id = %s.id)`, col, f.ID, res.table)}
			lq.desc, lq.pageSQL = desc, lq.customSortSQL(res.table, f.ID, col, kind)
			lq.binding += "sort=" + strconv.Quote(v) + "\n"
			continue
		}
		key, op, _ := strings.Cut(strings.TrimPrefix(name, "custom."), "[")
		f, aerr := field(name, key)
		if aerr != nil {
			return aerr
		}
		if aerr := lq.addCustomFilter(name, f, strings.TrimSuffix(op, "]"), v, res.table); aerr != nil {
			return aerr
		}
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
	ranged := f.Type == "number" || f.Type == "money" || f.Type == "date" || f.Type == "datetime"
	if !ok || (op != "" && !ranged) {
		return badParam(param, "is not a filter of a "+f.Type+" field")
	}
	col, _ := f.valueColumn()
	var arg any = v
	switch f.Type {
	case "text", "email":
		col, sqlOp = "lower(text_value)", "= lower(%s)"
	case "multiSelect":
		if !customOptionPattern.MatchString(v) {
			return badParam(param, "must be an option value")
		}
	case "datetime":
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil || t.Year() < 1 || t.Year() > 9999 {
			return badParam(param, "must be an RFC 3339 timestamp, e.g. 2026-11-21T09:30:00Z")
		}
		arg = t.UTC()
	default:
		raw := json.RawMessage(v)
		if !slices.Contains([]string{"number", "money", "user", "boolean"}, f.Type) {
			raw = appendString(nil, v)
		}
		_, rows, msg := f.checkValue(raw)
		if msg != "" || len(rows) == 0 {
			return badParam(param, "must be a value of the field: it "+cmpOr(msg, "is empty"))
		}
		arg = rows[0].text.String
		if rows[0].num.Valid {
			arg = rows[0].num.String
		}
	}
	if !strings.Contains(sqlOp, "%s") {
		sqlOp += " %s"
	}
	if col == "num_value" {
		sqlOp = strings.Replace(sqlOp, "%s", "%s::numeric", 1)
	}
	valueIsSet := strings.Fields(strings.TrimPrefix(col, "lower("))[0]
	valueIsSet = strings.TrimSuffix(valueIsSet, ")")
	lq.where(fmt.Sprintf(`%s.id IN (SELECT object_id FROM custom_values WHERE company_id = $1 AND field_id = %d AND %s IS NOT NULL AND %s %s)`,
		table, f.ID, valueIsSet, col, sqlOp), arg)
	lq.binding += param + "=" + strconv.Quote(v) + "\n"
	return nil
}

// takeCustom moves the custom.<key> parameters and a sort=custom.<key> out of q, for
// customSortAndFilters, which needs the company's fields.
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

// handleCustomOpenAPI answers GET /v1/openapi.json: without a key, the embedded document, whose
// custom is a free-form object; with a key, the document with custom described by the company's own
// fields, so that a client generated from it is typed. A key that is not valid is 401.
func handleCustomOpenAPI(st *store, auth *authenticator, log *slog.Logger) http.Handler {
	plain := handleOpenAPI()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("x-api-key")
		if key == "" {
			plain.ServeHTTP(w, r)
			return
		}
		t, err := auth.resolve(r.Context(), key, true)
		if errors.Is(err, errNotFound) {
			writeProblem(w, r, errUnauthorized)
			return
		}
		var fields []customField
		if err == nil {
			err = st.read(r.Context(), rowsInto[customField](&fields, customFields.selectSQL+` ORDER BY id`, t.companyID))
		}
		var doc map[string]any
		if err == nil {
			err = json.Unmarshal(openAPIDocument, &doc)
		}
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
		for object, name := range map[string]string{"contact": "Contact", "business": "Business", "organization": "Organization"} {
			props, required := map[string]any{}, []string{}
			for _, f := range fields {
				if f.Object == object {
					props[f.Key], required = f.jsonSchema(), append(required, f.Key)
				}
			}
			schemas[name+"Custom"] = map[string]any{"type": "object", "additionalProperties": false, "properties": props, "required": required,
				"description": "The company's custom fields of " + object + " objects: every one present, null where unset."}
			schemas[name+"CustomPatch"] = map[string]any{"type": "object", "additionalProperties": false, "properties": props,
				"description": "A merge patch of the company's custom fields of " + object + " objects: an absent key is unchanged, null clears."}
			for _, s := range []string{name, name + "Create", name + "Update"} {
				if schema, ok := schemas[s].(map[string]any); ok {
					ref := "#/components/schemas/" + name + "CustomPatch"
					if s == name {
						ref = "#/components/schemas/" + name + "Custom"
					}
					schema["properties"].(map[string]any)["custom"] = map[string]any{"$ref": ref}
				}
			}
		}
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		writeJSON(w, r, http.StatusOK, append(b, '\n'))
	})
}

// jsonSchema is the JSON Schema of f's value in custom.
func (f *customField) jsonSchema() map[string]any {
	s := map[string]any{"title": f.Label}
	switch f.Type {
	case "text", "url", "email", "date", "datetime", "select":
		s["type"] = []string{"string", "null"}
		s["format"] = map[string]string{"url": "uri", "email": "email", "date": "date", "datetime": "date-time"}[f.Type]
		if f.Type == "select" {
			s["enum"] = append(slices.Collect(func(yield func(any) bool) {
				for _, v := range f.optionValues() {
					yield(v)
				}
			}), nil)
		}
	case "number", "money":
		s["type"] = []string{"number", "null"}
	case "boolean":
		s["type"] = []string{"boolean", "null"}
	case "user":
		s["type"], s["format"] = []string{"integer", "null"}, "int64"
	case "multiSelect":
		s["type"], s["maxItems"], s["uniqueItems"] = []string{"array", "null"}, maxMultiSelected, true
		s["items"] = map[string]any{"type": "string", "enum": f.optionValues()}
	}
	if s["format"] == "" {
		delete(s, "format")
	}
	return s
}

// customSortSQL returns the statement maker of a list page sorted by the custom field fieldID,
// whose values are col of custom_values. Objects with a value come in the order of the index of
// col (company_id, field_id, col, object_id), the others by id, as two parts, the values first
// ascending and last descending: each part is an index walk that stops at the page's end, where one
// ORDER BY over the whole table would sort every object of the company.
func (lq *listQuery) customSortSQL(table string, fieldID int64, col string, kind keyKind) func(string, int64) (string, []any) {
	return func(base string, companyID int64) (string, []any) {
		args := append([]any{companyID}, lq.args...)
		param := func(v any, cast string) string {
			args = append(args, v)
			return "$" + strconv.Itoa(len(args)) + cast
		}
		conds := ""
		for _, c := range lq.conds {
			conds += " AND " + c
		}
		dir, cmp := "", " > "
		if lq.desc {
			dir, cmp = " DESC", " < "
		}
		bare, field := strings.Fields(col)[0], strconv.FormatInt(fieldID, 10)
		head := base[:strings.LastIndex(base, "FROM "+table+" WHERE company_id = $1")]
		valued := head + "FROM custom_values v JOIN " + table + " ON " + table + ".company_id = $1 AND " + table + ".id = v.object_id" +
			" WHERE v.company_id = $1 AND v.field_id = " + field + " AND v." + bare + " IS NOT NULL" + conds
		unset := base + conds + " AND NOT EXISTS (SELECT FROM custom_values v WHERE v.company_id = $1 AND v.field_id = " + field +
			" AND v.object_id = " + table + ".id AND v." + bare + " IS NOT NULL)"
		a := lq.after
		switch {
		case a != nil && a.null:
			unset += " AND " + table + ".id" + cmp + param(a.id, "::bigint")
		case a != nil:
			valued += " AND (v." + col + ", v.object_id)" + cmp + "(" + param(a.arg(kind), "::text::"+keyTypes[kind].sql) + ", " + param(a.id, "::bigint") + ")"
		}
		limit := param(lq.limit+1, "")
		valued = "(" + valued + " ORDER BY v." + col + dir + ", v.object_id" + dir + " LIMIT " + limit + ")"
		unset = "(" + unset + " ORDER BY " + table + ".id" + dir + " LIMIT " + limit + ")"
		parts := []string{valued, unset}
		switch {
		case a != nil && a.null && !lq.desc: // past the values
			parts = parts[1:]
		case a != nil && !a.null && lq.desc: // past the objects without a value
			parts = parts[:1]
		case lq.desc:
			parts = []string{unset, valued}
		}
		if len(parts) == 1 {
			return parts[0], args
		}
		return strings.Join(parts, " UNION ALL ") + " LIMIT " + limit, args
	}
}
