package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// searchHitJSON is a hit as the API writes it.
type searchHitJSON struct {
	Object string `json:"object"`
	ID     any    `json:"id"`
	Match  string `json:"match"`
	Field  string `json:"field"`
	Data   obj    `json:"data"`
}

// brief is a hit as the tests compare it: "contact 12 exact email".
func (h searchHitJSON) brief() string {
	return fmt.Sprintf("%s %d %s %s", h.Object, h.Data.id(), h.Match, h.Field)
}

// search GETs /v1/search?q=q&more as key and returns its hits, briefly, failing unless 200.
func search(t *testing.T, key, q, more string) []string {
	t.Helper()
	p := listPage[searchHitJSON](t, key, "/v1/search?q="+url.QueryEscape(q)+more)
	out := []string{}
	for _, h := range p.Data {
		if fmt.Sprint(h.ID) != strconv.FormatInt(h.Data.id(), 10) {
			t.Errorf("hit %+v: its id is not its object's", h)
		}
		out = append(out, h.brief())
	}
	return out
}

// wantHits fails the test unless the search of q (and more) finds exactly want, in order.
func wantHits(t *testing.T, key, q, more string, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if diff := cmp.Diff(want, search(t, key, q, more)); diff != "" {
		t.Errorf("search %q%s (-want +got):\n%s", q, more, diff)
	}
}

// hasUnaccent reports whether the database folds accents (schema/0019_search.sql degrades without).
func hasUnaccent(t *testing.T) bool {
	return sqlID(t, `SELECT count(*) FROM pg_extension WHERE extname = 'unaccent'`) == 1
}

// newID creates an object at path and returns its id.
func newID(t *testing.T, key, path, body string) int64 {
	t.Helper()
	o, _ := create(t, key, path, body)
	return o.id()
}

// TestSearchOrdersExactThenPrefixThenContains: hits by class, then kind, then id, each naming the
// field that matched best; contact ids are strings, the others numbers.
func TestSearchOrdersExactThenPrefixThenContains(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	contains := newID(t, c.key, "/v1/contacts", `{"name": "Ann", "surname": "Amargo"}`)
	act := newID(t, c.key, "/v1/activities", `{"type": "call", "subject": "Call Omar"}`)
	exact := newID(t, c.key, "/v1/contacts", `{"name": "Zed", "surname": "MAR"}`)
	deal := newID(t, c.key, "/v1/business", `{"title": "mar"}`)
	org := newID(t, c.key, "/v1/organizations", `{"name": "La Mar Azul"}`)
	prefix := newID(t, c.key, "/v1/contacts", `{"name": "Marta", "email": "marta@example.com"}`)
	newID(t, c.key, "/v1/activities", `{"type": "note", "body": "mar only in the body"}`)
	newID(t, c.key, "/v1/contacts", `{"name": "Nobody"}`)
	wantHits(t, c.key, "mar", "",
		fmt.Sprintf("contact %d exact surname", exact), fmt.Sprintf("business %d exact title", deal),
		fmt.Sprintf("contact %d prefix name", prefix), fmt.Sprintf("organization %d prefix name", org),
		fmt.Sprintf("contact %d contains surname", contains), fmt.Sprintf("activity %d contains subject", act))
	wantHits(t, c.key, "mar", "&objects=activities,organizations,contacts",
		fmt.Sprintf("contact %d exact surname", exact),
		fmt.Sprintf("organization %d prefix name", org), fmt.Sprintf("contact %d prefix name", prefix),
		fmt.Sprintf("activity %d contains subject", act), fmt.Sprintf("contact %d contains surname", contains))

	r := mustGet(t, c.key, "/v1/search?q=zed")
	want := fmt.Sprintf(`{"data":[{"object":"contact","id":"%d","match":"exact","field":"name","data":%s}],`+
		`"pagination":{"limit":25,"hasMore":false,"nextCursor":null}}`, exact,
		strings.TrimSpace(string(mustGet(t, c.key, itemPath("/v1/contacts", exact)).body)))
	if got := strings.TrimSpace(string(r.body)); got != want {
		t.Errorf("GET /v1/search?q=zed =\n%s\nwant\n%s", got, want)
	}
	b := listPage[searchHitJSON](t, c.key, "/v1/search?q=mar&objects=business").Data[0]
	if _, isString := b.ID.(string); isString {
		t.Errorf("business hit id %#v; want a number", b.ID)
	}
	if n := countOf(t, c.key, "/v1/search/count?q=mar"); n != 6 {
		t.Errorf("count = %d; want 6", n)
	}
	if n := countOf(t, c.key, "/v1/search/count?q=mar&objects=contacts"); n != 3 {
		t.Errorf("count of contacts = %d; want 3", n)
	}
}

