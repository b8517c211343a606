package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
)

// The handlers every resource shares: list, count, retrieve, create, update and delete. What differs
// between resources is data (a resource: its path, its SQL, what its lists and expand[] take) and the
// methods of its object type (object, below). Each write is one function of the resource's file
// (createContact, ...) that takes the write's transaction; addRoutes passes it in. A request's write
// is one transaction (runWrite), which also handles the Idempotency-Key. docs/architecture.md walks
// through both paths.

// resource describes one API resource to the shared handlers.
type resource struct {
	path       string      // "/v1/contacts": the Location of what it creates, and the scope of its cursors
	table      string      // its table, where a retrieve finds the ids of what it embeds
	selectSQL  string      // "SELECT <columns> FROM t WHERE company_id = $1"; lists and retrieve add to it
	countSQL   string      // "SELECT count(*) FROM t WHERE company_id = $1"
	event      string      // its changes' event types are event + ".created" ... (events.go); "": none
	lists      *listSpec   // the sorts and filters of its list and count
	expansions []expansion // what expand[] may embed in its objects
	parent     *resource   // for a list of one object's objects (deliveries): the resource the path's {id} names
	parentCol  string      // the column of that id
	inUse      string      // SELECT whether others reference object $2 of company $1: its delete is 409 <event>_in_use
}

// object is what the shared handlers need of the objects they serve; contacts.go, business.go and
// reference.go implement it on their types.
type object[T any] interface {
	*T
	scanDest() []any                     // where a row of selectSQL's columns is scanned
	appendJSON(dst []byte) []byte        // the object as the API returns it
	key() int64                          // its id
	version() int64                      // its version, the ETag; 0 when it has none
	sortKey(sort string) (string, bool)  // its key in a sort of its lists, and whether it is NULL
	relatedID(name string) (int64, bool) // the id the expansion name points at, if not null
}

// writable objects can be created or changed through a body.
type writable[T any] interface {
	object[T]
	fields() []bodyField // what a POST or PATCH body may set, applied onto the object
}

// handleList answers GET /v1/{resource}: {"data": [...], "pagination": {...}}.
func handleList[T any, P object[T]](st *store, res *resource, log *slog.Logger) http.Handler {
	allowed := res.lists.params(true)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		parentID, aerr := listParent(r, res)
		if aerr != nil {
			writeProblem(w, r, aerr)
			return
		}
		scope := listScope(res, t.companyID, parentID)
		q, lq, exps, err := listRequest(r, st, res, allowed)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		key, err := st.listCursorKey(r.Context())
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		if c, ok := q["cursor"]; ok {
			if aerr := lq.readCursor(c[0], key, scope); aerr != nil {
				writeProblem(w, r, aerr)
				return
			}
		}
		objs, err := loadPage[T, P](r.Context(), st, res, lq, t.companyID, parentID)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		next := ""
		if len(objs) > lq.limit { // loadPage reads one row more than the page: there is a next page
			objs = objs[:lq.limit]
			last := P(&objs[lq.limit-1])
			sortKey, null := last.sortKey(lq.sort.name)
			next = lq.cursor(key, scope, last.key(), sortKey, null)
		}
		rel, err := loadRelated[T, P](r.Context(), st.read, t.companyID, exps, objs)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		writeJSON(w, r, http.StatusOK, appendPage[T, P](objs, exps, rel, lq.limit, next))
	})
}

// listParent returns the path's {id} of a list of one object's objects (a resource with a parent),
// or a 400 when it is not an id; 0 for any other list.
func listParent(r *http.Request, res *resource) (int64, *apiError) {
	if res.parent == nil {
		return 0, nil
	}
	return pathID(r)
}

// listScope is what a list's cursors are good for: this list of this company, and of this parent
// object when the list has one.
func listScope(res *resource, companyID, parentID int64) string {
	scope := res.path + "\n" + strconv.FormatInt(companyID, 10)
	if res.parent != nil {
		scope += "\n" + strconv.FormatInt(parentID, 10)
	}
	return scope
}

