package main

import (
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"
)

// Summaries (API.md section 21): the count of a resource's objects and the sums, averages, minimums
// and maximums of their number fields, by up to two group keys, for the filters of its list. One
// plain SELECT makes the answer: one consistent snapshot, which takes no lock a write waits for, and
// runs under the statement timeout of every read (store.read). Sums are PostgreSQL's own over
// numeric, sent as its text; averages are rounded in Go, exactly (avgText).

const (
	maxGroupBy          = 2
	maxMetrics          = 20
	defaultSummaryLimit = 100
	maxSummaryLimit     = 1000
)

// summaryField is a field of a resource that its summaries group by bucket (a time) or add up (a number).
type summaryField struct {
	name  string // API name: "createdAt", "value"
	col   string // its column
	money bool   // an amount in the object's currency (listSpec.currency)
}

// groupType is the type of a group key: how SQL orders it, how a cursor carries it, how the answer writes it.
type groupType struct {
	sql    string // the SQL type a cursor's key, text, is cast to
	null   string // what replaces its NULL in the order: any value, as the "is null" flag before it decides
	text   string // the SQL of its text (of %s), which the answer and a cursor carry
	quoted bool   // the answer writes the text as a JSON string; else as it is (a number, a boolean)
}

var (
	groupID   = &groupType{"bigint", "0", "%s::text", false}
	groupUser = &groupType{"numeric", "0", "%s::text", false} // a user custom field's values
	groupBool = &groupType{"boolean", "false", "%s::text", false}
	groupText = &groupType{"text", "''", "%s", true}
	groupTime = &groupType{"timestamptz", "'-infinity'", `to_char(%s AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`, true}
)

// bucketUnits are the time buckets of a group by time, as date_trunc names them (weeks start on Monday).
var bucketUnits = []string{"day", "week", "month", "year"}

// metricOps are the metrics of a number field, in the order the answer writes them.
var metricOps = []string{"sum", "avg", "min", "max"}

// groupKey is one key of a summary's groups.
type groupKey struct {
	name string // as groupBy wrote it: "stageId", "custom.tier", "createdAt:month"
	expr string // its SQL, of the object's row and the custom values joined to it
	typ  *groupType
}

// metric is one metric of a summary: op (metricOps) of the field name, whose SQL is expr.
type metric struct {
	op, name, expr string
	money          bool
}

// summaryQuery is a parsed summary request.
type summaryQuery struct {
	table   string
	groups  []groupKey
	metrics []metric
	joins   []string // the LEFT JOINs of the custom values that groups and metrics read
	limit   int
	cursor  []string      // as sent; nil: the first page
	after   []pgtype.Text // the keys of the last group of the page before (readCursor)
	binding string        // the groups and metrics: a cursor is valid only for the same
}

// handleSummary answers GET /v1/{resource}/summary: the groups of the objects that the list's
// filters keep, each with its count and metrics, paged like a list.
func handleSummary(st *store, res *resource, log *slog.Logger) http.Handler {
	allowed := append(res.lists.params(false), "groupBy", "metrics", "limit", "cursor")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		lq, sq, err := summaryRequest(r, st, res, allowed)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		key, err := st.listCursorKey(r.Context())
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		scope := listScope(res, t.companyID, 0) + "\nsummary\n" + lq.binding + sq.binding
		if aerr := sq.readCursor(key, scope); aerr != nil {
			writeProblem(w, r, aerr)
			return
		}
		var groups [][]pgtype.Text
		sqlText, args := sq.selectSQL(lq, t.companyID)
		if err := st.read(r.Context(), read{sqlText, args, func(rs rows) error { return scanTexts(rs, &groups) }}); err != nil {
			writeError(w, r, log, err)
			return
		}
		next := ""
		if len(groups) > sq.limit { // one row more than the page: there is a next page
			groups = groups[:sq.limit]
			next = groupCursor(key, scope, groups[sq.limit-1][:len(sq.groups)])
		}
		writeJSON(w, r, http.StatusOK, sq.appendPage(groups, next))
	})
}

