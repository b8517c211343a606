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

// searchPaging is the search whose pages of 100 are walked to the end: "Surname 1", "Surname 1x"
// and "Surname 1xx", 111 of loadSQL's 997 surnames (exact, then word prefix), a ninth of the
// contacts: 55,000 of 500,000, 111,000 of a million.
const searchPaging = "/v1/search?limit=100&q=surname%201"

// searchScenarios are BENCH_SEARCH=1's: the first page of a search against the contacts list page
// filtered by q of the same text (issue 47's target: at most 2x), and the last page of searchPaging
// against its first (at most 1.5x). run puts a contact's values in place of {email}, {phone} and
// {name}, and the cursor of the last page in place of {cursor} (searchPlaceholders).
var searchScenarios = []scenario{
	{name: "search e-mail", method: "GET", path: "/v1/search?q={email}", target: 2,
		builtin: &scenario{name: "list q e-mail", method: "GET", path: "/v1/contacts?q={email}"}},
	{name: "search phone", method: "GET", path: "/v1/search?q={phone}", target: 2,
		builtin: &scenario{name: "list q phone", method: "GET", path: "/v1/contacts?q={phone}"}},
	{name: "search name prefix", method: "GET", path: "/v1/search?q={name}", target: 2,
		builtin: &scenario{name: "list q name prefix", method: "GET", path: "/v1/contacts?q={name}"}},
	{name: "search rare substring", method: "GET", path: "/v1/search?q=ame%2077777", target: 2,
		builtin: &scenario{name: "list q rare substring", method: "GET", path: "/v1/contacts?q=ame%2077777"}},
	{name: "search last page", method: "GET", path: searchPaging + "&cursor={cursor}", target: 1.5,
		builtin: &scenario{name: "search first page", method: "GET", path: searchPaging}},
}

// searchPlaceholders returns what searchScenarios' paths take: the e-mail and phone number of the
// contact g = 4,321 (its digits as written, with spaces), "Name 12" (a common name prefix: Name 12,
// 120-129, 1200-1299, ...), and the cursor of searchPaging's last page, walked to on the server at
// base; and the number of searchPaging's hits.
func searchPlaceholders(ctx context.Context, base string, c *company) (*strings.Replacer, int64, error) {
	var count struct{ Count int64 }
	if err := getJSON(ctx, base+strings.Replace(searchPaging, "/v1/search?limit=100&", "/v1/search/count?", 1), c.Key, &count); err != nil {
		return nil, 0, err
	}
	cursor := ""
	for pages := 0; ; pages++ {
		var page struct {
			Pagination struct {
				HasMore    bool   `json:"hasMore"`
				NextCursor string `json:"nextCursor"`
			} `json:"pagination"`
		}
		u := base + searchPaging
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		if err := getJSON(ctx, u, c.Key, &page); err != nil {
			return nil, 0, err
		}
		if !page.Pagination.HasMore {
			break
		}
		cursor = page.Pagination.NextCursor
	}
	if cursor == "" {
		return nil, 0, fmt.Errorf("%s has one page: no last page to measure", searchPaging)
	}
	g := 4321
	return strings.NewReplacer("{email}", url.QueryEscape(fmt.Sprintf("contact%d@example.com", g)),
		"{phone}", url.QueryEscape("+34 600 "+fmt.Sprintf("%06d", g)), "{name}", url.QueryEscape("Name 12"),
		"{cursor}", url.QueryEscape(cursor)), count.Count, nil
}

// searchData describes BENCH_SEARCH=1's data for the report's header.
func searchData(hits int64) string {
	return " With BENCH_SEARCH, the paged search `" + searchPaging + "` has " + strconv.FormatInt(hits, 10) + " hits."
}