// loadPage reads the page lq asks for, and the row after it when there is one. A list of one
// object's objects also reads the parent, in the same round trip: errNotFound when the company has
// no such parent.
func loadPage[T any, P object[T]](ctx context.Context, st *store, res *resource, lq *listQuery, companyID, parentID int64) ([]T, error) {
	var reads []read
	found := res.parent == nil // else the parent's read says
	if res.parent != nil {
		lq.where(res.parentCol+" = %s", parentID)
		parentSQL := `SELECT FROM ` + res.parent.table + ` WHERE company_id = $1 AND id = $2`
		reads = append(reads, read{parentSQL, []any{companyID, parentID}, func(rs rows) error {
			found = rs.Next()
			return rs.Err()
		}})
	}
	sqlText, args := lq.selectSQL(res.selectSQL, companyID)
	objs := make([]T, 0, lq.limit+1) // the page and the row that says there is a next one
	err := st.read(ctx, append(reads, rowsInto[T, P](&objs, sqlText, args...))...)
	if err == nil && !found {
		err = errNotFound
	}
	return objs, err
}

// appendPage returns the body of a list answer: the page's objects with what they embed, and the
// pagination (next is "" on the last page).
func appendPage[T any, P object[T]](objs []T, exps []expansion, rel related, limit int, next string) []byte {
	// Room for a page of typical objects and what they embed: growing the buffer instead was
	// 16% of the CPU of a list page with 5 expansions (see appendTime for the measured gain).
	b := make([]byte, 0, (512+160*len(exps))*len(objs)+256)
	b = append(b, `{"data":[`...)
	for i := range objs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendExpanded(b, P(&objs[i]), exps, rel)
	}
	b = append(b, "],"...)
	b = appendPagination(b, limit, next)
	return append(b, "}\n"...)
}

// listRequest reads what a list or count request starts with: its query parameters (allowed, no
// others), the list's sort and filters, custom fields' included (customSortAndFilters), and expand[].
func listRequest(r *http.Request, st *store, res *resource, allowed []string) (url.Values, *listQuery, []expansion, error) {
	q, aerr := queryParams(r, allowed...)
	if aerr != nil {
		return nil, nil, nil, aerr
	}
	lq, exps, err := listFilters(r, st, res, q)
	return q, lq, exps, err
}

// listFilters reads the sort, limit, filters and expand[] of q, the query parameters of a list,
// count or summary request of res: listRequest's work after queryParams.
func listFilters(r *http.Request, st *store, res *resource, q url.Values) (*listQuery, []expansion, error) {
	if aerr := associatedScopeError(tenantOf(r), q); aerr != nil {
		return nil, nil, aerr
	}
	lq, aerr := res.lists.parse(q)
	if aerr != nil {
		return nil, nil, aerr
	}
	exps, aerr := parseExpand(r, q, res.expansions)
	if aerr != nil {
		return nil, nil, aerr
	}
	return lq, exps, customSortAndFilters(r.Context(), st, tenantOf(r).companyID, res, lq)
}

// handleCount answers GET /v1/{resource}/count: {"count": n}, for the same filters as the list.
// Without filters it adds up the company's counts, in constant time; with filters it counts rows.
func handleCount(st *store, res *resource, log *slog.Logger) http.Handler {
	allowed := res.lists.params(false)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		_, lq, _, err := listRequest(r, st, res, allowed) // expand[] is accepted on every request; a count has nothing to expand
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		var n int64
		sqlText, args := lq.countSQL(res.countSQL, t.companyID)
		switch {
		case len(lq.conds) == 0: // the counts the database keeps (schema/0008_counts.sql)
			sqlText = `SELECT coalesce(sum(n), 0) FROM object_counts WHERE company_id = $1 AND tbl = $2`
			args = []any{t.companyID, res.table}
		case len(lq.conds) == 1 && lq.countValues != "": // a custom field's values (addCustomFilter)
			sqlText = lq.countValues
		}
		// Through st.read, as every request's statement, within the company's share of the pool.
		if err := st.read(r.Context(), eachRow[fieldID](sqlText, args, func(c *fieldID) { n = int64(*c) })); err != nil {
			writeError(w, r, log, err)
			return
		}
		writeJSON(w, r, http.StatusOK, appendCount(nil, n))
	})
}

