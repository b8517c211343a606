package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/mail"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"
)

// Reading requests: one rule for each kind of input, used everywhere it comes in. Path ids and id
// filters, query strings, If-Match, strict JSON bodies and the rules of the fields they set.

const maxBodyBytes = 1 << 20

// parseID reads a positive int64 in canonical decimal form: "1042", never "01", "+1" or "0".
func parseID(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0 && strconv.FormatInt(n, 10) == s
}

// pathID returns the {id} path value, or a 400 when it is not an id.
func pathID(r *http.Request) (int64, *apiError) {
	s := r.PathValue("id")
	id, ok := parseID(s)
	if !ok {
		return 0, badRequest("invalid_id", fmt.Sprintf("The id in the path must be a positive integer; got %q.", s))
	}
	return id, nil
}

// queryParams parses the query string and rejects parameters other than allowed, and repeats of
// any parameter but expand[] and type.
func queryParams(r *http.Request, allowed ...string) (url.Values, *apiError) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, badRequest("invalid_parameter", "The query string is malformed.")
	}
	for name, vs := range q {
		if !slices.Contains(allowed, name) && !(strings.HasPrefix(name, "custom.") && slices.Contains(allowed, "custom.*")) {
			return nil, badRequest("invalid_parameter", fmt.Sprintf("Unknown query parameter %q; allowed: %s.", name, strings.Join(allowed, ", ")))
		}
		if len(vs) > 1 && name != "expand[]" && name != "type" {
			return nil, badRequest("invalid_parameter", fmt.Sprintf("Query parameter %q is given more than once.", name))
		}
	}
	return q, nil
}

// ifMatch returns the versions an If-Match header admits: nil (any) when there is none or it is *.
// A tag that is not one of this server's ("abc", a weak tag) admits no version.
func ifMatch(r *http.Request) []int64 {
	h := r.Header.Get("If-Match")
	if h == "" {
		return nil
	}
	versions := []int64{}
	for _, tag := range strings.Split(h, ",") {
		tag = strings.TrimSpace(tag)
		if tag == "*" {
			return nil
		}
		quoted := len(tag) >= 2 && tag[0] == '"' && tag[len(tag)-1] == '"'
		v, ok := parseID(strings.TrimSuffix(strings.TrimPrefix(tag, `"`), `"`))
		if quoted && ok {
			versions = append(versions, v)
		}
	}
	return versions
}

// admits reports whether the versions of ifMatch admit version.
func admits(versions []int64, version int64) bool {
	return versions == nil || slices.Contains(versions, version)
}

// etag is the strong entity tag of an object at a version.
func etag(version int64) string { return `"` + strconv.FormatInt(version, 10) + `"` }

// member is one name/value pair of a JSON object body, in the order sent.
type member struct {
	name string
	raw  json.RawMessage
}

var errBodyTooLarge = &apiError{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
	Detail: fmt.Sprintf("The body is larger than %d bytes.", maxBodyBytes)}

// noBodyIsEmpty makes r's body, when it has none (Content-Length: 0), an empty JSON object: a
// request whose body members are all optional may come without a body (roll, rotateSecret).
func noBodyIsEmpty(r *http.Request) {
	if r.ContentLength == 0 {
		r.Header.Set("Content-Type", "application/json")
		r.Body = io.NopCloser(strings.NewReader("{}"))
	}
}

