package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The behaviour every resource shares (API.md sections 1 to 7), tested once over the resources it
// applies to: keys, tenancy, path ids, create, merge patch, If-Match, delete, request bodies, query
// parameters, methods, and walking the lists. What is particular to one resource is in its own file.

// apiRes is a resource as these tests see it.
type apiRes struct {
	path     string
	post     string // a valid POST body; "" when the resource has no POST
	writable bool   // PATCH and DELETE
	count    bool   // GET path/count
	item     bool   // GET path/{id}
	insert   string // without a POST: SQL that makes an object of company $1, RETURNING id
}

// apiResources are the API's resources in the order the slices below rely on: writable ones, then
// the others with a POST, those with objects of a company, and the global ones.
var apiResources = []apiRes{
	{path: "/v1/contacts", post: `{"name":"Ana","city":"Madrid"}`, writable: true, count: true, item: true},
	{path: "/v1/business", post: `{"title":"Deal","reasonLost":"Price"}`, writable: true, count: true, item: true},
	{path: "/v1/organizations", post: `{"name":"Acme"}`, item: true},
	{path: "/v1/users", item: true, insert: `INSERT INTO users (company_id, name) VALUES ($1, 'Other') RETURNING id`},
	{path: "/v1/stages", item: true, insert: `INSERT INTO stages (company_id, name) VALUES ($1, 'Other') RETURNING id`},
	{path: "/v1/boards", item: true, insert: `INSERT INTO boards (company_id, name) VALUES ($1, 'Other') RETURNING id`},
	{path: "/v1/statuses"}, {path: "/v1/currencies"}, {path: "/v1/countries"},
}

var writableResources, postResources, itemResources = apiResources[:2], apiResources[:3], apiResources[:6]

// newObject makes an object of the resource for company c and returns its id.
func (res apiRes) newObject(t *testing.T, c testCompany) int64 {
	t.Helper()
	if res.post != "" {
		o, _ := create(t, c.key, res.path, res.post)
		return o.id()
	}
	return sqlID(t, res.insert, c.id)
}

// route is one endpoint: a method, a path and, for POST and PATCH, a valid body.
type route struct{ method, path, body string }

// routes returns the resource's endpoints, the object ones for the object id.
func (res apiRes) routes(id int64) []route {
	rs := []route{{"GET", res.path, ""}}
	if res.count {
		rs = append(rs, route{"GET", res.path + "/count", ""})
	}
	if res.post != "" {
		rs = append(rs, route{"POST", res.path, res.post})
	}
	return append(rs, res.itemRoutes(id)...)
}

// itemRoutes returns the resource's endpoints of the object id.
func (res apiRes) itemRoutes(id int64) []route {
	var rs []route
	if res.item {
		rs = append(rs, route{"GET", itemPath(res.path, id), ""})
	}
	if res.writable || res.path == "/v1/organizations" { // organizations: without ETags
		rs = append(rs, route{"PATCH", itemPath(res.path, id), res.post}, route{"DELETE", itemPath(res.path, id), ""})
	}
	return rs
}

// withMembers returns the object body with members (`"a":1,"b":2`) added at its end.
func withMembers(body, members string) string {
	return strings.TrimSuffix(body, "}") + "," + members + "}"
}

// guarded makes an object of res for c (when res has objects of a company) and runs requests with
// its path in a subtest named for res; then the object must be as it was, and the list must hold
// made more objects, no others. With made 0 no row of the company may have changed at all.
func guarded(t *testing.T, c testCompany, res apiRes, made int, requests func(t *testing.T, target string)) {
	t.Helper()
	var target string
	var was response
	if res.item {
		target = itemPath(res.path, res.newObject(t, c))
		was = mustGet(t, c.key, target)
	}
	before, rows := listIDs(t, c.key, res.path), dumpCompany(t, c.id)
	t.Run(res.path, func(t *testing.T) { requests(t, target) })
	if n := len(listIDs(t, c.key, res.path)); n != len(before)+made {
		t.Errorf("%s holds %d objects; want %d: refused requests change nothing", res.path, n, len(before)+made)
	}
	if res.item {
		wantUnchanged(t, c.key, target, was)
	}
	if diff := cmp.Diff(rows, dumpCompany(t, c.id)); made == 0 && diff != "" {
		t.Errorf("the refused requests changed rows (-before +after):\n%s", diff)
	}
}

// listIDs returns the ids of every object of the list at path, walking its pages.
func listIDs(t *testing.T, key, path string) []int64 {
	t.Helper()
	return idsOf(walkList[obj](t, key, path, "", 100))
}

