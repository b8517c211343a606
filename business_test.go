package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// What is particular to business records: the defaults of a create, positions, exact money,
// timestamps, references and the board a stage belongs to. What every resource shares is in
// handlers_test.go.

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

// bizNoSuchID is an id no object has: identities count from 1 and tests make a few thousand rows.
const bizNoSuchID = 1 << 60

// bizPath is the path of the business id.
func bizPath(id int64) string { return itemPath("/v1/business", id) }

// bizCreate posts body and stops the test unless the business is created.
func bizCreate(t *testing.T, key, body string) (bizRecord, response) {
	t.Helper()
	_, r := create(t, key, "/v1/business", body)
	return decode[bizRecord](t, r.body), r
}

// bizGet retrieves a business and stops the test unless it is there.
func bizGet(t *testing.T, key string, id int64) (bizRecord, response) {
	t.Helper()
	r := mustGet(t, key, bizPath(id))
	return decode[bizRecord](t, r.body), r
}

// bizPatch patches a business and stops the test unless it answers 200.
func bizPatch(t *testing.T, key string, id int64, body string) (bizRecord, response) {
	t.Helper()
	r := call(t, "PATCH", bizPath(id), key, body)
	wantStatus(t, r, http.StatusOK)
	return decode[bizRecord](t, r.body), r
}

// bizValue returns the text of "value" in a business body, exactly as the server wrote it.
func bizValue(t *testing.T, body []byte) string {
	t.Helper()
	return string(decode[map[string]json.RawMessage](t, body)["value"])
}

// bizDefaultBoard returns the company's default board and that board's first stage.
func bizDefaultBoard(t *testing.T, companyID int64) (board, stage int64) {
	t.Helper()
	board = sqlID(t, `SELECT id FROM boards WHERE company_id = $1 AND is_default`, companyID)
	stage = sqlID(t, `SELECT id FROM stages WHERE company_id = $1 AND board_id = $2 ORDER BY position, id LIMIT 1`, companyID, board)
	return board, stage
}

// bizSecondBoard creates a second board of the company with one stage, S1.
func bizSecondBoard(t *testing.T, companyID int64) (board, stage int64) {
	t.Helper()
	board = sqlID(t, `INSERT INTO boards (company_id, name) VALUES ($1, 'Second') RETURNING id`, companyID)
	stage = sqlID(t, `INSERT INTO stages (company_id, board_id, name, position) VALUES ($1, $2, 'S1', 1) RETURNING id`, companyID, board)
	return board, stage
}

func TestBusinessCreateDefaults(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	board, stage := bizDefaultBoard(t, c.id)
	const open = 1 // the "open" status (API.md section 3)
	first, r := bizCreate(t, c.key, `{"title": "Minimal"}`)
	want := bizRecord{
		ID: first.ID, Title: "Minimal", Value: json.RawMessage("null"), Position: first.Position,
		StatusID: open, CurrencyID: 978, UserOwnerID: c.userID, UserCreatorID: c.userID,
		BoardID: board, StageID: stage, CreatedAt: first.CreatedAt, UpdatedAt: first.UpdatedAt,
	}
	if diff := cmp.Diff(want, first); diff != "" {
		t.Errorf("POST {\"title\": \"Minimal\"} (-want +got):\n%s", diff)
	}
	// Every member, in order (so unset ones are null, not absent); the id is a JSON number, or it would not decode.
	wantKeys := []string{"id", "title", "value", "deadline", "private", "position", "dateWon", "reasonLost", "statusId",
		"organizationId", "currencyId", "userOwnerId", "userCreatorId", "boardId", "stageId", "createdAt", "updatedAt"}
	if diff := cmp.Diff(wantKeys, jsonKeys(t, r.body)); diff != "" {
		t.Errorf("members of a business (-want +got):\n%s", diff)
	}
	second, _ := bizCreate(t, c.key, `{"title": "Second in the stage"}`)
	if second.StageID != stage || second.Position <= first.Position {
		t.Errorf("second business: stage %d position %d; want stage %d and a position after %d (end of the stage)",
			second.StageID, second.Position, stage, first.Position)
	}
	if third, _ := bizCreate(t, c.key, `{"title": "Placed", "position": 0}`); third.Position != 0 {
		t.Errorf("business created with position 0 has position %d", third.Position)
	}
	if fourth, _ := bizCreate(t, c.key, `{"title": "After the placed one"}`); fourth.Position <= second.Position {
		t.Errorf("fourth business: position %d; want after %d", fourth.Position, second.Position)
	}
	// After the largest position a stage can hold, a create is still a 201: the client sent nothing wrong.
	bizCreate(t, c.key, `{"title": "At the largest position", "position": 2147483647}`)
	bizCreate(t, c.key, `{"title": "After it"}`)
}

