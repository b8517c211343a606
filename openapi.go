package main

import (
	"bytes"
	"cmp"
	_ "embed"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// The OpenAPI document this server serves at GET /v1/openapi.json: the embedded api/openapi.json,
// and with an API key the same document with custom typed by the company's custom fields.

// openAPIDocument is the OpenAPI 3.1 description of this server. openapi_test.go holds its operations
// equal to the routes of addRoutes; clients/check.sh holds the server's answers to it.
//
//go:embed api/openapi.json
var openAPIDocument []byte

// handleCustomOpenAPI answers GET /v1/openapi.json: without a key the embedded document (custom a
// free-form object); with one (withAuth resolved it, withRateLimit counted it), custom typed by the
// company's fields, for generated clients.
func handleCustomOpenAPI(st *store, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		if t.companyID == 0 {
			writeJSON(w, r, http.StatusOK, openAPIDocument)
			return
		}
		var fields []customField
		err := st.read(r.Context(), rowsInto[customField](&fields, customFields.selectSQL+` ORDER BY id`, t.companyID))
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		var doc map[string]any
		json.Unmarshal(openAPIDocument, &doc) // openapi_test.go holds it valid
		schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
		for object, name := range map[string]string{"contact": "Contact", "business": "Business", "organization": "Organization"} {
			props, required, sorts, filters := map[string]any{}, []string{}, []any{}, []any{}
			for _, f := range fields {
				if f.Object == object {
					props[f.Key], required = f.jsonSchema(), append(required, f.Key)
					sorts, filters = f.listParams(sorts, filters)
				}
			}
			addListParams(doc, "/v1/"+customTables[object], name+"Sort", sorts, filters)
			schemas[name+"Custom"] = map[string]any{"type": "object", "additionalProperties": false, "properties": props, "required": required}
			schemas[name+"CustomPatch"] = map[string]any{"type": "object", "additionalProperties": false, "properties": props}
			for s, ref := range map[string]string{name: "Custom", name + "Create": "CustomPatch", name + "Update": "CustomPatch",
				name + "BatchUpdateItem": "CustomPatch", name + "BatchUpsertItem": "CustomPatch"} {
				if schema, ok := schemas[s].(map[string]any); ok {
					schema["properties"].(map[string]any)["custom"] = map[string]string{"$ref": "#/components/schemas/" + name + ref}
				}
			}
		}
		delete(schemas, "CustomValues") // custom's schema in the document without a key
		dropCustomExamples(doc)
		b, _ := json.MarshalIndent(doc, "", "  ") // of what it decoded
		writeJSON(w, r, http.StatusOK, append(b, '\n'))
	})
}

// customSchemas are the JSON Schemas of the values of each type; OPTIONS stands for a select's.
var customSchemas = map[string]string{"text": `{"type":["string","null"],"maxLength":1000}`, "number": `{"type":["number","null"]}`,
	"money": `{"type":["number","null"],"minimum":0}`, "date": `{"type":["string","null"],"format":"date"}`,
	"datetime": `{"type":["string","null"],"format":"date-time"}`, "boolean": `{"type":["boolean","null"]}`,
	"url": `{"type":["string","null"],"format":"uri"}`, "email": `{"type":["string","null"],"format":"email"}`,
	"user": `{"type":["integer","null"],"format":"int64","minimum":1}`, "select": `{"type":["string","null"],"enum":[OPTIONS,null]}`,
	"multiSelect": `{"type":["array","null"],"items":{"type":"string","enum":[OPTIONS]},"maxItems":` + strconv.Itoa(maxMultiSelected) + `}`}

// jsonSchema is the JSON Schema of f's value in custom.
func (f *customField) jsonSchema() map[string]any {
	options := appendStrings(nil, f.optionValues()) // a select has one at least
	s := map[string]any{}
	json.Unmarshal([]byte(strings.Replace(customSchemas[f.Type], "OPTIONS", string(options[1:len(options)-1]), 1)), &s)
	s["title"] = f.Label
	return s
}

// dropCustomExamples deletes from v, a decoded OpenAPI document or an object in one, each example that
// holds custom (written with "custom": {}, they fit no company's fields; none sits in an array).
func dropCustomExamples(v map[string]any) {
	for k, c := range v {
		if k == "example" || k == "examples" {
			if b, _ := json.Marshal(c); bytes.Contains(b, []byte(`"custom"`)) {
				delete(v, k)
			}
		} else if m, ok := c.(map[string]any); ok {
			dropCustomExamples(m)
		}
	}
}

// listParams appends to sorts and filters f's, as a list's query parameters in an OpenAPI document.
func (f *customField) listParams(sorts, filters []any) ([]any, []any) {
	s, ranged := f.jsonSchema(), slices.Contains([]string{"number", "money", "date", "datetime"}, f.Type)
	if items, ok := s["items"].(map[string]any); ok { // a multiSelect's filter names one option
		s = items
	} else if f.Type != "multiSelect" {
		sorts = append(sorts, "custom."+f.Key, "-custom."+f.Key)
	}
	if t, ok := s["type"].([]any); ok { // a filter's value is never null
		s["type"] = t[0]
	}
	if e, ok := s["enum"].([]any); ok && e[len(e)-1] == nil {
		s["enum"] = e[:len(e)-1]
	}
	for _, op := range slices.Sorted(maps.Keys(customOps)) {
		if name := "custom." + f.Key; op == "" || ranged {
			filters = append(filters, map[string]any{"name": name + map[bool]string{true: "[" + op + "]"}[op != ""], "in": "query",
				"schema": s, "description": "Only objects whose " + name + " " + cmp.Or(map[bool]string{true: "holds"}[f.Type == "multiSelect"], customOps[op]) + " this value."})
		}
	}
	return sorts, filters
}

// addListParams adds a company's custom filters to the list and count at path of its OpenAPI document
// doc, and its custom sorts to the list's parameter sortParam (organizations have no count, no sort).
func addListParams(doc map[string]any, path, sortParam string, sorts, filters []any) {
	for _, p := range []string{path, path + "/count"} {
		item, _ := doc["paths"].(map[string]any)[p].(map[string]any)
		if op, ok := item["get"].(map[string]any); ok {
			op["parameters"] = append(op["parameters"].([]any), filters...)
		}
	}
	if sort, ok := doc["components"].(map[string]any)["parameters"].(map[string]any)[sortParam].(map[string]any); ok {
		schema := sort["schema"].(map[string]any)
		schema["enum"] = append(schema["enum"].([]any), sorts...)
	}
}
