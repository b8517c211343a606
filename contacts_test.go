package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// What is particular to contacts: the id as a JSON string of digits, each field's rules, and the
// references a contact holds. What every resource shares is in handlers_test.go.

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

// decodeContact decodes one contact object strictly and checks its shape: exactly contactKeys in
// that order (so an unset field is null, not absent), id a JSON string of digits, reference ids
// JSON numbers (a string does not decode into *int64), timestamps in the API's format.
func decodeContact(t *testing.T, b []byte) wireContact {
	t.Helper()
	if diff := cmp.Diff(contactKeys, jsonKeys(t, b)); diff != "" {
		t.Errorf("contact members (-want +got):\n%s\nin %s", diff, b)
	}
	c := decode[wireContact](t, b)
	if !contactIDRE.MatchString(c.ID) {
		t.Errorf("contact id %q; want a string of decimal digits", c.ID)
	}
	if !apiTimeRE.MatchString(c.CreatedAt) || !apiTimeRE.MatchString(c.UpdatedAt) {
		t.Errorf("createdAt %q, updatedAt %q; want UTC with exactly 3 fractional digits", c.CreatedAt, c.UpdatedAt)
	}
	return c
}

// mustCreateContact POSTs body as c and returns the new contact and the answer, failing unless 201.
func mustCreateContact(t *testing.T, c testCompany, body string) (wireContact, response) {
	t.Helper()
	_, r := create(t, c.key, "/v1/contacts", body)
	return decodeContact(t, r.body), r
}

// mustGetContact GETs the contact id as c, failing unless 200.
func mustGetContact(t *testing.T, c testCompany, id string) response {
	t.Helper()
	return mustGet(t, c.key, "/v1/contacts/"+id)
}

// contactCount GETs /v1/contacts/count as c.
func contactCount(t *testing.T, c testCompany) int64 {
	t.Helper()
	return countOf(t, c.key, "/v1/contacts/count")
}

// sqlContactStage returns a contact stage (board_id NULL) of the company.
func sqlContactStage(t *testing.T, companyID int64) int64 {
	t.Helper()
	return sqlID(t, `SELECT id FROM stages WHERE company_id = $1 AND board_id IS NULL ORDER BY id LIMIT 1`, companyID)
}

// sqlOrganization inserts an organization for the company and returns its id.
func sqlOrganization(t *testing.T, companyID int64, name string) int64 {
	t.Helper()
	return sqlID(t, `INSERT INTO organizations (company_id, name) VALUES ($1, $2) RETURNING id`, companyID, name)
}

func TestContactCreateKeepsEveryFieldExactly(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	stage, org := sqlContactStage(t, c.id), sqlOrganization(t, c.id, "Acme")
	body := fmt.Sprintf(`{"name":"Ana \"la <jefa>\" & co","surname":"Pérez\u2028García","dni":"12345678Z","jobTitle":"CEO 🚀",
		"email":"ana.perez+crm@example.com","secondaryEmail":"ANA@Example.ES","phone":"+34 600 000 000","mobilePhone":"600\t000\t000",
		"urlAvatar":"https://cdn.example.com/a.png?size=64&x=<y>","address":"Calle \\ Mayor 1\n28013","city":"Madrid","withSales":true,
		"countryId":724,"classification":-5,"stageId":%d,"organizationId":%d,"assignedToId":%d}`, stage, org, c.userID)
	got, r := mustCreateContact(t, c, body)
	want := wireContact{
		Name: `Ana "la <jefa>" & co`, Surname: ptrTo("Pérez\u2028García"), DNI: ptrTo("12345678Z"), JobTitle: ptrTo("CEO 🚀"),
		Email: ptrTo("ana.perez+crm@example.com"), SecondaryEmail: ptrTo("ANA@Example.ES"), Phone: ptrTo("+34 600 000 000"),
		MobilePhone: ptrTo("600\t000\t000"), URLAvatar: ptrTo("https://cdn.example.com/a.png?size=64&x=<y>"),
		Address: ptrTo("Calle \\ Mayor 1\n28013"), City: ptrTo("Madrid"), WithSales: true, CountryID: ptrTo[int64](724),
		Classification: ptrTo[int64](-5), StageID: ptrTo(stage), OrganizationID: ptrTo(org), AssignedToID: ptrTo(c.userID),
		UserCreatorID: c.userID,
	}
	if diff := cmp.Diff(want, got, ignoreServerSet); diff != "" {
		t.Errorf("POST /v1/contacts answer (-want +got):\n%s", diff)
	}
	if g := mustGetContact(t, c, got.ID); !bytes.Equal(g.body, r.body) {
		t.Errorf("GET after POST differs from the POST answer:\nGET  %s\nPOST %s", g.body, r.body)
	}
}