func TestBusinessConcurrentCreatesGetDistinctPositions(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	_, stage := bizDefaultBoard(t, c.id)
	ctx := context.Background()
	// Hold the stage row locked so that two creates are sure to overlap: each computes its position,
	// then waits here (the foreign key check) until the lock is released.
	tx, err := testEnv.st.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var pid int64
	if err := tx.QueryRowContext(ctx, `SELECT pg_backend_pid() FROM stages WHERE company_id = $1 AND id = $2 FOR UPDATE`,
		c.id, stage).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	var results [2]response
	var errs [2]error
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			results[i], errs[i] = send(nil, testEnv.baseURL, "POST", "/v1/business", c.key, fmt.Sprintf(`{"title": "Concurrent %d"}`, i))
		})
	}
	// Wait until both creates wait on the lock, or (should the server serialize creates in a stage
	// some other way) until one has waited a while.
	for deadline := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
		blocked := sqlID(t, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, pid)
		if blocked >= 2 || (blocked > 0 && time.Now().After(deadline)) || time.Now().After(deadline.Add(8*time.Second)) {
			break
		}
	}
	tx.Rollback()
	wg.Wait()
	var positions [2]int64
	for i, r := range results {
		if errs[i] != nil || r.status != http.StatusCreated {
			t.Fatalf("concurrent POST %d = %d, %v; want 201 (body %s)", i, r.status, errs[i], r.body)
		}
		positions[i] = decode[bizRecord](t, r.body).Position
	}
	if positions[0] == positions[1] {
		t.Errorf("two business records created at once in one stage both got position %d; want each its own end of the stage", positions[0])
	}
}

func TestBusinessMoneyRoundTrips(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for in, want := range map[string]string{"0.1": "0.1", "0.10": "0.10", "1234.5": "1234.5", "1234.50": "1234.50",
		"99999999.99": "99999999.99", "1e2": "100", "1E+2": "100", "1.5e1": "15", "125e-2": "1.25", "0": "0", "0.00": "0.00",
		"9999999999999.99": "9999999999999.99"} {
		t.Run(in+" reads back as "+want, func(t *testing.T) {
			b, r := bizCreate(t, c.key, `{"title": "Money", "value": `+in+`}`)
			_, g := bizGet(t, c.key, b.ID)
			// The text is the exact decimal, a JSON number a client decodes without loss.
			sent, _ := new(big.Rat).SetString(in)
			read, ok := new(big.Rat).SetString(bizValue(t, g.body))
			if got := bizValue(t, r.body); got != want || bizValue(t, g.body) != want || !ok || sent.Cmp(read) != 0 {
				t.Errorf("value %s: POST answered %s, GET %s; want %s", in, got, bizValue(t, g.body), want)
			}
			if n, ok := decode[obj](t, g.body)["value"].(json.Number); !ok || n.String() != want {
				t.Errorf("decoded value %#v; want the number %s", n, want)
			}
		})
	}
	t.Run("PATCH sets and null clears the value", func(t *testing.T) {
		b, _ := bizCreate(t, c.key, `{"title": "Money", "value": 5}`)
		for _, v := range []string{"0.10", "null"} {
			if _, r := bizPatch(t, c.key, b.ID, `{"value": `+v+`}`); bizValue(t, r.body) != v {
				t.Errorf("PATCH value %s: %s", v, r.body)
			}
			if _, r := bizGet(t, c.key, b.ID); bizValue(t, r.body) != v {
				t.Errorf("GET after PATCH value %s: %s", v, r.body)
			}
		}
	})
}

