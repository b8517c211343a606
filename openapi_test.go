package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// openAPIDoc is the part of the OpenAPI document these tests read.
type openAPIDoc struct {
	OpenAPI    string                                `json:"openapi"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Parameters map[string]struct {
			Name   string `json:"name"`
			Schema struct {
				Items struct {
					Enum []string `json:"enum"`
				} `json:"items"`
			} `json:"schema"`
		} `json:"parameters"`
	} `json:"components"`
}

// routePatterns returns the "METHOD /path" patterns the server's code registers: the string that
// opens every Handle or HandleFunc call in its non-test files.
func routePatterns(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	handle := regexp.MustCompile(`(?:\.Handle(?:Func)?|\bv1)\(\s*"([A-Z]+ /[^"]*)"`)
	var patterns []string
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range handle.FindAllSubmatch(src, -1) {
			if !strings.HasSuffix(name, "_test.go") {
				patterns = append(patterns, string(m[1]))
			}
		}
	}
	return patterns
}

// The document served at /v1/openapi.json is api/openapi.json, and its operations are exactly the
// routes of the code, and its expand[] values are the ones it takes. (That the server answers each
// keyed operation on its route is TestEveryRouteNeedsItsScope's, which walks them all.)
func TestOpenAPIDocumentIsTheServers(t *testing.T) {
	t.Parallel()
	r := call(t, "GET", "/v1/openapi.json", "", "")
	file, err := os.ReadFile("api/openapi.json")
	var doc openAPIDoc
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" || err != nil || !bytes.Equal(r.body, file) ||
		json.Unmarshal(r.body, &doc) != nil || !regexp.MustCompile(`^3\.1\.[0-9]+$`).MatchString(doc.OpenAPI) {
		t.Fatalf("GET /v1/openapi.json without a key = %d %q, %d bytes (%v); want 200 application/json, api/openapi.json's %d bytes, OpenAPI 3.1",
			r.status, r.header.Get("Content-Type"), len(r.body), err, len(file))
	}
	var ops []string
	for path, item := range doc.Paths {
		for key := range item {
			if slices.Contains([]string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}, key) {
				ops = append(ops, strings.ToUpper(key)+" "+path)
			}
		}
	}
	routes := routePatterns(t)
	slices.Sort(ops)
	slices.Sort(routes)
	if diff := cmp.Diff(routes, ops); diff != "" {
		t.Errorf("operations of api/openapi.json differ from the routes in the code (-routes +document):\n%s", diff)
	}
	for param, want := range map[string][]string{"ContactExpand": expNames(contactExps), "BusinessExpand": expNames(businessExps)} {
		p := doc.Components.Parameters[param]
		if diff := cmp.Diff(want, p.Schema.Items.Enum); p.Name != "expand[]" || diff != "" {
			t.Errorf("parameter %s (name %q): expand[] values (-server +document):\n%s", param, p.Name, diff)
		}
	}
}

