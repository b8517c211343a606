package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Tests of webhooks.go (API.md section 12). A test that makes endpoints runs a server of its own on
// a database of its own (newHookWorld), allowed to send webhooks to 127.0.0.1: the suite's server,
// which may not, would otherwise take its deliveries and fail them. Every receiver listens on
// 127.0.0.1, and every other address appears only where it is refused before any connection.

// hookWorld is a server of the test's own on a database of its own, and a company there.
type hookWorld struct {
	base string
	st   *store // the database
	c    testCompany
	log  *syncBuffer
}

// newHookWorld starts the world's server, with webhooks allowed to loopback's 127.0.0.1 and ::1
// (localhost may be either) and retried after 100ms, and env on top.
func newHookWorld(t *testing.T, env map[string]string) *hookWorld {
	t.Helper()
	dbURL := freshDatabase(t)
	all := map[string]string{"DATABASE_URL": dbURL, "ROLODEX_RATE_LIMIT": "0",
		"ROLODEX_WEBHOOK_ALLOW_CIDRS": "127.0.0.1/32,::1/128", "ROLODEX_WEBHOOK_BACKOFF": "100ms"}
	maps.Copy(all, env)
	w := &hookWorld{log: &syncBuffer{}}
	w.base = startServer(t, all, w.log)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the server's log:\n%s", w.log)
		}
	})
	var err error
	if w.st, err = openStore(dbConfig{url: dbURL, maxConns: 2}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.st.Close() })
	w.c = w.company(t)
	return w
}

// company makes another company in the world.
func (w *hookWorld) company(t *testing.T) testCompany {
	t.Helper()
	nc, err := w.st.createCompany(context.Background(), "Test "+t.Name())
	if err != nil {
		t.Fatalf("create company: %v", err)
	}
	return testCompany{id: nc.CompanyID, userID: nc.UserID, key: nc.APIKey}
}

// call sends a request to the world's server as its company.
func (w *hookWorld) call(t *testing.T, method, path, body string, hdr ...string) response {
	t.Helper()
	return callAt(t, nil, w.base, method, path, w.c.key, body, hdr...)
}

// endpoint creates an endpoint at url taking events, and returns it with its secret.
func (w *hookWorld) endpoint(t *testing.T, url string, events ...string) endpointBody {
	t.Helper()
	list, _ := json.Marshal(events)
	body := fmt.Sprintf(`{"url": %q, "events": %s}`, url, list)
	return decode[endpointBody](t, wantStatus(t, w.call(t, "POST", "/v1/webhooks", body), http.StatusCreated).body)
}

// get GETs path as the world's company, failing unless 200.
func (w *hookWorld) get(t *testing.T, path string) response {
	t.Helper()
	r := w.call(t, "GET", path, "")
	wantStatus(t, r, http.StatusOK)
	return r
}

// deliveries walks the endpoint's deliveries, newest first.
func (w *hookWorld) deliveries(t *testing.T, endpoint int64) []deliveryBody {
	t.Helper()
	var all []deliveryBody
	for cursor := ""; ; {
		path := fmt.Sprintf("/v1/webhooks/%d/deliveries?limit=100&cursor=%s", endpoint, url.QueryEscape(cursor))
		if cursor == "" {
			path = fmt.Sprintf("/v1/webhooks/%d/deliveries?limit=100", endpoint)
		}
		p := decode[deliveryPage](t, wantStatus(t, w.call(t, "GET", path, ""), http.StatusOK).body)
		all = append(all, p.Data...)
		if p.Pagination.NextCursor == nil {
			return all
		}
		cursor = *p.Pagination.NextCursor
	}
}

type endpointBody struct {
	ID             int64
	URL            string
	Events         []string
	Description    *string
	Enabled        bool
	DisabledReason *string
	Secret         string
	CreatedAt      string
	UpdatedAt      string
}

type deliveryBody struct {
	ID             int64
	EventID        int64
	EventType      string
	Status         string
	Attempts       int
	LastStatusCode *int
	LastError      *string
	NextAttemptAt  *string
	DeliveredAt    *string
	CreatedAt      string
}

type deliveryPage struct {
	Data       []deliveryBody
	Pagination struct {
		Limit      int
		HasMore    bool
		NextCursor *string
	}
}

// receiver is a webhook receiver on 127.0.0.1 that keeps what it is sent.
type receiver struct {
	*httptest.Server
	mu  sync.Mutex
	got []hit
}

// hit is one request a receiver got.
type hit struct {
	at     time.Time
	url    string // path and query
	header http.Header
	body   []byte
}

// newReceiver starts a receiver that keeps each request and answers it with answer, given the
// request's number from 0; nil answers 204.
func newReceiver(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, n int)) *receiver {
	rc := &receiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		rc.mu.Lock()
		n := len(rc.got)
		rc.got = append(rc.got, hit{time.Now(), r.URL.RequestURI(), r.Header.Clone(), body})
		rc.mu.Unlock()
		if answer == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		answer(w, r, n)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) hits() []hit {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

// eventually fails the test unless cond holds within 30 seconds (a generous bound: the machine
// may be busy), polling every 20 ms.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: %s", what)
		}
	}
}

// verify is the receiver's check of the README (TestREADMEReceiverIsVerify holds them equal): the
// Rolodex-Signature header sig signs body with secret, made within 5 minutes.
func verify(secret, sig string, body []byte) bool { // sig: the Rolodex-Signature header
	t, v1s, _ := strings.Cut(strings.TrimPrefix(sig, "t="), ",")
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(t + "." + string(body)))
	want := []byte("v1=" + hex.EncodeToString(mac.Sum(nil)))
	signed := false // by any v1=: for a day after the secret is rotated, the old one signs too
	for _, v1 := range strings.Split(v1s, ",") {
		signed = signed || hmac.Equal([]byte(v1), want)
	}
	sent, err := strconv.ParseInt(t, 10, 64) // refuse a signature minutes old: a replay
	return signed && err == nil && time.Since(time.Unix(sent, 0)).Abs() < 5*time.Minute
}

func TestREADMEReceiverIsVerify(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	src, err2 := os.ReadFile("webhooks_test.go")
	if err != nil || err2 != nil {
		t.Fatal(err, err2)
	}
	_, example, _ := strings.Cut(string(readme), "```go\n"+`import ("crypto/hmac"; "crypto/sha256"; "encoding/hex"; "strconv"; "strings"; "time")`+"\n\n")
	example, _, _ = strings.Cut(example, "```")
	_, tested, _ := strings.Cut(string(src), "\nfunc verify(")
	tested, _, _ = strings.Cut("func verify("+tested, "\n}\n")
	if example != tested+"\n}\n" {
		t.Errorf("the README's receiver is not the verify these tests use:\n%s\nwant:\n%s\n}", example, tested)
	}
}

