package main

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
)

// resource binds one API resource (contacts, business) to the six generic handlers below: its store
// methods, its encoder, and how to read an object's id and version.
type resource[T any] struct {
	path    string // "/v1/contacts"
	list    func(ctx context.Context, companyID int64, p page) ([]T, error)
	count   func(ctx context.Context, companyID int64) (int64, error)
	get     func(ctx context.Context, companyID, id int64) (T, error)
	create  func(ctx context.Context, t tenant, members []member) (T, error)
	update  func(ctx context.Context, companyID, id int64, ifMatch string, members []member) (T, error)
	delete  func(ctx context.Context, companyID, id int64, ifMatch string) error
	encode  func(b []byte, v *T) []byte
	id      func(v *T) int64
	version func(v *T) int64
}

// handleList answers GET /v1/{resource}: {"data": [...], "pagination": {...}}.
func handleList[T any](res *resource[T], log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		q, aerr := queryParams(r, "limit", "cursor", "expand[]")
		if aerr != nil {
			writeProblem(w, r, aerr)
			return
		}
		p, aerr := parsePage(q)
		if aerr != nil {
			writeProblem(w, r, aerr)
			return
		}
		p.limit++ // one more than asked tells whether there is a next page
		vs, err := res.list(r.Context(), t.companyID, p)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		p.limit--
		more := len(vs) > p.limit
		vs = vs[:min(len(vs), p.limit)]
		b := make([]byte, 0, 600*len(vs)+128)
		b = append(b, `{"data":[`...)
		var last int64
		for i := range vs {
			if i > 0 {
				b = append(b, ',')
			}
			b = res.encode(b, &vs[i])
			last = res.id(&vs[i])
		}
		b = append(b, "],"...)
		b = appendPagination(b, p.limit, more, last)
		writeJSON(w, http.StatusOK, append(b, "}\n"...))
	})
}

// handleCount answers GET /v1/{resource}/count: {"count": n}.
func handleCount[T any](res *resource[T], log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		if _, aerr := queryParams(r); aerr != nil {
			writeProblem(w, r, aerr)
			return
		}
		n, err := res.count(r.Context(), t.companyID)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		writeJSON(w, http.StatusOK, appendCount(nil, n))
	})
}

// handleGet answers GET /v1/{resource}/{id}: the object, with its ETag.
func handleGet[T any](res *resource[T], log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		id, aerr := pathID(r)
		if aerr == nil {
			_, aerr = queryParams(r, "expand[]")
		}
		if aerr != nil {
			writeProblem(w, r, aerr)
			return
		}
		v, err := res.get(r.Context(), t.companyID, id)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		writeObject(w, http.StatusOK, res.version(&v), append(res.encode(make([]byte, 0, 1024), &v), '\n'))
	})
}

// handleCreate answers POST /v1/{resource}: 201, the object, its ETag and Location.
func handleCreate[T any](res *resource[T], log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		_, aerr := queryParams(r, "expand[]")
		var members []member
		if aerr == nil {
			members, aerr = readObject(w, r)
		}
		if aerr != nil {
			writeProblem(w, r, aerr)
			return
		}
		v, err := res.create(r.Context(), t, members)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		w.Header().Set("Location", res.path+"/"+strconv.FormatInt(res.id(&v), 10))
		writeObject(w, http.StatusCreated, res.version(&v), append(res.encode(make([]byte, 0, 1024), &v), '\n'))
	})
}

// handleUpdate answers PATCH /v1/{resource}/{id} (a merge patch, honouring If-Match).
func handleUpdate[T any](res *resource[T], log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		id, aerr := pathID(r)
		if aerr == nil {
			_, aerr = queryParams(r, "expand[]")
		}
		var members []member
		if aerr == nil {
			members, aerr = readObject(w, r)
		}
		if aerr != nil {
			writeProblem(w, r, aerr)
			return
		}
		v, err := res.update(r.Context(), t.companyID, id, r.Header.Get("If-Match"), members)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		writeObject(w, http.StatusOK, res.version(&v), append(res.encode(make([]byte, 0, 1024), &v), '\n'))
	})
}

// handleDelete answers DELETE /v1/{resource}/{id}: 204, honouring If-Match.
func handleDelete[T any](res *resource[T], log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		id, aerr := pathID(r)
		if aerr == nil {
			_, aerr = queryParams(r, "expand[]")
		}
		if aerr != nil {
			writeProblem(w, r, aerr)
			return
		}
		if err := res.delete(r.Context(), t.companyID, id, r.Header.Get("If-Match")); err != nil {
			writeError(w, r, log, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
