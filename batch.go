package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// Batch writes and upsert (API.md section 15): 1 to 100 items in one transaction, each through its
// single write's function (createContact, deleteObject, ...). An item that fails a check has written
// nothing and leaves the transaction usable, so every failure is reported; one that failed after it
// wrote, or whose statement PostgreSQL refused, is taken out and the batch runs again without it
// (runBatch says why there is no SAVEPOINT per item). Upsert matches under transaction-scoped advisory locks on (company,
// resource or custom field, normalised value), taken in one statement in sorted order: concurrent
// upserts of one new value, on any server, create one object.

const (
	maxBatchItems     = 100 // the most items of a batch
	maxBatchAborts    = 3   // how often a batch runs again without items it took out (runBatch)
	batchesPerCompany = 2   // how many of a company's batches run at once: more wait their turn
	maxCandidates     = 10  // the ids an ambiguous_match names (an error body's bound, problem.go)
)

// batchWrites are a resource's single writes, which its batches run, and its upsert's default match.
type batchWrites[T any] struct {
	create func(context.Context, *tx, tenant, T) (T, error)
	update func(context.Context, *tx, tenant, int64, patch) (T, error)
	match  upsertMatch
}

// upsertMatch is how an upsert compares values of field ("": no upsert): given, the SQL of a value v
// as it compares; objects, the SQL of the company's objects' (id, val), which an index serves.
type upsertMatch struct{ field, given, objects string }

var (
	contactBatch = batchWrites[contact]{create: createContact, update: updateContact, match: upsertMatch{"email", "lower(btrim(v))",
		`SELECT id, lower(email) AS val FROM contacts WHERE company_id = $1`}} // a stored e-mail has no spaces around it (checkEmail)
	businessBatch     = batchWrites[business]{create: createBusiness, update: updateBusiness}
	activityBatch     = batchWrites[activity]{create: createActivity, update: updateActivity}
	organizationBatch = batchWrites[organization]{create: createOrganization, update: updateOrganization, match: upsertMatch{"name",
		"lower(btrim(v))", `SELECT id, lower(btrim(name)) AS val FROM organizations WHERE company_id = $1`}}
)

// batchItem is one item of a batch: what it asks, and how it ended.
type batchItem[T any] struct {
	at         string          // "items[3]", "ids[3]": what its errors are named after
	idField    string          // "id" where the item names its object's id in a member
	members    []member        // its fields: a create's body, an update's merge patch (upsert: either)
	id         int64           // update, delete: its object; upsert: the object it matched, or 0
	versions   []int64         // update: its ifMatch (nil: any)
	value      json.RawMessage // upsert: the value it matches on, as given
	key        string          // upsert: that value as a string (a custom field's: as stored)
	pre        error           // its failure known before the transaction: in its body, or an aborting statement
	err        error           // its failure in this run
	candidates [][]byte        // upsert: the ids of the objects an ambiguous match found
	status     string          // created, updated, unchanged, deleted
	obj        T
}

// errBatchFailed rolls back an atomic batch of which some item failed, whose answer is then sent
// without being kept for its Idempotency-Key: a corrected batch may be sent with the same one.
var errBatchFailed = errors.New("batch failed")

// errItemAborted wraps the failure of an item that runBatch took out of the batch: it failed after it
// wrote (errPartWritten), or its statement aborted the transaction.
var errItemAborted = errors.New("aborted by batch item")

