package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// bizRecord is a business as the API returns it. Decoding fails when "id" or a reference is not a
// JSON number; value keeps the bytes of the number exactly as the server wrote them.
type bizRecord struct {
	ID             int64           `json:"id"`
	Title          string          `json:"title"`
	Value          json.RawMessage `json:"value"`
	Deadline       *string         `json:"deadline"`
	Private        bool            `json:"private"`
	Position       int64           `json:"position"`
	DateWon        *string         `json:"dateWon"`
	ReasonLost     *string         `json:"reasonLost"`
	StatusID       int64           `json:"statusId"`
	OrganizationID *int64          `json:"organizationId"`
	CurrencyID     int64           `json:"currencyId"`
	UserOwnerID    int64           `json:"userOwnerId"`
	UserCreatorID  int64           `json:"userCreatorId"`
	BoardID        int64           `json:"boardId"`
	StageID        int64           `json:"stageId"`
	CreatedAt      string          `json:"createdAt"`
	UpdatedAt      string          `json:"updatedAt"`
}

// bizList is the answer of GET /v1/business.
type bizList struct {
	Data       []bizRecord `json:"data"`
	Pagination struct {
		Limit      int     `json:"limit"`
		HasMore    bool    `json:"hasMore"`
		NextCursor *string `json:"nextCursor"`
	} `json:"pagination"`
}

// bizNoSuchID is an id no object has: identities count from 1 and tests make a few thousand rows.
const bizNoSuchID = 1 << 60

// bizTimeRE is how the API renders every timestamp.
var bizTimeRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

// bizValueRE finds the raw text of "value" in a business body.
var bizValueRE = regexp.MustCompile(`"value":([^,]*)`)

// bizDecode decodes a business body strictly: unknown members are an error.
func bizDecode(t *testing.T, body []byte) bizRecord {
	t.Helper()
	var b bizRecord
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		t.Fatalf("business body %s: %v", body, err)
	}
	return b
}

func bizPath(id int64) string { return "/v1/business/" + strconv.FormatInt(id, 10) }

// bizCreate posts body and fails the test unless the business is created.
func bizCreate(t *testing.T, key, body string) (bizRecord, response) {
	t.Helper()
	r := call(t, "POST", "/v1/business", key, body)
	if r.status != http.StatusCreated {
		t.Fatalf("POST /v1/business %s = %d; want 201 (body %s)", body, r.status, r.body)
	}
	return bizDecode(t, r.body), r
}

// bizGet retrieves a business and fails the test unless it is there.
func bizGet(t *testing.T, key string, id int64) (bizRecord, response) {
	t.Helper()
	r := call(t, "GET", bizPath(id), key, "")
	if r.status != http.StatusOK {
		t.Fatalf("GET %s = %d; want 200 (body %s)", bizPath(id), r.status, r.body)
	}
	return bizDecode(t, r.body), r
}

// bizPatch patches a business and fails the test unless it answers 200.
func bizPatch(t *testing.T, key string, id int64, body string, hdr ...string) (bizRecord, response) {
	t.Helper()
	r := call(t, "PATCH", bizPath(id), key, body, hdr...)
	if r.status != http.StatusOK {
		t.Fatalf("PATCH %s %s = %d; want 200 (body %s)", bizPath(id), body, r.status, r.body)
	}
	return bizDecode(t, r.body), r
}

// bizCount returns GET /v1/business/count for key.
func bizCount(t *testing.T, key string) int64 {
	t.Helper()
	r := call(t, "GET", "/v1/business/count", key, "")
	var got struct {
		Count *int64 `json:"count"`
	}
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if r.status != http.StatusOK || dec.Decode(&got) != nil || got.Count == nil {
		t.Fatalf("GET /v1/business/count = %d %s; want 200 {\"count\": n}", r.status, r.body)
	}
	return *got.Count
}

// bizValue returns the raw text of "value" in a business body.
func bizValue(t *testing.T, body []byte) string {
	t.Helper()
	m := bizValueRE.FindSubmatch(body)
	if m == nil {
		t.Fatalf("no value in %s", body)
	}
	return string(m[1])
}

// bizWantFields fails the test unless r is a 422 validation_failed naming exactly fields.
func bizWantFields(t *testing.T, r response, fields ...string) problemBody {
	t.Helper()
	p := wantProblem(t, r, http.StatusUnprocessableEntity, "validation_failed")
	var got []string
	for _, e := range p.Errors {
		got = append(got, e.Field)
		if e.Message == "" {
			t.Errorf("error for field %q has no message", e.Field)
		}
	}
	want := slices.Clone(fields)
	slices.Sort(want)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fields in error (-want +got):\n%s\nbody %s", diff, r.body)
	}
	return p
}

// bizInsert runs an INSERT ... RETURNING id.
func bizInsert(t *testing.T, q string, args ...any) int64 {
	t.Helper()
	var id int64
	if err := testEnv.st.db.QueryRowContext(context.Background(), q, args...).Scan(&id); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return id
}

// bizDefaultBoard returns the company's default board and that board's first stage.
func bizDefaultBoard(t *testing.T, companyID int64) (board, stage int64) {
	t.Helper()
	db := testEnv.st.db
	if err := db.QueryRow(`SELECT id FROM boards WHERE company_id = $1 AND is_default`, companyID).Scan(&board); err != nil {
		t.Fatalf("default board: %v", err)
	}
	err := db.QueryRow(`SELECT id FROM stages WHERE company_id = $1 AND board_id = $2 ORDER BY position, id LIMIT 1`,
		companyID, board).Scan(&stage)
	if err != nil {
		t.Fatalf("first stage: %v", err)
	}
	return board, stage
}

// bizSecondBoard creates a second board of the company with one stage, S1.
func bizSecondBoard(t *testing.T, companyID int64) (board, stage int64) {
	t.Helper()
	board = bizInsert(t, `INSERT INTO boards (company_id, name) VALUES ($1, 'Second') RETURNING id`, companyID)
	stage = bizInsert(t, `INSERT INTO stages (company_id, board_id, name, position) VALUES ($1, $2, 'S1', 1) RETURNING id`,
		companyID, board)
	return board, stage
}

// bizContactStage returns one of the company's contact stages (a stage of no board).
func bizContactStage(t *testing.T, companyID int64) int64 {
	t.Helper()
	var id int64
	err := testEnv.st.db.QueryRow(`SELECT id FROM stages WHERE company_id = $1 AND board_id IS NULL ORDER BY position, id LIMIT 1`,
		companyID).Scan(&id)
	if err != nil {
		t.Fatalf("contact stage: %v", err)
	}
	return id
}

func bizOrganization(t *testing.T, companyID int64) int64 {
	t.Helper()
	return bizInsert(t, `INSERT INTO organizations (company_id, name) VALUES ($1, 'Acme') RETURNING id`, companyID)
}

func bizUser(t *testing.T, companyID int64) int64 {
	t.Helper()
	return bizInsert(t, `INSERT INTO users (company_id, name) VALUES ($1, 'Second user') RETURNING id`, companyID)
}

func bizParseTime(t *testing.T, s string) time.Time {
	t.Helper()
	if !bizTimeRE.MatchString(s) {
		t.Errorf("timestamp %q; want the form 2026-11-21T09:30:00.123Z", s)
	}
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("timestamp %q: %v", s, err)
	}
	return tm
}

