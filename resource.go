package main

import (
	"context"
	"database/sql"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
)

// resource binds one API resource (contacts, business, and the reference resources) to the generic
// handlers below: its store methods, its encoder, its expansions, and how to read an object's id and
// version. A nil method is an endpoint the resource does not have.
type resource[T any] struct {
	st     *store
	path   string   // "/v1/contacts"
	params []string // list query parameters besides limit, cursor and expand[]

	list   func(ctx context.Context, companyID int64, p page, q url.Values) ([]T, error)
	count  func(ctx context.Context, companyID int64) (int64, error)
	get    func(ctx context.Context, companyID, id int64) (T, error)
	create func(ctx context.Context, t tenant, members []member) (T, error)
	update func(ctx context.Context, companyID, id int64, ifMatch string, members []member) (T, error)
	delete func(ctx context.Context, companyID, id int64, ifMatch string) error

	encode     func(b []byte, v *T) []byte
	id         func(v *T) int64
	version    func(v *T) int64 // nil: no ETag
	expansions []expansion
	ref        func(v *T, name string) sql.NullInt64 // the id an expansion points at
}

// respond writes objs (one object, or a list page when page is not nil) with the expansions exps,
// loading the related objects first: one query per kind of related object.
func (res *resource[T]) respond(w http.ResponseWriter, r *http.Request, log *slog.Logger, status int,
	exps []expansion, objs []T, pg *page, more bool) {
	rel, err := loadRelated(r.Context(), res.st, tenantOf(r).companyID, exps, objs, res.ref)
	if err != nil {
		writeError(w, r, log, err)
		return
	}
	if pg == nil {
		v := &objs[0]
		if res.version != nil {
			w.Header().Set("ETag", etag(res.version(v)))
		}
		writeJSON(w, status, append(appendExpanded(make([]byte, 0, 1024), res, v, exps, rel), '\n'))
		return
	}
	b := make([]byte, 0, 600*len(objs)+128)
	b = append(b, `{"data":[`...)
	var last int64
	for i := range objs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendExpanded(b, res, &objs[i], exps, rel)
		last = res.id(&objs[i])
	}
	b = append(b, "],"...)
	b = appendPagination(b, pg.limit, more, last)
	writeJSON(w, status, append(b, "}\n"...))
}

// handleList answers GET /v1/{resource}: {"data": [...], "pagination": {...}}.
func handleList[T any](res *resource[T], log *slog.Logger) http.Handler {
	allowed := append([]string{"limit", "cursor", "expand[]"}, res.params...)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		q, aerr := queryParams(r, allowed...)
		var p page
		var exps []expansion
		if aerr == nil {
			p, aerr = parsePage(q)
		}
		if aerr == nil {
			exps, aerr = parseExpand(q, res.expansions)
		}
		if aerr != nil {
			writeProblem(w, r, aerr)
			return
		}
		p.limit++ // one more than asked tells whether there is a next page
		vs, err := res.list(r.Context(), t.companyID, p, q)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		p.limit--
		more := len(vs) > p.limit
		res.respond(w, r, log, http.StatusOK, exps, vs[:min(len(vs), p.limit)], &p, more)
	})
}

// handleCount answers GET /v1/{resource}/count: {"count": n}.
func handleCount[T any](res *resource[T], log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		// expand[] is accepted on every request; a count has nothing to expand.
		if _, _, aerr := objectRequest(r, false, res.expansions); aerr != nil {
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

// objectRequest reads what every single-object request starts with: the path id (when withID) and
// expand[].
func objectRequest(r *http.Request, withID bool, allowed []expansion) (int64, []expansion, *apiError) {
	var id int64
	if withID {
		var aerr *apiError
		if id, aerr = pathID(r); aerr != nil {
			return 0, nil, aerr
		}
	}
	q, aerr := queryParams(r, "expand[]")
	if aerr != nil {
		return 0, nil, aerr
	}
	exps, aerr := parseExpand(q, allowed)
	return id, exps, aerr
}

// handleGet answers GET /v1/{resource}/{id}: the object, with its ETag.
func handleGet[T any](res *resource[T], log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		id, exps, aerr := objectRequest(r, true, res.expansions)
		if aerr != nil {
			writeProblem(w, r, aerr)
			return
		}
		v, err := res.get(r.Context(), t.companyID, id)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		res.respond(w, r, log, http.StatusOK, exps, []T{v}, nil, false)
	})
}

// handleCreate answers POST /v1/{resource}: 201, the object, its ETag and Location.
func handleCreate[T any](res *resource[T], log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		_, exps, aerr := objectRequest(r, false, res.expansions)
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
		res.respond(w, r, log, http.StatusCreated, exps, []T{v}, nil, false)
	})
}

// handleUpdate answers PATCH /v1/{resource}/{id} (a merge patch, honouring If-Match).
func handleUpdate[T any](res *resource[T], log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		id, exps, aerr := objectRequest(r, true, res.expansions)
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
		res.respond(w, r, log, http.StatusOK, exps, []T{v}, nil, false)
	})
}

// handleDelete answers DELETE /v1/{resource}/{id}: 204, honouring If-Match. expand[] is checked and
// otherwise ignored: there is no body to expand.
func handleDelete[T any](res *resource[T], log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		id, _, aerr := objectRequest(r, true, res.expansions)
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