// TestEveryRouteAnswersABadKeyWith401: missing, unknown, revoked or malformed, or two x-api-key
// headers, every route answers the same 401, with WWW-Authenticate.
func TestEveryRouteAnswersABadKeyWith401(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	keys := []struct{ name, key string }{{"no", ""}, {"an unknown", "rdx_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}, {"a revoked", revokedKey(t, c.id)},
		{"not a", "hello"}, {"one character off from a", c.key[:len(c.key)-1] + string(c.key[len(c.key)-1]^1)}}
	var first *problemBody
	want401 := func(t *testing.T, r response) {
		t.Helper()
		p := wantProblem(t, r, http.StatusUnauthorized, "unauthorized")
		if r.header.Get("WWW-Authenticate") == "" {
			t.Error("401 without WWW-Authenticate")
		}
		if p.RequestID = ""; first == nil {
			first = &p
		} else if diff := cmp.Diff(*first, p); diff != "" {
			t.Errorf("401 bodies differ (-first +this):\n%s", diff)
		}
	}
	for _, res := range apiResources {
		for _, rt := range res.routes(c.userID) {
			for _, k := range keys {
				t.Run(fmt.Sprintf("%s %s with %s key", rt.method, rt.path, k.name), func(t *testing.T) {
					want401(t, call(t, rt.method, rt.path, k.key, rt.body))
				})
			}
		}
	}
	t.Run("two x-api-key headers, both valid", func(t *testing.T) {
		req, err := http.NewRequest("GET", testEnv.baseURL+"/v1/contacts", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header["X-Api-Key"] = []string{c.key, c.key}
		want401(t, doRequest(t, req))
	})
}

// TestAnotherCompanysObjectIs404AndUnchanged: another company's object is answered exactly like an id
// no object has, and B's requests change nothing of A's.
func TestAnotherCompanysObjectIs404AndUnchanged(t *testing.T) {
	t.Parallel()
	a, b := newTestCompany(t), newTestCompany(t)
	for _, res := range itemResources {
		t.Run(res.path, func(t *testing.T) {
			t.Parallel()
			theirs, mine := res.newObject(t, a), res.newObject(t, b)
			before := mustGet(t, a.key, itemPath(res.path, theirs))
			rts := res.itemRoutes(theirs)
			if res.writable { // {} changes nothing, but another company's object is still not there
				rts = append(rts, route{"PATCH", rts[0].path, "{}"})
			}
			for _, rt := range rts {
				for _, ifMatch := range []string{"", "*", before.header.Get("ETag")} {
					if ifMatch != "" && rt.method == "GET" {
						continue
					}
					p := wantProblem(t, call(t, rt.method, rt.path, b.key, rt.body, "If-Match", ifMatch), http.StatusNotFound, "not_found")
					for _, none := range []int64{999999999, 1 << 60, 1<<63 - 1} { // ids no object has
						r := call(t, rt.method, itemPath(res.path, none), b.key, rt.body, "If-Match", ifMatch)
						q := wantProblem(t, r, http.StatusNotFound, "not_found")
						p.RequestID, q.RequestID = "", ""
						if diff := cmp.Diff(q, p); diff != "" {
							t.Errorf("%s of another company's object vs of none (-none +other's):\n%s", rt.method, diff)
						}
					}
				}
			}
			wantUnchanged(t, a.key, itemPath(res.path, theirs), before)
			// B's list, walked a page of one at a time, holds B's objects and none of A's.
			ids := idsOf(walkList[obj](t, b.key, res.path, "", 1))
			if slices.Contains(ids, theirs) || !slices.Contains(ids, mine) {
				t.Errorf("B's list %v; want %d and not A's %d", ids, mine, theirs)
			}
			if res.count {
				if n := countOf(t, b.key, res.path+"/count"); n != 1 {
					t.Errorf("B's count = %d; want 1", n)
				}
			}
		})
	}
}

// TestBadPathIDsAre400 (API.md section 3): a path id is a positive decimal integer in canonical form;
// no other spelling of an object's id finds it, nor does hostile text, and a request with one
// changes nothing.
func TestBadPathIDsAre400(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ids := map[string]string{}
	for _, res := range itemResources {
		ids[res.path] = fmt.Sprint(res.newObject(t, c))
	}
	before := dumpCompany(t, c.id)
	t.Cleanup(func() {
		if diff := cmp.Diff(before, dumpCompany(t, c.id)); diff != "" {
			t.Errorf("the refused requests changed rows (-before +after):\n%s", diff)
		}
	})
	hostile := []string{"%00", "%FF", "1%00"}
	for _, s := range append(slices.Clone(badIDNumbers), injections...) {
		hostile = append(hostile, url.PathEscape(s))
	}
	for _, res := range itemResources {
		id := ids[res.path]
		for _, bad := range append([]string{"abc", "0", "-1", "-" + id, "01", "0" + id, "00" + id, "+1", "+" + id, "%2B" + id, "1.5",
			id + ".0", "1e3", "0x1", "0x" + id, "9223372036854775808", "18446744073709551617", "99999999999999999999",
			"%20" + id, id + "%20", "１"}, hostile...) {
			for _, rt := range res.itemRoutes(1) {
				path := res.path + "/" + bad
				t.Run(rt.method+" "+path, func(t *testing.T) {
					t.Parallel()
					wantProblem(t, call(t, rt.method, path, c.key, rt.body), http.StatusBadRequest, "invalid_id")
				})
			}
		}
	}
}

func TestCreateAnswers201WithLocationAndETagAndReadsBackEqual(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for _, res := range postResources {
		t.Run(res.path, func(t *testing.T) {
			t.Parallel()
			before := time.Now().Add(-time.Second)
			o, r := create(t, c.key, res.path, res.post)
			path := itemPath(res.path, o.id())
			if loc := r.header.Get("Location"); loc != path {
				t.Errorf("Location = %q; want %s", loc, path)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q; want application/json", ct)
			}
			if etag := r.header.Get("ETag"); res.writable && !regexp.MustCompile(`^"[^"]+"$`).MatchString(etag) {
				t.Errorf("ETag = %q; want a strong entity tag", etag)
			}
			created, err := time.Parse(time.RFC3339Nano, o["createdAt"].(string))
			if err != nil || o["createdAt"] != o["updatedAt"] || created.Before(before) || created.After(time.Now().Add(time.Second)) {
				t.Errorf("createdAt %v, updatedAt %v; want both about now and equal", o["createdAt"], o["updatedAt"])
			}
			g := mustGet(t, c.key, path)
			if !bytes.Equal(g.body, r.body) || g.header.Get("ETag") != r.header.Get("ETag") ||
				g.header.Get("Content-Type") != "application/json" {
				t.Errorf("GET after POST:\n%s %s\nwant the POST answer\n%s %s", g.header.Get("ETag"), g.body, r.header.Get("ETag"), r.body)
			}
		})
	}
}

// patchable is what the tests of writes need of a resource with PATCH; its file has the tables.
type patchable struct {
	res                apiRes
	keys               []string                                 // the members of its objects, in order
	full               func(t *testing.T, c testCompany) string // a body that sets every field
	nullable, required []string
	change             string // a format of a PATCH that changes one field: fmt.Sprintf(change, n)
	good, bad, ref     string // members: a good one, a bad one, a reference to nothing
	badField, refField string
	valid              func(t *testing.T, c testCompany) []string         // bodies stored as sent
	invalid            func(t *testing.T, c testCompany) []invalidCase    // bodies refused
	others             func(t *testing.T, a testCompany) map[string]int64 // reference field: an object of a
}

// invalidCase is a body refused with a 422 naming fields, in order; postOnly when it lacks a field
// a POST needs, which a PATCH may leave out.
type invalidCase struct {
	body     string
	fields   []string
	postOnly bool
}

// badValueCases makes a case of each value (JSON text) each field refuses: the value beside a good
// required field (which every POST needs), or alone for required itself.
func badValueCases(required string, bad map[string][]string) []invalidCase {
	var cases []invalidCase
	for field, values := range bad {
		for _, v := range values {
			body := fmt.Sprintf(`{%q:"x",%q:%s}`, required, field, v)
			if field == required {
				body = fmt.Sprintf(`{%q:%s}`, field, v)
			}
			cases = append(cases, invalidCase{body, []string{field}, false})
		}
	}
	return cases
}

var apiTimeRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

var patchables = []patchable{{
	res: writableResources[0], keys: contactKeys, valid: contactValid, invalid: contactInvalid,
	others: func(t *testing.T, a testCompany) map[string]int64 {
		return map[string]int64{"organizationId": sqlOrganization(t, a.id, "A org"), "assignedToId": a.userID, "stageId": sqlContactStage(t, a.id)}
	},
	full: func(t *testing.T, c testCompany) string {
		return fmt.Sprintf(`{"name":"Ana","surname":"P","dni":"1Z","jobTitle":"CEO","email":"a@example.com",
			"secondaryEmail":"b@example.com","phone":"1","mobilePhone":"2","urlAvatar":"https://x.com/a.png","address":"A 1",
			"city":"Madrid","withSales":true,"countryId":724,"classification":3,"stageId":%d,"organizationId":%d,"assignedToId":%d}`,
			sqlContactStage(t, c.id), sqlOrganization(t, c.id, "Acme"), c.userID)
	},
	nullable: []string{"surname", "dni", "jobTitle", "email", "secondaryEmail", "phone", "mobilePhone", "urlAvatar",
		"address", "city", "countryId", "classification", "stageId", "organizationId", "assignedToId"},
	required: []string{"name", "withSales"},
	change:   `{"city":"City %d"}`,
	good:     `"city":"Sevilla"`, bad: `"email":"x"`, badField: "email", ref: `"countryId":999`, refField: "countryId",
}, {
	res: writableResources[1], keys: bizKeys, valid: businessValid, invalid: businessInvalid,
	others: func(t *testing.T, a testCompany) map[string]int64 {
		board, stage := bizDefaultBoard(t, a.id)
		return map[string]int64{"organizationId": sqlOrganization(t, a.id, "A org"), "userOwnerId": a.userID, "boardId": board, "stageId": stage}
	},
	full: func(t *testing.T, c testCompany) string {
		return fmt.Sprintf(`{"title":"Full","value":10.50,"deadline":"2026-12-01T10:00:00.000Z","dateWon":"2026-11-01T10:00:00.000Z",
			"reasonLost":"none","organizationId":%d,"private":true}`, sqlOrganization(t, c.id, "Acme"))
	},
	nullable: []string{"value", "deadline", "organizationId", "reasonLost", "dateWon"},
	required: []string{"title", "statusId", "boardId", "stageId", "private", "currencyId", "userOwnerId", "position"},
	change:   `{"title":"Title %d"}`,
	good:     `"title":"Changed"`, bad: `"value":1.234`, badField: "value", ref: `"statusId":999`, refField: "statusId",
}}

// TestValidValuesAreStoredAsSent: each valid body, POSTed, and PATCHed onto an object made with the
// least body, is answered and read back with every member as sent, and every other as a create of
// the least body has it (but for what the server sets anew: id, timestamps, position).
func TestValidValuesAreStoredAsSent(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for _, pr := range patchables {
		leastBody := fmt.Sprintf(`{%q:"Least"}`, pr.required[0])
		least, _ := create(t, c.key, pr.res.path, leastBody)
		for _, body := range pr.valid(t, c) {
			t.Run(pr.res.path+" "+body[:min(len(body), 60)], func(t *testing.T) {
				t.Parallel()
				sent := decode[obj](t, []byte(body))
				_, posted := create(t, c.key, pr.res.path, body)
				path := createPath(t, c.key, pr.res.path, leastBody)
				patched := wantStatus(t, call(t, "PATCH", path, c.key, body), http.StatusOK)
				for _, r := range []response{posted, patched, mustGet(t, c.key, path)} {
					if diff := cmp.Diff(pr.keys, jsonKeys(t, r.body)); diff != "" {
						t.Errorf("%s %s: members (-want +got):\n%s", r.method, r.path, diff)
					}
					got, want := decode[obj](t, r.body), maps.Clone(least)
					maps.Copy(want, sent)
					for _, k := range []string{"id", "createdAt", "updatedAt", "position"} {
						if v, ok := got[k]; ok && sent[k] == nil {
							want[k] = v
						}
					}
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("%s %s with %s (-want +got):\n%s", r.method, r.path, body, diff)
					}
					if !apiTimeRE.MatchString(str(got["createdAt"])) || !apiTimeRE.MatchString(str(got["updatedAt"])) {
						t.Errorf("%s %s: createdAt %v, updatedAt %v; want UTC with 3 fractional digits", r.method, r.path, got["createdAt"], got["updatedAt"])
					}
				}
			})
		}
	}
}

// TestInvalidValuesAre422NamingTheFields: each refused body is a 422 naming its fields, in a POST and
// a PATCH, and changes nothing.
func TestInvalidValuesAre422NamingTheFields(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for _, pr := range patchables {
		cases := pr.invalid(t, c)
		guarded(t, c, pr.res, 0, func(t *testing.T, target string) {
			for _, tt := range cases {
				t.Run(tt.body[:min(len(tt.body), 80)], func(t *testing.T) {
					t.Parallel()
					r := call(t, "POST", pr.res.path, c.key, tt.body)
					wantFields(t, r, tt.fields...)
					if r.header.Get("Location") != "" || r.header.Get("ETag") != "" {
						t.Errorf("a 422 with Location %q, ETag %q", r.header.Get("Location"), r.header.Get("ETag"))
					}
					if !tt.postOnly {
						wantFields(t, call(t, "PATCH", target, c.key, tt.body), tt.fields...)
					}
				})
			}
		})
	}
}

// TestOtherCompanysReferencesAre422LikeNone: a POST or PATCH naming, in a reference field, another
// company's object is the same 422 as one naming an id no object has.
func TestOtherCompanysReferencesAre422LikeNone(t *testing.T) {
	t.Parallel()
	a, c := newTestCompany(t), newTestCompany(t)
	for _, pr := range patchables {
		refs := pr.others(t, a)
		guarded(t, c, pr.res, 0, func(t *testing.T, target string) {
			for field, other := range refs {
				for _, m := range []route{{"POST", pr.res.path, ""}, {"PATCH", target, ""}} {
					refusal := func(id int64) problemBody {
						p := wantFields(t, call(t, m.method, m.path, c.key, withMembers(pr.res.post, fmt.Sprintf(`"%s":%d`, field, id))), field)
						p.RequestID = ""
						return p
					}
					if diff := cmp.Diff(refusal(1<<60), refusal(other)); diff != "" {
						t.Errorf("%s with another company's %s vs with no object's (-none +other's):\n%s", m.method, field, diff)
					}
				}
			}
		})
	}
}

func TestPatchIsAMergePatch(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for _, pr := range patchables {
		t.Run(pr.res.path, func(t *testing.T) {
			t.Parallel()
			o, created := create(t, c.key, pr.res.path, pr.full(t, c))
			path := itemPath(pr.res.path, o.id())
			// patch PATCHes body, checks the answer is before with want's members set, and that GET agrees.
			patch := func(t *testing.T, before response, body string, want obj) response {
				t.Helper()
				r := call(t, "PATCH", path, c.key, body)
				wantStatus(t, r, http.StatusOK)
				got, was := decode[obj](t, r.body), decode[obj](t, before.body)
				for k, v := range want {
					was[k] = v
				}
				was["updatedAt"] = got["updatedAt"]
				if diff := cmp.Diff(was, got); diff != "" {
					t.Errorf("PATCH %s (-want +got):\n%s", body, diff)
				}
				wantUnchanged(t, c.key, path, r)
				return r
			}
			t.Run("a value sets its field and leaves the absent ones", func(t *testing.T) {
				body := fmt.Sprintf(pr.change, 0)
				created = patch(t, created, body, decode[obj](t, []byte(body)))
			})
			t.Run("a failed PATCH changes nothing, not even its good fields", func(t *testing.T) {
				for _, f := range pr.required { // null on a required field
					wantFields(t, call(t, "PATCH", path, c.key, `{"`+f+`":null}`), f)
				}
				for _, tt := range []struct{ member, field string }{{pr.bad, pr.badField}, {pr.ref, pr.refField},
					{`"nickname":"A"`, "nickname"}, {`"createdAt":"2020-01-01T00:00:00.000Z"`, "createdAt"}, {pr.good, ""}} {
					if r := call(t, "PATCH", path, c.key, "{"+pr.good+","+tt.member+"}"); tt.field != "" {
						wantFields(t, r, tt.field)
					} else { // the good field named twice
						wantProblem(t, r, http.StatusBadRequest, "invalid_json")
					}
				}
				wantUnchanged(t, c.key, path, created)
			})
			t.Run("{} changes nothing, not even updatedAt and the ETag", func(t *testing.T) {
				time.Sleep(5 * time.Millisecond) // a write now would move updatedAt
				for _, body := range []string{`{}`, " { } "} {
					r := call(t, "PATCH", path, c.key, body)
					if !bytes.Equal(r.body, created.body) || r.header.Get("ETag") != created.header.Get("ETag") {
						t.Errorf("PATCH %q = %s %s; want the unchanged object %s", body, r.header.Get("ETag"), r.body, created.body)
					}
				}
				wantUnchanged(t, c.key, path, created)
			})
			t.Run("each change moves updatedAt and the ETag, even quickly in a row, and not createdAt", func(t *testing.T) {
				prev := created
				for i := 1; i <= 3; i++ {
					r := patch(t, prev, fmt.Sprintf(pr.change, i), decode[obj](t, []byte(fmt.Sprintf(pr.change, i))))
					was, got := decode[obj](t, prev.body), decode[obj](t, r.body)
					if got["createdAt"] != was["createdAt"] || got["updatedAt"].(string) <= was["updatedAt"].(string) {
						t.Errorf("PATCH %d: createdAt %v, updatedAt %v; want createdAt %v and updatedAt after %v",
							i, got["createdAt"], got["updatedAt"], was["createdAt"], was["updatedAt"])
					}
					if tag := r.header.Get("ETag"); tag == "" || tag == prev.header.Get("ETag") {
						t.Errorf("PATCH %d: ETag %q; want a new one (was %q)", i, tag, prev.header.Get("ETag"))
					}
					prev = r
				}
				created = prev
			})
			t.Run("null clears each nullable field and leaves the others", func(t *testing.T) {
				for _, f := range pr.nullable {
					if decode[obj](t, created.body)[f] == nil {
						t.Fatalf("%s is null before the PATCH", f)
					}
					created = patch(t, created, `{"`+f+`":null}`, obj{f: nil})
				}
			})
		})
	}
}

func TestIfMatchGuardsPatchAndDelete(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for _, pr := range patchables {
		t.Run(pr.res.path, func(t *testing.T) {
			t.Parallel()
			o, created := create(t, c.key, pr.res.path, pr.res.post)
			path := itemPath(pr.res.path, o.id())
			stale := created.header.Get("ETag")
			r := call(t, "PATCH", path, c.key, fmt.Sprintf(pr.change, 1))
			wantStatus(t, r, http.StatusOK)
			current := r.header.Get("ETag")
			if current == stale {
				t.Fatalf("ETag %s did not change with the PATCH", current)
			}
			for _, tt := range []struct{ name, method, ifMatch, body string }{
				{"PATCH with the ETag from before another PATCH", "PATCH", stale, fmt.Sprintf(pr.change, 2)},
				{"PATCH {} with a stale ETag", "PATCH", stale, `{}`},
				{"PATCH with a weak ETag", "PATCH", "W/" + current, fmt.Sprintf(pr.change, 2)},
				{"PATCH with the ETag quoted twice", "PATCH", `"` + current + `"`, fmt.Sprintf(pr.change, 2)},
				{"PATCH with an ETag that never was", "PATCH", `"999999"`, fmt.Sprintf(pr.change, 2)},
				{"PATCH with a list of stale ETags", "PATCH", stale + `, "999999"`, fmt.Sprintf(pr.change, 2)},
				{"DELETE with the ETag from before a PATCH", "DELETE", stale, ""},
				{"DELETE with an ETag that never was", "DELETE", `"nope"`, ""},
			} {
				t.Run(tt.name+" is 412 and changes nothing", func(t *testing.T) {
					wantProblem(t, call(t, tt.method, path, c.key, tt.body, "If-Match", tt.ifMatch), http.StatusPreconditionFailed, "precondition_failed")
					wantUnchanged(t, c.key, path, r)
				})
			}
			for i, ifMatch := range []string{"", stale + ", ", "*"} { // the current ETag, a list holding it, any
				if ifMatch != "*" {
					ifMatch += current
				}
				r = call(t, "PATCH", path, c.key, fmt.Sprintf(pr.change, 10+i), "If-Match", ifMatch)
				if current = r.header.Get("ETag"); r.status != http.StatusOK {
					t.Errorf("PATCH If-Match %s = %d; want 200 (body %s)", ifMatch, r.status, r.body)
				}
			}
			for _, d := range []struct{ path, ifMatch string }{{path, current}, {itemPath(pr.res.path, pr.res.newObject(t, c)), "*"}} {
				if r := call(t, "DELETE", d.path, c.key, "", "If-Match", d.ifMatch); r.status != http.StatusNoContent {
					t.Errorf("DELETE If-Match %s = %d; want 204 (body %s)", d.ifMatch, r.status, r.body)
				}
			}
		})
	}
}

func TestDeleteIs204ThenGoneAndCountFollows(t *testing.T) {
	t.Parallel()
	for _, res := range writableResources {
		t.Run(res.path, func(t *testing.T) {
			t.Parallel()
			c := newTestCompany(t)
			empty := countOf(t, c.key, res.path+"/count")
			gone, keep := itemPath(res.path, res.newObject(t, c)), itemPath(res.path, res.newObject(t, c))
			if n := countOf(t, c.key, res.path+"/count"); empty != 0 || n != 2 {
				t.Errorf("count of a new company = %d, after 2 POSTs %d; want 0 and 2", empty, n)
			}
			if r := call(t, "DELETE", gone, c.key, ""); r.status != http.StatusNoContent || len(r.body) != 0 {
				t.Fatalf("DELETE %s = %d %q; want 204 with no body", gone, r.status, r.body)
			}
			for _, rt := range []route{{"DELETE", gone, ""}, {"GET", gone, ""}, {"PATCH", gone, res.post}} {
				wantProblem(t, call(t, rt.method, rt.path, c.key, rt.body), http.StatusNotFound, "not_found")
			}
			mustGet(t, c.key, keep)
			r := mustGet(t, c.key, res.path+"/count")
			if string(r.body) != "{\"count\":1}\n" || r.header.Get("Content-Type") != "application/json" {
				t.Errorf("GET %s/count = %q (%s); want {\"count\":1} as application/json", res.path, r.body, r.header.Get("Content-Type"))
			}
		})
	}
}

func TestReadOnlyAndUnknownFieldsAre422PerField(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	members := []struct{ member, field string }{
		{`"id":"5"`, "id"}, {`"id":5`, "id"}, {`"userCreatorId":1`, "userCreatorId"},
		{`"createdAt":"2026-01-01T00:00:00.000Z"`, "createdAt"}, {`"updatedAt":"2026-01-01T00:00:00.000Z"`, "updatedAt"},
		{`"nickname":"Anita"`, "nickname"}, {`"ID":1`, "ID"},
		{`"id":1,"nickname":null,"createdAt":"x"`, "id nickname createdAt"},
	}
	for _, res := range postResources {
		guarded(t, c, res, 0, func(t *testing.T, target string) {
			for _, m := range members {
				wantFields(t, call(t, "POST", res.path, c.key, withMembers(res.post, m.member)), strings.Fields(m.field)...)
				if res.writable {
					wantFields(t, call(t, "PATCH", target, c.key, "{"+m.member+"}"), strings.Fields(m.field)...)
				}
			}
		})
	}
}

func TestMalformedBodiesAre400(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	bodies := []string{`{`, `[]`, `"x"`, `null`, `1`, "  \n", `{} {}`, `{"a":"b"}x`, `{"a":"b"} x`, `{"a":"b",}`,
		`{"a" "b"}`, `{a:"b"}`, `{'a':'b'}`, `{"a":'b'}`, `{"a":"b`, `{"a":"b","a":"c"}`, `{"a":1,"b":2,"a":null}`,
		`{"a":"b","\u0061":"c"}`, "{\"a\":\"b\xffc\"}", "{\"\xc3a\":\"b\"}", "{\"a\":\"b\xed\xa0\x80c\"}", "\xef\xbb\xbf{}"}
	for _, res := range postResources {
		guarded(t, c, res, 0, func(t *testing.T, target string) {
			for _, body := range append(bodies, "") { // "": no body at all, but a JSON Content-Type
				r := call(t, "POST", res.path, c.key, body, "Content-Type", "application/json")
				wantProblem(t, r, http.StatusBadRequest, "invalid_json")
				if res.writable {
					wantProblem(t, call(t, "PATCH", target, c.key, body, "Content-Type", "application/json"), http.StatusBadRequest, "invalid_json")
				}
			}
		})
	}
}

func TestBodiesMustBeUncompressedJSON(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	refused := []string{"", "text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded", "application/json; charset=latin1",
		"application/jsonx", "application/merge-patch+json", "application/json; foo=bar"}
	accepted := []string{"application/json", "application/json; charset=utf-8", "application/json;charset=UTF-8", "Application/JSON"}
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	for _, res := range postResources {
		guarded(t, c, res, len(accepted), func(t *testing.T, target string) {
			wantProblem(t, call(t, "POST", res.path, c.key, ""), http.StatusUnsupportedMediaType, "unsupported_media_type")
			rts := []route{{"POST", res.path, res.post}}
			if res.writable {
				rts = append(rts, route{"PATCH", target, `{}`})
			}
			for _, rt := range rts {
				for _, ct := range refused {
					wantProblem(t, call(t, rt.method, rt.path, c.key, rt.body, "Content-Type", ct), http.StatusUnsupportedMediaType, "unsupported_media_type")
				}
				zipped.Reset()
				zw.Reset(&zipped)
				io.WriteString(zw, rt.body)
				zw.Close()
				for _, enc := range []struct{ name, body string }{{"gzip", zipped.String()}, {"deflate", rt.body}, {"br", rt.body}, {"x-custom", rt.body}} {
					r := call(t, rt.method, rt.path, c.key, enc.body, "Content-Encoding", enc.name)
					wantProblem(t, r, http.StatusUnsupportedMediaType, "unsupported_media_type")
					if got := r.header.Get("Accept-Encoding"); got != "identity" {
						t.Errorf("Content-Encoding %s: Accept-Encoding = %q; want identity", enc.name, got)
					}
				}
				for _, ct := range accepted {
					if r := call(t, rt.method, rt.path, c.key, rt.body, "Content-Type", ct); r.status >= 300 {
						t.Errorf("%s with Content-Type %q: %d; want it accepted (body %s)", rt.method, ct, r.status, r.body)
					}
				}
			}
		})
	}
}

func TestBodyOver1MiBIs413(t *testing.T) {
	t.Parallel()
	for _, res := range postResources {
		t.Run(res.path, func(t *testing.T) {
			t.Parallel()
			c := newTestCompany(t)
			const maxBodyBytes = 1 << 20 // API.md section 8
			// padded is the valid body of exactly n bytes: spaces before the closing brace.
			padded := func(n int) string {
				return strings.TrimSuffix(res.post, "}") + strings.Repeat(" ", n-len(res.post)) + "}"
			}
			guarded(t, c, res, 1, func(t *testing.T, target string) {
				create(t, c.key, res.path, padded(maxBodyBytes))
				for _, body := range []string{padded(maxBodyBytes + 1), withMembers(res.post, `"x":"`+strings.Repeat("a", 1<<20)+`"`)} {
					wantProblem(t, call(t, "POST", res.path, c.key, body), http.StatusRequestEntityTooLarge, "body_too_large")
					if res.writable {
						wantProblem(t, call(t, "PATCH", target, c.key, body), http.StatusRequestEntityTooLarge, "body_too_large")
					}
				}
				// A reader of unknown length makes the client send the body chunked, without Content-Length.
				req, err := http.NewRequest("POST", testEnv.baseURL+res.path, io.MultiReader(strings.NewReader(padded(maxBodyBytes+1))))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("x-api-key", c.key)
				req.Header.Set("Content-Type", "application/json")
				r := doRequest(t, req)
				if req.ContentLength > 0 {
					t.Errorf("request ContentLength %d; want the body sent chunked", req.ContentLength)
				}
				wantProblem(t, r, http.StatusRequestEntityTooLarge, "body_too_large")
			})
		})
	}
}

func TestUnknownAndRepeatedQueryParametersAre400(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	type bad struct{ query, param string }
	for _, res := range apiResources {
		guarded(t, c, res, 0, func(t *testing.T, target string) {
			for _, rt := range res.routes(0) {
				if strings.HasSuffix(rt.path, "/0") {
					rt.path = target
				}
				cases := []bad{{"?foo=1", "foo"}, {"?foo", "foo"}, {"?expand[]=stage&foo=1", "foo"}}
				switch {
				case rt.path == res.path && rt.method == "GET":
					cases = append(cases, bad{"?limit=5&foo=1", "foo"}, bad{"?limit=1&limit=2", "limit"})
					for _, limit := range []string{"0", "101", "abc", "-1", "1.5", "07", "+5", ""} {
						cases = append(cases, bad{"?limit=" + limit, "limit"})
					}
				case strings.HasSuffix(rt.path, "/count"):
					cases = append(cases, bad{"?q=a&q=b", "q"}, bad{"?limit=5", "limit"}, bad{"?cursor=abc", "cursor"}, bad{"?sort=id", "sort"})
				}
				for _, tt := range cases {
					p := wantProblem(t, call(t, rt.method, rt.path+tt.query, c.key, rt.body), http.StatusBadRequest, "invalid_parameter")
					if !strings.Contains(p.Detail, tt.param) {
						t.Errorf("%s %s%s: detail %q; want it to name %s", rt.method, rt.path, tt.query, p.Detail, tt.param)
					}
				}
			}
		})
	}
}

func TestEveryPathAnswersAWrongMethodWith405AndAllow(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for _, res := range apiResources {
		allowed := map[string][]string{}
		for _, rt := range res.routes(1) {
			allowed[rt.path] = append(allowed[rt.path], rt.method)
		}
		delete(allowed, res.path+"/count") // {id} patterns take "count" too: PATCH there is a bad id
		for path, methods := range allowed {
			// Allow names the path's methods in this order, HEAD with GET.
			want := slices.DeleteFunc([]string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"},
				func(m string) bool { return m != "HEAD" && !slices.Contains(methods, m) })
			for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
				if slices.Contains(methods, m) {
					continue
				}
				t.Run(m+" "+path, func(t *testing.T) {
					r := call(t, m, path, c.key, "")
					wantProblem(t, r, http.StatusMethodNotAllowed, "method_not_allowed")
					if got := r.header.Get("Allow"); got != strings.Join(want, ", ") {
						t.Errorf("Allow = %q; want %q", got, strings.Join(want, ", "))
					}
				})
			}
		}
	}
}