func TestBusinessLifecycle(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)

	created, r := bizCreate(t, c.key, `{"title": "Website redesign", "value": 1500.50}`)
	if got, want := r.header.Get("Location"), bizPath(created.ID); got != want {
		t.Errorf("POST /v1/business: Location = %q; want %q", got, want)
	}
	etag := r.header.Get("ETag")
	if len(etag) < 3 || etag[0] != '"' || etag[len(etag)-1] != '"' {
		t.Errorf("POST /v1/business: ETag = %q; want a strong entity tag", etag)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("POST /v1/business: Content-Type = %q; want application/json", ct)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &members); err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range members {
		names = append(names, name)
	}
	slices.Sort(names)
	wantNames := []string{"boardId", "createdAt", "currencyId", "dateWon", "deadline", "id", "organizationId", "position",
		"private", "reasonLost", "stageId", "statusId", "title", "updatedAt", "userCreatorId", "userOwnerId", "value"}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("members of a business (-want +got):\n%s", diff)
	}
	if id := string(members["id"]); id != strconv.FormatInt(created.ID, 10) {
		t.Errorf("id = %s; want the JSON number %d", id, created.ID)
	}
	if created.Title != "Website redesign" || string(created.Value) != "1500.50" {
		t.Errorf("created title %q value %s; want what was sent", created.Title, created.Value)
	}

	got, gr := bizGet(t, c.key, created.ID)
	if diff := cmp.Diff(created, got); diff != "" {
		t.Errorf("GET after POST (-posted +got):\n%s", diff)
	}
	if !bytes.Equal(gr.body, r.body) {
		t.Errorf("GET body %s\ndiffers from POST body %s", gr.body, r.body)
	}
	if e := gr.header.Get("ETag"); e != etag {
		t.Errorf("GET %s: ETag = %q; want %q as POST said", bizPath(created.ID), e, etag)
	}

	patched, pr := bizPatch(t, c.key, created.ID, `{"title": "Website redesign, phase 2"}`)
	want := created
	want.Title = "Website redesign, phase 2"
	want.UpdatedAt = patched.UpdatedAt
	if diff := cmp.Diff(want, patched); diff != "" {
		t.Errorf("PATCH (-want +got):\n%s", diff)
	}
	if e := pr.header.Get("ETag"); e == "" || e == etag {
		t.Errorf("PATCH: ETag = %q; want a new one (was %q)", e, etag)
	}
	if got, _ := bizGet(t, c.key, created.ID); got.Title != want.Title {
		t.Errorf("GET after PATCH: title %q; want %q", got.Title, want.Title)
	}

	dr := call(t, "DELETE", bizPath(created.ID), c.key, "")
	if dr.status != http.StatusNoContent || len(dr.body) != 0 {
		t.Errorf("DELETE %s = %d with %d body bytes; want 204 and no body", bizPath(created.ID), dr.status, len(dr.body))
	}
	for _, method := range []string{"GET", "DELETE", "PATCH"} {
		body := ""
		if method == "PATCH" {
			body = `{"title": "Back"}`
		}
		r := call(t, method, bizPath(created.ID), c.key, body)
		wantProblem(t, r, http.StatusNotFound, "not_found")
	}
	if n := bizCount(t, c.key); n != 0 {
		t.Errorf("count after DELETE = %d; want 0", n)
	}
}

func TestBusinessCreateDefaults(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	board, stage := bizDefaultBoard(t, c.id)

	first, r := bizCreate(t, c.key, `{"title": "Minimal"}`)
	want := bizRecord{
		ID: first.ID, Title: "Minimal", Value: json.RawMessage("null"), Position: first.Position,
		StatusID: statusOpen, CurrencyID: 978, UserOwnerID: c.userID, UserCreatorID: c.userID,
		BoardID: board, StageID: stage, CreatedAt: first.CreatedAt, UpdatedAt: first.UpdatedAt,
	}
	if diff := cmp.Diff(want, first); diff != "" {
		t.Errorf("POST {\"title\": \"Minimal\"} (-want +got):\n%s", diff)
	}
	if !bytes.Contains(r.body, []byte(`"value":null,"deadline":null,"private":false,`)) ||
		!bytes.Contains(r.body, []byte(`"dateWon":null,"reasonLost":null,`)) ||
		!bytes.Contains(r.body, []byte(`"organizationId":null,`)) {
		t.Errorf("body %s; want value, deadline, dateWon, reasonLost and organizationId null, private false", r.body)
	}
	created := bizParseTime(t, first.CreatedAt)
	if first.UpdatedAt != first.CreatedAt {
		t.Errorf("updatedAt %s, createdAt %s; want them equal on create", first.UpdatedAt, first.CreatedAt)
	}
	if d := time.Since(created); d < -time.Minute || d > time.Minute {
		t.Errorf("createdAt %s is %v away from now", first.CreatedAt, d)
	}

	second, _ := bizCreate(t, c.key, `{"title": "Second in the stage"}`)
	if second.StageID != stage || second.Position <= first.Position {
		t.Errorf("second business: stage %d position %d; want stage %d and a position after %d (end of the stage)",
			second.StageID, second.Position, stage, first.Position)
	}
	third, _ := bizCreate(t, c.key, `{"title": "Placed", "position": 0}`)
	if third.Position != 0 {
		t.Errorf("business created with position 0 has position %d", third.Position)
	}
	fourth, _ := bizCreate(t, c.key, `{"title": "After the placed one"}`)
	if fourth.Position <= second.Position {
		t.Errorf("fourth business: position %d; want after %d", fourth.Position, second.Position)
	}
}

func TestBusinessPositionAfterTheLargestIsStillCreated(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	last, _ := bizCreate(t, c.key, `{"title": "At the largest position", "position": 2147483647}`)
	// The client sent nothing wrong: a full stage must not turn "the end of the stage" into a 422 or 500.
	r := call(t, "POST", "/v1/business", c.key, `{"title": "After it"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("POST /v1/business after a business at position %d = %d; want 201 (body %s)", last.Position, r.status, r.body)
	}
}

func TestBusinessConcurrentCreatesGetDistinctPositions(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	_, stage := bizDefaultBoard(t, c.id)
	ctx := context.Background()

	// Hold the stage row locked so that two creates are sure to overlap: each computes its position,
	// then waits here (the foreign key check) until the lock is released.
	conn, err := testEnv.st.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var pid int
	if err := tx.QueryRowContext(ctx, `SELECT pg_backend_pid() FROM stages WHERE company_id = $1 AND id = $2 FOR UPDATE`,
		c.id, stage).Scan(&pid); err != nil {
		t.Fatal(err)
	}

	const n = 2
	results := make([]response, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = send(nil, testEnv.baseURL, "POST", "/v1/business", c.key, fmt.Sprintf(`{"title": "Concurrent %d"}`, i))
		}()
	}
	// Wait until both creates wait on the lock, or (should the server serialize creates in a stage
	// some other way) until one has waited a while.
	deadline := time.Now().Add(time.Second)
	for {
		var blocked int
		err := testEnv.st.db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`,
			pid).Scan(&blocked)
		if err != nil {
			t.Fatal(err)
		}
		if blocked >= n || (blocked > 0 && time.Now().After(deadline)) || time.Now().After(deadline.Add(8*time.Second)) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	tx.Rollback()
	wg.Wait()

	var positions []int64
	for i, r := range results {
		if errs[i] != nil || r.status != http.StatusCreated {
			t.Fatalf("concurrent POST %d = %d, %v; want 201 (body %s)", i, r.status, errs[i], r.body)
		}
		positions = append(positions, bizDecode(t, r.body).Position)
	}
	if positions[0] == positions[1] {
		t.Errorf("two business records created at once in one stage both got position %d; want each its own end of the stage",
			positions[0])
	}
}

