package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Errors, and the one place that turns them into HTTP answers: RFC 9457 problem+json bodies (API.md
// section 7). The store returns the sentinel errors and fieldErrors below; it knows nothing of HTTP.

// Errors the store returns, checked with errors.Is.
var (
	errNotFound           = errors.New("not found")                     // no such object for the company
	errPreconditionFailed = errors.New("precondition failed")           // the object has another version than If-Match names
	errOutOfRange         = errors.New("value out of the stored range") // a value PostgreSQL cannot hold
)

// fieldError names one field of a request body and what is wrong with it, for the client.
type fieldError struct {
	Field   string
	Message string
}

// fieldErrors is the error of a body whose fields are at fault: bad values, unknown or read-only
// fields, references to objects the company does not have. It is answered 422.
type fieldErrors []fieldError

func (fe fieldErrors) Error() string {
	parts := make([]string, len(fe))
	for i, e := range fe {
		parts[i] = e.Field + " " + e.Message
	}
	return "invalid fields: " + strings.Join(parts, "; ")
}

// apiError is an answer decided while reading a request (a bad parameter, a body too large...): its
// own status, code and detail.
type apiError struct {
	Status int
	Code   string
	Detail string
	Errors []fieldError
	More   []byte // more members of the body, as an object: {"mergedInto": "1042"} (merge.go)
}

func (e *apiError) Error() string { return e.Code + ": " + e.Detail }

// errInternal answers a bug: a 500 whose details are only in the log, under the request id.
var errInternal = &apiError{Status: http.StatusInternalServerError, Code: "internal_error",
	Detail: "An internal error occurred. It has been logged with the request id."}

// badRequest returns a 400 with code and detail.
func badRequest(code, detail string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: code, Detail: detail}
}

// clientError returns the answer to an error of the client's request: an *apiError itself, or one of
// the store's errors with its status. Anything else is nil.
func clientError(err error) *apiError {
	var ae *apiError
	var fe fieldErrors
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &fe):
		return &apiError{Status: http.StatusUnprocessableEntity, Code: "validation_failed",
			Detail: "The request body has invalid fields.", Errors: fe}
	case errors.Is(err, errNotFound):
		return &apiError{Status: http.StatusNotFound, Code: "not_found", Detail: "No such object."}
	case errors.Is(err, errPreconditionFailed):
		return &apiError{Status: http.StatusPreconditionFailed, Code: "precondition_failed",
			Detail: "The object has changed since the ETag given in If-Match; retrieve it again."}
	case errors.Is(err, errOutOfRange):
		return &apiError{Status: http.StatusUnprocessableEntity, Code: "validation_failed",
			Detail: "A value in the body is out of the range the database can hold."}
	}
	return nil
}

// writeError answers err: a client's error (clientError) as itself; an unavailable database or a
// request past its deadline is 503; anything else is a 500 that is logged with the request id and
// never shown to the client.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	switch ae := clientError(err); {
	case ae != nil:
		writeProblem(w, r, ae)
	case r.Context().Err() != nil:
		// The request's deadline passed (the database is slow or away), or the client went away and
		// nobody is listening: neither is a bug, so no 500 and no error log.
		if errors.Is(r.Context().Err(), context.DeadlineExceeded) {
			log.Warn("request deadline passed", "requestId", requestInfo(r.Context()).id, "route", r.Pattern, "err", err)
		}
		w.Header().Set("Retry-After", "1")
		writeProblem(w, r, &apiError{Status: http.StatusServiceUnavailable, Code: "timeout",
			Detail: "The request did not complete in time. Retry later."})
	case isDBUnavailable(err):
		log.Warn("database unavailable", "requestId", requestInfo(r.Context()).id, "err", err)
		w.Header().Set("Retry-After", "1")
		writeProblem(w, r, &apiError{Status: http.StatusServiceUnavailable, Code: "service_unavailable",
			Detail: "The database is unavailable. Retry later."})
	default:
		log.Error("internal error", "requestId", requestInfo(r.Context()).id, "method", r.Method,
			"route", r.Pattern, "err", err)
		writeProblem(w, r, errInternal)
	}
}

