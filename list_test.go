package main

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Lists (API.md section 6): every sort walked with cursors against the order computed here in Go,
// every filter against a filter computed in Go and against /count, bad cursors and parameters, and
// EXPLAIN checks that the indexes of schema/0003_lists.sql serve them.

// listResource is what the tests know of a resource's lists, from API.md section 6.
type listResource struct {
	path  string
	sorts map[string]string // sort name -> how Go compares it: time, text, number
}

var (
	contactListRes = listResource{path: "/v1/contacts", sorts: map[string]string{
		"id": "id", "createdAt": "time", "updatedAt": "time", "name": "text", "surname": "text"}}
	businessListRes = listResource{path: "/v1/business", sorts: map[string]string{
		"id": "id", "createdAt": "time", "updatedAt": "time", "title": "text", "value": "number",
		"deadline": "time", "position": "number"}}
)

// listFixture is a company with 1,000 contacts and 1,000 business records made to tie, hold NULLs
// and mix case and scripts, and every object of each as the API returns it.
type listFixture struct {
	c                  testCompany
	orgs, users        []int64
	contactStages      []int64
	boards, bizStages  []int64 // bizStages[i] is a stage of boards[i]
	contacts, business []obj
}

var (
	listFixtureOnce sync.Once
	sharedFixture   *listFixture
)

// theListFixture makes the fixture once for all list tests (they only read it).
func theListFixture(t *testing.T) *listFixture {
	t.Helper()
	listFixtureOnce.Do(func() { sharedFixture = makeListFixture(t) })
	if sharedFixture == nil {
		t.Fatal("the list fixture could not be made (see the first test that tried)")
	}
	return sharedFixture
}

func makeListFixture(t *testing.T) *listFixture {
	ctx := context.Background()
	db := testEnv.st.db
	f := &listFixture{c: newTestCompany(t)}
	cid := f.c.id
	f.orgs = sqlIDs(t, `INSERT INTO organizations (company_id, name) SELECT $1, 'Org ' || i FROM generate_series(1, 3) i RETURNING id`, cid)
	f.users = append([]int64{f.c.userID}, sqlIDs(t, `INSERT INTO users (company_id, name) SELECT $1, 'User ' || i FROM generate_series(1, 2) i RETURNING id`, cid)...)
	f.contactStages = sqlIDs(t, `SELECT id FROM stages WHERE company_id = $1 AND board_id IS NULL ORDER BY id`, cid)
	defBoard, defStage := bizDefaultBoard(t, cid)
	second, secondStage := bizSecondBoard(t, cid)
	f.boards, f.bizStages = []int64{defBoard, second}, []int64{defStage, secondStage}

	// Names tie often and differ in case and script; a third of the surnames are NULL and some empty;
	// timestamps tie in groups; ids of references are NULL now and then.
	const contactsSQL = `INSERT INTO contacts (company_id, name, surname, email, phone, with_sales, country_id,
		stage_id, organization_id, assigned_to_id, user_creator_id, created_at, updated_at)
		SELECT $1,
			(ARRAY['Ana', 'bob', 'Émile', 'Zoë', 'ana', 'Bob', '李', 'O''Brien', 'Ana María', '_x%'])[1 + i % 10],
			CASE WHEN i % 3 = 0 THEN NULL WHEN i % 7 = 0 THEN '' ELSE 'Sur' || (i % 13) END,
			CASE WHEN i % 5 = 0 THEN NULL ELSE (ARRAY['Ada', 'ada', 'ADA'])[1 + i % 3] || (i % 20) || '@Example.com' END,
			CASE WHEN i % 4 = 0 THEN NULL ELSE '+34 600 ' || lpad((i % 100)::text, 3, '0') END,
			i % 2 = 0,
			CASE i % 3 WHEN 0 THEN 724 WHEN 1 THEN 250 END,
			CASE WHEN i % 4 < 3 THEN ($2::bigint[])[1 + i % 4] END,
			CASE WHEN i % 4 < 3 THEN ($3::bigint[])[1 + i % 4] END,
			CASE WHEN i % 5 < 3 THEN ($4::bigint[])[1 + i % 5] END,
			($4::bigint[])[1 + i % 2],
			timestamptz '2026-01-01 00:00:00Z' + (i % 50) * interval '1 hour',
			timestamptz '2026-01-01 00:00:00Z' + (i % 50) * interval '1 hour' + (i % 17) * interval '1 minute' + (i % 3) * interval '1 millisecond'
		FROM generate_series(1, 1000) i`
	if _, err := db.ExecContext(ctx, contactsSQL, cid, f.contactStages, f.orgs, f.users); err != nil {
		t.Fatalf("insert contacts: %v", err)
	}
	const businessSQL = `INSERT INTO business (company_id, title, value, deadline, private, position, status_id,
		organization_id, currency_id, user_owner_id, user_creator_id, board_id, stage_id, created_at, updated_at)
		SELECT $1,
			(ARRAY['Pilot', 'pilot', 'Renewal', 'Ärger', 'Zeta deal', '100% off_', 'Pilot'])[1 + i % 7],
			CASE WHEN i % 4 = 0 THEN NULL WHEN i % 10 = 2 THEN 0.1 WHEN i % 10 = 3 THEN 0.10 ELSE (i % 9) * 100.5 END,
			CASE WHEN i % 3 = 0 THEN NULL ELSE timestamptz '2026-06-01 12:00:00Z' + (i % 40) * interval '1 day' END,
			i % 3 = 0,
			i % 10,
			1 + i % 3,
			CASE WHEN i % 4 < 3 THEN ($3::bigint[])[1 + i % 4] END,
			CASE WHEN i % 2 = 0 THEN 978 ELSE 840 END,
			($4::bigint[])[1 + i % 3],
			($4::bigint[])[1 + i % 2],
			($2::bigint[])[1 + (i % 5 = 0)::int],
			($5::bigint[])[1 + (i % 5 = 0)::int],
			timestamptz '2026-02-01 00:00:00Z' + (i % 30) * interval '1 hour',
			timestamptz '2026-02-01 00:00:00Z' + (i % 30) * interval '1 hour' + (i % 11) * interval '1 second'
		FROM generate_series(1, 1000) i`
	if _, err := db.ExecContext(ctx, businessSQL, cid, f.boards, f.orgs, f.users, f.bizStages); err != nil {
		t.Fatalf("insert business: %v", err)
	}
	if _, err := db.ExecContext(ctx, `ANALYZE contacts; ANALYZE business`); err != nil {
		t.Fatal(err)
	}
	f.contacts = walkList[obj](t, f.c.key, "/v1/contacts", "", 100)
	f.business = walkList[obj](t, f.c.key, "/v1/business", "", 100)
	if len(f.contacts) != 1000 || len(f.business) != 1000 {
		t.Fatalf("fixture has %d contacts and %d business records; want 1000 each", len(f.contacts), len(f.business))
	}
	return f
}