func TestWebhookEndpointsCreateReadUpdateDelete(t *testing.T) {
	t.Parallel()
	w := newHookWorld(t, nil)
	r := w.call(t, "POST", "/v1/webhooks", `{"url": "http://127.0.0.1:9/hooks", "events": ["contact.created", "business.*"], "description": "CRM sync"}`)
	created := decode[endpointBody](t, wantStatus(t, r, http.StatusCreated).body)
	path := itemPath("/v1/webhooks", created.ID)
	if r.header.Get("Location") != path || !strings.HasPrefix(created.Secret, "whsec_") || len(created.Secret) < 32 {
		t.Errorf("POST /v1/webhooks: Location %q, secret %q; want %s and whsec_ with 192 random bits", r.header.Get("Location"), created.Secret, path)
	}
	want := []string{"id", "url", "events", "description", "enabled", "disabledReason", "secret", "createdAt", "updatedAt"}
	if diff := cmp.Diff(want, jsonKeys(t, r.body)); diff != "" {
		t.Errorf("keys of the created endpoint (-want +got):\n%s", diff)
	}
	// The secret is shown only once: never by a GET, a list or a PATCH.
	got := decode[endpointBody](t, w.get(t, path).body)
	wantGot := created
	wantGot.Secret = ""
	if diff := cmp.Diff(wantGot, got); diff != "" || !wantGot.Enabled || wantGot.DisabledReason != nil {
		t.Errorf("GET %s (-created +got):\n%s", path, diff)
	}
	list := readPage[json.RawMessage](t, w.call(t, "GET", "/v1/webhooks", ""))
	if len(list.Data) != 1 || strings.Contains(string(list.Data[0]), "secret") {
		t.Errorf("GET /v1/webhooks = %s; want the one endpoint, without its secret", list.Data)
	}

	patched := decode[endpointBody](t, wantStatus(t, w.call(t, "PATCH", path, `{"events": ["*"], "description": null, "enabled": false}`), http.StatusOK).body)
	if !slices.Equal(patched.Events, []string{"*"}) || patched.Description != nil || patched.Enabled || patched.Secret != "" || patched.UpdatedAt == created.UpdatedAt {
		t.Errorf("PATCH = %+v; want events [*], no description, disabled, no secret, a new updatedAt", patched)
	}
	before := w.get(t, path)
	wantStatus(t, w.call(t, "PATCH", path, `{}`), http.StatusOK)
	wantStatus(t, w.call(t, "PATCH", path, `{"enabled": false}`), http.StatusOK)
	wantFields(t, w.call(t, "PATCH", path, `{"url": "http://10.1.2.3/hooks", "secret": "mine"}`), "secret")
	wantFields(t, w.call(t, "PATCH", path, `{"url": "http://10.1.2.3/hooks"}`), "url")
	wantFields(t, w.call(t, "PATCH", path, `{"url": null, "events": []}`), "url", "events")
	if after := w.get(t, path); string(after.body) != string(before.body) {
		t.Errorf("%s changed by PATCHes that change nothing or fail:\nnow %s\nwas %s", path, after.body, before.body)
	}
	moved := decode[endpointBody](t, wantStatus(t, w.call(t, "PATCH", path, `{"url": "http://localhost:9/other"}`), http.StatusOK).body)
	if moved.URL != "http://localhost:9/other" {
		t.Errorf("PATCH url: %q", moved.URL)
	}

	// A create with an Idempotency-Key answers the same when sent again, but the secret: null.
	body := `{"url": "http://127.0.0.1:9/keyed", "events": ["organization.created"]}`
	first := w.call(t, "POST", "/v1/webhooks", body, "Idempotency-Key", "hook-1")
	again := w.call(t, "POST", "/v1/webhooks", body, "Idempotency-Key", "hook-1")
	secret := decode[endpointBody](t, first.body).Secret
	kept := strings.Replace(string(first.body), `"secret":"`+secret+`"`, `"secret":null`, 1)
	if first.status != http.StatusCreated || secret == "" || string(again.body) != kept || again.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("POST with an Idempotency-Key twice: %d %s, then %d %s; want the same with \"secret\": null", first.status, first.body, again.status, again.body)
	}

	wantStatus(t, w.call(t, "DELETE", path, ""), http.StatusNoContent)
	wantProblem(t, w.call(t, "GET", path, ""), http.StatusNotFound, "not_found")
	wantProblem(t, w.call(t, "DELETE", path, ""), http.StatusNotFound, "not_found")
	// Endpoint changes are no events.
	if n := sqlIn(t, w.st, `SELECT count(*) FROM events WHERE company_id = $1`, w.c.id); n != 0 {
		t.Errorf("%d events after changes of webhook endpoints; want none", n)
	}
}

// sqlIn runs q, a SELECT of one number, on st.
func sqlIn(t *testing.T, st *store, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := st.db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func TestWebhookEndpointsAreAtMost16AndTenantScoped(t *testing.T) {
	t.Parallel()
	w := newHookWorld(t, nil)
	// 16 at once: the limit holds also when creates race.
	var wg sync.WaitGroup
	var created atomic.Int64
	for i := range 20 {
		wg.Go(func() {
			r, err := send(nil, w.base, "POST", "/v1/webhooks", w.c.key, fmt.Sprintf(`{"url": "http://127.0.0.1:9/%d", "events": ["*"]}`, i))
			switch {
			case err != nil:
				t.Error(err)
			case r.status == http.StatusCreated:
				created.Add(1)
			case r.status == http.StatusUnprocessableEntity:
				var p problemBody
				json.Unmarshal(r.body, &p)
				if p.Code != "webhook_limit_reached" || !strings.Contains(p.Detail, "16") {
					t.Errorf("the 17th endpoint: %s; want webhook_limit_reached naming the limit, 16", r.body)
				}
			default:
				t.Errorf("POST /v1/webhooks = %d %s", r.status, r.body)
			}
		})
	}
	wg.Wait()
	if created.Load() != 16 {
		t.Errorf("%d endpoints created of 20 sent at once; want 16", created.Load())
	}
	list := readPage[json.RawMessage](t, w.call(t, "GET", "/v1/webhooks?limit=10", ""))
	if len(list.Data) != 10 || list.Pagination.NextCursor == nil {
		t.Fatalf("GET /v1/webhooks?limit=10: %d endpoints, next %v; want 10 and a next page", len(list.Data), list.Pagination.NextCursor)
	}
	next := readPage[json.RawMessage](t, w.call(t, "GET", "/v1/webhooks?limit=10&cursor="+url.QueryEscape(*list.Pagination.NextCursor), ""))
	if len(next.Data) != 6 || next.Pagination.NextCursor != nil {
		t.Errorf("page 2: %d endpoints; want the other 6", len(next.Data))
	}

	// Another company sees none of them, and can change none: a PATCH is 404 before its body is
	// checked, whatever the body and its Idempotency-Key.
	other := w.company(t)
	path := itemPath("/v1/webhooks", decode[obj](t, list.Data[0]).id())
	for _, r := range []response{
		callAt(t, nil, w.base, "GET", path, other.key, ""),
		callAt(t, nil, w.base, "PATCH", path, other.key, `{"enabled": false}`),
		callAt(t, nil, w.base, "PATCH", path, other.key, `{"url": "http://10.1.2.3/"}`),
		callAt(t, nil, w.base, "PATCH", path, other.key, `{"url": "http://10.1.2.3/"}`, "Idempotency-Key", "other-1"),
		callAt(t, nil, w.base, "PATCH", path, other.key, `{"events": [], "secret": "x"}`),
		callAt(t, nil, w.base, "PATCH", "/v1/webhooks/999999", other.key, `{"url": "http://10.1.2.3/"}`),
		callAt(t, nil, w.base, "DELETE", path, other.key, ""),
		callAt(t, nil, w.base, "GET", path+"/deliveries", other.key, ""),
		callAt(t, nil, w.base, "POST", path+"/deliveries/1/retry", other.key, `{}`),
	} {
		wantProblem(t, r, http.StatusNotFound, "not_found")
	}
	if r := callAt(t, nil, w.base, "PATCH", path, other.key, `{"url": "http://10.1.2.3/"}`, "Idempotency-Key", "other-1"); r.status != http.StatusNotFound || r.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("another company's PATCH again with its Idempotency-Key: %d, replayed %q; want the 404 kept", r.status, r.header.Get("Idempotent-Replayed"))
	}
	if p := readPage[json.RawMessage](t, callAt(t, nil, w.base, "GET", "/v1/webhooks", other.key, "")); len(p.Data) != 0 {
		t.Errorf("another company lists %d endpoints; want none", len(p.Data))
	}
	// It has 16 of its own to make.
	if r := callAt(t, nil, w.base, "POST", "/v1/webhooks", other.key, `{"url": "http://127.0.0.1:9/", "events": ["*"]}`); r.status != http.StatusCreated {
		t.Errorf("another company's first endpoint: %d %s; want 201", r.status, r.body)
	}
}

