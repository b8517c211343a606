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
// field starts with q) or contains. A first page is first read by one statement on a plan kept for
// every text (quickSQL), where its hits are there. Otherwise a page reads each kind's candidates, its
// objects that contain q, once: where they are few (searchFew), it classifies them all; the kinds
// with more are read per class, in one UNION ALL of (class, kind) parts, each in id order from one
// index range, read in order until the page is full. The cursor is (class, kind, id) and, per kind,
// where its contains hits may start (searchQuery.floors).

const (
	minSearchRunes = 2
	maxSearchRunes = 200
)

// searchKind is a kind of object that search finds.
type searchKind struct {
	*assocKind
	index  string        // the document its table's trigram index holds (schema/0019_search.sql)
	doc    string        // the document of its searched fields: index, or a part of it
	cols   string        // the columns of o that index, doc and exact read
	exact  string        // the array of its searched fields' values that its exact index holds (schema/0021), or "": none
	lines  string        // else the array of its document's lines that its exact index holds (schema/0024): quickSQL's
	custom bool          // the company has searched custom fields of it (searchQuery.readCustom): match reads their values
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
	{assocKind: contactKind, index: storedDoc, doc: storedDoc, exact: contactsExact, load: searchLoad[contact](contacts),
		cols: "o.search_doc, o.name, o.surname, o.email, o.secondary_email, o.phone, o.mobile_phone, o.dni",
		fields: []searchField{
			{"name", searchDoc("name")}, {"surname", searchDoc("surname")}, {"email", searchDoc("email")},
			{"secondaryEmail", searchDoc("secondary_email")}, {"phone", searchDoc("phone", "search_digits(phone)")},
			{"mobilePhone", searchDoc("mobile_phone", "search_digits(mobile_phone)")}, {"dni", searchDoc("dni")}}},
	{assocKind: businessKind, index: storedDoc, doc: storedDoc, cols: "o.search_doc", load: searchLoad[business](businesses), lines: searchLines("title"),
		fields: []searchField{{"title", searchDoc("title")}}},
	{assocKind: organizationKind, index: storedDoc, doc: storedDoc, cols: "o.search_doc", load: searchLoad[organization](organizations), lines: searchLines("name"),
		fields: []searchField{{"name", searchDoc("name")}}},
	{assocKind: activityKind, index: searchDoc("subject", "body"), doc: searchDoc("subject"), cols: "o.subject, o.body", load: searchLoad[activity](activities), lines: searchLines("subject"),
		fields: []searchField{{"subject", searchDoc("subject")}}},
}

// contactsExact is the array of a contact's searched fields, folded, and its phone numbers' digits,
// as schema/0021_search_exact.sql indexes it: a contact is an exact hit when q is one of them. The
// trigram index cannot tell a whole field from a part of one, and it read every contact holding a
// common q to find its few exact hits: at 1,000,000 contacts, "name 12" took 2,828 buffers (60 to
// 190 ms) for 1 hit, where this index takes 0.1 ms.
const contactsExact = `ARRAY[search_fold(name), search_fold(surname), search_fold(email), search_fold(secondary_email),
	search_fold(phone), search_fold(mobile_phone), search_fold(dni), search_digits(phone), search_digits(mobile_phone)]`

// searchLines is the SQL of the lines of a document of one field, folded, as schema/0024 indexes
// them: q is one of them where the document holds it between newlines, an exact hit.
func searchLines(field string) string { return `string_to_array(search_fold(o.` + field + `), E'\n')` }

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
	floors  []int64 // per kind, the least id its contains hits may have: below it, earlier pages found none
	binding string  // q and the kinds: a cursor is good for the same search only
}

// searchPos is a hit: its class, its kind's index in the search's kinds, its id.
type searchPos struct{ class, kind, id int64 }

func (p *searchPos) scanDest() []any { return []any{&p.class, &p.kind, &p.id} }

// comparePos orders hits: by class, kind, id.
func comparePos(a, b searchPos) int {
	return cmp.Or(cmp.Compare(a.class, b.class), cmp.Compare(a.kind, b.kind), cmp.Compare(a.id, b.id))
}

// searchCandidate is an object that contains q, and its class (NULL: its kind has too many to classify).
type searchCandidate struct {
	kind, id int64
	class    pgtype.Int8
}

