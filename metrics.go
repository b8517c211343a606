package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Prometheus metrics: GET /metrics in the text format 0.0.4, written by hand, on a listener of its own
// (-metrics-addr). A request updates atomics only, finding its route's counters in a map that is
// replaced, never changed, so the hot path takes no lock. Gauges are read when Prometheus scrapes.

// durationBuckets are the upper bounds, in seconds, of the request duration histogram.
var durationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// metricMethods are the method label's values; any other method counts as "OTHER".
var metricMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "OTHER"}

// metrics are the server's series. A nil *metrics (no -metrics-addr) records nothing.
type metrics struct {
	st    *store
	fails *failureLimiter // the address limiter, for the addresses it refuses

	mu     sync.Mutex                               // held only to add a route
	routes atomic.Pointer[map[string]*routeMetrics] // by route pattern; replaced, never changed

	inFlight     atomic.Int64    // requests being answered
	authFailures atomic.Int64    // 401 answers
	replays      atomic.Int64    // writes answered with the answer kept for their Idempotency-Key
	events       atomic.Int64    // events written by successful writes
	timeouts     atomic.Int64    // 503 answers of requests past their deadline
	unavailable  atomic.Int64    // 503 answers
	limited      [2]atomic.Int64 // 429 answers: per API key, per address
	attempts     [2]atomic.Int64 // webhook attempts: delivered, not delivered
}

// routeMetrics are one route pattern's requests by method and status class, and its durations.
type routeMetrics struct {
	requests [8][5]atomic.Int64 // by metricMethods and status class 1xx..5xx
	buckets  [15]atomic.Int64   // by durationBuckets, not cumulative; the last is +Inf
	nanos    atomic.Int64       // the durations' sum
}

// startMetrics serves GET /metrics on lim.metricsAddr until ctx is done, and sets lim's metrics
// for the handler and the webhook worker to update. With no address it does nothing.
func startMetrics(ctx context.Context, st *store, lim *limits, log *slog.Logger) error {
	if lim.metricsAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", lim.metricsAddr)
	if err != nil {
		return fmt.Errorf("metrics listener: %w", err)
	}
	m := &metrics{st: st}
	m.routes.Store(&map[string]*routeMetrics{})
	lim.metrics = m
	lim.hooks.metrics = m
	mux := http.NewServeMux() // not an API route: no method in the pattern, so openapi_test.go skips it
	mux.Handle("/metrics", m)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
	}
	go srv.Serve(ln)
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	log.Info("metrics listening", "addr", ln.Addr().String())
	return nil
}

// limiter notes l as the address limiter whose refused addresses are a gauge, and returns it.
func (m *metrics) limiter(l *failureLimiter) *failureLimiter {
	if m != nil {
		m.fails = l
	}
	return l
}

// wrap counts the requests next serves. It goes right inside withRequestLog, whose statusRecorder
// and reqInfo it reads (anywhere else it records the status itself); a handler that panics counts as
// a 500, as withRequestLog answers it so.
func (m *metrics) wrap(next http.Handler) http.Handler {
	if m == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec, ok := w.(*statusRecorder)
		if !ok {
			rec = &statusRecorder{ResponseWriter: w}
		}
		start := time.Now()
		m.inFlight.Add(1)
		status := http.StatusInternalServerError // if next panics
		defer func() {
			m.inFlight.Add(-1)
			m.observe(w, r, status, time.Since(start))
		}()
		next.ServeHTTP(rec, r)
		status = cmp.Or(rec.status, http.StatusOK)
	})
}

// observe counts one answered request.
func (m *metrics) observe(w http.ResponseWriter, r *http.Request, status int, d time.Duration) {
	ri := requestInfo(r.Context())
	rm := m.route(ri.pattern)
	method := slices.Index(metricMethods, r.Method)
	if method < 0 {
		method = len(metricMethods) - 1
	}
	class := min(max(status/100, 1), 5) // 1xx to 5xx
	rm.requests[method][class-1].Add(1)
	b, _ := slices.BinarySearch(durationBuckets, d.Seconds())
	rm.buckets[b].Add(1)
	rm.nanos.Add(int64(d))
	switch {
	case status == http.StatusUnauthorized:
		m.authFailures.Add(1)
	case status == http.StatusTooManyRequests && ri.companyID != 0:
		m.limited[0].Add(1)
	case status == http.StatusTooManyRequests:
		m.limited[1].Add(1)
	case status == http.StatusServiceUnavailable:
		m.unavailable.Add(1)
		if r.Context().Err() == context.DeadlineExceeded {
			m.timeouts.Add(1) // the request's deadline, its statement timeout, passed
		}
	case status < 300 && r.Method != http.MethodGet:
		m.events.Add(ri.events.Load())
		if w.Header().Get("Idempotent-Replayed") == "true" {
			m.replays.Add(1)
		}
	}
}

