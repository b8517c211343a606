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
)

// What is particular to business records: the defaults of a create, positions, exact money,
// timestamps, and the board a stage belongs to. The tables here are run by the shared tests of
// handlers_test.go.

// bizKeys are the members of every business object, in the order the API writes them.
var bizKeys = []string{"id", "title", "value", "deadline", "private", "position", "dateWon", "reasonLost", "statusId",
	"organizationId", "currencyId", "userOwnerId", "userCreatorId", "boardId", "stageId", "createdAt", "updatedAt", "custom"}

// bizNoSuchID is an id no object has: identities count from 1 and tests make a few thousand rows.
const bizNoSuchID = 1 << 60

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

// businessValid are business bodies stored exactly as sent: references that exist, and values at
// the limits of each rule.
func businessValid(t *testing.T, c testCompany) []string {
	org := sqlOrganization(t, c.id, "Acme")
	owner := sqlID(t, `INSERT INTO users (company_id, name) VALUES ($1, 'Second user') RETURNING id`, c.id)
	return []string{
		fmt.Sprintf(`{"title":"Good refs","currencyId":840,"statusId":3,"organizationId":%d,"userOwnerId":%d}`, org, owner),
		`{"title":"Lost","reasonLost":"Too expensive \"really\"","statusId":3}`,
		`{"title":"Not lost","reasonLost":null}`,
		`{"title":"  Padded  ","private":true,"position":2147483647}`,
		`{"title":"Full","value":10.50,"deadline":"2026-12-01T10:00:00.000Z","dateWon":"2026-11-01T10:00:00.000Z","reasonLost":"none"}`,
	}
}

// businessInvalid are business bodies refused with a 422 naming fields: each value each field
// refuses (money, timestamps, references and stages of other boards too), and bodies wrong in several
// fields at once.
func businessInvalid(t *testing.T, c testCompany) []invalidCase {
	// Read back, an instant outside years 1 to 9999 in UTC would not be a timestamp the API accepts.
	times := []string{`"tomorrow"`, `"2026-13-01T00:00:00Z"`, `5`, `"2026-12-01"`, `"2026-12-01 10:00:00Z"`,
		`"2026-12-01T10:00:00"`, `true`, `""`, `{}`, `"9999-12-31T23:30:00-01:00"`, `"0001-01-01T00:30:00+01:00"`}
	none := fmt.Sprint(bizNoSuchID)
	// A stage of another board, or a contact stage, is no stage of the business's board.
	defBoard, defStage := bizDefaultBoard(t, c.id)
	second, s1 := bizSecondBoard(t, c.id)
	bad := map[string][]string{
		"title":      {"null", `""`, `"  "`, "5", `"` + strings.Repeat("é", 256) + `"`, `"a\u0000b"`},
		"private":    {`"no"`, "0", "null"},
		"position":   {"-1", "1.5", `"1"`, "2147483648", "null"},
		"reasonLost": {"5", `"` + strings.Repeat("a", 1001) + `"`},
		"value": {"-1", "-0.5", "-0", "1.234", `"12"`, "1e400", "10000000000000", "1e13", "true", "false",
			"0.001", "1e-3", "{}", "[1]", `""`},
		"deadline": times, "dateWon": times,
		// References to nothing: ids no row has, beyond the column's or int64's range, 0, negative,
		// a string, a fraction; currency 1 is no ISO 4217 code.
		"statusId":       {"999", "9999999999", "9223372036854775808", `"1"`},
		"currencyId":     {"1", "99999999999", "0"},
		"organizationId": {none, "1.5"},
		"userOwnerId":    {none, "-1"},
		"boardId":        {none, "9223372036854775807"},
		"stageId":        {none, fmt.Sprint(s1), fmt.Sprint(sqlContactStage(t, c.id))},
	}
	return append(badValueCases("title", bad),
		invalidCase{`{}`, []string{"title"}, true}, invalidCase{`{"value": 1}`, []string{"title"}, true},
		invalidCase{`{"title": "", "private": "no", "color": 1, "id": 2}`, []string{"title", "private", "color", "id"}, false},
		invalidCase{fmt.Sprintf(`{"title":"x","boardId":%d,"stageId":%d}`, defBoard, s1), []string{"stageId"}, false},
		invalidCase{fmt.Sprintf(`{"title":"x","boardId":%d,"stageId":%d}`, second, defStage), []string{"stageId"}, false})
}