// Bad input never reaches an address: every host here is refused (or is not even looked at)
// before anything is sent.
func TestWebhookEndpointsRefuseBadInput(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t) // the suite's server: no address outside the public ones is allowed
	long := "http://127.0.0.1/" + strings.Repeat("a", 2040)
	for _, tt := range []struct {
		body   string
		fields []string
		says   string
	}{
		{`{}`, []string{"url", "events"}, "required"},
		{`{"url": "ftp://127.0.0.1/x", "events": ["*"]}`, []string{"url"}, "http(s)"},
		{`{"url": "/hooks", "events": ["*"]}`, []string{"url"}, "http(s)"},
		{`{"url": "http://user:pass@127.0.0.1/", "events": ["*"]}`, []string{"url"}, "credentials"},
		{`{"url": "` + long + `", "events": ["*"]}`, []string{"url"}, "2048"},
		{`{"url": "http://8.8.8.8:0/", "events": ["*"]}`, []string{"url"}, "1 to 65535"},
		{`{"url": "https://8.8.8.8:65536/", "events": ["*"]}`, []string{"url"}, "1 to 65535"},
		{`{"url": "https://8.8.8.8:99999999999999999999/", "events": ["*"]}`, []string{"url"}, "1 to 65535"},
		{`{"url": "http://8.8.8.8:http/", "events": ["*"]}`, []string{"url"}, "http(s)"},
		{`{"url": "http://127.0.0.1:8080/hooks", "events": ["*"]}`, []string{"url"}, "127.0.0.1"},
		{`{"url": "http://localhost/hooks", "events": ["*"]}`, []string{"url"}, "localhost does not"},
		{`{"url": "https://10.0.0.8/", "events": ["*"]}`, []string{"url"}, "10.0.0.8"},
		{`{"url": "http://169.254.169.254/latest/meta-data", "events": ["*"]}`, []string{"url"}, "169.254.169.254"},
		{`{"url": "http://[fd00:ec2::254]/", "events": ["*"]}`, []string{"url"}, "fd00:ec2::254"},
		{`{"url": "http://[::ffff:127.0.0.1]/", "events": ["*"]}`, []string{"url"}, "127.0.0.1"},
		{`{"url": "http://100.64.0.1/", "events": ["*"]}`, []string{"url"}, "100.64.0.1"},
		{`{"url": "http://0.0.0.0/", "events": ["*"]}`, []string{"url"}, "0.0.0.0"},
		{`{"url": "http://[::127.0.0.1]/", "events": ["*"]}`, []string{"url"}, "::127.0.0.1"},
		{`{"url": "http://[::ffff:0:7f00:1]/", "events": ["*"]}`, []string{"url"}, "::ffff:0:7f00:1"},
		{`{"url": "http://[64:ff9b::a00:1]/", "events": ["*"]}`, []string{"url"}, "64:ff9b::a00:1"},
		{`{"url": "http://[2002:a00:1::]/", "events": ["*"]}`, []string{"url"}, "2002:a00:1::"},
		{`{"url": "http://[100::1]/", "events": ["*"]}`, []string{"url"}, "100::1"},
		{`{"url": "http://[2001:db8::1]/", "events": ["*"]}`, []string{"url"}, "2001:db8::1"},
		{`{"url": "http://192.0.2.1/", "events": ["*"]}`, []string{"url"}, "192.0.2.1"},
		{`{"url": "http://127.0.0.1/", "events": ["contact.renamed"]}`, []string{"events"}, `"contact.renamed"`},
		{`{"url": "http://127.0.0.1/", "events": "contact.*"}`, []string{"events"}, "array"},
		{`{"url": "http://127.0.0.1/", "events": []}`, []string{"events"}, "array"},
		{`{"url": "http://127.0.0.1/", "events": ["*"], "secret": "whsec_mine", "id": 7}`, []string{"secret", "id"}, ""},
	} {
		p := wantFields(t, call(t, "POST", "/v1/webhooks", c.key, tt.body), tt.fields...)
		if len(p.Errors) > 0 && !strings.Contains(p.Errors[0].Message, tt.says) {
			t.Errorf("POST %.80s: %s; want it to say %s", tt.body, p.Errors[0].Message, tt.says)
		}
	}
	if p := listPage[json.RawMessage](t, c.key, "/v1/webhooks"); len(p.Data) != 0 {
		t.Errorf("%d endpoints after bad input; want none", len(p.Data))
	}
}

