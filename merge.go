package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
)

const maxMergeIDs = 9

// handleMerge answers POST /v1/{contacts|organizations}/{id}/merge (API.md section 16), which folds
// the objects of mergeIds into the survivor {id}: 200 {"object", "mergedIds", "changes", "repointed",
// "dryRun"}.
// One transaction locks them all, re-points what references merged organizations (so it needs write
// on contacts and business), deletes the merged objects leaving a tombstone of each id (then 404
// "merged", schema/0013_merge.sql), and patches the survivor with update, the resource's. A dry run,
// the whole merge rolled back, answers what the merge would and keeps nothing for an Idempotency-Key.
func handleMerge[T any, P writable[T]](st *store, res *resource, update func(context.Context, *tx, tenant, int64, patch) (T, error), log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		if res == organizations { // the merge re-points contacts and business records
			aerr := cmp.Or(scopeError(t.scopes, "contacts:write"), scopeError(t.scopes, "business:write"))
			if aerr != nil {
				writeProblem(w, r, aerr)
				return
			}
		}
		wr := startWrite(w, r, res, log, nil)
		if wr == nil {
			return
		}
		ids, dryRun, bodyErr := readMergeBody(wr.members, wr.id)
		do := func(tx *tx) (answer, error) {
			return mergeObjects[T, P](r.Context(), tx, res, update, t, wr, ids, dryRun, bodyErr, ifMatch(r))
		}
		if !dryRun {
			runWrite(w, r, st, log, wr, do)
			return
		}
		errDryRun := errors.New("dry run") // rolls back the transaction, which did all the merge would
		a, _, err := st.writeOnce(r.Context(), t.companyID, nil, func(tx *tx) (answer, error) {
			a, err := do(tx)
			return a, cmp.Or(err, errDryRun)
		})
		if errors.Is(err, errDryRun) {
			requestInfo(r.Context()).events.Store(0) // rolled back: none written
			a.write(w, r, false)
			return
		}
		writeError(w, r, log, err)
	})
}

// readMergeBody reads {"mergeIds": [...], "dryRun": false}: 1 to maxMergeIDs distinct ids, strings
// of digits or numbers (readItemID, batch.go), none of them survivor's.
func readMergeBody(members []member, survivor int64) (ids []int64, dryRun bool, err error) {
	var raws []json.RawMessage
	errs := applyCreate(members, []bodyField{{"mergeIds", func(b json.RawMessage) string {
		if json.Unmarshal(b, &raws) != nil || len(raws) == 0 || len(raws) > maxMergeIDs {
			raws = nil
			return fmt.Sprintf("must be an array of 1 to %d ids", maxMergeIDs)
		}
		return ""
	}, true}, {"dryRun", boolean(&dryRun), false}})
	for i, raw := range raws {
		id := readItemID(raw)
		msg := ""
		switch {
		case id == 0:
			msg = "must be an id"
		case id == survivor:
			msg = "is the survivor's id (the path's)"
		case slices.Contains(ids, id):
			msg = "is given more than once"
		}
		if msg != "" {
			errs = append(errs, fieldError{Field: fmt.Sprintf("mergeIds[%d]", i), Message: msg})
		}
		ids = append(ids, id)
	}
	if errs != nil {
		return nil, false, fieldErrors(errs)
	}
	return ids, dryRun, nil
}