// summaryRequest reads a summary request of res: its query parameters (allowed, no others), the
// list's filters of them (listFilters), and groupBy, metrics, limit and cursor.
func summaryRequest(r *http.Request, st *store, res *resource, allowed []string) (*listQuery, *summaryQuery, error) {
	q, aerr := queryParams(r, allowed...)
	if aerr != nil {
		return nil, nil, aerr
	}
	sq := &summaryQuery{table: res.table, limit: defaultSummaryLimit, cursor: q["cursor"]}
	groupBy, metrics := splitList(q, "groupBy"), splitList(q, "metrics")
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > maxSummaryLimit || strconv.Itoa(n) != v[0] {
			return nil, nil, badParam("limit", fmt.Sprintf("must be an integer from 1 to %d", maxSummaryLimit))
		}
		sq.limit = n
	}
	for _, name := range []string{"groupBy", "metrics", "limit", "cursor"} {
		delete(q, name) // the list's parse reads limit, of another range
	}
	lq, _, err := listFilters(r, st, res, q)
	if err != nil {
		return nil, nil, err
	}
	return lq, sq, sq.parse(r, st, res, groupBy, metrics)
}

// splitList returns the comma-separated names of parameter name of q: none when it is not there.
func splitList(q url.Values, name string) []string {
	v, ok := q[name]
	if !ok {
		return nil
	}
	return strings.Split(v[0], ",")
}

// parse reads groupBy and metrics with the company's custom fields they name (one read). A bad
// name is 400 naming its parameter; so is a custom field of another company, which is no field here.
func (sq *summaryQuery) parse(r *http.Request, st *store, res *resource, groupBy, metrics []string) error {
	if len(groupBy) > maxGroupBy {
		return badParam("groupBy", fmt.Sprintf("takes at most %d fields", maxGroupBy))
	}
	if len(metrics) > maxMetrics {
		return badParam("metrics", fmt.Sprintf("takes at most %d metrics", maxMetrics))
	}
	var keys []string
	for _, name := range slices.Concat(groupBy, metrics) {
		field := name[strings.Index(name, ":")+1:] // of a metric, sum:custom.arr
		if key, ok := strings.CutPrefix(field, "custom."); ok {
			keys = append(keys, key)
		}
	}
	fields := []customField{}
	if len(keys) > 0 {
		var err error
		if fields, err = loadCustomFields(r.Context(), st.read, tenantOf(r).companyID, res.lists.custom, keys); err != nil {
			return err
		}
	}
	for _, name := range groupBy {
		if aerr := sq.addGroup(res.lists, fields, name); aerr != nil {
			return aerr
		}
	}
	for _, name := range metrics {
		if aerr := sq.addMetric(res.lists, fields, name); aerr != nil {
			return aerr
		}
	}
	money := slices.ContainsFunc(sq.metrics, func(m metric) bool { return m.money })
	if money && res.lists.currency != "" && !slices.ContainsFunc(sq.groups, func(g groupKey) bool { return g.name == "currencyId" }) {
		sq.groups = append(sq.groups, groupKey{"currencyId", res.lists.currency, groupID}) // amounts of one currency only
	}
	for _, g := range sq.groups { // the SQL names each custom field by id: a cursor is not good for another of the same key
		sq.binding += "group " + g.expr + "\n"
	}
	for _, m := range sq.metrics {
		sq.binding += "metric " + m.op + " " + m.expr + "\n"
	}
	return nil
}