// A refused URL's 422 names its host, never an address, and reads the same whether the host resolves
// inside or not at all. The host that does not resolve has a 64-character label, which no DNS query
// can carry: no packet is sent for it.
func TestWebhookRefusalNamesOnlyTheHost(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t) // the suite's server: no address outside the public ones is allowed
	nowhere := strings.Repeat("a", 64) + ".example"
	said := func(host string) string {
		r := call(t, "POST", "/v1/webhooks", c.key, `{"url": "http://`+host+`:8080/hooks", "events": ["*"]}`)
		p := wantFields(t, r, "url")
		if len(p.Errors) == 0 || !strings.Contains(p.Errors[0].Message, host) {
			t.Fatalf("POST a webhook at %s: %s; want it to name the host", host, r.body)
		}
		return strings.ReplaceAll(p.Errors[0].Message, host, "HOST")
	}
	inside, unresolved := said("localhost"), said(nowhere)
	if inside != unresolved {
		t.Errorf("a host that resolves inside: %q;\none that does not resolve: %q; want the same", inside, unresolved)
	}
	if strings.Contains(inside, "127.0.0.1") || strings.Contains(inside, "::1") || !strings.Contains(inside, "ROLODEX_WEBHOOK_ALLOW_CIDRS") {
		t.Errorf("refused: %q; want no address, and how to allow one for local development", inside)
	}
}

func TestWebhookAddressRules(t *testing.T) {
	t.Parallel()
	allow := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("fd00::/8"), netip.MustParsePrefix("::1/128")}
	for _, tt := range []struct {
		addr             string
		public, allowing bool // allowed without an allow-list, and with allow
	}{
		{"8.8.8.8", true, true}, {"2606:4700:4700::1111", true, true}, {"::ffff:8.8.8.8", true, true},
		{"127.0.0.1", false, true}, {"::ffff:127.0.0.1", false, true}, {"127.0.0.2", false, false}, {"::1", false, true},
		{"10.1.2.3", false, false}, {"172.16.0.1", false, false}, {"192.168.1.1", false, false},
		{"169.254.169.254", false, false}, {"fe80::1", false, false}, {"fd00:ec2::254", false, true},
		{"fc00::1", false, false}, {"0.0.0.0", false, false}, {"::", false, false}, {"224.0.0.1", false, false},
		{"ff02::1", false, false}, {"100.64.0.1", false, false}, {"100.127.255.254", false, false},
		{"255.255.255.255", false, false}, {"fec0::1", false, false}, {"fe80::1%eth0", false, false},
		// An address that embeds or translates IPv4 is judged, allow-list too, by the IPv4 inside.
		{"::127.0.0.1", false, true}, {"::ffff:0:7f00:1", false, true}, {"64:ff9b::7f00:1", false, true},
		{"2002:7f00:1::", false, true}, {"::10.1.2.3", false, false}, {"::ffff:0:a01:203", false, false},
		{"64:ff9b::a01:203", false, false}, {"2002:c0a8:101::1", false, false}, {"::8.8.8.8", true, true},
		{"::ffff:0:808:808", true, true}, {"64:ff9b::808:808", true, true}, {"2002:808:808::1", true, true},
		{"64:ff9b:1::808:808", false, false}, {"::1:0:0:1", false, false},
		// Documentation, discard, benchmarking and Teredo ranges.
		{"192.0.2.1", false, false}, {"198.51.100.1", false, false}, {"203.0.113.1", false, false},
		{"100::1", false, false}, {"2001:db8::1", false, false}, {"2001:db8::1%eth0", false, false},
		{"3fff::1", false, false}, {"2001::1", false, false}, {"2001:2::1", false, false},
	} {
		ip := netip.MustParseAddr(tt.addr)
		if got := allowedAddr(ip, nil); got != tt.public {
			t.Errorf("allowedAddr(%s, none) = %v; want %v", ip, got, tt.public)
		}
		if got := allowedAddr(ip, allow); got != tt.allowing {
			t.Errorf("allowedAddr(%s, %v) = %v; want %v", ip, allow, got, tt.allowing)
		}
	}
	// Literal addresses and localhost (the hosts file) are all the resolver is asked here.
	ctx := context.Background()
	for rawURL, want := range map[string]string{"http://8.8.8.8/hooks": "", "https://[2606:4700:4700::1111]:8443/": "",
		"http://localhost:8080/": "must have a host that resolves only to public addresses, and localhost does not"} {
		var got string
		if errs := checkWebhookHost(ctx, rawURL, nil); errs != nil {
			got = errs[0].Message
		}
		if !strings.HasPrefix(got, want) || (got == "") != (want == "") {
			t.Errorf("checkWebhookHost(%s) = %q; want %q", rawURL, got, want)
		}
	}
	if errs := checkWebhookHost(ctx, "http://localhost:8080/", allow); errs != nil {
		t.Errorf("checkWebhookHost(localhost) with 127.0.0.1/32 and ::1/128 allowed: %v", errs)
	}
}

// The client refuses an address before it connects: the receiver never sees a connection.
func TestWebhookClientRefusesAddressesBeforeConnecting(t *testing.T) {
	t.Parallel()
	var conns atomic.Int64
	rc := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	rc.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	rc.Start()
	defer rc.Close()
	_, err := newWebhookClient(nil).Post(rc.URL, "application/json", strings.NewReader("{}"))
	if !errors.Is(err, errRefusedAddress) || conns.Load() != 0 {
		t.Errorf("POST %s without an allow-list: %v after %d connections; want errRefusedAddress before any", rc.URL, err, conns.Load())
	}
	wk := &webhookWorker{client: newWebhookClient(nil)}
	if _, msg := wk.post(context.Background(), claimed{url: rc.URL}); msg != errRefusedAddress.Error() || conns.Load() != 0 {
		t.Errorf("a refused delivery's lastError = %q after %d connections; want %q, naming no address", msg, conns.Load(), errRefusedAddress)
	}
	resp, err := newWebhookClient([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}).Post(rc.URL, "application/json", strings.NewReader("{}"))
	if err != nil || conns.Load() != 1 {
		t.Fatalf("POST %s with 127.0.0.0/8 allowed: %v after %d connections; want an answer over 1", rc.URL, err, conns.Load())
	}
	resp.Body.Close()

	// Every phase has a deadline, a hang costs 10 s at most, and no proxy connects in its stead.
	c := newWebhookClient(nil)
	tr := c.Transport.(*http.Transport)
	if c.Timeout != 10*time.Second || tr.TLSHandshakeTimeout == 0 || tr.ResponseHeaderTimeout == 0 || tr.ResponseHeaderTimeout > c.Timeout ||
		tr.Proxy != nil || c.CheckRedirect(nil, nil) != http.ErrUseLastResponse {
		t.Errorf("client: timeout %v, TLS handshake %v, headers %v, proxy set %v; want 10s, set, set, none, and redirects not followed",
			c.Timeout, tr.TLSHandshakeTimeout, tr.ResponseHeaderTimeout, tr.Proxy != nil)
	}
}

