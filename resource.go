package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
)

// resource binds one API resource (contacts, business, and the reference resources) to the generic
// handlers below: its store methods, its encoder, its expansions, and how to read an object's id and
// version. A nil method is an endpoint the resource does not have.
type resource[T any] struct {
	st    *store
	path  string    // "/v1/contacts"
	lists *listSpec // what its list and count take: sorts, filters

	list   func(ctx context.Context, companyID int64, lq *listQuery) ([]T, error) // limit+1 rows
	count  func(ctx context.Context, companyID int64, lq *listQuery) (int64, error)
	get    func(ctx context.Context, companyID, id int64, exps []expansion) (T, *related, error) // with exps' objects
	create func(ctx context.Context, t tenant, members []member) (T, error)
	update func(ctx context.Context, companyID, id int64, ifMatch string, members []member) (T, error)
	delete func(ctx context.Context, companyID, id int64, ifMatch string) error

	encode     func(b []byte, v *T) []byte
	id         func(v *T) int64
	version    func(v *T) int64                                // nil: no ETag
	sortKey    func(v *T, sort string) (key string, null bool) // nil: sorted by id only
	expansions []expansion
	ref        func(v *T, name string) sql.NullInt64 // the id an expansion points at
}

// listRows and countRows make a resource's list and count from its statements: selectSQL
// ("SELECT <columns> FROM t WHERE company_id = $1") and countSQL ("SELECT count(*) FROM t WHERE
// company_id = $1"), to which the list's filters, cursor and order are added.
func listRows[T any, PT scanner[T]](db *sql.DB, selectSQL string) func(context.Context, int64, *listQuery) ([]T, error) {
	return func(ctx context.Context, companyID int64, lq *listQuery) ([]T, error) {
		q, args := lq.selectSQL(selectSQL, companyID)
		return queryRows[T, PT](ctx, db, lq.limit+1, q, args...)
	}
}

func countRows(db querier, countSQL string) func(context.Context, int64, *listQuery) (int64, error) {
	return func(ctx context.Context, companyID int64, lq *listQuery) (int64, error) {
		var n int64
		q, args := lq.countSQL(countSQL, companyID)
		err := db.QueryRowContext(ctx, q, args...).Scan(&n)
		return n, err
	}
}

// respBuffers holds response buffers between requests, as encoding/json pools its encoders. A buffer
// that grew beyond maxPooledBuffer is left to the collector, so a rare huge page does not stay pinned.
var respBuffers = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledBuffer = 256 << 10

// respond writes objs (one object, or a list page when lq is not nil) with the expansions exps,
// into a pooled buffer. rel holds the related objects when they came with objs; when it is nil they
// are loaded first (loadRelated).
func (res *resource[T]) respond(w http.ResponseWriter, r *http.Request, log *slog.Logger, status int,
	exps []expansion, objs []T, rel *related, lq *listQuery, next string) {
	if rel == nil {
		var err error
		if rel, err = loadRelated(r.Context(), res.st, tenantOf(r).companyID, exps, objs, res.ref); err != nil {
			writeError(w, r, log, err)
			return
		}
	}
	buf := respBuffers.Get().(*[]byte)
	b := (*buf)[:0]
	if lq == nil {
		v := &objs[0]
		if res.version != nil {
			w.Header()["Etag"] = []string{etag(res.version(v))} // Etag: the key in canonical form
		}
		b = appendExpanded(b, res, v, exps, rel)
	} else {
		b = append(b, `{"data":[`...)
		for i := range objs {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendExpanded(b, res, &objs[i], exps, rel)
		}
		b = append(b, "],"...)
		b = appendPagination(b, lq.limit, next)
		b = append(b, '}')
	}
	b = append(b, '\n')
	writeJSON(w, status, b) // the body is written out (or compressed) before this returns
	if cap(b) <= maxPooledBuffer {
		*buf = b
		respBuffers.Put(buf)
	}
}