// objectRequest reads what every request for one object starts with: the path id (when the route
// has one) and expand[].
func objectRequest(r *http.Request, res *resource) (id int64, exps []expansion, aerr *apiError) {
	if r.PathValue("id") != "" { // the route has an {id}
		if id, aerr = pathID(r); aerr != nil {
			return 0, nil, aerr
		}
	}
	q, aerr := queryParams(r, "expand[]")
	if aerr != nil {
		return 0, nil, aerr
	}
	exps, aerr = parseExpand(r, q, res.expansions)
	return id, exps, aerr
}

// write is a write request: what startWrite read of it.
type write struct {
	id      int64       // the path id, when the route has one
	exps    []expansion // expand[]
	members []member    // the body's, of a POST or PATCH
	ik      *idempotencyKey
}

// startWrite reads what every write request starts with: the path id and expand[] (objectRequest),
// the body's members (POST, PATCH) and the Idempotency-Key. It applies a POST's body to create when
// given (applyCreate: a 422 then costs no database work). It returns nil when it has answered the
// request itself.
func startWrite(w http.ResponseWriter, r *http.Request, res *resource, log *slog.Logger, create []bodyField) *write {
	var wr write
	var aerr *apiError
	if wr.id, wr.exps, aerr = objectRequest(r, res); aerr == nil && r.Method != http.MethodDelete {
		wr.members, aerr = readObject(w, r)
	}
	if aerr == nil {
		wr.ik, aerr = readIdempotencyKey(r, wr.members)
	}
	if aerr != nil {
		writeProblem(w, r, aerr)
		return nil
	}
	if create != nil {
		if errs := applyCreate(wr.members, create); errs != nil {
			writeError(w, r, log, fieldErrors(errs))
			return nil
		}
	}
	return &wr
}

// handleGet answers GET /v1/{resource}/{id}: the object, with its ETag.
func handleGet[T any, P object[T]](st *store, res *resource, log *slog.Logger) http.Handler {
	c := newCoalescer[T, P](res) // concurrent retrieves of a company share round trips (coalesce.go)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		id, exps, aerr := objectRequest(r, res)
		if aerr != nil {
			writeProblem(w, r, aerr)
			return
		}
		v, rel, err := c.get(r.Context(), st.read, t.companyID, id, exps)
		if errors.Is(err, errNotFound) {
			err = notFound(r.Context(), st.read, res, t.companyID, id)
		}
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		if version := P(&v).version(); version != 0 {
			w.Header().Set("ETag", etag(version))
		}
		writeJSON(w, r, http.StatusOK, append(appendExpanded(nil, P(&v), exps, rel), '\n'))
	})
}

// handleCreate answers POST /v1/{resource}: 201, the object, its ETag and Location. create is the
// resource's create (createContact, ...), run once in the write's transaction.
func handleCreate[T any, P writable[T]](st *store, res *resource, create func(context.Context, *tx, tenant, T) (T, error), log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		var body T
		wr := startWrite(w, r, res, log, P(&body).fields())
		if wr == nil {
			return
		}
		runWrite(w, r, st, log, wr, func(tx *tx) (answer, error) {
			v, err := create(r.Context(), tx, t, body)
			if err != nil {
				return answer{}, err
			}
			a, err := objectAnswer[T, P](r.Context(), tx, t, http.StatusCreated, v, wr.exps)
			a.location = res.path + "/" + strconv.FormatInt(P(&v).key(), 10)
			return a, err
		})
	})
}

// handleUpdate answers PATCH /v1/{resource}/{id}: 200, the object and its ETag. update is the
// resource's update (updateContact, ...), given the body and If-Match as a patch.
func handleUpdate[T any, P writable[T]](st *store, res *resource, update func(context.Context, *tx, tenant, int64, patch) (T, error), log *slog.Logger) http.Handler {
	return handleWrite(st, res, log, nil, func(r *http.Request, tx *tx, t tenant, wr *write) (answer, error) {
		v, err := update(r.Context(), tx, t, wr.id, patch{members: wr.members, versions: ifMatch(r)})
		if err != nil {
			return answer{}, err
		}
		return objectAnswer[T, P](r.Context(), tx, t, http.StatusOK, v, wr.exps)
	})
}