func TestWebhookDeliveriesAreSignedEventsOfMatchingEndpoints(t *testing.T) {
	t.Parallel()
	w := newHookWorld(t, nil)
	contacts, everything, off := newReceiver(t, nil), newReceiver(t, nil), newReceiver(t, nil)
	ec := w.endpoint(t, contacts.URL+"/hooks?from=rolodex", "contact.*", "organization.deleted")
	ea := w.endpoint(t, everything.URL+"/", "*")
	eo := w.endpoint(t, off.URL, "*")
	wantStatus(t, w.call(t, "PATCH", itemPath("/v1/webhooks", eo.ID), `{"enabled": false}`), http.StatusOK)

	ana := itemPath("/v1/contacts", decode[obj](t, wantStatus(t, w.call(t, "POST", "/v1/contacts", `{"name": "Ana"}`), http.StatusCreated).body).id())
	wantStatus(t, w.call(t, "PATCH", ana, `{"city": "Lisboa"}`), http.StatusOK)
	wantStatus(t, w.call(t, "POST", "/v1/business", `{"title": "Deal"}`), http.StatusCreated)
	wantStatus(t, w.call(t, "POST", "/v1/organizations", `{"name": "Acme"}`), http.StatusCreated)
	wantStatus(t, w.call(t, "DELETE", ana, ""), http.StatusNoContent)
	eventually(t, "3 events to the contact.* endpoint and 5 to the * one", func() bool {
		return len(contacts.hits()) >= 3 && len(everything.hits()) >= 5
	})

	for _, tt := range []struct {
		r    *receiver
		e    endpointBody
		want []string
	}{
		{contacts, ec, []string{"contact.created", "contact.deleted", "contact.updated"}},
		{everything, ea, []string{"business.created", "contact.created", "contact.deleted", "contact.updated", "organization.created"}},
	} {
		var types []string
		for _, h := range tt.r.hits() {
			// The body is the event as GET /v1/events/{id} answers it, byte for byte, and signed.
			id := h.header.Get("Rolodex-Event-Id")
			event := wantStatus(t, w.call(t, "GET", "/v1/events/"+id, ""), http.StatusOK).body
			if string(h.body) != string(event) || h.header.Get("Content-Type") != "application/json" || h.url != strings.TrimPrefix(tt.e.URL, tt.r.URL) {
				t.Errorf("%s got %s %q (Content-Type %q); want POST %s the event %s as application/json",
					tt.e.URL, h.url, h.body, h.header.Get("Content-Type"), tt.e.URL, event)
			}
			sig := h.header.Get("Rolodex-Signature")
			if !verify(tt.e.Secret, sig, h.body) {
				t.Errorf("Rolodex-Signature %q does not verify with the endpoint's secret", sig)
			}
			if verify(eo.Secret, sig, h.body) || verify(tt.e.Secret, sig, append(h.body, ' ')) {
				t.Errorf("Rolodex-Signature %q verifies with another secret, or another body", sig)
			}
			types = append(types, decode[eventBody](t, h.body).Type)
		}
		slices.Sort(types)
		if diff := cmp.Diff(tt.want, types); diff != "" {
			t.Errorf("events sent to %s (-want +got):\n%s", tt.e.URL, diff)
		}
	}

	// The deliveries list shows each, newest first; the disabled endpoint has none.
	var ds []deliveryBody
	eventually(t, "the deliveries recorded", func() bool {
		ds = w.deliveries(t, ec.ID)
		return !slices.ContainsFunc(ds, func(d deliveryBody) bool { return d.Status == "pending" })
	})
	for i, d := range ds {
		if d.Status != "delivered" || d.Attempts != 1 || d.LastStatusCode == nil || *d.LastStatusCode != 204 || d.LastError != nil ||
			d.NextAttemptAt != nil || d.DeliveredAt == nil || i > 0 && d.ID > ds[i-1].ID {
			t.Errorf("delivery %d of %d: %+v; want delivered at the first attempt with 204, newest first", i, len(ds), d)
		}
	}
	if len(ds) != 3 || ds[0].EventType != "contact.deleted" {
		t.Errorf("%d deliveries to the contact.* endpoint, the newest %+v; want 3, the newest contact.deleted", len(ds), ds)
	}
	if d := w.deliveries(t, eo.ID); len(d) != 0 || len(off.hits()) != 0 {
		t.Errorf("the disabled endpoint has %d deliveries and got %d requests; want none", len(d), len(off.hits()))
	}
}

// Reading through the side door: a key subscribes an endpoint only to events it can read, and an
// endpoint is sent only the events that the key which created or last changed it could read.
func TestWebhookEndpointsGetOnlyEventsTheirKeyCouldRead(t *testing.T) {
	t.Parallel()
	w := newHookWorld(t, nil)
	key := func(scopes ...string) string {
		b, _ := json.Marshal(map[string]any{"scopes": scopes})
		return *decode[newKey](t, wantStatus(t, w.call(t, "POST", "/v1/apiKeys", string(b)), http.StatusCreated).body).Key
	}
	contacts, hooksOnly := key("webhooks:write", "contacts:read"), key("webhooks:write")
	as := func(key, method, path, body string) response { return callAt(t, nil, w.base, method, path, key, body) }
	rc := newReceiver(t, nil)
	for _, events := range []string{`["*"]`, `["business.*"]`, `["contact.*", "organization.created"]`} {
		r := as(contacts, "POST", "/v1/webhooks", fmt.Sprintf(`{"url": %q, "events": %s}`, rc.URL, events))
		wantProblem(t, r, http.StatusForbidden, "insufficient_scope")
	}
	r := as(contacts, "POST", "/v1/webhooks", fmt.Sprintf(`{"url": %q, "events": ["contact.*"]}`, rc.URL+"/contacts"))
	ecID, eaID := decode[endpointBody](t, wantStatus(t, r, http.StatusCreated).body).ID, w.endpoint(t, rc.URL+"/all", "*").ID
	ec, ea := itemPath("/v1/webhooks", ecID), itemPath("/v1/webhooks", eaID)
	wantProblem(t, as(hooksOnly, "PATCH", ec, `{"events": ["contact.created"]}`), http.StatusForbidden, "insufficient_scope")
	wantProblem(t, as(contacts, "PATCH", ea, `{"events": ["business.*"]}`), http.StatusForbidden, "insufficient_scope")
	// The scopes come before the host's look-up: a host that cannot resolve (a 64-character label,
	// which no DNS query carries) is not named to a key that may not make the endpoint.
	nowhere := `"http://` + strings.Repeat("a", 64) + `.example/hooks"`
	wantProblem(t, as(contacts, "POST", "/v1/webhooks", `{"url": `+nowhere+`, "events": ["business.*"]}`), http.StatusForbidden, "insufficient_scope")
	wantProblem(t, as(hooksOnly, "PATCH", ec, `{"url": `+nowhere+`, "events": ["contact.created"]}`), http.StatusForbidden, "insufficient_scope")
	wantFields(t, as(contacts, "POST", "/v1/webhooks", `{"url": `+nowhere+`, "events": ["contact.*"]}`), "url")

	wantStatus(t, w.call(t, "POST", "/v1/contacts", `{"name": "Ana"}`), http.StatusCreated)
	wantStatus(t, w.call(t, "POST", "/v1/business", `{"title": "Deal"}`), http.StatusCreated)
	eventually(t, "the contact event sent to the contact.* endpoint", func() bool {
		return slices.ContainsFunc(rc.hits(), func(h hit) bool { return h.url == "/contacts" })
	})
	// Changed by a key that reads only contacts, the * endpoint is sent contact events only; changed
	// by one that reads nothing, the contact.* endpoint is sent nothing.
	wantStatus(t, as(contacts, "PATCH", ea, `{"description": "changed by a key that reads contacts"}`), http.StatusOK)
	wantStatus(t, as(hooksOnly, "PATCH", ec, fmt.Sprintf(`{"url": %q}`, rc.URL+"/elsewhere")), http.StatusOK)
	wantStatus(t, w.call(t, "POST", "/v1/contacts", `{"name": "Bea"}`), http.StatusCreated)
	wantStatus(t, w.call(t, "POST", "/v1/business", `{"title": "Another deal"}`), http.StatusCreated)
	for id, want := range map[int64][]string{
		ecID: {"contact.created"},
		eaID: {"business.created", "contact.created", "contact.created"},
	} { // a change writes its deliveries in its transaction: they are all there
		var types []string
		for _, d := range w.deliveries(t, id) {
			types = append(types, d.EventType)
		}
		slices.Sort(types)
		if diff := cmp.Diff(want, types); diff != "" {
			t.Errorf("deliveries to endpoint %d (-want +got):\n%s", id, diff)
		}
	}
}

