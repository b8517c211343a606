package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Custom values (API.md section 14): what contacts, business records and organizations carry in
// "custom", checked and written by their writes, and the custom.<key> filters and sorts of their
// lists. schema/0012_custom_fields.sql says how they are stored, docs/scaling.md why.

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
	user    bool  // a user's id, in num
	n       int16 // of a multiSelect's values
}

// value is the row's value as a text: a number's (num) or another's (text).
func (r *customRow) value() pgtype.Text {
	if r.num.Valid {
		return r.num
	}
	return r.text
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
		return fmt.Sprintf("names %s more than once", quoteClamped(dup))
	}
	if !ok {
		return `must be an object of custom field values, such as {"tier": "gold"}`
	}
	cur := objectMembers(cv.json)
	cv.w = &customWrite{sent: []string{}}
	for _, m := range patch {
		var c bytes.Buffer
		json.Compact(&c, m.raw)
		i := slices.IndexFunc(cur, func(o member) bool { return o.name == m.name })
		if i >= 0 {
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
	tx.queueAlike(rowsInto[customField](&fields, customFields.selectSQL+` AND object = $2 AND (key = ANY($3) OR $4 AND required)
		ORDER BY id`, companyID, object, keys, cv != nil))
	if cv != nil {
		tx.queueAlike(read{`SELECT keys FROM custom_field_keys WHERE company_id = $1 AND object = $2`, []any{companyID, object},
			func(rows rows) error {
				_, err := pgx.ForEachRow(rows, []any{&cv.defs}, func() error { return nil })
				return err
			}})
	}
	return &fields
}

// checkCustom checks the custom values a body set (cv.w.sent) on an object of kind object against the
// fields queueCustomFields read (read; nil: it reads them now), and makes cv's JSON, column and rows.
// It writes nothing: the write stores the column with its own statement, then the rows (saveCustom),
// so an error of checkCustom leaves the transaction as it found it.
// It checks the fields the write sets and, on a create, the required ones (each error named
// custom.<key>): their values, the users those name, and that no other object holds a unique one.
// The others (cv.defs) are null on a create, and on an update keep their values, checked when they
// were written. Reading and checking only those pays, in server CPU a write that sets 2 fields of 52
// (a million contacts, wrk -c32, paired rounds): a PATCH 544-600 us, 588-631 reading all 52; a POST
// 422-490, 470-597.
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
	cv.w = &customWrite{sent: body.sent, keys: map[int64]string{}, update: objectID != 0}
	values, stored, found, valueErrs := cv.checkValues(*read, body.old)
	var errs fieldErrors
	for _, key := range body.sent {
		if !slices.Contains(found, key) {
			errs = append(errs, fieldError{Field: "custom." + key, Message: "is not a custom field of " + object + " objects"})
		}
	}
	errs = append(errs, valueErrs...)
	if errs != nil {
		return errs
	}
	if err := checkCustomRows(ctx, tx, companyID, objectID, cv.w); err != nil {
		return err
	}
	cv.json = appendMembers(nil, values)
	cv.w.stored = pgtype.Text{String: string(appendMembers(nil, stored)), Valid: true}
	return nil
}

// checkValues checks the values of cv.json for each of the object's live fields (cv.defs, "id:key"
// by id) that fields defines: those the write sets, and a create's required ones. It returns custom's
// members as the API writes them, the values by field id for the object's custom column, the keys
// it checked, and what is wrong with the values. The rows of the values the write changes go into
// cv.w (customWrite.add): an update's value sent again as it is stored (old: the values its keys
// held) keeps its rows, as an integration that sends the whole object back would otherwise rewrite
// every index entry of its values.
func (cv *customValues) checkValues(fields []customField, old []member) (values, stored []member, found []string, errs fieldErrors) {
	byKey := map[string]*customField{}
	for i := range fields {
		byKey[fields[i].Key] = &fields[i]
	}
	members := objectMembers(cv.json)
	values = []member{}
	for def := range strings.SplitSeq(string(cv.defs), ",") {
		id, key, ok := strings.Cut(def, ":")
		if !ok {
			continue // no fields: defs is empty
		}
		value := memberRaw(members, key) // nil: unset
		if f, ok := byKey[key]; ok {
			found = append(found, key)
			var rows []customRow
			var msg string
			value, rows, msg = f.checkValue(value)
			if msg == "" && f.Required && isNull(value) {
				msg = "is required"
			}
			if msg != "" {
				errs = append(errs, fieldError{Field: "custom." + key, Message: msg})
				continue
			}
			if !cv.w.update || !bytes.Equal(value, memberRaw(old, key)) {
				cv.w.add(f, rows)
			}
		}
		values = append(values, member{key, appendNull(value, value != nil)})
		if value != nil && !isNull(value) {
			stored = append(stored, member{id, value})
		}
	}
	return values, stored, found, errs
}

