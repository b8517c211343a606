package main

// BENCH_ASSOC=1: associations (issue 45, API.md section 17), each scenario paired with its
// equivalent on the same server, in a first company of BENCH_CONTACTS business records and as many
// associations (associationsSQL).

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// assocLoad is added to loadVersion by a load with associations (BENCH_ASSOC=1).
const assocLoad = 200

// minAssocContacts is the least BENCH_CONTACTS of BENCH_ASSOC=1: the first contact's associations
// (a tenth) then fill 10 pages.
const minAssocContacts = 10000

// assocBatchItems is the size of the batch create, the most a batch takes.
const assocBatchItems = 1000

// assocOrganizations is the first company's organizations with BENCH_ASSOC (not organizations): each
// holds the 2,000th part of the business records, 500 of a million, as each of associationsSQL's
// spread contacts does.
const assocOrganizations = 2000

// assocScenarios are BENCH_ASSOC=1's, each against its equivalent with the target
// (assocTable). run puts the loaded data's ids in place of {contact}, {org}, {heavy} and {cursor}
// (assocPlaceholders): {contact} and {org} select as many business records, the 2,000th part of
// them; {heavy} is the contact of a tenth of them, and {cursor} the cursor of its last page of 100.
// The writes make new associations of random business records with random contacts: with a million
// of each, one in a million is there already (200, "unchanged").
var assocScenarios = []scenario{
	{name: "associated page", method: "GET", path: "/v1/business?limit=100&associated.contacts={contact}", target: 2,
		builtin: &scenario{name: "organizationId page", method: "GET", path: "/v1/business?limit=100&organizationId={org}"}},
	{name: "last page", method: "GET", path: "/v1/contacts/{heavy}/associations/business?limit=100&cursor={cursor}", target: 1.5,
		builtin: &scenario{name: "first page", method: "GET", path: "/v1/contacts/{heavy}/associations/business?limit=100"}},
	{name: "batch create", method: "POST", path: "/v1/associations/batch/create", body: assocBatchBody, items: assocBatchItems, target: 5,
		builtin: &scenario{name: "PUT", method: "PUT", path: "/v1/business/{bid}/associations/contacts/{id}", items: 1}},
}

// assocBatchBody is a batch create of assocBatchItems associations, each of a random business
// record with a random contact.
var assocBatchBody = `{"items":[` + strings.TrimSuffix(strings.Repeat(`{"from":{"object":"business","id":{bid}},"to":{"object":"contact","id":"{id}"}},`,
	assocBatchItems), ",") + `]}`

// associationsSQL associates company $1's $2 business records (loadSQL's, each numbered by its
// position) with its contacts: the first tenth with its first contact, and each of the others, g,
// with its contact 2 + g mod $3. With $3 nine tenths of the organizations, each of those contacts
// then has as many business records as each organization has (loadSQL gives g the organization 1
// + g mod assocOrganizations): 500 of a million. The associations' ids follow the records' and start
// at 1 in a new database: the load's are 1 to $2.
const associationsSQL = `WITH c AS (SELECT min(id) AS lo FROM contacts WHERE company_id = $1)
	INSERT INTO associations (company_id, a_kind, a_id, b_kind, b_id)
	SELECT $1, 'business', x.id, 'contacts', CASE WHEN x.position <= $2::integer / 10 THEN c.lo ELSE c.lo + 1 + x.position % $3::integer END
	FROM business AS x, c WHERE x.company_id = $1 ORDER BY x.id`

// assocPlaceholders sets the range of c's business ids, and returns what assocScenarios' paths take:
// {contact}, the contact of associationsSQL's g mod 1,800 = 0 (c.lo + 1), and {org}, the organization
// of loadSQL's g mod 2,000 = 0 (the first), each of the 2,000th part of the records; {heavy}, the contact
// of the first tenth (c.lo); and {cursor}, the cursor of its last page, walked to on the server at base.
func assocPlaceholders(ctx context.Context, dbURL, base string, c *company) (*strings.Replacer, error) {
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var org int64
	const q = `SELECT (SELECT min(id) FROM organizations WHERE company_id = $1), min(id), max(id) FROM business WHERE company_id = $1`
	if err := db.QueryRowContext(ctx, q, c.ID).Scan(&org, &c.blo, &c.bhi); err != nil {
		return nil, err
	}
	cursor, err := lastPageCursor(ctx, base, *c, c.lo)
	if err != nil {
		return nil, err
	}
	return strings.NewReplacer("{contact}", strconv.FormatInt(c.lo+1, 10), "{org}", strconv.FormatInt(org, 10),
		"{heavy}", strconv.FormatInt(c.lo, 10), "{cursor}", url.QueryEscape(cursor)), nil
}