// The bounds of an error body: whatever the request, one stays under 256 KiB (a batch's too:
// batchErrorBudget). A message that lists what the client could have sent names a few
// (listMessage); the API's own messages are written to fit.
const (
	maxMessageChars  = 200       // of an errors entry's field and of its message
	maxDetailChars   = 1000      // of a problem's detail
	maxErrorEntries  = 10        // errors entries of a problem (of each item of a batch), then one "and N more"
	batchErrorBudget = 160 << 10 // bytes of a batch's errors past which each further failing item has one entry
)

// writeProblem writes e as an RFC 9457 problem+json body. Every error answer goes through it.
func writeProblem(w http.ResponseWriter, r *http.Request, e *apiError) {
	writeProblemBody(w, e.Status, problemJSON(r, e))
}

// problemJSON is e as an RFC 9457 problem+json body, within the bounds (bounded).
func problemJSON(r *http.Request, e *apiError) []byte {
	return encodeProblem(r, e.bounded("", maxErrorEntries))
}

// bounded returns e as an answer carries it: its detail, and each errors entry's field and message,
// cut to their bounds; at most entries of its errors, then one that counts the others. at names the
// part of the body the fields are in ("items[3]": email is then "items[3].email", "" is the body's
// own), and the entry that counts.
func (e *apiError) bounded(at string, entries int) *apiError {
	b := *e
	b.Detail = clampText(e.Detail, maxDetailChars)
	if len(e.Errors) == 0 {
		return &b
	}
	shown := min(len(e.Errors), entries)
	b.Errors = make([]fieldError, 0, shown+1)
	for _, fe := range e.Errors[:shown] {
		field := fe.Field
		if at != "" {
			field = strings.TrimSuffix(at+"."+fe.Field, ".")
		}
		b.Errors = append(b.Errors, fieldError{Field: clampText(field, maxMessageChars), Message: clampText(fe.Message, maxMessageChars)})
	}
	if more := len(e.Errors) - shown; more > 0 {
		msg := fmt.Sprintf("and %d more", more)
		if shown == 0 {
			msg = fmt.Sprintf("%d errors, not listed: the answer is at its size bound", more)
		}
		b.Errors = append(b.Errors, fieldError{Field: at, Message: msg})
	}
	return &b
}

// clampText returns s, or when it has more than n characters its first n-3 and "...".
func clampText(s string, n int) string {
	if len(s) <= n { // a character is a byte at least
		return s
	}
	chars := 0
	for i := range s { // an invalid byte is one character, as appendString writes it
		if chars == n-3 {
			if utf8.RuneCountInString(s[i:]) <= 3 {
				return s
			}
			return s[:i] + "..."
		}
		chars++
	}
	return s
}

// quoteClamped is s, a value a client sent, quoted for a message: at most 40 characters of it.
func quoteClamped(s string) string {
	return strconv.Quote(clampText(s, 40))
}

// listMessage is prefix followed by values, as many as fit a message (at most maxErrorEntries of
// them, in maxMessageChars less a margin for what a caller adds), then "and N more".
func listMessage(prefix string, values []string) string {
	msg := prefix
	shown := 0
	for i, v := range values {
		sep := ", "
		if i == 0 {
			sep = ""
		}
		if i == maxErrorEntries || utf8.RuneCountInString(msg+sep+v)+len(" and 999 more") > maxMessageChars-10 {
			break
		}
		msg += sep + v
		shown++
	}
	if more := len(values) - shown; more > 0 {
		msg += fmt.Sprintf(" and %d more", more)
	}
	return msg
}

// encodeProblem is e as an RFC 9457 problem+json body, as it is: bounded already.
func encodeProblem(r *http.Request, e *apiError) []byte {
	typ := "about:blank"
	title := http.StatusText(e.Status)
	status := int64(e.Status)
	b := appendObject(nil, "type", &typ, "title", &title, "status", &status, "detail", &e.Detail, "code", &e.Code,
		"requestId", &requestInfo(r.Context()).id)
	if len(e.Errors) > 0 {
		b = append(b[:len(b)-1], `,"errors":[`...) // reopen the object
		for i := range e.Errors {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendObject(b, "field", &e.Errors[i].Field, "message", &e.Errors[i].Message)
		}
		b = append(b, "]}"...)
	}
	if e.More != nil {
		b = b[:len(b)-1] // reopen the object
		b = append(b, ',')
		b = append(b, e.More[1:]...)
	}
	return append(b, '\n')
}

// writeProblemBody sends a problem+json body with its status.
func writeProblemBody(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Del("ETag")
	h.Del("Location")
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}
