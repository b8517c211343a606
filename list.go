package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"
)

// Lists (API.md section 6): limit, sort, filters and cursors, for every list and count endpoint.
// A resource says what its lists allow in a listSpec. The SQL built here names only the spec's
// columns; every value a client sends is a query parameter.

const (
	defaultLimit = 25
	maxLimit     = 100
	maxIDValues  = 100 // ids in one id filter: stageId=1,2,3
	maxQRunes    = 100 // characters of q
)

// keyKind is the type of a sort key: how a cursor carries it and how SQL compares it.
type keyKind int

const (
	keyInt     keyKind = iota // integer
	keyTime                   // timestamptz; a cursor carries Unix microseconds
	keyText                   // text, compared by code point (COLLATE "C")
	keyNumeric                // numeric; a cursor carries its decimal text
)

// sortField is a field a list may be sorted by. Ties break on id, in the same direction.
type sortField struct {
	name     string // API name: "createdAt"
	col      string // its column: "created_at"
	kind     keyKind
	nullable bool
	copied   bool // an activity's target rows copy its column (schema/0020): a target's page walks them
}

// byID is the default order, and the only one of lists that take no sort parameter.
var byID = sortField{name: "id", col: "id", kind: keyInt}

// isID reports whether f is the order by id alone (no key before the id).
func (f *sortField) isID() bool { return f.name == "id" }

// keyType is how SQL takes the sort keys of a keyKind.
type keyType struct {
	sql     string // the SQL type a cursor's key is cast to, from text: every key is sent as text
	nullSQL string // what a nullable key's NULL is replaced with in its sort expression
	nullArg string // the same as the text of a query argument
}

// keyTypes are the keyType of each keyKind. A NULL's replacement may be any value: the "is null"
// flag before it in the sort keeps NULLs apart.
var keyTypes = [...]keyType{
	keyInt:     {"integer", "0", "0"},
	keyTime:    {"timestamptz", "'-infinity'", "-infinity"},
	keyText:    {"text", "''", ""},
	keyNumeric: {"numeric", "0", "0"},
}

// keys returns the ORDER BY expressions of f before the id tie-breaker. A nullable key is two, (is it
// null?, its value with NULL replaced), so that NULLs come last both ways and the next page is one row
// comparison an index serves: schema/0003_lists.sql indexes exactly these expressions.
func (f *sortField) keys(desc bool) []string {
	if f.isID() {
		return nil
	}
	v := f.col
	if f.nullable {
		v = "coalesce(" + f.col + ", " + keyTypes[f.kind].nullSQL + ")"
	}
	if f.kind == keyText {
		v += ` COLLATE "C"`
	}
	switch {
	case !f.nullable:
		return []string{v}
	case desc:
		return []string{"(" + f.col + " IS NOT NULL)", v}
	}
	return []string{"(" + f.col + " IS NULL)", v}
}

// filterKind is how a filter parameter is read and matched.
type filterKind int

const (
	filterIDs    filterKind = iota // comma-separated ids; the column is one of them
	filterBool                     // true or false
	filterEmail                    // equal, ignoring case
	filterTime                     // a timestamp the column is compared with by op: createdAt[gte]
	filterText                     // q: the column contains it, ignoring case
	filterOneOf                    // one of values, or several (repeated, or separated by commas)
	filterTarget                   // kind:id, such as contact:12: the list's objects (of col, a kind) with that target
)

// filter is a query parameter that narrows a list and its count.
type filter struct {
	name   string // API name: "stageId"
	col    string
	kind   filterKind
	op     string   // filterTime: the comparison
	values []string // filterOneOf: what it may be
	doc    string   // filterText: the search document whose index finds what may contain it
	copied bool     // an activity's target rows copy its column (schema/0020): a target's page checks them
}

