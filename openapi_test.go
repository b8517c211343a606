package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
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

// servedOpenAPI fetches the document from the running server, without a key.
func servedOpenAPI(t *testing.T) openAPIDoc {
	t.Helper()
	r := call(t, "GET", "/v1/openapi.json", "", "")
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/openapi.json = %d %q; want 200 application/json (body %.200s)", r.status, r.header.Get("Content-Type"), r.body)
	}
	if !bytes.Equal(r.body, openAPIDocument) {
		t.Errorf("GET /v1/openapi.json served %d bytes; want the %d bytes of api/openapi.json", len(r.body), len(openAPIDocument))
	}
	var doc openAPIDoc
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatalf("the served document is not JSON: %v", err)
	}
	return doc
}

func TestOpenAPIDocumentIsServedWithoutKey(t *testing.T) {
	t.Parallel()
	doc := servedOpenAPI(t)
	if !regexp.MustCompile(`^3\.1\.[0-9]+$`).MatchString(doc.OpenAPI) {
		t.Errorf("openapi = %q; want 3.1.x", doc.OpenAPI)
	}
}

// patternRecorder is a ServeMux that also records the patterns registered on it.
type patternRecorder struct {
	*http.ServeMux
	patterns []string
}

func (p *patternRecorder) Handle(pattern string, h http.Handler) {
	p.patterns = append(p.patterns, pattern)
	p.ServeMux.Handle(pattern, h)
}

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func TestOpenAPIOperationsAreExactlyTheRoutes(t *testing.T) {
	t.Parallel()
	doc := servedOpenAPI(t)
	var ops []string
	for path, item := range doc.Paths {
		for key := range item {
			if slices.Contains(httpMethods, key) {
				ops = append(ops, strings.ToUpper(key)+" "+path)
			}
		}
	}
	rec := &patternRecorder{ServeMux: http.NewServeMux()}
	addRoutes(rec, testEnv.st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	routes := slices.DeleteFunc(slices.Clone(rec.patterns), func(p string) bool { return p == "/" })
	slices.Sort(ops)
	slices.Sort(routes)
	if diff := cmp.Diff(routes, ops); diff != "" {
		t.Errorf("operations of api/openapi.json differ from the routes of addRoutes (-routes +document):\n%s", diff)
	}

	// Each operation's path, with its parameters filled in, is answered by the route of the same
	// pattern: the document's path syntax is the mux's.
	for _, op := range ops {
		method, path, _ := strings.Cut(op, " ")
		req := httptest.NewRequest(method, strings.ReplaceAll(path, "{id}", "1"), nil)
		if _, got := rec.Handler(req); got != op {
			t.Errorf("%s %s is routed to %q; want %q", method, req.URL.Path, got, op)
		}
	}
}

func TestOpenAPIExpandValuesAreTheServers(t *testing.T) {
	t.Parallel()
	doc := servedOpenAPI(t)
	for param, exps := range map[string][]expansion{"ContactExpand": contactExpansions, "BusinessExpand": businessExpansions} {
		var want []string
		for _, e := range exps {
			want = append(want, e.name)
		}
		p := doc.Components.Parameters[param]
		if diff := cmp.Diff(want, p.Schema.Items.Enum); p.Name != "expand[]" || diff != "" {
			t.Errorf("parameter %s (name %q): expand[] values (-server +document):\n%s", param, p.Name, diff)
		}
	}
}
