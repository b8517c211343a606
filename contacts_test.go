package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// API tests of /v1/contacts, through the real server and PostgreSQL. Every test makes its own
// companies, so they run in parallel and each one also checks tenant isolation.

// wireContact is a contact as the API writes it. Optional fields are pointers: nil is JSON null.
type wireContact struct {
	ID             string  `json:"id"`
	Name           string  `json:"name"`
	Surname        *string `json:"surname"`
	DNI            *string `json:"dni"`
	JobTitle       *string `json:"jobTitle"`
	Email          *string `json:"email"`
	SecondaryEmail *string `json:"secondaryEmail"`
	Phone          *string `json:"phone"`
	MobilePhone    *string `json:"mobilePhone"`
	URLAvatar      *string `json:"urlAvatar"`
	Address        *string `json:"address"`
	City           *string `json:"city"`
	WithSales      bool    `json:"withSales"`
	CountryID      *int64  `json:"countryId"`
	Classification *int64  `json:"classification"`
	StageID        *int64  `json:"stageId"`
	OrganizationID *int64  `json:"organizationId"`
	AssignedToID   *int64  `json:"assignedToId"`
	UserCreatorID  int64   `json:"userCreatorId"`
	CreatedAt      string  `json:"createdAt"`
	UpdatedAt      string  `json:"updatedAt"`
}

// contactKeys are the members of every contact object, in the order the API writes them.
var contactKeys = []string{"id", "name", "surname", "dni", "jobTitle", "email", "secondaryEmail", "phone",
	"mobilePhone", "urlAvatar", "address", "city", "withSales", "countryId", "classification", "stageId",
	"organizationId", "assignedToId", "userCreatorId", "createdAt", "updatedAt"}

var (
	apiTimeRE   = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)
	contactIDRE = regexp.MustCompile(`^[1-9][0-9]*$`)
)

// ignoreServerSet leaves out of a comparison what the server chooses: the id and the timestamps.
var ignoreServerSet = cmpopts.IgnoreFields(wireContact{}, "ID", "CreatedAt", "UpdatedAt")

func ptrTo[T any](v T) *T { return &v }

// objectKeys returns the member names of the JSON object b, in order.
func objectKeys(t *testing.T, b []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%s: not a JSON object (%v)", b, err)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
	}
	return keys
}

// decodeContact decodes one contact object strictly and checks its shape: exactly contactKeys in
// that order (so an unset field is null, not absent), id a JSON string of digits, reference ids
// JSON numbers (a string does not decode into *int64), timestamps in the API's format.
func decodeContact(t *testing.T, b []byte) wireContact {
	t.Helper()
	if diff := cmp.Diff(contactKeys, objectKeys(t, b)); diff != "" {
		t.Errorf("contact members (-want +got):\n%s\nin %s", diff, b)
	}
	var c wireContact
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("contact %s: %v", b, err)
	}
	if !contactIDRE.MatchString(c.ID) {
		t.Errorf("contact id %q; want a string of decimal digits", c.ID)
	}
	if !apiTimeRE.MatchString(c.CreatedAt) || !apiTimeRE.MatchString(c.UpdatedAt) {
		t.Errorf("createdAt %q, updatedAt %q; want UTC with exactly 3 fractional digits", c.CreatedAt, c.UpdatedAt)
	}
	return c
}

// wirePage is the body of a list answer.
type wirePage struct {
	Data       []json.RawMessage `json:"data"`
	Pagination wirePagination    `json:"pagination"`
}

type wirePagination struct {
	Limit      int     `json:"limit"`
	HasMore    bool    `json:"hasMore"`
	NextCursor *string `json:"nextCursor"`
}

// listContactsPage GETs one list page and decodes it, failing unless it is a 200 page.
func listContactsPage(t *testing.T, c testCompany, query string) ([]wireContact, wirePagination) {
	t.Helper()
	path := "/v1/contacts" + query
	r := call(t, "GET", path, c.key, "")
	if r.status != http.StatusOK {
		t.Fatalf("GET %s = %d; want 200 (body %s)", path, r.status, r.body)
	}
	if diff := cmp.Diff([]string{"data", "pagination"}, objectKeys(t, r.body)); diff != "" {
		t.Errorf("GET %s: members (-want +got):\n%s", path, diff)
	}
	var p wirePage
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("GET %s: %s: %v", path, r.body, err)
	}
	if p.Data == nil {
		t.Errorf("GET %s: data is null; want an array", path)
	}
	out := make([]wireContact, 0, len(p.Data))
	for _, raw := range p.Data {
		out = append(out, decodeContact(t, raw))
	}
	return out, p.Pagination
}

// walkContacts follows nextCursor from the first page to the last and returns the ids in order and
// the number of pages.
func walkContacts(t *testing.T, c testCompany, limit int) (ids []string, pages int) {
	t.Helper()
	query := "?limit=" + strconv.Itoa(limit)
	for {
		cs, p := listContactsPage(t, c, query)
		pages++
		for _, ct := range cs {
			ids = append(ids, ct.ID)
		}
		if p.Limit != limit || p.HasMore != (p.NextCursor != nil) {
			t.Fatalf("page %d: pagination %+v; want limit %d and a cursor exactly when hasMore", pages, p, limit)
		}
		if !p.HasMore {
			return ids, pages
		}
		if pages > 1000 {
			t.Fatal("the cursor walk does not end")
		}
		query = "?limit=" + strconv.Itoa(limit) + "&cursor=" + *p.NextCursor
	}
}

// mustCreateContact POSTs body as c and returns the new contact and the answer, failing unless 201.
func mustCreateContact(t *testing.T, c testCompany, body string) (wireContact, response) {
	t.Helper()
	r := call(t, "POST", "/v1/contacts", c.key, body)
	if r.status != http.StatusCreated {
		t.Fatalf("POST /v1/contacts %s = %d; want 201 (body %s)", body, r.status, r.body)
	}
	return decodeContact(t, r.body), r
}

// mustGetContact GETs the contact id as c, failing unless 200.
func mustGetContact(t *testing.T, c testCompany, id string) response {
	t.Helper()
	r := call(t, "GET", "/v1/contacts/"+id, c.key, "")
	if r.status != http.StatusOK {
		t.Fatalf("GET /v1/contacts/%s = %d; want 200 (body %s)", id, r.status, r.body)
	}
	return r
}

// contactCount GETs /v1/contacts/count as c.
func contactCount(t *testing.T, c testCompany) int64 {
	t.Helper()
	r := call(t, "GET", "/v1/contacts/count", c.key, "")
	if r.status != http.StatusOK {
		t.Fatalf("GET /v1/contacts/count = %d; want 200 (body %s)", r.status, r.body)
	}
	var got struct {
		Count *int64 `json:"count"`
	}
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil || got.Count == nil {
		t.Fatalf("count body %s: %v; want {\"count\": n}", r.body, err)
	}
	return *got.Count
}

// mustMarshal encodes v as a JSON body.
func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sqlContactStage returns a contact stage (board_id NULL) of the company.
func sqlContactStage(t *testing.T, companyID int64) int64 {
	t.Helper()
	return sqlID(t, `SELECT id FROM stages WHERE company_id = $1 AND board_id IS NULL ORDER BY id LIMIT 1`, companyID)
}

// sqlBoardStage returns a stage of one of the company's business boards.
func sqlBoardStage(t *testing.T, companyID int64) int64 {
	t.Helper()
	return sqlID(t, `SELECT id FROM stages WHERE company_id = $1 AND board_id IS NOT NULL ORDER BY id LIMIT 1`, companyID)
}

// sqlOrganization inserts an organization for the company and returns its id.
func sqlOrganization(t *testing.T, companyID int64, name string) int64 {
	t.Helper()
	return sqlID(t, `INSERT INTO organizations (company_id, name) VALUES ($1, $2) RETURNING id`, companyID, name)
}