// readObject reads a body that must be exactly one JSON object, sent uncompressed as
// application/json, of at most maxBodyBytes. Invalid UTF-8, duplicate member names and anything
// after the object are a 400: encoding/json would silently repair or pick one, and silently changed
// data is lost data.
func readObject(w http.ResponseWriter, r *http.Request) ([]member, *apiError) {
	if r.Header.Get("Content-Encoding") != "" {
		w.Header().Set("Accept-Encoding", "identity")
		return nil, &apiError{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
			Detail: "The body must be sent uncompressed, without a Content-Encoding."}
	}
	if !isJSONContentType(r.Header.Get("Content-Type")) {
		return nil, &apiError{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
			Detail: "The body must be sent with Content-Type: application/json."}
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
	members, dup, ok := jsonMembers(body)
	if dup != "" {
		return nil, badRequest("invalid_json", fmt.Sprintf("The body names %q more than once.", dup))
	}
	if !ok {
		return nil, badRequest("invalid_json", "The body must be one JSON object.")
	}
	return members, nil
}

// jsonMembers splits b, which must be exactly one JSON object, into its members in order, each
// value a slice of b. It reports false when b is not one object, and the first name that is there
// twice. json.Valid checks b whole; the walk (objectMembers) only finds where members end. It pays:
// a custom object of 52 members took 90-120 us and 688 allocations split by json.Decoder's tokens;
// 27-34 us and 111 in the same run (-bench JSONMembers).
func jsonMembers(b []byte) (members []member, dup string, ok bool) {
	if i := jsonSpace(b, 0); i == len(b) || b[i] != '{' || !json.Valid(b) {
		return nil, "", false
	}
	members = objectMembers(b)
	for i, m := range members {
		if hasMember(members[:i], m.name) {
			return nil, m.name, false
		}
	}
	return members, "", true
}

// objectMembers splits b, valid JSON that names each member once (this server's encoding of an
// object, or a value in a body jsonMembers took), into its members in order; nil when b is not an
// object. A write with custom values splits its 52-member custom objects four to six times: without
// jsonMembers' checks that takes 11-12 us where jsonMembers takes 22 (-bench JSONMembers).
func objectMembers(b []byte) (members []member) {
	i := jsonSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return nil
	}
	members = make([]member, 0, bytes.Count(b, []byte{':'})) // one a member, or more
	for i = jsonSpace(b, i+1); b[i] != '}'; {
		end := jsonEnd(b, i)
		name := string(b[i+1 : end-1])
		if bytes.IndexByte(b[i:end], '\\') >= 0 {
			var s string // not name: json.Unmarshal would take it to the heap at each member
			json.Unmarshal(b[i:end], &s)
			name = s
		}
		i = jsonSpace(b, jsonSpace(b, end)+1) // past the colon
		end = jsonEnd(b, i)
		members = append(members, member{name, b[i:end:end]})
		i = jsonSpace(b, end)
		if b[i] == ',' {
			i = jsonSpace(b, i+1)
		}
	}
	return members
}

// jsonEnd returns where the value that starts at b[i] ends, in b, which is valid JSON.
func jsonEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		for i++; b[i] != '"'; i++ {
			if b[i] == '\\' {
				i++
			}
		}
		return i + 1
	case '{', '[':
		for depth := 0; ; i++ {
			switch b[i] {
			case '"':
				i = jsonEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
	}
	return i + bytes.IndexAny(b[i:], ",}] \t\r\n") // a number, true, false or null, in an object
}

// jsonSpace returns where the JSON whitespace that starts at b[i] ends.
func jsonSpace(b []byte, i int) int {
	for ; i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n'); i++ {
	}
	return i
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

// bodyField is a field a client may set: its JSON name, how a raw JSON value is applied to the Go
// value it sets (apply returns "" or what is wrong, for the client), and whether a create must name it.
type bodyField struct {
	name     string
	apply    func(raw json.RawMessage) string
	required bool
}

// readOnlyFields may be read but never sent.
var readOnlyFields = []string{"id", "userCreatorId", "createdAt", "updatedAt"}