func TestCustomOpenAPIDocument(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	defineField(t, c.key, `{"object": "contact", "key": "tier", "label": "Tier", "type": "select", "options": [{"value": "gold"}]}`)
	defineField(t, c.key, `{"object": "business", "key": "arr", "label": "ARR", "type": "number"}`)
	defineField(t, c.key, `{"object": "organization", "key": "tags", "label": "T", "type": "multiSelect", "options": [{"value": "a"}]}`)
	defineField(t, c.key, `{"object": "organization", "key": "size", "label": "S", "type": "number"}`)
	type schema struct {
		Ref        string `json:"$ref"`
		Type       any
		Enum       []any
		Required   []string
		Properties map[string]schema
	}
	type param struct {
		Name   string
		Ref    string `json:"$ref"`
		Schema schema
	}
	var doc struct {
		Paths      map[string]struct{ Get struct{ Parameters []param } }
		Components struct {
			Schemas    map[string]schema
			Parameters map[string]param
		}
	}
	body := mustGet(t, c.key, "/v1/openapi.json").body
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	// CustomValues, the keyless custom, is gone (the examples: TestKeyedOpenAPIDiffersOnlyInCustom).
	if strings.Contains(string(body), "CustomValues") {
		t.Error("the document fetched with a key keeps CustomValues")
	}
	s := doc.Components.Schemas
	for name, want := range map[string]string{"Contact": "ContactCustom", "ContactBatchUpdateItem": "ContactCustomPatch",
		"ContactBatchUpsertItem": "ContactCustomPatch", "BusinessBatchUpdateItem": "BusinessCustomPatch"} {
		if got := s[name].Properties["custom"].Ref; got != "#/components/schemas/"+want {
			t.Errorf("%s.custom = %q; want %s", name, got, want)
		}
	}
	if got := s["ContactCustom"]; !slices.Equal(got.Required, []string{"tier"}) || !slices.Equal(got.Properties["tier"].Enum, []any{"gold", nil}) {
		t.Errorf("ContactCustom = %+v", got)
	}
	if got := s["BusinessCustomPatch"].Properties["arr"].Type; fmt.Sprint(got) != "[number null]" || len(s["OrganizationCustom"].Properties) != 2 {
		t.Errorf("BusinessCustomPatch.arr type %v, OrganizationCustom %+v", got, s["OrganizationCustom"])
	}
	// The lists and counts take the company's custom filters, and the lists its custom sorts.
	params := func(path string) (names []string, schemas map[string]schema) {
		schemas = map[string]schema{}
		for _, p := range doc.Paths[path].Get.Parameters {
			names, schemas[p.Name] = append(names, p.Name), p.Schema
		}
		return names, schemas
	}
	names, schemas := params("/v1/contacts")
	if !slices.Contains(names, "custom.tier") || fmt.Sprintf("%v %v", schemas["custom.tier"].Type, schemas["custom.tier"].Enum) != "string [gold]" ||
		slices.Contains(names, "custom.tier[gte]") {
		t.Errorf("/v1/contacts parameters %v; custom.tier %+v", names, schemas["custom.tier"])
	}
	if got := doc.Components.Parameters["ContactSort"].Schema.Enum; !slices.Contains(got, any("-custom.tier")) {
		t.Errorf("ContactSort enum %v", got)
	}
	if names, schemas = params("/v1/business/count"); fmt.Sprint(schemas["custom.arr[gte]"].Type) != "number" || !slices.Contains(names, "custom.arr[lt]") {
		t.Errorf("/v1/business/count parameters %v", names)
	}
	if names, schemas = params("/v1/organizations"); slices.Contains(names, "sort") || fmt.Sprint(schemas["custom.tags"].Enum) != "[a]" ||
		!slices.Contains(names, "custom.size[lte]") {
		t.Errorf("/v1/organizations parameters %v (a sort, which its list refuses?); custom.tags %+v", names, schemas["custom.tags"])
	}
	// The server takes what the document declares.
	for _, path := range []string{"/v1/contacts?custom.tier=gold&sort=-custom.tier", "/v1/business/count?custom.arr[lt]=5",
		"/v1/organizations?custom.size[gte]=1&custom.tags=a"} {
		mustGet(t, c.key, path)
	}
	if r := mustGet(t, "", "/v1/openapi.json"); string(r.body) != string(openAPIDocument) {
		t.Error("without a key, the document is not the embedded one")
	}
	wantProblem(t, call(t, "GET", "/v1/openapi.json", "rdx_nope", ""), http.StatusUnauthorized, "unauthorized")
}