// lastPageCursor walks the pages of 100 of the business records associated with c's contact id, and
// returns the cursor of the last: the nextCursor of the page before it.
func lastPageCursor(ctx context.Context, base string, c company, id int64) (string, error) {
	first := fmt.Sprintf("%s/v1/contacts/%d/associations/business?limit=100", base, id)
	cursor := ""
	for {
		var page struct {
			Pagination struct {
				HasMore    bool   `json:"hasMore"`
				NextCursor string `json:"nextCursor"`
			} `json:"pagination"`
		}
		u := first
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		if err := getJSON(ctx, u, c.Key, &page); err != nil {
			return "", err
		}
		if !page.Pagination.HasMore {
			break
		}
		cursor = page.Pagination.NextCursor
	}
	if cursor == "" {
		return "", fmt.Errorf("contact %d has one page of business records: no last page to measure", id)
	}
	return cursor, nil
}

// getJSON GETs url as key and decodes the answer into v; it fails unless the answer is 200.
func getJSON(ctx context.Context, url, key string, v any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("x-api-key", key)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s answered %s: %.300s", url, resp.Status, b)
	}
	return json.Unmarshal(b, v)
}

var placeholderID = regexp.MustCompile(`\{[bo]?id\}`)

// fillIDs puts a random contact id of c in place of each {id} of s, a random business id in place
// of each {bid} and a random organization id in place of each {oid}, as wrk.lua does.
func fillIDs(s string, c company) string {
	return placeholderID.ReplaceAllStringFunc(s, func(m string) string {
		lo, hi := c.lo, c.hi
		switch m {
		case "{bid}":
			lo, hi = c.blo, c.bhi
		case "{oid}":
			lo, hi = c.olo, c.ohi
		}
		return strconv.FormatInt(lo+rand.Int64N(hi-lo+1), 10)
	})
}

var cursorParam = regexp.MustCompile(`cursor=[^&]*`)

// assocTable renders BENCH_ASSOC=1's medians as markdown: each scenario against its equivalent, by
// the ratio assocRatio takes round by round (its median and range), against the target of issue 45.
func assocTable(picked []scenario, results [][2][]result) string {
	var b strings.Builder
	b.WriteString("| scenario | equivalent | req/s | equivalent req/s | ratio, paired by round: median (range) | p50 | equivalent p50 | target | errors (scenario; equivalent) |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---|---:|\n")
	rps, p50 := func(r result) float64 { return r.rps }, func(r result) float64 { return float64(r.p50) }
	for j, s := range picked {
		rs := results[j]
		var xs []float64
		var errs [2]int
		for k := range rs[0] {
			xs = append(xs, assocRatio(s, rs[0][k], rs[1][k]))
			errs[0], errs[1] = errs[0]+rs[0][k].errors, errs[1]+rs[1][k].errors
		}
		target, met := fmt.Sprintf("the time of a request at most %.2fx", s.target), middle(xs) <= s.target
		if s.items > 1 {
			target, met = fmt.Sprintf("associations a second at least %.2fx", s.target), middle(xs) >= s.target
		}
		if met {
			target += ": met"
		} else {
			target += ": **missed**"
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | %.2f (%.2f–%.2f) | %s | %s | %s | %d; %d |\n", assocDescribe(s), assocDescribe(*s.builtin),
			median(rs[0], rps), median(rs[1], rps), middle(xs), slices.Min(xs), slices.Max(xs), ms(median(rs[0], p50)), ms(median(rs[1], p50)),
			target, errs[0], errs[1])
	}
	return b.String()
}

// assocRatio is one round's ratio of a scenario to its equivalent: for a write of many items, the
// associations a second it writes over those its equivalent writes; else the time of its request
// over that of its equivalent's, by req/s (at the same concurrency).
func assocRatio(s scenario, r, eq result) float64 {
	if s.items > 1 {
		return r.rps * float64(s.items) / (eq.rps * float64(max(s.builtin.items, 1)))
	}
	return eq.rps / r.rps
}

// assocDescribe is the scenario's name and request, for a table, without a cursor's text or a batch's
// body.
func assocDescribe(s scenario) string {
	path := cursorParam.ReplaceAllString(s.path, "cursor=(its page's)")
	if s.items > 1 {
		return fmt.Sprintf("%s: `%s %s`, %d items, each of a random business record with a random contact", s.name, s.method, path, s.items)
	}
	return fmt.Sprintf("%s: `%s %s`", s.name, s.method, path)
}

// assocData describes BENCH_ASSOC=1's load of n contacts a company, for the report's header.
func assocData(n int) string {
	return fmt.Sprintf(" With BENCH_ASSOC, the first company holds %d organizations and %d business records (not %d and %d), and %d"+
		" associations of business records with contacts: its first contact's with the first tenth of the records (%d pages of 100), each of"+
		" the others' with one of its next %d contacts in turn, so that each of those has as many records (%d) as each organization.",
		assocOrganizations, n, organizations, n/businessPerContact, n, n/10/100, assocOrganizations*9/10, n/assocOrganizations)
}