// addGroup adds the group key name of groupBy: a reference or boolean filter field of spec, a time
// field of spec by bucket (createdAt:month), or a select, boolean or user custom field of fields.
func (sq *summaryQuery) addGroup(spec *listSpec, fields []customField, name string) *apiError {
	g := groupKey{name: name}
	field, unit, bucket := strings.Cut(name, ":")
	t := slices.IndexFunc(spec.times, func(f summaryField) bool { return f.name == field })
	u := slices.Index(bucketUnits, unit)
	f := slices.IndexFunc(spec.filters, func(f filter) bool {
		return f.name == name && (f.kind == filterIDs || f.kind == filterBool || f.kind == filterOneOf)
	})
	custom := customFieldOf(fields, name)
	switch {
	case bucket && t >= 0 && u >= 0:
		g.expr, g.typ = "date_trunc('"+bucketUnits[u]+"', "+spec.times[t].col+", 'UTC')", groupTime
	case f >= 0 && spec.filters[f].kind == filterIDs:
		g.expr, g.typ = spec.filters[f].col, groupID
	case f >= 0 && spec.filters[f].kind == filterBool:
		g.expr, g.typ = spec.filters[f].col, groupBool
	case f >= 0:
		g.expr, g.typ = spec.filters[f].col+` COLLATE "C"`, groupText
	case custom != nil && custom.Type == "select":
		g.expr, g.typ = sq.join(custom)+`.text_value COLLATE "C"`, groupText
	case custom != nil && custom.Type == "boolean":
		g.expr, g.typ = sq.join(custom)+".text_value::boolean", groupBool
	case custom != nil && custom.Type == "user":
		g.expr, g.typ = sq.join(custom)+".num_value", groupUser
	default:
		return badParam("groupBy", "names "+quoteClamped(name)+"; it takes "+groupNames(spec))
	}
	if slices.ContainsFunc(sq.groups, func(o groupKey) bool { return o.name == name }) {
		return badParam("groupBy", "names "+quoteClamped(name)+" twice")
	}
	sq.groups = append(sq.groups, g)
	return nil
}

// groupNames says what a summary of spec's objects may group by, in at most 200 characters.
func groupNames(spec *listSpec) string {
	var names, times []string
	for _, f := range spec.filters {
		if f.kind == filterIDs || f.kind == filterBool || f.kind == filterOneOf {
			names = append(names, f.name)
		}
	}
	for _, f := range spec.times {
		times = append(times, f.name)
	}
	return strings.Join(append(names, strings.Join(times, "|")+":day|week|month|year", "custom.<key>"), ", ")
}

// addMetric adds the metric name of metrics: count (always there), or op:field of a number field of
// spec or a number or money custom field of fields.
func (sq *summaryQuery) addMetric(spec *listSpec, fields []customField, name string) *apiError {
	if name == "count" {
		return nil
	}
	op, field, _ := strings.Cut(name, ":")
	m := metric{op: op, name: field}
	n := slices.IndexFunc(spec.numbers, func(f summaryField) bool { return f.name == field })
	custom := customFieldOf(fields, field)
	switch {
	case !slices.Contains(metricOps, op):
		return badParam("metrics", "names "+quoteClamped(name)+"; a metric is count, or sum, avg, min or max, a colon and a number field: sum:value")
	case n >= 0:
		m.expr, m.money = spec.numbers[n].col, spec.numbers[n].money
	case custom != nil && (custom.Type == "number" || custom.Type == "money"):
		m.expr, m.money = sq.join(custom)+".num_value", custom.Type == "money"
	default:
		var names []string
		for _, f := range spec.numbers {
			names = append(names, f.name)
		}
		return badParam("metrics", "names "+quoteClamped(field)+", which is not a number field: "+
			strings.Join(append(names, "custom.<key> of a number or money field"), ", "))
	}
	if slices.ContainsFunc(sq.metrics, func(o metric) bool { return o.op == op && o.name == field }) {
		return badParam("metrics", "names "+quoteClamped(name)+" twice")
	}
	sq.metrics = append(sq.metrics, m)
	return nil
}

// customFieldOf returns the field of fields that name (custom.<key>) names, or nil.
func customFieldOf(fields []customField, name string) *customField {
	key, ok := strings.CutPrefix(name, "custom.")
	i := slices.IndexFunc(fields, func(f customField) bool { return f.Key == key })
	if !ok || i < 0 {
		return nil
	}
	return &fields[i]
}