// add records that the write replaces field f's rows of custom_values with rows.
func (w *customWrite) add(f *customField, rows []customRow) {
	w.keys[f.ID] = f.Key
	w.rows = append(w.rows, rows...)
	if w.update && (len(rows) == 0 || f.Type == "multiSelect" || f.Unique) {
		w.drop = append(w.drop, f.ID)
	}
}

// checkCustomRows checks, in one round trip, what only the database knows of the rows w of a write
// of the company's object objectID (0: a new one): that a user value is a user of the company, and
// that no other object holds a unique value. A concurrent write may still take a unique value after
// this look and before the write stores it: saveCustom finds that.
func checkCustomRows(ctx context.Context, tx *tx, companyID, objectID int64, w *customWrite) error {
	var reads []read
	var errs fieldErrors
	for _, r := range w.rows {
		field := "custom." + w.keys[r.fieldID]
		switch {
		case r.user:
			q := `SELECT FROM users WHERE company_id = $1 AND id = $2::bigint`
			reads = append(reads, read{q, []any{companyID, r.num}, func(rs rows) error {
				if !rs.Next() {
					errs = append(errs, fieldError{Field: field, Message: "is not a user of the company"})
				}
				return rs.Err()
			}})
		case r.unique != 0:
			q := `SELECT object_id FROM custom_values WHERE company_id = $1 AND field_id = $2 AND object_id <> $3
				AND ` + sameUnique(r.unique, "$4") + ` LIMIT 1`
			reads = append(reads, read{q, []any{companyID, r.fieldID, objectID, r.value()}, func(rs rows) error {
				var holder int64
				if rs.Next() && rs.Scan(&holder) == nil {
					errs = append(errs, fieldError{Field: field, Message: fmt.Sprintf("must be unique; object %d holds this value", holder)})
				}
				return rs.Err()
			}})
		}
	}
	if reads == nil {
		return nil
	}
	if err := tx.read(ctx, reads...); err != nil {
		return err
	}
	if errs != nil {
		return errs
	}
	return nil
}

// uniqueForms are the SQL of a value's form as a unique field compares it, by unique mode
// (uniqueModes): given, of a text %s; stored, of a row of custom_values. Two values are the same when
// their forms are equal; each mode's unique index (schema/0012) holds the stored form.
var uniqueForms = [...]struct{ given, stored string }{
	1: {"lower(%s)", "lower(text_value)"},
	2: {"%s", "text_value"},
	3: {"trim_scale(%s::numeric)", "num_value"},
}

// sameUnique is the SQL condition that a row of custom_values holds v (the SQL of a text), a value
// of a field of unique mode mode: the one comparison of unique values, which takes the mode's index.
func sameUnique(mode int16, v string) string {
	f := uniqueForms[mode]
	return fmt.Sprintf("unique_mode = %d AND %s = "+f.given, mode, f.stored, v)
}

// saveCustom writes the rows of custom_values that checkCustom made for the company's object id, in
// tx: the last statements of a write but its event, after the object's own. An update's row
// overwrites its field's old one in place (ON CONFLICT DO UPDATE; the bench's PATCH in pgbench: 227
// us of statement time against 316 for a DELETE and an INSERT). Old rows go first (cv.w.drop) where
// new ones may not overwrite them: a value cleared, a multiSelect's (it may hold fewer), a unique
// one; and then all of them, as the ON CONFLICT DO NOTHING that finds a unique value taken would keep
// them. A value taken since checkCustom looked (DO NOTHING waits for a concurrent writer's
// transaction, and the loser finds the winner committed; or an earlier item of the same batch) is a
// fieldError wrapped in errPartWritten: the write has written, and only its transaction's end undoes
// it. Round trips: the DELETE goes with the INSERT, which waits only when a value is unique.
func saveCustom(ctx context.Context, tx *tx, companyID, objectID int64, cv *customValues) error {
	if cv.w == nil || len(cv.w.keys) == 0 {
		return nil // no custom value set, or none changed
	}
	unique := slices.ContainsFunc(cv.w.rows, func(r customRow) bool { return r.unique != 0 })
	drop := cv.w.drop
	if len(drop) > 0 {
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
		if r.unique != 0 && !slices.Contains(inserted, fieldID(r.fieldID)) {
			errs = append(errs, fieldError{Field: "custom." + cv.w.keys[r.fieldID], Message: "must be unique; another write took this value at the same time"})
		}
	}
	if errs != nil {
		return fmt.Errorf("%w: %w", errPartWritten, errs)
	}
	return nil
}