// mergeObjects merges ids into the company's object wr.id of res in tx and returns the answer, which
// says whether it is a dry run's (the caller rolls one back); bodyErr, the body's, is answered once
// the survivor is found (another company's is 404 whatever the body). Locked in id order, merges
// over the same objects take turns: the later finds them merged.
// Round trips: the lock (with BEGIN), repoint's, update's; the rest goes with the next.
func mergeObjects[T any, P writable[T]](ctx context.Context, tx *tx, res *resource, update func(context.Context, *tx, tenant, int64, patch) (T, error),
	t tenant, wr *write, ids []int64, dryRun bool, bodyErr error, versions []int64) (answer, error) {
	var objs []T
	q := res.selectSQL + ` AND id = ANY($2) ORDER BY id FOR UPDATE`
	if err := tx.read(ctx, rowsInto[T, P](&objs, q, t.companyID, append([]int64{wr.id}, ids...))); err != nil {
		return answer{}, err
	}
	encoded := map[int64][]byte{}
	byID := map[int64]T{}
	for i := range objs {
		encoded[P(&objs[i]).key()] = P(&objs[i]).appendJSON(nil)
		byID[P(&objs[i]).key()] = objs[i]
	}
	sv := slices.IndexFunc(objs, func(o T) bool { return P(&o).key() == wr.id })
	switch {
	case sv < 0:
		return answer{}, notFound(ctx, tx.read, res, t.companyID, wr.id)
	case bodyErr != nil:
		return answer{}, bodyErr
	case !admits(versions, P(&objs[sv]).version()):
		return answer{}, errPreconditionFailed
	}
	survivor := objectMembers(encoded[wr.id])
	losers := make([][]member, len(ids))
	var errs fieldErrors
	var idsAsWritten []json.RawMessage
	var merged []T // in the order of mergeIds, as their events go
	for i, id := range ids {
		if encoded[id] == nil {
			errs = append(errs, fieldError{Field: fmt.Sprintf("mergeIds[%d]", i), Message: "is not a " + res.event + " of the company"})
			continue
		}
		losers[i] = objectMembers(encoded[id])
		idsAsWritten = append(idsAsWritten, memberRaw(losers[i], "id"))
		merged = append(merged, byID[id])
	}
	if errs != nil {
		return answer{}, errs
	}
	mergedIDs, _ := json.Marshal(idsAsWritten)
	members, changes := mergeMembers(survivor, losers, "")

	repointed, err := repointReferences(ctx, tx, res, t.companyID, ids, wr.id)
	if err != nil {
		return answer{}, err
	}
	// The DELETE goes before the survivor's update: with the merged objects go their custom values
	// (schema/0012_custom_fields.sql's trigger), so that a unique value moves without a conflict.
	mergedInto := appendMembers(nil, []member{{"mergedInto", memberRaw(survivor, "id")}})
	if err := deleteLocked[T, P](ctx, tx, res, t.companyID, merged, mergedInto); err != nil {
		return answer{}, err
	}
	tx.queue(`UPDATE merged_objects SET merged_into = $4 WHERE company_id = $1 AND tbl = $2 AND merged_into = ANY($3)`,
		t.companyID, res.table, ids, wr.id) // merged into a merged object: lead to the survivor
	tx.queue(`INSERT INTO merged_objects (company_id, tbl, id, merged_into) SELECT $1, $2, unnest($3::bigint[]), $4`,
		t.companyID, res.table, ids, wr.id)
	v, err := update(ctx, tx, t, wr.id, patch{members: members})
	if err != nil {
		return answer{}, err
	}
	recordEvents(tx, t.companyID, []eventRow{{res.event + ".merged", P(&v).appendJSON(nil),
		appendMembers(nil, []member{{"mergedIds", mergedIDs}})}})
	a, err := objectAnswer[T, P](ctx, tx, t, http.StatusOK, v, wr.exps)
	if err != nil {
		return answer{}, err
	}
	a.body = fmt.Appendf(nil, `{"object":%s,"mergedIds":%s,"changes":%s,"repointed":%s,"dryRun":%t}`+"\n",
		a.body[:len(a.body)-1], mergedIDs, appendMembers(nil, changes), repointed, dryRun)
	return a, nil
}