// handleBatch answers POST /v1/{resource}/batch/{op}: 200 {"data": [...]} (207 when atomic is false
// and some item failed), else 422 or 412 with an errors entry per failing item, nothing changed.
func handleBatch[T any, P writable[T]](st *store, res *resource, bw batchWrites[T], log *slog.Logger) http.Handler {
	// Batches run a few at a time, a company's fewer still, so that an import leaves the pool's
	// connections and the database's CPU to other writes: they wait here, holding nothing.
	slots := make(chan struct{}, max(1, st.db.Stats().MaxOpenConnections/4))
	var companySlots [64]chan struct{} // by company id, modulo 64: two companies may share
	for i := range companySlots {
		companySlots[i] = make(chan struct{}, batchesPerCompany)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := r.PathValue("op")
		if op == "upsert" && bw.match.field == "" { // op is one of the four routesOf routes
			writeProblem(w, r, errNoRoute(r))
			return
		}
		t := tenantOf(r)
		wr := startWrite(w, r, res, log, nil)
		if wr == nil {
			return
		}
		items, atomic, matchOn, errs := readBatch[T, P](op, wr.members, bw.match.field)
		if errs != nil {
			writeError(w, r, log, errs)
			return
		}
		release, err := takeTurn(r.Context(), companySlots[t.companyID%int64(len(companySlots))], slots)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		defer release()
		a, replayed, err := writeBatch[T, P](r, st, res, bw, wr, op, matchOn, items, atomic)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		a.write(w, r, replayed)
	})
}

// takeTurn waits for a place in each of slots, in order, and returns what frees them; ctx's error
// when it ends first.
func takeTurn(ctx context.Context, slots ...chan struct{}) (func(), error) {
	var taken []chan struct{}
	release := func() {
		for _, slot := range taken {
			<-slot
		}
	}
	for _, slot := range slots {
		select {
		case slot <- struct{}{}:
			taken = append(taken, slot)
		case <-ctx.Done():
			release()
			return nil, ctx.Err()
		}
	}
	return release, nil
}

// writeBatch runs the items of the batch wr in one transaction (store.writeOnce) and returns its
// answer, and whether it is the one kept for its Idempotency-Key. When runBatch takes items out, the
// batch runs again without them, up to maxBatchAborts times.
func writeBatch[T any, P writable[T]](r *http.Request, st *store, res *resource, bw batchWrites[T], wr *write, op, matchOn string,
	items []*batchItem[T], atomic bool) (answer, bool, error) {
	t := tenantOf(r)
	for aborts := 0; ; aborts++ {
		var ans answer // also an atomic failure's, which errBatchFailed rolls back
		a, replayed, err := st.writeOnce(r.Context(), t.companyID, wr.ik, func(tx *tx) (answer, error) {
			if err := runBatch[T, P](r.Context(), tx, res, bw, t, op, matchOn, items); err != nil {
				return answer{}, err
			}
			var err error
			ans, err = batchAnswer[T, P](r, tx, t, items, atomic, wr.exps)
			return ans, err
		})
		switch {
		case errors.Is(err, errItemAborted) && aborts < maxBatchAborts && clientError(err) != nil:
			continue // without the items runBatch took out: it made each one's failure its pre
		case errors.Is(err, errBatchFailed):
			return ans, false, nil
		}
		return a, replayed, err
	}
}

