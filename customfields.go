package main

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// Custom field definitions (API.md section 14): /v1/customFields, the fields a company adds to its
// contacts, business records and organizations. Their values are customvalues.go's;
// schema/0012_custom_fields.sql says how both are stored, docs/scaling.md why.

const (
	maxCustomFields  = 200 // live fields per object per company
	maxOptions       = 500
	maxMultiSelected = 50
	maxNumberDigits  = 18 // significant digits of a number
)

var (
	customKeyPattern    = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)
	customOptionPattern = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)
	customObjects       = []string{"contact", "business", "organization", "activity"}
	customTypes         = []string{"text", "number", "money", "date", "datetime", "boolean", "select", "multiSelect", "url", "email", "user"}
	customTables        = map[string]string{"contact": "contacts", "business": "business", "organization": "organizations", "activity": "activities"}
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
	_, uniqueType := uniqueModes[f.Type]
	if f.Unique && !uniqueType {
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
	removed := slices.DeleteFunc(old.optionValues(), func(v string) bool { return slices.Contains(f.optionValues(), v) })
	if len(removed) > 0 {
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
		var mode int16 // 0: not unique
		if f.Unique {
			mode = uniqueModes[f.Type]
		}
		// The partial UNIQUE indexes of schema/0012 refuse values that are already there twice.
		err := tx.queryRow(ctx, `WITH u AS (UPDATE custom_values SET unique_mode = $3 WHERE company_id = $1 AND field_id = $2 RETURNING 1)
			SELECT count(*) FROM u`, append(args, mode), new(int64))
		if pgCode(err) == "23505" {
			return f, conflict("field_values_conflict", "The field cannot be unique: stored values repeat.")
		} else if err != nil {
			return f, err
		}
	}
	q := `UPDATE custom_fields SET label = $3, options = $4, required = $5, is_unique = $6, ` + touched + `
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
	err := s.db.QueryRowContext(ctx, q).Scan(&companyID, &fieldID)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	err = s.db.QueryRowContext(ctx, `WITH d AS (DELETE FROM custom_values WHERE company_id = $1 AND field_id = $2 AND object_id IN (
		SELECT object_id FROM custom_values WHERE company_id = $1 AND field_id = $2 LIMIT $3) RETURNING 1)
		SELECT count(*) FROM d`, companyID, fieldID, deleteBatch).Scan(&n)
	if err == nil && n == 0 {
		_, err = s.db.ExecContext(ctx, `DELETE FROM custom_fields WHERE company_id = $1 AND id = $2`, companyID, fieldID)
		n = deleteBatch // maybe more fields to purge: again soon
	}
	return n, err
}
