package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/mail"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Reading requests: path ids, query strings, strict JSON bodies and the fields they set, shared by
// every resource.

const maxBodyBytes = 1 << 20

// pathID returns the {id} path value: a positive decimal int64, else a 400.
func pathID(r *http.Request) (int64, *apiError) {
	s := r.PathValue("id")
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || s[0] < '0' || s[0] > '9' {
		return 0, badRequest("invalid_id", fmt.Sprintf("The id in the path must be a positive integer; got %q.", s))
	}
	return n, nil
}

// queryParams parses the query string and rejects parameters other than allowed, and repeats of
// any parameter but expand[].
func queryParams(r *http.Request, allowed ...string) (url.Values, *apiError) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, badRequest("invalid_parameter", "The query string is malformed.")
	}
	for name, vs := range q {
		known := false
		for _, a := range allowed {
			known = known || a == name
		}
		if !known {
			return nil, badRequest("invalid_parameter", fmt.Sprintf("Unknown query parameter %q; allowed: %s.", name, strings.Join(allowed, ", ")))
		}
		if len(vs) > 1 && name != "expand[]" {
			return nil, badRequest("invalid_parameter", fmt.Sprintf("Query parameter %q is given more than once.", name))
		}
	}
	return q, nil
}

// member is one name/value pair of a JSON object body, in the order sent.
type member struct {
	name string
	raw  json.RawMessage
}

var errUnsupportedMediaType = &apiError{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
	Detail: "The body must be sent with Content-Type: application/json."}

var errBodyTooLarge = &apiError{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
	Detail: fmt.Sprintf("The body is larger than %d bytes.", maxBodyBytes)}

// readObject reads a body that must be exactly one JSON object, sent as application/json, of at most
// maxBodyBytes. Invalid UTF-8, duplicate member names and anything after the object are a 400:
// encoding/json would silently repair or pick one, and silently changed data is lost data.
func readObject(w http.ResponseWriter, r *http.Request) ([]member, *apiError) {
	if !isJSONContentType(r.Header.Get("Content-Type")) {
		return nil, errUnsupportedMediaType
	}
	if r.ContentLength > maxBodyBytes {
		return nil, errBodyTooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, errBodyTooLarge
	}
	if err != nil {
		return nil, badRequest("invalid_body", "The body could not be read.")
	}
	if !utf8.Valid(body) {
		return nil, badRequest("invalid_json", "The body is not valid UTF-8.")
	}
	malformed := badRequest("invalid_json", "The body must be one JSON object.")
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, malformed
	}
	var members []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, malformed
		}
		name := tok.(string) // inside an object, a token before a value is always its name
		for _, m := range members {
			if m.name == name {
				return nil, badRequest("invalid_json", fmt.Sprintf("The body names %q more than once.", name))
			}
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, malformed
		}
		members = append(members, member{name: name, raw: raw})
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, malformed
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, malformed
	}
	return members, nil
}

// isJSONContentType accepts application/json with at most a utf-8 charset parameter.
func isJSONContentType(ct string) bool {
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return false
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return false
		}
	}
	return true
}

// bodyField is a writable field of a resource: its JSON name and how a raw JSON value is applied to
// the Go value it sets. apply returns "" or what is wrong with the value, for the client.
type bodyField struct {
	name  string
	apply func(raw json.RawMessage) string
}

// applyMembers applies each member to the field of its name, and returns one error per member that
// is unknown, read-only or refused by its field.
func applyMembers(members []member, fields []bodyField, readOnly []string) []fieldError {
	var errs []fieldError
	for _, m := range members {
		msg := "is not a known field"
		for _, ro := range readOnly {
			if m.name == ro {
				msg = "is read-only"
			}
		}
		for _, f := range fields {
			if f.name == m.name {
				msg = f.apply(m.raw)
				break
			}
		}
		if msg != "" {
			errs = append(errs, fieldError{Field: m.name, Message: msg})
		}
	}
	return errs
}

func isNull(raw json.RawMessage) bool { return string(raw) == "null" }

// jsonString decodes raw as a JSON string of at most max characters without NUL characters
// (PostgreSQL text cannot hold them).
func jsonString(raw json.RawMessage, max int) (string, string) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", "must be a string"
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", "must be a string"
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "", "must not contain NUL characters"
	}
	// encoding/json turns an unpaired surrogate escape (\ud800) into U+FFFD without a word.
	if strings.ContainsRune(s, utf8.RuneError) && !bytes.ContainsRune(raw, utf8.RuneError) &&
		!bytes.Contains(bytes.ToLower(raw), []byte(`\ufffd`)) {
		return "", "must not contain unpaired UTF-16 surrogate escapes"
	}
	if utf8.RuneCountInString(s) > max {
		return "", fmt.Sprintf("must be at most %d characters", max)
	}
	return s, ""
}

// requiredText sets a non-null string that is not blank.
func requiredText(p *string, max int) func(json.RawMessage) string {
	return func(raw json.RawMessage) string {
		if isNull(raw) {
			return "is required"
		}
		s, msg := jsonString(raw, max)
		if msg != "" {
			return msg
		}
		if strings.TrimSpace(s) == "" {
			return "must not be empty"
		}
		*p = s
		return ""
	}
}

