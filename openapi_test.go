package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
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
	// Examples written with "custom": {} fit no company's fields; CustomValues is the keyless custom.
	if b := string(body); strings.Contains(b, `"custom": {}`) || strings.Contains(b, "CustomValues") {
		t.Error(`the document fetched with a key keeps an example with "custom": {}, or CustomValues`)
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
