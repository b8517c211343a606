package main

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// metricsServer starts a server of the test's own with -metrics-addr and more env, and returns its
// API's base URL and its metrics URL.
func metricsServer(t *testing.T, env map[string]string) (api, metricsURL string) {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	env["ROLODEX_METRICS_ADDR"] = addr
	return startServer(t, env, nil), "http://" + addr + "/metrics"
}

var (
	metaLine   = regexp.MustCompile(`^# (HELP [a-zA-Z_:][a-zA-Z0-9_:]* .*|TYPE [a-zA-Z_:][a-zA-Z0-9_:]* (counter|gauge|histogram))$`)
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\["\\n])*",?)*)\})? (\S+)$`)
)

// scrape fetches the exposition at u, holds every line to the text format 0.0.4 (and each sample
// to a TYPE line before it), and returns the samples by name and labels as written, `name{a="b"}`.
func scrape(t *testing.T, u string) map[string]float64 {
	t.Helper()
	r := callAt(t, nil, u, "GET", "", "", "")
	wantStatus(t, r, http.StatusOK)
	if ct := r.header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("Content-Type %q; want the text format 0.0.4's", ct)
	}
	samples, typed := map[string]float64{}, map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			if !metaLine.MatchString(line) {
				t.Fatalf("bad comment line %q", line)
			}
			if f := strings.Fields(line); f[1] == "TYPE" {
				typed[f[2]] = f[3]
			}
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("bad sample line %q", line)
		}
		v, err := strconv.ParseFloat(m[4], 64)
		if err != nil {
			t.Fatalf("bad value in %q", line)
		}
		family := m[1]
		if typ := typed[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(family, "_bucket"), "_sum"), "_count")]; typ == "histogram" {
			family = ""
		} else if typed[family] == "" {
			t.Fatalf("sample %q has no TYPE line before it", line)
		}
		if _, dup := samples[m[1]+m[2]]; dup {
			t.Fatalf("sample %q twice", line)
		}
		samples[m[1]+m[2]] = v
	}
	return samples
}

func TestMetricsCountRequestsByRoutePattern(t *testing.T) {
	t.Parallel()
	api, mu := metricsServer(t, map[string]string{})
	c := newTestCompany(t)
	before := scrape(t, mu)
	id := "/v1/contacts/" + decode[obj](t, wantStatus(t, callAt(t, nil, api, "POST", "/v1/contacts", c.key, `{"name":"Metric"}`), http.StatusCreated).body)["id"].(string)
	for range 3 {
		wantStatus(t, callAt(t, nil, api, "GET", id, c.key, ""), http.StatusOK)
	}
	wantStatus(t, callAt(t, nil, api, "GET", "/v1/contacts", "", ""), http.StatusUnauthorized)
	wantStatus(t, callAt(t, nil, api, "GET", "/v1/nothing/42", c.key, ""), http.StatusNotFound)
	for range 2 {
		wantStatus(t, callAt(t, nil, api, "POST", "/v1/contacts", c.key, `{"name":"Once"}`, "Idempotency-Key", "m-"+randomHex(4)+"x"), http.StatusCreated)
	}
	ik := "m-" + randomHex(8)
	for range 2 {
		wantStatus(t, callAt(t, nil, api, "POST", "/v1/contacts", c.key, `{"name":"Twice"}`, "Idempotency-Key", ik), http.StatusCreated)
	}
	after := scrape(t, mu)
	moved := func(name string) float64 { return after[name] - before[name] }
	for name, want := range map[string]float64{
		`rolodex_http_requests_total{route="/v1/contacts/{id}",method="GET",status="2xx"}`:  3,
		`rolodex_http_requests_total{route="/v1/contacts",method="POST",status="2xx"}`:      5,
		`rolodex_http_requests_total{route="none",method="GET",status="4xx"}`:               1,
		`rolodex_http_requests_total{route="/",method="GET",status="4xx"}`:                  1,
		`rolodex_http_request_duration_seconds_count{route="/v1/contacts/{id}"}`:            3,
		`rolodex_http_request_duration_seconds_bucket{route="/v1/contacts/{id}",le="+Inf"}`: 3,
		`rolodex_auth_failures_total`:      1,
		`rolodex_idempotent_replays_total`: 1,
		`rolodex_events_written_total`:     4, // the replay wrote none
		`rolodex_http_requests_in_flight`:  0,
	} {
		if got := moved(name); got != want {
			t.Errorf("%s moved by %v; want %v", name, got, want)
		}
	}
	if moved(`rolodex_http_request_duration_seconds_sum{route="/v1/contacts/{id}"}`) <= 0 {
		t.Error("the duration sum did not move")
	}
	// Buckets are cumulative, and labels name route patterns, never a path's id.
	prev := -1.0
	for _, le := range append(durationBuckets, 0) {
		s := strconv.FormatFloat(le, 'g', -1, 64)
		if le == 0 {
			s = "+Inf"
		}
		v, ok := after[`rolodex_http_request_duration_seconds_bucket{route="/v1/contacts/{id}",le="`+s+`"}`]
		if !ok || v < prev {
			t.Errorf("bucket le=%s: %v (present %v) after %v; want every bucket, cumulative", s, v, ok, prev)
		}
		prev = v
	}
	tail := id[strings.LastIndexByte(id, '/'):]
	for name := range after {
		if strings.Contains(name, tail+`"`) || strings.Contains(name, "/nothing") || strings.Contains(name, c.key) {
			t.Errorf("series %s names a raw path, an id or a key", name)
		}
	}
	if after[`rolodex_db_pool_max_open_connections`] != 16 || after[`rolodex_webhook_backlog_up`] != 1 {
		t.Errorf("pool size %v, backlog up %v; want 16 and 1", after[`rolodex_db_pool_max_open_connections`], after[`rolodex_webhook_backlog_up`])
	}
	if after[`rolodex_build_info{version="`+buildVersion()+`",goversion="`+runtime.Version()+`"}`] != 1 {
		t.Errorf("no build_info of this version in %v", after)
	}
}