// With a key, the document is a keyed request like any other: the key's rate limit with its
// RateLimit headers, and a bad key is 401 and a failure of the address, which gets 429 past its
// limit. Without a key the document stays public, even from that address.
func TestOpenAPIWithAKeyGoesThroughTheLimits(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	base := startServer(t, map[string]string{"ROLODEX_RATE_LIMIT": "1", "ROLODEX_AUTH_FAILURE_LIMIT": "3"}, &syncBuffer{})
	r := wantStatus(t, callAt(t, nil, base, "GET", "/v1/openapi.json", c.key, ""), http.StatusOK)
	if p, rl := r.header.Get("RateLimit-Policy"), r.header.Get("RateLimit"); p != `"per-key";q=2;w=2` || !strings.HasPrefix(rl, `"per-key";r=1;t=`) {
		t.Errorf("GET /v1/openapi.json with a key: RateLimit-Policy %q, RateLimit %q; want \"per-key\";q=2;w=2 and \"per-key\";r=1;t=S", p, rl)
	}
	refused := false
	for range 12 { // a burst of 2 at 1/s: most of twelve quick requests are refused
		if r := callAt(t, nil, base, "GET", "/v1/openapi.json", c.key, ""); r.status == http.StatusTooManyRequests {
			wantProblem(t, r, http.StatusTooManyRequests, "rate_limited")
			refused = true
		}
	}
	if !refused {
		t.Error("twelve keyed requests for the document at a limit of 1/s: none refused")
	}
	for i, key := range []string{"rdx_nope", "", "rdx_nope2", "rdx_nope3"} { // "": an empty header is a bad key
		req, err := http.NewRequest("GET", base+"/v1/openapi.json", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("x-api-key", key)
		r := doRequest(t, req)
		if i < 3 {
			wantProblem(t, r, http.StatusUnauthorized, "unauthorized")
			continue
		}
		wantProblem(t, r, http.StatusTooManyRequests, "rate_limited")
	}
	file, err := os.ReadFile("api/openapi.json")
	if r := callAt(t, nil, base, "GET", "/v1/openapi.json", "", ""); err != nil || r.status != http.StatusOK || !bytes.Equal(r.body, file) {
		t.Errorf("GET /v1/openapi.json without a key from a limited address = %d, %d bytes (%v); want 200, api/openapi.json", r.status, len(r.body), err)
	}
}

// decodeExact decodes the JSON document b with every number as written (json.Number).
func decodeExact(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// withoutCustom returns v, a decoded OpenAPI document or a value in one, without what a key types by
// its company's fields: members named custom, the schemas of custom (CustomValues, <Kind>Custom,
// <Kind>CustomPatch), and the custom.<key> filters and sorts.
func withoutCustom(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, c := range v {
			if k != "custom" && k != "CustomValues" && !strings.HasSuffix(k, "Custom") && !strings.HasSuffix(k, "CustomPatch") {
				out[k] = withoutCustom(c)
			}
		}
		return out
	case []any:
		out := []any{}
		for _, c := range v {
			if !isCustomParam(c) {
				out = append(out, withoutCustom(c))
			}
		}
		return out
	}
	return v
}

// isCustomParam reports whether v is a custom sort (custom.<key>, -custom.<key>) or filter parameter.
func isCustomParam(v any) bool {
	if s, ok := v.(string); ok {
		return strings.HasPrefix(strings.TrimPrefix(s, "-"), "custom.")
	}
	p, ok := v.(map[string]any)
	if !ok {
		return false
	}
	name, ok := p["name"].(string)
	return ok && strings.HasPrefix(name, "custom.")
}

// dig returns the value at path in v, a decoded JSON value: names of members and indexes of elements.
func dig(v any, path ...any) any {
	for _, step := range path {
		switch s := step.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[s]
		case int:
			a, _ := v.([]any)
			if s >= len(a) {
				return nil
			}
			v = a[s]
		}
	}
	return v
}