func TestBusinessListPagesAndCount(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)

	r := call(t, "GET", "/v1/business", c.key, "")
	if r.status != http.StatusOK || !bytes.HasPrefix(r.body, []byte(`{"data":[],"pagination":{"limit":25,"hasMore":false,"nextCursor":null}}`)) {
		t.Errorf("GET /v1/business of a new company = %d %s; want 200 with an empty data array", r.status, r.body)
	}
	if n := bizCount(t, c.key); n != 0 {
		t.Errorf("count of a new company = %d; want 0", n)
	}

	var ids []int64
	for i := range 5 {
		b, _ := bizCreate(t, c.key, fmt.Sprintf(`{"title": "Deal %d"}`, i))
		ids = append(ids, b.ID)
	}

	decodeList := func(t *testing.T, path string) bizList {
		t.Helper()
		r := call(t, "GET", path, c.key, "")
		if r.status != http.StatusOK {
			t.Fatalf("GET %s = %d; want 200 (body %s)", path, r.status, r.body)
		}
		var l bizList
		dec := json.NewDecoder(bytes.NewReader(r.body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("GET %s: body %s: %v", path, r.body, err)
		}
		return l
	}

	t.Run("the default page has every business and no next cursor", func(t *testing.T) {
		l := decodeList(t, "/v1/business")
		var got []int64
		for _, b := range l.Data {
			got = append(got, b.ID)
		}
		if diff := cmp.Diff(ids, got); diff != "" {
			t.Errorf("ids (-want +got):\n%s", diff)
		}
		if l.Pagination.Limit != 25 || l.Pagination.HasMore || l.Pagination.NextCursor != nil {
			t.Errorf("pagination %+v; want limit 25, no more, null cursor", l.Pagination)
		}
		if l.Data[0].Title != "Deal 0" || l.Data[0].CurrencyID != 978 {
			t.Errorf("first element %+v; want the whole business", l.Data[0])
		}
	})

	t.Run("walking with limit 2 returns each business once", func(t *testing.T) {
		var got []int64
		var sizes []int
		path := "/v1/business?limit=2"
		for range 10 {
			l := decodeList(t, path)
			sizes = append(sizes, len(l.Data))
			for _, b := range l.Data {
				got = append(got, b.ID)
			}
			if l.Pagination.Limit != 2 {
				t.Errorf("GET %s: pagination.limit = %d; want 2", path, l.Pagination.Limit)
			}
			if l.Pagination.HasMore != (l.Pagination.NextCursor != nil) {
				t.Errorf("GET %s: pagination %+v; want a cursor exactly when there is more", path, l.Pagination)
			}
			if l.Pagination.NextCursor == nil {
				break
			}
			path = "/v1/business?limit=2&cursor=" + *l.Pagination.NextCursor
		}
		if diff := cmp.Diff(ids, got); diff != "" {
			t.Errorf("ids walked (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]int{2, 2, 1}, sizes); diff != "" {
			t.Errorf("page sizes (-want +got):\n%s", diff)
		}
	})

	t.Run("count follows creates and deletes", func(t *testing.T) {
		if n := bizCount(t, c.key); n != 5 {
			t.Errorf("count = %d; want 5", n)
		}
		if r := call(t, "DELETE", bizPath(ids[2]), c.key, ""); r.status != http.StatusNoContent {
			t.Fatalf("DELETE %s = %d; want 204", bizPath(ids[2]), r.status)
		}
		if n := bizCount(t, c.key); n != 4 {
			t.Errorf("count after a delete = %d; want 4", n)
		}
	})
}

func TestBusinessMoneyRoundTrips(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	tests := []struct {
		in, want string
	}{
		{"0.1", "0.1"},
		{"0.10", "0.10"},
		{"1234.5", "1234.5"},
		{"1234.50", "1234.50"},
		{"99999999.99", "99999999.99"},
		{"1e2", "100"},
		{"1E+2", "100"},
		{"1.5e1", "15"},
		{"125e-2", "1.25"},
		{"0", "0"},
		{"0.00", "0.00"},
		{"9999999999999.99", "9999999999999.99"},
	}
	for _, tt := range tests {
		t.Run(tt.in+" reads back as "+tt.want, func(t *testing.T) {
			body := `{"title": "Money", "value": ` + tt.in + `}`
			b, r := bizCreate(t, c.key, body)
			if got := bizValue(t, r.body); got != tt.want {
				t.Errorf("POST %s: value %s; want %s", body, got, tt.want)
			}
			_, gr := bizGet(t, c.key, b.ID)
			if got := bizValue(t, gr.body); got != tt.want {
				t.Errorf("GET after POST %s: value %s; want %s", body, got, tt.want)
			}
			sent, _ := new(big.Rat).SetString(tt.in)
			read, ok := new(big.Rat).SetString(bizValue(t, gr.body))
			if !ok || sent.Cmp(read) != 0 {
				t.Errorf("GET after POST %s: value %s; want a number equal to %s", body, bizValue(t, gr.body), tt.in)
			}
			// The text is a JSON number a client decodes without loss.
			dec := json.NewDecoder(bytes.NewReader(gr.body))
			dec.UseNumber()
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				t.Fatal(err)
			}
			if n, ok := m["value"].(json.Number); !ok || n.String() != tt.want {
				t.Errorf("decoded value %#v; want the number %s", m["value"], tt.want)
			}
		})
	}

	t.Run("PATCH sets and null clears the value", func(t *testing.T) {
		b, _ := bizCreate(t, c.key, `{"title": "Money", "value": 5}`)
		_, r := bizPatch(t, c.key, b.ID, `{"value": 0.10}`)
		if got := bizValue(t, r.body); got != "0.10" {
			t.Errorf("PATCH value 0.10: value %s; want 0.10", got)
		}
		_, r = bizPatch(t, c.key, b.ID, `{"value": null}`)
		if got := bizValue(t, r.body); got != "null" {
			t.Errorf("PATCH value null: value %s; want null", got)
		}
		if _, r := bizGet(t, c.key, b.ID); bizValue(t, r.body) != "null" {
			t.Errorf("GET after PATCH value null: %s; want value null", r.body)
		}
	})
}