func TestMetricsAreNeverOnTheAPIPort(t *testing.T) {
	t.Parallel()
	api, _ := metricsServer(t, map[string]string{})
	for _, base := range []string{api, testEnv.baseURL} {
		wantProblem(t, callAt(t, nil, base, "GET", "/metrics", "", ""), http.StatusNotFound, "not_found")
	}
}

// /metrics answers GET and HEAD; any other method is 405 with Allow, and shows no series.
func TestMetricsAnswerGetAndHeadOnly(t *testing.T) {
	t.Parallel()
	_, u := metricsServer(t, map[string]string{})
	if r := callAt(t, nil, u, "HEAD", "", "", ""); r.status != http.StatusOK || len(r.body) != 0 || r.header.Get("Content-Type") == "" {
		t.Errorf("HEAD /metrics = %d, %d bytes, Content-Type %q; want 200 with no body", r.status, len(r.body), r.header.Get("Content-Type"))
	}
	for _, method := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		r := callAt(t, nil, u, method, "", "", "")
		if r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != "GET, HEAD" || bytes.Contains(r.body, []byte("rolodex_")) {
			t.Errorf("%s /metrics = %d, Allow %q, body %.100q; want 405 with Allow: GET, HEAD and no series", method, r.status, r.header.Get("Allow"), r.body)
		}
	}
}

func TestMetricsCount429ByCauseAndLimitedAddresses(t *testing.T) {
	t.Parallel()
	api, mu := metricsServer(t, map[string]string{"ROLODEX_RATE_LIMIT": "1", "ROLODEX_AUTH_FAILURE_LIMIT": "2"})
	c := newTestCompany(t)
	limited := 0
	for range 6 {
		if callAt(t, nil, api, "GET", "/v1/contacts/count", c.key, "").status == http.StatusTooManyRequests {
			limited++
		}
	}
	for range 3 {
		callAt(t, nil, api, "GET", "/v1/contacts", "rdx_nope", "")
	}
	got := scrape(t, mu)
	if limited == 0 || got[`rolodex_http_rate_limited_total{cause="api_key"}`] != float64(limited) {
		t.Errorf("api_key 429s %v; want the %d answered (more than 0)", got[`rolodex_http_rate_limited_total{cause="api_key"}`], limited)
	}
	for name, want := range map[string]float64{
		`rolodex_http_rate_limited_total{cause="address"}`: 1,
		`rolodex_auth_failures_total`:                      2,
		`rolodex_auth_limited_addresses`:                   1,
	} {
		if got[name] != want {
			t.Errorf("%s = %v; want %v", name, got[name], want)
		}
	}
}