// A rotated secret signs deliveries beside the new one for 24 hours, the new one's first; a replay
// of the rotation shows no secret.
func TestWebhookSecretRotationSignsWithBothSecretsFor24Hours(t *testing.T) {
	t.Parallel()
	w := newHookWorld(t, nil)
	rc := newReceiver(t, nil)
	old := w.endpoint(t, rc.URL, "contact.*")
	path := itemPath("/v1/webhooks", old.ID) + "/rotateSecret"
	r := w.call(t, "POST", path, `{}`, "Idempotency-Key", "rotate-1")
	rotated := decode[endpointBody](t, wantStatus(t, r, http.StatusCreated).body)
	if rotated.ID != old.ID || !strings.HasPrefix(rotated.Secret, "whsec_") || rotated.Secret == old.Secret || rotated.UpdatedAt == old.UpdatedAt {
		t.Errorf("rotated %+v from %+v; want the endpoint with a new secret and updatedAt", rotated, old)
	}
	again := w.call(t, "POST", path, `{}`, "Idempotency-Key", "rotate-1")
	if kept := strings.Replace(string(r.body), `"secret":"`+rotated.Secret+`"`, `"secret":null`, 1); string(again.body) != kept {
		t.Errorf("the rotation replayed: %s; want %s", again.body, kept)
	}
	if got := decode[endpointBody](t, w.get(t, itemPath("/v1/webhooks", old.ID)).body); got.Secret != "" {
		t.Errorf("GET the endpoint shows its secret %q", got.Secret)
	}

	signed := regexp.MustCompile(`^t=([0-9]+),v1=([0-9a-f]{64})(?:,v1=([0-9a-f]{64}))?$`)
	for i, wantOld := range []bool{true, false} {
		wantStatus(t, w.call(t, "POST", "/v1/contacts", `{"name": "Ana"}`), http.StatusCreated)
		eventually(t, "a delivery", func() bool { return len(rc.hits()) > i })
		h := rc.hits()[i]
		sig := h.header.Get("Rolodex-Signature")
		m := signed.FindStringSubmatch(sig)
		if m == nil || !verify(rotated.Secret, "t="+m[1]+",v1="+m[2], h.body) || verify(rotated.Secret+"x", sig, h.body) {
			t.Fatalf("Rolodex-Signature %q: want t= and a first v1= of the new secret", sig)
		}
		if gotOld := m[3] != "" && verify(old.Secret, "t="+m[1]+",v1="+m[3], h.body); gotOld != wantOld || verify(old.Secret, sig, h.body) != wantOld {
			t.Errorf("Rolodex-Signature %q: signed with the old secret too: %v; want %v", sig, gotOld, wantOld)
		}
		// 24 hours later, only the new secret signs. (The time is Go's: Citus refuses now() - interval
		// on a column in an UPDATE.)
		if _, err := w.st.db.Exec(`UPDATE webhook_endpoints SET secret_rotated_at = $3 WHERE company_id = $1 AND id = $2`,
			w.c.id, old.ID, time.Now().Add(-secretOverlap-time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	// As a key's roll, a rotation takes no body as well as {}.
	for _, ct := range []string{"", "application/json"} {
		again := decode[endpointBody](t, wantStatus(t, w.call(t, "POST", path, "", "Content-Type", ct), http.StatusCreated).body)
		if again.ID != old.ID || !strings.HasPrefix(again.Secret, "whsec_") || again.Secret == rotated.Secret {
			t.Errorf("rotated without a body (Content-Type %q): %+v; want the endpoint with a new secret", ct, again)
		}
		rotated = again
	}
}

func TestWebhookRetriesWithBackoffUntilTheReceiverRecovers(t *testing.T) {
	t.Parallel()
	w := newHookWorld(t, nil) // backoff 100ms: then 200ms, 400ms
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n < 3 {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
		}
	})
	e := w.endpoint(t, rc.URL, "contact.created")
	wantStatus(t, w.call(t, "POST", "/v1/contacts", `{"name": "Ana"}`), http.StatusCreated)
	var d deliveryBody
	eventually(t, "a failed attempt", func() bool { d = w.deliveries(t, e.ID)[0]; return d.Attempts > 0 })
	if d.Status == "pending" && (d.LastStatusCode == nil || *d.LastStatusCode != 503 || d.NextAttemptAt == nil || d.DeliveredAt != nil) {
		t.Errorf("after %d failed attempts: %+v; want pending with the last status 503 and the next attempt's time", d.Attempts, d)
	}
	eventually(t, "delivered", func() bool { d = w.deliveries(t, e.ID)[0]; return d.Status == "delivered" })
	hits := rc.hits()
	if d.Attempts != 4 || len(hits) != 4 || *d.LastStatusCode != 200 || d.LastError != nil {
		t.Fatalf("delivered: %+v after %d requests; want 4 attempts, 200", d, len(hits))
	}
	for i := 1; i < len(hits); i++ {
		want := 100 * time.Millisecond << (i - 1)
		if gap := hits[i].at.Sub(hits[i-1].at); gap < want-time.Millisecond || hits[i].header.Get("Rolodex-Event-Id") != hits[0].header.Get("Rolodex-Event-Id") {
			t.Errorf("attempt %d came %v after the one before; want the same event, at least %v after", i+1, gap, want)
		}
	}
}

func TestWebhookRedirectsAreNotFollowedAndLongAnswersAreCut(t *testing.T) {
	t.Parallel()
	w := newHookWorld(t, nil)
	target := newReceiver(t, nil)
	redirect := newReceiver(t, func(w http.ResponseWriter, r *http.Request, n int) { http.Redirect(w, r, target.URL, http.StatusFound) })
	var written atomic.Int64
	ended := make(chan error, 1)
	endless := newReceiver(t, func(w http.ResponseWriter, r *http.Request, n int) {
		chunk := make([]byte, 64<<10)
		for written.Load() < 256<<20 { // what a receiver that never stops would send, as far as a test goes
			k, err := w.Write(chunk)
			if written.Add(int64(k)); err != nil {
				ended <- err
				return
			}
		}
		ended <- nil
	})
	er := w.endpoint(t, redirect.URL, "contact.created")
	el := w.endpoint(t, endless.URL, "contact.created")
	wantStatus(t, w.call(t, "POST", "/v1/contacts", `{"name": "Ana"}`), http.StatusCreated)

	var d deliveryBody
	eventually(t, "a second attempt at the redirecting endpoint", func() bool { d = w.deliveries(t, er.ID)[0]; return d.Attempts >= 2 })
	if d.Status != "pending" || *d.LastStatusCode != http.StatusFound || d.LastError == nil || !strings.Contains(*d.LastError, "redirect") || len(target.hits()) != 0 {
		t.Errorf("redirected: %+v, and the redirect's target got %d requests; want pending, 302, an error saying so, and none", d, len(target.hits()))
	}
	if err := <-ended; err == nil {
		t.Errorf("the endless answer: %d bytes written, all of them; want the connection closed after 64 KiB", written.Load())
	}
	eventually(t, "the endless answer's delivery recorded", func() bool { d = w.deliveries(t, el.ID)[0]; return d.Attempts > 0 })
	if d.Status != "delivered" || written.Load() > 64<<20 {
		t.Errorf("an endless 200 answer: %+v after %d MiB were written; want delivered, and the connection closed after 64 KiB read (some MiB in buffers)",
			d, written.Load()>>20)
	}
}

func TestWebhookSlowEndpointDoesNotHoldUpAnother(t *testing.T) {
	t.Parallel()
	w := newHookWorld(t, nil)
	release := make(chan struct{})
	var hanging, most atomic.Int64
	slow := newReceiver(t, func(w http.ResponseWriter, r *http.Request, n int) {
		now := hanging.Add(1)
		defer hanging.Add(-1)
		for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
		}
		select {
		case <-release:
		case <-r.Context().Done(): // the client's 10 s
		}
	})
	t.Cleanup(func() { close(release) }) // before the receiver closes, which waits for its requests
	fast := newReceiver(t, nil)
	w.endpoint(t, slow.URL, "contact.created")
	w.endpoint(t, fast.URL, "contact.created")
	for i := range 12 {
		wantStatus(t, w.call(t, "POST", "/v1/contacts", fmt.Sprintf(`{"name": "Ana %d"}`, i)), http.StatusCreated)
	}
	eventually(t, "12 events at the fast endpoint", func() bool { return len(fast.hits()) >= 12 })
	if hanging.Load() == 0 || most.Load() > webhookEndpointSlots {
		t.Errorf("when the fast endpoint had all 12, %d requests were hanging at the slow one, at most %d at once; want some, and at most %d",
			hanging.Load(), most.Load(), webhookEndpointSlots)
	}
}