// route returns the counters of a route pattern, adding them when the pattern is new. Patterns are
// the mux's (and "" for answers given before routing), so there are few of them.
func (m *metrics) route(pattern string) *routeMetrics {
	if rm := (*m.routes.Load())[pattern]; rm != nil {
		return rm
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	routes := maps.Clone(*m.routes.Load())
	if routes[pattern] == nil {
		routes[pattern] = &routeMetrics{}
		m.routes.Store(&routes)
	}
	return routes[pattern]
}

// attempt counts an attempt at a webhook delivery that got the HTTP status (0: no answer).
func (m *metrics) attempt(status int) {
	if m == nil {
		return
	}
	if status/100 == 2 {
		m.attempts[0].Add(1)
	} else {
		m.attempts[1].Add(1)
	}
}

// ServeHTTP answers GET (and HEAD) /metrics with every series; another method is 405 with Allow.
func (m *metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "405 method not allowed: /metrics answers GET and HEAD", http.StatusMethodNotAllowed)
		return
	}
	var e expo
	routes := *m.routes.Load()
	names := slices.Sorted(maps.Keys(routes))
	e.family("rolodex_http_requests_total", "counter", "HTTP requests answered, by route pattern, method and status class.")
	for _, p := range names {
		for mi, method := range metricMethods {
			for c := range 5 {
				if n := routes[p].requests[mi][c].Load(); n > 0 {
					e.sample("rolodex_http_requests_total", float64(n), "route", routeLabel(p), "method", method, "status", strconv.Itoa(c+1)+"xx")
				}
			}
		}
	}
	e.family("rolodex_http_request_duration_seconds", "histogram", "Time to answer a request, by route pattern.")
	for _, p := range names {
		rm := routes[p]
		n := int64(0) // the stored buckets are not cumulative; the exposed ones are
		for i := range rm.buckets {
			n += rm.buckets[i].Load()
			le := "+Inf"
			if i < len(durationBuckets) {
				le = strconv.FormatFloat(durationBuckets[i], 'g', -1, 64)
			}
			e.sample("rolodex_http_request_duration_seconds_bucket", float64(n), "route", routeLabel(p), "le", le)
		}
		e.sample("rolodex_http_request_duration_seconds_sum", float64(rm.nanos.Load())/1e9, "route", routeLabel(p))
		e.sample("rolodex_http_request_duration_seconds_count", float64(n), "route", routeLabel(p))
	}
	e.gauge("rolodex_http_requests_in_flight", "Requests being answered now.", float64(m.inFlight.Load()))
	e.counter("rolodex_http_unavailable_total", "503 answers: the database unavailable or a request past its deadline.", float64(m.unavailable.Load()))
	e.counter("rolodex_statement_timeouts_total", "503 answers of requests whose deadline, the statement timeout, passed.", float64(m.timeouts.Load()))
	e.counter("rolodex_auth_failures_total", "401 answers: requests with a missing, unknown or revoked API key.", float64(m.authFailures.Load()))
	e.gauge("rolodex_auth_limited_addresses", "Client addresses refused now for too many failed authentications.", float64(m.fails.limitedAddrs()))
	e.family("rolodex_http_rate_limited_total", "counter", "429 answers, by cause: an API key over its rate limit, an address over its failure limit.")
	e.sample("rolodex_http_rate_limited_total", float64(m.limited[0].Load()), "cause", "api_key")
	e.sample("rolodex_http_rate_limited_total", float64(m.limited[1].Load()), "cause", "address")
	e.counter("rolodex_idempotent_replays_total", "Writes answered with the answer kept for their Idempotency-Key.", float64(m.replays.Load()))
	e.counter("rolodex_events_written_total", "Events written by successful writes.", float64(m.events.Load()))
	e.family("rolodex_webhook_attempts_total", "counter", "Attempts at webhook deliveries by this server, by result.")
	e.sample("rolodex_webhook_attempts_total", float64(m.attempts[0].Load()), "result", "delivered")
	e.sample("rolodex_webhook_attempts_total", float64(m.attempts[1].Load()), "result", "not_delivered")
	m.backlog(r.Context(), &e)
	s := m.st.db.Stats()
	e.gauge("rolodex_db_pool_max_open_connections", "The database pool's size.", float64(s.MaxOpenConnections))
	e.gauge("rolodex_db_pool_open_connections", "Open database connections, in use or idle.", float64(s.OpenConnections))
	e.gauge("rolodex_db_pool_in_use_connections", "Database connections in use.", float64(s.InUse))
	e.gauge("rolodex_db_pool_idle_connections", "Idle database connections.", float64(s.Idle))
	e.counter("rolodex_db_pool_waits_total", "Times a request waited for a database connection.", float64(s.WaitCount))
	e.counter("rolodex_db_pool_wait_seconds_total", "Time requests waited for a database connection.", s.WaitDuration.Seconds())
	e.gauge("rolodex_build_info", "The server's version and the Go version it was built with; always 1.", 1,
		"version", buildVersion(), "goversion", runtime.Version())
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write(e.b)
}