func parseAPITime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("timestamp %q: %v", s, err)
	}
	return tm
}

func TestContactCreateReturns201WithLocationAndETag(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	stage := sqlContactStage(t, c.id)
	org := sqlOrganization(t, c.id, "Acme")
	in := map[string]any{
		"name":           `Ana "la <jefa>" & co`,
		"surname":        "Pérez\u2028García",
		"dni":            "12345678Z",
		"jobTitle":       "CEO 🚀",
		"email":          "ana.perez+crm@example.com",
		"secondaryEmail": "ANA@Example.ES",
		"phone":          "+34 600 000 000",
		"mobilePhone":    "600\t000\t000",
		"urlAvatar":      "https://cdn.example.com/a.png?size=64&x=<y>",
		"address":        "Calle \\ Mayor 1\n28013",
		"city":           "Madrid",
		"withSales":      true,
		"countryId":      724,
		"classification": -5,
		"stageId":        stage,
		"organizationId": org,
		"assignedToId":   c.userID,
	}
	before := time.Now().Add(-time.Second)
	got, r := mustCreateContact(t, c, mustMarshal(t, in))

	want := wireContact{
		Name:           `Ana "la <jefa>" & co`,
		Surname:        ptrTo("Pérez\u2028García"),
		DNI:            ptrTo("12345678Z"),
		JobTitle:       ptrTo("CEO 🚀"),
		Email:          ptrTo("ana.perez+crm@example.com"),
		SecondaryEmail: ptrTo("ANA@Example.ES"),
		Phone:          ptrTo("+34 600 000 000"),
		MobilePhone:    ptrTo("600\t000\t000"),
		URLAvatar:      ptrTo("https://cdn.example.com/a.png?size=64&x=<y>"),
		Address:        ptrTo("Calle \\ Mayor 1\n28013"),
		City:           ptrTo("Madrid"),
		WithSales:      true,
		CountryID:      ptrTo[int64](724),
		Classification: ptrTo[int64](-5),
		StageID:        ptrTo(stage),
		OrganizationID: ptrTo(org),
		AssignedToID:   ptrTo(c.userID),
		UserCreatorID:  c.userID,
	}
	if diff := cmp.Diff(want, got, ignoreServerSet); diff != "" {
		t.Errorf("POST /v1/contacts answer (-want +got):\n%s", diff)
	}
	if loc := r.header.Get("Location"); loc != "/v1/contacts/"+got.ID {
		t.Errorf("Location = %q; want /v1/contacts/%s", loc, got.ID)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q; want application/json", ct)
	}
	etag := r.header.Get("ETag")
	if !regexp.MustCompile(`^"[^"]+"$`).MatchString(etag) {
		t.Errorf("ETag = %q; want a strong entity tag", etag)
	}
	if got.CreatedAt != got.UpdatedAt {
		t.Errorf("createdAt %s, updatedAt %s; want them equal on a new contact", got.CreatedAt, got.UpdatedAt)
	}
	if created := parseAPITime(t, got.CreatedAt); created.Before(before) || created.After(time.Now().Add(time.Second)) {
		t.Errorf("createdAt %s; want about now", got.CreatedAt)
	}

	g := mustGetContact(t, c, got.ID)
	if !bytes.Equal(g.body, r.body) {
		t.Errorf("GET after POST differs from the POST answer:\nGET  %s\nPOST %s", g.body, r.body)
	}
	if g.header.Get("ETag") != etag {
		t.Errorf("GET ETag = %q; want the POST's %q", g.header.Get("ETag"), etag)
	}
	if ct := g.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("GET Content-Type = %q; want application/json", ct)
	}
}

func TestContactCreateWithOnlyNameHasNullsAndDefaults(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	got, r := mustCreateContact(t, c, `{"name":"Ana"}`)
	want := wireContact{Name: "Ana", UserCreatorID: c.userID}
	if diff := cmp.Diff(want, got, ignoreServerSet); diff != "" {
		t.Errorf("POST {\"name\":\"Ana\"} (-want +got):\n%s", diff)
	}
	// Beyond the decoded values: the raw members are null, false, and the id a string.
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range contactKeys {
		v := string(raw[k])
		switch k {
		case "id":
			if v != strconv.Quote(got.ID) {
				t.Errorf("id = %s; want a JSON string", v)
			}
		case "name", "createdAt", "updatedAt":
		case "withSales":
			if v != "false" {
				t.Errorf("withSales = %s; want false", v)
			}
		case "userCreatorId":
			if v != strconv.FormatInt(c.userID, 10) {
				t.Errorf("userCreatorId = %s; want the number %d", v, c.userID)
			}
		default:
			if v != "null" {
				t.Errorf("%s = %s; want null", k, v)
			}
		}
	}
}

func TestContactValidValuesAndReferencesAreAccepted(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	stage := sqlContactStage(t, c.id)
	org := sqlOrganization(t, c.id, "Acme")
	tests := []struct {
		name string
		body string
		want wireContact
	}{
		{"a name of 255 characters", `{"name":"` + strings.Repeat("a", 255) + `"}`,
			wireContact{Name: strings.Repeat("a", 255)}},
		{"a name of 255 two-byte characters", `{"name":"` + strings.Repeat("é", 255) + `"}`,
			wireContact{Name: strings.Repeat("é", 255)}},
		{"an address of 1000 characters", `{"name":"A","address":"` + strings.Repeat("x", 1000) + `"}`,
			wireContact{Name: "A", Address: ptrTo(strings.Repeat("x", 1000))}},
		{"e-mail addresses", `{"name":"A","email":"ana.p+tag@sub.example.es","secondaryEmail":"A@B.CO"}`,
			wireContact{Name: "A", Email: ptrTo("ana.p+tag@sub.example.es"), SecondaryEmail: ptrTo("A@B.CO")}},
		{"an http avatar URL", `{"name":"A","urlAvatar":"http://x.com/a.png"}`,
			wireContact{Name: "A", URLAvatar: ptrTo("http://x.com/a.png")}},
		{"an https avatar URL", `{"name":"A","urlAvatar":"https://x.com:8443/a.png?v=1#f"}`,
			wireContact{Name: "A", URLAvatar: ptrTo("https://x.com:8443/a.png?v=1#f")}},
		{"explicit nulls", `{"name":"A","surname":null,"email":null,"countryId":null,"stageId":null,"organizationId":null,"assignedToId":null,"classification":null}`,
			wireContact{Name: "A"}},
		{"the smallest classification", `{"name":"A","classification":-2147483648}`,
			wireContact{Name: "A", Classification: ptrTo[int64](-2147483648)}},
		{"the largest classification", `{"name":"A","classification":2147483647}`,
			wireContact{Name: "A", Classification: ptrTo[int64](2147483647)}},
		{"withSales false", `{"name":"A","withSales":false}`, wireContact{Name: "A"}},
		{"Spain as country", `{"name":"A","countryId":724}`, wireContact{Name: "A", CountryID: ptrTo[int64](724)}},
		{"a contact stage of the company", fmt.Sprintf(`{"name":"A","stageId":%d}`, stage),
			wireContact{Name: "A", StageID: ptrTo(stage)}},
		{"an organization of the company", fmt.Sprintf(`{"name":"A","organizationId":%d}`, org),
			wireContact{Name: "A", OrganizationID: ptrTo(org)}},
		{"a user of the company as assignee", fmt.Sprintf(`{"name":"A","assignedToId":%d}`, c.userID),
			wireContact{Name: "A", AssignedToID: ptrTo(c.userID)}},
		{"a name with escapes", `{"name":"\u00c1na \"\\\" \ud83d\ude80"}`, wireContact{Name: "Ána \"\\\" 🚀"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, r := mustCreateContact(t, c, tt.body)
			tt.want.UserCreatorID = c.userID
			if diff := cmp.Diff(tt.want, got, ignoreServerSet); diff != "" {
				t.Errorf("POST %s (-want +got):\n%s", tt.body, diff)
			}
			if g := mustGetContact(t, c, got.ID); !bytes.Equal(g.body, r.body) {
				t.Errorf("GET after POST:\n%s\nwant the POST answer\n%s", g.body, r.body)
			}
		})
	}
}