func TestWebhookDeletingAnEndpointStopsItsDeliveries(t *testing.T) {
	t.Parallel()
	w := newHookWorld(t, nil)
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, n int) { w.WriteHeader(http.StatusInternalServerError) })
	e := w.endpoint(t, rc.URL, "contact.created")
	for range 2 {
		wantStatus(t, w.call(t, "POST", "/v1/contacts", `{"name": "Ana"}`), http.StatusCreated)
	}
	eventually(t, "4 failed attempts", func() bool { return len(rc.hits()) >= 4 })
	wantStatus(t, w.call(t, "DELETE", itemPath("/v1/webhooks", e.ID), ""), http.StatusNoContent)
	n := len(rc.hits())
	time.Sleep(1500 * time.Millisecond) // several of the retries' waits (100ms, doubling)
	if got := len(rc.hits()); got > n+2 {
		t.Errorf("%d more attempts in 1.5s after the endpoint was deleted; want at most the 2 that may have been under way", got-n)
	}
	if left := sqlIn(t, w.st, `SELECT count(*) FROM webhook_deliveries WHERE company_id = $1`, w.c.id); left != 0 {
		t.Errorf("%d deliveries left of the deleted endpoint; want none", left)
	}
}

func TestWebhookRetryAndDeliveriesList(t *testing.T) {
	t.Parallel()
	w := newHookWorld(t, nil)
	rc := newReceiver(t, nil)
	e := w.endpoint(t, rc.URL, "contact.*")
	for i := range 3 {
		wantStatus(t, w.call(t, "POST", "/v1/contacts", fmt.Sprintf(`{"name": "Ana %d"}`, i)), http.StatusCreated)
	}
	var ds []deliveryBody
	eventually(t, "3 deliveries delivered", func() bool {
		ds = w.deliveries(t, e.ID)
		return len(ds) == 3 && !slices.ContainsFunc(ds, func(d deliveryBody) bool { return d.Status != "delivered" })
	})
	// A page at a time, the same deliveries in the same order: newest first.
	deliveriesPath := itemPath("/v1/webhooks", e.ID) + "/deliveries"
	var paged []deliveryBody
	for path := deliveriesPath + "?limit=1"; ; {
		p := decode[deliveryPage](t, wantStatus(t, w.call(t, "GET", path, ""), http.StatusOK).body)
		paged = append(paged, p.Data...)
		if p.Pagination.NextCursor == nil {
			break
		}
		path = deliveriesPath + "?limit=1&cursor=" + url.QueryEscape(*p.Pagination.NextCursor)
	}
	if diff := cmp.Diff(ds, paged); diff != "" || ds[0].ID < ds[2].ID {
		t.Errorf("deliveries a page at a time (-whole +paged):\n%s", diff)
	}

	oldest := ds[2]
	retry := fmt.Sprintf("%s/%d/retry", deliveriesPath, oldest.ID)
	r := w.call(t, "POST", retry, `{}`, "Idempotency-Key", "again-1")
	d := decode[deliveryBody](t, wantStatus(t, r, http.StatusAccepted).body)
	if d.ID != oldest.ID || d.Status != "pending" || d.NextAttemptAt == nil || d.Attempts != 1 {
		t.Errorf("POST %s = %+v; want the delivery pending, due now", retry, d)
	}
	eventually(t, "the retried event sent again", func() bool { return len(rc.hits()) >= 4 })
	if got := rc.hits()[3].header.Get("Rolodex-Event-Id"); got != strconv.FormatInt(oldest.EventID, 10) {
		t.Errorf("sent again: event %s; want %d", got, oldest.EventID)
	}
	eventually(t, "the retried delivery delivered", func() bool { d = w.deliveries(t, e.ID)[2]; return d.Status == "delivered" })
	if d.Attempts != 2 {
		t.Errorf("the retried delivery: %+v; want 2 attempts", d)
	}
	// The same key again replays the first answer and sends nothing.
	again := w.call(t, "POST", retry, `{}`, "Idempotency-Key", "again-1")
	if again.status != http.StatusAccepted || string(again.body) != string(r.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the retry again with its Idempotency-Key: %d %s; want the first answer replayed", again.status, again.body)
	}

	other := w.endpoint(t, "http://127.0.0.1:9/", "business.*")
	for _, tt := range []struct {
		method, path, body string
		status             int
	}{
		{"POST", retry, `{"now": true}`, http.StatusUnprocessableEntity},
		{"POST", retry, ``, http.StatusUnsupportedMediaType},
		{"POST", deliveriesPath + "/abc/retry", `{}`, http.StatusBadRequest},
		{"POST", deliveriesPath + "/999999999/retry", `{}`, http.StatusNotFound},
		{"POST", fmt.Sprintf("/v1/webhooks/%d/deliveries/%d/retry", other.ID, oldest.ID), `{}`, http.StatusNotFound},
		{"GET", "/v1/webhooks/999999999/deliveries", ``, http.StatusNotFound},
		{"GET", deliveriesPath + "?limit=0", ``, http.StatusBadRequest},
		{"GET", deliveriesPath + "?sort=id", ``, http.StatusBadRequest},
		{"GET", deliveriesPath + "?cursor=bm90LWEtY3Vyc29y", ``, http.StatusBadRequest},
	} {
		if r := w.call(t, tt.method, tt.path, tt.body); r.status != tt.status {
			t.Errorf("%s %s %s = %d %s; want %d", tt.method, tt.path, tt.body, r.status, r.body, tt.status)
		}
	}
}