// listSpec is what one resource's lists allow.
type listSpec struct {
	sorts       []sortField // besides id; none: the list is by id only and takes no sort parameter
	filters     []filter
	ranges      bool           // createdAt[gte|gt|lte|lt] and updatedAt[...]
	q           string         // the SQL text q searches; "": no q
	qDoc        string         // the search document (search.go) that holds q's fields, whose index serves q; "": none
	newestFirst bool           // by id descending (with no sorts)
	custom      string         // the object whose custom fields filter and sort the list (customfields.go); "": none
	associates  string         // the kind whose associated.{kind} filters the list takes (associations.go); "": none
	times       []summaryField // the time fields a summary groups by bucket, createdAt:month (summary.go)
	numbers     []summaryField // the number fields a summary's metrics take, sum:value
	currency    string         // the column of the currency of its money fields; "": they have none
}

// rangeFilters are the filters of a spec with ranges.
var rangeFilters = slices.Concat(timeRange("createdAt", "created_at"), timeRange("updatedAt", "updated_at"))

// timeRange returns the filters name[gte], [gt], [lte] and [lt] of the time column col.
func timeRange(name, col string) []filter {
	return []filter{
		{name: name + "[gte]", col: col, kind: filterTime, op: ">="},
		{name: name + "[gt]", col: col, kind: filterTime, op: ">"},
		{name: name + "[lte]", col: col, kind: filterTime, op: "<="},
		{name: name + "[lt]", col: col, kind: filterTime, op: "<"},
	}
}

// allFilters returns every filter of the spec in the order a cursor binds them: its own, those of
// the ranges, and q.
func (s *listSpec) allFilters() []filter {
	var ranges []filter
	if s.ranges {
		ranges = rangeFilters
	}
	var q []filter
	if s.q != "" {
		q = []filter{{name: "q", col: s.q, kind: filterText, doc: s.qDoc}}
	}
	return slices.Concat(s.filters, ranges, q)
}

// params returns the query parameters of the list (list) or of its count (!list).
func (s *listSpec) params(list bool) []string {
	ps := []string{"expand[]"}
	if list {
		ps = append(ps, "limit", "cursor")
		if len(s.sorts) > 0 {
			ps = append(ps, "sort")
		}
	}
	for _, f := range s.allFilters() {
		ps = append(ps, f.name)
	}
	if s.custom != "" {
		ps = append(ps, "custom.*")
	}
	if s.associates != "" {
		ps = append(ps, associatedParams(kindOf(s.associates))...)
	}
	return ps
}

// listQuery is a parsed list or count request.
type listQuery struct {
	limit       int
	sort        *sortField
	desc        bool
	conds       []string // SQL conditions on the spec's columns; their values are args ($2 on: $1 is the company)
	copied      []string // those of conds whose columns an activity's target rows copy (filter.copied)
	args        []any
	binding     string // the sort and the filters as sent, quoted: a cursor is valid only for the same
	after       *cursorPos
	custom      url.Values                                         // custom.<key> filters and sort=custom.<key>, which customSortAndFilters adds
	pageSQL     func(base string, companyID int64) (string, []any) // when not nil, makes selectSQL's statement (customSortSQL)
	countValues string                                             // the count of a custom filter, when it is the only condition (addCustomFilter)
}

// cursorPos is where a page starts: after the row with this id and sort key.
type cursorPos struct {
	id   int64
	null bool   // the key is NULL
	key  string // the key as text (see keyKind)
}

// badParam is the 400 of query parameter name, whose value is wrong as message says.
func badParam(name, message string) *apiError {
	e := badRequest("invalid_parameter", fmt.Sprintf("Query parameter %s %s.", name, message))
	e.Errors = []fieldError{{Field: name, Message: message}}
	return e
}