// expectOrder sorts objs as API.md section 6 says: by the field, NULLs last both ways, ties by id in
// the same direction.
func expectOrder(t *testing.T, objs []obj, res listResource, sort string) []obj {
	name, desc := strings.CutPrefix(sort, "-")
	kind := res.sorts[name]
	out := slices.Clone(objs)
	slices.SortStableFunc(out, func(a, b obj) int {
		av, bv := a[name], b[name]
		if name != "id" && (av == nil) != (bv == nil) {
			if av == nil {
				return 1 // NULLs last, either way
			}
			return -1
		}
		c := 0
		if name != "id" && av != nil {
			c = compareValues(t, kind, av, bv)
		}
		if c == 0 { // by id, which is unique: never equal here
			c = 1
			if a.id() < b.id() {
				c = -1
			}
		}
		if desc {
			return -c
		}
		return c
	})
	return out
}

// compareValues compares two non-null values of a sort or filter kind: text, time or number.
func compareValues(t *testing.T, kind string, a, b any) int {
	switch kind {
	case "text":
		return strings.Compare(a.(string), b.(string)) // Go compares bytes: code point order
	case "time":
		ta, err1 := time.Parse(time.RFC3339Nano, a.(string))
		tb, err2 := time.Parse(time.RFC3339Nano, b.(string))
		if err1 != nil || err2 != nil {
			t.Fatalf("times %v %v", a, b)
		}
		return ta.Compare(tb)
	default:
		ra, ok1 := new(big.Rat).SetString(a.(json.Number).String())
		rb, ok2 := new(big.Rat).SetString(b.(json.Number).String())
		if !ok1 || !ok2 {
			t.Fatalf("numbers %v %v", a, b)
		}
		return ra.Cmp(rb)
	}
}

// idsOf returns the ids of objs, in order.
func idsOf(objs []obj) []int64 {
	out := make([]int64, len(objs))
	for i, o := range objs {
		out[i] = o.id()
	}
	return out
}

func TestListWalksEverySortInOrder(t *testing.T) {
	t.Parallel()
	f := theListFixture(t)
	for _, tc := range []struct {
		res  listResource
		objs []obj
	}{{contactListRes, f.contacts}, {businessListRes, f.business}} {
		for name := range tc.res.sorts {
			for _, sort := range []string{name, "-" + name} {
				want := idsOf(expectOrder(t, tc.objs, tc.res, sort))
				for _, limit := range []int{1, 7, 100} {
					t.Run(fmt.Sprintf("%s?sort=%s&limit=%d", tc.res.path, sort, limit), func(t *testing.T) {
						t.Parallel()
						got := idsOf(walkList[obj](t, f.c.key, tc.res.path, "sort="+url.QueryEscape(sort), limit))
						if diff := cmp.Diff(want, got); diff != "" {
							t.Errorf("order (-want +got):\n%s", diff)
						}
					})
				}
			}
		}
	}
}

// filterCase is one filter query and the objects it must select.
type filterCase struct {
	query string
	keep  func(o obj) bool
}