// applyMembers applies each member to the field of its name, and returns one error per member that
// is unknown, read-only or refused by its field.
func applyMembers(members []member, fields []bodyField, readOnly []string) []fieldError {
	var errs []fieldError
	for _, m := range members {
		msg := "is not a known field"
		if slices.Contains(readOnly, m.name) {
			msg = "is read-only"
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

// applyCreate is applyMembers for a create: a required field the body does not name is an error too.
func applyCreate(members []member, fields []bodyField) []fieldError {
	errs := applyMembers(members, fields, readOnlyFields)
	for _, f := range fields {
		if f.required && !hasMember(members, f.name) {
			errs = append(errs, fieldError{Field: f.name, Message: "is required"})
		}
	}
	return errs
}

// hasMember reports whether the body named field.
func hasMember(members []member, field string) bool {
	return slices.ContainsFunc(members, func(m member) bool { return m.name == field })
}

// The rules of the fields: each returns the apply function of a bodyField over the Go value it sets.
// A nullable field is a pgtype.Text, Int8 or Timestamptz, which pgx scans without reflection: against
// pointers, scanned through reflect, `make bench BASELINE=<pointers> ROUNDS=3` measured list100 1.17x,
// retrieve+5 1.30x, retrieve 1.01x (20,000 contacts, wrk -c32, paired rounds); sql.NullString and its
// kin, through database/sql's Scanner, are slower still.

// isNull reports whether a raw JSON value is null.
func isNull(raw json.RawMessage) bool { return string(raw) == "null" }

// nullable returns the apply function of a nullable field: null sets *p to NULL (T's zero value),
// another value sets it to what read makes of it, unless read says what is wrong.
func nullable[T any](p *T, read func(raw json.RawMessage) (T, string)) func(json.RawMessage) string {
	return func(raw json.RawMessage) string {
		var v T
		msg := ""
		if !isNull(raw) {
			v, msg = read(raw)
		}
		if msg == "" {
			*p = v
		}
		return msg
	}
}

// jsonString decodes raw as a JSON string of at most max characters without NUL characters
// (PostgreSQL text cannot hold them).
func jsonString(raw json.RawMessage, max int) (string, string) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
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

// requiredText sets a string that is not null and not blank.
func requiredText(p *string, max int) func(json.RawMessage) string {
	return func(raw json.RawMessage) string {
		if isNull(raw) {
			return "is required"
		}
		s, msg := jsonString(raw, max)
		if msg == "" && strings.TrimSpace(s) == "" {
			msg = "must not be empty"
		}
		if msg == "" {
			*p = s
		}
		return msg
	}
}

// nullableText sets a string or null; check, when not nil, vets the string.
func nullableText(p *pgtype.Text, max int, check func(string) string) func(json.RawMessage) string {
	return nullable(p, func(raw json.RawMessage) (pgtype.Text, string) {
		s, msg := jsonString(raw, max)
		if msg == "" && check != nil {
			msg = check(s)
		}
		return pgtype.Text{String: s, Valid: true}, msg
	})
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

// boolean sets a boolean that is not null.
func boolean(p *bool) func(json.RawMessage) string {
	return func(raw json.RawMessage) string {
		if s := string(raw); s != "true" && s != "false" {
			return "must be true or false"
		}
		*p = string(raw) == "true"
		return ""
	}
}

// jsonInt decodes raw as a JSON integer in [min, max]: no fraction, exponent, quotes or leading zeros.
func jsonInt(raw json.RawMessage, min, max int64) (int64, string) {
	s := string(raw)
	n, err := strconv.ParseInt(s, 10, 64)
	overflow := errors.Is(err, strconv.ErrRange)
	if !overflow && (err != nil || strconv.FormatInt(n, 10) != s) {
		return 0, "must be an integer"
	}
	if overflow || n < min || n > max {
		return 0, fmt.Sprintf("must be an integer from %d to %d", min, max)
	}
	return n, ""
}

// nullableInt sets an integer in [min, max], or null.
func nullableInt(p *pgtype.Int8, min, max int64) func(json.RawMessage) string {
	return nullable(p, func(raw json.RawMessage) (pgtype.Int8, string) {
		n, msg := jsonInt(raw, min, max)
		return pgtype.Int8{Int64: n, Valid: true}, msg
	})
}

// requiredInt sets an integer in [min, max] that is not null.
func requiredInt(p *pgtype.Int8, min, max int64) func(json.RawMessage) string {
	set := nullableInt(p, min, max)
	return func(raw json.RawMessage) string {
		if isNull(raw) {
			return "must be an integer"
		}
		return set(raw)
	}
}

// nullableID sets a reference id (a positive integer) or null.
func nullableID(p *pgtype.Int8) func(json.RawMessage) string {
	set := nullableInt(p, 1, 1<<63-1)
	return func(raw json.RawMessage) string {
		if set(raw) != "" {
			return "must be a positive integer id or null"
		}
		return ""
	}
}

// requiredID sets a reference id that is not null.
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
func nullableTime(p *pgtype.Timestamptz) func(json.RawMessage) string {
	return nullable(p, func(raw json.RawMessage) (pgtype.Timestamptz, string) {
		s, msg := jsonString(raw, 64)
		if msg != "" {
			return pgtype.Timestamptz{}, "must be an RFC 3339 timestamp string"
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		t = t.UTC()
		if err != nil || t.Year() < 1 || t.Year() > 9999 {
			return pgtype.Timestamptz{}, "must be an RFC 3339 timestamp like 2026-11-21T09:30:00.123Z"
		}
		return pgtype.Timestamptz{Time: t.Truncate(time.Millisecond), Valid: true}, ""
	})
}

// requiredTime sets an RFC 3339 timestamp that is not null (as nullableTime).
func requiredTime(p *pgtype.Timestamptz) func(json.RawMessage) string {
	set := nullableTime(p)
	return func(raw json.RawMessage) string {
		if isNull(raw) {
			return "must be an RFC 3339 timestamp like 2026-11-21T09:30:00.123Z"
		}
		return set(raw)
	}
}

// checkNotBlank refuses a text of only white space.
func checkNotBlank(s string) string {
	if strings.TrimSpace(s) == "" {
		return "must not be empty"
	}
	return ""
}

// maxMoneyDigits is how many digits an amount may have before its decimal point.
const maxMoneyDigits = 13

// money sets an exact amount or null, from the JSON number's own text, never a float64.
func money(p *pgtype.Text) func(json.RawMessage) string {
	return nullable(p, func(raw json.RawMessage) (pgtype.Text, string) {
		s, msg := parseMoney(string(raw))
		return pgtype.Text{String: s, Valid: true}, msg
	})
}

// parseMoney returns the canonical decimal text of a JSON number that is a valid amount (0 or more,
// at most 2 fractional digits as written, so 0.10 stays 0.10; an exponent applied, so 1e2 is 100),
// or what is wrong with it.
func parseMoney(s string) (string, string) {
	if strings.HasPrefix(s, "-") {
		return "", "must be 0 or more"
	}
	mant, expText, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, hasPoint := strings.Cut(mant, ".")
	if !allDigits(intPart) || (len(intPart) > 1 && intPart[0] == '0') || (hasPoint && !allDigits(frac)) {
		return "", "must be a number"
	}
	exp := 0
	if hasExp {
		e, err := strconv.Atoi(expText)
		if err != nil || !allDigits(strings.TrimLeft(expText, "+-")) {
			return "", "must be a number"
		}
		if e > 2*maxMoneyDigits || e < -2*maxMoneyDigits {
			return "", fmt.Sprintf("must be below 1e%d with at most 2 decimal places", maxMoneyDigits)
		}
		exp = e
	}
	// Move the decimal point exp places within the digits, padding with zeros.
	digits := intPart + frac
	point := len(intPart) + exp // where in digits the decimal point is
	if point > len(digits) {
		digits += strings.Repeat("0", point-len(digits))
	}
	if point < 0 {
		digits = strings.Repeat("0", -point) + digits
		point = 0
	}
	whole := strings.TrimLeft(digits[:point], "0")
	fraction := digits[point:]
	if whole == "" {
		whole = "0"
	}
	if len(fraction) > 2 {
		return "", "must have at most 2 decimal places"
	}
	if len(whole) > maxMoneyDigits {
		return "", fmt.Sprintf("must be below 1e%d", maxMoneyDigits)
	}
	if fraction == "" {
		return whole, ""
	}
	return whole + "." + fraction, ""
}

// allDigits reports whether s is one or more of the digits 0 to 9.
func allDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}