// contactValidationCases are bodies with bad fields and the fields each must name, in order. Each
// body is for POST; PATCH sends the same body unless postOnly. boardStage is a stage of one of the
// company's business boards, which a contact may not use.
func contactValidationCases(boardStage int64) []struct {
	name     string
	body     string
	fields   []string
	postOnly bool
} {
	type tc = struct {
		name     string
		body     string
		fields   []string
		postOnly bool
	}
	long := func(n int) string { return strings.Repeat("x", n) }
	cases := []tc{
		{"a body without name", `{}`, []string{"name"}, true},
		{"a body with other fields but no name", `{"surname":"Pérez"}`, []string{"name"}, true},
		{"a null name", `{"name":null}`, []string{"name"}, false},
		{"an empty name", `{"name":""}`, []string{"name"}, false},
		{"a blank name", `{"name":"   "}`, []string{"name"}, false},
		{"a name of tabs and newlines", `{"name":"\t\n"}`, []string{"name"}, false},
		{"a name of 256 characters", `{"name":"` + long(256) + `"}`, []string{"name"}, false},
		{"a name that is a number", `{"name":5}`, []string{"name"}, false},
		{"a name with a NUL character", `{"name":"a\u0000b"}`, []string{"name"}, false},
		{"an address of 1001 characters", `{"name":"Ana","address":"` + long(1001) + `"}`, []string{"address"}, false},
		{"an avatar URL of 1001 characters", `{"name":"Ana","urlAvatar":"http://x.com/` + long(1001-len("http://x.com/")) + `"}`, []string{"urlAvatar"}, false},
		{"an e-mail that is a word", `{"name":"Ana","email":"x"}`, []string{"email"}, false},
		{"an e-mail without a dot in the domain", `{"name":"Ana","email":"a@b"}`, []string{"email"}, false},
		{"an e-mail with a display name", `{"name":"Ana","email":"Ana <a@b.com>"}`, []string{"email"}, false},
		{"an e-mail with a trailing space", `{"name":"Ana","email":"a@b.com "}`, []string{"email"}, false},
		{"an empty e-mail", `{"name":"Ana","email":""}`, []string{"email"}, false},
		{"an e-mail that is a number", `{"name":"Ana","email":5}`, []string{"email"}, false},
		{"a secondary e-mail that is a word", `{"name":"Ana","secondaryEmail":"x"}`, []string{"secondaryEmail"}, false},
		{"a secondary e-mail without a dot in the domain", `{"name":"Ana","secondaryEmail":"a@b"}`, []string{"secondaryEmail"}, false},
		{"a secondary e-mail with a display name", `{"name":"Ana","secondaryEmail":"Ana <a@b.com>"}`, []string{"secondaryEmail"}, false},
		{"an ftp avatar URL", `{"name":"Ana","urlAvatar":"ftp://x.com/a.png"}`, []string{"urlAvatar"}, false},
		{"a relative avatar URL", `{"name":"Ana","urlAvatar":"/a.png"}`, []string{"urlAvatar"}, false},
		{"an avatar URL that is not a URL", `{"name":"Ana","urlAvatar":"notaurl"}`, []string{"urlAvatar"}, false},
		{"an avatar URL without a host", `{"name":"Ana","urlAvatar":"http:///a.png"}`, []string{"urlAvatar"}, false},
		{"an avatar URL with a space", `{"name":"Ana","urlAvatar":"https://x.com/a b.png"}`, []string{"urlAvatar"}, false},
		{"an unknown field", `{"name":"Ana","nickname":"Anita"}`, []string{"nickname"}, false},
		{"a field in the wrong case", `{"name":"Ana","Surname":"P"}`, []string{"Surname"}, false},
		{"the read-only id", `{"name":"Ana","id":"5"}`, []string{"id"}, false},
		{"the read-only userCreatorId", `{"name":"Ana","userCreatorId":1}`, []string{"userCreatorId"}, false},
		{"the read-only createdAt", `{"name":"Ana","createdAt":"2026-01-01T00:00:00.000Z"}`, []string{"createdAt"}, false},
		{"the read-only updatedAt", `{"name":"Ana","updatedAt":"2026-01-01T00:00:00.000Z"}`, []string{"updatedAt"}, false},
		{"withSales as a string", `{"name":"Ana","withSales":"yes"}`, []string{"withSales"}, false},
		{"withSales as a number", `{"name":"Ana","withSales":1}`, []string{"withSales"}, false},
		{"withSales null", `{"name":"Ana","withSales":null}`, []string{"withSales"}, false},
		{"countryId as a string", `{"name":"Ana","countryId":"724"}`, []string{"countryId"}, false},
		{"countryId with a fraction", `{"name":"Ana","countryId":1.5}`, []string{"countryId"}, false},
		{"countryId with an exponent", `{"name":"Ana","countryId":7.24e2}`, []string{"countryId"}, false},
		{"countryId zero", `{"name":"Ana","countryId":0}`, []string{"countryId"}, false},
		{"countryId negative", `{"name":"Ana","countryId":-724}`, []string{"countryId"}, false},
		{"countryId a boolean", `{"name":"Ana","countryId":true}`, []string{"countryId"}, false},
		{"countryId beyond int64", `{"name":"Ana","countryId":9223372036854775808}`, []string{"countryId"}, false},
		{"classification with an exponent", `{"name":"Ana","classification":1e3}`, []string{"classification"}, false},
		{"classification with a fraction", `{"name":"Ana","classification":1.5}`, []string{"classification"}, false},
		{"classification as a string", `{"name":"Ana","classification":"3"}`, []string{"classification"}, false},
		{"classification above int32", `{"name":"Ana","classification":2147483648}`, []string{"classification"}, false},
		{"classification below int32", `{"name":"Ana","classification":-2147483649}`, []string{"classification"}, false},
		{"stageId as a string", `{"name":"Ana","stageId":"1"}`, []string{"stageId"}, false},
		{"organizationId as an array", `{"name":"Ana","organizationId":[1]}`, []string{"organizationId"}, false},
		{"assignedToId as an object", `{"name":"Ana","assignedToId":{}}`, []string{"assignedToId"}, false},
		{"a country that does not exist", `{"name":"Ana","countryId":999}`, []string{"countryId"}, false},
		{"a country id beyond the country table's range", `{"name":"Ana","countryId":9999999999}`, []string{"countryId"}, false},
		{"a stage of a business board", fmt.Sprintf(`{"name":"Ana","stageId":%d}`, boardStage), []string{"stageId"}, false},
		{"a stage that does not exist", `{"name":"Ana","stageId":999999999}`, []string{"stageId"}, false},
		{"an organization that does not exist", `{"name":"Ana","organizationId":999999999}`, []string{"organizationId"}, false},
		{"an assignee that does not exist", `{"name":"Ana","assignedToId":999999999}`, []string{"assignedToId"}, false},
		{"several bad fields", `{"name":"","email":"x","nickname":1,"id":"7","withSales":"no"}`,
			[]string{"name", "email", "nickname", "id", "withSales"}, false},
		{"several references to nothing", fmt.Sprintf(`{"name":"Ana","countryId":999,"stageId":%d,"organizationId":999999999,"assignedToId":999999999}`, boardStage),
			[]string{"countryId", "stageId", "organizationId", "assignedToId"}, false},
		{"a bad field and a reference to nothing", `{"name":"Ana","email":"x","countryId":999}`,
			[]string{"email", "countryId"}, false},
	}
	for _, f := range []string{"surname", "dni", "jobTitle", "phone", "mobilePhone", "city"} {
		cases = append(cases,
			tc{"a " + f + " of 256 characters", `{"name":"Ana","` + f + `":"` + long(256) + `"}`, []string{f}, false},
			tc{"a " + f + " that is a number", `{"name":"Ana","` + f + `":5}`, []string{f}, false},
			tc{"a " + f + " with a NUL character", `{"name":"Ana","` + f + `":"a\u0000"}`, []string{f}, false})
	}
	return cases
}