func TestMetricsExpositionEscapesLabelValues(t *testing.T) {
	t.Parallel()
	var e expo
	e.family("x_total", "counter", "A help\\text\nover two lines.")
	e.sample("x_total", 1.5, "route", `a"b\c`+"\nd", "le", "+Inf")
	e.gauge("y", "Y.", 2e9)
	want := "# HELP x_total A help\\\\text\\nover two lines.\n# TYPE x_total counter\n" +
		`x_total{route="a\"b\\c\nd",le="+Inf"} 1.5` + "\n# HELP y Y.\n# TYPE y gauge\ny 2e+09\n"
	if string(e.b) != want {
		t.Errorf("exposition\n%s\nwant\n%s", e.b, want)
	}
	if routeLabel("GET /v1/contacts/{id}") != "/v1/contacts/{id}" || routeLabel("") != "none" || routeLabel("/") != "/" {
		t.Error("routeLabel does not give a pattern's path")
	}
}

func TestRollWithoutABody(t *testing.T) {
	t.Parallel()
	c := newTestCompany(t)
	key := addKey(t, c.id, 0)
	var id int64
	for _, k := range decode[listAnswer[obj]](t, wantStatus(t, call(t, "GET", "/v1/apiKeys", c.key, ""), http.StatusOK).body).Data {
		if strings.HasPrefix(key, k["prefix"].(string)) {
			id = k.id()
		}
	}
	for _, ct := range []string{"", "application/json"} {
		r := wantStatus(t, call(t, "POST", itemPath("/v1/apiKeys", id)+"/roll", c.key, "", "Content-Type", ct), http.StatusCreated)
		rolled := decode[obj](t, r.body)
		key = rolled["key"].(string)
		id = rolled.id()
	}
	wantStatus(t, call(t, "GET", "/v1/contacts/count", key, ""), http.StatusOK)
	wantProblem(t, call(t, "POST", itemPath("/v1/apiKeys", id)+"/roll", c.key, "[]"), http.StatusBadRequest, "invalid_json")
}

func TestMetricsCountWebhookAttemptsAndTheBacklog(t *testing.T) {
	t.Parallel()
	// A database of its own: no other server's worker takes the deliveries.
	dbURL := freshDatabase(t)
	api, mu := metricsServer(t, map[string]string{"DATABASE_URL": dbURL, "ROLODEX_WEBHOOK_ALLOW_CIDRS": "127.0.0.1/32",
		"ROLODEX_WEBHOOK_BACKOFF": "100ms"})
	st, err := openStore(dbConfig{url: dbURL, maxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	nc, err := st.createCompany(context.Background(), "Metrics of webhooks")
	if err != nil {
		t.Fatal(err)
	}
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.WriteHeader([]int{http.StatusServiceUnavailable, http.StatusNoContent}[min(n, 1)])
	})
	wantStatus(t, callAt(t, nil, api, "POST", "/v1/webhooks", nc.APIKey, `{"url":"`+rc.URL+`","events":["contact.*"]}`), http.StatusCreated)
	wantStatus(t, callAt(t, nil, api, "POST", "/v1/contacts", nc.APIKey, `{"name":"Hooked"}`), http.StatusCreated)
	var got map[string]float64
	eventually(t, "a failed attempt, then a delivery", func() bool {
		got = scrape(t, mu)
		return got[`rolodex_webhook_attempts_total{result="delivered"}`] == 1 && got[`rolodex_webhook_deliveries_pending`] == 0
	})
	if got[`rolodex_webhook_attempts_total{result="not_delivered"}`] != 1 || got[`rolodex_webhook_deliveries_pending`] != 0 ||
		got[`rolodex_webhook_oldest_pending_age_seconds`] != 0 || got[`rolodex_events_written_total`] != 1 {
		t.Errorf("after a 503 and a 204: %v", got)
	}
}

// What counting costs a request, without and with the metrics middleware, on all cores at once
// (make bench-go): the difference is the hot path's price, beside a retrieve's tens of microseconds.
func BenchmarkMetricsWrap(b *testing.B) {
	m := &metrics{}
	m.routes.Store(&map[string]*routeMetrics{})
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	for name, h := range map[string]http.Handler{"off": (*metrics)(nil).wrap(next), "on": m.wrap(next)} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				ri := &reqInfo{pattern: "GET /v1/contacts/{id}"}
				r := httptest.NewRequest("GET", "/v1/contacts/1", nil)
				r = r.WithContext(context.WithValue(r.Context(), reqInfoKey{}, ri))
				w := &statusRecorder{ResponseWriter: httptest.NewRecorder()}
				for pb.Next() {
					w.status = 0
					h.ServeHTTP(w, r)
				}
			})
		})
	}
}
