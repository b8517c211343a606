package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"unicode/utf8"
)

// Fuzz targets for the body decoders: `make fuzz` runs each for FUZZTIME; `go test` runs the seeds.

var bodySeeds = []string{
	`{}`, `{"name":"Ada"}`, `{"name":"Ada","email":"ada@example.com","countryId":724,"withSales":true}`,
	`{"title":"Deal","value":1234.50,"deadline":"2026-12-01T10:00:00+02:00","private":false}`,
	`{"name":"a","name":"b"}`, `{"name":"\u0000"}`, `{"name":"\ud800"}`, "{\"name\":\"\xff\"}",
	`{"value":1e400}`, `{"value":-0}`, `{"countryId":9223372036854775808}`, `{"position":-0}`,
	`[]`, `"str"`, `null`, `{"a":{"b":{"c":[[[[]]]]}}}`, `{"id":"1","createdAt":"x"}`, `{} {}`, `{"name":"x"`,
	`{"' OR 1=1 --":1}`, `{"urlAvatar":"javascript:alert(1)"}`, `{"deadline":"0000-01-01T00:00:00Z"}`,
}

// fuzzBody checks readObject and applyMembers on any body: no panic; a refused body is a 400 or 413
// problem; an accepted one is one JSON object of distinct names; every field error names a member
// of the body and says what is wrong.
func fuzzBody(f *testing.F, fields func() []bodyField) {
	for _, s := range bodySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest("POST", "/v1/x", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		members, aerr := readObject(httptest.NewRecorder(), req)
		if aerr != nil {
			if aerr.Status != http.StatusBadRequest && aerr.Status != http.StatusRequestEntityTooLarge || aerr.Detail == "" {
				t.Fatalf("readObject(%q) = %+v; want a 400 or 413 with a detail", body, aerr)
			}
			return
		}
		var obj map[string]json.RawMessage
		if !utf8.Valid(body) || json.Unmarshal(body, &obj) != nil || len(obj) != len(members) {
			t.Fatalf("readObject accepted %q: want only one valid UTF-8 JSON object with distinct names", body)
		}
		for _, e := range applyMembers(members, fields(), readOnlyFields) {
			if _, ok := obj[e.Field]; !ok || e.Message == "" {
				t.Fatalf("body %q: field error %+v; want it to name a member and say what is wrong", body, e)
			}
		}
	})
}

func FuzzContactBody(f *testing.F) {
	fuzzBody(f, func() []bodyField { return (&contact{}).fields() })
}

func FuzzBusinessBody(f *testing.F) {
	fuzzBody(f, func() []bodyField { return (&business{}).fields() })
}