// wantFieldErrors checks that r is a 422 naming exactly fields, in order, each with a message.
func wantFieldErrors(t *testing.T, r response, fields []string) problemBody {
	t.Helper()
	p := wantProblem(t, r, http.StatusUnprocessableEntity, "validation_failed")
	var got []string
	for _, e := range p.Errors {
		got = append(got, e.Field)
		if e.Message == "" {
			t.Errorf("error on %s has no message", e.Field)
		}
	}
	if diff := cmp.Diff(fields, got); diff != "" {
		t.Errorf("errors[].field (-want +got):\n%s\nbody %s", diff, r.body)
	}
	return p
}

func TestContactCreateValidationErrorsAre422PerField(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	t.Run("each rule", func(t *testing.T) {
		for _, tt := range contactValidationCases(sqlBoardStage(t, c.id)) {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				r := call(t, "POST", "/v1/contacts", c.key, tt.body)
				wantFieldErrors(t, r, tt.fields)
				if r.header.Get("Location") != "" || r.header.Get("ETag") != "" {
					t.Errorf("a 422 with Location %q, ETag %q", r.header.Get("Location"), r.header.Get("ETag"))
				}
			})
		}
	})
	if n := contactCount(t, c); n != 0 {
		t.Errorf("after only failed POSTs, count = %d; want 0", n)
	}
}

func TestContactUpdateValidationErrorsAre422PerFieldAndChangeNothing(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	target, _ := mustCreateContact(t, c, `{"name":"Target","email":"t@example.com"}`)
	before := mustGetContact(t, c, target.ID)
	path := "/v1/contacts/" + target.ID
	t.Run("each rule", func(t *testing.T) {
		for _, tt := range contactValidationCases(sqlBoardStage(t, c.id)) {
			if tt.postOnly {
				continue
			}
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				r := call(t, "PATCH", path, c.key, tt.body)
				wantFieldErrors(t, r, tt.fields)
			})
		}
	})
	after := mustGetContact(t, c, target.ID)
	if !bytes.Equal(before.body, after.body) || before.header.Get("ETag") != after.header.Get("ETag") {
		t.Errorf("failed PATCHes changed the contact:\nbefore %s %s\nafter  %s %s",
			before.header.Get("ETag"), before.body, after.header.Get("ETag"), after.body)
	}
}

func TestContactGetByID(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	created, _ := mustCreateContact(t, c, `{"name":"Ana","city":"Madrid"}`)
	r := mustGetContact(t, c, created.ID)
	got := decodeContact(t, r.body)
	if diff := cmp.Diff(created, got); diff != "" {
		t.Errorf("GET /v1/contacts/%s (-want +got):\n%s", created.ID, diff)
	}
	if r.header.Get("ETag") == "" {
		t.Errorf("GET /v1/contacts/%s has no ETag", created.ID)
	}
}

func TestContactListIsPagedWithCursors(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)

	cs, p := listContactsPage(t, c, "")
	if len(cs) != 0 || p != (wirePagination{Limit: 25}) {
		t.Errorf("empty company: %d contacts, pagination %+v; want none, limit 25, no more, null cursor", len(cs), p)
	}

	var want []string
	for i := range 7 {
		ct, _ := mustCreateContact(t, c, fmt.Sprintf(`{"name":"Contact %d"}`, i))
		want = append(want, ct.ID)
	}
	tests := []struct {
		limit, pages int
	}{
		{1, 7}, {3, 3}, {6, 2}, {7, 1}, {8, 1}, {100, 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("limit %d walks %d pages", tt.limit, tt.pages), func(t *testing.T) {
			t.Parallel()
			ids, pages := walkContacts(t, c, tt.limit)
			if diff := cmp.Diff(want, ids); diff != "" {
				t.Errorf("ids over all pages (-want +got):\n%s", diff)
			}
			if pages != tt.pages {
				t.Errorf("walk took %d pages; want %d", pages, tt.pages)
			}
		})
	}

	t.Run("the first page of three has the first three and a cursor", func(t *testing.T) {
		cs, p := listContactsPage(t, c, "?limit=3")
		var ids []string
		for _, ct := range cs {
			ids = append(ids, ct.ID)
		}
		if diff := cmp.Diff(want[:3], ids); diff != "" {
			t.Errorf("ids (-want +got):\n%s", diff)
		}
		if p.Limit != 3 || !p.HasMore || p.NextCursor == nil || *p.NextCursor == "" {
			t.Errorf("pagination %+v; want limit 3, hasMore, a cursor", p)
		}
	})
	t.Run("list elements equal the objects GET returns", func(t *testing.T) {
		cs, _ := listContactsPage(t, c, "?limit=1")
		g := decodeContact(t, mustGetContact(t, c, cs[0].ID).body)
		if diff := cmp.Diff(g, cs[0]); diff != "" {
			t.Errorf("list element vs GET (-get +list):\n%s", diff)
		}
	})
}

func TestContactListDefaultLimitIs25(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for i := range 26 {
		mustCreateContact(t, c, fmt.Sprintf(`{"name":"C%d"}`, i))
	}
	cs, p := listContactsPage(t, c, "")
	if len(cs) != 25 || p.Limit != 25 || !p.HasMore || p.NextCursor == nil {
		t.Fatalf("GET /v1/contacts: %d contacts, pagination %+v; want 25, limit 25, hasMore and a cursor", len(cs), p)
	}
	rest, p := listContactsPage(t, c, "?cursor="+*p.NextCursor)
	if len(rest) != 1 || p.HasMore || p.NextCursor != nil {
		t.Errorf("second page: %d contacts, pagination %+v; want 1, no more, null cursor", len(rest), p)
	}
}

func TestContactListWalkSurvivesChangesMeanwhile(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	var ids []string
	for i := range 6 {
		ct, _ := mustCreateContact(t, c, fmt.Sprintf(`{"name":"C%d"}`, i))
		ids = append(ids, ct.ID)
	}
	cs, p := listContactsPage(t, c, "?limit=2")
	var seen []string
	for _, ct := range cs {
		seen = append(seen, ct.ID)
	}
	// Meanwhile: one seen and one unseen contact go, a new one comes.
	for _, id := range []string{ids[1], ids[2]} {
		if r := call(t, "DELETE", "/v1/contacts/"+id, c.key, ""); r.status != http.StatusNoContent {
			t.Fatalf("DELETE /v1/contacts/%s = %d; want 204", id, r.status)
		}
	}
	added, _ := mustCreateContact(t, c, `{"name":"New"}`)
	for p.HasMore {
		cs, p = listContactsPage(t, c, "?limit=2&cursor="+*p.NextCursor)
		for _, ct := range cs {
			seen = append(seen, ct.ID)
		}
	}
	want := []string{ids[0], ids[1], ids[3], ids[4], ids[5], added.ID}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("ids seen over the walk (-want +got):\n%s", diff)
	}
}