// mergeMembers returns the merge patch that gives the survivor (its members) its merged values, and
// each change as prefix+name: {"from", "to"}. A value is the survivor's unless it is null, else the
// first non-null one of losers in order (mergeValue), so that the read-only members (never null) stay;
// a losing e-mail comes first for an empty secondaryEmail; custom values merge one by one.
func mergeMembers(survivor []member, losers [][]member, prefix string) (patch, changes []member) {
	merged := map[string]json.RawMessage{}
	for _, m := range survivor {
		to := m.raw
		if m.name == "custom" {
			lost := make([][]member, len(losers))
			for i, l := range losers {
				lost[i] = objectMembers(memberRaw(l, "custom"))
			}
			p, c := mergeMembers(objectMembers(m.raw), lost, "custom.")
			changes = append(changes, c...)
			if p != nil {
				patch = append(patch, member{"custom", appendMembers(nil, p)})
			}
			continue
		}
		for _, l := range losers {
			e := memberRaw(l, "email")
			if m.name == "secondaryEmail" && !strings.EqualFold(string(e), string(merged["email"])) {
				to = mergeValue(to, e) // contacts' own rule: a losing e-mail first; email is merged before
			}
		}
		for _, l := range losers {
			to = mergeValue(to, memberRaw(l, m.name))
		}
		merged[m.name] = to
		if string(to) != string(m.raw) {
			patch = append(patch, member{m.name, to})
			changes = append(changes, member{prefix + m.name, fmt.Appendf(nil, `{"from":%s,"to":%s}`, m.raw, to)})
		}
	}
	return patch, changes
}

// mergeValue is v merged with a later candidate c: v unless it is null, then c; two arrays (a
// multiSelect's) are unioned, v's elements first.
func mergeValue(v, c json.RawMessage) json.RawMessage {
	var vs, cs []json.RawMessage
	switch {
	case isNull(v):
		return c
	case json.Unmarshal(v, &vs) != nil || json.Unmarshal(c, &cs) != nil || cs == nil:
		return v
	}
	for _, e := range cs {
		if !slices.ContainsFunc(vs, func(x json.RawMessage) bool { return string(x) == string(e) }) {
			vs = append(vs, e)
		}
	}
	b, _ := json.Marshal(vs) // already compact, and escaped as the API writes
	return b
}

// repointReferences points what references the company's objects ids of res at its object to: the
// associations of ids (moveAssociations), and of organizations, the contacts and business records
// they are the organization of (repoint). It returns "repointed" of the merge's answer.
func repointReferences(ctx context.Context, tx *tx, res *resource, companyID int64, ids []int64, to int64) ([]byte, error) {
	if err := moveAssociations(ctx, tx, companyID, kindOfResource(res), ids, to); err != nil {
		return nil, err
	}
	if res != organizations {
		return []byte("{}"), nil
	}
	nc, err := repoint[contact](ctx, tx, contacts, companyID, ids, to)
	if err != nil {
		return nil, err
	}
	nb, err := repoint[business](ctx, tx, businesses, companyID, ids, to)
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, `{"contacts":%d,"business":%d}`, nc, nb), nil
}

// repoint points the company's objects of res of the organizations from at to, with an *.updated
// event each as a PATCH would write it, in one UPDATE whatever their number, and returns how many.
// Round trips: the lock and read of the objects, the UPDATE with the read of what it wrote.
func repoint[T any, P writable[T]](ctx context.Context, tx *tx, res *resource, companyID int64, from []int64, to int64) (int, error) {
	var old, now []T
	q := res.selectSQL + ` AND organization_id = ANY($2) ORDER BY id FOR UPDATE`
	if err := tx.read(ctx, rowsInto[T, P](&old, q, companyID, from)); err != nil || len(old) == 0 {
		return 0, err
	}
	ids := make([]int64, len(old))
	for i := range old {
		ids[i] = P(&old[i]).key()
	}
	tx.queue(`UPDATE `+res.table+` SET organization_id = $3, `+bumpVersion+`
		WHERE company_id = $1 AND id = ANY($2)`, companyID, ids, to)
	if err := tx.read(ctx, rowsInto[T, P](&now, res.selectSQL+` AND id = ANY($2) ORDER BY id`, companyID, ids)); err != nil {
		return 0, err
	}
	evs := make([]eventRow, len(now))
	for i := range now { // as a PATCH of organizationId writes it (updateContact, updateBusiness)
		v := P(&now[i]).appendJSON(nil)
		evs[i] = eventRow{res.event + ".updated", v, previousAttributes(P(&old[i]).appendJSON(nil), v)}
	}
	recordEvents(tx, companyID, evs)
	return len(now), nil
}