// readBatch reads a batch's body: {"items": [...]} (delete: {"ids": [...]}), "atomic", and an upsert's
// "matchOn", returned (matchOn if none). The whole body's failure is fieldErrors; an item's, its pre.
func readBatch[T any, P writable[T]](op string, members []member, matchOn string) (items []*batchItem[T], atomic bool, _ string, err error) {
	atomic = true
	list := "items"
	if op == "delete" {
		list = "ids"
	}
	fields := []bodyField{{list, func(raw json.RawMessage) string {
		var raws []json.RawMessage
		if json.Unmarshal(raw, &raws) != nil || len(raws) == 0 || len(raws) > maxBatchItems {
			return fmt.Sprintf("must be an array of 1 to %d items", maxBatchItems)
		}
		for i, raw := range raws {
			items = append(items, readItem[T, P](op, list+"["+strconv.Itoa(i)+"]", raw))
		}
		return ""
	}, false}, {"atomic", boolean(&atomic), false}}
	if op == "upsert" {
		fields = append(fields, bodyField{"matchOn", func(raw json.RawMessage) string {
			s, _ := jsonString(raw, 64)
			if s == matchOn || strings.HasPrefix(s, "custom.") {
				matchOn = s
				return ""
			}
			return fmt.Sprintf("must be %q or custom.<key> of a unique custom field", matchOn)
		}, false})
	}
	errs := applyMembers(members, fields, nil)
	if !hasMember(members, list) {
		errs = append(errs, fieldError{Field: list, Message: "is required"})
	}
	if errs != nil {
		return nil, atomic, matchOn, fieldErrors(errs)
	}
	seen := map[int64]int{}
	for i, it := range items { // two items for one object: which one wins would be a guess
		it.value = memberRaw(it.members, matchOn)
		if key, ok := strings.CutPrefix(matchOn, "custom."); ok {
			it.value = memberRaw(objectMembers(memberRaw(it.members, "custom")), key)
		}
		it.key, _ = jsonString(it.value, 255)
		first, dup := seen[it.id]
		switch {
		case it.pre != nil || op == "create":
		case op == "upsert" && (it.value == nil || isNull(it.value)):
			it.pre = fieldErrors{{Field: matchOn, Message: "is required to match on"}}
		case op == "upsert" && !strings.HasPrefix(matchOn, "custom.") && strings.TrimSpace(it.key) == "":
			it.pre = fieldErrors{{Field: matchOn, Message: "must be a non-empty string to match on"}}
		case op != "upsert" && dup:
			it.pre = duplicateError(it.idField, first) // update: items[i].id; delete: ids[i] itself
		default:
			seen[it.id] = i
		}
	}
	return items, atomic, matchOn, nil
}

// readItem reads one item: a create's or upsert's body, an update's {"id", "ifMatch", ...patch}, a delete's id.
func readItem[T any, P writable[T]](op, at string, raw json.RawMessage) *batchItem[T] {
	members, dup, ok := jsonMembers(raw)
	it := &batchItem[T]{at: at, members: members}
	switch {
	case op == "delete":
		if it.id = readItemID(raw); it.id == 0 {
			it.pre = fieldErrors{{Message: "must be an id"}}
		}
	case dup != "":
		it.pre = fieldErrors{{Field: dup, Message: "is given more than once"}}
	case !ok:
		it.pre = fieldErrors{{Message: "must be a JSON object"}}
	case op == "create":
		var v T
		if errs := applyCreate(members, P(&v).fields()); errs != nil { // a 422 costs no database work
			it.pre = fieldErrors(errs)
		}
	case op == "update":
		it.idField, it.members = "id", nil // the members but id and ifMatch
		var errs fieldErrors
		for _, m := range members {
			switch m.name {
			case "id":
				if it.id = readItemID(m.raw); it.id == 0 {
					errs = append(errs, fieldError{Field: "id", Message: "must be an id"})
				}
			case "ifMatch":
				s, msg := jsonString(m.raw, 255)
				it.versions = ifMatch(&http.Request{Header: http.Header{"If-Match": {s}}})
				if msg != "" || s == "" {
					errs = append(errs, fieldError{Field: "ifMatch", Message: "must be an ETag, as If-Match takes it"})
				}
			default:
				it.members = append(it.members, m)
			}
		}
		switch {
		case errs != nil:
			it.pre = errs
		case it.id == 0:
			it.pre = fieldErrors{{Field: "id", Message: "is required"}}
		}
	}
	return it
}

// readItemID reads an id given as a string of digits or a JSON integer; 0 when it is not one.
func readItemID(raw json.RawMessage) int64 {
	s, _ := jsonString(raw, 20) // "" when raw is a JSON number: then its text
	if id, ok := parseID(cmp.Or(s, string(raw))); ok {
		return id
	}
	return 0
}

