package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// What is particular to contacts: the id as a JSON string of digits, each field's rules, and the
// references a contact holds. The tables here are run by the shared tests of handlers_test.go.

// contactKeys are the members of every contact object, in the order the API writes them.
var contactKeys = []string{"id", "name", "surname", "dni", "jobTitle", "email", "secondaryEmail", "phone",
	"mobilePhone", "urlAvatar", "address", "city", "withSales", "countryId", "classification", "stageId",
	"organizationId", "assignedToId", "userCreatorId", "createdAt", "updatedAt", "custom"}

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

// contactValid are contact bodies stored exactly as sent: every field with text that needs escaping,
// and values at the limits of each rule.
func contactValid(t *testing.T, c testCompany) []string {
	return []string{
		fmt.Sprintf(`{"name":"Ana \"la <jefa>\" & co","surname":"Pérez\u2028García","dni":"12345678Z","jobTitle":"CEO 🚀",
		"email":"ana.perez+crm@example.com","secondaryEmail":"ANA@Example.ES","phone":"+34 600 000 000","mobilePhone":"600\t000\t000",
		"urlAvatar":"https://cdn.example.com/a.png?size=64&x=<y>","address":"Calle \\ Mayor 1\n28013","city":"Madrid","withSales":true,
		"countryId":724,"classification":-5,"stageId":%d,"organizationId":%d,"assignedToId":%d}`,
			sqlContactStage(t, c.id), sqlOrganization(t, c.id, "Acme"), c.userID),
		`{"name":"` + strings.Repeat("a", 255) + `"}`,
		`{"name":"` + strings.Repeat("é", 255) + `"}`, // 255 characters, not bytes
		`{"name":"A","address":"` + strings.Repeat("x", 1000) + `"}`,
		`{"name":"A","email":"ana.p+tag@sub.example.es","secondaryEmail":"A@B.CO"}`,
		`{"name":"A","urlAvatar":"https://x.com:8443/a.png?v=1#f"}`,
		`{"name":"A","urlAvatar":"http://x.com/b"}`,
		`{"name":"A","surname":null,"email":null,"countryId":null,"stageId":null,"organizationId":null,"assignedToId":null,"classification":null}`,
		`{"name":"A","classification":-2147483648}`,
		`{"name":"A","classification":2147483647}`,
		`{"name":"\u00c1na \"\\\" \ud83d\ude80"}`,
	}
}

// contactInvalid are contact bodies refused with a 422 naming fields: each value each field refuses,
// and bodies wrong in several fields at once.
func contactInvalid(t *testing.T, c testCompany) []invalidCase {
	_, boardStage := bizDefaultBoard(t, c.id) // a stage of a business board, which a contact may not use
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
		"stageId":        {`"1"`, fmt.Sprint(boardStage), "999999999"},
		"organizationId": {"[1]", "999999999"},
		"assignedToId":   {"{}", "999999999"},
	}
	for _, f := range []string{"surname", "dni", "jobTitle", "phone", "mobilePhone", "city"} {
		bad[f] = []string{long(256), "5", `"a\u0000"`}
	}
	return append(badValueCases("name", bad),
		invalidCase{`{}`, []string{"name"}, true},
		invalidCase{`{"surname":"Pérez"}`, []string{"name"}, true},
		invalidCase{`{"name":"","email":"x","nickname":1,"id":"7","withSales":"no"}`, []string{"name", "email", "nickname", "id", "withSales"}, false},
		invalidCase{fmt.Sprintf(`{"name":"Ana","countryId":999,"stageId":%d,"organizationId":999999999,"assignedToId":999999999}`, boardStage),
			[]string{"countryId", "stageId", "organizationId", "assignedToId"}, false},
		// The values are checked before the references: a bad value is answered alone.
		invalidCase{`{"name":"Ana","email":"x","countryId":999}`, []string{"email"}, false})
}

func TestContactIDIsAStringAndUnsetFieldsAreNull(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	o, r := create(t, c.key, "/v1/contacts", `{"name":"Ana"}`)
	want := fmt.Sprintf(`{"id":"%d","name":"Ana","surname":null,"dni":null,"jobTitle":null,"email":null,"secondaryEmail":null,`+
		`"phone":null,"mobilePhone":null,"urlAvatar":null,"address":null,"city":null,"withSales":false,"countryId":null,`+
		`"classification":null,"stageId":null,"organizationId":null,"assignedToId":null,"userCreatorId":%d,`+
		`"createdAt":"%s","updatedAt":"%s","custom":{}}`+"\n", o.id(), c.userID, o["createdAt"], o["createdAt"])
	if string(r.body) != want {
		t.Errorf("POST {\"name\":\"Ana\"} = %s; want %s", r.body, want)
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
	// An escaped U+FFFD is a real character, and is kept.
	if o, _ := create(t, c.key, "/v1/contacts", `{"name":"a\ufffdb"}`); o["name"] != "a\ufffdb" {
		t.Errorf("name %q; want a U+FFFD b", o["name"])
	}
	if n := countOf(t, c.key, "/v1/contacts/count"); n != 1 {
		t.Errorf("count = %d; want 1", n)
	}
}