// parse reads limit, sort and the filters of q (already checked by queryParams to hold only the
// spec's parameters). The cursor is read by readCursor, which needs the signing key.
func (s *listSpec) parse(q url.Values) (*listQuery, *apiError) {
	lq := &listQuery{limit: defaultLimit, sort: &byID, desc: s.newestFirst, custom: takeCustom(q)}
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > maxLimit || strconv.Itoa(n) != v[0] {
			return nil, badParam("limit", fmt.Sprintf("must be an integer from 1 to %d", maxLimit))
		}
		lq.limit = n
	}
	if v, ok := q["sort"]; ok {
		name, desc := strings.CutPrefix(v[0], "-")
		i := slices.IndexFunc(s.sorts, func(f sortField) bool { return f.name == name })
		switch {
		case i >= 0:
			lq.sort = &s.sorts[i]
		case name != "id": // id is byID, the default
			names := []string{"id"}
			for _, f := range s.sorts {
				names = append(names, f.name)
			}
			return nil, badParam("sort", "must be one of "+strings.Join(names, ", ")+", with - in front for descending")
		}
		lq.desc = desc
		lq.binding = "sort=" + strconv.Quote(v[0]) + "\n"
	}
	for _, f := range s.allFilters() {
		if v, ok := q[f.name]; ok { // several only where queryParams takes them: type
			if err := lq.addFilter(f, strings.Join(v, ",")); err != nil {
				return nil, err
			}
		}
	}
	if s.associates != "" {
		if err := lq.addAssociated(q, kindOf(s.associates)); err != nil {
			return nil, err
		}
	}
	return lq, nil
}

// likeEscaper makes a text match itself in a LIKE pattern (whose escape character is \).
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// where adds a condition; %s in cond is the placeholder of arg.
func (lq *listQuery) where(cond string, arg any) {
	lq.args = append(lq.args, arg)
	lq.conds = append(lq.conds, fmt.Sprintf(cond, "$"+strconv.Itoa(len(lq.args)+1)))
}

// addFilter adds the condition of filter f with value v, and binds v to the cursor.
func (lq *listQuery) addFilter(f filter, v string) *apiError {
	switch f.kind {
	case filterBool:
		if v != "true" && v != "false" {
			return badParam(f.name, "must be true or false")
		}
		lq.where(f.col+" = %s", v == "true")
	case filterEmail:
		if v == "" || len(v) > 255 || !utf8.ValidString(v) || strings.IndexFunc(v, unicode.IsControl) >= 0 {
			return badParam(f.name, "must be an e-mail address of at most 255 characters")
		}
		lq.where("lower("+f.col+") = lower(%s)", v)
	case filterTime:
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil || t.Year() < 1 || t.Year() > 9999 {
			return badParam(f.name, "must be an RFC 3339 timestamp, e.g. 2026-11-21T09:30:00Z")
		}
		lq.where(f.col+" "+f.op+" %s", t.UTC())
	case filterText:
		if aerr := lq.addText(f, v); aerr != nil {
			return aerr
		}
	case filterOneOf:
		vals := strings.Split(v, ",")
		if slices.ContainsFunc(vals, func(s string) bool { return !slices.Contains(f.values, s) }) {
			return badParam(f.name, "must be one of "+strings.Join(f.values, ", ")+", or several")
		}
		lq.where(f.col+" = ANY(%s::text[])", vals)
	case filterTarget:
		return lq.addTarget(f, v)
	default:
		parts := strings.Split(v, ",")
		if len(parts) > maxIDValues {
			return badParam(f.name, fmt.Sprintf("takes at most %d ids", maxIDValues))
		}
		ids := make([]int64, len(parts))
		for i, p := range parts {
			id, ok := parseID(p)
			if !ok {
				return badParam(f.name, "must be a positive integer id, or several separated by commas")
			}
			ids[i] = id
		}
		if len(ids) == 1 {
			// One id is =, which an index (company_id, col, id) serves in id order, so that a page
			// stops at its end; = ANY reads every row of the id and sorts them. At 1,000,000 business
			// records, a page of an organization's 500 went from 1.41x the time of the unchanged
			// associated.contacts page to 0.70x (make bench BENCH_ASSOC=1, docs/scaling.md).
			lq.where(f.col+" = %s::bigint", ids[0])
		} else {
			lq.where(f.col+" = ANY(%s::bigint[])", ids)
		}
	}
	if f.copied {
		lq.copied = append(lq.copied, lq.conds[len(lq.conds)-1])
	}
	lq.binding += f.name + "=" + strconv.Quote(v) + "\n"
	return nil
}