// upsertMatchOf is the match on matchOn: m, the built-in field's, or a unique custom field's, compared
// as its unique index has them (saveCustom); each item's key becomes its value as stored, or its pre
// what is wrong with it.
func upsertMatchOf[T any](ctx context.Context, btx *tx, res *resource, m upsertMatch, companyID int64, matchOn string, items []*batchItem[T]) (upsertMatch, error) {
	key, custom := strings.CutPrefix(matchOn, "custom.")
	if !custom {
		return m, nil
	}
	fields, err := loadCustomFields(ctx, btx.read, companyID, res.lists.custom, []string{key})
	i := slices.IndexFunc(fields, func(f customField) bool { return f.Key == key && f.Unique })
	if err != nil || i < 0 {
		return upsertMatch{}, cmp.Or(err, error(fieldErrors{{Field: "matchOn", Message: "no such unique custom field"}}))
	}
	for _, it := range items { // an item without a value failed in readBatch: null has no row
		if it.pre != nil {
			continue
		}
		_, rows, msg := fields[i].checkValue(it.value)
		if msg != "" {
			it.pre = fieldErrors{{Field: matchOn, Message: msg}}
			continue
		}
		it.key = rows[0].value().String
	}
	mode := uniqueModes[fields[i].Type]
	forms := uniqueForms[mode] // as every unique value compares (sameUnique)
	return upsertMatch{matchOn, fmt.Sprintf(forms.given, "v"), fmt.Sprintf(`SELECT object_id AS id, %s AS val FROM custom_values
		WHERE company_id = $1 AND field_id = %d AND unique_mode = %d`, forms.stored, fields[i].ID, mode)}, nil
}

// matchRow is an upsert's item: the first item that runs with its value (from 1), and the objects
// that hold it (id: the first, or 0).
type matchRow struct {
	first, id int64
	ids       []int64
}

func (m *matchRow) scanDest() []any { return []any{&m.first, &m.id, &m.ids} }

// duplicateError is the failure of an item for the same object or match value as item first.
func duplicateError(field string, first int) error {
	return &apiError{Status: http.StatusUnprocessableEntity, Code: "duplicate_in_request",
		Detail: fmt.Sprintf("Item %d of the batch is for the same object.", first),
		Errors: []fieldError{{Field: field, Message: fmt.Sprintf("is the same as in item %d", first)}}}
}

// runBatch runs the items in btx, each through the resource's single write, and records how each
// ended; errItemAborted when it took an item out, to run again without it; another error as it is.
//
// This is where the write contract (docs/architecture.md) holds a batch's items apart. A write
// function fails before its first statement that changes data, so an item that failed leaves
// nothing, and the others commit. Where the database refuses a write after it was sent (a unique
// custom value a concurrent write took: errPartWritten; a statement that aborted the transaction),
// the whole transaction is undone and the batch runs again without that item, whose failure is kept
// as its pre. Not a SAVEPOINT per item: the items' statements interleave in each round trip
// (pipeline), and a savepoint cannot undo one item's among them.
func runBatch[T any, P writable[T]](ctx context.Context, btx *tx, res *resource, bw batchWrites[T], t tenant, op, matchOn string, items []*batchItem[T]) error {
	m, err := upsertMatchOf(ctx, btx, res, bw.match, t.companyID, matchOn, items)
	if err != nil {
		return err
	}
	for _, it := range items {
		it.err = it.pre
		it.candidates = nil
		it.status = ""
	}
	byID, err := lockItems[T, P](ctx, btx, res, t.companyID, op, m, items)
	if err != nil {
		return err
	}
	blamed := runItems[T, P](ctx, btx, res, bw, t, op, items, byID)
	var undo error
	for i, it := range items {
		aborted := i == blamed && btx.c.PgConn().TxStatus() == 'E'
		if it.pre == nil && (aborted || errors.Is(it.err, errPartWritten)) {
			it.pre = it.err
			undo = cmp.Or(undo, fmt.Errorf("%w %d: %w", errItemAborted, i, it.err))
		}
	}
	if undo != nil {
		return undo
	}
	for _, it := range items { // a failure before the transaction (pre) is a client's
		if it.err != nil && clientError(it.err) == nil {
			return it.err
		}
	}
	return nil
}

