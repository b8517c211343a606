package main

// Tests of the reference resources (API.md section 4): users, organizations, stages, boards,
// statuses, currencies and countries.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// refKeys are the keys, in order, of each kind of reference object.
var refKeys = map[string][]string{
	"user":         {"id", "name", "surname", "email", "createdAt", "updatedAt"},
	"organization": {"id", "name", "createdAt", "updatedAt", "custom"},
	"stage":        {"id", "name", "boardId", "position", "createdAt", "updatedAt"},
	"country":      {"id", "code", "name", "alpha3", "createdAt", "updatedAt"},
	"board":        {"id", "name", "isDefault", "createdAt", "updatedAt"},
	"status":       {"id", "code", "name", "createdAt", "updatedAt"},
	"currency":     {"id", "code", "name", "minorUnit", "createdAt", "updatedAt"},
}

// Each kind of reference object has its members in order, and its list holds what the company has
// (or, for the code lists, the standard's). How every list pages is in handlers_test.go.
func TestReferenceListsHoldTheirObjects(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	create(t, c.key, "/v1/organizations", `{"name":"Acme"}`)
	for _, tt := range []struct {
		path, kind string
		all        int    // objects in all (0: 150 or more, ISO 4217's)
		sample     string // a member of every object, or one of them
	}{
		{"/v1/users", "user", 1, `"name":"Admin","surname":null,"email":null`},
		{"/v1/organizations", "organization", 1, `"name":"Acme"`},
		{"/v1/stages", "stage", 8, `"boardId":`}, // 3 contact stages, 5 of the default board
		{"/v1/boards", "board", 1, `"name":"Sales pipeline","isDefault":true`},
		{"/v1/statuses", "status", 3, `"id":2,"code":"won"`},
		{"/v1/currencies", "currency", 0, `"id":978,"code":"EUR","name":"Euro","minorUnit":2`},
		{"/v1/countries", "country", 249, `"id":724,"code":"ES","name":"Spain","alpha3":"ESP"`},
	} {
		all, sample := walkList[json.RawMessage](t, c.key, tt.path, "", 100), false
		for i, raw := range all {
			if diff := cmp.Diff(refKeys[tt.kind], jsonKeys(t, raw)); diff != "" {
				t.Errorf("GET %s: object %d keys (-want +got):\n%s", tt.path, i, diff)
			}
			sample = sample || bytes.Contains(raw, []byte(tt.sample))
		}
		if len(all) != tt.all && (tt.all != 0 || len(all) < 150) || !sample {
			t.Errorf("walking GET %s: %d objects, with %s: %v; want %d (ISO 4217: 150 or more), one with it", tt.path, len(all), tt.sample, sample, tt.all)
		}
	}
}

// An organization's name is required, not blank, at most 255 characters (not bytes); what every
// resource shares is in handlers_test.go.
func TestReferenceOrganizationNames(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	if o, _ := create(t, c.key, "/v1/organizations", `{"name":"`+strings.Repeat("é", 255)+`"}`); o["name"] != strings.Repeat("é", 255) {
		t.Errorf("name %q; want the 255 characters sent", o["name"])
	}
	guarded(t, c, apiResources[2], 0, func(t *testing.T, _ string) {
		for _, body := range []string{`{}`, `{"name":""}`, `{"name":"   "}`, `{"name":null}`, `{"name":"` + strings.Repeat("x", 256) + `"}`, `{"name":5}`} {
			wantFields(t, call(t, "POST", "/v1/organizations", c.key, body), "name")
		}
	})
}

func TestReferenceStagesFilterByBoard(t *testing.T) {
	t.Parallel()
	w, other := newRefWorld(t), newRefWorld(t)
	// stages returns "name boardId" of each stage GET /v1/stages?limit=100&query lists, sorted.
	stages := func(query string) []string {
		var out []string
		for _, raw := range listPage[json.RawMessage](t, w.key, "/v1/stages?limit=100"+query).Data {
			m := decode[map[string]json.RawMessage](t, raw)
			out = append(out, string(m["name"])+" "+string(m["boardId"]))
		}
		return slices.Sorted(slices.Values(out))
	}
	var contact, board []string
	for _, name := range []string{"Lead", "Prospect", "Customer"} {
		contact = append(contact, `"`+name+`" null`)
	}
	for _, name := range []string{"Qualified", "Contact made", "Proposal sent", "Negotiation", "Closing"} {
		board = append(board, fmt.Sprintf(`"%s" %d`, name, w.board))
	}
	for query, want := range map[string][]string{
		"": append(slices.Clone(contact), board...), fmt.Sprintf("&boardId=%d", w.board): board,
		// Another company's board, and a board id beyond 32 bits that does not exist, filter to nothing.
		fmt.Sprintf("&boardId=%d", other.board): nil, "&boardId=9999999999": nil,
	} {
		if diff := cmp.Diff(slices.Sorted(slices.Values(want)), stages(query)); diff != "" {
			t.Errorf("GET /v1/stages?limit=100%s (-want +got):\n%s", query, diff)
		}
	}
	for _, query := range []string{"abc", "0", "-1", "", "1.5", "1e3", fmt.Sprintf("%d&boardId=%d", w.board, w.board)} {
		wantProblem(t, call(t, "GET", "/v1/stages?boardId="+query, w.key, ""), http.StatusBadRequest, "invalid_parameter")
	}
}