// addText adds the condition of q, filter f: its column contains v, ignoring case. The filter's
// search document holds the column's text folded (lower case, no accents): its index finds the rows
// whose document holds the folded pattern, a few more than the ILIKE keeps.
func (lq *listQuery) addText(f filter, v string) *apiError {
	if v == "" || !utf8.ValidString(v) || utf8.RuneCountInString(v) > maxQRunes ||
		strings.IndexFunc(v, unicode.IsControl) >= 0 {
		return badParam(f.name, fmt.Sprintf("must be 1 to %d characters of text, without control characters", maxQRunes))
	}
	cond := f.col + " ILIKE %[1]s"
	if f.doc != "" {
		// The ILIKE rechecks the rows the index finds. PostgreSQL has no statistics of f.col and
		// estimates its ILIKE as if a handful of rows passed it, so it read every match of a common
		// q from the index and sorted them, where walking the ids stops at the page's end: at
		// 1,000,000 contacts, q=name 12 (22,012 hits) took 94-247 ms against 0.6-2.6 ms (EXPLAIN
		// ANALYZE, a busy machine; a rare q reads the index either way). coalesce (a
		// no-op here: no NULL passes a WHERE) makes it an expression PostgreSQL takes as half the
		// rows, and leaves the estimate to the document's LIKE, whose statistics it has.
		cond = f.doc + " LIKE search_fold(%[1]s) AND coalesce(" + cond + ", false)"
	}
	lq.where(cond, "%"+likeEscaper.Replace(v)+"%")
	return nil
}

// addTarget adds the condition of the target filter f with value v, kind:id: the objects (of kind
// f.col) with an unlabelled association with the company's object id of that kind, one walk of its
// associations' index. It binds v to the cursor.
func (lq *listQuery) addTarget(f filter, v string) *apiError {
	object, idText, _ := strings.Cut(v, ":")
	k := kindOf(object)
	id, ok := parseID(idText)
	if k == nil || k.object != object || k.path == f.col || !ok {
		return badParam(f.name, "must be an object as kind:id, such as contact:12")
	}
	cond, other := endSQL(k, kindOf(f.col), "%s")
	lq.where("id IN (SELECT "+other+" FROM associations WHERE company_id = $1 AND "+cond+" AND label = '')", id)
	if lq.pageSQL == nil && lq.sort.copied && !(lq.sort.nullable && lq.desc) { // schema/0020 indexes these walks
		lq.pageSQL = lq.targetPageSQL(len(lq.conds)-1, fmt.Sprintf(cond, "$"+strconv.Itoa(len(lq.args)+1)))
	}
	lq.binding += f.name + "=" + strconv.Quote(v) + "\n"
	return nil
}

// selectSQL returns the statement of a list page: base ("SELECT ... FROM t WHERE company_id = $1"),
// the filters, the cursor's position, the order, and one row more than the page (it tells whether
// there is a next page).
func (lq *listQuery) selectSQL(base string, companyID int64) (string, []any) {
	if lq.pageSQL != nil {
		return lq.pageSQL(base, companyID)
	}
	q, args := lq.countSQL(base, companyID)
	after, order := lq.seek("id", &args)
	if after != "" {
		q += " AND " + after
	}
	return q + " ORDER BY " + order + lq.limitSQL(), args
}

