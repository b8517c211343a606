package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Tests of associations.go: associations between objects of two kinds, through the HTTP API.

// assocElem is an element of a list of associations.
type assocElem struct {
	Label     *string
	CreatedAt string
	Object    obj
}

// assocPath is the path of the association of kind's object id with toKind's toID.
func assocPath(kind string, id int64, toKind string, toID int64) string {
	return fmt.Sprintf("/v1/%s/%d/associations/%s/%d", kind, id, toKind, toID)
}

// associatedIDs walks the list of kind's object id's associations with toKind (query added) and
// returns "id label" of each element.
func associatedIDs(t *testing.T, key, kind string, id int64, toKind, query string, limit int) []string {
	t.Helper()
	var got []string
	for _, e := range walkList[assocElem](t, key, fmt.Sprintf("/v1/%s/%d/associations/%s", kind, id, toKind), query, limit) {
		label := "-"
		if e.Label != nil {
			label = *e.Label
		}
		got = append(got, fmt.Sprintf("%d %s", e.Object.id(), label))
	}
	return got
}

func TestAssociationsPutGetDeleteFromEitherEnd(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	deal, _ := create(t, c.key, "/v1/business", `{"title": "Deal"}`)
	ana, _ := create(t, c.key, "/v1/contacts", `{"name": "Ana"}`)
	bo, _ := create(t, c.key, "/v1/contacts", `{"name": "Bo"}`)

	// A PUT makes it (201) and again answers it (200); a label makes another one of the same pair.
	r := wantStatus(t, call(t, "PUT", assocPath("business", deal.id(), "contacts", ana.id()), c.key, `{"label": "champion"}`), http.StatusCreated)
	a := decode[obj](t, r.body)
	want := obj{"from": map[string]any{"object": "business", "id": jsonNum(deal.id())},
		"to": map[string]any{"object": "contact", "id": fmt.Sprint(ana.id())}, "label": "champion", "createdAt": a["createdAt"]}
	if diff := cmp.Diff(want, a); diff != "" || a["createdAt"] == nil {
		t.Errorf("PUT answer (-want +got):\n%s", diff)
	}
	again := wantStatus(t, call(t, "PUT", assocPath("business", deal.id(), "contacts", ana.id()), c.key, `{"label": "champion"}`), http.StatusOK)
	if string(again.body) != string(r.body) {
		t.Errorf("PUT again = %s; want %s", again.body, r.body)
	}
	// From the other end it is the same association, seen from there.
	other := decode[obj](t, wantStatus(t, call(t, "PUT", assocPath("contacts", ana.id(), "business", deal.id()), c.key, `{"label": "champion"}`), http.StatusOK).body)
	if other["createdAt"] != a["createdAt"] || fmt.Sprint(other["from"]) != fmt.Sprint(a["to"]) {
		t.Errorf("PUT from the other end = %v; want %v seen from its other end", other, a)
	}
	wantStatus(t, call(t, "PUT", assocPath("business", deal.id(), "contacts", ana.id()), c.key, ""), http.StatusCreated)
	wantStatus(t, call(t, "PUT", assocPath("business", deal.id(), "contacts", bo.id()), c.key, `{"label": null}`), http.StatusCreated)

	// Read from either end, oldest first, paged; a count counts each label.
	if diff := cmp.Diff([]string{fmt.Sprintf("%d champion", ana.id()), fmt.Sprintf("%d -", ana.id()), fmt.Sprintf("%d -", bo.id())},
		associatedIDs(t, c.key, "business", deal.id(), "contacts", "", 2)); diff != "" {
		t.Errorf("the deal's contacts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{fmt.Sprintf("%d champion", deal.id()), fmt.Sprintf("%d -", deal.id())},
		associatedIDs(t, c.key, "contacts", ana.id(), "business", "", 1)); diff != "" {
		t.Errorf("Ana's deals (-want +got):\n%s", diff)
	}
	if got := associatedIDs(t, c.key, "business", deal.id(), "contacts", "label=champion", 10); len(got) != 1 {
		t.Errorf("label=champion: %v; want Ana's alone", got)
	}
	for path, want := range map[string]int64{
		fmt.Sprintf("/v1/business/%d/associations/contacts/count", deal.id()):                3,
		fmt.Sprintf("/v1/business/%d/associations/contacts/count?label=champion", deal.id()): 1,
		fmt.Sprintf("/v1/contacts/%d/associations/business/count", bo.id()):                  1,
		fmt.Sprintf("/v1/contacts/%d/associations/organizations/count", bo.id()):             0,
	} {
		if n := countOf(t, c.key, path); n != want {
			t.Errorf("GET %s = %d; want %d", path, n, want)
		}
	}
	page := listPage[assocElem](t, c.key, fmt.Sprintf("/v1/contacts/%d/associations/business?expand[]=stage", ana.id()))
	if len(page.Data) != 2 || page.Data[0].Object["stage"] == nil || page.Data[0].Object["title"] != "Deal" {
		t.Errorf("Ana's deals with expand[]=stage: %+v; want the deal with its stage", page.Data)
	}

	// A DELETE names its label; a second is 404.
	wantStatus(t, call(t, "DELETE", assocPath("contacts", ana.id(), "business", deal.id())+"?label=champion", c.key, ""), http.StatusNoContent)
	wantProblem(t, call(t, "DELETE", assocPath("contacts", ana.id(), "business", deal.id())+"?label=champion", c.key, ""), http.StatusNotFound, "not_found")
	if got := associatedIDs(t, c.key, "contacts", ana.id(), "business", "", 10); len(got) != 1 || !strings.HasSuffix(got[0], " -") {
		t.Errorf("Ana's deals after the delete: %v; want the unlabelled one", got)
	}
	evs, _ := waitFeed(t, c.key, "", "type=association.*", 5)
	if diff := cmp.Diff([]string{"association.created", "association.created", "association.created", "association.deleted"}, typesOf(evs)); diff != "" {
		t.Errorf("association events (-want +got):\n%s", diff)
	}
}

func TestAssociationsRefuseBadRequestsOtherCompaniesAndScopes(t *testing.T) {
	t.Parallel()
	c, other := newTestCompany(t), newTestCompany(t)
	deal, _ := create(t, c.key, "/v1/business", `{"title": "Deal"}`)
	ana, _ := create(t, c.key, "/v1/contacts", `{"name": "Ana"}`)
	theirs, _ := create(t, other.key, "/v1/contacts", `{"name": "Theirs"}`)
	for _, tc := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"PUT", assocPath("business", deal.id(), "contacts", theirs.id()), "", http.StatusNotFound, "not_found"},
		{"PUT", assocPath("business", 999999999, "contacts", ana.id()), "", http.StatusNotFound, "not_found"},
		{"PUT", assocPath("business", deal.id(), "business", deal.id()), "", http.StatusNotFound, "not_found"},
		{"PUT", assocPath("business", deal.id(), "users", 1), "", http.StatusNotFound, "not_found"},
		{"PUT", assocPath("business", deal.id(), "contacts", ana.id()), `{"label": "Champion"}`, http.StatusUnprocessableEntity, "validation_failed"},
		{"PUT", assocPath("business", deal.id(), "contacts", ana.id()), `{"role": "x"}`, http.StatusUnprocessableEntity, "validation_failed"},
		{"PUT", "/v1/business/x/associations/contacts/1", "", http.StatusBadRequest, "invalid_id"},
		{"GET", fmt.Sprintf("/v1/contacts/%d/associations/business", theirs.id()), "", http.StatusNotFound, "not_found"},
		{"GET", fmt.Sprintf("/v1/contacts/%d/associations/business?label=A", ana.id()), "", http.StatusBadRequest, "invalid_parameter"},
		{"GET", fmt.Sprintf("/v1/contacts/%d/associations/business?cursor=x", ana.id()), "", http.StatusBadRequest, "invalid_parameter"},
		{"DELETE", assocPath("business", deal.id(), "contacts", ana.id()), "", http.StatusNotFound, "not_found"},
	} {
		wantProblem(t, call(t, tc.method, tc.path, c.key, tc.body), tc.status, tc.code)
	}
	// Writing needs write on both kinds, reading read on both.
	contactsOnly := *makeKey(t, c.key, "contacts:write", "business:read").Key
	wantProblem(t, call(t, "PUT", assocPath("contacts", ana.id(), "business", deal.id()), contactsOnly, ""), http.StatusForbidden, "insufficient_scope")
	wantProblem(t, call(t, "PUT", assocPath("business", deal.id(), "contacts", ana.id()), contactsOnly, ""), http.StatusForbidden, "insufficient_scope")
	wantProblem(t, call(t, "GET", fmt.Sprintf("/v1/contacts/%d/associations/organizations", ana.id()), contactsOnly, ""), http.StatusForbidden, "insufficient_scope")
	wantStatus(t, call(t, "GET", fmt.Sprintf("/v1/contacts/%d/associations/business", ana.id()), contactsOnly, ""), http.StatusOK)
	if n := eventCount(t, c.id, "association.created"); n != 0 {
		t.Errorf("%d association.created events after refused requests; want none", n)
	}
}

// jsonNum is n as decode reads a JSON number.
func jsonNum(n int64) any { return json.Number(fmt.Sprint(n)) }