// nullableText sets a string or null; check, when not nil, vets the string.
func nullableText(p *sql.NullString, max int, check func(string) string) func(json.RawMessage) string {
	return func(raw json.RawMessage) string {
		if isNull(raw) {
			*p = sql.NullString{}
			return ""
		}
		s, msg := jsonString(raw, max)
		if msg == "" && check != nil {
			msg = check(s)
		}
		if msg != "" {
			return msg
		}
		*p = sql.NullString{String: s, Valid: true}
		return ""
	}
}

// checkEmail accepts a bare e-mail address ("ana@example.com", not "Ana <ana@example.com>").
func checkEmail(s string) string {
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s || a.Name != "" || !strings.Contains(s[strings.LastIndexByte(s, '@'):], ".") {
		return "must be an e-mail address"
	}
	return ""
}

// checkHTTPURL accepts an absolute http or https URL with a host.
func checkHTTPURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.ContainsAny(s, " \t\r\n") {
		return "must be an absolute http(s) URL"
	}
	return ""
}

// boolean sets a non-null boolean.
func boolean(p *bool) func(json.RawMessage) string {
	return func(raw json.RawMessage) string {
		switch string(raw) {
		case "true":
			*p = true
		case "false":
			*p = false
		default:
			return "must be true or false"
		}
		return ""
	}
}

// jsonInt decodes raw as a JSON integer in [min, max]: no fraction, no exponent, no quotes.
func jsonInt(raw json.RawMessage, min, max int64) (int64, string) {
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || raw[0] == '+' || (len(raw) > 1 && raw[0] == '0') || (len(raw) > 2 && raw[0] == '-' && raw[1] == '0') {
		if len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') && err != nil && errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Sprintf("must be an integer from %d to %d", min, max)
		}
		return 0, "must be an integer"
	}
	if n < min || n > max {
		return 0, fmt.Sprintf("must be an integer from %d to %d", min, max)
	}
	return n, ""
}

// nullableInt sets an integer in [min, max], or null.
func nullableInt(p *sql.NullInt64, min, max int64) func(json.RawMessage) string {
	return func(raw json.RawMessage) string {
		if isNull(raw) {
			*p = sql.NullInt64{}
			return ""
		}
		n, msg := jsonInt(raw, min, max)
		if msg != "" {
			return msg
		}
		*p = sql.NullInt64{Int64: n, Valid: true}
		return ""
	}
}

// nullableID sets a reference id (a positive integer) or null.
func nullableID(p *sql.NullInt64) func(json.RawMessage) string {
	set := nullableInt(p, 1, 1<<63-1)
	return func(raw json.RawMessage) string {
		if msg := set(raw); msg != "" {
			return "must be a positive integer id or null"
		}
		return ""
	}
}

// requiredID sets a reference id that may not be null.
func requiredID(p *int64) func(json.RawMessage) string {
	return func(raw json.RawMessage) string {
		n, msg := jsonInt(raw, 1, 1<<63-1)
		if msg != "" {
			return "must be a positive integer id"
		}
		*p = n
		return ""
	}
}

// nullableTime sets an RFC 3339 timestamp (any offset; kept in UTC, truncated to milliseconds) or null.
func nullableTime(p *sql.NullTime) func(json.RawMessage) string {
	return func(raw json.RawMessage) string {
		if isNull(raw) {
			*p = sql.NullTime{}
			return ""
		}
		s, msg := jsonString(raw, 64)
		if msg != "" {
			return "must be an RFC 3339 timestamp string"
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if u := t.UTC(); err != nil || u.Year() < 1 || u.Year() > 9999 {
			return "must be an RFC 3339 timestamp like 2026-11-21T09:30:00.123Z"
		}
		*p = sql.NullTime{Time: t.UTC().Truncate(time.Millisecond), Valid: true}
		return ""
	}
}

// etag is the strong entity tag of an object at a version.
func etag(version int64) string { return `"` + strconv.FormatInt(version, 10) + `"` }

// ifMatchOK reports whether an If-Match header (empty: not sent) admits the object at version.
func ifMatchOK(header string, version int64) bool {
	if header == "" {
		return true
	}
	want := etag(version)
	for _, tag := range strings.Split(header, ",") {
		if tag = strings.TrimSpace(tag); tag == "*" || tag == want {
			return true
		}
	}
	return false
}

var errPreconditionFailed = &apiError{Status: http.StatusPreconditionFailed, Code: "precondition_failed",
	Detail: "The object has changed since the ETag given in If-Match; retrieve it again."}

// writeObject writes one encoded object with its ETag.
func writeObject(w http.ResponseWriter, status int, version int64, body []byte) {
	w.Header()["Etag"] = []string{etag(version)} // Etag: the key in canonical form
	writeJSON(w, status, body)
}

// hasField reports whether errs already names field.
func hasField(errs []fieldError, field string) bool {
	for _, e := range errs {
		if e.Field == field {
			return true
		}
	}
	return false
}

// hasMember reports whether the body named field.
func hasMember(members []member, field string) bool {
	for _, m := range members {
		if m.name == field {
			return true
		}
	}
	return false
}

// requiredInt sets a non-null integer in [min, max].
func requiredInt(p *int64, min, max int64) func(json.RawMessage) string {
	return func(raw json.RawMessage) string {
		n, msg := jsonInt(raw, min, max)
		if msg != "" {
			return msg
		}
		*p = n
		return ""
	}
}

// nullID is id as a nullable SQL value: 0, "not given", is NULL.
func nullID(id int64) sql.NullInt64 { return sql.NullInt64{Int64: id, Valid: id != 0} }