// lockItems locks the objects the items of a batch of op are for, in id order, so that two batches
// over the same objects wait for each other instead of deadlocking, and returns them by id. An
// upsert's items are matched first (m): each item's id becomes its match's, or its err why none.
// This round trip also sends BEGIN and an Idempotency-Key's look-up, whose errors are then the
// batch's and not its first item's.
func lockItems[T any, P writable[T]](ctx context.Context, btx *tx, res *resource, companyID int64, op string, m upsertMatch, items []*batchItem[T]) (map[int64]*T, error) {
	var ids []int64
	var keys []string
	var runs []int // the items that run, in order
	for i, it := range items {
		if it.pre == nil {
			keys = append(keys, it.key)
			runs = append(runs, i)
		}
		if it.pre == nil && it.id != 0 { // a create's is 0
			ids = append(ids, it.id)
		}
	}
	var olds []T
	var reads []read
	// None for a create: for a company the statistics know as small, as a new one importing is,
	// PostgreSQL plans company_id = $1 AND id = ANY($2) as a walk of all the company's rows with
	// the ids as a filter, so each batch of an import read every row the import wrote before it.
	if len(ids) > 0 {
		reads = append(reads, rowsInto[T, P](&olds, res.selectSQL+` AND id = ANY($2) ORDER BY id FOR UPDATE`, companyID, ids))
	}
	var matches []matchRow // upsert: one for each item that runs
	if op == "upsert" {
		reads = upsertReads[T, P](btx, res, m, companyID, keys, &olds, &matches)
	}
	if err := btx.read(ctx, reads...); err != nil {
		return nil, err
	}
	byID := map[int64]*T{}
	for i := range olds {
		byID[P(&olds[i]).key()] = &olds[i]
	}
	for j, mr := range matches {
		matchItem[T, P](items[runs[j]], m, mr, j, runs, byID)
	}
	return byID, nil
}

// upsertReads queues the locks of an upsert's match values keys, and returns the reads that lock the
// objects that hold them (into olds) and match each item (into matches). Values compare as m.given
// has them in every statement: the locks' keys (each taken in the order of its value, named after
// m.objects), the items' and the objects'.
func upsertReads[T any, P writable[T]](btx *tx, res *resource, m upsertMatch, companyID int64, keys []string, olds *[]T, matches *[]matchRow) []read {
	btx.queue(`SELECT pg_advisory_xact_lock(hashtextextended('upsert ' || $1::bigint || ' ' || $3 || ' ' || k, 0))
		FROM (SELECT DISTINCT `+m.given+` AS k FROM unnest($2::text[]) AS v ORDER BY 1) AS keys, `+onCompanysWorker, companyID, keys, m.objects)
	return []read{
		rowsInto[T, P](olds, res.selectSQL+` AND id IN (SELECT id FROM (`+m.objects+`) AS m
			WHERE val IN (SELECT `+m.given+` FROM unnest($2::text[]) AS v)) ORDER BY id FOR UPDATE`, companyID, keys),
		rowsInto[matchRow](matches, `SELECT min(i) OVER (PARTITION BY `+m.given+`), coalesce(min(m.id), 0),
			array_agg(m.id ORDER BY m.id) FILTER (WHERE m.id IS NOT NULL) FROM unnest($2::text[]) WITH ORDINALITY AS u (v, i)
			LEFT JOIN (`+m.objects+`) AS m ON m.val = `+m.given+` GROUP BY i, v ORDER BY i`, companyID, keys),
	}
}

// matchItem sets it, the item of run j (runs: the items' indexes by run), to the object of its match
// mr, or its err: its value is an earlier item's (duplicate_in_request), or more objects hold it
// (ambiguous_match, with the first maxCandidates of them as its candidates, of byID).
func matchItem[T any, P writable[T]](it *batchItem[T], m upsertMatch, mr matchRow, j int, runs []int, byID map[int64]*T) {
	switch {
	case mr.first != int64(j+1):
		it.err = duplicateError(m.field, runs[mr.first-1])
	case len(mr.ids) > 1:
		for _, id := range mr.ids[:min(len(mr.ids), maxCandidates)] {
			if o, ok := byID[id]; ok { // the id as the object has it
				it.candidates = append(it.candidates, objectMembers(P(o).appendJSON(nil))[0].raw)
			}
		}
		detail := fmt.Sprintf("%d objects hold this %s; candidates lists them.", len(mr.ids), m.field)
		if len(mr.ids) > maxCandidates {
			detail = fmt.Sprintf("%d objects hold this %s; candidates lists the first %d.", len(mr.ids), m.field, maxCandidates)
		}
		it.err = &apiError{Status: http.StatusConflict, Code: "ambiguous_match", Detail: detail,
			Errors: []fieldError{{Field: m.field, Message: "matches more than one object"}}}
	default:
		it.id = mr.id
	}
}

