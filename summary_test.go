package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Tests of summary.go: counts and metrics by group, through the real HTTP stack and PostgreSQL.

// summaryBody GETs a summary path as key, stops the test unless the answer is 200, and returns its body.
func summaryBody(t *testing.T, key, path string) string {
	t.Helper()
	return string(mustGet(t, key, path).body)
}

// sqlText runs q, a SELECT of one text value, and returns it ("NULL" for a NULL).
func sqlText(t *testing.T, q string, args ...any) string {
	t.Helper()
	var s *string
	if err := testEnv.st.db.QueryRowContext(context.Background(), q, args...).Scan(&s); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if s == nil {
		return "NULL"
	}
	return *s
}

// The pipeline board: by stage, money by currency too, sums exactly PostgreSQL's SUM over numeric,
// averages rounded half to even, groups in order and nulls last.
func TestSummaryOfBusinessByStage(t *testing.T) {
	t.Parallel()
	c, other := newTestCompany(t), newTestCompany(t)
	board, first := bizDefaultBoard(t, c.id)
	second := sqlID(t, `INSERT INTO stages (company_id, board_id, name, position) VALUES ($1, $2, 'Later', 99) RETURNING id`, c.id, board)
	for _, body := range []string{
		`{"title": "a", "value": 0.1}`, `{"title": "b", "value": 0.2}`, `{"title": "c", "value": 0.25}`,
		`{"title": "d", "value": 1234567890123.45, "currencyId": 840}`, `{"title": "e", "currencyId": 840}`,
		fmt.Sprintf(`{"title": "f", "value": 0.27, "stageId": %d}`, second),
		fmt.Sprintf(`{"title": "g", "value": 0, "stageId": %d}`, second),
	} {
		create(t, c.key, "/v1/business", body)
	}
	create(t, other.key, "/v1/business", `{"title": "not ours", "value": 1000}`)

	got := summaryBody(t, c.key, "/v1/business/summary?groupBy=stageId&metrics=count,sum:value,avg:value,min:value,max:value")
	want := fmt.Sprintf(`{"data":[`+
		`{"group":{"stageId":%[1]d,"currencyId":840},"count":2,"sum":{"value":1234567890123.45},"avg":{"value":1234567890123.45},"min":{"value":1234567890123.45},"max":{"value":1234567890123.45}},`+
		`{"group":{"stageId":%[1]d,"currencyId":978},"count":3,"sum":{"value":0.55},"avg":{"value":0.18},"min":{"value":0.1},"max":{"value":0.25}},`+
		`{"group":{"stageId":%[2]d,"currencyId":978},"count":2,"sum":{"value":0.27},"avg":{"value":0.14},"min":{"value":0},"max":{"value":0.27}}`+
		`],"pagination":{"limit":100,"hasMore":false,"nextCursor":null}}`+"\n", first, second)
	if got != want {
		t.Errorf("summary by stage =\n%s\nwant\n%s", got, want)
	}
	// The sums are the database's own, to the last digit.
	for _, cur := range []int64{840, 978} {
		sum := sqlText(t, `SELECT sum(value)::text FROM business WHERE company_id = $1 AND stage_id = $2 AND currency_id = $3`, c.id, first, cur)
		if !strings.Contains(got, `"sum":{"value":`+sum+`}`) {
			t.Errorf("PostgreSQL's SUM of stage %d in %d is %s; not in %s", first, cur, sum, got)
		}
	}
	// Where PostgreSQL's round takes a tie away from zero, the averages above went to the even digit.
	if round := sqlText(t, `SELECT round(0.125, 2)::text`); round != "0.13" {
		t.Errorf("PostgreSQL's round(0.125, 2) = %s", round)
	}

	// Without groupBy, and without money metrics: one group of every record of the company.
	if got := summaryBody(t, c.key, "/v1/business/summary"); got != `{"data":[{"group":{},"count":7}],"pagination":{"limit":100,"hasMore":false,"nextCursor":null}}`+"\n" {
		t.Errorf("summary = %s", got)
	}
	empty := newTestCompany(t)
	if got := summaryBody(t, empty.key, "/v1/business/summary?metrics=sum:value"); got != `{"data":[],"pagination":{"limit":100,"hasMore":false,"nextCursor":null}}`+"\n" {
		t.Errorf("summary of no records by currency = %s", got)
	}
	if got := summaryBody(t, empty.key, "/v1/business/summary?groupBy=private"); got != `{"data":[],"pagination":{"limit":100,"hasMore":false,"nextCursor":null}}`+"\n" {
		t.Errorf("summary of no records by private = %s", got)
	}
}

