package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"
)

// Search (API.md section 20): GET /v1/search?q=... finds contacts, business records, organizations
// and activities by their searched fields and their text, e-mail and URL custom fields, case- and
// accent-insensitively. schema/0019_search.sql holds each table's search document (the fields, each
// between newlines, folded) with its trigram index, and the functions named here; docs/scaling.md
// says why. Each hit is of one class, its best field's: exact (a field is q), prefix (a word of a
// field starts with q) or contains. A page is one UNION ALL of (class, kind) parts, each in id order
// from one index range, read in order until the page is full: the cursor is (class, kind, id).

const (
	minSearchRunes = 2
	maxSearchRunes = 200
)

// searchKind is a kind of object that search finds.
type searchKind struct {
	*assocKind
	index  string        // the document its table's trigram index holds (schema/0019_search.sql)
	doc    string        // the document of its searched fields: index, or a part of it
	fields []searchField // the searched fields, in the order a hit names the first that matches best
	load   func(companyID int64, ids []int64, out map[int64]*searchFound) read
}

// searchField is a searched field: its API name and its document.
type searchField struct{ name, doc string }

// searchDoc is the SQL of the document of some fields, as schema/0019_search.sql indexes it: each
// between newlines (NULL as empty), folded.
func searchDoc(fields ...string) string {
	return `search_fold(E'\n' || coalesce(` + strings.Join(fields, `, '') || E'\n' || coalesce(`) + `, '') || E'\n')`
}

// storedDoc is the stored document of contacts, business records and organizations (schema/0019):
// a contact's fields, then its phone numbers' digits, which a phone number q is compared with (+34
// 600-12-34-56 is found by 600123456). Lists' q uses its index.
const storedDoc = "search_doc"

// searchKinds are the kinds search finds, in their default order.
var searchKinds = []*searchKind{
	{assocKind: contactKind, index: storedDoc, doc: storedDoc, load: searchLoad[contact](contacts), fields: []searchField{
		{"name", searchDoc("name")}, {"surname", searchDoc("surname")}, {"email", searchDoc("email")},
		{"secondaryEmail", searchDoc("secondary_email")}, {"phone", searchDoc("phone", "search_digits(phone)")},
		{"mobilePhone", searchDoc("mobile_phone", "search_digits(mobile_phone)")}, {"dni", searchDoc("dni")}}},
	{assocKind: businessKind, index: storedDoc, doc: storedDoc, load: searchLoad[business](businesses),
		fields: []searchField{{"title", searchDoc("title")}}},
	{assocKind: organizationKind, index: storedDoc, doc: storedDoc, load: searchLoad[organization](organizations),
		fields: []searchField{{"name", searchDoc("name")}}},
	{assocKind: activityKind, index: searchDoc("subject", "body"), doc: searchDoc("subject"), load: searchLoad[activity](activities),
		fields: []searchField{{"subject", searchDoc("subject")}}},
}

// customDoc is the document of a custom value.
var customDoc = searchDoc("v.text_value")

// searchLoad returns the read of the company's objects of res with these ids, as a retrieve
// answers them, into out by id.
func searchLoad[T any, P object[T]](res *resource) func(int64, []int64, map[int64]*searchFound) read {
	return func(companyID int64, ids []int64, out map[int64]*searchFound) read {
		return eachRow[T, P](res.selectSQL+` AND id = ANY($2)`, []any{companyID, ids}, func(v P) { out[v.key()] = &searchFound{data: v.appendJSON(nil)} })
	}
}

// The classes of a hit, best first, and the SQL condition on a document of each, which its index serves.
var (
	searchClasses = []string{"exact", "prefix", "contains"}
	searchConds   = []string{`LIKE search_like(E'\n' || search_fold($2) || E'\n')`, `~ search_word(search_fold($2))`, `LIKE search_like(search_fold($2))`}
)

// searchQuery is a parsed search: the text sought (needle: a phone number's digits, else q), whether
// it is an e-mail address (then no hit is a prefix), the kinds, the page's size and start.
type searchQuery struct {
	needle  string
	email   bool
	kinds   []*searchKind
	limit   int
	after   *searchPos
	binding string // q and the kinds: a cursor is good for the same search only
}