func TestContactCountFollowsCreateAndDelete(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	if n := contactCount(t, c); n != 0 {
		t.Errorf("count of a new company = %d; want 0", n)
	}
	var ids []string
	for i := range 3 {
		ct, _ := mustCreateContact(t, c, fmt.Sprintf(`{"name":"C%d"}`, i))
		ids = append(ids, ct.ID)
	}
	if n := contactCount(t, c); n != 3 {
		t.Errorf("count after 3 POSTs = %d; want 3", n)
	}
	call(t, "DELETE", "/v1/contacts/"+ids[1], c.key, "")
	if n := contactCount(t, c); n != 2 {
		t.Errorf("count after a DELETE = %d; want 2", n)
	}
	r := call(t, "GET", "/v1/contacts/count", c.key, "")
	if string(r.body) != "{\"count\":2}\n" || r.header.Get("Content-Type") != "application/json" {
		t.Errorf("GET /v1/contacts/count = %q (%s); want {\"count\":2} as application/json", r.body, r.header.Get("Content-Type"))
	}
}

func TestContactDeleteIs204ThenGone(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ct, _ := mustCreateContact(t, c, `{"name":"Ana"}`)
	keep, _ := mustCreateContact(t, c, `{"name":"Keep"}`)
	path := "/v1/contacts/" + ct.ID

	r := call(t, "DELETE", path, c.key, "")
	if r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("DELETE %s = %d %q; want 204 with no body", path, r.status, r.body)
	}
	tests := []struct {
		method, body string
	}{
		{"DELETE", ""}, {"GET", ""}, {"PATCH", `{"name":"Back"}`},
	}
	for _, tt := range tests {
		t.Run(tt.method+" after DELETE is 404", func(t *testing.T) {
			wantProblem(t, call(t, tt.method, path, c.key, tt.body), http.StatusNotFound, "not_found")
		})
	}
	mustGetContact(t, c, keep.ID)
	if n := contactCount(t, c); n != 1 {
		t.Errorf("count = %d; want 1", n)
	}
}

func TestContactUnknownIDIs404(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for _, id := range []string{"999999999", "9223372036854775807"} {
		for _, m := range []struct{ method, body string }{{"GET", ""}, {"PATCH", `{"name":"x"}`}, {"DELETE", ""}} {
			t.Run(m.method+" "+id, func(t *testing.T) {
				wantProblem(t, call(t, m.method, "/v1/contacts/"+id, c.key, m.body), http.StatusNotFound, "not_found")
			})
		}
	}
}

func TestContactBadPathIDsAre400(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ct, _ := mustCreateContact(t, c, `{"name":"Ana"}`)
	ids := []string{"abc", "0", "-1", "1.5", "9223372036854775808", "+1", "1e3", "0x1", "%20" + ct.ID, ct.ID + "%20", "１"}
	for _, id := range ids {
		for _, m := range []struct{ method, body string }{{"GET", ""}, {"PATCH", `{"name":"x"}`}, {"DELETE", ""}} {
			t.Run(m.method+" /v1/contacts/"+id+" is 400", func(t *testing.T) {
				t.Parallel()
				r := call(t, m.method, "/v1/contacts/"+id, c.key, m.body)
				wantProblem(t, r, http.StatusBadRequest, "invalid_id")
			})
		}
	}
}

func TestContactUpdateIsAMergePatch(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	stage := sqlContactStage(t, c.id)
	org := sqlOrganization(t, c.id, "Acme")
	created, _ := mustCreateContact(t, c, `{"name":"Ana","surname":"Pérez","email":"ana@example.com","classification":3}`)
	path := "/v1/contacts/" + created.ID
	want := created

	// Each step applies to the result of the one before.
	steps := []struct {
		name  string
		patch string
		apply func(w *wireContact)
	}{
		{"a value sets a field and leaves absent ones", `{"city":"Madrid"}`,
			func(w *wireContact) { w.City = ptrTo("Madrid") }},
		{"null clears a nullable string", `{"surname":null}`,
			func(w *wireContact) { w.Surname = nil }},
		{"null clears a nullable number", `{"classification":null}`,
			func(w *wireContact) { w.Classification = nil }},
		{"the required name takes a new value", `{"name":"Ana María"}`,
			func(w *wireContact) { w.Name = "Ana María" }},
		{"withSales turns on", `{"withSales":true}`,
			func(w *wireContact) { w.WithSales = true }},
		{"references take values", fmt.Sprintf(`{"countryId":724,"stageId":%d,"organizationId":%d,"assignedToId":%d}`, stage, org, c.userID),
			func(w *wireContact) {
				w.CountryID, w.StageID, w.OrganizationID, w.AssignedToID = ptrTo[int64](724), ptrTo(stage), ptrTo(org), ptrTo(c.userID)
			}},
		{"references clear with null", `{"countryId":null,"stageId":null,"organizationId":null,"assignedToId":null}`,
			func(w *wireContact) { w.CountryID, w.StageID, w.OrganizationID, w.AssignedToID = nil, nil, nil, nil }},
		{"several fields at once", `{"email":null,"secondaryEmail":"b@example.org","withSales":false,"dni":"X1"}`,
			func(w *wireContact) {
				w.Email, w.SecondaryEmail, w.WithSales, w.DNI = nil, ptrTo("b@example.org"), false, ptrTo("X1")
			}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			r := call(t, "PATCH", path, c.key, s.patch)
			if r.status != http.StatusOK {
				t.Fatalf("PATCH %s %s = %d; want 200 (body %s)", path, s.patch, r.status, r.body)
			}
			got := decodeContact(t, r.body)
			s.apply(&want)
			if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(wireContact{}, "UpdatedAt")); diff != "" {
				t.Errorf("PATCH %s (-want +got):\n%s", s.patch, diff)
			}
			if g := mustGetContact(t, c, created.ID); !bytes.Equal(g.body, r.body) || g.header.Get("ETag") != r.header.Get("ETag") {
				t.Errorf("GET after PATCH:\n%s %s\nwant the PATCH answer\n%s %s", g.header.Get("ETag"), g.body, r.header.Get("ETag"), r.body)
			}
			want = got
		})
	}
}

func TestContactUpdateEmptyPatchChangesNothing(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ct, created := mustCreateContact(t, c, `{"name":"Ana","city":"Madrid"}`)
	path := "/v1/contacts/" + ct.ID
	time.Sleep(5 * time.Millisecond) // a write now would move updatedAt
	for _, body := range []string{`{}`, ` { } `} {
		r := call(t, "PATCH", path, c.key, body)
		if r.status != http.StatusOK {
			t.Fatalf("PATCH %s %s = %d; want 200 (body %s)", path, body, r.status, r.body)
		}
		if !bytes.Equal(r.body, created.body) || r.header.Get("ETag") != created.header.Get("ETag") {
			t.Errorf("PATCH %s %s answered\n%s %s\nwant the unchanged contact\n%s %s", path, body,
				r.header.Get("ETag"), r.body, created.header.Get("ETag"), created.body)
		}
	}
	if g := mustGetContact(t, c, ct.ID); !bytes.Equal(g.body, created.body) {
		t.Errorf("GET after PATCH {}:\n%s\nwant\n%s", g.body, created.body)
	}
}

