package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"
)

// reqInfo is what the middleware learns about a request as it passes through: its id, its route
// pattern, and the tenant the API key resolved to. One pointer to it travels in the context, so
// inner layers fill it in without copying the request.
type reqInfo struct {
	id        string
	pattern   string
	companyID int64
	userID    int64
}

type reqInfoKey struct{}

// requestInfo returns the request's reqInfo; outside the middleware (in unit tests) an empty one.
func requestInfo(ctx context.Context) *reqInfo {
	if ri, ok := ctx.Value(reqInfoKey{}).(*reqInfo); ok {
		return ri
	}
	return &reqInfo{}
}

// requestIDs makes request ids: a random per-process prefix and a counter, unique without a
// syscall per request.
type requestIDs struct {
	prefix string
	n      atomic.Uint64
}

func newRequestIDs() *requestIDs {
	var b [6]byte
	rand.Read(b[:])
	return &requestIDs{prefix: hex.EncodeToString(b[:])}
}

func (g *requestIDs) next() string {
	return g.prefix + "-" + strconv.FormatUint(g.n.Add(1), 36)
}

// saneRequestID reports whether a client's X-Request-Id may be echoed: 1 to 128 characters of
// letters, digits and -_.:
func saneRequestID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '-' || c == '_' || c == '.' || c == ':'
		if !ok {
			return false
		}
	}
	return true
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

// withRequestLog is the outermost middleware: it gives the request its id (X-Request-Id, the
// client's when sane), turns a panic into a logged 500 problem, and writes one access-log line
// with method, route pattern, status, duration and company id (never the API key).
func withRequestLog(log *slog.Logger, ids *requestIDs, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ri := &reqInfo{id: r.Header.Get("X-Request-Id")}
		if !saneRequestID(ri.id) {
			ri.id = ids.next()
		}
		w.Header().Set("X-Request-Id", ri.id)
		r = r.WithContext(context.WithValue(r.Context(), reqInfoKey{}, ri))
		rec := &statusRecorder{ResponseWriter: w}

		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				log.Error("panic", "requestId", ri.id, "method", r.Method, "route", ri.pattern,
					"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				if rec.status == 0 {
					writeProblem(rec, r, &apiError{Status: http.StatusInternalServerError,
						Code: "internal_error", Detail: "An internal error occurred. It has been logged with the request id."})
				}
			}
			log.LogAttrs(r.Context(), slog.LevelInfo, "request",
				slog.String("requestId", ri.id),
				slog.String("method", r.Method),
				slog.String("route", ri.pattern),
				slog.Int("status", rec.status),
				slog.Float64("durationMs", float64(time.Since(start).Microseconds())/1000),
				slog.Int64("companyId", ri.companyID))
		}()
		next.ServeHTTP(rec, r)
	})
}

// withPattern records the route pattern the mux chose, for the access log.
func withPattern(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { requestInfo(r.Context()).pattern = r.Pattern }() // also when the handler panics
		mux.ServeHTTP(w, r)
	})
}