// join returns the alias of f's custom values joined to the objects, joining them once. An object
// holds at most one value of a select, boolean, user, number or money field: no row comes twice.
func (sq *summaryQuery) join(f *customField) string {
	alias := "v" + strconv.FormatInt(f.ID, 10)
	j := fmt.Sprintf("LEFT JOIN custom_values %[1]s ON %[1]s.company_id = $1 AND %[1]s.field_id = %[2]d AND %[1]s.object_id = %[3]s.id",
		alias, f.ID, sq.table)
	if !slices.Contains(sq.joins, j) {
		sq.joins = append(sq.joins, j)
	}
	return alias
}

// selectSQL returns the summary's statement: the groups of the company's objects that lq's filters
// keep, in order, from the one after sq.after, at most sq.limit + 1, each a row of text columns: its
// keys, its count, and each metric (an average as two: its sum and its count).
func (sq *summaryQuery) selectSQL(lq *listQuery, companyID int64) (string, []any) {
	var cols, outer, keys, byKeys []string
	for i, g := range sq.groups {
		col := "g" + strconv.Itoa(i)
		cols = append(cols, g.expr+" AS "+col)
		outer = append(outer, fmt.Sprintf(g.typ.text, col))
		keys = append(keys, "("+col+" IS NULL)", "coalesce("+col+", "+g.typ.null+")")
		byKeys = append(byKeys, strconv.Itoa(i+1))
	}
	cols = append(cols, "count(*) AS n")
	outer = append(outer, "n::text")
	for i, m := range sq.metrics {
		col := "m" + strconv.Itoa(i)
		if m.op == "avg" {
			cols = append(cols, "sum("+m.expr+") AS "+col, "count("+m.expr+") AS "+col+"n")
			outer = append(outer, col+"::text", col+"n::text")
			continue
		}
		cols = append(cols, m.op+"("+m.expr+") AS "+col)
		outer = append(outer, col+"::text")
	}
	from, args := lq.countSQL("FROM "+sq.table+" "+strings.Join(sq.joins, " ")+" WHERE "+sq.table+".company_id = $1", companyID)
	inner := "SELECT " + strings.Join(cols, ", ") + " " + from
	if len(byKeys) > 0 {
		inner += " GROUP BY " + strings.Join(byKeys, ", ")
	}
	q := "SELECT " + strings.Join(outer, ", ") + " FROM (" + inner + ") s"
	if sq.after != nil {
		var vals []string
		for i, g := range sq.groups {
			args = append(args, !sq.after[i].Valid, sq.after[i])
			vals = append(vals, fmt.Sprintf("$%d::boolean, coalesce($%d::text::%s, %s)", len(args)-1, len(args), g.typ.sql, g.typ.null))
		}
		q += " WHERE (" + strings.Join(keys, ", ") + ") > (" + strings.Join(vals, ", ") + ")"
	}
	if len(keys) > 0 {
		q += " ORDER BY " + strings.Join(keys, ", ")
	}
	args = append(args, sq.limit+1)
	return q + " LIMIT $" + strconv.Itoa(len(args)), args
}

// scanTexts appends each row of rs, its columns as text, to out.
func scanTexts(rs rows, out *[][]pgtype.Text) error {
	for rs.Next() {
		row := make([]pgtype.Text, len(rs.FieldDescriptions()))
		dest := make([]any, len(row))
		for i := range row {
			dest[i] = &row[i]
		}
		if err := rs.Scan(dest...); err != nil {
			return err
		}
		*out = append(*out, row)
	}
	return rs.Err()
}

// groupCursor returns the cursor of the page after the group of keys, for scope: its numbers say
// which keys are NULL, its text is the keys with a NUL after each (a PostgreSQL text has none).
func groupCursor(key []byte, scope string, keys []pgtype.Text) string {
	nulls := make([]uint64, len(keys))
	text := ""
	for i, k := range keys {
		if !k.Valid {
			nulls[i] = 1
		}
		text += k.String + "\x00"
	}
	return sealCursor(key, scope, nulls, text)
}