func TestContactUpdateMovesUpdatedAtAndETag(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ct, created := mustCreateContact(t, c, `{"name":"Ana"}`)
	path := "/v1/contacts/" + ct.ID
	prev, prevTag := ct, created.header.Get("ETag")
	for i := range 3 { // quickly in a row: each change still moves updatedAt
		r := call(t, "PATCH", path, c.key, fmt.Sprintf(`{"city":"City %d"}`, i))
		if r.status != http.StatusOK {
			t.Fatalf("PATCH %s = %d; want 200 (body %s)", path, r.status, r.body)
		}
		got := decodeContact(t, r.body)
		if got.CreatedAt != ct.CreatedAt {
			t.Errorf("PATCH moved createdAt from %s to %s", ct.CreatedAt, got.CreatedAt)
		}
		if !parseAPITime(t, got.UpdatedAt).After(parseAPITime(t, prev.UpdatedAt)) {
			t.Errorf("PATCH %d: updatedAt %s; want after %s", i, got.UpdatedAt, prev.UpdatedAt)
		}
		tag := r.header.Get("ETag")
		if tag == "" || tag == prevTag {
			t.Errorf("PATCH %d: ETag %q; want a new one (was %q)", i, tag, prevTag)
		}
		prev, prevTag = got, tag
	}
	wantProblem(t, call(t, "PATCH", path, c.key, `{"name":null}`), http.StatusUnprocessableEntity, "validation_failed")
}

func TestContactIfMatchGuardsUpdateAndDelete(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ct, created := mustCreateContact(t, c, `{"name":"Ana"}`)
	path := "/v1/contacts/" + ct.ID
	stale := created.header.Get("ETag")

	r := call(t, "PATCH", path, c.key, `{"city":"Madrid"}`)
	if r.status != http.StatusOK {
		t.Fatalf("PATCH %s = %d; want 200", path, r.status)
	}
	current := r.header.Get("ETag")
	if current == stale {
		t.Fatalf("ETag %s did not change with the PATCH", current)
	}
	before := mustGetContact(t, c, ct.ID)

	refused := []struct {
		name, method, ifMatch, body string
	}{
		{"PATCH with the ETag from before another PATCH", "PATCH", stale, `{"city":"Sevilla"}`},
		{"PATCH {} with a stale ETag", "PATCH", stale, `{}`},
		{"PATCH with a weak ETag", "PATCH", "W/" + current, `{"city":"Sevilla"}`},
		{"PATCH with an ETag that never was", "PATCH", `"nope"`, `{"city":"Sevilla"}`},
		{"DELETE with the ETag from before a PATCH", "DELETE", stale, ""},
	}
	for _, tt := range refused {
		t.Run(tt.name+" is 412", func(t *testing.T) {
			r := call(t, tt.method, path, c.key, tt.body, "If-Match", tt.ifMatch)
			wantProblem(t, r, http.StatusPreconditionFailed, "precondition_failed")
			after := mustGetContact(t, c, ct.ID)
			if !bytes.Equal(after.body, before.body) || after.header.Get("ETag") != before.header.Get("ETag") {
				t.Errorf("a refused %s changed the contact:\n%s\nwant\n%s", tt.method, after.body, before.body)
			}
		})
	}

	t.Run("PATCH with the current ETag works", func(t *testing.T) {
		r := call(t, "PATCH", path, c.key, `{"city":"Sevilla"}`, "If-Match", current)
		if r.status != http.StatusOK {
			t.Fatalf("PATCH If-Match %s = %d; want 200 (body %s)", current, r.status, r.body)
		}
		current = r.header.Get("ETag")
	})
	t.Run("PATCH with a list holding the current ETag works", func(t *testing.T) {
		r := call(t, "PATCH", path, c.key, `{"city":"Bilbao"}`, "If-Match", stale+", "+current)
		if r.status != http.StatusOK {
			t.Fatalf("PATCH If-Match %s, %s = %d; want 200 (body %s)", stale, current, r.status, r.body)
		}
	})
	t.Run("PATCH with * works", func(t *testing.T) {
		r := call(t, "PATCH", path, c.key, `{"city":"Cádiz"}`, "If-Match", "*")
		if r.status != http.StatusOK {
			t.Fatalf("PATCH If-Match * = %d; want 200 (body %s)", r.status, r.body)
		}
		current = r.header.Get("ETag")
	})
	t.Run("DELETE with the current ETag works", func(t *testing.T) {
		if r := call(t, "DELETE", path, c.key, "", "If-Match", current); r.status != http.StatusNoContent {
			t.Errorf("DELETE If-Match %s = %d; want 204 (body %s)", current, r.status, r.body)
		}
	})
	t.Run("DELETE with * works", func(t *testing.T) {
		other, _ := mustCreateContact(t, c, `{"name":"Other"}`)
		if r := call(t, "DELETE", "/v1/contacts/"+other.ID, c.key, "", "If-Match", "*"); r.status != http.StatusNoContent {
			t.Errorf("DELETE If-Match * = %d; want 204 (body %s)", r.status, r.body)
		}
	})
	if n := contactCount(t, c); n != 0 {
		t.Errorf("count = %d; want 0", n)
	}
}

func TestContactFailedUpdateChangesNothing(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ct, _ := mustCreateContact(t, c, `{"name":"Ana","city":"Madrid","email":"ana@example.com"}`)
	path := "/v1/contacts/" + ct.ID
	tests := []struct {
		name, body string
		status     int
	}{
		{"one good field and one bad field", `{"city":"Sevilla","email":"x"}`, http.StatusUnprocessableEntity},
		{"one good field and a reference to nothing", `{"city":"Sevilla","countryId":999}`, http.StatusUnprocessableEntity},
		{"one good field and an unknown field", `{"city":"Sevilla","nickname":"A"}`, http.StatusUnprocessableEntity},
		{"one good field and a read-only field", `{"city":"Sevilla","createdAt":"2020-01-01T00:00:00.000Z"}`, http.StatusUnprocessableEntity},
		{"one good field and a duplicate", `{"city":"Sevilla","city":"Bilbao"}`, http.StatusBadRequest},
		{"one good field and then garbage", `{"city":"Sevilla"} x`, http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := mustGetContact(t, c, ct.ID)
			r := call(t, "PATCH", path, c.key, tt.body)
			if r.status != tt.status {
				t.Errorf("PATCH %s = %d; want %d (body %s)", tt.body, r.status, tt.status, r.body)
			}
			after := mustGetContact(t, c, ct.ID)
			if !bytes.Equal(before.body, after.body) || before.header.Get("ETag") != after.header.Get("ETag") {
				t.Errorf("failed PATCH changed the contact:\nbefore %s\nafter  %s", before.body, after.body)
			}
		})
	}
}

func TestContactMalformedBodiesAre400(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	target, _ := mustCreateContact(t, c, `{"name":"Target"}`)
	before := mustGetContact(t, c, target.ID)
	bodies := []struct {
		name, body string
	}{
		{"an unclosed object", `{`},
		{"an array", `[]`},
		{"a string", `"x"`},
		{"null", `null`},
		{"a number", `1`},
		{"whitespace only", "  \n"},
		{"two objects", `{} {}`},
		{"an object and garbage", `{"name":"a"}x`},
		{"a trailing comma", `{"name":"a",}`},
		{"a missing colon", `{"name" "a"}`},
		{"an unquoted name", `{name:"a"}`},
		{"single quotes", `{'name':'a'}`},
		{"a truncated string", `{"name":"a`},
		{"a duplicate key", `{"name":"a","name":"b"}`},
		{"a duplicate key spelt with an escape", `{"name":"a","n\u0061me":"b"}`},
		{"invalid UTF-8 in a value", "{\"name\":\"a\xffb\"}"},
		{"invalid UTF-8 in a name", "{\"n\xc3me\":\"a\"}"},
		{"an encoded surrogate half", "{\"name\":\"a\xed\xa0\x80b\"}"},
		{"a byte order mark", "\xef\xbb\xbf{\"name\":\"a\"}"},
	}
	t.Run("each body", func(t *testing.T) {
		for _, tt := range bodies {
			for _, m := range []struct{ method, path string }{{"POST", "/v1/contacts"}, {"PATCH", "/v1/contacts/" + target.ID}} {
				t.Run(m.method+" "+tt.name+" is 400", func(t *testing.T) {
					t.Parallel()
					wantProblem(t, call(t, m.method, m.path, c.key, tt.body), http.StatusBadRequest, "invalid_json")
				})
			}
		}
	})
	if n := contactCount(t, c); n != 1 {
		t.Errorf("count = %d; want 1 (no malformed POST may create)", n)
	}
	if after := mustGetContact(t, c, target.ID); !bytes.Equal(after.body, before.body) {
		t.Errorf("malformed PATCHes changed the contact:\n%s\nwant\n%s", after.body, before.body)
	}
}