// TestSearchFoldsCaseAndAccents: jose finds José, GARCÍA finds Garcia.
func TestSearchFoldsCaseAndAccents(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	jose := newID(t, c.key, "/v1/contacts", `{"name": "José", "surname": "Garcia"}`)
	wantHits(t, c.key, "JOSÉ", "", fmt.Sprintf("contact %d exact name", jose))
	wantHits(t, c.key, "garc", "", fmt.Sprintf("contact %d prefix surname", jose))
	if !hasUnaccent(t) {
		t.Log("unaccent is not installed: accents are compared as they are")
		return
	}
	wantHits(t, c.key, "jose", "", fmt.Sprintf("contact %d exact name", jose))
	wantHits(t, c.key, "GARCÍA", "", fmt.Sprintf("contact %d exact surname", jose))
	// The list's q keeps its contract: case-insensitive, accents as they are.
	if n := countOf(t, c.key, "/v1/contacts/count?q=jos%C3%A9"); n != 1 {
		t.Errorf("contacts count q=josé: %d; want 1", n)
	}
	if n := countOf(t, c.key, "/v1/contacts/count?q=jose"); n != 0 {
		t.Errorf("contacts count q=jose: %d; want 0", n)
	}
}

// TestSearchComparesPhoneNumbersByDigits: +34 600-12-34-56 is found by 600123456 and by the
// number written otherwise.
func TestSearchComparesPhoneNumbersByDigits(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	id := newID(t, c.key, "/v1/contacts", `{"name": "Pia", "phone": "+34 600-12-34-56", "mobilePhone": "(91) 555 0100"}`)
	wantHits(t, c.key, "600123456", "", fmt.Sprintf("contact %d contains phone", id))
	wantHits(t, c.key, "+34 600 12 34 56", "", fmt.Sprintf("contact %d exact phone", id))
	wantHits(t, c.key, "91-555", "", fmt.Sprintf("contact %d prefix mobilePhone", id))
	wantHits(t, c.key, "600-12-34", "", fmt.Sprintf("contact %d contains phone", id))
}

// TestSearchFindsAnEmailExactly: self@example.com is that address, never a longer one, which only
// a contains match shows after it.
func TestSearchFindsAnEmailExactly(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	longer := newID(t, c.key, "/v1/contacts", `{"name": "My", "email": "myself@example.com"}`)
	dotted := newID(t, c.key, "/v1/contacts", `{"name": "Dot", "secondaryEmail": "x.self@example.com"}`)
	self := newID(t, c.key, "/v1/contacts", `{"name": "Self", "secondaryEmail": "SELF@example.com"}`)
	suffixed := newID(t, c.key, "/v1/contacts", `{"name": "Au", "email": "self@example.com.au"}`)
	wantHits(t, c.key, "self@example.com", "", fmt.Sprintf("contact %d exact secondaryEmail", self),
		fmt.Sprintf("contact %d contains email", longer), fmt.Sprintf("contact %d contains secondaryEmail", dotted),
		fmt.Sprintf("contact %d contains email", suffixed))
	wantHits(t, c.key, "self", "", fmt.Sprintf("contact %d exact name", self), fmt.Sprintf("contact %d prefix secondaryEmail", dotted),
		fmt.Sprintf("contact %d prefix email", suffixed), fmt.Sprintf("contact %d contains email", longer))
}

