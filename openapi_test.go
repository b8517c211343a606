package main

import (
	"bytes"
	"encoding/json"
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