func (c *searchCandidate) scanDest() []any { return []any{&c.kind, &c.id, &c.class} }

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
	sq.floors = make([]int64, len(sq.kinds))
	for i := range sq.floors {
		sq.floors[i] = 1
	}
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

// readCursor sets where the page starts, and the kinds' floors, from a cursor of the same search;
// anything else is 400.
func (sq *searchQuery) readCursor(s string, key []byte, scope string) *apiError {
	nums := make([]uint64, 3+len(sq.kinds))
	text, ok := openCursor(s, key, scope, nums)
	if !ok || text != "" || nums[0] >= uint64(len(searchClasses)) || nums[1] >= uint64(len(sq.kinds)) || nums[2] == 0 ||
		slices.Contains(nums[3:], 0) {
		return badParam("cursor", "is not a cursor of this search; pass pagination.nextCursor unchanged, with the same q and objects")
	}
	sq.after = &searchPos{int64(nums[0]), int64(nums[1]), int64(nums[2])}
	for i, n := range nums[3:] {
		sq.floors[i] = int64(n)
	}
	return nil
}

// cursor returns the cursor of the page after hit p.
func (sq *searchQuery) cursor(key []byte, scope string, p searchPos) string {
	nums := []uint64{uint64(p.class), uint64(p.kind), uint64(p.id)}
	for _, f := range sq.floors {
		nums = append(nums, uint64(f))
	}
	return sealCursor(key, scope, nums, "")
}

// readCustom is the read that marks the kinds of which the company has searched custom fields, whose
// values a search then reads; it leaves the others' out of the statements. Planning them took half of
// a search's time where a company had none: at 1,000,000 contacts, "name 12"'s two statements were
// planned in 3.3 ms with them and 1.5 ms without (the least of ten EXPLAINs), and ran in about 2.4 ms.
func (sq *searchQuery) readCustom(companyID int64) read {
	return eachRow[objectName](`SELECT object FROM custom_fields WHERE company_id = $1
		AND type IN ('text', 'email', 'url') AND deleted_at IS NULL GROUP BY object`, []any{companyID}, func(o *objectName) {
		for i, k := range sq.kinds {
			if k.object == string(*o) {
				withCustom := *k
				withCustom.custom = true
				sq.kinds[i] = &withCustom
			}
		}
	})
}

// objectName is a row of an object's name ("contact").
type objectName string

func (o *objectName) scanDest() []any { return []any{(*string)(o)} }

// customIDs is the SQL of the company's searched custom fields of object: text, e-mail and URL.
func customIDs(object string) string {
	return `ARRAY(SELECT id FROM custom_fields WHERE company_id = $1 AND object = '` + object +
		`' AND type IN ('text', 'email', 'url') AND deleted_at IS NULL)`
}

// match is the SQL condition of k's objects (o) whose document or searched custom values meet class
// c's condition; a kind with an exact index meets the exact class's by it.
func (k *searchKind) match(c int) string {
	cond := searchConds[c]
	own := k.index + " " + cond
	if k.doc != k.index {
		own += " AND " + k.doc + " " + cond
	}
	if c == 0 && k.exact != "" {
		own = k.exact + " @> ARRAY[search_fold($2)]"
	}
	if !k.custom {
		return `(` + own + `)`
	}
	return `(` + own + ` OR o.id = ANY(ARRAY(SELECT v.object_id FROM custom_values v WHERE v.company_id = $1
		AND v.field_id = ANY(` + customIDs(k.object) + `) AND v.text_value IS NOT NULL AND ` + customDoc + ` ` + cond + `)))`
}

// classSQL is the SQL of the class of a document: search_class's number.
func classSQL(doc string) string { return `search_class(` + doc + `, search_fold($2), $3)` }

// part is the SQL of the hits of class c among k's objects (kind i of the search) in from (its
// table, or some of its rows), by id, with the conditions more on o.id (an index range), up to limit.
// An object is of the best class of its fields: it meets c's condition and not that of the class
// before, prev (-1: none). Its row is (class, kind, id).
func (k *searchKind) part(from string, c, prev, i int, more, limit string) string {
	q := `(SELECT ` + strconv.Itoa(c) + `, ` + strconv.Itoa(i) + `, o.id FROM ` + from + ` o
		WHERE o.company_id = $1 AND ` + k.match(c)
	if prev >= 0 {
		q += ` AND NOT ` + k.match(prev)
	}
	return q + more + ` ORDER BY o.id LIMIT ` + limit + `)`
}