func TestBusinessMoneyRejected(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	b, _ := bizCreate(t, c.key, `{"title": "Keeps its value", "value": 7.5}`)
	_, before := bizGet(t, c.key, b.ID)
	for _, value := range []string{
		"-1", "-0.5", "-0", "1.234", `"12"`, "1e400", "10000000000000", "1e13", "true", "false",
		"0.001", "1e-3", "{}", "[1]", `""`,
	} {
		t.Run("value "+value+" is a 422", func(t *testing.T) {
			body := `{"title": "Bad money", "value": ` + value + `}`
			r := call(t, "POST", "/v1/business", c.key, body)
			bizWantFields(t, r, "value")
			r = call(t, "PATCH", bizPath(b.ID), c.key, `{"value": `+value+`}`)
			bizWantFields(t, r, "value")
		})
	}
	if n := bizCount(t, c.key); n != 1 {
		t.Errorf("count = %d; want 1: a refused POST creates nothing", n)
	}
	if _, after := bizGet(t, c.key, b.ID); !bytes.Equal(before.body, after.body) {
		t.Errorf("after refused PATCHes: %s; want unchanged %s", after.body, before.body)
	}
}

func TestParseMoney(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want string // "" when the input must be refused
	}{
		{"0", "0"},
		{"0.1", "0.1"},
		{"0.10", "0.10"},
		{"0.0", "0.0"},
		{"1234.5", "1234.5"},
		{"1234.50", "1234.50"},
		{"99999999.99", "99999999.99"},
		{"9999999999999.99", "9999999999999.99"},
		{"1e2", "100"},
		{"1E2", "100"},
		{"1e+2", "100"},
		{"1.5e1", "15"},
		{"1.25e1", "12.5"},
		{"125e-2", "1.25"},
		{"1e-2", "0.01"},
		{"100e-2", "1.00"},
		{"0e5", "0"},
		{"0.5e1", "5"},
		{"1e12", "1000000000000"},

		{"-1", ""},
		{"-0.5", ""},
		{"-0", ""},
		{"1.234", ""},
		{"1e-3", ""},
		{"12.34e-1", ""},
		{"00.1", ""},
		{"01", ""},
		{".5", ""},
		{"5.", ""},
		{"1e13", ""},
		{"10000000000000", ""},
		{"99999999999999.99", ""},
		{"1e400", ""},
		{"1e-400", ""},
		{"1e99999999999999999999", ""},
		{"1e", ""},
		{"1e+", ""},
		{"1e--2", ""},
		{"1e+-2", ""},
		{"1.2.3", ""},
		{"+1", ""},
		{"0x10", ""},
		{"1_000", ""},
		{"NaN", ""},
		{"Infinity", ""},
		{`"12"`, ""},
		{"true", ""},
		{"false", ""},
		{"null", ""},
		{"{}", ""},
		{"[1]", ""},
		{"", ""},
	}
	for _, tt := range tests {
		got, msg := parseMoney(tt.in)
		if tt.want == "" {
			if msg == "" {
				t.Errorf("parseMoney(%q) = %q, no error; want it refused", tt.in, got)
			}
			continue
		}
		if got != tt.want || msg != "" {
			t.Errorf("parseMoney(%q) = %q, %q; want %q, no error", tt.in, got, msg, tt.want)
		}
	}
}

func TestBusinessTimestamps(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for _, field := range []string{"deadline", "dateWon"} {
		t.Run(field+" is read back in UTC with milliseconds", func(t *testing.T) {
			for _, tt := range []struct{ in, want string }{
				{"2026-12-01T10:00:00+02:00", "2026-12-01T08:00:00.000Z"},
				{"2026-12-01T10:00:00.123456Z", "2026-12-01T10:00:00.123Z"},
				{"2026-12-01T10:00:00Z", "2026-12-01T10:00:00.000Z"},
				{"2026-12-01T10:00:00.1-05:30", "2026-12-01T15:30:00.100Z"},
				{"2026-11-21T09:30:00.123Z", "2026-11-21T09:30:00.123Z"},
			} {
				body := fmt.Sprintf(`{"title": "Dated", %q: %q}`, field, tt.in)
				b, r := bizCreate(t, c.key, body)
				var m map[string]json.RawMessage
				json.Unmarshal(r.body, &m)
				if got, want := string(m[field]), `"`+tt.want+`"`; got != want {
					t.Errorf("POST %s: %s = %s; want %s", body, field, got, want)
				}
				_, gr := bizGet(t, c.key, b.ID)
				json.Unmarshal(gr.body, &m)
				if got, want := string(m[field]), `"`+tt.want+`"`; got != want {
					t.Errorf("GET after POST %s: %s = %s; want %s", body, field, got, want)
				}
			}
		})

		t.Run(field+" that is not an RFC 3339 timestamp is a 422", func(t *testing.T) {
			b, _ := bizCreate(t, c.key, `{"title": "Dated"}`)
			for _, bad := range []string{`"tomorrow"`, `"2026-13-01T00:00:00Z"`, `5`, `"2026-12-01"`,
				`"2026-12-01 10:00:00Z"`, `"2026-12-01T10:00:00"`, `true`, `""`, `{}`} {
				r := call(t, "POST", "/v1/business", c.key, fmt.Sprintf(`{"title": "Dated", %q: %s}`, field, bad))
				bizWantFields(t, r, field)
				r = call(t, "PATCH", bizPath(b.ID), c.key, fmt.Sprintf(`{%q: %s}`, field, bad))
				bizWantFields(t, r, field)
			}
		})

		t.Run(field+" whose UTC instant is outside years 1 to 9999 is a 422", func(t *testing.T) {
			// Read back, such an instant would not be an RFC 3339 timestamp the API itself accepts.
			for _, bad := range []string{`"9999-12-31T23:30:00-01:00"`, `"0001-01-01T00:30:00+01:00"`} {
				r := call(t, "POST", "/v1/business", c.key, fmt.Sprintf(`{"title": "Dated", %q: %s}`, field, bad))
				if r.status != http.StatusUnprocessableEntity {
					t.Errorf("POST %s %s = %d; want 422 (body %s)", field, bad, r.status, r.body)
				}
			}
		})

		t.Run(field+" null clears it", func(t *testing.T) {
			b, _ := bizCreate(t, c.key, `{"title": "Dated", "deadline": "2026-12-01T10:00:00Z", "dateWon": "2026-11-01T10:00:00Z"}`)
			got, _ := bizPatch(t, c.key, b.ID, fmt.Sprintf(`{%q: null}`, field))
			want := b
			want.UpdatedAt = got.UpdatedAt
			if field == "deadline" {
				want.Deadline = nil
			} else {
				want.DateWon = nil
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("PATCH %s null (-want +got):\n%s", field, diff)
			}
		})
	}
}