// 0.1 + 0.2 is 0.3, and 10,000 amounts add up to PostgreSQL's SUM; averages round half to even,
// negative ones too.
func TestSummarySumsExactlyAndAveragesHalfToEven(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	defineField(t, c.key, `{"object": "contact", "key": "score", "label": "Score", "type": "number"}`)
	defineField(t, c.key, `{"object": "contact", "key": "tier", "label": "Tier", "type": "select", "options": [{"value": "a"}, {"value": "b"}, {"value": "c"}, {"value": "d"}, {"value": "e"}]}`)
	for _, v := range []string{`"a", "score": 0.1`, `"a", "score": 0.2`, `"b", "score": 0.25`, `"b", "score": 0`,
		`"c", "score": 0.27`, `"c", "score": 0`, `"d", "score": -0.25`, `"d", "score": 0`, `"e", "score": 1e-20`, `"e", "score": 0.00000000000000000001`} {
		create(t, c.key, "/v1/contacts", `{"name": "x", "custom": {"tier": `+v+`}}`)
	}
	got := summaryBody(t, c.key, "/v1/contacts/summary?groupBy=custom.tier&metrics=sum:custom.score,avg:custom.score")
	want := `{"data":[` +
		`{"group":{"custom.tier":"a"},"count":2,"sum":{"custom.score":0.3},"avg":{"custom.score":0.15}},` +
		`{"group":{"custom.tier":"b"},"count":2,"sum":{"custom.score":0.25},"avg":{"custom.score":0.12}},` +
		`{"group":{"custom.tier":"c"},"count":2,"sum":{"custom.score":0.27},"avg":{"custom.score":0.14}},` +
		`{"group":{"custom.tier":"d"},"count":2,"sum":{"custom.score":-0.25},"avg":{"custom.score":-0.12}},` +
		`{"group":{"custom.tier":"e"},"count":2,"sum":{"custom.score":0.00000000000000000002},"avg":{"custom.score":0.00}}` +
		`],"pagination":{"limit":100,"hasMore":false,"nextCursor":null}}` + "\n"
	if got != want {
		t.Errorf("summary =\n%s\nwant\n%s", got, want)
	}

	// Many amounts that binary floating point would not add up exactly.
	for batch := range 10 {
		var items []string
		for i := batch * 100; i < batch*100+100; i++ {
			items = append(items, fmt.Sprintf(`{"title": "d%d", "value": %d.%02d}`, i, i*7919%100000, i*37%100))
		}
		wantStatus(t, call(t, "POST", "/v1/business/batch/create", c.key, `{"items": [`+strings.Join(items, ",")+`]}`), http.StatusOK)
	}
	sum := sqlText(t, `SELECT sum(value)::text FROM business WHERE company_id = $1`, c.id)
	avg := sqlText(t, `SELECT (sum(value) / count(value))::text FROM business WHERE company_id = $1`, c.id)
	got = summaryBody(t, c.key, "/v1/business/summary?metrics=sum:value,avg:value")
	want = `{"data":[{"group":{"currencyId":978},"count":1000,"sum":{"value":` + sum + `},"avg":{"value":`
	if !strings.HasPrefix(got, want) {
		t.Errorf("summary of 1000 amounts = %s; want the sum %s (average %s)", got, sum, avg)
	}
}