func TestBusinessCreateDefaults(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	board, stage := bizDefaultBoard(t, c.id)
	// Every member in order, unset ones null; the "open" status, the company's currency, board and
	// the board's first stage, the key's user as owner (API.md section 3).
	first, r := create(t, c.key, "/v1/business", `{"title": "Minimal"}`)
	want := fmt.Sprintf(`{"id":%d,"title":"Minimal","value":null,"deadline":null,"private":false,"position":%v,"dateWon":null,`+
		`"reasonLost":null,"statusId":1,"organizationId":null,"currencyId":978,"userOwnerId":%d,"userCreatorId":%d,"boardId":%d,`+
		`"stageId":%d,"createdAt":"%v","updatedAt":"%v","custom":{}}`+"\n", first.id(), first["position"], c.userID, c.userID, board, stage,
		first["createdAt"], first["createdAt"])
	if string(r.body) != want {
		t.Errorf("POST {\"title\": \"Minimal\"} = %s; want %s", r.body, want)
	}
	position := func(body string) int64 { o, _ := create(t, c.key, "/v1/business", body); return num(o["position"]) }
	second := position(`{"title": "Second in the stage"}`)
	if second <= num(first["position"]) {
		t.Errorf("second business: position %d; want after %v (end of the stage)", second, first["position"])
	}
	if third := position(`{"title": "Placed", "position": 0}`); third != 0 {
		t.Errorf("business created with position 0 has position %d", third)
	}
	if fourth := position(`{"title": "After the placed one"}`); fourth <= second {
		t.Errorf("fourth business: position %d; want after %d", fourth, second)
	}
	// After the largest position a stage can hold, a create is still a 201: the client sent nothing wrong.
	position(`{"title": "At the largest position", "position": 2147483647}`)
	position(`{"title": "After it"}`)
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
		positions[i] = num(decode[obj](t, r.body)["position"])
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
			o, r := create(t, c.key, "/v1/business", `{"title": "Money", "value": `+in+`}`)
			g := mustGet(t, c.key, itemPath("/v1/business", o.id()))
			// The text is the exact decimal, a JSON number a client decodes without loss.
			sent, _ := new(big.Rat).SetString(in)
			read, ok := new(big.Rat).SetString(bizValue(t, g.body))
			if got := bizValue(t, r.body); got != want || bizValue(t, g.body) != want || !ok || sent.Cmp(read) != 0 {
				t.Errorf("value %s: POST answered %s, GET %s; want %s", in, got, bizValue(t, g.body), want)
			}
		})
	}
	// A PATCH of a value, or of null, is the shared tests' of handlers_test.go.
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

func TestBusinessTimestampsAreReadBackInUTCWithMilliseconds(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for _, field := range []string{"deadline", "dateWon"} {
		for in, want := range map[string]string{"2026-12-01T10:00:00+02:00": "2026-12-01T08:00:00.000Z",
			"2026-12-01T10:00:00.123456Z": "2026-12-01T10:00:00.123Z", "2026-12-01T10:00:00Z": "2026-12-01T10:00:00.000Z",
			"2026-12-01T10:00:00.1-05:30": "2026-12-01T15:30:00.100Z", "2026-11-21T09:30:00.123Z": "2026-11-21T09:30:00.123Z"} {
			o, _ := create(t, c.key, "/v1/business", fmt.Sprintf(`{"title": "Dated", %q: %q}`, field, in))
			if got, again := o[field], decode[obj](t, mustGet(t, c.key, itemPath("/v1/business", o.id())).body)[field]; got != want || again != want {
				t.Errorf("%s %s: POST answered %v, GET %v; want %s", field, in, got, again, want)
			}
		}
	}
}

func TestBusinessStageMustBelongToBoard(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	defBoard, defStage := bizDefaultBoard(t, c.id)
	second, s1 := bizSecondBoard(t, c.id)
	contactStage := sqlContactStage(t, c.id)
	// wantPlace fails unless the business o is on the board in the stage.
	wantPlace := func(t *testing.T, what string, o obj, board, stage int64) {
		if num(o["boardId"]) != board || num(o["stageId"]) != stage {
			t.Errorf("%s: board %v stage %v; want board %d stage %d", what, o["boardId"], o["stageId"], board, stage)
		}
	}
	t.Run("a board without a stage takes that board's first stage", func(t *testing.T) {
		for _, body := range []string{fmt.Sprintf(`{"title": "On the second board", "boardId": %d}`, second),
			fmt.Sprintf(`{"title": "Both given", "boardId": %d, "stageId": %d}`, second, s1)} {
			o, _ := create(t, c.key, "/v1/business", body)
			wantPlace(t, "POST "+body, o, second, s1)
		}
	})
	// A stage of another board or a contact stage in a POST is in businessInvalid.
	t.Run("PATCH keeps the stage a stage of the board, and a refused one changes nothing", func(t *testing.T) {
		path := createPath(t, c.key, "/v1/business", `{"title": "Moving"}`)
		before := mustGet(t, c.key, path)
		for _, body := range []string{fmt.Sprintf(`{"boardId": %d}`, second), fmt.Sprintf(`{"title": "Changed", "boardId": %d}`, second),
			fmt.Sprintf(`{"stageId": %d}`, s1), fmt.Sprintf(`{"stageId": %d}`, contactStage)} {
			wantFields(t, call(t, "PATCH", path, c.key, body), "stageId")
		}
		wantUnchanged(t, c.key, path, before)
		for _, bs := range [][2]int64{{second, s1}, {defBoard, defStage}} { // board and stage together, and back
			body := fmt.Sprintf(`{"boardId": %d, "stageId": %d}`, bs[0], bs[1])
			wantPlace(t, "PATCH "+body, decode[obj](t, wantStatus(t, call(t, "PATCH", path, c.key, body), http.StatusOK).body), bs[0], bs[1])
		}
	})
}