// limitSQL is the LIMIT of every list page's statement: the page and the row after it. It is a
// number Go wrote (parse took 1 to maxLimit), not a placeholder: PostgreSQL weighs a plan for every
// value (the generic plan it may keep after five runs) as if LIMIT $n took a tenth of the rows. So
// most pages were planned anew (pgbench of the first page of contacts, -c8: 6,903 statements a
// second, 9,756 written in), and a connection whose first five lists had q of a common text kept a
// walk of every id: at 1,000,000 contacts, after five of `name 12`, q=zzqx then took 902 ms with
// LIMIT $n, 0.05 ms written in (EXPLAIN ANALYZE EXECUTE; its plan reads the index).
func (lq *listQuery) limitSQL() string { return " LIMIT " + strconv.Itoa(lq.limit+1) }

// lateralSQL is the read of one object of a page that walks the index of another table
// (associatedPageSQL, targetPageSQL): base's row whose id is id, with the list's conditions but
// lq.conds[i], which the walk answers.
func (lq *listQuery) lateralSQL(base, id string, i int) string {
	object := base + " AND id = " + id
	for j, c := range lq.conds {
		if j != i {
			object += " AND " + c
		}
	}
	return object
}

// seek returns the condition that a row comes after the cursor, in the list's order of its sort's
// keys and then its column id ("": the first page), and that ORDER BY. It adds the cursor's values to
// args.
func (lq *listQuery) seek(id string, args *[]any) (after, order string) {
	param := func(v any, cast string) string { // the placeholder of a new argument v
		*args = append(*args, v)
		return "$" + strconv.Itoa(len(*args)) + cast
	}
	keys := append(lq.sort.keys(lq.desc), id)
	dir, cmp := "", " > "
	if lq.desc {
		dir, cmp = " DESC", " < "
	}
	if a := lq.after; a != nil {
		var vals []string
		if !lq.sort.isID() {
			if lq.sort.nullable {
				vals = append(vals, param(a.null != lq.desc, "::boolean")) // the key's "is null" flag, or "is not null" when descending
			}
			vals = append(vals, param(a.arg(lq.sort.kind), "::text::"+keyTypes[lq.sort.kind].sql))
		}
		vals = append(vals, param(a.id, "::bigint"))
		after = "(" + strings.Join(keys, ", ") + ")" + cmp + "(" + strings.Join(vals, ", ") + ")"
	}
	return after, strings.Join(keys, dir+", ") + dir
}

// countSQL returns the statement that counts what the list would walk: base ("SELECT count(*) FROM t
// WHERE company_id = $1") and the filters.
func (lq *listQuery) countSQL(base string, companyID int64) (string, []any) {
	q := base
	for _, c := range lq.conds {
		q += " AND " + c
	}
	return q, append([]any{companyID}, lq.args...)
}

// arg is the cursor's key as the text of a query argument: for a NULL, what the sort expression
// has in its place.
func (a *cursorPos) arg(kind keyKind) string {
	switch {
	case a.null:
		return keyTypes[kind].nullArg
	case kind == keyTime:
		n, _ := strconv.ParseInt(a.key, 10, 64)
		return time.UnixMicro(n).UTC().Format(time.RFC3339Nano)
	}
	return a.key
}

// A cursor, of a list or the events feed, is base64url(its numbers as uvarints, a text, and the first
// 16 bytes of an HMAC-SHA256 with the server key of schema/0003_lists.sql over it and its scope: the
// list or feed, the company, the sort and the filters). It is opaque but not secret: a list's carries
// one object's id and sort key.
const cursorMACSize = 16

// cursorMAC returns the MAC of a cursor's payload for scope.
func cursorMAC(key []byte, scope string, payload []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("rolodex cursor v1\n" + scope + "\n"))
	m.Write(payload)
	return m.Sum(nil)[:cursorMACSize]
}

// sealCursor returns the cursor of nums and text for scope.
func sealCursor(key []byte, scope string, nums []uint64, text string) string {
	payload := make([]byte, 0, 10*len(nums)+len(text)+cursorMACSize)
	for _, n := range nums {
		payload = binary.AppendUvarint(payload, n)
	}
	payload = append(payload, text...)
	return base64.RawURLEncoding.EncodeToString(append(payload, cursorMAC(key, scope, payload)...))
}