// runItems runs each item that has not failed through its write (runItem), in a goroutine of its
// own, on a tx of its own that shares btx's connection: the items' statements go out together, one
// round trip for each step of the writes (pipeline), a read they send alike once. What the items
// that succeeded queued last (DELETEs) goes out with btx's next round trip, COMMIT, and their events
// are btx's. It returns the item whose statement failed a round trip first.
func runItems[T any, P writable[T]](ctx context.Context, btx *tx, res *resource, bw batchWrites[T], t tenant, op string, items []*batchItem[T], byID map[int64]*T) int {
	p := &pipeline{c: btx.c, running: len(items), waiting: map[*tx]chan<- error{}, pending: map[*tx][]*pgx.QueuedQuery{}}
	for range items {
		p.txs = append(p.txs, &tx{c: btx.c, pipe: p})
	}
	var wg sync.WaitGroup
	for i, it := range items {
		if it.err != nil {
			p.stopped(context.Background())
			continue
		}
		wg.Go(func() {
			defer p.stopped(context.Background())
			defer func() {
				if v := recover(); v != nil {
					it.err = fmt.Errorf("batch item %d: panic: %v", i, v)
				}
			}()
			it.err = runItem[T, P](ctx, p.txs[i], res, bw, t, op, it, byID[it.id])
		})
	}
	wg.Wait()
	var events []eventRow
	for i, itx := range p.txs {
		if items[i].err == nil {
			btx.queued.QueuedQueries = append(btx.queued.QueuedQueries, itx.queued.QueuedQueries...)
			events = append(events, itx.events...)
		}
	}
	recordEvents(btx, t.companyID, events)
	return p.blamed
}

// runItem runs one item through the resource's single write in tx, and sets its status and object;
// old is the object it updates, as locked.
func runItem[T any, P writable[T]](ctx context.Context, tx *tx, res *resource, bw batchWrites[T], t tenant, op string, it *batchItem[T], old *T) error {
	var err error
	switch {
	case op == "delete":
		err, it.status = deleteObject[T, P](ctx, tx, res, t.companyID, it.id, nil), "deleted"
	case op == "create" || op == "upsert" && it.id == 0:
		var v T
		if errs := applyCreate(it.members, P(&v).fields()); errs != nil {
			return fieldErrors(errs)
		}
		it.obj, err = bw.create(ctx, tx, t, v)
		it.status = "created"
	default:
		it.obj, err = bw.update(ctx, tx, t, it.id, patch{members: it.members, versions: it.versions})
		it.status = "updated"
		if old != nil && string(P(old).appendJSON(nil)) == string(P(&it.obj).appendJSON(nil)) {
			it.status = "unchanged" // nothing written: no updatedAt, no event
		}
	}
	return err
}