// readCursor sets where the page starts from sq.cursor, which groupCursor made for the same scope
// (company, filters, groups and metrics). Anything else is 400.
func (sq *summaryQuery) readCursor(key []byte, scope string) *apiError {
	if sq.cursor == nil {
		return nil
	}
	nulls := make([]uint64, len(sq.groups))
	text, ok := openCursor(sq.cursor[0], key, scope, nulls)
	keys := strings.Split(text, "\x00")
	if !ok || len(sq.groups) == 0 || len(keys) != len(sq.groups)+1 {
		return badParam("cursor", "is not a cursor of this summary; pass pagination.nextCursor unchanged, with the same groupBy, metrics and filters")
	}
	for i, null := range nulls {
		sq.after = append(sq.after, pgtype.Text{String: keys[i], Valid: null == 0})
	}
	return nil
}

// appendPage returns the body of a summary answer: its groups, rows as selectSQL reads them, and the
// pagination (next is "" on the last page).
func (sq *summaryQuery) appendPage(groups [][]pgtype.Text, next string) []byte {
	b := make([]byte, 0, 128*len(groups)+256)
	b = append(b, `{"data":[`...)
	for i, row := range groups {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"group":{`...)
		for j, g := range sq.groups {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(appendString(b, g.name), ':')
			b = appendNull(b, row[j].Valid)
			switch {
			case row[j].Valid && g.typ.quoted:
				b = appendString(b, row[j].String)
			case row[j].Valid:
				b = append(b, row[j].String...)
			}
		}
		b = append(append(b, `},"count":`...), row[len(sq.groups)].String...)
		b = append(sq.appendMetrics(b, row[len(sq.groups)+1:]), '}')
	}
	b = append(b, "],"...)
	b = appendPagination(b, sq.limit, next)
	return append(b, "}\n"...)
}

// appendMetrics appends the metrics of a group, from their columns (cols): "sum": {"value": ...},
// then avg, min and max, each with its fields in the order metrics named them; null where the
// group holds no value of the field.
func (sq *summaryQuery) appendMetrics(b []byte, cols []pgtype.Text) []byte {
	for _, op := range metricOps {
		first, col := true, 0
		for _, m := range sq.metrics {
			v := cols[col]
			col++
			if m.op == "avg" {
				v = avgText(v, cols[col])
				col++
			}
			if m.op != op {
				continue
			}
			if first {
				b = append(appendString(append(b, ','), op), ":{"...)
			} else {
				b = append(b, ',')
			}
			first = false
			b = append(appendNull(append(appendString(b, m.name), ':'), v.Valid), v.String...)
		}
		if !first {
			b = append(b, '}')
		}
	}
	return b
}

// avgText is sum / n (decimal texts; sum is NULL when the group holds no value), rounded half to even
// to 2 fractional digits, exactly: PostgreSQL's round() takes ties away from zero.
func avgText(sum, n pgtype.Text) pgtype.Text {
	s, ok := new(big.Rat).SetString(sum.String)
	count, okN := new(big.Int).SetString(n.String, 10)
	if !sum.Valid || !ok || !okN || count.Sign() <= 0 {
		return pgtype.Text{}
	}
	s.Mul(s, big.NewRat(100, 1)).Quo(s, new(big.Rat).SetInt(count)) // the average in hundredths
	q, rem := new(big.Int).QuoRem(s.Num(), s.Denom(), new(big.Int)) // q truncated toward zero
	half := rem.Abs(rem).Lsh(rem, 1).Cmp(s.Denom())                 // the rest against a half
	if half > 0 || half == 0 && q.Bit(0) == 1 {
		q.Add(q, big.NewInt(int64(s.Sign()))) // away from zero, by one hundredth
	}
	return pgtype.Text{String: new(big.Rat).SetFrac(q, big.NewInt(100)).FloatString(2), Valid: true}
}
