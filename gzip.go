package main

import (
	"compress/gzip"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// gzipMinBytes is the smallest body worth compressing; smaller ones are sent as they are.
const gzipMinBytes = 1024

var gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(io.Discard) }}

// withGzip compresses answers for clients that accept gzip, when the handler declared a body of more
// than gzipMinBytes with Content-Length (every writer of this server does). HEAD, 1xx, 204, 304 and
// answers that already have a Content-Encoding are left alone. Every answer says Vary: Accept-Encoding.
func withGzip(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header() // Header.Add without its cost: no key to canonicalize, no slice to make
		if vary := h["Vary"]; len(vary) > 0 {
			h["Vary"] = append(vary, "Accept-Encoding")
		} else {
			h["Vary"] = varyAcceptEncoding
		}
		if r.Method == http.MethodHead || !acceptsGzip(r.Header.Get("Accept-Encoding")) {
			next.ServeHTTP(w, r)
			return
		}
		gw := &gzipWriter{ResponseWriter: w}
		defer gw.close()
		next.ServeHTTP(gw, r)
	})
}

// acceptsGzip reports whether an Accept-Encoding header admits gzip: named, or covered by *, with a
// q-value above 0.
func acceptsGzip(header string) bool {
	star := false
	for part := range strings.SplitSeq(header, ",") {
		name, params, _ := strings.Cut(part, ";")
		name = strings.TrimSpace(name)
		if !strings.EqualFold(name, "gzip") && name != "*" {
			continue
		}
		ok := true
		if q, found := strings.CutPrefix(strings.TrimSpace(params), "q="); found {
			f, err := strconv.ParseFloat(q, 64)
			ok = err == nil && f > 0
		}
		if name != "*" {
			return ok
		}
		star = ok
	}
	return star
}

// gzipWriter decides at WriteHeader whether the body is compressed, and then compresses it.
type gzipWriter struct {
	http.ResponseWriter
	gz          *gzip.Writer // nil: the body passes through
	wroteHeader bool
}

func (g *gzipWriter) WriteHeader(code int) {
	if g.wroteHeader || code < 200 {
		g.ResponseWriter.WriteHeader(code)
		return
	}
	g.wroteHeader = true
	h := g.Header()
	n, err := strconv.Atoi(h.Get("Content-Length"))
	if err == nil && n > gzipMinBytes && code != http.StatusNoContent && code != http.StatusNotModified &&
		h.Get("Content-Encoding") == "" {
		h.Del("Content-Length")
		h.Set("Content-Encoding", "gzip")
		g.gz = gzipWriters.Get().(*gzip.Writer)
		g.gz.Reset(g.ResponseWriter)
	}
	g.ResponseWriter.WriteHeader(code)
}

func (g *gzipWriter) Write(b []byte) (int, error) {
	if !g.wroteHeader {
		g.WriteHeader(http.StatusOK)
	}
	if g.gz != nil {
		return g.gz.Write(b)
	}
	return g.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (g *gzipWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// close ends the gzip stream, if there is one, and returns its writer to the pool.
func (g *gzipWriter) close() {
	if g.gz == nil {
		return
	}
	g.gz.Close()
	g.gz.Reset(io.Discard)
	gzipWriters.Put(g.gz)
	g.gz = nil
}