// The document fetched with a key is the document without one but for custom: every number and
// example the same, and the examples' custom the company's fields, each null, as an object without
// values has them (so that they fit the typed schemas, which clients/check.sh lints them against).
func TestKeyedOpenAPIDiffersOnlyInCustom(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	defineField(t, c.key, `{"object": "contact", "key": "tier", "label": "Tier", "type": "select", "options": [{"value": "gold"}]}`)
	defineField(t, c.key, `{"object": "contact", "key": "arr", "label": "ARR", "type": "number"}`)
	defineField(t, c.key, `{"object": "business", "key": "renewal", "label": "Renewal", "type": "date"}`)
	defineField(t, c.key, `{"object": "organization", "key": "tags", "label": "Tags", "type": "multiSelect", "options": [{"value": "a"}]}`)
	plain := decodeExact(t, mustGet(t, "", "/v1/openapi.json").body)
	keyed := decodeExact(t, mustGet(t, c.key, "/v1/openapi.json").body)
	if diff := cmp.Diff(withoutCustom(plain), withoutCustom(keyed)); diff != "" {
		t.Errorf("the keyed document differs from the plain one outside custom (-plain +keyed):\n%s", diff)
	}
	contact := map[string]any{"tier": nil, "arr": nil}
	for _, tc := range []struct {
		path []any
		want map[string]any
	}{
		{[]any{"Contact", "examples", 0, "custom"}, contact},
		{[]any{"Business", "examples", 0, "custom"}, map[string]any{"renewal": nil}},
		{[]any{"Event", "example", "data", "object", "custom"}, contact},
		{[]any{"ContactMergeResult", "example", "object", "custom"}, contact},
		{[]any{"OrganizationMergeResult", "example", "object", "custom"}, map[string]any{"tags": nil}},
	} {
		path := append([]any{"components", "schemas"}, tc.path...)
		if diff := cmp.Diff(tc.want, dig(keyed, path...)); diff != "" {
			t.Errorf("keyed document's %v (-want +got):\n%s", tc.path, diff)
		}
		if dig(plain, path...) == nil {
			t.Errorf("plain document's %v: missing; want the example's custom", tc.path)
		}
	}
}

// 9223372036854775807, the largest id, stays that in the keyed document: decoded into any, it would
// be a float64, 9223372036854776000.
func TestKeyedOpenAPIKeepsTheInt64Maximum(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	defineField(t, c.key, `{"object": "contact", "key": "tier", "label": "Tier", "type": "text"}`)
	body := mustGet(t, c.key, "/v1/openapi.json").body
	file, err := os.ReadFile("api/openapi.json")
	max := []byte(`"maximum": 9223372036854775807,`)
	if n := bytes.Count(body, max); err != nil || n == 0 || n != bytes.Count(file, max) || bytes.Contains(body, []byte("9223372036854776000")) {
		t.Errorf("keyed document: %d of %q (%v); want api/openapi.json's %d, and no 9223372036854776000", n, max, err, bytes.Count(file, max))
	}
}

// A key sees custom typed only for the kinds of object it reads: a key of keys:read alone gets the
// document without a key, byte for byte; one that reads contacts, or writes business records (which
// covers reading them), sees those fields only, the other kinds' custom staying CustomValues.
func TestKeyedOpenAPIShowsOnlyTheKindsTheKeyReads(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	defineField(t, c.key, `{"object": "contact", "key": "tier", "label": "Tier", "type": "select", "options": [{"value": "gold"}]}`)
	defineField(t, c.key, `{"object": "business", "key": "arr", "label": "ARR", "type": "number"}`)
	file, err := os.ReadFile("api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if r := mustGet(t, *makeKey(t, c.key, "keys:read").Key, "/v1/openapi.json"); !bytes.Equal(r.body, file) {
		t.Errorf("a keys:read key: %d bytes; want api/openapi.json's %d, no custom field typed in", len(r.body), len(file))
	}
	for _, tc := range []struct {
		scopes     []string
		typed      string // the schema of custom the key's document has
		untyped    string // the kind it leaves with CustomValues
		has, hasNo string // a filter of the key's kind, and of the other
	}{
		{[]string{"contacts:read", "keys:read"}, "ContactCustom", "Business", "custom.tier", "custom.arr"},
		{[]string{"business:write"}, "BusinessCustom", "Contact", "custom.arr", "custom.tier"},
	} {
		body := mustGet(t, *makeKey(t, c.key, tc.scopes...).Key, "/v1/openapi.json").body
		doc := decodeExact(t, body)
		schemas := []any{"components", "schemas"}
		untyped := dig(doc, append(schemas, tc.untyped, "properties", "custom", "$ref")...)
		if dig(doc, append(schemas, tc.typed)...) == nil || untyped != "#/components/schemas/CustomValues" ||
			!bytes.Contains(body, []byte(`"`+tc.has+`"`)) || bytes.Contains(body, []byte(tc.hasNo)) {
			t.Errorf("a key of %v: %s %v, %s.custom %v, filter %s %v, %s %v; want %s, CustomValues, %s only",
				tc.scopes, tc.typed, dig(doc, append(schemas, tc.typed)...) != nil, tc.untyped, untyped,
				tc.has, bytes.Contains(body, []byte(tc.has)), tc.hasNo, bytes.Contains(body, []byte(tc.hasNo)), tc.typed, tc.has)
		}
	}
}