func TestBusinessReferences(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	existing, _ := bizCreate(t, c.key, `{"title": "Referenced"}`)
	_, before := bizGet(t, c.key, existing.ID)

	tests := []struct {
		name   string
		member string
		field  string
	}{
		{"a status that does not exist", `"statusId": 999`, "statusId"},
		{"a status id beyond the column's range", `"statusId": 9999999999`, "statusId"},
		{"currency 1, which is no ISO 4217 code", `"currencyId": 1`, "currencyId"},
		{"a currency id beyond the column's range", `"currencyId": 99999999999`, "currencyId"},
		{"an organization that does not exist", fmt.Sprintf(`"organizationId": %d`, bizNoSuchID), "organizationId"},
		{"an owner that does not exist", fmt.Sprintf(`"userOwnerId": %d`, bizNoSuchID), "userOwnerId"},
		{"a board that does not exist", fmt.Sprintf(`"boardId": %d`, bizNoSuchID), "boardId"},
		{"a stage that does not exist", fmt.Sprintf(`"stageId": %d`, bizNoSuchID), "stageId"},
		{"the largest int64 as board", `"boardId": 9223372036854775807`, "boardId"},
		{"an id beyond int64", `"statusId": 9223372036854775808`, "statusId"},
		{"a zero id", `"currencyId": 0`, "currencyId"},
		{"a negative id", `"userOwnerId": -1`, "userOwnerId"},
		{"an id as a string", `"statusId": "1"`, "statusId"},
		{"a fractional id", `"organizationId": 1.5`, "organizationId"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is a 422 naming the field", func(t *testing.T) {
			r := call(t, "POST", "/v1/business", c.key, `{"title": "Bad ref", `+tt.member+`}`)
			bizWantFields(t, r, tt.field)
			r = call(t, "PATCH", bizPath(existing.ID), c.key, `{`+tt.member+`}`)
			bizWantFields(t, r, tt.field)
		})
	}
	if n := bizCount(t, c.key); n != 1 {
		t.Errorf("count = %d; want 1: refused POSTs create nothing", n)
	}
	if _, after := bizGet(t, c.key, existing.ID); !bytes.Equal(before.body, after.body) {
		t.Errorf("after refused PATCHes: %s; want unchanged %s", after.body, before.body)
	}

	t.Run("existing references are accepted", func(t *testing.T) {
		org := bizOrganization(t, c.id)
		owner := bizUser(t, c.id)
		b, _ := bizCreate(t, c.key, fmt.Sprintf(`{"title": "Good refs", "currencyId": 840, "statusId": 2,
			"organizationId": %d, "userOwnerId": %d}`, org, owner))
		if b.CurrencyID != 840 || b.StatusID != 2 || b.OrganizationID == nil || *b.OrganizationID != org ||
			b.UserOwnerID != owner || b.UserCreatorID != c.userID {
			t.Errorf("created %+v; want currency 840, status 2, organization %d, owner %d, creator %d",
				b, org, owner, c.userID)
		}
		got, _ := bizPatch(t, c.key, existing.ID, fmt.Sprintf(`{"currencyId": 840, "statusId": 3, "organizationId": %d, "userOwnerId": %d}`, org, owner))
		if got.CurrencyID != 840 || got.StatusID != 3 || got.OrganizationID == nil || *got.OrganizationID != org || got.UserOwnerID != owner {
			t.Errorf("patched %+v; want currency 840, status 3, organization %d, owner %d", got, org, owner)
		}
	})
}

func TestBusinessStageMustBelongToBoard(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	defBoard, defStage := bizDefaultBoard(t, c.id)
	second, s1 := bizSecondBoard(t, c.id)

	t.Run("a board without a stage takes that board's first stage", func(t *testing.T) {
		b, _ := bizCreate(t, c.key, fmt.Sprintf(`{"title": "On the second board", "boardId": %d}`, second))
		if b.BoardID != second || b.StageID != s1 {
			t.Errorf("board %d stage %d; want board %d stage %d", b.BoardID, b.StageID, second, s1)
		}
		b, _ = bizCreate(t, c.key, fmt.Sprintf(`{"title": "Both given", "boardId": %d, "stageId": %d}`, second, s1))
		if b.BoardID != second || b.StageID != s1 {
			t.Errorf("board %d stage %d; want board %d stage %d", b.BoardID, b.StageID, second, s1)
		}
	})

	t.Run("a stage of another board is a 422 on stageId", func(t *testing.T) {
		r := call(t, "POST", "/v1/business", c.key, fmt.Sprintf(`{"title": "Mismatch", "stageId": %d}`, s1))
		bizWantFields(t, r, "stageId")
		r = call(t, "POST", "/v1/business", c.key, fmt.Sprintf(`{"title": "Mismatch", "boardId": %d, "stageId": %d}`, defBoard, s1))
		bizWantFields(t, r, "stageId")
		r = call(t, "POST", "/v1/business", c.key, fmt.Sprintf(`{"title": "Mismatch", "boardId": %d, "stageId": %d}`, second, defStage))
		bizWantFields(t, r, "stageId")
	})

	t.Run("a contact stage is a 422 on stageId", func(t *testing.T) {
		r := call(t, "POST", "/v1/business", c.key, fmt.Sprintf(`{"title": "Contact stage", "stageId": %d}`, bizContactStage(t, c.id)))
		bizWantFields(t, r, "stageId")
	})

	t.Run("PATCH keeps the stage a stage of the board", func(t *testing.T) {
		b, _ := bizCreate(t, c.key, `{"title": "Moving"}`)
		_, before := bizGet(t, c.key, b.ID)
		r := call(t, "PATCH", bizPath(b.ID), c.key, fmt.Sprintf(`{"boardId": %d}`, second))
		bizWantFields(t, r, "stageId")
		r = call(t, "PATCH", bizPath(b.ID), c.key, fmt.Sprintf(`{"stageId": %d}`, s1))
		bizWantFields(t, r, "stageId")
		r = call(t, "PATCH", bizPath(b.ID), c.key, fmt.Sprintf(`{"stageId": %d}`, bizContactStage(t, c.id)))
		bizWantFields(t, r, "stageId")
		if _, after := bizGet(t, c.key, b.ID); !bytes.Equal(before.body, after.body) {
			t.Errorf("after refused PATCHes: %s; want unchanged %s", after.body, before.body)
		}
		got, _ := bizPatch(t, c.key, b.ID, fmt.Sprintf(`{"boardId": %d, "stageId": %d}`, second, s1))
		if got.BoardID != second || got.StageID != s1 {
			t.Errorf("PATCH board and stage together: board %d stage %d; want %d, %d", got.BoardID, got.StageID, second, s1)
		}
		got, _ = bizPatch(t, c.key, b.ID, fmt.Sprintf(`{"boardId": %d, "stageId": %d}`, defBoard, defStage))
		if got.BoardID != defBoard || got.StageID != defStage {
			t.Errorf("PATCH back: board %d stage %d; want %d, %d", got.BoardID, got.StageID, defBoard, defStage)
		}
	})
}

