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
// routes of the code, each answered by the server, and its expand[] values are the ones it takes.
func TestOpenAPIDocumentIsTheServers(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
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
	// The server answers each operation, its parameters filled in, on a route: never 405, and 404
	// only for an object that does not exist.
	for _, op := range ops {
		method, pattern, _ := strings.Cut(op, " ")
		path := regexp.MustCompile(`\{[a-zA-Z]+\}`).ReplaceAllString(pattern, "1")
		r := call(t, method, path, c.key, map[string]string{"POST": "{}", "PATCH": "{}"}[method])
		if r.status == http.StatusMethodNotAllowed || r.status == http.StatusNotFound && path == pattern {
			t.Errorf("%s %s = %d %s; want the operation's route to answer", method, path, r.status, r.body)
		}
	}
	for param, want := range map[string][]string{"ContactExpand": expNames(contactExps), "BusinessExpand": expNames(businessExps)} {
		p := doc.Components.Parameters[param]
		if diff := cmp.Diff(want, p.Schema.Items.Enum); p.Name != "expand[]" || diff != "" {
			t.Errorf("parameter %s (name %q): expand[] values (-server +document):\n%s", param, p.Name, diff)
		}
	}
}