func TestContactIDIsAStringAndUnsetFieldsAreNull(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	got, r := mustCreateContact(t, c, `{"name":"Ana"}`)
	want := fmt.Sprintf(`{"id":"%s","name":"Ana","surname":null,"dni":null,"jobTitle":null,"email":null,"secondaryEmail":null,`+
		`"phone":null,"mobilePhone":null,"urlAvatar":null,"address":null,"city":null,"withSales":false,"countryId":null,`+
		`"classification":null,"stageId":null,"organizationId":null,"assignedToId":null,"userCreatorId":%d,`+
		`"createdAt":"%s","updatedAt":"%s"}`+"\n", got.ID, c.userID, got.CreatedAt, got.CreatedAt)
	if string(r.body) != want {
		t.Errorf("POST {\"name\":\"Ana\"} = %s; want %s", r.body, want)
	}
	// A list element is the same contact, its id a string too.
	page := listPage[json.RawMessage](t, c.key, "/v1/contacts")
	if len(page.Data) != 1 || string(page.Data[0])+"\n" != want {
		t.Errorf("list %s; want the one contact %s", page.Data, want)
	}
}

func TestContactValidValuesAreAccepted(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	for _, tt := range []struct {
		name, body string
		want       wireContact
	}{
		{"a name of 255 characters", `{"name":"` + strings.Repeat("a", 255) + `"}`, wireContact{Name: strings.Repeat("a", 255)}},
		{"a name of 255 two-byte characters", `{"name":"` + strings.Repeat("é", 255) + `"}`, wireContact{Name: strings.Repeat("é", 255)}},
		{"an address of 1000 characters", `{"name":"A","address":"` + strings.Repeat("x", 1000) + `"}`,
			wireContact{Name: "A", Address: ptrTo(strings.Repeat("x", 1000))}},
		{"e-mail addresses", `{"name":"A","email":"ana.p+tag@sub.example.es","secondaryEmail":"A@B.CO"}`,
			wireContact{Name: "A", Email: ptrTo("ana.p+tag@sub.example.es"), SecondaryEmail: ptrTo("A@B.CO")}},
		{"an https avatar URL with a port, query and fragment", `{"name":"A","urlAvatar":"https://x.com:8443/a.png?v=1#f"}`,
			wireContact{Name: "A", URLAvatar: ptrTo("https://x.com:8443/a.png?v=1#f")}},
		{"explicit nulls", `{"name":"A","surname":null,"email":null,"countryId":null,"stageId":null,"organizationId":null,"assignedToId":null,"classification":null}`,
			wireContact{Name: "A"}},
		{"the smallest classification", `{"name":"A","classification":-2147483648}`, wireContact{Name: "A", Classification: ptrTo[int64](-2147483648)}},
		{"the largest classification", `{"name":"A","classification":2147483647}`, wireContact{Name: "A", Classification: ptrTo[int64](2147483647)}},
		{"a name with escapes", `{"name":"\u00c1na \"\\\" \ud83d\ude80"}`, wireContact{Name: "Ána \"\\\" 🚀"}},
	} {
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

// contactBadValues are, by field, values (JSON text) the field refuses: a POST or PATCH with one is a
// 422 naming the field. boardStage is a stage of a business board, which a contact may not use.
func contactBadValues(boardStage int64) map[string][]string {
	long := func(n int) string { return `"` + strings.Repeat("x", n) + `"` }
	email := []string{`"x"`, `"a@b"`, `"Ana <a@b.com>"`, `"a@b.com "`, `""`, "5"}
	bad := map[string][]string{
		"name":    {"null", `""`, `"   "`, `"\t\n"`, long(256), "5", `"a\u0000b"`},
		"address": {long(1001)},
		"urlAvatar": {`"http://x.com/` + strings.Repeat("x", 1001-len("http://x.com/")) + `"`, `"ftp://x.com/a.png"`, `"/a.png"`,
			`"notaurl"`, `"http:///a.png"`, `"https://x.com/a b.png"`},
		"email": email, "secondaryEmail": email,
		"withSales":      {`"yes"`, "1", "null"},
		"countryId":      {`"724"`, "1.5", "7.24e2", "0", "-724", "true", "9223372036854775808", "999", "9999999999"},
		"classification": {"1e3", "1.5", `"3"`, "2147483648", "-2147483649"},
		"stageId":        {`"1"`, fmt.Sprint(boardStage), "999999999"}, // a business board's stage, or none
		"organizationId": {"[1]", "999999999"},
		"assignedToId":   {"{}", "999999999"},
	}
	for _, f := range []string{"surname", "dni", "jobTitle", "phone", "mobilePhone", "city"} {
		bad[f] = []string{long(256), "5", `"a\u0000"`}
	}
	return bad
}

func TestContactValidationErrorsAre422PerFieldAndChangeNothing(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	target, _ := mustCreateContact(t, c, `{"name":"Target","email":"t@example.com"}`)
	path := "/v1/contacts/" + target.ID
	before := mustGet(t, c.key, path)
	_, boardStage := bizDefaultBoard(t, c.id)
	type tc struct {
		body     string
		fields   []string
		postOnly bool
	}
	cases := []tc{
		{`{}`, []string{"name"}, true},
		{`{"surname":"Pérez"}`, []string{"name"}, true},
		{`{"name":"","email":"x","nickname":1,"id":"7","withSales":"no"}`, []string{"name", "email", "nickname", "id", "withSales"}, false},
		{fmt.Sprintf(`{"name":"Ana","countryId":999,"stageId":%d,"organizationId":999999999,"assignedToId":999999999}`, boardStage),
			[]string{"countryId", "stageId", "organizationId", "assignedToId"}, false},
		// The values are checked before the references: a bad value is answered alone.
		{`{"name":"Ana","email":"x","countryId":999}`, []string{"email"}, false},
	}
	for field, values := range contactBadValues(boardStage) {
		for _, v := range values {
			body := `{"name":"Ana","` + field + `":` + v + `}`
			if field == "name" {
				body = `{"name":` + v + `}`
			}
			cases = append(cases, tc{body, []string{field}, false})
		}
	}
	t.Run("each rule", func(t *testing.T) {
		for _, tt := range cases {
			t.Run(tt.body[:min(len(tt.body), 80)], func(t *testing.T) {
				t.Parallel()
				r := call(t, "POST", "/v1/contacts", c.key, tt.body)
				wantFields(t, r, tt.fields...)
				if r.header.Get("Location") != "" || r.header.Get("ETag") != "" {
					t.Errorf("a 422 with Location %q, ETag %q", r.header.Get("Location"), r.header.Get("ETag"))
				}
				if !tt.postOnly {
					wantFields(t, call(t, "PATCH", path, c.key, tt.body), tt.fields...)
				}
			})
		}
	})
	if n := contactCount(t, c); n != 1 {
		t.Errorf("after only failed POSTs, count = %d; want 1", n)
	}
	wantUnchanged(t, c.key, path, before)
}

func TestContactPatchSetsEveryField(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	stage, org := sqlContactStage(t, c.id), sqlOrganization(t, c.id, "Acme")
	ct, _ := mustCreateContact(t, c, `{"name":"Ana","email":"ana@example.com"}`)
	body := fmt.Sprintf(`{"name":"Ana María","surname":"P","dni":"X1","jobTitle":"CTO","email":null,"secondaryEmail":"b@example.org",
		"phone":"1","mobilePhone":"2","urlAvatar":"http://x.com/b","address":"Calle 1","city":"Madrid","withSales":true,"countryId":724,
		"classification":-1,"stageId":%d,"organizationId":%d,"assignedToId":%d}`, stage, org, c.userID)
	r := call(t, "PATCH", "/v1/contacts/"+ct.ID, c.key, body)
	wantStatus(t, r, http.StatusOK)
	want := wireContact{ID: ct.ID, Name: "Ana María", Surname: ptrTo("P"), DNI: ptrTo("X1"), JobTitle: ptrTo("CTO"),
		SecondaryEmail: ptrTo("b@example.org"), Phone: ptrTo("1"), MobilePhone: ptrTo("2"), URLAvatar: ptrTo("http://x.com/b"),
		Address: ptrTo("Calle 1"), City: ptrTo("Madrid"), WithSales: true, CountryID: ptrTo[int64](724), Classification: ptrTo[int64](-1),
		StageID: ptrTo(stage), OrganizationID: ptrTo(org), AssignedToID: ptrTo(c.userID), UserCreatorID: c.userID, CreatedAt: ct.CreatedAt}
	if diff := cmp.Diff(want, decodeContact(t, r.body), cmpopts.IgnoreFields(wireContact{}, "UpdatedAt")); diff != "" {
		t.Errorf("PATCH %s (-want +got):\n%s", body, diff)
	}
	wantUnchanged(t, c.key, "/v1/contacts/"+ct.ID, r)
}

func TestContactOtherCompanyReferencesAre422LikeNone(t *testing.T) {
	t.Parallel()
	a, b := newTestCompany(t), newTestCompany(t)
	wantOthersReferencesLikeNone(t, b, apiResources[0], map[string]int64{
		"organizationId": sqlOrganization(t, a.id, "A org"), "assignedToId": a.userID, "stageId": sqlContactStage(t, a.id)})
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
	// An escaped U+FFFD is a real character, and is kept.
	if got, _ := mustCreateContact(t, c, `{"name":"a\ufffdb"}`); got.Name != "a\ufffdb" {
		t.Errorf("name %q; want a U+FFFD b", got.Name)
	}
	if n := contactCount(t, c); n != 1 {
		t.Errorf("count = %d; want 1", n)
	}
}
