package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
)

// fieldError names one field of a request body and what is wrong with it.
type fieldError struct {
	Field   string
	Message string
}

// apiError is a failure the client caused (or a known service condition): it is answered with its
// own status, code and detail. Anything else a handler returns is a 500.
type apiError struct {
	Status int
	Code   string
	Detail string
	Errors []fieldError
}

func (e *apiError) Error() string { return e.Code + ": " + e.Detail }

// errNotFound is returned by the store when no object with the id exists for the company.
var errNotFound = errors.New("not found")

func badRequest(code, detail string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: code, Detail: detail}
}

func validationFailed(errs ...fieldError) *apiError {
	return &apiError{Status: http.StatusUnprocessableEntity, Code: "validation_failed",
		Detail: "The request body has invalid fields.", Errors: errs}
}

// writeProblem writes an RFC 9457 problem+json body. Every error answer of the server goes through it.
func writeProblem(w http.ResponseWriter, r *http.Request, e *apiError) {
	b := make([]byte, 0, 256)
	b = append(b, `{"type":"about:blank","title":`...)
	b = appendString(b, http.StatusText(e.Status))
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	b = append(b, `,"detail":`...)
	b = appendString(b, e.Detail)
	b = append(b, `,"code":`...)
	b = appendString(b, e.Code)
	b = append(b, `,"requestId":`...)
	b = appendString(b, requestInfo(r.Context()).id)
	if len(e.Errors) > 0 {
		b = append(b, `,"errors":[`...)
		for i, fe := range e.Errors {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"field":`...)
			b = appendString(b, fe.Field)
			b = append(b, `,"message":`...)
			b = appendString(b, fe.Message)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, "}\n"...)
	h := w.Header()
	h["Content-Type"] = problemContentType
	delete(h, "Etag")
	delete(h, "Location")
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(e.Status)
	w.Write(b)
}

// writeError answers err: an *apiError as itself, errNotFound as 404, an unavailable database as 503,
// and anything else as a 500 that is logged with the request id and never shown to the client.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		writeProblem(w, r, ae)
	case errors.Is(err, errNotFound):
		writeProblem(w, r, &apiError{Status: http.StatusNotFound, Code: "not_found",
			Detail: "No such object."})
	case r.Context().Err() != nil:
		// The request deadline passed (the database is slow or away), or the client went away and
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
		log.Error("internal error", "requestId", requestInfo(r.Context()).id,
			"method", r.Method, "route", r.Pattern, "err", err)
		writeProblem(w, r, &apiError{Status: http.StatusInternalServerError, Code: "internal_error",
			Detail: "An internal error occurred. It has been logged with the request id."})
	}
}