func TestContactContentTypeMustBeJSON(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	target, _ := mustCreateContact(t, c, `{"name":"Target"}`)
	targetPath := "/v1/contacts/" + target.ID
	refused := []string{"", "text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded",
		"application/json; charset=latin1", "application/jsonx", "application/merge-patch+json", "application/json; foo=bar"}
	for _, ct := range refused {
		for _, m := range []struct{ method, path string }{{"POST", "/v1/contacts"}, {"PATCH", targetPath}} {
			t.Run(fmt.Sprintf("%s with Content-Type %q is 415", m.method, ct), func(t *testing.T) {
				t.Parallel()
				r := call(t, m.method, m.path, c.key, `{"name":"Changed"}`, "Content-Type", ct)
				wantProblem(t, r, http.StatusUnsupportedMediaType, "unsupported_media_type")
			})
		}
	}
	t.Run("POST with no body and no Content-Type is 415", func(t *testing.T) {
		wantProblem(t, call(t, "POST", "/v1/contacts", c.key, ""), http.StatusUnsupportedMediaType, "unsupported_media_type")
	})
	accepted := []string{"application/json", "application/json; charset=utf-8", "application/json;charset=UTF-8", "Application/JSON"}
	for _, ct := range accepted {
		t.Run(fmt.Sprintf("Content-Type %q is accepted", ct), func(t *testing.T) {
			if r := call(t, "POST", "/v1/contacts", c.key, `{"name":"New"}`, "Content-Type", ct); r.status != http.StatusCreated {
				t.Errorf("POST = %d; want 201 (body %s)", r.status, r.body)
			}
			if r := call(t, "PATCH", targetPath, c.key, `{"city":"Madrid"}`, "Content-Type", ct); r.status != http.StatusOK {
				t.Errorf("PATCH = %d; want 200 (body %s)", r.status, r.body)
			}
		})
	}
	if n := contactCount(t, c); n != int64(1+len(accepted)) {
		t.Errorf("count = %d; want %d (no refused POST may create)", n, 1+len(accepted))
	}
	if got := decodeContact(t, mustGetContact(t, c, target.ID).body); got.Name != "Target" {
		t.Errorf("a refused PATCH renamed the contact to %q", got.Name)
	}
}

func TestContactBodyOver1MiBIs413(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	// padded is a valid body of exactly n bytes: spaces before the closing brace.
	padded := func(n int) string {
		const head = `{"name":"Ana"`
		return head + strings.Repeat(" ", n-len(head)-1) + "}"
	}
	t.Run("a body of exactly 1 MiB is read", func(t *testing.T) {
		if r := call(t, "POST", "/v1/contacts", c.key, padded(maxBodyBytes)); r.status != http.StatusCreated {
			t.Errorf("POST of %d bytes = %d; want 201 (body %s)", maxBodyBytes, r.status, r.body)
		}
	})
	t.Run("a body one byte over 1 MiB with Content-Length is 413", func(t *testing.T) {
		wantProblem(t, call(t, "POST", "/v1/contacts", c.key, padded(maxBodyBytes+1)), http.StatusRequestEntityTooLarge, "body_too_large")
	})
	t.Run("a large name in a body over 1 MiB is 413", func(t *testing.T) {
		body := `{"name":"` + strings.Repeat("a", 1<<20) + `"}`
		wantProblem(t, call(t, "POST", "/v1/contacts", c.key, body), http.StatusRequestEntityTooLarge, "body_too_large")
	})
	t.Run("a chunked body over 1 MiB is 413", func(t *testing.T) {
		// A reader of unknown length makes the client send the body chunked, without Content-Length.
		body := io.MultiReader(strings.NewReader(padded(maxBodyBytes + 1)))
		req, err := http.NewRequest("POST", testEnv.baseURL+"/v1/contacts", body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("x-api-key", c.key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if req.ContentLength > 0 {
			t.Fatalf("request ContentLength %d; want the body sent chunked", req.ContentLength)
		}
		wantProblem(t, response{status: resp.StatusCode, header: resp.Header, body: b}, http.StatusRequestEntityTooLarge, "body_too_large")
	})
	t.Run("PATCH over 1 MiB is 413", func(t *testing.T) {
		ct, _ := mustCreateContact(t, c, `{"name":"Target"}`)
		wantProblem(t, call(t, "PATCH", "/v1/contacts/"+ct.ID, c.key, padded(maxBodyBytes+1)), http.StatusRequestEntityTooLarge, "body_too_large")
	})
	if n := contactCount(t, c); n != 2 {
		t.Errorf("count = %d; want 2 (the 1 MiB POST and the PATCH target)", n)
	}
}

func TestContactUnknownQueryParametersAre400(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	ct, _ := mustCreateContact(t, c, `{"name":"Ana"}`)
	before := mustGetContact(t, c, ct.ID)
	path := "/v1/contacts/" + ct.ID
	endpoints := []struct{ method, path, body string }{
		{"GET", "/v1/contacts", ""},
		{"GET", "/v1/contacts/count", ""},
		{"GET", path, ""},
		{"POST", "/v1/contacts", `{"name":"New"}`},
		{"PATCH", path, `{"name":"Changed"}`},
		{"DELETE", path, ""},
	}
	for _, e := range endpoints {
		for _, q := range []string{"?foo=1", "?foo", "?limit=5&foo=1"} {
			if q == "?limit=5&foo=1" && !(e.method == "GET" && e.path == "/v1/contacts") {
				continue
			}
			t.Run(fmt.Sprintf("%s %s%s is 400", e.method, e.path, q), func(t *testing.T) {
				r := call(t, e.method, e.path+q, c.key, e.body)
				p := wantProblem(t, r, http.StatusBadRequest, "invalid_parameter")
				if !strings.Contains(p.Detail, "foo") {
					t.Errorf("detail %q; want it to name foo", p.Detail)
				}
			})
		}
	}
	t.Run("count takes no page parameters", func(t *testing.T) {
		wantProblem(t, call(t, "GET", "/v1/contacts/count?limit=5", c.key, ""), http.StatusBadRequest, "invalid_parameter")
	})
	if n := contactCount(t, c); n != 1 {
		t.Errorf("count = %d; want 1", n)
	}
	if after := mustGetContact(t, c, ct.ID); !bytes.Equal(after.body, before.body) {
		t.Errorf("refused requests changed the contact:\n%s\nwant\n%s", after.body, before.body)
	}
}

func TestContactBadLimitAndCursorAre400(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for i := range 3 {
		mustCreateContact(t, c, fmt.Sprintf(`{"name":"C%d"}`, i))
	}
	_, p := listContactsPage(t, c, "?limit=1")
	if p.NextCursor == nil {
		t.Fatal("no cursor to tamper with")
	}
	good := *p.NextCursor
	b64 := base64.RawURLEncoding.EncodeToString
	tests := []struct {
		query, param string
	}{
		{"limit=0", "limit"},
		{"limit=101", "limit"},
		{"limit=abc", "limit"},
		{"limit=-1", "limit"},
		{"limit=1.5", "limit"},
		{"limit=", "limit"},
		{"limit=1&limit=2", "limit"},
		{"cursor=" + good + "!", "cursor"},
		{"cursor=!" + good, "cursor"},
		{"cursor=" + good + "%3D", "cursor"},
		{"cursor=" + b64([]byte(mustDecodeCursorText(t, good)+"x")), "cursor"},
		{"cursor=" + b64([]byte(" "+mustDecodeCursorText(t, good))), "cursor"},
		{"cursor=", "cursor"},
		{"cursor=garbage", "cursor"},
		{"cursor=" + b64([]byte("id:abc")), "cursor"},
		{"cursor=" + b64([]byte("id:-1")), "cursor"},
		{"cursor=" + b64([]byte("id:0")), "cursor"},
		{"cursor=" + b64([]byte("id:01")), "cursor"},
		{"cursor=" + b64([]byte("x:5")), "cursor"},
		{"cursor=" + b64([]byte("id:99999999999999999999")), "cursor"},
	}
	for _, tt := range tests {
		t.Run("?"+tt.query+" is 400", func(t *testing.T) {
			t.Parallel()
			p := wantProblem(t, call(t, "GET", "/v1/contacts?"+tt.query, c.key, ""), http.StatusBadRequest, "invalid_parameter")
			if !strings.Contains(p.Detail, tt.param) {
				t.Errorf("detail %q; want it to name %s", p.Detail, tt.param)
			}
		})
	}
	for _, q := range []string{"limit=1", "limit=100", "cursor=" + good, "limit=2&cursor=" + good} {
		t.Run("?"+q+" is accepted", func(t *testing.T) {
			t.Parallel()
			listContactsPage(t, c, "?"+q)
		})
	}
}

// mustDecodeCursorText returns the text inside a cursor, to tamper with it.
func mustDecodeCursorText(t *testing.T, cursor string) string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		t.Fatalf("cursor %q: %v", cursor, err)
	}
	return string(b)
}