// The keyed document is built once per change of the company's fields: new at once after a field is
// created, has its label or options changed, or is deleted; the same while they stay as they are,
// whatever another company or a kind the key does not read defines; and then kept, not built again.
func TestKeyedOpenAPIIsBuiltOncePerChangeOfTheFields(t *testing.T) {
	t.Parallel()
	c, other := newTestCompany(t), newTestCompany(t)
	contactsKey := *makeKey(t, c.key, "contacts:read").Key
	get := func(key string) string { return string(mustGet(t, key, "/v1/openapi.json").body) }
	contactsNone := get(contactsKey)
	var field string // the contact field's path, once made
	steps := []struct {
		name, by, method, path, body string // by: the key that makes the change; a PATCH is of field
		reader                       string // the key that reads the document
		want                         string // in the document after the step; "": the document is the same
	}{
		{"a contact field is created", c.key, "POST", "/v1/customFields",
			`{"object": "contact", "key": "tier", "label": "Tier", "type": "select", "options": [{"value": "gold"}]}`, c.key, `"custom.tier"`},
		{"its label changes", c.key, "PATCH", "", `{"label": "Level"}`, c.key, `"title": "Level"`},
		{"an option is added", c.key, "PATCH", "", `{"options": [{"value": "gold"}, {"value": "silver"}]}`, c.key, `"silver"`},
		{"nothing changes", c.key, "", "", "", c.key, ""},
		{"another company defines a field", other.key, "POST", "/v1/customFields", `{"object": "contact", "key": "x", "label": "X", "type": "text"}`, c.key, ""},
		{"a business field is created, for a key that reads contacts only", c.key, "POST", "/v1/customFields",
			`{"object": "business", "key": "arr", "label": "ARR", "type": "number"}`, contactsKey, ""},
	}
	for _, s := range steps {
		before := get(s.reader)
		switch s.method {
		case "POST":
			o, _ := create(t, s.by, s.path, s.body)
			if field == "" {
				field = itemPath("/v1/customFields", o.id())
			}
		case "PATCH":
			wantStatus(t, call(t, s.method, field, s.by, s.body), http.StatusOK)
		}
		doc := get(s.reader)
		if s.want == "" && doc != before || s.want != "" && (doc == before || !strings.Contains(doc, s.want)) {
			t.Errorf("after %s: the document changed %v, holds %q %v; want it changed and holding it, or unchanged for \"\"",
				s.name, doc != before, s.want, strings.Contains(doc, s.want))
		}
	}
	wantStatus(t, call(t, "DELETE", field, c.key, ""), http.StatusNoContent)
	if get(contactsKey) != contactsNone {
		t.Error("after the contact field is deleted, a key that reads contacts gets another document than before it was made")
	}
	// Kept: the same state is served from the same bytes, until a field changes.
	docs := newOpenAPIDocs(openAPIDocument)
	keyed := func() servedDoc {
		d, err := docs.keyed(context.Background(), testEnv.st, c.id, customObjects)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	first := keyed()
	if again := keyed(); &again.json[0] != &first.json[0] || &again.gzip[0] != &first.gzip[0] {
		t.Error("the same fields: the document was built again")
	}
	defineField(t, c.key, `{"object": "organization", "key": "size", "label": "Size", "type": "number"}`)
	if again := keyed(); &again.json[0] == &first.json[0] {
		t.Error("a field created: the document kept")
	}
}

// The keyed documents kept stay within the limit: past it the least recently served goes, and one
// larger than a quarter of it is not kept.
func TestOpenAPIDocsKeepTheMostRecentlyServed(t *testing.T) {
	t.Parallel()
	docs := newOpenAPIDocs(openAPIDocument)
	docs.limit = 100
	doc := func(n int) servedDoc { return servedDoc{json: make([]byte, n), gzip: make([]byte, 1)} }
	fp := fieldsPrint{n: 1}
	for id := range int64(4) { // 4 × 25 bytes: the limit
		docs.put(docKey{id, "contact"}, fp, doc(24))
	}
	docs.get(docKey{0, "contact"}, fp) // 1 is now the least recently served
	docs.put(docKey{4, "contact"}, fp, doc(24))
	docs.put(docKey{5, "contact"}, fp, doc(26)) // over a quarter: not kept
	var kept []int64
	for id := range int64(6) {
		if _, ok := docs.get(docKey{id, "contact"}, fp); ok {
			kept = append(kept, id)
		}
	}
	if !slices.Equal(kept, []int64{0, 2, 3, 4}) || docs.size != 100 {
		t.Errorf("kept %v, %d bytes; want [0 2 3 4], 100", kept, docs.size)
	}
	if _, ok := docs.get(docKey{0, "contact"}, fieldsPrint{n: 2}); ok {
		t.Error("a document of other fields (another print) was served")
	}
}

// BenchmarkOpenAPIKeyed serves the keyed document of a company with 120 select fields (40 per kind of
// object, 5 options each): the handler alone, as a client that takes gzip asks (handler), and through
// the test server and a client, with gzip and without (the client's share included).
func BenchmarkOpenAPIKeyed(b *testing.B) {
	nc, err := testEnv.st.createCompany(context.Background(), "Bench "+b.Name())
	if err != nil {
		b.Fatal(err)
	}
	for i := range 120 {
		body := fmt.Sprintf(`{"object": %q, "key": "f%d", "label": "Field %d", "type": "select",
			"options": [{"value": "a"}, {"value": "b"}, {"value": "c"}, {"value": "d"}, {"value": "e"}]}`, customObjects[i%3], i, i)
		r, err := send(nil, testEnv.baseURL, "POST", "/v1/customFields", nc.APIKey, body)
		if err != nil || r.status != http.StatusCreated {
			b.Fatalf("define field %d: %v %d %s", i, err, r.status, r.body)
		}
	}
	b.Run("handler", func(b *testing.B) {
		h := handleCustomOpenAPI(testEnv.st, slog.New(slog.DiscardHandler))
		ri := &reqInfo{tenant: tenant{companyID: nc.CompanyID, scopes: []string{"*"}}}
		for b.Loop() {
			req := httptest.NewRequestWithContext(context.WithValue(context.Background(), reqInfoKey{}, ri), "GET", "/v1/openapi.json", nil)
			req.Header.Set("Accept-Encoding", "gzip")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				b.Fatalf("GET /v1/openapi.json: %d", rec.Code)
			}
		}
	})
	for _, tc := range []struct {
		name   string
		client *http.Client
	}{{"gzip", nil}, {"identity", rawClient}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				r, err := send(tc.client, testEnv.baseURL, "GET", "/v1/openapi.json", nc.APIKey, "")
				if err != nil || r.status != http.StatusOK {
					b.Fatalf("GET /v1/openapi.json: %v %d", err, r.status)
				}
			}
		})
	}
}