// handleDelete answers DELETE /v1/{resource}/{id}: 204, honouring If-Match (deleteObject). expand[]
// is checked and otherwise ignored: there is no body to expand.
func handleDelete[T any, P writable[T]](st *store, res *resource, log *slog.Logger) http.Handler {
	return handleWrite(st, res, log, nil, func(r *http.Request, tx *tx, t tenant, wr *write) (answer, error) {
		return answer{status: http.StatusNoContent}, deleteObject[T, P](r.Context(), tx, res, t.companyID, wr.id, ifMatch(r))
	})
}

// handleWrite answers a write request of res, read by startWrite (create as there), with the answer
// of do, run once in one transaction (runWrite).
func handleWrite(st *store, res *resource, log *slog.Logger, create []bodyField, do func(*http.Request, *tx, tenant, *write) (answer, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if wr := startWrite(w, r, res, log, create); wr != nil {
			runWrite(w, r, st, log, wr, func(tx *tx) (answer, error) { return do(r, tx, tenantOf(r), wr) })
		}
	})
}

// runWrite answers the write request wr with the answer of do, its work, run once in one
// transaction (store.writeOnce, which also handles its Idempotency-Key). The 404 and 412 that the
// database found are answers too, kept for a key like any other; any other error is answered as
// it is, and the transaction rolled back.
func runWrite(w http.ResponseWriter, r *http.Request, st *store, log *slog.Logger, wr *write, do func(*tx) (answer, error)) {
	a, replayed, err := st.writeOnce(r.Context(), tenantOf(r).companyID, wr.ik, func(tx *tx) (answer, error) {
		a, err := do(tx)
		if errors.Is(err, errNotFound) || errors.Is(err, errPreconditionFailed) {
			ae := clientError(err)
			return answer{status: ae.Status, body: problemJSON(r, ae)}, nil
		}
		return a, err
	})
	if err != nil {
		writeError(w, r, log, err)
		return
	}
	a.write(w, r, replayed)
}

// patch is what a PATCH asks of an object: a merge patch of its fields, and the versions its
// If-Match admits (nil: any).
type patch struct {
	members  []member
	versions []int64
}

// Every change of an object (PATCH, DELETE) starts by locking its row (lockObject) and ends with
// the transaction: no other change comes between reading the object and writing it, so If-Match is
// checked once, against the row as it stays, and nothing is retried. A version check in the UPDATE
// would leave the losers of a race to start again; with the row lock they wait their turn instead.

// touched is the SET clause of every change of a row with an updated_at: it moves on to now, and
// by a millisecond at least, so that the row's place in a list sorted by updatedAt moves too.
const touched = `updated_at = greatest(date_trunc('milliseconds', now()), one_ms_after(updated_at))`

// bumpVersion is touched for a row with a version, the ETag, which moves on by one.
const bumpVersion = `version = version + 1, ` + touched

// lockObject reads the company's object id of res in tx, locking its row for the rest of the write,
// and applies p onto a copy, v (a delete's p has no members). It returns notFound's error when there
// is none, errPreconditionFailed when p's versions (If-Match) do not admit its version, and the
// fieldErrors of p's members. changed is false when p changes nothing: then an update writes
// nothing, and updatedAt and the ETag stay.
func lockObject[T any, P writable[T]](ctx context.Context, tx *tx, res *resource, companyID, id int64, p patch) (old, v T, changed bool, err error) {
	var objs []T
	if err = tx.read(ctx, rowsInto[T, P](&objs, res.selectSQL+` AND id = $2 FOR UPDATE`, companyID, id)); err != nil {
		return old, v, false, err
	}
	switch {
	case len(objs) == 0:
		return old, v, false, notFound(ctx, tx.read, res, companyID, id)
	case !admits(p.versions, P(&objs[0]).version()):
		return old, v, false, errPreconditionFailed
	}
	old, v = objs[0], objs[0]
	if errs := applyMembers(p.members, P(&v).fields(), readOnlyFields); errs != nil {
		return old, v, false, fieldErrors(errs)
	}
	return old, v, !bytes.Equal(P(&v).appendJSON(nil), P(&old).appendJSON(nil)), nil
}