func TestBusinessValidation(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	tests := []struct {
		name   string
		body   string
		fields []string
	}{
		{"a missing title", `{}`, []string{"title"}},
		{"a missing title beside other fields", `{"value": 1}`, []string{"title"}},
		{"a null title", `{"title": null}`, []string{"title"}},
		{"an empty title", `{"title": ""}`, []string{"title"}},
		{"a blank title", `{"title": "  "}`, []string{"title"}},
		{"a title that is not a string", `{"title": 5}`, []string{"title"}},
		{"a title of 256 characters", `{"title": "` + strings.Repeat("é", 256) + `"}`, []string{"title"}},
		{"a title with a NUL character", `{"title": "a\u0000b"}`, []string{"title"}},
		{"an unknown field", `{"title": "x", "color": "red"}`, []string{"color"}},
		{"a field in the wrong case", `{"title": "x", "StatusId": 1}`, []string{"StatusId"}},
		{"a read-only id", `{"title": "x", "id": 5}`, []string{"id"}},
		{"a read-only userCreatorId", `{"title": "x", "userCreatorId": 1}`, []string{"userCreatorId"}},
		{"a read-only createdAt", `{"title": "x", "createdAt": "2026-01-01T00:00:00.000Z"}`, []string{"createdAt"}},
		{"a read-only updatedAt", `{"title": "x", "updatedAt": "2026-01-01T00:00:00.000Z"}`, []string{"updatedAt"}},
		{"private as a string", `{"title": "x", "private": "no"}`, []string{"private"}},
		{"private as a number", `{"title": "x", "private": 0}`, []string{"private"}},
		{"private null", `{"title": "x", "private": null}`, []string{"private"}},
		{"a negative position", `{"title": "x", "position": -1}`, []string{"position"}},
		{"a fractional position", `{"title": "x", "position": 1.5}`, []string{"position"}},
		{"a position as a string", `{"title": "x", "position": "1"}`, []string{"position"}},
		{"a position beyond int32", `{"title": "x", "position": 2147483648}`, []string{"position"}},
		{"a null position", `{"title": "x", "position": null}`, []string{"position"}},
		{"a reasonLost that is a number", `{"title": "x", "reasonLost": 5}`, []string{"reasonLost"}},
		{"a reasonLost of 1001 characters", `{"title": "x", "reasonLost": "` + strings.Repeat("a", 1001) + `"}`, []string{"reasonLost"}},
		{"several bad fields at once", `{"title": "", "private": "no", "color": 1, "id": 2}`, []string{"title", "private", "color", "id"}},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is a 422", func(t *testing.T) {
			r := call(t, "POST", "/v1/business", c.key, tt.body)
			bizWantFields(t, r, tt.fields...)
		})
	}
	if n := bizCount(t, c.key); n != 0 {
		t.Errorf("count = %d; want 0: refused POSTs create nothing", n)
	}

	t.Run("reasonLost may be a string or null", func(t *testing.T) {
		b, _ := bizCreate(t, c.key, `{"title": "Lost", "reasonLost": "Too expensive \"really\"", "statusId": 3}`)
		if b.ReasonLost == nil || *b.ReasonLost != `Too expensive "really"` {
			t.Errorf("reasonLost = %v; want the string sent", b.ReasonLost)
		}
		b, _ = bizCreate(t, c.key, `{"title": "Not lost", "reasonLost": null}`)
		if b.ReasonLost != nil {
			t.Errorf("reasonLost = %q; want null", *b.ReasonLost)
		}
	})

	t.Run("valid optional fields are stored", func(t *testing.T) {
		b, _ := bizCreate(t, c.key, `{"title": "  Padded  ", "private": true, "position": 2147483647}`)
		if b.Title != "  Padded  " || !b.Private || b.Position != 2147483647 {
			t.Errorf("created %+v; want the title as sent, private, position 2147483647", b)
		}
	})
}

func TestBusinessMergePatch(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	org := bizOrganization(t, c.id)
	full := fmt.Sprintf(`{"title": "Full", "value": 10.50, "deadline": "2026-12-01T10:00:00.000Z",
		"dateWon": "2026-11-01T10:00:00.000Z", "reasonLost": "none", "organizationId": %d, "private": true}`, org)

	t.Run("an absent field is unchanged", func(t *testing.T) {
		b, _ := bizCreate(t, c.key, full)
		got, _ := bizPatch(t, c.key, b.ID, `{"title": "Renamed"}`)
		want := b
		want.Title = "Renamed"
		want.UpdatedAt = got.UpdatedAt
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("PATCH title (-want +got):\n%s", diff)
		}
	})

	for _, field := range []string{"value", "deadline", "organizationId", "reasonLost", "dateWon"} {
		t.Run("null clears "+field+" and leaves the others", func(t *testing.T) {
			b, _ := bizCreate(t, c.key, full)
			_, before := bizGet(t, c.key, b.ID)
			_, r := bizPatch(t, c.key, b.ID, fmt.Sprintf(`{%q: null}`, field))
			var was, got map[string]json.RawMessage
			json.Unmarshal(before.body, &was)
			json.Unmarshal(r.body, &got)
			if string(was[field]) == "null" {
				t.Fatalf("%s was null before the PATCH", field)
			}
			want := was
			want[field] = json.RawMessage("null")
			want["updatedAt"] = got["updatedAt"]
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("PATCH %s null (-want +got):\n%s", field, diff)
			}
			_, after := bizGet(t, c.key, b.ID)
			if !bytes.Equal(after.body, r.body) {
				t.Errorf("GET after PATCH %s\ndiffers from the PATCH answer %s", after.body, r.body)
			}
		})
	}

	t.Run("null on a required field is a 422", func(t *testing.T) {
		b, _ := bizCreate(t, c.key, full)
		_, before := bizGet(t, c.key, b.ID)
		for _, field := range []string{"title", "statusId", "boardId", "stageId", "private", "currencyId", "userOwnerId", "position"} {
			r := call(t, "PATCH", bizPath(b.ID), c.key, fmt.Sprintf(`{%q: null}`, field))
			bizWantFields(t, r, field)
		}
		if _, after := bizGet(t, c.key, b.ID); !bytes.Equal(before.body, after.body) {
			t.Errorf("after refused PATCHes: %s; want unchanged %s", after.body, before.body)
		}
	})

	t.Run("a read-only field is a 422", func(t *testing.T) {
		b, _ := bizCreate(t, c.key, full)
		for _, member := range []string{`"id": 5`, `"userCreatorId": 1`, `"createdAt": "2026-01-01T00:00:00.000Z"`,
			`"updatedAt": "2026-01-01T00:00:00.000Z"`, `"color": "red"`} {
			r := call(t, "PATCH", bizPath(b.ID), c.key, `{`+member+`}`)
			bizWantFields(t, r, strings.Trim(strings.SplitN(member, ":", 2)[0], `"`))
		}
	})

	t.Run("an empty patch changes nothing, not even updatedAt and the ETag", func(t *testing.T) {
		b, _ := bizCreate(t, c.key, full)
		_, before := bizGet(t, c.key, b.ID)
		_, r := bizPatch(t, c.key, b.ID, `{}`)
		if !bytes.Equal(r.body, before.body) {
			t.Errorf("PATCH {} = %s; want the object unchanged %s", r.body, before.body)
		}
		if got, want := r.header.Get("ETag"), before.header.Get("ETag"); got != want {
			t.Errorf("PATCH {}: ETag = %q; want %q", got, want)
		}
		_, after := bizGet(t, c.key, b.ID)
		if !bytes.Equal(after.body, before.body) || after.header.Get("ETag") != before.header.Get("ETag") {
			t.Errorf("GET after PATCH {} = %s %s; want unchanged %s %s", after.header.Get("ETag"), after.body,
				before.header.Get("ETag"), before.body)
		}
	})

	t.Run("a real change moves updatedAt and the ETag", func(t *testing.T) {
		b, r := bizCreate(t, c.key, full)
		got, pr := bizPatch(t, c.key, b.ID, `{"private": false}`)
		if !bizParseTime(t, got.UpdatedAt).After(bizParseTime(t, b.UpdatedAt)) {
			t.Errorf("updatedAt %s after PATCH; want later than %s", got.UpdatedAt, b.UpdatedAt)
		}
		if got.CreatedAt != b.CreatedAt {
			t.Errorf("createdAt %s after PATCH; want %s", got.CreatedAt, b.CreatedAt)
		}
		if pr.header.Get("ETag") == r.header.Get("ETag") {
			t.Errorf("ETag %q unchanged by a real change", pr.header.Get("ETag"))
		}
		again, ar := bizPatch(t, c.key, b.ID, `{"private": true}`)
		if !bizParseTime(t, again.UpdatedAt).After(bizParseTime(t, got.UpdatedAt)) {
			t.Errorf("updatedAt %s after a second PATCH; want later than %s", again.UpdatedAt, got.UpdatedAt)
		}
		if ar.header.Get("ETag") == pr.header.Get("ETag") || ar.header.Get("ETag") == r.header.Get("ETag") {
			t.Errorf("ETags %q, %q, %q; want each change to make a new one", r.header.Get("ETag"),
				pr.header.Get("ETag"), ar.header.Get("ETag"))
		}
	})
}