// searchPos is a hit: its class, its kind's index in the search's kinds, its id.
type searchPos struct{ class, kind, id int64 }

func (p *searchPos) scanDest() []any { return []any{&p.class, &p.kind, &p.id} }

// searchFound is a hit's object as its retrieve answers it, and the first field of the hit's class.
type searchFound struct {
	data  []byte
	field pgtype.Text
}

// parseSearch reads q and objects (and for a page: limit); the cursor is readCursor's. A kind
// named that the key cannot read is 403, as is no readable kind at all.
func parseSearch(r *http.Request, page bool) (*searchQuery, *apiError) {
	params := []string{"q", "objects"}
	if page {
		params = append(params, "limit", "cursor")
	}
	q, aerr := queryParams(r, params...)
	if aerr != nil {
		return nil, aerr
	}
	text := q.Get("q")
	if n := utf8.RuneCountInString(text); n < minSearchRunes || n > maxSearchRunes || !utf8.ValidString(text) ||
		strings.IndexFunc(text, unicode.IsControl) >= 0 {
		return nil, badParam("q", fmt.Sprintf("must be %d to %d characters of text, without control characters", minSearchRunes, maxSearchRunes))
	}
	sq := &searchQuery{needle: text, email: strings.Contains(text, "@")}
	if digits := phoneDigits(text); len(digits) >= minSearchRunes {
		sq.needle = digits
	}
	if sq.kinds, aerr = searchObjects(tenantOf(r).scopes, q["objects"]); aerr != nil {
		return nil, aerr
	}
	lq, aerr := (&listSpec{}).parse(q) // limit, as every list reads it
	if aerr != nil {
		return nil, aerr
	}
	sq.limit = lq.limit
	sq.binding = strconv.Quote(text)
	for _, k := range sq.kinds {
		sq.binding += "," + k.path
	}
	return sq, nil
}

// phoneDigits returns the digits of s when s is written as a phone number (digits, spaces and + - ( ) .), else "".
func phoneDigits(s string) string {
	if strings.Trim(s, "0123456789 +-().") != "" {
		return ""
	}
	return strings.Map(func(r rune) rune {
		if r < '0' || r > '9' {
			return -1
		}
		return r
	}, s)
}

// searchObjects returns the kinds objects names (nil: every kind the scopes read), in its order.
func searchObjects(scopes []string, objects []string) ([]*searchKind, *apiError) {
	if objects == nil {
		var kinds []*searchKind
		for _, k := range searchKinds {
			if covers(scopes, k.path+":read") {
				kinds = append(kinds, k)
			}
		}
		if kinds == nil {
			return nil, scopeError(scopes, searchKinds[0].path+":read")
		}
		return kinds, nil
	}
	var kinds []*searchKind
	for _, name := range strings.Split(objects[0], ",") {
		i := slices.IndexFunc(searchKinds, func(k *searchKind) bool { return k.path == name })
		if i < 0 || slices.Contains(kinds, searchKinds[i]) {
			return nil, badParam("objects", "must be one or more of contacts, business, organizations, activities, separated by commas, each once")
		}
		if aerr := scopeError(scopes, name+":read"); aerr != nil {
			return nil, aerr
		}
		kinds = append(kinds, searchKinds[i])
	}
	return kinds, nil
}

// searchScope is what a search's cursors are good for: the search of this company.
func searchScope(companyID int64, sq *searchQuery) string {
	return "/v1/search\n" + strconv.FormatInt(companyID, 10) + "\n" + sq.binding
}

// readCursor sets where the page starts from a cursor of the same search; anything else is 400.
func (sq *searchQuery) readCursor(s string, key []byte, scope string) *apiError {
	var nums [3]uint64
	text, ok := openCursor(s, key, scope, nums[:])
	if !ok || text != "" || nums[0] >= uint64(len(searchClasses)) || nums[1] >= uint64(len(sq.kinds)) || nums[2] == 0 {
		return badParam("cursor", "is not a cursor of this search; pass pagination.nextCursor unchanged, with the same q and objects")
	}
	sq.after = &searchPos{int64(nums[0]), int64(nums[1]), int64(nums[2])}
	return nil
}

