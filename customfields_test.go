package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// defineField POSTs a custom field definition and returns its id.
func defineField(t *testing.T, key, body string) int64 {
	t.Helper()
	o, _ := create(t, key, "/v1/customFields", body)
	return o.id()
}

// customOf returns the custom member of the object at path, as JSON text.
func customOf(t *testing.T, key, path string) string {
	t.Helper()
	o := decode[map[string]json.RawMessage](t, mustGet(t, key, path).body)
	return string(o["custom"])
}

func TestCustomFieldDefinitions(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	id := defineField(t, c.key, `{"object": "contact", "key": "tier", "label": "Tier", "type": "select",
		"options": [{"value": "gold", "label": "Gold"}, {"value": "silver"}]}`)
	path := itemPath("/v1/customFields", id)
	got := decode[obj](t, mustGet(t, c.key, path).body)
	want := obj{"id": json.Number(fmt.Sprint(id)), "object": "contact", "key": "tier", "label": "Tier", "type": "select",
		"options": []any{map[string]any{"value": "gold", "label": "Gold"}, map[string]any{"value": "silver", "label": "silver"}},
		"required": false, "unique": false, "createdAt": got["createdAt"], "updatedAt": got["updatedAt"]}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GET %s (-want +got):\n%s", path, diff)
	}

	t.Run("a taken key is 409 field_key_taken, on the same object only", func(t *testing.T) {
		wantProblem(t, call(t, "POST", "/v1/customFields", c.key, `{"object": "contact", "key": "tier", "label": "T", "type": "text"}`),
			http.StatusConflict, "field_key_taken")
		defineField(t, c.key, `{"object": "business", "key": "tier", "label": "T", "type": "text"}`)
	})
	t.Run("bad definitions are 422 naming the member", func(t *testing.T) {
		for body, field := range map[string]string{
			`{"object": "contact", "key": "Tier", "label": "T", "type": "text"}`:                                      "key",
			`{"object": "contact", "key": "a123456789012345678901234567890123456789x", "label": "T", "type": "text"}`: "key",
			`{"object": "deal", "key": "x", "label": "T", "type": "text"}`:                                           "object",
			`{"object": "contact", "key": "x", "label": "T", "type": "color"}`:                                       "type",
			`{"object": "contact", "key": "x", "label": "T", "type": "select"}`:                                      "options",
			`{"object": "contact", "key": "x", "label": "T", "type": "select", "options": []}`:                       "options",
			`{"object": "contact", "key": "x", "label": "T", "type": "select", "options": [{"value": "A"}]}`:         "options",
			`{"object": "contact", "key": "x", "label": "T", "type": "select", "options": [{"value": "a"}, {"value": "a"}]}`: "options",
			`{"object": "contact", "key": "x", "label": "T", "type": "text", "options": [{"value": "a"}]}`:           "options",
			`{"object": "contact", "key": "x", "label": "T", "type": "boolean", "unique": true}`:                     "unique",
			`{"object": "contact", "key": "x", "label": "T"}`:                                                        "type",
		} {
			wantFields(t, call(t, "POST", "/v1/customFields", c.key, body), field)
		}
	})
	t.Run("object, key and type are fixed; label and options change", func(t *testing.T) {
		for _, body := range []string{`{"key": "rank"}`, `{"type": "text"}`, `{"object": "business"}`} {
			wantFields(t, call(t, "PATCH", path, c.key, body), strings.Split(strings.Trim(body, `{}"`), `"`)[0])
		}
		r := wantStatus(t, call(t, "PATCH", path, c.key, `{"label": "Level", "options": [{"value": "gold", "label": "Gold"}, {"value": "silver"}, {"value": "bronze"}]}`), http.StatusOK)
		if o := decode[obj](t, r.body); o["label"] != "Level" || len(o["options"].([]any)) != 3 {
			t.Errorf("PATCH = %s", r.body)
		}
	})
	t.Run("removing an option in use is 409 option_in_use", func(t *testing.T) {
		create(t, c.key, "/v1/contacts", `{"name": "Ana", "custom": {"tier": "silver"}}`)
		wantProblem(t, call(t, "PATCH", path, c.key, `{"options": [{"value": "gold"}]}`), http.StatusConflict, "option_in_use")
		wantStatus(t, call(t, "PATCH", path, c.key, `{"options": [{"value": "gold"}, {"value": "silver"}]}`), http.StatusOK)
	})
	t.Run("required on a field with objects lacking it is 409 field_values_conflict", func(t *testing.T) {
		create(t, c.key, "/v1/contacts", `{"name": "Bo"}`)
		wantProblem(t, call(t, "PATCH", path, c.key, `{"required": true}`), http.StatusConflict, "field_values_conflict")
		wantProblem(t, call(t, "POST", "/v1/customFields", c.key, `{"object": "contact", "key": "must", "label": "M", "type": "text", "required": true}`),
			http.StatusConflict, "field_values_conflict")
	})
	t.Run("unique on repeated values is 409 field_values_conflict", func(t *testing.T) {
		code := defineField(t, c.key, `{"object": "organization", "key": "code", "label": "Code", "type": "text"}`)
		create(t, c.key, "/v1/organizations", `{"name": "A", "custom": {"code": "X1"}}`)
		create(t, c.key, "/v1/organizations", `{"name": "B", "custom": {"code": "x1"}}`)
		wantProblem(t, call(t, "PATCH", itemPath("/v1/customFields", code), c.key, `{"unique": true}`), http.StatusConflict, "field_values_conflict")
	})
	t.Run("another company's field is 404", func(t *testing.T) {
		other := newTestCompany(t)
		wantProblem(t, call(t, "GET", path, other.key, ""), http.StatusNotFound, "not_found")
		wantProblem(t, call(t, "PATCH", path, other.key, `{"label": "x"}`), http.StatusNotFound, "not_found")
		wantProblem(t, call(t, "DELETE", path, other.key, ""), http.StatusNotFound, "not_found")
	})
	t.Run("the list filters by object", func(t *testing.T) {
		for object, n := range map[string]int{"contact": 1, "business": 1, "organization": 1, "deal": 0} {
			if got := listPage[obj](t, c.key, "/v1/customFields?object="+object).Data; len(got) != n {
				t.Errorf("object=%s: %d fields; want %d", object, len(got), n)
			}
		}
	})
	t.Run("scopes customFields:read and write", func(t *testing.T) {
		ro := decode[obj](t, wantStatus(t, call(t, "POST", "/v1/apiKeys", c.key, `{"scopes": ["customFields:read"]}`), http.StatusCreated).body)["key"].(string)
		mustGet(t, ro, path)
		wantProblem(t, call(t, "PATCH", path, ro, `{"label": "x"}`), http.StatusForbidden, "insufficient_scope")
		none := decode[obj](t, wantStatus(t, call(t, "POST", "/v1/apiKeys", c.key, `{"scopes": ["contacts:read"]}`), http.StatusCreated).body)["key"].(string)
		wantProblem(t, call(t, "GET", "/v1/customFields", none, ""), http.StatusForbidden, "insufficient_scope")
	})
	t.Run("delete frees the key and a new field starts empty", func(t *testing.T) {
		wantStatus(t, call(t, "DELETE", path, c.key, ""), http.StatusNoContent)
		wantProblem(t, call(t, "DELETE", path, c.key, ""), http.StatusNotFound, "not_found")
		defineField(t, c.key, `{"object": "contact", "key": "tier", "label": "Tier", "type": "text"}`)
		for _, o := range listPage[obj](t, c.key, "/v1/contacts").Data {
			if got := o["custom"].(map[string]any); got["tier"] != nil {
				t.Errorf("custom = %v; want tier null", got)
			}
		}
	})
}

func TestCustomFieldLimit(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for i := range maxCustomFields {
		if err := testEnv.st.write(t.Context(), func(tx *tx) error {
			_, err := createCustomField(t.Context(), tx, tenant{companyID: c.id, userID: c.userID}, customField{Object: "business", Key: fmt.Sprintf("f%d", i), Label: "F", Type: "boolean"})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	wantProblem(t, call(t, "POST", "/v1/customFields", c.key, `{"object": "business", "key": "one_more", "label": "T", "type": "text"}`),
		http.StatusUnprocessableEntity, "field_limit")
	defineField(t, c.key, `{"object": "contact", "key": "one_more", "label": "T", "type": "text"}`)
}