func num(v any) int64 {
	n, _ := v.(json.Number) // null: 0
	i, _ := n.Int64()
	return i
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// commonFilterCases are the createdAt/updatedAt ranges, at a timestamp the data has (boundaries
// matter), in RFC 3339 with an offset.
func commonFilterCases(t *testing.T, objs []obj) []filterCase {
	var cases []filterCase
	for _, field := range []string{"createdAt", "updatedAt"} {
		at := str(objs[len(objs)/2][field])
		ts, _ := time.Parse(time.RFC3339Nano, at)
		withOffset := ts.In(time.FixedZone("", 2*3600)).Format(time.RFC3339Nano)
		for _, op := range []struct {
			name string
			keep func(c int) bool
		}{{"gte", func(c int) bool { return c >= 0 }}, {"gt", func(c int) bool { return c > 0 }},
			{"lte", func(c int) bool { return c <= 0 }}, {"lt", func(c int) bool { return c < 0 }}} {
			cases = append(cases, filterCase{
				query: field + "[" + op.name + "]=" + url.QueryEscape(withOffset),
				keep:  func(o obj) bool { return op.keep(compareValues(t, "time", o[field], at)) },
			})
		}
	}
	return cases
}

func containsFold(fields []any, q string) bool {
	for _, f := range fields {
		if s, ok := f.(string); ok && strings.Contains(strings.ToLower(s), strings.ToLower(q)) {
			return true
		}
	}
	return false
}

// idIn keeps the objects whose field is one of ids.
func idIn(field string, ids ...int64) func(obj) bool {
	return func(o obj) bool { return o[field] != nil && slices.Contains(ids, num(o[field])) }
}

// join writes ids as a filter value: 1,2,3.
func join(ids ...int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ",")
}

