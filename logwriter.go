package main

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// The server's log is JSON lines on stderr: slog's, and one access-log line per request that is
// written by hand, because slog's formatting and a write(2) per request were a tenth of the
// server's CPU. Both go through one logWriter, which batches them.

// logBufferBytes bounds the bytes queued for writing. A writer that finds the queue full waits: a
// stalled stderr slows requests down as a blocking write would, rather than dropping lines or
// growing without bound.
const logBufferBytes = 64 << 10

// logWriter is an io.Writer for whole lines that writes them in batches ("group commit"): Write
// copies its lines into a queue and returns, and a goroutine, started when lines arrive and gone
// when none are left, writes all that is queued in one write to out. A lone line is written at
// once; lines that arrive during a write go out together in the next. Each Write is queued whole,
// so the lines of concurrent callers never interleave (slog writes one line per call).
type logWriter struct {
	out io.Writer

	mu       sync.Mutex
	changed  sync.Cond // broadcast when the flusher takes the queue and when it has written it
	queue    []byte    // lines not yet taken by the flusher
	spare    []byte    // the flusher's last batch, reused as the next queue
	flushing bool      // a flusher goroutine is running: the queue is not empty, or is being written
	queued   int64     // bytes ever queued
	written  int64     // bytes ever written to out
}

func newLogWriter(out io.Writer) *logWriter {
	w := &logWriter{out: out}
	w.changed.L = &w.mu
	return w
}

// Write queues p, whole lines, and returns without waiting for out, unless logBufferBytes are
// already queued. It never fails: like slog, the log has nowhere to report its own write errors.
func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	// A batch longer than the bound can only be one line longer than it, queued alone.
	for len(w.queue) > 0 && len(w.queue)+len(p) > logBufferBytes {
		w.changed.Wait()
	}
	w.queue = append(w.queue, p...)
	w.queued += int64(len(p))
	if !w.flushing {
		w.flushing = true
		go w.flush()
	}
	w.mu.Unlock()
	return len(p), nil
}

// flush writes the queue to out, one write per batch, until it is empty.
func (w *logWriter) flush() {
	w.mu.Lock()
	for len(w.queue) > 0 {
		batch := w.queue
		w.queue = w.spare[:0]
		w.changed.Broadcast()
		w.mu.Unlock()
		w.out.Write(batch)
		w.mu.Lock()
		w.written += int64(len(batch))
		w.changed.Broadcast()
		w.spare = nil
		if cap(batch) <= 2*logBufferBytes { // not the buffer of a giant line
			w.spare = batch
		}
	}
	w.flushing = false
	w.mu.Unlock()
}

// Flush returns when every line queued before it was called has been written to out.
func (w *logWriter) Flush() {
	w.mu.Lock()
	for target := w.queued; w.written < target; {
		w.changed.Wait()
	}
	w.mu.Unlock()
}

// logHandler is slog's JSON handler over a logWriter, which the access log finds here so that its
// lines go to the same place.
type logHandler struct {
	*slog.JSONHandler
	out *logWriter
}

// newLogger returns the server's logger: JSON lines to w, written in batches. flushLog waits for them.
func newLogger(w io.Writer) *slog.Logger {
	out := newLogWriter(w)
	return slog.New(logHandler{slog.NewJSONHandler(out, nil), out})
}

// logWriterOf returns the logWriter of a logger from newLogger, else nil.
func logWriterOf(log *slog.Logger) *logWriter {
	if h, ok := log.Handler().(logHandler); ok {
		return h.out
	}
	return nil
}

// flushLog returns when everything log was given has been written, for a logger from newLogger.
func flushLog(log *slog.Logger) {
	if out := logWriterOf(log); out != nil {
		out.Flush()
	}
}

// logAccess writes the access-log line of a request that ran from start to end. With out (the
// logWriter of log) it writes by hand the bytes that slog's JSON handler would write, as long as
// its strings need no escaping, which the server's never do (request ids are sane, methods are
// HTTP tokens, routes are its own patterns); otherwise slog writes it.
func logAccess(ctx context.Context, log *slog.Logger, out *logWriter, ri *reqInfo, method string, status int, start, end time.Time) {
	ms := float64(end.Sub(start).Microseconds()) / 1000
	if out != nil && logPlain(ri.id) && logPlain(method) && logPlain(ri.pattern) {
		var buf [512]byte // on the stack: Write copies it
		out.Write(appendAccessLine(buf[:0], end, ri, method, status, ms))
		return
	}
	h := log.Handler()
	if !h.Enabled(ctx, slog.LevelInfo) {
		return
	}
	r := slog.NewRecord(end, slog.LevelInfo, "request", 0)
	r.AddAttrs(slog.String("requestId", ri.id), slog.String("method", method), slog.String("route", ri.pattern),
		slog.Int("status", status), slog.Float64("durationMs", ms), slog.Int64("companyId", ri.companyID))
	h.Handle(ctx, r)
}

// appendAccessLine appends the access-log line slog's JSON handler writes for the record that
// logAccess makes, byte for byte (TestAccessLineIsSlogs), for strings where logPlain holds.
func appendAccessLine(b []byte, t time.Time, ri *reqInfo, method string, status int, ms float64) []byte {
	b = append(b, `{"time":"`...)
	b = t.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":"INFO","msg":"request","requestId":"`...)
	b = append(b, ri.id...)
	b = append(b, `","method":"`...)
	b = append(b, method...)
	b = append(b, `","route":"`...)
	b = append(b, ri.pattern...)
	b = append(b, `","status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"durationMs":`...)
	// slog writes floats as json.Marshal does, which is this for 0 and from 1e-6 to 1e21.
	b = strconv.AppendFloat(b, ms, 'f', -1, 64)
	b = append(b, `,"companyId":`...)
	b = strconv.AppendInt(b, ri.companyID, 10)
	return append(b, "}\n"...)
}

// logPlain reports whether slog's JSON handler writes s as it is: printable ASCII (and DEL) other
// than '"' and '\\'.
func logPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