func TestBusinessIfMatch(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	b, r := bizCreate(t, c.key, `{"title": "Guarded"}`)
	e1 := r.header.Get("ETag")
	path := bizPath(b.ID)

	unchanged := func(t *testing.T, want []byte) {
		t.Helper()
		if _, now := bizGet(t, c.key, b.ID); !bytes.Equal(now.body, want) {
			t.Errorf("after a 412: %s; want unchanged %s", now.body, want)
		}
	}
	_, before := bizGet(t, c.key, b.ID)

	t.Run("a stale ETag on PATCH is a 412 and changes nothing", func(t *testing.T) {
		r := call(t, "PATCH", path, c.key, `{"title": "Lost update"}`, "If-Match", `"999"`)
		wantProblem(t, r, http.StatusPreconditionFailed, "precondition_failed")
		unchanged(t, before.body)
	})
	t.Run("a stale ETag on DELETE is a 412 and deletes nothing", func(t *testing.T) {
		r := call(t, "DELETE", path, c.key, "", "If-Match", `"999"`)
		wantProblem(t, r, http.StatusPreconditionFailed, "precondition_failed")
		unchanged(t, before.body)
	})

	_, pr := bizPatch(t, c.key, b.ID, `{"title": "Second version"}`, "If-Match", e1)
	e2 := pr.header.Get("ETag")
	if e2 == e1 {
		t.Fatalf("ETag %q did not change with the PATCH", e2)
	}

	t.Run("the ETag before the last change is stale", func(t *testing.T) {
		r := call(t, "PATCH", path, c.key, `{"title": "Lost update"}`, "If-Match", e1)
		wantProblem(t, r, http.StatusPreconditionFailed, "precondition_failed")
		r = call(t, "DELETE", path, c.key, "", "If-Match", e1)
		wantProblem(t, r, http.StatusPreconditionFailed, "precondition_failed")
		unchanged(t, pr.body)
	})
	t.Run("a list of ETags that holds the current one is accepted", func(t *testing.T) {
		got, r := bizPatch(t, c.key, b.ID, `{"title": "Listed"}`, "If-Match", `"999", `+e2)
		if got.Title != "Listed" {
			t.Errorf("title %q; want Listed", got.Title)
		}
		e2 = r.header.Get("ETag")
	})
	t.Run("a wildcard If-Match is accepted", func(t *testing.T) {
		got, _ := bizPatch(t, c.key, b.ID, `{"title": "Third version"}`, "If-Match", "*")
		if got.Title != "Third version" {
			t.Errorf("title %q; want Third version", got.Title)
		}
	})
	t.Run("DELETE with the current ETag deletes", func(t *testing.T) {
		_, gr := bizGet(t, c.key, b.ID)
		r := call(t, "DELETE", path, c.key, "", "If-Match", gr.header.Get("ETag"))
		if r.status != http.StatusNoContent {
			t.Fatalf("DELETE %s with If-Match %s = %d; want 204 (body %s)", path, gr.header.Get("ETag"), r.status, r.body)
		}
		wantProblem(t, call(t, "GET", path, c.key, ""), http.StatusNotFound, "not_found")
	})
	t.Run("DELETE with a wildcard If-Match deletes", func(t *testing.T) {
		other, _ := bizCreate(t, c.key, `{"title": "Other"}`)
		r := call(t, "DELETE", bizPath(other.ID), c.key, "", "If-Match", "*")
		if r.status != http.StatusNoContent {
			t.Errorf("DELETE %s with If-Match * = %d; want 204", bizPath(other.ID), r.status)
		}
	})
}

func TestBusinessFailedPatchChangesNothing(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	second, _ := bizSecondBoard(t, c.id)
	b, _ := bizCreate(t, c.key, `{"title": "Stable", "value": 3.50, "deadline": "2026-12-01T10:00:00.000Z"}`)
	_, before := bizGet(t, c.key, b.ID)
	tests := []struct {
		name  string
		body  string
		field string
	}{
		{"a good title beside a bad value", `{"title": "Changed", "value": 1.234}`, "value"},
		{"a good value beside a bad status", `{"value": 9, "statusId": 999}`, "statusId"},
		{"a good deadline beside an unknown field", `{"deadline": null, "color": "red"}`, "color"},
		{"a good title beside a board the stage is not of", fmt.Sprintf(`{"title": "Changed", "boardId": %d}`, second), "stageId"},
		{"a good title beside a read-only field", `{"title": "Changed", "createdAt": "2020-01-01T00:00:00.000Z"}`, "createdAt"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" leaves the row as it was", func(t *testing.T) {
			r := call(t, "PATCH", bizPath(b.ID), c.key, tt.body)
			bizWantFields(t, r, tt.field)
			_, after := bizGet(t, c.key, b.ID)
			if !bytes.Equal(before.body, after.body) || before.header.Get("ETag") != after.header.Get("ETag") {
				t.Errorf("after PATCH %s: %s %s; want unchanged %s %s", tt.body, after.header.Get("ETag"), after.body,
					before.header.Get("ETag"), before.body)
			}
		})
	}
}