func TestBusinessMoneyRejected(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	b, _ := bizCreate(t, c.key, `{"title": "Keeps its value", "value": 7.5}`)
	_, before := bizGet(t, c.key, b.ID)
	for _, value := range []string{"-1", "-0.5", "-0", "1.234", `"12"`, "1e400", "10000000000000", "1e13", "true", "false",
		"0.001", "1e-3", "{}", "[1]", `""`} {
		wantFields(t, call(t, "POST", "/v1/business", c.key, `{"title": "Bad money", "value": `+value+`}`), "value")
		wantFields(t, call(t, "PATCH", bizPath(b.ID), c.key, `{"value": `+value+`}`), "value")
	}
	if n := countOf(t, c.key, "/v1/business/count"); n != 1 {
		t.Errorf("count = %d; want 1: a refused POST creates nothing", n)
	}
	wantUnchanged(t, c.key, bizPath(b.ID), before)
}

func TestParseMoney(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"0": "0", "0.1": "0.1", "0.10": "0.10", "0.0": "0.0", "1234.5": "1234.5",
		"1234.50": "1234.50", "99999999.99": "99999999.99", "9999999999999.99": "9999999999999.99", "1e2": "100", "1E2": "100",
		"1e+2": "100", "1.5e1": "15", "1.25e1": "12.5", "125e-2": "1.25", "1e-2": "0.01", "100e-2": "1.00", "0e5": "0",
		"0.5e1": "5", "1e12": "1000000000000"} {
		if got, msg := parseMoney(in); got != want || msg != "" {
			t.Errorf("parseMoney(%q) = %q, %q; want %q, no error", in, got, msg, want)
		}
	}
	for _, in := range []string{"-1", "-0.5", "-0", "1.234", "1e-3", "12.34e-1", "00.1", "01", ".5", "5.", "1e13",
		"10000000000000", "99999999999999.99", "1e400", "1e-400", "1e99999999999999999999", "1e", "1e+", "1e--2", "1e+-2",
		"1.2.3", "+1", "0x10", "1_000", "NaN", "Infinity", `"12"`, "true", "false", "null", "{}", "[1]", ""} {
		if got, msg := parseMoney(in); msg == "" {
			t.Errorf("parseMoney(%q) = %q, no error; want it refused", in, got)
		}
	}
}

func TestBusinessTimestamps(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	b, _ := bizCreate(t, c.key, `{"title": "Dated"}`)
	for _, field := range []string{"deadline", "dateWon"} {
		t.Run(field+" is read back in UTC with milliseconds", func(t *testing.T) {
			for in, want := range map[string]string{"2026-12-01T10:00:00+02:00": "2026-12-01T08:00:00.000Z",
				"2026-12-01T10:00:00.123456Z": "2026-12-01T10:00:00.123Z", "2026-12-01T10:00:00Z": "2026-12-01T10:00:00.000Z",
				"2026-12-01T10:00:00.1-05:30": "2026-12-01T15:30:00.100Z", "2026-11-21T09:30:00.123Z": "2026-11-21T09:30:00.123Z"} {
				o, _ := create(t, c.key, "/v1/business", fmt.Sprintf(`{"title": "Dated", %q: %q}`, field, in))
				if got, again := o[field], decode[obj](t, mustGet(t, c.key, bizPath(o.id())).body)[field]; got != want || again != want {
					t.Errorf("%s %s: POST answered %v, GET %v; want %s", field, in, got, again, want)
				}
			}
		})
		t.Run(field+" that is not an RFC 3339 timestamp of years 1 to 9999 in UTC is a 422", func(t *testing.T) {
			// Read back, an instant outside those years would not be a timestamp the API itself accepts.
			for _, bad := range []string{`"tomorrow"`, `"2026-13-01T00:00:00Z"`, `5`, `"2026-12-01"`, `"2026-12-01 10:00:00Z"`,
				`"2026-12-01T10:00:00"`, `true`, `""`, `{}`, `"9999-12-31T23:30:00-01:00"`, `"0001-01-01T00:30:00+01:00"`} {
				wantFields(t, call(t, "POST", "/v1/business", c.key, fmt.Sprintf(`{"title": "Dated", %q: %s}`, field, bad)), field)
				wantFields(t, call(t, "PATCH", bizPath(b.ID), c.key, fmt.Sprintf(`{%q: %s}`, field, bad)), field)
			}
		})
	}
}