// backlog adds the webhook deliveries pending across all companies and the age of the oldest, read
// with one statement through webhook_deliveries_due, and whether it answered within 2s.
func (m *metrics) backlog(ctx context.Context, e *expo) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var n int64
	var age float64
	err := m.st.db.QueryRowContext(ctx, `SELECT count(*), coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8
		FROM webhook_deliveries WHERE status = 'pending'`).Scan(&n, &age)
	up := 0.0
	if err == nil {
		up = 1
	}
	e.gauge("rolodex_webhook_backlog_up", "1 when the webhook backlog was read, 0 when its query failed or took over 2s.", up)
	if err == nil {
		e.gauge("rolodex_webhook_deliveries_pending", "Webhook deliveries pending (due now or after a backoff), all companies.", float64(n))
		e.gauge("rolodex_webhook_oldest_pending_age_seconds", "Age of the oldest pending webhook delivery; 0 with none.", age)
	}
}

// routeLabel is a route pattern as a label: its path ("GET /v1/contacts/{id}": "/v1/contacts/{id}"),
// "none" for answers given before routing (401, 429, 400 for the query string's length).
func routeLabel(pattern string) string {
	if _, path, ok := strings.Cut(pattern, " "); ok {
		return path
	}
	return cmp.Or(pattern, "none")
}

// expo writes the text exposition format 0.0.4.
type expo struct{ b []byte }

// labelEscaper escapes a label value as the format asks: backslash, double quote and line feed.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// family starts a metric family with its HELP and TYPE lines.
func (e *expo) family(name, typ, help string) {
	help = strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(help)
	e.b = fmt.Appendf(e.b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

// sample writes one sample: name, its labels as name/value pairs, and v.
func (e *expo) sample(name string, v float64, labels ...string) {
	e.b = append(e.b, name...)
	for i := 0; i < len(labels); i += 2 {
		sep := ','
		if i == 0 {
			sep = '{'
		}
		e.b = fmt.Appendf(e.b, `%c%s="%s"`, sep, labels[i], labelEscaper.Replace(labels[i+1]))
	}
	if len(labels) > 0 {
		e.b = append(e.b, '}')
	}
	e.b = append(e.b, ' ')
	e.b = strconv.AppendFloat(e.b, v, 'g', -1, 64)
	e.b = append(e.b, '\n')
}

// gauge writes a family of one gauge sample.
func (e *expo) gauge(name, help string, v float64, labels ...string) {
	e.family(name, "gauge", help)
	e.sample(name, v, labels...)
}

// counter writes a family of one counter sample, without labels.
func (e *expo) counter(name, help string, v float64) {
	e.family(name, "counter", help)
	e.sample(name, v)
}
