package main

import (
	_ "embed"
	"net/http"
)

// openAPIDocument is the OpenAPI 3.1 description of this server (api/openapi.json). openapi_test.go
// holds its operations equal to the routes of addRoutes; clients/check.sh holds the server's answers
// to it with tools nobody here wrote.
//
//go:embed api/openapi.json
var openAPIDocument []byte

// handleOpenAPI answers GET /v1/openapi.json with the embedded document; it needs no key.
func handleOpenAPI() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, openAPIDocument)
	})
}