func TestBusinessReferences(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	existing, _ := bizCreate(t, c.key, `{"title": "Referenced"}`)
	_, before := bizGet(t, c.key, existing.ID)
	for _, tt := range []struct{ name, member, field string }{
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
	} {
		t.Run(tt.name+" is a 422 naming the field", func(t *testing.T) {
			wantFields(t, call(t, "POST", "/v1/business", c.key, `{"title": "Bad ref", `+tt.member+`}`), tt.field)
			wantFields(t, call(t, "PATCH", bizPath(existing.ID), c.key, `{`+tt.member+`}`), tt.field)
		})
	}
	if n := countOf(t, c.key, "/v1/business/count"); n != 1 {
		t.Errorf("count = %d; want 1: refused POSTs create nothing", n)
	}
	wantUnchanged(t, c.key, bizPath(existing.ID), before)

	t.Run("existing references are accepted", func(t *testing.T) {
		org := sqlOrganization(t, c.id, "Acme")
		owner := sqlID(t, `INSERT INTO users (company_id, name) VALUES ($1, 'Second user') RETURNING id`, c.id)
		refs := fmt.Sprintf(`"currencyId": 840, "statusId": 3, "organizationId": %d, "userOwnerId": %d}`, org, owner)
		created, _ := bizCreate(t, c.key, `{"title": "Good refs", `+refs)
		patched, _ := bizPatch(t, c.key, existing.ID, `{`+refs)
		for _, b := range []bizRecord{created, patched} {
			if b.CurrencyID != 840 || b.StatusID != 3 || b.OrganizationID == nil || *b.OrganizationID != org || b.UserOwnerID != owner ||
				b.UserCreatorID != c.userID {
				t.Errorf("%+v; want currency 840, status 3, organization %d, owner %d, creator %d", b, org, owner, c.userID)
			}
		}
	})
}

func TestBusinessOtherCompanyReferencesAre422LikeNone(t *testing.T) {
	t.Parallel()
	a, b := newTestCompany(t), newTestCompany(t)
	aBoard, aStage := bizDefaultBoard(t, a.id)
	wantOthersReferencesLikeNone(t, b, apiResources[1], map[string]int64{
		"organizationId": sqlOrganization(t, a.id, "A org"), "userOwnerId": a.userID, "boardId": aBoard, "stageId": aStage})
}