// Each kind of group key: a reference, a boolean, a fixed value (activity type), a time by bucket
// (weeks start on Monday, in UTC), a select, boolean and user custom field; nulls come last.
func TestSummaryGroupsByEachKindOfField(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	owner := sqlID(t, `INSERT INTO users (company_id, name) VALUES ($1, 'Second user') RETURNING id`, c.id)
	defineField(t, c.key, `{"object": "business", "key": "hot", "label": "Hot", "type": "boolean"}`)
	defineField(t, c.key, `{"object": "business", "key": "rep", "label": "Rep", "type": "user"}`)
	defineField(t, c.key, `{"object": "business", "key": "arr", "label": "ARR", "type": "money"}`)
	for _, body := range []string{
		`{"title": "a", "private": true, "deadline": "2026-11-22T23:30:00-02:00", "custom": {"hot": true, "arr": 10.5}}`, // Monday the 23rd in UTC
		`{"title": "b", "deadline": "2026-11-22T23:30:00Z", "custom": {"hot": false, "rep": ` + fmt.Sprint(owner) + `}}`, // Sunday
		`{"title": "c", "deadline": "2026-11-29T00:00:00Z", "custom": {"rep": ` + fmt.Sprint(c.userID) + `, "arr": 1}}`,
		`{"title": "d", "currencyId": 840, "custom": {"arr": 2}}`,
	} {
		create(t, c.key, "/v1/business", body)
	}
	const page = `],"pagination":{"limit":100,"hasMore":false,"nextCursor":null}}` + "\n"
	for _, tc := range []struct{ query, want string }{
		{"groupBy=private", `{"group":{"private":false},"count":3},{"group":{"private":true},"count":1}`},
		{"groupBy=deadline:week", `{"group":{"deadline:week":"2026-11-16T00:00:00.000Z"},"count":1},` +
			`{"group":{"deadline:week":"2026-11-23T00:00:00.000Z"},"count":2},{"group":{"deadline:week":null},"count":1}`},
		{"groupBy=deadline:month,private", `{"group":{"deadline:month":"2026-11-01T00:00:00.000Z","private":false},"count":2},` +
			`{"group":{"deadline:month":"2026-11-01T00:00:00.000Z","private":true},"count":1},{"group":{"deadline:month":null,"private":false},"count":1}`},
		{"groupBy=custom.hot", `{"group":{"custom.hot":false},"count":1},{"group":{"custom.hot":true},"count":1},{"group":{"custom.hot":null},"count":2}`},
		{"groupBy=custom.rep", fmt.Sprintf(`{"group":{"custom.rep":%d},"count":1},{"group":{"custom.rep":%d},"count":1},{"group":{"custom.rep":null},"count":2}`,
			min(owner, c.userID), max(owner, c.userID))},
		{"groupBy=custom.hot&metrics=sum:custom.arr,max:custom.arr", `{"group":{"custom.hot":false,"currencyId":978},"count":1,"sum":{"custom.arr":null},"max":{"custom.arr":null}},` +
			`{"group":{"custom.hot":true,"currencyId":978},"count":1,"sum":{"custom.arr":10.5},"max":{"custom.arr":10.5}},` +
			`{"group":{"custom.hot":null,"currencyId":840},"count":1,"sum":{"custom.arr":2},"max":{"custom.arr":2}},` +
			`{"group":{"custom.hot":null,"currencyId":978},"count":1,"sum":{"custom.arr":1},"max":{"custom.arr":1}}`},
		{"groupBy=currencyId,custom.hot&metrics=min:custom.arr", `{"group":{"currencyId":840,"custom.hot":null},"count":1,"min":{"custom.arr":2}},` +
			`{"group":{"currencyId":978,"custom.hot":false},"count":1,"min":{"custom.arr":null}},` +
			`{"group":{"currencyId":978,"custom.hot":true},"count":1,"min":{"custom.arr":10.5}},` +
			`{"group":{"currencyId":978,"custom.hot":null},"count":1,"min":{"custom.arr":1}}`},
	} {
		if got := summaryBody(t, c.key, "/v1/business/summary?"+tc.query); got != `{"data":[`+tc.want+page {
			t.Errorf("summary?%s =\n%s\nwant\n%s", tc.query, got, `{"data":[`+tc.want+page)
		}
	}

	// Activities: by type (alphabetically) and done, and their durations.
	for _, body := range []string{`{"type": "task", "subject": "s", "durationSeconds": 60}`, `{"type": "task", "subject": "s", "doneAt": "2026-01-01T00:00:00Z", "durationSeconds": 30}`,
		`{"type": "call", "subject": "s", "durationSeconds": 45}`, `{"type": "call", "subject": "s"}`} {
		create(t, c.key, "/v1/activities", body)
	}
	got := summaryBody(t, c.key, "/v1/activities/summary?groupBy=type,done&metrics=sum:durationSeconds,avg:durationSeconds")
	want := `{"data":[{"group":{"type":"call","done":false},"count":2,"sum":{"durationSeconds":45},"avg":{"durationSeconds":45.00}},` +
		`{"group":{"type":"task","done":false},"count":1,"sum":{"durationSeconds":60},"avg":{"durationSeconds":60.00}},` +
		`{"group":{"type":"task","done":true},"count":1,"sum":{"durationSeconds":30},"avg":{"durationSeconds":30.00}}` + page
	if got != want {
		t.Errorf("activities summary =\n%s\nwant\n%s", got, want)
	}
	// Organizations: by a select custom field, and by the year they were made.
	defineField(t, c.key, `{"object": "organization", "key": "size", "label": "Size", "type": "select", "options": [{"value": "small"}, {"value": "big"}]}`)
	create(t, c.key, "/v1/organizations", `{"name": "A", "custom": {"size": "small"}}`)
	create(t, c.key, "/v1/organizations", `{"name": "B", "custom": {"size": "big"}}`)
	year := sqlText(t, `SELECT to_char(date_trunc('year', now(), 'UTC') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`)
	got = summaryBody(t, c.key, "/v1/organizations/summary?groupBy=createdAt:year,custom.size")
	want = `{"data":[{"group":{"createdAt:year":"` + year + `","custom.size":"big"},"count":1},{"group":{"createdAt:year":"` + year + `","custom.size":"small"},"count":1}` + page
	if got != want {
		t.Errorf("organizations summary =\n%s\nwant\n%s", got, want)
	}
}