// batchAnswer is the answer of a batch whose items ran: 200 with every item's status and object (its
// expansions loaded for all at once), 207 when some failed; an atomic one batchFailure's.
func batchAnswer[T any, P writable[T]](r *http.Request, tx *tx, t tenant, items []*batchItem[T], atomic bool, exps []expansion) (answer, error) {
	var objs []T
	failed := 0
	for _, it := range items {
		switch {
		case it.err != nil:
			failed++
		case it.status != "deleted":
			objs = append(objs, it.obj)
		}
	}
	if atomic && failed > 0 {
		return batchFailure(r, items, failed), errBatchFailed
	}
	rel, err := loadRelated[T, P](r.Context(), tx.read, t.companyID, exps, objs)
	if err != nil {
		return answer{}, err
	}
	a := answer{status: http.StatusOK, body: []byte(`{"data":[`)}
	if failed > 0 {
		a.status = http.StatusMultiStatus
	}
	spent := 0 // bytes of the failed items' problems
	for i, it := range items {
		a.body = strconv.AppendInt(append(a.body, `{"index":`...), int64(i), 10)
		switch {
		case it.err != nil:
			p := encodeProblem(r, it.problem(itemEntries(spent)))
			spent += len(p)
			a.body = append(append(a.body, `,"status":"error","error":`...), p[:len(p)-1]...)
			a.body = appendCandidates(a.body, it.candidates)
		case it.status == "deleted":
			a.body = append(a.body, `,"status":"deleted"`...)
		default:
			a.body = append(appendString(append(a.body, `,"status":`...), it.status), `,"object":`...)
			a.body = appendExpanded(a.body, P(&it.obj), exps, rel)
		}
		a.body = append(a.body, "},"...)
	}
	a.body = append(a.body[:len(a.body)-1], "]}\n"...) // over the last item's comma: a batch has one at least
	return a, nil
}

// batchFailure is the answer of an atomic batch of which failed items failed: 422 (412 when every
// failure is If-Match's) with an errors entry for each field at fault, named after its item, within
// the bounds of an error body (itemEntries).
func batchFailure[T any](r *http.Request, items []*batchItem[T], failed int) answer {
	f := answer{status: http.StatusPreconditionFailed}
	for _, it := range items {
		if it.err != nil && !errors.Is(it.err, errPreconditionFailed) {
			f.status = http.StatusUnprocessableEntity
		}
	}
	f.body = problemJSON(r, &apiError{Status: f.status, Code: "batch_failed",
		Detail: fmt.Sprintf("%d of %d items failed; nothing was changed.", failed, len(items))})
	f.body = append(f.body[:len(f.body)-2], `,"errors":[`...) // reopen the object
	for i, it := range items {
		if it.err == nil {
			continue
		}
		ae := it.problem(itemEntries(len(f.body)))
		index := int64(i)
		for _, fe := range ae.Errors {
			f.body = appendObject(f.body, "field", &fe.Field, "message", &fe.Message, "index", &index, "code", &ae.Code)
			f.body = append(appendCandidates(f.body, it.candidates), ',')
		}
	}
	f.body = append(f.body[:len(f.body)-1], "]}\n"...) // over the last entry's comma: one item failed at least
	return f
}

// appendCandidates adds "candidates" (the ids an ambiguous match found) to the object b ends with.
func appendCandidates(b []byte, candidates [][]byte) []byte {
	if candidates == nil {
		return b
	}
	b = append(append(b[:len(b)-1], `,"candidates":[`...), bytes.Join(candidates, []byte{','})...)
	return append(b, "]}"...)
}

// problem is the item's failure as a problem, with every field named from the batch's body
// ("items[3].email"), and one entry at least: its id or ifMatch when no field is at fault. It lists
// at most entries of them (problem.go's bounds), then one that counts the others.
func (it *batchItem[T]) problem(entries int) *apiError {
	ae := *clientError(it.err)
	if ae.Errors == nil { // no field at fault: the item's id, or its ifMatch
		field := it.idField
		if errors.Is(it.err, errPreconditionFailed) {
			field = "ifMatch"
		}
		ae.Errors = []fieldError{{Field: field, Message: ae.Detail}}
	}
	return ae.bounded(it.at, entries)
}

// itemEntries is how many errors entries the next failing item of a batch lists, when the batch's
// errors written so far take spent bytes: all of them within the budget, then none but the one that
// counts them, so that every failing item is named and the answer stays within its bound.
func itemEntries(spent int) int {
	if spent > batchErrorBudget {
		return 0
	}
	return maxErrorEntries
}