func TestBusinessTenantIsolation(t *testing.T) {
	t.Parallel()
	a, b := newTestCompany(t), newTestCompany(t)
	aBiz, _ := bizCreate(t, a.key, `{"title": "A's secret deal", "value": 1000000}`)
	_, aBefore := bizGet(t, a.key, aBiz.ID)
	bBiz, _ := bizCreate(t, b.key, `{"title": "B's deal"}`)

	t.Run("another company's business is answered like one that does not exist", func(t *testing.T) {
		for _, req := range []struct{ method, body string }{
			{"GET", ""}, {"PATCH", `{"title": "Stolen"}`}, {"DELETE", ""},
		} {
			r := call(t, req.method, bizPath(aBiz.ID), b.key, req.body)
			p := wantProblem(t, r, http.StatusNotFound, "not_found")
			r = call(t, req.method, bizPath(bizNoSuchID), b.key, req.body)
			q := wantProblem(t, r, http.StatusNotFound, "not_found")
			p.RequestID, q.RequestID = "", ""
			if diff := cmp.Diff(q, p); diff != "" {
				t.Errorf("%s of A's business by B vs of no business (-none +A's):\n%s", req.method, diff)
			}
		}
		if _, after := bizGet(t, a.key, aBiz.ID); !bytes.Equal(aBefore.body, after.body) {
			t.Errorf("A's business after B's attempts: %s; want unchanged %s", after.body, aBefore.body)
		}
	})

	t.Run("B's list and count hold only B's business", func(t *testing.T) {
		r := call(t, "GET", "/v1/business?limit=100", b.key, "")
		var l bizList
		if err := json.Unmarshal(r.body, &l); err != nil || r.status != http.StatusOK {
			t.Fatalf("GET /v1/business = %d %s", r.status, r.body)
		}
		var ids []int64
		for _, x := range l.Data {
			ids = append(ids, x.ID)
		}
		if diff := cmp.Diff([]int64{bBiz.ID}, ids); diff != "" {
			t.Errorf("B's list (-want +got):\n%s", diff)
		}
		if n := bizCount(t, b.key); n != 1 {
			t.Errorf("B's count = %d; want 1", n)
		}
		if n := bizCount(t, a.key); n != 1 {
			t.Errorf("A's count = %d; want 1", n)
		}
	})

	aBoard, aStage := bizDefaultBoard(t, a.id)
	aOrg := bizOrganization(t, a.id)
	tests := []struct {
		field       string
		aID, noneID int64
	}{
		{"organizationId", aOrg, bizNoSuchID},
		{"userOwnerId", a.userID, bizNoSuchID},
		{"boardId", aBoard, bizNoSuchID},
		{"stageId", aStage, bizNoSuchID},
	}
	for _, tt := range tests {
		t.Run("B cannot use A's "+tt.field, func(t *testing.T) {
			for _, method := range []string{"POST", "PATCH"} {
				path := "/v1/business"
				if method == "PATCH" {
					path = bizPath(bBiz.ID)
				}
				r := call(t, method, path, b.key, fmt.Sprintf(`{"title": "Borrowing", %q: %d}`, tt.field, tt.aID))
				p := bizWantFields(t, r, tt.field)
				r = call(t, method, path, b.key, fmt.Sprintf(`{"title": "Borrowing", %q: %d}`, tt.field, tt.noneID))
				q := bizWantFields(t, r, tt.field)
				p.RequestID, q.RequestID = "", ""
				if diff := cmp.Diff(q, p); diff != "" {
					t.Errorf("%s with A's %s vs a nonexistent one (-none +A's):\n%s", method, tt.field, diff)
				}
			}
		})
	}
	if n := bizCount(t, b.key); n != 1 {
		t.Errorf("B's count = %d; want 1 after refused POSTs", n)
	}
}

func TestBusinessBadRequests(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	b, _ := bizCreate(t, c.key, `{"title": "Target"}`)
	_, before := bizGet(t, c.key, b.ID)

	t.Run("a path id that is not a positive int64 is a 400", func(t *testing.T) {
		for _, id := range []string{"abc", "0", "-1", "9223372036854775808", "+1", "1.5", "1e3", "0x1"} {
			for _, method := range []string{"GET", "PATCH", "DELETE"} {
				body := ""
				if method == "PATCH" {
					body = `{"title": "x"}`
				}
				r := call(t, method, "/v1/business/"+id, c.key, body)
				wantProblem(t, r, http.StatusBadRequest, "invalid_id")
			}
		}
	})

	t.Run("an unknown query parameter is a 400", func(t *testing.T) {
		for _, req := range []struct{ method, path, body string }{
			{"GET", "/v1/business?color=red", ""},
			{"GET", "/v1/business/count?color=red", ""},
			{"GET", bizPath(b.ID) + "?color=red", ""},
			{"POST", "/v1/business?color=red", `{"title": "x"}`},
			{"PATCH", bizPath(b.ID) + "?color=red", `{"title": "x"}`},
			{"DELETE", bizPath(b.ID) + "?color=red", ""},
		} {
			r := call(t, req.method, req.path, c.key, req.body)
			p := wantProblem(t, r, http.StatusBadRequest, "invalid_parameter")
			if !strings.Contains(p.Detail, "color") {
				t.Errorf("%s %s: detail %q; want it to name the parameter", req.method, req.path, p.Detail)
			}
		}
	})

	t.Run("a bad limit or cursor is a 400", func(t *testing.T) {
		for _, q := range []string{"limit=0", "limit=101", "limit=abc", "limit=-1", "limit=", "limit=1.5",
			"limit=2&limit=3", "cursor=garbage", "cursor=", "cursor=aWQ6MA"} {
			r := call(t, "GET", "/v1/business?"+q, c.key, "")
			wantProblem(t, r, http.StatusBadRequest, "invalid_parameter")
		}
		for _, q := range []string{"limit=1", "limit=100"} {
			if r := call(t, "GET", "/v1/business?"+q, c.key, ""); r.status != http.StatusOK {
				t.Errorf("GET /v1/business?%s = %d; want 200", q, r.status)
			}
		}
	})

	t.Run("POST and PATCH without a JSON Content-Type are a 415", func(t *testing.T) {
		for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin1",
			"application/jsonx"} {
			for _, req := range []struct{ method, path string }{{"POST", "/v1/business"}, {"PATCH", bizPath(b.ID)}} {
				r := call(t, req.method, req.path, c.key, `{"title": "Typed"}`, "Content-Type", ct)
				wantProblem(t, r, http.StatusUnsupportedMediaType, "unsupported_media_type")
			}
		}
		for _, ct := range []string{"application/json; charset=utf-8", "application/json;charset=UTF-8"} {
			r := call(t, "POST", "/v1/business", c.key, `{"title": "Charset"}`, "Content-Type", ct)
			if r.status != http.StatusCreated {
				t.Errorf("POST with Content-Type %q = %d; want 201", ct, r.status)
			}
		}
	})

	t.Run("a body that is not one JSON object is a 400", func(t *testing.T) {
		for _, body := range []string{`{"title": "x"`, `{"title": "x",}`, `[]`, `"x"`, `null`, `{"title": "x"} {}`,
			`{"title": "x"}x`, `{title: "x"}`, `{"title": 'x'}`, "{\"title\": \"\xff\"}"} {
			for _, req := range []struct{ method, path string }{{"POST", "/v1/business"}, {"PATCH", bizPath(b.ID)}} {
				r := call(t, req.method, req.path, c.key, body)
				wantProblem(t, r, http.StatusBadRequest, "invalid_json")
			}
		}
		r := call(t, "POST", "/v1/business", c.key, "", "Content-Type", "application/json")
		wantProblem(t, r, http.StatusBadRequest, "invalid_json")
	})

	t.Run("a body naming a member twice is a 400", func(t *testing.T) {
		for _, body := range []string{`{"title": "a", "title": "b"}`, `{"value": 1, "title": "a", "value": null}`} {
			for _, req := range []struct{ method, path string }{{"POST", "/v1/business"}, {"PATCH", bizPath(b.ID)}} {
				r := call(t, req.method, req.path, c.key, body)
				wantProblem(t, r, http.StatusBadRequest, "invalid_json")
			}
		}
	})

	if n := bizCount(t, c.key); n != 3 {
		t.Errorf("count = %d; want 3 (the target and the two charset POSTs): refused POSTs create nothing", n)
	}
	if _, after := bizGet(t, c.key, b.ID); !bytes.Equal(before.body, after.body) {
		t.Errorf("after refused requests: %s; want unchanged %s", after.body, before.body)
	}
}
