package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// The middleware every request passes, composed and listed in order in newHandler (main.go).

// reqInfo is what the middleware learns of a request: its id, route pattern and tenant. One pointer to
// it travels in the context, so inner layers fill it in for the access log of the outermost.
type reqInfo struct {
	id      string
	pattern string
	events  atomic.Int64 // events the request's write queued (metrics.go); batch items add at once
	tenant               // who the request acts as, once withAuth has resolved its key
}

// reqInfoKey is the context key of a request's *reqInfo.
type reqInfoKey struct{}

// requestInfo returns the request's reqInfo; outside the middleware (in unit tests) an empty one.
func requestInfo(ctx context.Context) *reqInfo {
	if ri, ok := ctx.Value(reqInfoKey{}).(*reqInfo); ok {
		return ri
	}
	return &reqInfo{}
}

// requestIDs makes request ids: a random per-process prefix and a counter.
type requestIDs struct {
	prefix string
	n      atomic.Uint64
}

// newRequestIDs returns a maker of request ids with a new random prefix.
func newRequestIDs() *requestIDs {
	var b [6]byte
	rand.Read(b[:])
	return &requestIDs{prefix: hex.EncodeToString(b[:])}
}

// next returns a new request id: the prefix and the next count, in base 36.
func (g *requestIDs) next() string { return g.prefix + "-" + strconv.FormatUint(g.n.Add(1), 36) }

// saneRequestID reports whether a client's X-Request-Id may be echoed: 1 to 128 of [A-Za-z0-9-_.:].
func saneRequestID(s string) bool {
	const sane = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:"
	return len(s) > 0 && len(s) <= 128 && strings.Trim(s, sane) == ""
}

// statusRecorder remembers the status a handler wrote, for the access log and for recovery.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// withRequestLog is the outermost middleware: it gives the request its id (X-Request-Id, the client's
// when sane), marks every answer nosniff, no-store and varying with Accept-Encoding, bounds the
// request's database work to timeout (0: none; a database too slow makes a 503, not a held request),
// turns a panic into a logged 500, and logs a line per request (never the API key).
func withRequestLog(log *slog.Logger, ids *requestIDs, timeout time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ri := &reqInfo{id: r.Header.Get("X-Request-Id")}
		if !saneRequestID(ri.id) {
			ri.id = ids.next()
		}
		h := w.Header()
		h.Set("X-Request-Id", ri.id)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		h.Set("Vary", "Accept-Encoding")
		ctx := context.WithValue(r.Context(), reqInfoKey{}, ri)
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		r = r.WithContext(ctx)
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				log.Error("panic", "requestId", ri.id, "method", r.Method, "route", ri.pattern,
					"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				if rec.status == 0 {
					writeProblem(rec, r, errInternal)
				}
			}
			log.LogAttrs(ctx, slog.LevelInfo, "request", slog.String("requestId", ri.id),
				slog.String("method", r.Method), slog.String("route", ri.pattern), slog.Int("status", rec.status),
				slog.Float64("durationMs", float64(time.Since(start).Microseconds())/1000),
				slog.Int64("companyId", ri.companyID))
		}()
		next.ServeHTTP(rec, r)
	})
}

// withPattern records the route pattern the mux chose, for the access log. A path the mux would
// redirect to its cleaned form (//v1/contacts) is no route: 404, not a redirect with an HTML body.
func withPattern(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isCleanPath(r.URL.EscapedPath()) {
			writeProblem(w, r, errNoRoute(r))
			return
		}
		defer func() { requestInfo(r.Context()).pattern = r.Pattern }() // also when the handler panics
		mux.ServeHTTP(w, r)
	})
}

// isCleanPath reports whether the mux serves p as it is: p is path.Clean's, but for a trailing slash.
func isCleanPath(p string) bool {
	c := path.Clean(p)
	return p == c || p == c+"/" && c != "/"
}

// maxQueryBytes bounds the query string. The longest one a client can mean (every filter with 100
// ids, a cursor, expand[]) fits well within it; a longer one is a 400 before any work is done.
const maxQueryBytes = 16 << 10

// withQueryLimit answers 400 to a query string longer than maxQueryBytes.
func withQueryLimit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.URL.RawQuery) > maxQueryBytes {
			writeProblem(w, r, badRequest("invalid_parameter",
				fmt.Sprintf("The query string is longer than %d bytes.", maxQueryBytes)))
			return
		}
		next.ServeHTTP(w, r)
	})
}