// fieldRead is the read of the field of each hit of k, ids of classes, into out: the first field
// of its class, of the object's own in their order, then of its custom fields by id.
func (k *searchKind) fieldRead(sq *searchQuery, companyID int64, ids []int64, classes []int64, out map[int64]*searchFound) read {
	q := `SELECT o.id, CASE x.class`
	for _, f := range k.fields {
		q += ` WHEN ` + classSQL(f.doc) + ` THEN '` + f.name + `'`
	}
	if !k.custom {
		q += ` END`
	} else {
		q += ` ELSE (SELECT 'custom.' || f.key FROM custom_values v JOIN custom_fields f ON f.company_id = v.company_id
		AND f.id = v.field_id WHERE v.company_id = $1 AND v.object_id = o.id AND v.field_id = ANY(` + customIDs(k.object) + `)
		AND ` + classSQL(customDoc) + ` = x.class ORDER BY f.id LIMIT 1) END`
	}
	q += ` FROM unnest($4::bigint[], $5::integer[]) AS x (id, class) JOIN ` + k.res.table + ` o ON o.company_id = $1 AND o.id = x.id`
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

// searchFew is the most candidates of a kind (its objects that contain q) that a page classifies
// all at once, reading the kind's trigram index once and each candidate's row; a kind with more is
// read per class (pageSQL): its exact hits from its exact index, the others by a walk of the ids or
// a read of the index, each stopping at the page's end. The page's largest size: deciding "more"
// then walks the ids as far as the list filtered by q does for its page, and no further (at
// 1,000,000 contacts, "name 12": to its 1,001st candidate took 37 ms, against 2 ms for the 101st).
// Per class, a rare q's candidates were read from the index twice or more (an e-mail: 3.1 times
// the list filtered by q, docs/scaling.md).
const searchFew = maxLimit

// candidatesSQL is the statement of each kind's candidates, up to searchFew+1 of them: (kind, id,
// class), the class NULL (not computed) where there are more than searchFew. In id order, so that
// PostgreSQL reads them as it reads a list page filtered by q: where they are many, by a walk of
// the ids that stops at the searchFew+1st; where they are few, from the index once.
func (sq *searchQuery) candidatesSQL() string {
	few := strconv.Itoa(searchFew)
	parts := make([]string, len(sq.kinds))
	for i, k := range sq.kinds {
		class := `CASE WHEN ` + k.match(0) + ` THEN 0`
		if !sq.email {
			class += ` WHEN ` + k.match(1) + ` THEN 1`
		}
		parts[i] = `(SELECT ` + strconv.Itoa(i) + `, o.id, CASE WHEN count(*) OVER () <= ` + few + ` THEN ` + class + ` ELSE 2 END END
			FROM (SELECT o.id, ` + k.cols + ` FROM ` + k.res.table + ` o WHERE o.company_id = $1 AND ` + k.match(2) +
			` ORDER BY o.id LIMIT ` + few + ` + 1) o)`
	}
	return strings.Join(parts, "\nUNION ALL\n")
}

// fewHits returns the hits after the cursor of the kinds with at most searchFew candidates, in
// order, and which kinds have more (many).
func (sq *searchQuery) fewHits(cands []searchCandidate) (hits []searchPos, many []bool) {
	many = make([]bool, len(sq.kinds))
	for _, c := range cands {
		many[c.kind] = many[c.kind] || !c.class.Valid
	}
	for _, c := range cands {
		h := searchPos{c.class.Int64, c.kind, c.id}
		if !many[c.kind] && (sq.after == nil || comparePos(h, *sq.after) > 0) {
			hits = append(hits, h)
		}
	}
	slices.SortFunc(hits, comparePos)
	return hits, many
}

// classes are the classes a search's hits may be of, in order: an e-mail address is exact or
// contained, never a prefix. The floors bound the last, contains; the pages of the one before it
// move them on (sweep).
func (sq *searchQuery) classes() []int {
	if sq.email {
		return []int{0, 2}
	}
	return []int{0, 1, 2}
}

// place is where part p (its class and kind) is from the cursor's: -1 before it, 0 its own, 1 after it.
func (sq *searchQuery) place(p searchPos) int {
	if a := sq.after; a != nil {
		return cmp.Or(cmp.Compare(p.class, a.class), cmp.Compare(p.kind, a.kind))
	}
	return 1
}

// bounds is the SQL of the index range of part p's ids, its values added to args: after the
// cursor's id in the cursor's part, from the floor in a contains part.
func (sq *searchQuery) bounds(p searchPos, args *[]any) string {
	arg := func(v int64) string {
		*args = append(*args, v)
		return `$` + strconv.Itoa(len(*args))
	}
	more := ""
	if sq.place(p) == 0 {
		more = ` AND o.id > ` + arg(sq.after.id)
	}
	if classes := sq.classes(); p.class == int64(classes[len(classes)-1]) && sq.floors[p.kind] > 1 {
		more += ` AND o.id >= ` + arg(sq.floors[p.kind])
	}
	return more
}

// pageSQL is the statement of the hits of the kinds with many candidates, up to a page and the one
// after it, and its arguments: each (class, kind) part of those kinds from the cursor's on, and
// before stop (nil: to the end), in order. Append runs them in order and stops when the LIMIT is met,
// so a page reads only the parts it shows; search_fold is PARALLEL RESTRICTED, so no parallel plan
// mixes them.
func (sq *searchQuery) pageSQL(companyID int64, many []bool, stop *searchPos) (string, []any) {
	args := []any{companyID, sq.needle}
	limit := strconv.Itoa(sq.limit + 1) // written in, as a list's (listQuery.limitSQL)
	var parts []string
	prev := -1
	for _, c := range sq.classes() {
		for i, k := range sq.kinds {
			p := searchPos{int64(c), int64(i), 0}
			if stop != nil && comparePos(p, *stop) > 0 {
				break
			}
			if many[i] && sq.place(p) >= 0 {
				parts = append(parts, k.part(k.res.table, c, prev, i, sq.bounds(p, &args), limit))
			}
		}
		prev = c
	}
	switch len(parts) {
	case 0:
		return "", nil
	case 1:
		return parts[0], args // (SELECT ... LIMIT n) LIMIT n is refused
	}
	return strings.Join(parts, "\nUNION ALL\n") + "\nLIMIT " + limit, args
}

// sweep returns the read that moves the floor of the cursor's kind on, when the cursor is in the class
// before contains, to its id: the first contains hit from the floor to there, else the id after it.
// Its objects are those the page before this one walked: each page looks at about as many (nil: none).
func (sq *searchQuery) sweep(companyID int64, many []bool) *read {
	classes := sq.classes()
	contains, prev := classes[len(classes)-1], classes[len(classes)-2]
	a := sq.after
	if a == nil || a.class != int64(prev) || !many[a.kind] {
		return nil
	}
	k := sq.kinds[a.kind]
	q := `SELECT coalesce((SELECT id FROM ` + k.part(k.res.table, contains, prev, int(a.kind), ` AND o.id >= $3 AND o.id <= $4`, "1") +
		` AS p (class, kind, id)), greatest($3, $4 + 1))`
	r := eachRow[fieldID](q, []any{companyID, sq.needle, sq.floors[a.kind], a.id}, func(f *fieldID) { sq.floors[a.kind] = int64(*f) })
	return &r
}

// countSQL is the statement of the number of hits: of objects of each kind that contain q.
func (sq *searchQuery) countSQL() string {
	var counts []string
	for _, k := range sq.kinds {
		counts = append(counts, `(SELECT count(*) FROM `+k.res.table+` o WHERE o.company_id = $1 AND `+k.match(2)+`)`)
	}
	return `SELECT ` + strings.Join(counts, " + ")
}

// handleSearch answers GET /v1/search: {"data": [hits], "pagination": {...}}. Two to five round
// trips (sq.run): the searched custom fields (with the quick statement of a first page), the
// candidates, the hits of the kinds with many (if any) and the sweep (if any), then the hits' objects;
// where quick tells the page, the first and the last.
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
			next = sq.cursor(key, scope, hits[sq.limit-1])
		}
		writeJSON(w, r, http.StatusOK, sq.appendPage(hits, found, next))
	})
}