// customIDs is the SQL of the company's searched custom fields of object: text, e-mail and URL.
func customIDs(object string) string {
	return `ARRAY(SELECT id FROM custom_fields WHERE company_id = $1 AND object = '` + object +
		`' AND type IN ('text', 'email', 'url') AND deleted_at IS NULL)`
}

// match is the SQL condition of k's objects (o) whose document or searched custom values meet cond.
func (k *searchKind) match(cond string) string {
	own := k.index + " " + cond
	if k.doc != k.index {
		own += " AND " + k.doc + " " + cond
	}
	return `(` + own + ` OR o.id = ANY(ARRAY(SELECT v.object_id FROM custom_values v WHERE v.company_id = $1
		AND v.field_id = ANY(` + customIDs(k.object) + `) AND v.text_value IS NOT NULL AND ` + customDoc + ` ` + cond + `)))`
}

// classSQL is the SQL of the class of a document: search_class's number.
func classSQL(doc string) string { return `search_class(` + doc + `, search_fold($2), $3)` }

// part is the SQL of the hits of class c among k's objects (kind i of the search), by id, after id
// $4 when after: an index range. An object is of the best class of its fields: it meets c's
// condition and not that of the class before, prev (-1: none). Its row is (class, kind, id).
func (k *searchKind) part(c, prev, i int, after bool) string {
	q := `(SELECT ` + strconv.Itoa(c) + `, ` + strconv.Itoa(i) + `, o.id FROM ` + k.res.table + ` o
		WHERE o.company_id = $1 AND ` + k.match(searchConds[c])
	if prev >= 0 {
		q += ` AND NOT ` + k.match(searchConds[prev])
	}
	if after {
		q += ` AND o.id > $4`
	}
	return q + ` ORDER BY o.id LIMIT $3)`
}

// fieldRead is the read of the field of each hit of k, ids of classes, into out: the first field
// of its class, of the object's own in their order, then of its custom fields by id.
func (k *searchKind) fieldRead(sq *searchQuery, companyID int64, ids []int64, classes []int64, out map[int64]*searchFound) read {
	q := `SELECT o.id, CASE x.class`
	for _, f := range k.fields {
		q += ` WHEN ` + classSQL(f.doc) + ` THEN '` + f.name + `'`
	}
	q += ` ELSE (SELECT 'custom.' || f.key FROM custom_values v JOIN custom_fields f ON f.company_id = v.company_id
		AND f.id = v.field_id WHERE v.company_id = $1 AND v.object_id = o.id AND v.field_id = ANY(` + customIDs(k.object) + `)
		AND ` + classSQL(customDoc) + ` = x.class ORDER BY f.id LIMIT 1) END
		FROM unnest($4::bigint[], $5::integer[]) AS x (id, class) JOIN ` + k.res.table + ` o ON o.company_id = $1 AND o.id = x.id`
	return read{q, []any{companyID, sq.needle, sq.email, ids, classes}, func(rs rows) error {
		var id int64
		var field pgtype.Text
		for rs.Next() {
			if err := rs.Scan(&id, &field); err != nil {
				return err
			}
			if f := out[id]; f != nil {
				f.field = field
			}
		}
		return rs.Err()
	}}
}

// pageSQL is the statement of a page of hits and the one after it: each (class, kind) part from the
// cursor's on, in order. Append runs them in order and stops when the LIMIT is met, so a page
// reads only the parts it shows; search_fold is PARALLEL RESTRICTED, so no parallel plan mixes them.
func (sq *searchQuery) pageSQL() string {
	var parts []string
	prev := -1
	for c := range searchClasses {
		if c == 1 && sq.email {
			continue // an e-mail address is exact or contained, never a prefix
		}
		for i, k := range sq.kinds {
			at := 1 // this part's place from the cursor's: -1 before it, 0 its own, 1 after it
			if a := sq.after; a != nil {
				at = cmp.Or(cmp.Compare(int64(c), a.class), cmp.Compare(int64(i), a.kind))
			}
			if at >= 0 {
				parts = append(parts, k.part(c, prev, i, at == 0))
			}
		}
		prev = c
	}
	if len(parts) == 1 {
		return parts[0] // a part has its LIMIT $3, and PostgreSQL refuses a second
	}
	return strings.Join(parts, "\nUNION ALL\n") + "\nLIMIT $3"
}