// TestSearchFindsCustomTextEmailAndURLValues: the custom fields of those types are searched, of
// every kind; a select's value is not, nor a deleted field's. An object found by its fields and its
// custom values is one hit, of the best class of them.
func TestSearchFindsCustomTextEmailAndURLValues(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for _, f := range []string{`{"object": "contact", "key": "nick", "label": "N", "type": "text"}`,
		`{"object": "contact", "key": "backup", "label": "B", "type": "email"}`,
		`{"object": "organization", "key": "site", "label": "S", "type": "url"}`,
		`{"object": "activity", "key": "note", "label": "N", "type": "text"}`,
		`{"object": "contact", "key": "tier", "label": "T", "type": "select", "options": [{"value": "zorro", "label": "Z"}]}`,
		`{"object": "business", "key": "old", "label": "O", "type": "text"}`} {
		create(t, c.key, "/v1/customFields", f)
	}
	nick := newID(t, c.key, "/v1/contacts", `{"name": "A", "custom": {"nick": "Zorro"}}`)
	backup := newID(t, c.key, "/v1/contacts", `{"name": "B", "custom": {"backup": "zorro@example.com", "tier": "zorro"}}`)
	both := newID(t, c.key, "/v1/contacts", `{"name": "Zorrito", "custom": {"nick": "el zorro"}}`)
	twice := newID(t, c.key, "/v1/contacts", `{"name": "Zorrogrande", "custom": {"nick": "zorro"}}`) // one hit, of its best class
	site := newID(t, c.key, "/v1/organizations", `{"name": "Fox", "custom": {"site": "https://zorro.example/"}}`)
	act := newID(t, c.key, "/v1/activities", `{"type": "call", "subject": "x", "custom": {"note": "Mr Zorros"}}`)
	newID(t, c.key, "/v1/contacts", `{"name": "C", "custom": {"tier": "zorro"}}`)
	deal := newID(t, c.key, "/v1/business", `{"title": "D", "custom": {"old": "zorro"}}`)
	wantHits(t, c.key, "zorro", "&objects=contacts,organizations,activities,business",
		fmt.Sprintf("contact %d exact custom.nick", nick), fmt.Sprintf("contact %d exact custom.nick", twice),
		fmt.Sprintf("business %d exact custom.old", deal),
		fmt.Sprintf("contact %d prefix custom.backup", backup), fmt.Sprintf("contact %d prefix custom.nick", both),
		fmt.Sprintf("organization %d prefix custom.site", site), fmt.Sprintf("activity %d prefix custom.note", act))
	wantHits(t, c.key, "zorrit", "", fmt.Sprintf("contact %d prefix name", both))
	if n := countOf(t, c.key, "/v1/search/count?q=zorro"); n != 7 {
		t.Errorf("count of zorro = %d; want 7", n)
	}

	fields := listPage[obj](t, c.key, "/v1/customFields?object=business").Data
	wantStatus(t, call(t, "DELETE", itemPath("/v1/customFields", fields[0].id()), c.key, ""), http.StatusNoContent)
	wantHits(t, c.key, "zorro", "&objects=business")
}

// TestSearchObjectsAndScopes: objects= narrows and orders the kinds; by default a key searches
// the kinds it reads; naming one it does not read is 403, as is a key that reads none.
func TestSearchObjectsAndScopes(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	contact := newID(t, c.key, "/v1/contacts", `{"name": "Quill"}`)
	deal := newID(t, c.key, "/v1/business", `{"title": "Quill"}`)
	wantHits(t, c.key, "quill", "&objects=business", fmt.Sprintf("business %d exact title", deal))
	wantHits(t, c.key, "quill", "&objects=business,contacts", fmt.Sprintf("business %d exact title", deal), fmt.Sprintf("contact %d exact name", contact))
	reader := *makeKey(t, c.key, "contacts:read").Key
	wantHits(t, reader, "quill", "", fmt.Sprintf("contact %d exact name", contact))
	if n := countOf(t, reader, "/v1/search/count?q=quill"); n != 1 {
		t.Errorf("count with a contacts key = %d; want 1", n)
	}
	wantProblem(t, call(t, "GET", "/v1/search?q=quill&objects=contacts,business", reader, ""), http.StatusForbidden, "insufficient_scope")
	wantProblem(t, call(t, "GET", "/v1/search/count?q=quill&objects=business", reader, ""), http.StatusForbidden, "insufficient_scope")
	writer := *makeKey(t, c.key, "business:write").Key
	wantHits(t, writer, "quill", "", fmt.Sprintf("business %d exact title", deal))
	none := *makeKey(t, c.key, "events:read").Key
	wantProblem(t, call(t, "GET", "/v1/search?q=quill", none, ""), http.StatusForbidden, "insufficient_scope")
}