func TestWebhookDeliveryGivesUpAfter3DaysAndDisablesItsEndpoint(t *testing.T) {
	t.Parallel()
	w := newHookWorld(t, nil)
	fail := func(w http.ResponseWriter, r *http.Request, n int) { w.WriteHeader(http.StatusInternalServerError) }
	dead := newReceiver(t, fail)
	flaky := newReceiver(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n > 0 {
			fail(w, r, n)
		}
	})
	ed, ef := w.endpoint(t, dead.URL, "contact.*"), w.endpoint(t, flaky.URL, "contact.*")
	ana := itemPath("/v1/contacts", decode[obj](t, wantStatus(t, w.call(t, "POST", "/v1/contacts", `{"name": "Ana"}`), http.StatusCreated).body).id())
	eventually(t, "the flaky endpoint's first delivery", func() bool { return len(flaky.hits()) == 1 })
	wantStatus(t, w.call(t, "PATCH", ana, `{"city": "Lisboa"}`), http.StatusOK)
	eventually(t, "failed attempts at both endpoints", func() bool { return len(flaky.hits()) >= 2 && len(dead.hits()) >= 2 })

	// Three days pass for the pending deliveries: the database's clock is the one the worker reads.
	if _, err := w.st.db.Exec(`UPDATE webhook_deliveries SET created_at = now() - interval '4 days' WHERE company_id = $1 AND status = 'pending'`, w.c.id); err != nil {
		t.Fatal(err)
	}
	var got endpointBody
	eventually(t, "the dead endpoint disabled", func() bool {
		got = decode[endpointBody](t, w.get(t, itemPath("/v1/webhooks", ed.ID)).body)
		return !got.Enabled
	})
	if got.DisabledReason == nil || !strings.Contains(*got.DisabledReason, "3 days") || !strings.Contains(*got.DisabledReason, "HTTP status 500") {
		t.Errorf("disabledReason %v; want it to say no delivery succeeded for 3 days, and the last attempt's 500", got.DisabledReason)
	}
	eventually(t, "every delivery failed", func() bool {
		return sqlIn(t, w.st, `SELECT count(*) FROM webhook_deliveries WHERE company_id = $1 AND status = 'pending'`, w.c.id) == 0
	})
	for _, d := range w.deliveries(t, ed.ID) {
		if d.Status != "failed" || d.NextAttemptAt != nil {
			t.Errorf("a delivery to the disabled endpoint: %+v; want failed", d)
		}
	}
	// The flaky endpoint delivered within the 3 days: it stays enabled, its failed delivery failed.
	if e := decode[endpointBody](t, w.get(t, itemPath("/v1/webhooks", ef.ID)).body); !e.Enabled || e.DisabledReason != nil {
		t.Errorf("the flaky endpoint: %+v; want still enabled", e)
	}
	if ds := w.deliveries(t, ef.ID); ds[0].Status != "failed" || ds[1].Status != "delivered" {
		t.Errorf("the flaky endpoint's deliveries: %+v; want the newest failed, the other delivered", ds)
	}

	// A disabled endpoint gets no deliveries, until it is enabled again.
	wantStatus(t, w.call(t, "PATCH", ana, `{"city": "Porto"}`), http.StatusOK)
	if n := len(w.deliveries(t, ed.ID)); n != 2 {
		t.Errorf("the disabled endpoint has %d deliveries after another change; want the 2 before", n)
	}
	enabled := decode[endpointBody](t, wantStatus(t, w.call(t, "PATCH", itemPath("/v1/webhooks", ed.ID), `{"enabled": true}`), http.StatusOK).body)
	if !enabled.Enabled || enabled.DisabledReason != nil {
		t.Errorf("enabled again: %+v; want enabled, without a disabledReason", enabled)
	}
}

func TestWebhookSettingsAreChecked(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		env  map[string]string
		args []string
		says string
	}{
		{nil, []string{"-webhook-allow-cidrs", "127.0.0.1/32,10.0.0.1"}, "not a CIDR"},
		{nil, []string{"-webhook-backoff", "0s"}, "-webhook-backoff"},
		{nil, []string{"-webhook-slots", "-1"}, "-webhook-slots"},
		{map[string]string{"ROLODEX_WEBHOOK_BACKOFF": "soon"}, nil, "ROLODEX_WEBHOOK_BACKOFF"},
		{map[string]string{"ROLODEX_WEBHOOK_SLOTS": "many"}, nil, "ROLODEX_WEBHOOK_SLOTS"},
	} {
		env := map[string]string{"DATABASE_URL": testEnv.dbURL}
		maps.Copy(env, tt.env)
		var stderr strings.Builder
		err := run(context.Background(), append([]string{"rolodex", "serve"}, tt.args...), func(k string) string { return env[k] }, io.Discard, &stderr)
		if err == nil || !strings.Contains(err.Error()+stderr.String(), tt.says) {
			t.Errorf("serve %v with %v: %v, %q; want an error naming %s", tt.args, tt.env, err, stderr.String(), tt.says)
		}
	}
}