// handleList answers GET /v1/{resource}: {"data": [...], "pagination": {...}}.
func handleList[T any](res *resource[T], log *slog.Logger) http.Handler {
	allowed := res.lists.params(true)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		q, aerr := queryParams(r, allowed...)
		var lq *listQuery
		var exps []expansion
		if aerr == nil {
			lq, aerr = res.lists.parse(q)
		}
		if aerr == nil {
			exps, aerr = parseExpand(q, res.expansions)
		}
		if aerr != nil {
			writeProblem(w, r, aerr)
			return
		}
		key, err := res.st.listCursorKey(r.Context())
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		scope := res.path + "\n" + strconv.FormatInt(t.companyID, 10) // a cursor is good for this list of this company
		if c, ok := q["cursor"]; ok {
			if aerr := lq.readCursor(c[0], key, scope); aerr != nil {
				writeProblem(w, r, aerr)
				return
			}
		}
		vs, err := res.list(r.Context(), t.companyID, lq)
		if err != nil {
			writeError(w, r, log, fmt.Errorf("list %s: %w", res.path, err))
			return
		}
		next := ""
		if len(vs) > lq.limit {
			vs = vs[:lq.limit]
			last := &vs[len(vs)-1]
			var sortKey string
			var null bool
			if !lq.sort.isID() {
				sortKey, null = res.sortKey(last, lq.sort.name)
			}
			next = lq.cursor(key, scope, res.id(last), sortKey, null)
		}
		res.respond(w, r, log, http.StatusOK, exps, vs, nil, lq, next)
	})
}

// handleCount answers GET /v1/{resource}/count: {"count": n}, for the same filters as the list.
func handleCount[T any](res *resource[T], log *slog.Logger) http.Handler {
	allowed := res.lists.params(false)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		q, aerr := queryParams(r, allowed...)
		var lq *listQuery
		if aerr == nil {
			lq, aerr = res.lists.parse(q)
		}
		if aerr == nil {
			// expand[] is accepted on every request; a count has nothing to expand.
			_, aerr = parseExpand(q, res.expansions)
		}
		if aerr != nil {
			writeProblem(w, r, aerr)
			return
		}
		n, err := res.count(r.Context(), t.companyID, lq)
		if err != nil {
			writeError(w, r, log, fmt.Errorf("count %s: %w", res.path, err))
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

// bodyRequest is objectRequest for a request with a body (POST, PATCH): the body's members too.
func bodyRequest(w http.ResponseWriter, r *http.Request, withID bool, allowed []expansion) (int64, []expansion, []member, *apiError) {
	id, exps, aerr := objectRequest(r, withID, allowed)
	if aerr != nil {
		return 0, nil, nil, aerr
	}
	members, aerr := readObject(w, r)
	return id, exps, members, aerr
}

// handleGet answers GET /v1/{resource}/{id}: the object, with its ETag; one statement fetches it
// and what it expands.
func handleGet[T any](res *resource[T], log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		id, exps, aerr := objectRequest(r, true, res.expansions)
		if aerr != nil {
			writeProblem(w, r, aerr)
			return
		}
		v, rel, err := res.get(r.Context(), t.companyID, id, exps)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		res.respond(w, r, log, http.StatusOK, exps, []T{v}, rel, nil, "")
	})
}

// handleCreate answers POST /v1/{resource}: 201, the object, its ETag and Location.
func handleCreate[T any](res *resource[T], log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		_, exps, members, aerr := bodyRequest(w, r, false, res.expansions)
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
		res.respond(w, r, log, http.StatusCreated, exps, []T{v}, nil, nil, "")
	})
}

// handleUpdate answers PATCH /v1/{resource}/{id} (a merge patch, honouring If-Match).
func handleUpdate[T any](res *resource[T], log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		id, exps, members, aerr := bodyRequest(w, r, true, res.expansions)
		if aerr != nil {
			writeProblem(w, r, aerr)
			return
		}
		v, err := res.update(r.Context(), t.companyID, id, r.Header.Get("If-Match"), members)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		res.respond(w, r, log, http.StatusOK, exps, []T{v}, nil, nil, "")
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