// run reads a page of hits, and the one after it, and moves sq.floors on: by quick where it can
// tell them, else by planned; then the hits' objects and fields, by kind.
func (sq *searchQuery) run(ctx context.Context, st *store, companyID int64) ([]searchPos, []map[int64]*searchFound, error) {
	hits, ok, err := sq.quick(ctx, st, companyID)
	if err == nil && !ok {
		hits, err = sq.planned(ctx, st, companyID)
	}
	if err != nil {
		return nil, nil, err
	}
	found, err := sq.load(ctx, st, companyID, hits)
	return hits, found, err
}

// searchWalk is how many of the first kind's objects quickSQL walks, in id order, for its hits of
// the class after exact. As far as a page of the list filtered by a common q walks: the first page of
// "name 12" at 1,000,000 contacts walks 1,215 of them. A q too rare to fill the page there is read
// by planned, its few objects from the trigram index; the walk it first took cost about 1 ms.
const searchWalk = 2000

// once writes match's forms of the needle so that PostgreSQL computes each once per statement (an
// InitPlan): in a plan kept for every text, $2 is not a constant, and a form left in a condition was
// computed again for each row (search_word's regexp_replace: 8 µs a row).
var once = strings.NewReplacer(
	`search_like(E'\n' || search_fold($2) || E'\n')`, `(SELECT search_like(E'\n' || search_fold($2) || E'\n'))`,
	`search_word(search_fold($2))`, `(SELECT search_word(search_fold($2)))`,
	`search_like(search_fold($2))`, `(SELECT search_like(search_fold($2)))`,
	`ARRAY[search_fold($2)]`, `ARRAY[(SELECT search_fold($2))]`)