// Walking the groups with cursors returns each group once, in order, as one page has them; a
// cursor is good only for the same summary.
func TestSummaryPagesThroughGroups(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for day := 1; day <= 7; day++ {
		for range day % 3 {
			create(t, c.key, "/v1/activities", fmt.Sprintf(`{"type": "task", "subject": "s", "dueAt": "2026-03-%02dT12:00:00Z"}`, day))
		}
	}
	create(t, c.key, "/v1/activities", `{"type": "call", "subject": "no due date"}`)
	create(t, c.key, "/v1/activities", `{"type": "task", "subject": "no due date"}`)
	const query = "groupBy=dueAt:day,type"
	all := readPage[obj](t, call(t, "GET", "/v1/activities/summary?"+query, c.key, "")).Data
	if len(all) != 7 {
		t.Fatalf("%d groups: %v", len(all), all)
	}
	for _, limit := range []int{1, 2, 6} {
		walked := walkList[obj](t, c.key, "/v1/activities/summary", query, limit)
		if diff := cmp.Diff(all, walked); diff != "" {
			t.Errorf("walked with limit %d (-one page +walked):\n%s", limit, diff)
		}
	}
	p := readPage[obj](t, call(t, "GET", "/v1/activities/summary?limit=2&"+query, c.key, ""))
	cursor := url.QueryEscape(*p.Pagination.NextCursor)
	for _, path := range []string{
		"/v1/activities/summary?limit=2&groupBy=dueAt:week,type&cursor=" + cursor,
		"/v1/activities/summary?limit=2&type=task&" + query + "&cursor=" + cursor,
		"/v1/activities/summary?limit=2&" + query + "&cursor=" + cursor + "x",
		"/v1/activities?limit=2&cursor=" + cursor,
	} {
		wantProblem(t, call(t, "GET", path, c.key, ""), http.StatusBadRequest, "invalid_parameter")
	}
	other := newTestCompany(t)
	wantProblem(t, call(t, "GET", "/v1/activities/summary?limit=2&"+query+"&cursor="+cursor, other.key, ""), http.StatusBadRequest, "invalid_parameter")
}

// Every list filter applies: built-in, custom and associated ones.
func TestSummaryTakesTheListFilters(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	defineField(t, c.key, `{"object": "business", "key": "tier", "label": "Tier", "type": "select", "options": [{"value": "gold"}, {"value": "silver"}]}`)
	defineField(t, c.key, `{"object": "business", "key": "arr", "label": "ARR", "type": "number"}`)
	ana := mustCreate(t, c.key, "/v1/contacts", `{"name": "Ana"}`)
	var deals []int64
	for i, body := range []string{`"gold", "arr": 100`, `"gold", "arr": 200`, `"silver", "arr": 300`, `"silver", "arr": 400`} {
		deals = append(deals, mustCreate(t, c.key, "/v1/business", fmt.Sprintf(`{"title": "d%d", "private": %t, "custom": {"tier": %s}}`, i, i%2 == 0, body)))
	}
	for _, d := range deals[1:3] {
		wantStatus(t, call(t, "PUT", assocPath("business", d, "contacts", ana), c.key, ""), http.StatusCreated)
	}
	const page = `],"pagination":{"limit":100,"hasMore":false,"nextCursor":null}}` + "\n"
	for _, tc := range []struct{ query, want string }{
		{"custom.tier=gold&metrics=sum:custom.arr", `{"group":{},"count":2,"sum":{"custom.arr":300}}`},
		{"custom.arr[gte]=200&groupBy=custom.tier&metrics=sum:custom.arr", `{"group":{"custom.tier":"gold"},"count":1,"sum":{"custom.arr":200}},{"group":{"custom.tier":"silver"},"count":2,"sum":{"custom.arr":700}}`},
		{fmt.Sprintf("associated.contacts=%d&groupBy=custom.tier", ana), `{"group":{"custom.tier":"gold"},"count":1},{"group":{"custom.tier":"silver"},"count":1}`},
		{fmt.Sprintf("associated.contacts=%d&private=true&q=d2&groupBy=private", ana), `{"group":{"private":true},"count":1}`},
	} {
		if got := summaryBody(t, c.key, "/v1/business/summary?"+tc.query); got != `{"data":[`+tc.want+page {
			t.Errorf("summary?%s =\n%s\nwant\n%s", tc.query, got, `{"data":[`+tc.want+page)
		}
	}
}