// TestSearchRefusesBadParameters: 400 naming the parameter.
func TestSearchRefusesBadParameters(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for _, tc := range []struct{ query, param string }{
		{"", "q"}, {"q=a", "q"}, {"q=" + strings.Repeat("é", 201), "q"}, {"q=a%00b", "q"}, {"q=%ff%fe", "q"},
		{"q=ab&limit=0", "limit"}, {"q=ab&limit=101", "limit"}, {"q=ab&limit=x", "limit"},
		{"q=ab&cursor=abc", "cursor"}, {"q=ab&objects=users", "objects"}, {"q=ab&objects=contacts,contacts", "objects"},
		{"q=ab&objects=", "objects"}, {"q=ab&sort=id", ""}, {"q=ab&q=cd", ""},
	} {
		for _, path := range []string{"/v1/search?", "/v1/search/count?"} {
			r := call(t, "GET", path+tc.query, c.key, "")
			if strings.HasPrefix(path, "/v1/search/count") && (tc.param == "limit" || tc.param == "cursor") {
				continue // not parameters of a count: any value is 400 as unknown
			}
			p := wantProblem(t, r, http.StatusBadRequest, "invalid_parameter")
			if tc.param != "" && (len(p.Errors) != 1 || p.Errors[0].Field != tc.param) {
				t.Errorf("GET %s%s: errors %+v; want one on %s", path, tc.query, p.Errors, tc.param)
			}
		}
	}
	wantStatus(t, call(t, "GET", "/v1/search?q="+strings.Repeat("é", 200), c.key, ""), http.StatusOK)
	// A cursor of another search (another q) is refused.
	for i := 0; i < 3; i++ {
		newID(t, c.key, "/v1/organizations", `{"name": "Cursor test"}`)
	}
	p := listPage[searchHitJSON](t, c.key, "/v1/search?q=cursor&limit=1")
	wantProblem(t, call(t, "GET", "/v1/search?q=cursors&limit=1&cursor="+url.QueryEscape(*p.Pagination.NextCursor), c.key, ""),
		http.StatusBadRequest, "invalid_parameter")
}