// quickSQL is the statement of a first page whose plan PostgreSQL may keep for every text, as its
// work is bounded whatever the text is: each kind's exact hits from its exact index (schema/0021,
// 0024), up to searchFew+1 of the company's. Each look-up is alone in its CTE, the company's rows
// taken from it after: a plan for no company in particular ANDed the look-up with the primary key's
// bitmap of the company (1,000,000 ids, 28 ms where the look-up took 0.02), and where a company is
// a small part of the table it could walk the company's ids instead. Then the hits of the next class,
// of the first kind, among its first searchWalk objects by id, up to a page and one: part's statement
// on those rows, of which those whose document holds q (as every hit's does) are first kept apart
// (OFFSET 0: PostgreSQL would test part's regular expression first, three times as long a walk).
func (sq *searchQuery) quickSQL() string {
	ctes := make([]string, len(sq.kinds))
	parts := make([]string, len(sq.kinds), len(sq.kinds)+1)
	for i, k := range sq.kinds {
		e := "exact" + strconv.Itoa(i)
		ctes[i] = e + ` AS MATERIALIZED (SELECT o.company_id, o.id FROM ` + k.res.table + ` o
			WHERE ` + cmp.Or(k.exact, k.lines) + ` @> ARRAY[search_fold($2)])`
		parts[i] = `(SELECT 0, ` + strconv.Itoa(i) + `, id FROM ` + e + ` WHERE company_id = $1 LIMIT ` + strconv.Itoa(searchFew+1) + `)`
	}
	k := sq.kinds[0]
	cols := `o.company_id, o.id, ` + k.cols
	walk := `(SELECT ` + cols + ` FROM (SELECT ` + cols + ` FROM ` + k.res.table + ` o WHERE o.company_id = $1
		ORDER BY o.id LIMIT ` + strconv.Itoa(searchWalk) + `) o WHERE ` + k.doc + ` ` + searchConds[2] + ` ORDER BY o.id OFFSET 0)`
	parts = append(parts, once.Replace(k.part(walk, sq.classes()[1], 0, 0, "", strconv.Itoa(sq.limit+1))))
	return `WITH ` + strings.Join(ctes, ",\n") + "\n" + strings.Join(parts, "\nUNION ALL\n")
}