// A bad groupBy, metrics, limit or filter is 400 naming the parameter; another company's custom
// field is no field at all.
func TestSummaryRefusesBadParameters(t *testing.T) {
	t.Parallel()
	c, other := newTestCompany(t), newTestCompany(t)
	defineField(t, c.key, `{"object": "business", "key": "note", "label": "Note", "type": "text"}`)
	defineField(t, c.key, `{"object": "business", "key": "tier", "label": "Tier", "type": "select", "options": [{"value": "gold"}]}`)
	defineField(t, other.key, `{"object": "business", "key": "arr", "label": "ARR", "type": "number"}`)
	defineField(t, other.key, `{"object": "business", "key": "kind", "label": "Kind", "type": "select", "options": [{"value": "x"}]}`)
	defineField(t, c.key, `{"object": "contact", "key": "score", "label": "Score", "type": "number"}`)
	for _, tc := range []struct{ query, param string }{
		{"groupBy=title", "groupBy"},
		{"groupBy=stageId,boardId,statusId", "groupBy"},
		{"groupBy=stageId,stageId", "groupBy"},
		{"groupBy=createdAt:hour", "groupBy"},
		{"groupBy=createdAt", "groupBy"},
		{"groupBy=stageId:month", "groupBy"},
		{"groupBy=", "groupBy"},
		{"groupBy=custom.nope", "groupBy"},
		{"groupBy=custom.note", "groupBy"},
		{"groupBy=custom.kind", "groupBy"},
		{"groupBy=custom.score", "groupBy"},
		{"metrics=sum:title", "metrics"},
		{"metrics=median:value", "metrics"},
		{"metrics=sum", "metrics"},
		{"metrics=sum:value,sum:value", "metrics"},
		{"metrics=sum:custom.tier", "metrics"},
		{"metrics=sum:custom.arr", "metrics"},
		{"metrics=avg:custom.score", "metrics"},
		{"limit=0", "limit"},
		{"limit=1001", "limit"},
		{"limit=01", "limit"},
		{"stageId=abc", "stageId"},
		{"custom.kind=x", "custom.kind"},
		{"cursor=abc", "cursor"},
		{"groupBy=stageId&cursor=", "cursor"},
	} {
		p := wantProblem(t, call(t, "GET", "/v1/business/summary?"+tc.query, c.key, ""), http.StatusBadRequest, "invalid_parameter")
		if len(p.Errors) != 1 || p.Errors[0].Field != tc.param || strings.HasSuffix(p.Errors[0].Message, "...") {
			t.Errorf("summary?%s: errors %+v; want one naming %s, its message whole", tc.query, p.Errors, tc.param)
		}
	}
	for _, query := range []string{"sort=id", "groupBy=stageId&groupBy=boardId", "nope=1"} {
		wantProblem(t, call(t, "GET", "/v1/business/summary?"+query, c.key, ""), http.StatusBadRequest, "invalid_parameter")
	}
	wantStatus(t, call(t, "GET", "/v1/business/summary?limit=1000&expand[]=stage", c.key, ""), http.StatusOK)
	readOnly := *makeKey(t, c.key, "contacts:read").Key
	wantProblem(t, call(t, "GET", "/v1/business/summary", readOnly, ""), http.StatusForbidden, "insufficient_scope")
	wantProblem(t, call(t, "GET", "/v1/contacts/summary?associated.business=1", readOnly, ""), http.StatusForbidden, "insufficient_scope")
}