// checkValue checks raw, a JSON value sent for field f (nil: none), and returns it as the API writes
// it, with its rows of custom_values, or what is wrong with it.
func (f *customField) checkValue(raw json.RawMessage) (json.RawMessage, []customRow, string) {
	if raw == nil || isNull(raw) {
		return json.RawMessage("null"), nil, ""
	}
	row := customRow{fieldID: f.ID, user: f.Type == "user", folded: f.Type == "text" || f.Type == "email"}
	if f.Unique {
		row.unique = uniqueModes[f.Type]
	}
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
		msg = boolean(new(bool))(raw)
		row.text = pgtype.Text{String: string(raw), Valid: true}
	case "datetime":
		msg = nullableTime(&row.time)(raw)
	case "text", "url", "email", "date", "select":
		check := map[string]func(string) string{"url": checkHTTPURL, "email": checkEmail, "date": checkDate, "select": f.checkOption}[f.Type]
		maxLen := 1000
		if f.Type == "email" {
			maxLen = 255 // as the built-in e-mails
		}
		msg = nullableText(&row.text, maxLen, check)(raw)
	case "multiSelect":
		var ss []string
		if json.Unmarshal(raw, &ss) != nil || raw[0] != '[' || len(ss) > maxMultiSelected {
			return nil, nil, fmt.Sprintf("must be an array of at most %d option values", maxMultiSelected)
		}
		rows := []customRow{}
		for i, s := range ss {
			msg := f.checkOption(s)
			if msg == "" && slices.Contains(ss[:i], s) {
				msg = "is there twice"
			}
			if msg != "" {
				return nil, nil, fmt.Sprintf("[%d] %s", i, msg)
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

// checkOption accepts an option value of f; the message names the first of them (listMessage).
func (f *customField) checkOption(s string) string {
	options := f.optionValues()
	if !slices.Contains(options, s) {
		return listMessage("must be an option value of the field: ", options)
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

// maxCustomFilters bounds the custom.<key> filters of one request: each is a join of its own, and
// at 200 fields a count with all of them ran the whole statement timeout (issue 44).
const maxCustomFilters = 10

// customSortAndFilters adds to lq the custom.<key> filters and sort that the list request of res asked
// for (lq.custom), with the company's fields of res's object. An unknown key, a bad value, an
// operator or sort the field's type lacks, or a filter past maxCustomFilters is 400 naming the parameter.
func customSortAndFilters(ctx context.Context, st *store, companyID int64, res *resource, lq *listQuery) error {
	if len(lq.custom) == 0 {
		return nil
	}
	if aerr := tooManyCustomFilters(lq.custom); aerr != nil {
		return aerr
	}
	refs := map[string]string{} // the custom.<key>[op] each parameter names
	var keys []string
	for name, v := range lq.custom {
		refs[name] = name
		if name == "sort" {
			refs[name] = strings.TrimPrefix(v[0], "-") // sort=-custom.<key>
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
		lq.sort = &sortField{name: "custom." + key, kind: kind, nullable: true}
		if kind == keyTime {
			lq.sort.name = "custom@" + key
		}
		lq.desc = desc
		lq.pageSQL = lq.customSortSQL(res.table, fields[i].ID, col, kind)
	}
	return nil
}

// tooManyCustomFilters is the 400 of the filters of custom past maxCustomFilters (in name order), or nil.
func tooManyCustomFilters(custom url.Values) *apiError {
	filters := 0
	for _, name := range slices.Sorted(maps.Keys(custom)) {
		if name == "sort" {
			continue
		}
		filters++
		if filters > maxCustomFilters {
			return badParam(name, fmt.Sprintf("is a custom filter too many: a request takes at most %d", maxCustomFilters))
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
	bare := strings.Fields(col)[0]
	var arg any = rows[0].text
	cast := ""
	switch {
	case f.Type == "text" || f.Type == "email":
		col = "lower(text_value)"
		sqlOp = "= lower"
		bare = "folded AND text_value" // custom_values_folded holds only these (schema/0015)
	case rows[0].num.Valid:
		col = "num_value"
		arg = rows[0].num
		cast = "::numeric"
	case rows[0].time.Valid:
		arg = rows[0].time
	}
	values := fmt.Sprintf(`FROM custom_values WHERE company_id = $1 AND field_id = %d AND %s IS NOT NULL AND %s %s(%%s%s)`,
		f.ID, bare, col, sqlOp, cast)
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
// field_id, col, object_id), then the others by id, both parts reversed descending but in that order:
// as a built-in sort's NULLs, the objects without a value come last both ways. Each part is an index
// walk that stops at the page's end, where one ORDER BY would sort every object of the company.
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
		bare := strings.Fields(col)[0]
		field := strconv.FormatInt(fieldID, 10)
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
		parts := []string{"(" + valued + " ORDER BY v." + col + dir + ", v.object_id" + dir + lq.limitSQL() + ")",
			"(" + unset + " ORDER BY " + table + ".id" + dir + lq.limitSQL() + ")"}
		if a != nil && a.null { // past the objects with a value
			return parts[1], args
		}
		return strings.Join(parts, " UNION ALL ") + lq.limitSQL(), args
	}
}
