package main

// BENCH_SEARCH=1: search (issue 47, API.md section 20), each scenario paired with its equivalent on
// the same server, in the first company of BENCH_CONTACTS contacts of the plain load (loadSQL):
// contact g is "Name g", "Surname g mod 997", contact<g>@example.com, +34 600 <g mod 1,000,000 in 6
// digits>. The writes' cost is the plain mode's: make bench BASELINE=<rev> BENCH_ONLY=create,patch.

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// minSearchContacts is the least BENCH_CONTACTS of BENCH_SEARCH=1: {g} below is a contact.
const minSearchContacts = 10000

// searchPagings are the searches whose pages of 100 are walked to the end. "99" is issue 47's
// 50,000 matches or so: 61,076 contacts of a million (a number, surname, e-mail or phone number
// holds 99), prefix hits then contains hits. "surname 1" has no contains hit, which its last page
// proves: "Surname 1", "Surname 1x" and "Surname 1xx", 111 of loadSQL's 997 surnames (exact, then
// word prefix), a ninth of the contacts: 111,334 of a million.
var searchPagings = []string{"/v1/search?limit=100&objects=contacts&q=99", "/v1/search?limit=100&q=surname%201"}

// searchScenarios are BENCH_SEARCH=1's: the first page of a search against the contacts list page
// filtered by q of the same text (issue 47's target: at most 2x), and the last page of each of
// searchPagings against its first (at most 1.5x). run puts a contact's values in place of {email},
// {phone} and {name}, and the cursors of the last pages in place of {cursor0} and {cursor1}
// (searchPlaceholders).
var searchScenarios = []scenario{
	{name: "search e-mail", method: "GET", path: "/v1/search?q={email}", target: 2,
		builtin: &scenario{name: "list q e-mail", method: "GET", path: "/v1/contacts?q={email}"}},
	{name: "search phone", method: "GET", path: "/v1/search?q={phone}", target: 2,
		builtin: &scenario{name: "list q phone", method: "GET", path: "/v1/contacts?q={phone}"}},
	{name: "search name prefix", method: "GET", path: "/v1/search?q={name}", target: 2,
		builtin: &scenario{name: "list q name prefix", method: "GET", path: "/v1/contacts?q={name}"}},
	{name: "search rare substring", method: "GET", path: "/v1/search?q=ame%2077777", target: 2,
		builtin: &scenario{name: "list q rare substring", method: "GET", path: "/v1/contacts?q=ame%2077777"}},
	{name: "search last page", method: "GET", path: searchPagings[0] + "&cursor={cursor0}", target: 1.5,
		builtin: &scenario{name: "search first page", method: "GET", path: searchPagings[0]}},
	{name: "search last page, no contains hit", method: "GET", path: searchPagings[1] + "&cursor={cursor1}", target: 1.5,
		builtin: &scenario{name: "search first page, no contains hit", method: "GET", path: searchPagings[1]}},
}

// searchPlaceholders returns what searchScenarios' paths take: the e-mail and phone number of the
// contact g = 4,321 (its digits as written, with spaces), "Name 12" (a common name prefix: Name 12,
// 120-129, 1200-1299, ...), and the cursors of searchPagings' last pages, walked to on the server at
// base; and the numbers of searchPagings' hits.
func searchPlaceholders(ctx context.Context, base string, c *company) (*strings.Replacer, []int64, error) {
	g := 4321
	fill := []string{"{email}", url.QueryEscape(fmt.Sprintf("contact%d@example.com", g)),
		"{phone}", url.QueryEscape("+34 600 " + fmt.Sprintf("%06d", g)), "{name}", url.QueryEscape("Name 12")}
	var hits []int64
	for i, paging := range searchPagings {
		cursor, n, err := lastCursor(ctx, base, c, paging)
		if err != nil {
			return nil, nil, err
		}
		fill = append(fill, fmt.Sprintf("{cursor%d}", i), url.QueryEscape(cursor))
		hits = append(hits, n)
	}
	return strings.NewReplacer(fill...), hits, nil
}

// lastCursor walks the pages of paging to the last and returns its cursor, and the search's count.
func lastCursor(ctx context.Context, base string, c *company, paging string) (string, int64, error) {
	var count struct{ Count int64 }
	if err := getJSON(ctx, base+strings.Replace(paging, "/v1/search?limit=100&", "/v1/search/count?", 1), c.Key, &count); err != nil {
		return "", 0, err
	}
	cursor := ""
	for {
		var page struct {
			Pagination struct {
				HasMore    bool   `json:"hasMore"`
				NextCursor string `json:"nextCursor"`
			} `json:"pagination"`
		}
		u := base + paging
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		if err := getJSON(ctx, u, c.Key, &page); err != nil {
			return "", 0, err
		}
		if !page.Pagination.HasMore {
			break
		}
		cursor = page.Pagination.NextCursor
	}
	if cursor == "" {
		return "", 0, fmt.Errorf("%s has one page: no last page to measure", paging)
	}
	return cursor, count.Count, nil
}

// searchData describes BENCH_SEARCH=1's data for the report's header.
func searchData(hits []int64) string {
	s := " With BENCH_SEARCH, the paged searches"
	for i, paging := range searchPagings {
		s += " `" + paging + "` (" + strconv.FormatInt(hits[i], 10) + " hits)"
	}
	return s + "."
}