// deleteObject deletes the company's object id of res in tx, honouring If-Match (versions): the
// delete of a DELETE and of a batch's item. 409 <event>_in_use when other objects reference it.
// Round trips: the lock (with BEGIN), the check of references when the resource has them; the
// DELETE and the event go with COMMIT.
func deleteObject[T any, P writable[T]](ctx context.Context, tx *tx, res *resource, companyID, id int64, versions []int64) error {
	v, _, _, err := lockObject[T, P](ctx, tx, res, companyID, id, patch{versions: versions})
	if err != nil {
		return err
	}
	if res.inUse != "" { // the row lock keeps new references out until COMMIT
		used := false
		if err := tx.queryRow(ctx, res.inUse, []any{companyID, id}, &used); err != nil {
			return err
		}
		if used {
			return &apiError{Status: http.StatusConflict, Code: res.event + "_in_use",
				Detail: "Other objects still reference this " + res.event + "; point them elsewhere or delete them first."}
		}
	}
	return deleteLocked[T, P](ctx, tx, res, companyID, []T{v}, nil)
}

// deleteLocked deletes objs, objects of res whose rows the write has locked, with their
// associations (removeAssociations), and when the resource has events, records an <event>.deleted of
// each with the object as it was and previous (nil: none): the one way every write (DELETE,
// batch/delete, merge) deletes objects. Round trips: the associations' DELETE, for a kind that has
// them; the objects' DELETE and the events go with the next.
func deleteLocked[T any, P object[T]](ctx context.Context, tx *tx, res *resource, companyID int64, objs []T, previous []byte) error {
	ids := make([]int64, len(objs))
	var evs []eventRow
	for i := range objs {
		ids[i] = P(&objs[i]).key()
		if res.event != "" {
			evs = append(evs, eventRow{res.event + ".deleted", P(&objs[i]).appendJSON(nil), previous})
		}
	}
	if k := kindOfResource(res); k != nil {
		if _, err := removeAssociations(ctx, tx, companyID, k, ids); err != nil {
			return err
		}
	}
	tx.queue(`DELETE FROM `+res.table+` WHERE company_id = $1 AND id = ANY($2)`, companyID, ids)
	recordEvents(tx, companyID, evs)
	return nil
}

// objectAnswer is the answer of a write that returns v: v with its expansions, read in the write's
// transaction, and its ETag.
func objectAnswer[T any, P object[T]](ctx context.Context, tx *tx, t tenant, status int, v T, exps []expansion) (answer, error) {
	rel, err := loadRelated[T, P](ctx, tx.read, t.companyID, exps, []T{v})
	if err != nil {
		return answer{}, err
	}
	a := answer{status: status, body: append(appendExpanded(nil, P(&v), exps, rel), '\n')}
	if version := P(&v).version(); version != 0 {
		a.etag = etag(version)
	}
	return a, nil
}

// notFound is the error of the company's object id of res that is not there: errNotFound, or if it
// was merged, one that is errNotFound too but answers 404 "merged" naming mergedInto, the id to
// follow. Round trips: one, for contacts and organizations.
func notFound(ctx context.Context, rd reader, res *resource, companyID, id int64) error {
	if res != contacts && res != organizations {
		return errNotFound
	}
	var into []fieldID // an id read from a row
	q := `SELECT merged_into FROM merged_objects WHERE company_id = $1 AND tbl = $2 AND id = $3`
	if err := rd(ctx, rowsInto[fieldID](&into, q, companyID, res.table, id)); err != nil || into == nil {
		return cmp.Or(err, errNotFound)
	}
	var v any = (*int64)(&into[0])
	if res == contacts {
		v = (*textID)(&into[0])
	}
	return fmt.Errorf("%w: %w", errNotFound, &apiError{Status: http.StatusNotFound, Code: "merged",
		Detail: "This object was merged into another; mergedInto is its id.", More: appendObject(nil, "mergedInto", v)})
}