// openCursor reads s, a cursor that sealCursor made for scope with len(nums) numbers, into nums,
// and returns its text. ok is false for anything else.
func openCursor(s string, key []byte, scope string, nums []uint64) (text string, ok bool) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) < cursorMACSize {
		return "", false
	}
	payload, mac := b[:len(b)-cursorMACSize], b[len(b)-cursorMACSize:]
	if !hmac.Equal(mac, cursorMAC(key, scope, payload)) {
		return "", false
	}
	for i := range nums { // signed by this server for this scope, and still every part is checked
		n, w := binary.Uvarint(payload)
		if w <= 0 || n > 1<<63-1 {
			return "", false
		}
		nums[i] = n
		payload = payload[w:]
	}
	return string(payload), true
}

// cursor returns the cursor of the page after the row (id, key); scope names the resource and the
// company. Its numbers are the id and whether the key is NULL; its text is the key.
func (lq *listQuery) cursor(key []byte, scope string, id int64, sortKey string, null bool) string {
	flag := uint64(0)
	if null {
		flag = 1
	}
	return sealCursor(key, scope+"\n"+lq.binding, []uint64{uint64(id), flag}, sortKey)
}

// readCursor sets where the page starts from a cursor that lq's cursor made for the same scope, sort
// and filters. Anything else is 400.
func (lq *listQuery) readCursor(s string, key []byte, scope string) *apiError {
	var nums [2]uint64
	text, ok := openCursor(s, key, scope+"\n"+lq.binding, nums[:])
	pos := &cursorPos{id: int64(nums[0]), null: nums[1] == 1, key: text}
	if !ok || pos.id == 0 || nums[1] > 1 || !lq.sort.validKey(pos) {
		return badParam("cursor", "is not a cursor of this list; pass pagination.nextCursor unchanged, with the same sort and filters")
	}
	lq.after = pos
	return nil
}

// validKey reports whether pos holds a key of the sort's kind.
func (f *sortField) validKey(pos *cursorPos) bool {
	switch {
	case f.isID() || pos.null:
		return pos.key == "" && (!pos.null || f.nullable)
	case f.kind == keyText:
		return utf8.ValidString(pos.key)
	case f.kind == keyNumeric:
		return isDecimal(pos.key)
	}
	bits := 32 // keyInt: an integer column
	if f.kind == keyTime {
		bits = 64 // Unix microseconds
	}
	n, err := strconv.ParseInt(pos.key, 10, bits)
	return err == nil && strconv.FormatInt(n, 10) == pos.key
}

// isDecimal reports whether s is digits with at most one decimal point between digits, as
// PostgreSQL writes a numeric, and at most 20 digits on either side.
func isDecimal(s string) bool {
	intPart, frac, hasPoint := strings.Cut(strings.TrimPrefix(s, "-"), ".") // custom numbers may be negative
	return allDigits(intPart) && len(intPart) <= 20 && (!hasPoint || allDigits(frac) && len(frac) <= 20)
}

// timeKey is a time as a cursor carries it.
func timeKey(t time.Time) string { return strconv.FormatInt(t.UnixMicro(), 10) }

// appendPagination appends the "pagination" member of a list answer; next is "" on the last page.
func appendPagination(b []byte, limit int, next string) []byte {
	n := int64(limit)
	hasMore := next != ""
	cursor := pgtype.Text{String: next, Valid: next != ""}
	b = append(b, `"pagination":`...)
	return appendObject(b, "limit", &n, "hasMore", &hasMore, "nextCursor", &cursor)
}

// appendCount appends the body of a /count answer.
func appendCount(b []byte, n int64) []byte {
	return append(appendObject(b, "count", &n), '\n')
}