// countSQL is the statement of the number of hits: of objects of each kind that contain q.
func (sq *searchQuery) countSQL() string {
	var counts []string
	for _, k := range sq.kinds {
		counts = append(counts, `(SELECT count(*) FROM `+k.res.table+` o WHERE o.company_id = $1 AND `+k.match(searchConds[2])+`)`)
	}
	return `SELECT ` + strings.Join(counts, " + ")
}

// handleSearch answers GET /v1/search: {"data": [hits], "pagination": {...}}. Two round trips: the
// hits, then their objects.
func handleSearch(st *store, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		sq, aerr := parseSearch(r, true)
		if aerr != nil {
			writeProblem(w, r, aerr)
			return
		}
		key, err := st.listCursorKey(r.Context())
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		scope := searchScope(t.companyID, sq)
		if c := r.URL.Query()["cursor"]; c != nil {
			if aerr := sq.readCursor(c[0], key, scope); aerr != nil {
				writeProblem(w, r, aerr)
				return
			}
		}
		hits, found, err := sq.run(r.Context(), st, t.companyID)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		next := ""
		if len(hits) > sq.limit {
			hits = hits[:sq.limit]
			p := hits[sq.limit-1]
			next = sealCursor(key, scope, []uint64{uint64(p.class), uint64(p.kind), uint64(p.id)}, "")
		}
		writeJSON(w, r, http.StatusOK, sq.appendPage(hits, found, next))
	})
}

// run reads a page of hits, and the one after it; then their objects and fields, by kind.
func (sq *searchQuery) run(ctx context.Context, st *store, companyID int64) ([]searchPos, []map[int64]*searchFound, error) {
	args := []any{companyID, sq.needle, sq.limit + 1}
	if sq.after != nil {
		args = append(args, sq.after.id)
	}
	hits := make([]searchPos, 0, sq.limit+1)
	if err := st.read(ctx, rowsInto[searchPos](&hits, sq.pageSQL(), args...)); err != nil {
		return nil, nil, err
	}
	ids, classes := make([][]int64, len(sq.kinds)), make([][]int64, len(sq.kinds))
	for _, h := range hits {
		ids[h.kind], classes[h.kind] = append(ids[h.kind], h.id), append(classes[h.kind], h.class)
	}
	found := make([]map[int64]*searchFound, len(sq.kinds))
	var reads []read
	for i, k := range sq.kinds {
		found[i] = map[int64]*searchFound{}
		if ids[i] != nil {
			reads = append(reads, k.load(companyID, ids[i], found[i]), k.fieldRead(sq, companyID, ids[i], classes[i], found[i]))
		}
	}
	if reads == nil {
		return hits, found, nil
	}
	return hits, found, st.read(ctx, reads...)
}

// appendPage returns the body of a page of hits. A hit whose object was deleted after it was found
// is left out.
func (sq *searchQuery) appendPage(hits []searchPos, found []map[int64]*searchFound, next string) []byte {
	b := append(make([]byte, 0, 640*len(hits)+256), `{"data":[`...)
	first := true
	for _, h := range hits {
		f, ok := found[h.kind][h.id]
		if !ok {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		k := sq.kinds[h.kind]
		var id any = &h.id
		if k.textID {
			id = (*textID)(&h.id)
		}
		b = appendObject(b, "object", &k.object, "id", id, "match", &searchClasses[h.class], "field", &f.field)
		b = append(append(append(b[:len(b)-1], `,"data":`...), f.data...), '}') // data in place of the closing }
	}
	b = appendPagination(append(b, "],"...), sq.limit, next)
	return append(b, "}\n"...)
}

// handleSearchCount answers GET /v1/search/count: {"count": n}, the number of hits of the search.
func handleSearchCount(st *store, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		sq, aerr := parseSearch(r, false)
		if aerr != nil {
			writeProblem(w, r, aerr)
			return
		}
		var n int64
		count := eachRow[fieldID](sq.countSQL(), []any{t.companyID, sq.needle}, func(c *fieldID) { n = int64(*c) })
		if err := st.read(r.Context(), count); err != nil {
			writeError(w, r, log, err)
			return
		}
		writeJSON(w, r, http.StatusOK, appendCount(nil, n))
	})
}