// TestSearchWalksEveryHitOnce: following the cursors returns each hit exactly once, across classes
// and kinds, in order, also while objects are made between pages; the count is theirs.
func TestSearchWalksEveryHitOnce(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	var orgs, contacts, deals []string
	for i := 0; i < 9; i++ {
		contacts = append(contacts, fmt.Sprintf("contact %d prefix name", newID(t, c.key, "/v1/contacts", fmt.Sprintf(`{"name": "Walker %d"}`, i))))
		deals = append(deals, fmt.Sprintf("business %d contains title", newID(t, c.key, "/v1/business", fmt.Sprintf(`{"title": "Sidewalker %d"}`, i))))
		if i%3 == 0 {
			orgs = append(orgs, fmt.Sprintf("organization %d exact name", newID(t, c.key, "/v1/organizations", `{"name": "walker"}`)))
		}
	}
	want := slices.Concat(orgs, contacts, deals)
	made := map[string]bool{} // hits made during the walks: each found at most once
	for _, limit := range []int{1, 4, 25} {
		hits := walkList[searchHitJSON](t, c.key, "/v1/search", "q=walker", limit, func(page int, _ []searchHitJSON) {
			if page%4 == 1 { // a new hit of the first class: before where the walk is
				made[fmt.Sprintf("organization %d exact name", newID(t, c.key, "/v1/organizations", `{"name": "Walker"}`))] = true
			}
		})
		got := []string{}
		seen := map[string]bool{}
		for _, h := range hits {
			if seen[h.brief()] {
				t.Errorf("walk by %d: %s twice", limit, h.brief())
			}
			seen[h.brief()] = true
			if !made[h.brief()] {
				got = append(got, h.brief())
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("walk by %d (-want +got):\n%s", limit, diff)
		}
	}
	if n := countOf(t, c.key, "/v1/search/count?q=walker"); n != int64(len(want)+len(made)) {
		t.Errorf("count = %d; want %d", n, len(want)+len(made))
	}
	// One kind, whose hits are all in the last class: a page after the first has one part to read.
	got := []string{}
	for _, h := range walkList[searchHitJSON](t, c.key, "/v1/search", "q=walker&objects=business", 2) {
		got = append(got, h.brief())
	}
	if diff := cmp.Diff(deals, got); diff != "" {
		t.Errorf("walk of business records (-want +got):\n%s", diff)
	}
}

// TestSearchIsFreshAndOfOneCompany: a write is found by the next search; another company's objects
// never are.
func TestSearchIsFreshAndOfOneCompany(t *testing.T) {
	t.Parallel()
	c, other := newTestCompany(t), newTestCompany(t)
	newID(t, other.key, "/v1/contacts", `{"name": "Freshman"}`)
	wantHits(t, c.key, "freshman", "")
	id := newID(t, c.key, "/v1/contacts", `{"name": "Freshman"}`)
	wantHits(t, c.key, "freshman", "", fmt.Sprintf("contact %d exact name", id))
	wantStatus(t, call(t, "PATCH", itemPath("/v1/contacts", id), c.key, `{"name": "Sophomore"}`), http.StatusOK)
	wantHits(t, c.key, "freshman", "")
	wantHits(t, c.key, "sophomore", "", fmt.Sprintf("contact %d exact name", id))
	wantStatus(t, call(t, "DELETE", itemPath("/v1/contacts", id), c.key, ""), http.StatusNoContent)
	wantHits(t, c.key, "sophomore", "")
	if n := countOf(t, other.key, "/v1/search/count?q=freshman"); n != 1 {
		t.Errorf("the other company's count = %d; want 1", n)
	}
}

// TestSearchConditionsUseTheSearchIndexes: each class's condition on each kind's document, as
// search.go writes them, is served by the kind's trigram index (where pg_trgm is installed, as where
// the tests run): the Go text and the index expression of schema/0019_search.sql are the same. The
// condition alone, as the planner may prefer the company's index on tables this small.
func TestSearchConditionsUseTheSearchIndexes(t *testing.T) {
	t.Parallel()
	// Business and custom values: the planner prices their btree indexes of the column lower at this
	// size; their documents are of one column, as an organization's is.
	docs := map[string]string{}
	for _, k := range searchKinds {
		if k != searchKinds[1] {
			docs[k.res.table] = k.index
		}
	}
	for table, doc := range docs {
		for c, cond := range searchConds {
			q := `SELECT count(*) FROM ` + table + ` WHERE $1::bigint > 0 AND ` + doc + ` ` + cond
			plan := explainSQL(t, testEnv.st.db, `SET LOCAL enable_seqscan = off`, q, []any{1, "zyx wv"})
			if !strings.Contains(plan, table+"_search") {
				t.Errorf("%s, %s: not served by %s_search:\n%s", table, searchClasses[c], table, plan)
			}
		}
	}
	q := `SELECT count(*) FROM contacts o WHERE $1::bigint > 0 AND ` + contactsExact + ` @> ARRAY[search_fold($2)]`
	if plan := explainSQL(t, testEnv.st.db, `SET LOCAL enable_seqscan = off`, q, []any{1, "zyx wv"}); !strings.Contains(plan, "contacts_search_exact") {
		t.Errorf("contacts, exact: not served by contacts_search_exact:\n%s", plan)
	}
	for _, k := range searchKinds[2:] { // business: as above
		q := `SELECT count(*) FROM ` + k.res.table + ` o WHERE $1::bigint > 0 AND ` + k.lines + ` @> ARRAY[search_fold($2)]`
		if plan := explainSQL(t, testEnv.st.db, `SET LOCAL enable_seqscan = off`, q, []any{1, "zyx wv"}); !strings.Contains(plan, k.res.table+"_search_exact") {
			t.Errorf("%s, exact: not served by %s_search_exact:\n%s", k.res.table, k.res.table, plan)
		}
	}
}

// TestSearchWalksAKindOfManyCandidates: a kind with more than searchFew objects that contain q is
// read per class, merged with the others (classified at once); its contains hits before and after
// its prefix hits are each found once, where the floors let its walk start. An e-mail address's
// contains hits come after its exact ones, whose pages move the floors on.
func TestSearchWalksAKindOfManyCandidates(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	var exact, prefix, contains, exactEmail, containsEmail []string
	for b := 0; b*maxBatchItems < searchFew+100; b++ {
		items := make([]string, maxBatchItems)
		for j := range items {
			i := b*maxBatchItems + j
			switch {
			case i%300 == 5:
				items[j] = `{"name": "Zig", "email": "zig@x.io"}`
			case i == 3 || i%250 == 7 || i == searchFew+99:
				items[j] = fmt.Sprintf(`{"name": "Azig", "email": "n%dzig@x.io"}`, i)
			case i%100 == 50:
				items[j] = fmt.Sprintf(`{"name": "Ziggy", "email": "n%dzig@x.io", "secondaryEmail": "zig@x.io"}`, i)
			default:
				items[j] = fmt.Sprintf(`{"name": "Ziggy", "email": "n%dzig@x.io"}`, i)
			}
		}
		body := `{"items": [` + strings.Join(items, ", ") + `]}`
		for _, d := range wantBatch(t, c.key, "/v1/contacts/batch/create", body, http.StatusOK, slices.Repeat([]string{"created"}, maxBatchItems)...).Data {
			hit := fmt.Sprintf("contact %d ", d.Object.id())
			switch {
			case d.Object["name"] == "Zig":
				exact, exactEmail = append(exact, hit+"exact name"), append(exactEmail, hit+"exact email")
				continue
			case d.Object["name"] == "Ziggy":
				prefix = append(prefix, hit+"prefix name")
			default:
				contains = append(contains, hit+"contains name")
			}
			if d.Object["secondaryEmail"] != nil {
				exactEmail = append(exactEmail, hit+"exact secondaryEmail")
			} else {
				containsEmail = append(containsEmail, hit+"contains email")
			}
		}
	}
	slices.SortFunc(exactEmail, func(a, b string) int { return int(hitID(a) - hitID(b)) })
	deal := fmt.Sprintf("business %d exact title", newID(t, c.key, "/v1/business", `{"title": "zig"}`))
	for _, tc := range []struct {
		q      string
		limits []int
		want   []string
	}{
		{"zig", []int{100, 9}, slices.Concat(exact, []string{deal}, prefix, contains)},
		{"zig@x.io", []int{10}, slices.Concat(exactEmail, containsEmail)},
	} {
		for _, limit := range tc.limits {
			got := []string{}
			for _, h := range walkList[searchHitJSON](t, c.key, "/v1/search", "q="+url.QueryEscape(tc.q), limit) {
				got = append(got, h.brief())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("walk of %s by %d (-want +got):\n%s", tc.q, limit, diff)
			}
		}
		if n := countOf(t, c.key, "/v1/search/count?q="+url.QueryEscape(tc.q)); n != int64(len(tc.want)) {
			t.Errorf("count of %s = %d; want %d", tc.q, n, len(tc.want))
		}
	}
}

// hitID is the id in a brief hit: 12 of "contact 12 exact email".
func hitID(brief string) int64 {
	id, _ := strconv.ParseInt(strings.Fields(brief)[1], 10, 64)
	return id
}

// TestSearchQuickPageIsThePlannedOne: a first page is read by quick where q is common enough for its
// walk, and its hits are those that planned reads; where q is too rare, or the page is not the first,
// quick cannot tell them and planned reads them. The pages the API answers are the expected ones.
func TestSearchQuickPageIsThePlannedOne(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	var exact, prefix, contains []string
	items := make([]string, maxBatchItems)
	for i := range items {
		switch {
		case i%40 == 9:
			items[i] = `{"name": "Quail"}`
		case i%7 == 3:
			items[i] = fmt.Sprintf(`{"name": "Aquail %d"}`, i)
		default:
			items[i] = fmt.Sprintf(`{"name": "Quail %d", "email": "q%d@rare-bird.io"}`, i, i)
		}
	}
	for _, d := range wantBatch(t, c.key, "/v1/contacts/batch/create", `{"items": [`+strings.Join(items, ", ")+`]}`,
		http.StatusOK, slices.Repeat([]string{"created"}, maxBatchItems)...).Data {
		hit := fmt.Sprintf("contact %d ", d.Object.id())
		switch name := d.Object["name"].(string); {
		case name == "Quail":
			exact = append(exact, hit+"exact name")
		case strings.HasPrefix(name, "Aquail"):
			contains = append(contains, hit+"contains name")
		default:
			prefix = append(prefix, hit+"prefix name")
		}
	}
	deal := fmt.Sprintf("business %d exact title", newID(t, c.key, "/v1/business", `{"title": "quail"}`))
	all := slices.Concat(exact, []string{deal}, prefix, contains)
	wantHits(t, c.key, "quail", "&limit=20", all[:20]...)
	wantHits(t, c.key, "quail", "&limit=100", all[:100]...)
	wantHits(t, c.key, "quail", "&objects=business,contacts&limit=30", slices.Concat([]string{deal}, exact, prefix)[:30]...)
	ctx := context.Background()
	for _, tc := range []struct {
		q, objects string
		limit      int
		quick      bool // quick tells the page
	}{
		{"quail", "contacts,business,organizations,activities", 20, true},
		{"quail", "contacts,business", 50, true},
		{"quail", "contacts,business", 100, false}, // fewer hits than a page and one
		{"QUAIL 1", "contacts", 5, true},
		{"rare-bird.io", "contacts,business", 10, true},      // an e-mail: contains hits after the exact
		{"quail", "business,contacts", 30, false},            // the first kind's walk is too short
		{"q7@rare-bird.io", "contacts", 25, false},           // one hit
		{"zzz", "contacts,business,organizations", 5, false}, // none
	} {
		sq := func() *searchQuery {
			kinds, aerr := searchObjects([]string{"*"}, []string{tc.objects})
			if aerr != nil {
				t.Fatal(aerr)
			}
			return &searchQuery{needle: tc.q, email: strings.Contains(tc.q, "@"), kinds: kinds, limit: tc.limit, floors: make([]int64, len(kinds))}
		}
		quick, ok, err := sq().quick(ctx, testEnv.st, c.id)
		if want := tc.quick && !testEnv.citus; err != nil || ok != want { // on Citus, planned reads every page
			t.Errorf("%s of %s by %d: quick ok %v, %v; want %v", tc.q, tc.objects, tc.limit, ok, err, want)
		}
		planned, err := sq().planned(ctx, testEnv.st, c.id)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(planned, quick, cmp.AllowUnexported(searchPos{})); ok && diff != "" {
			t.Errorf("%s of %s by %d: quick's hits are not planned's (-planned +quick):\n%s", tc.q, tc.objects, tc.limit, diff)
		}
	}
	if !testEnv.citus { // where quickSQL runs, on its kept plan: the needle is folded once (once), not for each row walked
		kinds, _ := searchObjects([]string{"*"}, []string{"contacts,business"})
		plan := genericPlan(t, (&searchQuery{kinds: kinds, limit: 20}).quickSQL(), fmt.Sprintf("%d, 'quail'", c.id))
		for line := range strings.Lines(plan) { // the walk's filter on each row: the needle once folded is an InitPlan's $n
			if strings.Contains(line, "search_doc") && strings.Contains(line, "regdictionary, $2)") {
				t.Errorf("quickSQL's kept plan folds the needle ($2) for each row it walks: %s\n%s", line, plan)
			}
		}
	}
}

// genericPlan returns the EXPLAIN of q on the plan PostgreSQL keeps for any arguments, run with
// args (SQL literals), in one transaction (through PgBouncer, one server connection).
func genericPlan(t *testing.T, q, args string) string {
	t.Helper()
	ctx := context.Background()
	tx, err := testEnv.st.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SET LOCAL plan_cache_mode = force_generic_plan; PREPARE generic_plan AS `+q); err != nil {
		t.Fatal(err)
	}
	defer tx.ExecContext(ctx, `DEALLOCATE generic_plan`) // a prepared statement outlives its transaction
	rows, err := tx.QueryContext(ctx, `EXPLAIN EXECUTE generic_plan(`+args+`)`)
	if err != nil {
		t.Fatal(err)
	}
	return planText(t, rows)
}