// keepPlans is the read that has PostgreSQL run the statements sent after it in its round trip (one
// implicit transaction) on the plans it keeps for every text. Left to choose, it planned quickSQL for
// its text at every run (10,006 plans in 9,997 runs, 1.3 ms each, then 1.5 ms to run, against 0.6 on
// the kept plan: pg_stat_statements, "name 12" at 1,000,000 contacts), as those plans looked cheaper.
var keepPlans = read{keepPlansSQL, nil, func(rs rows) error {
	rs.Close()
	return rs.Err()
}}

// quick reads the company's searched custom fields (readCustom) and, with them in one round trip,
// quickSQL's rows: it returns the hits of a first page, and the one after it, where those are all
// there (ok): every kind has at most searchFew exact hits, and those and the walk's fill the page and
// one. The page is then exact: every exact hit, then the first kind's of the next class from its first
// id on, by planned's conditions; the exact indexes hold the fields (or lines) whose documents hold q
// between newlines. Otherwise ok is false: where quickSQL's rows are too few, where a kind has
// searched custom values (which quickSQL does not read), and, reading no more than the custom fields,
// where the page is not the first or q has no ASCII letter or digit (a q that folds to "" is in every
// document, and no line of an exact index is ""), and on Citus, which cannot plan a statement that
// asks every shard for a plan kept for every text ("could not create distributed plan").
func (sq *searchQuery) quick(ctx context.Context, st *store, companyID int64) (hits []searchPos, ok bool, err error) {
	plain := strings.IndexFunc(sq.needle, func(r rune) bool { return r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)) }) >= 0
	if sq.after != nil || !plain || st.citus.Load() {
		return nil, false, st.read(ctx, sq.readCustom(companyID))
	}
	err = st.read(ctx, keepPlans, sq.readCustom(companyID), rowsInto[searchPos](&hits, sq.quickSQL(), companyID, sq.needle))
	if err != nil || slices.ContainsFunc(sq.kinds, func(k *searchKind) bool { return k.custom }) {
		return nil, false, err
	}
	exact := make([]int, len(sq.kinds))
	for _, h := range hits {
		if h.class == 0 {
			exact[h.kind]++
		}
	}
	if slices.Max(exact) > searchFew || len(hits) <= sq.limit {
		return nil, false, nil
	}
	slices.SortFunc(hits, comparePos)
	return hits[:sq.limit+1], true, nil
}

// planned reads a page of hits, and the one after it, by statements planned for their text, and
// moves sq.floors on: first each kind's candidates, then the hits of the kinds with many.
func (sq *searchQuery) planned(ctx context.Context, st *store, companyID int64) ([]searchPos, error) {
	var cands []searchCandidate
	if err := st.read(ctx, rowsInto[searchCandidate](&cands, sq.candidatesSQL(), companyID, sq.needle).planned()); err != nil {
		return nil, err
	}
	hits, many := sq.fewHits(cands)
	var stop *searchPos
	if len(hits) > sq.limit {
		hits = hits[:sq.limit+1]
		stop = &hits[sq.limit]
	}
	var reads []read
	var manyHits []searchPos
	if q, args := sq.pageSQL(companyID, many, stop); q != "" {
		reads = append(reads, rowsInto[searchPos](&manyHits, q, args...))
	}
	if r := sq.sweep(companyID, many); r != nil {
		reads = append(reads, *r)
	}
	for _, r := range reads { // each planned, so each alone: the sweep's is a page's second
		if err := st.read(ctx, r.planned()); err != nil {
			return nil, err
		}
	}
	if reads != nil {
		hits = append(hits, manyHits...)
		slices.SortFunc(hits, comparePos)
		hits = hits[:min(len(hits), sq.limit+1)]
	}
	return hits, nil
}

// load reads the objects and fields of hits, by kind.
func (sq *searchQuery) load(ctx context.Context, st *store, companyID int64, hits []searchPos) ([]map[int64]*searchFound, error) {
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
		return found, nil
	}
	return found, st.read(ctx, reads...)
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
		if err := st.read(r.Context(), sq.readCustom(t.companyID)); err != nil {
			writeError(w, r, log, err)
			return
		}
		var n int64
		count := eachRow[fieldID](sq.countSQL(), []any{t.companyID, sq.needle}, func(c *fieldID) { n = int64(*c) })
		if err := st.read(r.Context(), count.planned()); err != nil {
			writeError(w, r, log, err)
			return
		}
		writeJSON(w, r, http.StatusOK, appendCount(nil, n))
	})
}