func contactFilterCases(t *testing.T, f *listFixture) []filterCase {
	q := func(text string) filterCase {
		return filterCase{"q=" + url.QueryEscape(text), func(o obj) bool {
			return containsFold([]any{o["name"], o["surname"], o["email"], o["phone"]}, text)
		}}
	}
	cases := []filterCase{
		{"organizationId=" + join(f.orgs[0]), idIn("organizationId", f.orgs[0])},
		{"organizationId=" + join(f.orgs[1], f.orgs[2]), idIn("organizationId", f.orgs[1], f.orgs[2])},
		{"assignedToId=" + join(f.users[1]), idIn("assignedToId", f.users[1])},
		{"stageId=" + join(f.contactStages...), idIn("stageId", f.contactStages...)},
		{"stageId=" + join(f.contactStages[2]), idIn("stageId", f.contactStages[2])},
		{"countryId=724", idIn("countryId", 724)},
		{"countryId=250,724", idIn("countryId", 250, 724)},
		{"countryId=4", idIn("countryId", 4)},
		{"userCreatorId=" + join(f.users[0]), idIn("userCreatorId", f.users[0])},
		{"withSales=true", func(o obj) bool { return o["withSales"] == true }},
		{"withSales=false", func(o obj) bool { return o["withSales"] == false }},
		{"email=aDa3%40EXAMPLE.com", func(o obj) bool { return strings.EqualFold(str(o["email"]), "ada3@example.com") }},
		{"email=nobody%40example.com", func(o obj) bool { return false }},
		q("ana"), q("ANA MAR"), q("émile"), q("李"), q("600 01"), q("@example.COM"), q("sur1"), q("_x%"), q("%"),
		q("o'brien"), q("' OR 1=1 --"), q(`\`),
		// Several filters are combined with AND.
		{"withSales=true&countryId=250&q=a", func(o obj) bool {
			return o["withSales"] == true && num(o["countryId"]) == 250 && containsFold([]any{o["name"], o["surname"], o["email"], o["phone"]}, "a")
		}},
	}
	return append(cases, commonFilterCases(t, f.contacts)...)
}

func businessFilterCases(t *testing.T, f *listFixture) []filterCase {
	q := func(text string) filterCase {
		return filterCase{"q=" + url.QueryEscape(text), func(o obj) bool { return containsFold([]any{o["title"]}, text) }}
	}
	cases := []filterCase{
		{"organizationId=" + join(f.orgs[0]), idIn("organizationId", f.orgs[0])},
		{"stageId=" + join(f.bizStages[1]), idIn("stageId", f.bizStages[1])},
		{"stageId=" + join(f.bizStages...), idIn("stageId", f.bizStages...)},
		{"boardId=" + join(f.boards[0]), idIn("boardId", f.boards[0])},
		{"statusId=2", idIn("statusId", 2)},
		{"statusId=1,3", idIn("statusId", 1, 3)},
		{"userOwnerId=" + join(f.users[2]), idIn("userOwnerId", f.users[2])},
		{"currencyId=840", idIn("currencyId", 840)},
		{"private=true", func(o obj) bool { return o["private"] == true }},
		{"private=false", func(o obj) bool { return o["private"] == false }},
		q("pilot"), q("ÄRGER"), q("100%"), q("f_"), q("zeta d"),
		{"boardId=" + join(f.boards[0]) + "&statusId=1&private=false&q=p", func(o obj) bool {
			return num(o["boardId"]) == f.boards[0] && num(o["statusId"]) == 1 && o["private"] == false &&
				containsFold([]any{o["title"]}, "p")
		}},
	}
	return append(cases, commonFilterCases(t, f.business)...)
}

func TestListFiltersMatchGoAndCount(t *testing.T) {
	t.Parallel()
	f := theListFixture(t)
	for _, tc := range []struct {
		res   listResource
		objs  []obj
		cases []filterCase
	}{
		{contactListRes, f.contacts, contactFilterCases(t, f)},
		{businessListRes, f.business, businessFilterCases(t, f)},
	} {
		for _, fc := range tc.cases {
			t.Run(tc.res.path+"?"+fc.query, func(t *testing.T) {
				t.Parallel()
				want := idsOf(slices.DeleteFunc(slices.Clone(tc.objs), func(o obj) bool { return !fc.keep(o) }))
				got := idsOf(walkList[obj](t, f.c.key, tc.res.path, fc.query, 100))
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("filtered list (-want +got):\n%s", diff)
				}
				if n := countOf(t, f.c.key, tc.res.path+"/count?"+fc.query); n != int64(len(want)) {
					t.Errorf("count = %d; want %d", n, len(want))
				}
				// The same filter walked in another order and page size selects the same objects.
				other := idsOf(walkList[obj](t, f.c.key, tc.res.path, fc.query+"&sort=-createdAt", 7))
				slices.Sort(other)
				if !slices.Equal(want, other) {
					t.Errorf("with sort=-createdAt&limit=7 the filter selects %d objects; want %d", len(other), len(want))
				}
			})
		}
	}
}

// TestListWalkWithChangesMeanwhile creates, deletes and updates objects between pages: every object
// that existed throughout the walk comes exactly once, in order, whatever the sort.
func TestListWalkWithChangesMeanwhile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		res    listResource
		sorts  []string
		bodies [2]string // formats of n from 1 to 9: with the nullable sort keys set, and null
		patch  string    // the format of a PATCH that changes no sort key
	}{
		{contactListRes, []string{"id", "-id", "name", "-surname", "createdAt", "-updatedAt"},
			[2]string{`{"name":"N%d","surname":"S%[1]d"}`, `{"name":"N%d","surname":null}`}, `{"jobTitle":"page %d"}`},
		{businessListRes, []string{"-id", "title", "-value", "deadline", "position", "updatedAt"}, [2]string{
			`{"title":"T%d","value":%[1]d.5,"position":%[1]d,"deadline":"2026-0%[1]d-01T00:00:00Z"}`,
			`{"title":"T%d","value":null,"position":%[1]d,"deadline":null}`}, `{"reasonLost":"page %d"}`},
	} {
		body := func(i int) string { return fmt.Sprintf(tc.bodies[i%3/2], 1+i%9) } // a third null
		for _, sort := range tc.sorts {
			t.Run(tc.res.path+"?sort="+sort, func(t *testing.T) {
				t.Parallel()
				c := newTestCompany(t)
				for i := range 60 {
					create(t, c.key, tc.res.path, body(i))
				}
				before := walkList[obj](t, c.key, tc.res.path, "", 100)
				deleted, created := map[int64]bool{}, map[int64]bool{}
				got := walkList[obj](t, c.key, tc.res.path, "sort="+url.QueryEscape(sort), 7, func(page int, seen []obj) {
					// Delete one seen and one unseen object, create two more (one sorts first, one last).
					seenIDs := map[int64]bool{}
					for _, o := range seen {
						seenIDs[o.id()] = true
					}
					for _, pick := range []bool{true, false} {
						for _, o := range before {
							if id := o.id(); seenIDs[id] == pick && !deleted[id] {
								wantStatus(t, call(t, "DELETE", itemPath(tc.res.path, id), c.key, ""), http.StatusNoContent)
								deleted[id] = true
								break
							}
						}
					}
					// An update that leaves the sort key alone moves nothing. (One that changes it, as any
					// update does under updatedAt, moves the object: ascending, it comes again at its new
					// place; descending, it may be missed. The OpenAPI document says so.)
					if !strings.HasSuffix(sort, "updatedAt") {
						for _, o := range before {
							if id := o.id(); !deleted[id] {
								wantStatus(t, call(t, "PATCH", itemPath(tc.res.path, id), c.key, fmt.Sprintf(tc.patch, page)), http.StatusOK)
								break
							}
						}
					}
					for _, i := range []int{0, 8} {
						n, _ := create(t, c.key, tc.res.path, body(i))
						created[n.id()] = true
					}
				})
				// Those that existed throughout come once each, in the order of the sort; no object comes twice.
				seen := map[int64]bool{}
				var gotThroughout []int64
				for _, o := range got {
					if id := o.id(); seen[id] {
						t.Errorf("object %d came twice", id)
					} else if seen[id] = true; !created[id] && !deleted[id] {
						gotThroughout = append(gotThroughout, id)
					}
				}
				throughout := slices.DeleteFunc(slices.Clone(before), func(o obj) bool { return deleted[o.id()] })
				if diff := cmp.Diff(idsOf(expectOrder(t, throughout, tc.res, sort)), gotThroughout); diff != "" {
					t.Errorf("order (-want +got):\n%s", diff)
				}
				if len(deleted) == 0 {
					t.Fatal("the walk made no changes: the test tests nothing")
				}
			})
		}
	}
}

// cursorOf returns the nextCursor of the first page of path.
func cursorOf(t *testing.T, key, path string) string {
	t.Helper()
	p := listPage[obj](t, key, path).Pagination
	if p.NextCursor == nil {
		t.Fatalf("GET %s: no next page", path)
	}
	return *p.NextCursor
}

func TestListRejectsCursorsOfOtherListsAndTampered(t *testing.T) {
	t.Parallel()
	f := theListFixture(t)
	other := newTestCompany(t)
	for range 3 {
		create(t, other.key, "/v1/contacts", `{"name":"x"}`)
	}
	byName := cursorOf(t, f.c.key, "/v1/contacts?limit=2&sort=name")
	byID := cursorOf(t, f.c.key, "/v1/contacts?limit=2")
	filtered := cursorOf(t, f.c.key, "/v1/contacts?limit=2&withSales=true")
	biz := cursorOf(t, f.c.key, "/v1/business?limit=2&sort=value")
	otherCompany := cursorOf(t, other.key, "/v1/contacts?limit=1")

	raw, err := base64.RawURLEncoding.DecodeString(byName)
	if err != nil {
		t.Fatal(err)
	}
	tampered := func(i int) string {
		b := slices.Clone(raw)
		b[i] ^= 1
		return base64.RawURLEncoding.EncodeToString(b)
	}
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	text, err := base64.RawURLEncoding.DecodeString(byID)
	if err != nil {
		t.Fatal(err)
	}

	bad := []string{
		// The cursor of another list: another sort, filter, resource or company.
		"/v1/contacts?limit=2&sort=-name&cursor=" + byName, "/v1/contacts?limit=2&sort=surname&cursor=" + byName,
		"/v1/contacts?limit=2&cursor=" + byName, "/v1/contacts?sort=-id&cursor=" + byID, "/v1/contacts?withSales=true&cursor=" + byID,
		"/v1/contacts?withSales=false&cursor=" + filtered, "/v1/contacts?cursor=" + filtered, "/v1/contacts?sort=name&cursor=" + biz,
		"/v1/business?cursor=" + byID, "/v1/countries?cursor=" + byID, "/v1/contacts?limit=1&cursor=" + otherCompany,
		// Tampered: a byte of the key or the signature changed, truncated, padded, bytes added.
		"/v1/contacts?limit=2&sort=name&cursor=" + tampered(0), "/v1/contacts?limit=2&sort=name&cursor=" + tampered(2),
		"/v1/contacts?limit=2&sort=name&cursor=" + tampered(len(raw)-1), "/v1/contacts?limit=2&sort=name&cursor=" + byName[:len(byName)-3],
		"/v1/contacts?limit=2&sort=name&cursor=" + byName + "==", "/v1/contacts?cursor=" + byID + "!", "/v1/contacts?cursor=!" + byID,
		"/v1/contacts?cursor=" + byID + "%3D", "/v1/contacts?cursor=" + b64(string(text)+"x"), "/v1/contacts?cursor=" + b64(" "+string(text)),
		// Not a cursor at all.
		"/v1/contacts?cursor=%25%25%25", "/v1/contacts?cursor=garbage", "/v1/contacts?cursor=", "/v1/business?cursor=",
		"/v1/business?cursor=garbage", "/v1/contacts?cursor=" + url.QueryEscape("1 OR 1=1; DROP TABLE contacts --"),
	}
	for _, forged := range []string{"id:5", "id:abc", "id:-1", "id:0", "id:01", "x:5", "id:99999999999999999999", "id:9999999999"} {
		for _, res := range apiResources {
			bad = append(bad, res.path+"?cursor="+b64(forged)) // unsigned
		}
	}
	refused := func(t *testing.T, key, path string) {
		p := wantProblem(t, call(t, "GET", path, key, ""), http.StatusBadRequest, "invalid_parameter")
		if !strings.Contains(p.Detail, "cursor") || len(p.Errors) != 1 || p.Errors[0].Field != "cursor" {
			t.Errorf("GET %s: problem %+v; want it to name cursor", path, p)
		}
	}
	for _, path := range bad {
		refused(t, f.c.key, path)
	}
	refused(t, other.key, "/v1/contacts?limit=2&cursor="+byID) // this company's cursor, used by another
	// The cursors themselves are good where they belong, and a limit may change between pages.
	for _, path := range []string{
		"/v1/contacts?limit=5&sort=name&cursor=" + byName,
		"/v1/contacts?cursor=" + byID,
		"/v1/contacts?limit=100&cursor=" + byID,
		"/v1/contacts?withSales=true&expand[]=stage&cursor=" + filtered,
		"/v1/business?sort=value&cursor=" + biz,
	} {
		listPage[obj](t, f.c.key, path)
	}
}

func TestListBadParametersAre400NamingThem(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	// By the parameter the answer must name: the requests that get it wrong.
	bad := map[string][]string{
		"stageid":   {"/v1/contacts?stageid=1"},
		"title":     {"/v1/contacts?title=x"},
		"withSales": {"/v1/business?withSales=true", "/v1/contacts?withSales=yes", "/v1/contacts?withSales=1", "/v1/contacts?withSales=TRUE"},
		"sort": {"/v1/contacts?sort=title", "/v1/contacts?sort=--name", "/v1/contacts?sort=+name", "/v1/contacts?sort=",
			"/v1/contacts?sort=name,id", "/v1/contacts?sort=name%3BDROP+TABLE+contacts", "/v1/business?sort=name",
			"/v1/contacts?sort=name&sort=id", "/v1/users?sort=name"},
		"stageId": {"/v1/contacts?stageId=0", "/v1/contacts?stageId=-1", "/v1/contacts?stageId=abc", "/v1/contacts?stageId=1,,2",
			"/v1/contacts?stageId=1,", "/v1/contacts?stageId=", "/v1/contacts?stageId=9223372036854775808", "/v1/business/count?stageId=x"},
		"organizationId": {"/v1/contacts?organizationId=" + strings.Repeat("1,", 100) + "1"},
		"countryId":      {"/v1/contacts?countryId=1%20OR%201=1"},
		"private":        {"/v1/business?private="},
		"email": {"/v1/contacts?email=", "/v1/contacts?email=a%00b", "/v1/contacts/count?email=%0A",
			"/v1/contacts?email=" + strings.Repeat("a", 256)},
		"createdAt[gte]": {"/v1/contacts?createdAt[gte]=yesterday", "/v1/contacts?createdAt[gte]=2026-01-01"},
		"updatedAt[lt]":  {"/v1/business?updatedAt[lt]=2026-01-01T00:00:00"},
		"createdAt[eq]":  {"/v1/contacts?createdAt[eq]=2026-01-01T00:00:00Z"},
		"createdAt":      {"/v1/contacts?createdAt=2026-01-01T00:00:00Z"},
		"createdAt[]":    {"/v1/contacts?createdAt[]=2026-01-01T00:00:00Z"},
		"q": {"/v1/contacts?q=", "/v1/contacts?q=" + strings.Repeat("x", 101), "/v1/contacts?q=a%00b", "/v1/contacts?q=a%0Ab",
			"/v1/contacts?q=%FF", "/v1/business?q=" + strings.Repeat("x", 10_000), "/v1/countries?q=spain"},
		"boardId": {"/v1/stages?boardId=x"},
	} // bad limits, and parameters a count does not take, are TestUnknownAndRepeatedQueryParametersAre400's
	for param, paths := range bad {
		for _, path := range paths {
			t.Run(path[:min(len(path), 80)], func(t *testing.T) {
				t.Parallel()
				p := wantProblem(t, call(t, "GET", path, c.key, ""), http.StatusBadRequest, "invalid_parameter")
				if !strings.Contains(p.Detail, param) {
					t.Errorf("detail %q does not name %s", p.Detail, param)
				}
			})
		}
	}
}

func TestListFilterValuesAtTheEdges(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	create(t, c.key, "/v1/contacts", `{"name":"x","email":"Edge@Example.com"}`)
	for path, want := range map[string]int64{
		"/v1/contacts/count?stageId=9223372036854775807":                      0,
		"/v1/contacts/count?countryId=9223372036854775807":                    0, // beyond integer: matches nothing, no error
		"/v1/contacts/count?organizationId=" + strings.Repeat("1,", 99) + "1": 0,
		"/v1/contacts/count?email=EDGE%40example.COM":                         1,
		"/v1/contacts/count?createdAt[gte]=0001-01-01T00:00:00Z":              1,
		"/v1/contacts/count?createdAt[gt]=9999-12-31T23:59:59.999Z":           0,
		"/v1/contacts/count?updatedAt[lte]=2000-01-01T00:00:00%2B14:00":       0,
		"/v1/contacts/count?q=" + strings.Repeat("é", 100):                    0,
		"/v1/contacts/count?expand[]=stage&withSales=false":                   1,
	} {
		if n := countOf(t, c.key, path); n != want {
			t.Errorf("GET %s = %d; want %d", path, n, want)
		}
	}
}

// listPlan is the plan PostgreSQL makes for one statement a list or count sends.
type listPlan struct {
	table, what string // "contacts", "sort=-name after a cursor"
	sorted      bool   // a sort without filters: its index must give the order (no Sort node)
	sql, plan   string
}

// explainSQL returns PostgreSQL's plan of q, after settings in the same read-only transaction.
func explainSQL(t *testing.T, db *sql.DB, settings, q string, args []any) string {
	t.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil) // rolled back: nothing an EXPLAIN of a write plans stays
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if settings != "" {
		// On Citus (make test-citus) the settings must reach the workers, which plan the shards'
		// scans; elsewhere citus.propagate_set_commands is a placeholder that does nothing.
		if _, err := tx.ExecContext(ctx, `SET LOCAL citus.propagate_set_commands = 'local'; `+settings); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := tx.QueryContext(ctx, "EXPLAIN "+q, args...)
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", q, err)
	}
	return planText(t, rows)
}

// planText returns the lines of an EXPLAIN's rows, and closes them.
func planText(t *testing.T, rows *sql.Rows) string {
	t.Helper()
	defer rows.Close()
	var plan strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan.String()
}

// explainLists EXPLAINs, for one company, the statements of every sort (ascending and descending,
// first page and after a cursor, after a NULL key too), of each id and e-mail filter, and of the
// counts. settings runs first in the same read-only transaction (e.g. SET LOCAL enable_seqscan).
func explainLists(t *testing.T, db *sql.DB, companyID int64, settings string) []listPlan {
	t.Helper()
	explain := func(q string, args []any) string { return explainSQL(t, db, settings, q, args) }
	var plans []listPlan
	for _, tc := range []struct {
		table string
		spec  *listSpec
	}{{"contacts", contactLists}, {"business", businessLists}} {
		selectSQL := `SELECT * FROM ` + tc.table + ` WHERE company_id = $1` // every column, as a page reads them
		q := selectSQL + ` AND id = $2`                                     // a retrieve: a primary-key probe
		plans = append(plans, listPlan{tc.table, "retrieve", false, q, explain(q, []any{companyID, 500})})
		countSQL := `SELECT count(*) FROM ` + tc.table + ` WHERE company_id = $1`
		for _, s := range append([]sortField{byID}, tc.spec.sorts...) {
			for _, sort := range []string{s.name, "-" + s.name} {
				for _, after := range []*cursorPos{nil, {id: 500, key: sampleKey(s)}, {id: 500, null: true}} {
					if after != nil && after.null && !s.nullable {
						continue
					}
					lq, aerr := tc.spec.parse(url.Values{"sort": {sort}})
					if aerr != nil {
						t.Fatal(aerr)
					}
					lq.after = after
					what := "sort=" + sort
					if after != nil {
						what += fmt.Sprintf(" after a cursor (null key: %v)", after.null)
					}
					q, args := lq.selectSQL(selectSQL, companyID)
					plans = append(plans, listPlan{tc.table, what, true, q, explain(q, args)})
				}
			}
		}
		for _, fl := range tc.spec.filters {
			if fl.kind == filterBool {
				continue // two values: an index would not be chosen, and is not needed
			}
			v := "1,2"
			if fl.kind == filterEmail {
				v = "a@example.com"
			}
			lq, aerr := tc.spec.parse(url.Values{fl.name: {v}})
			if aerr != nil {
				t.Fatal(aerr)
			}
			q, args := lq.selectSQL(selectSQL, companyID)
			plans = append(plans, listPlan{tc.table, fl.name + "=" + v, false, q, explain(q, args)})
			q, args = lq.countSQL(countSQL, companyID)
			plans = append(plans, listPlan{tc.table, "count " + fl.name + "=" + v, false, q, explain(q, args)})
		}
		lq, _ := tc.spec.parse(url.Values{"updatedAt[gte]": {"2026-05-01T00:00:00Z"}, "sort": {"updatedAt"}})
		q, args := lq.selectSQL(selectSQL, companyID)
		plans = append(plans, listPlan{tc.table, "updatedAt[gte] with sort=updatedAt", true, q, explain(q, args)})
		q, args = (&listQuery{sort: &byID}).countSQL(countSQL, companyID)
		plans = append(plans, listPlan{tc.table, "count", false, q, explain(q, args)})
	}
	return plans
}

// problems returns what is wrong with the plan: a sequential scan, or for a sort a Sort node (the
// order does not come from an index), or a cursor position that is not an index condition.
func (p listPlan) problems() []string {
	var out []string
	for _, m := range seqScan.FindAllStringSubmatch(p.plan, -1) { // a Citus shard is table_102008
		if !slices.Contains(tinyTables, m[1]) {
			out = append(out, "sequential scan on "+m[1])
		}
	}
	if p.sorted && strings.Contains(p.plan, "Sort") {
		out = append(out, "sorts instead of reading an index in order")
	}
	if p.sorted && strings.Contains(p.what, "after") && !strings.Contains(p.what, "sort=id") &&
		!strings.Contains(p.what, "sort=-id") && !strings.Contains(p.plan, "AND (ROW(") {
		out = append(out, "the cursor's position is not an index condition")
	}
	return out
}

var seqScan = regexp.MustCompile(`Seq Scan on ([a-z_]+?)(?:_[0-9]+)?\b`)

// tinyTables hold a few rows a company (its contact and deal stages) or in all (the code lists): a
// sequential scan of their one page is what the planner rightly picks for them, at any size of the
// company's contacts.
var tinyTables = []string{"stages", "boards", "countries", "currencies", "statuses"}

// TestListPlansUseIndexes EXPLAINs the statements the lists send, with sequential scans and sorts
// priced out (enable_seqscan, enable_sort off: the planner then takes an index whenever one can
// serve): no list reads contacts or business by a sequential scan, and every sort, ascending and
// descending, first page and cursor page, comes out of an index in order.
func TestListPlansUseIndexes(t *testing.T) {
	t.Parallel()
	f := theListFixture(t)
	plans := explainLists(t, testEnv.st.db, f.c.id, `SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off`)
	if len(plans) < 40 {
		t.Fatalf("only %d plans", len(plans))
	}
	for _, p := range plans {
		if probs := p.problems(); len(probs) > 0 || !strings.Contains(p.plan, "Index") {
			t.Errorf("%s %s: %v\n%s\nplan:\n%s", p.table, p.what, probs, p.sql, p.plan)
		}
	}
	// A contacts q can go through the trigram index where pg_trgm is installed (it is where the tests
	// run): the q condition alone (without the company's, which the planner may well prefer on small
	// tables) matches it. For business, whose q is a document of the title, the planner prices a full
	// btree scan lower at this size: that its index exists is TestSchemaQIndexesTakeWritesDirectly's.
	lq, _ := contactLists.parse(url.Values{"q": {"xyzzy"}})
	q, args := lq.countSQL(`SELECT count(*) FROM contacts WHERE $1::bigint > 0`, f.c.id)
	if plan := explainSQL(t, testEnv.st.db, `SET LOCAL enable_seqscan = off`, q, args); !strings.Contains(plan, "contacts_search") {
		t.Errorf("contacts: q is not served by contacts_search:\n%s", plan)
	}
}

// sampleKey is a cursor key of the sort's kind.
func sampleKey(s sortField) string {
	switch {
	case s.name == "id":
		return ""
	case s.kind == keyTime:
		return timeKey(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	case s.kind == keyText:
		return "M"
	}
	return "5"
}

// FuzzListQuery: whatever the query string, parsing a list or count request never panics, fails only
// with a 400 naming a parameter of the list, and builds SQL whose placeholders are exactly its
// arguments (client text reaches PostgreSQL only as arguments).
func FuzzListQuery(f *testing.F) {
	for _, s := range []string{"", "limit=7&sort=-surname", "stageId=1,2,3&q=ana", "createdAt[gte]=2026-01-01T00:00:00Z",
		"sort=value&private=true&q=%25_", "email=A%40b.c&withSales=false", "limit=0", "sort=;DROP", "q=%00", "stageId=1,,"} {
		f.Add(s)
	}
	placeholder := regexp.MustCompile(`\$([0-9]+)`)
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		for _, spec := range []*listSpec{contactLists, businessLists} {
			for _, list := range []bool{true, false} {
				allowed := spec.params(list)
				known := true
				for name, vs := range q {
					known = known && slices.Contains(allowed, name) && len(vs) == 1
				}
				if !known {
					continue // queryParams answers these before parse sees them
				}
				lq, aerr := spec.parse(q)
				if aerr != nil {
					if aerr.Status != http.StatusBadRequest || len(aerr.Errors) != 1 || !slices.Contains(allowed, aerr.Errors[0].Field) {
						t.Fatalf("parse(%q) = %+v", raw, aerr)
					}
					continue
				}
				sqlText, args := lq.selectSQL("SELECT id FROM t WHERE company_id = $1", 1)
				seen := map[string]bool{}
				for _, m := range placeholder.FindAllStringSubmatch(sqlText, -1) {
					seen[m[1]] = true
				}
				if len(seen) != len(args) {
					t.Fatalf("parse(%q): %d placeholders for %d arguments: %s", raw, len(seen), len(args), sqlText)
				}
			}
		}
	})
}

// FuzzCursor: a cursor this server made reads back as the same position; any other text is a 400
// naming cursor, never a panic and never a position.
func FuzzCursor(f *testing.F) {
	f.Add(int64(1), "2026", false, uint8(0), "")
	f.Add(int64(1<<62), "", true, uint8(3), "AAAA")
	f.Add(int64(42), "Zoë", false, uint8(2), "id:5")
	key := []byte("0123456789abcdef0123456789abcdef")
	f.Fuzz(func(t *testing.T, id int64, sortKey string, null bool, which uint8, garbage string) {
		sorts := append([]sortField{byID}, businessLists.sorts...)
		lq := &listQuery{sort: &sorts[int(which)%len(sorts)], binding: "sort=x\n"}
		want := &cursorPos{id: id, null: null, key: sortKey}
		if aerr := lq.readCursor(garbage, key, "scope"); aerr != nil {
			if aerr.Status != http.StatusBadRequest || aerr.Errors[0].Field != "cursor" {
				t.Fatalf("readCursor(%q) = %+v", garbage, aerr)
			}
		} else if lq.after == nil {
			t.Fatalf("readCursor(%q) accepted without a position", garbage)
		}
		lq.after = nil
		aerr := lq.readCursor(lq.cursor(key, "scope", id, sortKey, null), key, "scope")
		valid := id > 0 && lq.sort.validKey(want)
		switch {
		case valid && aerr != nil:
			t.Fatalf("cursor of %+v does not read back: %v", want, aerr)
		case valid && *lq.after != *want:
			t.Fatalf("cursor of %+v reads back as %+v", want, lq.after)
		case !valid && aerr == nil:
			t.Fatalf("cursor of invalid %+v was accepted", want)
		}
		if aerr := lq.readCursor(lq.cursor(key, "scope", id, sortKey, null), key, "other scope"); aerr == nil {
			t.Fatal("a cursor of another scope was accepted")
		}
	})
}