func TestListPagesWalkEveryObjectOnceAndAgreeWithCount(t *testing.T) {
	t.Parallel()
	for _, res := range apiResources {
		t.Run(res.path, func(t *testing.T) {
			t.Parallel()
			c := newTestCompany(t)
			empty := `{"data":[],"pagination":{"limit":25,"hasMore":false,"nextCursor":null}}` + "\n"
			if r := mustGet(t, c.key, res.path); res.count && string(r.body) != empty || r.header.Get("Content-Type") != "application/json" {
				t.Errorf("GET %s of a new company = %s (%s); want application/json, and for a company's own objects %s",
					res.path, r.body, r.header.Get("Content-Type"), empty)
			}
			var made []int64
			for i := 0; res.item && i < 26; i++ {
				made = append(made, res.newObject(t, c))
			}
			raws := walkList[json.RawMessage](t, c.key, res.path, "", 100)
			all := make([]int64, len(raws))
			for i, raw := range raws {
				all[i] = decode[obj](t, raw).id()
			}
			if !slices.IsSorted(all) || len(slices.Compact(slices.Clone(all))) != len(all) || len(slices.DeleteFunc(slices.Clone(made),
				func(id int64) bool { return slices.Contains(all, id) })) > 0 {
				t.Fatalf("ids %v; want each once, in ascending order, %v among them", all, made)
			}
			if res.count {
				if n := countOf(t, c.key, res.path+"/count"); n != int64(len(all)) {
					t.Errorf("count = %d; want %d, as the list", n, len(all))
				}
			}
			for _, limit := range []int{1, 7, 25, 100} {
				if limit == 1 && len(all) > 100 {
					continue
				}
				pages := 1
				got := walkList[obj](t, c.key, res.path, "", limit, func(int, []obj) { pages++ })
				if diff := cmp.Diff(all, idsOf(got)); diff != "" {
					t.Errorf("limit %d: ids over all pages (-want +got):\n%s", limit, diff)
				}
				if want := max(1, (len(all)+limit-1)/limit); pages != want {
					t.Errorf("limit %d: %d pages; want %d", limit, pages, want)
				}
			}
			if p := listPage[obj](t, c.key, res.path); p.Pagination.Limit != 25 || len(p.Data) != min(25, len(all)) {
				t.Errorf("GET %s: %d objects, pagination %+v; want %d and limit 25", res.path, len(p.Data), p.Pagination, min(25, len(all)))
			}
			for i := 0; res.item && i < 5; i++ { // list elements are the objects GET returns
				if g := mustGet(t, c.key, itemPath(res.path, all[i])).body; string(g) != string(raws[i])+"\n" {
					t.Errorf("list element %s; want, byte for byte, what GET answers, %s", raws[i], g)
				}
			}
		})
	}
}

func TestUnfilteredCountsStayExactUnderConcurrentWrites(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for _, res := range writableResources {
		ids := make(chan int64, 40)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 5 {
					o, _ := create(t, c.key, res.path, res.post)
					ids <- o.id()
				}
			})
		}
		wg.Wait()
		close(ids)
		for range 4 { // and delete 12 of them, 4 at a time
			wg.Go(func() {
				for range 3 {
					wantStatus(t, call(t, "DELETE", itemPath(res.path, <-ids), c.key, ""), http.StatusNoContent)
				}
			})
		}
		wg.Wait()
		wantProblem(t, call(t, "POST", res.path, c.key, `{}`), http.StatusUnprocessableEntity, "validation_failed")
		rows := sqlID(t, `SELECT count(*) FROM `+strings.TrimPrefix(res.path, "/v1/")+` WHERE company_id = $1`, c.id)
		if got := countOf(t, c.key, res.path+"/count"); got != 28 || rows != 28 {
			t.Errorf("GET %s/count = %d with %d rows; want 28 (40 created, 12 deleted)", res.path, got, rows)
		}
	}
}