func TestBusinessStageMustBelongToBoard(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	defBoard, defStage := bizDefaultBoard(t, c.id)
	second, s1 := bizSecondBoard(t, c.id)
	contactStage := sqlContactStage(t, c.id)
	t.Run("a board without a stage takes that board's first stage", func(t *testing.T) {
		for _, body := range []string{fmt.Sprintf(`{"title": "On the second board", "boardId": %d}`, second),
			fmt.Sprintf(`{"title": "Both given", "boardId": %d, "stageId": %d}`, second, s1)} {
			if b, _ := bizCreate(t, c.key, body); b.BoardID != second || b.StageID != s1 {
				t.Errorf("POST %s: board %d stage %d; want board %d stage %d", body, b.BoardID, b.StageID, second, s1)
			}
		}
	})
	t.Run("a stage of another board or a contact stage is a 422 on stageId", func(t *testing.T) {
		for _, body := range []string{fmt.Sprintf(`{"title": "Mismatch", "stageId": %d}`, s1),
			fmt.Sprintf(`{"title": "Mismatch", "boardId": %d, "stageId": %d}`, defBoard, s1),
			fmt.Sprintf(`{"title": "Mismatch", "boardId": %d, "stageId": %d}`, second, defStage),
			fmt.Sprintf(`{"title": "Contact stage", "stageId": %d}`, contactStage)} {
			wantFields(t, call(t, "POST", "/v1/business", c.key, body), "stageId")
		}
	})
	t.Run("PATCH keeps the stage a stage of the board, and a refused one changes nothing", func(t *testing.T) {
		b, _ := bizCreate(t, c.key, `{"title": "Moving"}`)
		_, before := bizGet(t, c.key, b.ID)
		for _, body := range []string{fmt.Sprintf(`{"boardId": %d}`, second), fmt.Sprintf(`{"title": "Changed", "boardId": %d}`, second),
			fmt.Sprintf(`{"stageId": %d}`, s1), fmt.Sprintf(`{"stageId": %d}`, contactStage)} {
			wantFields(t, call(t, "PATCH", bizPath(b.ID), c.key, body), "stageId")
		}
		wantUnchanged(t, c.key, bizPath(b.ID), before)
		for _, bs := range [][2]int64{{second, s1}, {defBoard, defStage}} { // board and stage together, and back
			if got, _ := bizPatch(t, c.key, b.ID, fmt.Sprintf(`{"boardId": %d, "stageId": %d}`, bs[0], bs[1])); got.BoardID != bs[0] || got.StageID != bs[1] {
				t.Errorf("PATCH board %d and stage %d: board %d stage %d", bs[0], bs[1], got.BoardID, got.StageID)
			}
		}
	})
}

func TestBusinessValidationErrorsAre422PerField(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	target, _ := bizCreate(t, c.key, `{"title": "Target"}`)
	_, before := bizGet(t, c.key, target.ID)
	type tc struct {
		body     string
		fields   []string
		postOnly bool
	}
	cases := []tc{{`{}`, []string{"title"}, true}, {`{"value": 1}`, []string{"title"}, true},
		{`{"title": "", "private": "no", "color": 1, "id": 2}`, []string{"title", "private", "color", "id"}, false}}
	// By field, values (JSON text) it refuses; money, timestamps and references have tests of their own.
	for field, values := range map[string][]string{
		"title":      {"null", `""`, `"  "`, "5", `"` + strings.Repeat("é", 256) + `"`, `"a\u0000b"`},
		"private":    {`"no"`, "0", "null"},
		"position":   {"-1", "1.5", `"1"`, "2147483648", "null"},
		"reasonLost": {"5", `"` + strings.Repeat("a", 1001) + `"`},
	} {
		for _, v := range values {
			if field == "title" {
				cases = append(cases, tc{`{"title": ` + v + `}`, []string{field}, false})
			} else {
				cases = append(cases, tc{`{"title": "x", "` + field + `": ` + v + `}`, []string{field}, false})
			}
		}
	}
	for _, tt := range cases {
		t.Run(tt.body[:min(len(tt.body), 80)]+" is a 422", func(t *testing.T) {
			wantFields(t, call(t, "POST", "/v1/business", c.key, tt.body), tt.fields...)
			if !tt.postOnly {
				wantFields(t, call(t, "PATCH", bizPath(target.ID), c.key, tt.body), tt.fields...)
			}
		})
	}
	if n := countOf(t, c.key, "/v1/business/count"); n != 1 {
		t.Errorf("count = %d; want 1: refused POSTs create nothing", n)
	}
	wantUnchanged(t, c.key, bizPath(target.ID), before)

	t.Run("reasonLost may be a string or null", func(t *testing.T) {
		b, _ := bizCreate(t, c.key, `{"title": "Lost", "reasonLost": "Too expensive \"really\"", "statusId": 3}`)
		if b.ReasonLost == nil || *b.ReasonLost != `Too expensive "really"` {
			t.Errorf("reasonLost = %v; want the string sent", b.ReasonLost)
		}
		if b, _ = bizCreate(t, c.key, `{"title": "Not lost", "reasonLost": null}`); b.ReasonLost != nil {
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