func TestContactOtherCompanyCannotSeeOrChange(t *testing.T) {
	t.Parallel()
	a, b := newTestCompany(t), newTestCompany(t)
	ctA, _ := mustCreateContact(t, a, `{"name":"A's contact","email":"a@example.com"}`)
	ctB, _ := mustCreateContact(t, b, `{"name":"B's contact"}`)
	before := mustGetContact(t, a, ctA.ID)
	path := "/v1/contacts/" + ctA.ID

	// A's contact is answered for B exactly like an id that does not exist.
	missing := wantProblem(t, call(t, "GET", "/v1/contacts/999999999", b.key, ""), http.StatusNotFound, "not_found")
	missing.RequestID = ""
	tests := []struct {
		method, body string
		hdr          []string
	}{
		{"GET", "", nil},
		{"PATCH", `{"name":"Stolen"}`, nil},
		{"PATCH", `{}`, nil},
		{"PATCH", `{"name":"Stolen"}`, []string{"If-Match", "*"}},
		{"DELETE", "", nil},
		{"DELETE", "", []string{"If-Match", before.header.Get("ETag")}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("B's %s %s %v is 404", tt.method, tt.body, tt.hdr), func(t *testing.T) {
			p := wantProblem(t, call(t, tt.method, path, b.key, tt.body, tt.hdr...), http.StatusNotFound, "not_found")
			p.RequestID = ""
			if diff := cmp.Diff(missing, p); diff != "" {
				t.Errorf("404 for A's contact differs from 404 for no contact (-nothing +A's):\n%s", diff)
			}
		})
	}
	if after := mustGetContact(t, a, ctA.ID); !bytes.Equal(after.body, before.body) || after.header.Get("ETag") != before.header.Get("ETag") {
		t.Errorf("B's requests changed A's contact:\n%s\nwant\n%s", after.body, before.body)
	}
	t.Run("B's list and count hold only B's contacts", func(t *testing.T) {
		cs, _ := listContactsPage(t, b, "?limit=100")
		if len(cs) != 1 || cs[0].ID != ctB.ID {
			t.Errorf("B's list = %+v; want only %s", cs, ctB.ID)
		}
		if n := contactCount(t, b); n != 1 {
			t.Errorf("B's count = %d; want 1", n)
		}
	})
	t.Run("B's cursor walk does not reach A's contacts", func(t *testing.T) {
		ids, _ := walkContacts(t, b, 1)
		if diff := cmp.Diff([]string{ctB.ID}, ids); diff != "" {
			t.Errorf("B's walk (-want +got):\n%s", diff)
		}
	})
}

func TestContactOtherCompanyReferencesAre422(t *testing.T) {
	t.Parallel()
	a, b := newTestCompany(t), newTestCompany(t)
	orgA := sqlOrganization(t, a.id, "A org")
	stageA := sqlContactStage(t, a.id)
	ctB, _ := mustCreateContact(t, b, `{"name":"B's contact"}`)
	before := mustGetContact(t, b, ctB.ID)

	tests := []struct {
		field       string
		other, none int64
	}{
		{"organizationId", orgA, 999999999},
		{"assignedToId", a.userID, 999999999},
		{"stageId", stageA, 999999999},
	}
	for _, tt := range tests {
		for _, m := range []struct{ method, path string }{{"POST", "/v1/contacts"}, {"PATCH", "/v1/contacts/" + ctB.ID}} {
			t.Run(fmt.Sprintf("%s with A's %s is 422 like one that does not exist", m.method, tt.field), func(t *testing.T) {
				other := wantFieldErrors(t, call(t, m.method, m.path, b.key, fmt.Sprintf(`{"name":"X","%s":%d}`, tt.field, tt.other)), []string{tt.field})
				none := wantFieldErrors(t, call(t, m.method, m.path, b.key, fmt.Sprintf(`{"name":"X","%s":%d}`, tt.field, tt.none)), []string{tt.field})
				other.RequestID, none.RequestID = "", ""
				if diff := cmp.Diff(none, other); diff != "" {
					t.Errorf("422 for A's object differs from 422 for no object (-nothing +A's):\n%s", diff)
				}
			})
		}
	}
	if n := contactCount(t, b); n != 1 {
		t.Errorf("B's count = %d; want 1", n)
	}
	if after := mustGetContact(t, b, ctB.ID); !bytes.Equal(after.body, before.body) {
		t.Errorf("refused PATCHes changed B's contact:\n%s\nwant\n%s", after.body, before.body)
	}
}

func TestContactWrongMethodIs405WithAllow(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	tests := []struct {
		method, path string
		allow        []string
	}{
		{"PUT", "/v1/contacts/1", []string{"GET", "HEAD", "PATCH", "DELETE"}},
		{"POST", "/v1/contacts/1", []string{"GET", "HEAD", "PATCH", "DELETE"}},
		{"DELETE", "/v1/contacts", []string{"GET", "HEAD", "POST"}},
		{"PATCH", "/v1/contacts", []string{"GET", "HEAD", "POST"}},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path+" is 405", func(t *testing.T) {
			r := call(t, tt.method, tt.path, c.key, "")
			wantProblem(t, r, http.StatusMethodNotAllowed, "method_not_allowed")
			got := strings.Split(r.header.Get("Allow"), ", ")
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tt.allow))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Allow (-want +got):\n%s", diff)
			}
		})
	}
}

func TestContactLoneSurrogateEscapeIsNotSilentlyReplaced(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	// The body is valid UTF-8, but \ud800 names half a character: encoding/json quietly turns it
	// into U+FFFD, so storing it would change what the client sent without telling it.
	for _, body := range []string{`{"name":"a\ud800b"}`, `{"name":"Ana","city":"\udfff"}`, `{"name":"Ana","surname":"\ud83d"}`} {
		r := call(t, "POST", "/v1/contacts", c.key, body)
		if r.status != http.StatusBadRequest && r.status != http.StatusUnprocessableEntity {
			t.Errorf("POST %s = %d %s; want 400 or 422, not a silently repaired string", body, r.status, r.body)
		}
	}
	if n := contactCount(t, c); n != 0 {
		t.Errorf("count = %d; want 0", n)
	}
}
