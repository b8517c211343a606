package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Expansion (API.md section 5): expand[]=name embeds the related object an id field points at, in
// the answer of any request. The objects of a whole answer (one object or a list page) are loaded
// with one query per kind of object (collect the ids, one `id IN (SELECT unnest($2))`), all in one
// round trip, so a page costs the same whatever its length.

// relKind is a kind of related object, each loaded by one query.
type relKind int

const (
	relUser relKind = iota
	relOrganization
	relStage
	relCountry
	relContact
	relBusiness
	numRelKinds
)

// scope is what a key needs to have objects of kind k embedded (API.md section 13).
func (k relKind) scope() string {
	switch k {
	case relOrganization:
		return "organizations:read"
	case relContact:
		return "contacts:read"
	case relBusiness:
		return "business:read"
	}
	return "reference:read"
}

// expansion is a name expand[] may give, the kind of object it embeds, and the column of the
// embedding object that holds its id; or for the objects of several ids of several kinds (an
// activity's targets), one expansion of the name for each kind, with ids instead of col.
type expansion struct {
	name string
	kind relKind
	col  string
	ids  string // the SELECT of the ids of kind of the embedding objects whose id is %s ("= $2", "= ANY($2)")
}

// multiRelated is an object whose expansions with ids embed several objects (activity, its targets).
type multiRelated interface {
	relatedIDs(k relKind) []int64                     // the ids of kind k it embeds
	appendExpandedJSON(b []byte, rel *related) []byte // the object with those of rel embedded
}

var (
	contactExpansions = []expansion{
		{name: "organization", kind: relOrganization, col: "organization_id"},
		{name: "country", kind: relCountry, col: "country_id"},
		{name: "stage", kind: relStage, col: "stage_id"},
		{name: "assignedTo", kind: relUser, col: "assigned_to_id"},
		{name: "userCreator", kind: relUser, col: "user_creator_id"},
	}
	businessExpansions = []expansion{
		{name: "organization", kind: relOrganization, col: "organization_id"},
		{name: "stage", kind: relStage, col: "stage_id"},
		{name: "userCreator", kind: relUser, col: "user_creator_id"},
	}
)

// maxExpandValues bounds expand[]: more values than any resource has is a mistake, not work to do.
const maxExpandValues = 16

// parseExpand returns the expansions named by expand[], once each, in allowed's order. An unknown
// value is a 400 that names it and lists the valid ones; one the key may not read, a 403.
func parseExpand(r *http.Request, q url.Values, allowed []expansion) ([]expansion, *apiError) {
	vals := q["expand[]"]
	if len(vals) > maxExpandValues {
		return nil, badRequest("invalid_expand", fmt.Sprintf("expand[] is given %d times; at most %d.", len(vals), maxExpandValues))
	}
	for _, v := range vals {
		if !slices.ContainsFunc(allowed, func(e expansion) bool { return e.name == v }) {
			return nil, badRequest("invalid_expand", unknownExpandDetail(v, allowed))
		}
	}
	var out []expansion
	for _, e := range allowed {
		if slices.Contains(vals, e.name) {
			if aerr := scopeError(tenantOf(r).scopes, e.kind.scope()); aerr != nil {
				return nil, aerr
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// unknownExpandDetail is the 400's detail of v, a value of expand[] that allowed does not name.
func unknownExpandDetail(v string, allowed []expansion) string {
	if len(v) > 64 {
		v = v[:64] + "..."
	}
	if len(allowed) == 0 {
		return fmt.Sprintf("Unknown expand[] value %q: this endpoint expands nothing.", v)
	}
	names := make([]string, len(allowed))
	for i, e := range allowed {
		names[i] = e.name
	}
	names = slices.Compact(names) // an expansion of several kinds is one name
	return fmt.Sprintf("Unknown expand[] value %q; valid values: %s.", v, strings.Join(names, ", "))
}

// related holds the related objects of one answer, encoded, by kind and id.
type related [numRelKinds]map[int64][]byte

// loadRelated loads every object the expansions exps point at from objs: one query per kind.
// Each takes its ids as a set (IN unnest), not as `id = ANY($2)`: after five runs PostgreSQL keeps
// a plan made for any array, and for ANY that plan compares each of the company's rows with the
// array's ids one by one (0.39 ms for a page's 100 organizations of 1,000, EXPLAIN ANALYZE), where
// a set is hashed or looked up by the index (0.18 ms).
func loadRelated[T any, P object[T]](ctx context.Context, rd reader, companyID int64, exps []expansion, objs []T) (related, error) {
	var ids [numRelKinds][]int64
	for _, e := range exps {
		for i := range objs {
			ids[e.kind] = appendRelatedIDs(ids[e.kind], P(&objs[i]), e)
		}
	}
	var rel related
	var reads []read
	for k, kindIDs := range ids {
		if len(kindIDs) == 0 {
			continue
		}
		slices.Sort(kindIDs) // a page of contacts names the same few users again and again
		rel[k] = make(map[int64][]byte)
		reads = append(reads, relatedRead(relKind(k), ` AND id IN (SELECT unnest($2::bigint[]))`, []any{companyID, slices.Compact(kindIDs)}, rel[k]))
	}
	if len(reads) == 0 {
		return rel, nil
	}
	if err := rd(ctx, reads...); err != nil {
		return rel, fmt.Errorf("load related objects: %w", err)
	}
	return rel, nil
}

// appendRelatedIDs appends to ids those of the objects the expansion e embeds in v.
func appendRelatedIDs[T any, P object[T]](ids []int64, v P, e expansion) []int64 {
	if e.ids != "" {
		if m, ok := any(v).(multiRelated); ok {
			return append(ids, m.relatedIDs(e.kind)...)
		}
		return ids
	}
	if id, ok := v.relatedID(e.name); ok {
		return append(ids, id)
	}
	return ids
}

// getObject reads the company's object id of res and, in the same round trip, the objects exps embed
// in it (getObjects). It returns errNotFound when there is no such object. One round trip instead
// of two (the object, then loadRelated) pays: `make bench` against loadRelated measured retrieve+5
// 1.18x (6,509 against 5,493 req/s; retrieve 0.99x).
func getObject[T any, P object[T]](ctx context.Context, rd reader, res *resource, companyID, id int64,
	exps []expansion) (v T, rel related, err error) {
	found := false
	take := func(p P) {
		v = *p
		found = true
	}
	rel, err = getObjects[T, P](ctx, rd, res, companyID, `= $2`, id, exps, take)
	if err == nil && !found {
		err = errNotFound
	}
	return v, rel, err
}

// getObjects reads, in one round trip, the company's objects of res whose id is match ("= $2", or
// "= ANY($2)" for several: arg is $2), passing each to take, and the objects exps embed in them:
// each kind's SELECT takes its ids from the objects' rows.
func getObjects[T any, P object[T]](ctx context.Context, rd reader, res *resource, companyID int64, match string, arg any,
	exps []expansion, take func(P)) (related, error) {
	reads := []read{eachRow[T, P](res.selectSQL+` AND id `+match, []any{companyID, arg}, take)}
	var rel related
	var cols, sources [numRelKinds][]string // each kind's: the columns of its ids, the SELECTs of them
	for _, e := range exps {
		if e.ids != "" {
			sources[e.kind] = append(sources[e.kind], fmt.Sprintf(e.ids, match))
		} else {
			cols[e.kind] = append(cols[e.kind], e.col)
		}
	}
	for k := range sources {
		if cols[k] != nil {
			sources[k] = append(sources[k], `SELECT unnest(ARRAY[`+strings.Join(cols[k], ", ")+`]) FROM `+res.table+
				` WHERE company_id = $1 AND id `+match)
		}
		if sources[k] == nil {
			continue
		}
		rel[k] = make(map[int64][]byte)
		ids := ` AND id IN (` + strings.Join(sources[k], " UNION ALL ") + `)`
		reads = append(reads, relatedRead(relKind(k), ids, []any{companyID, arg}, rel[k]))
	}
	return rel, rd(ctx, reads...)
}

// relatedRead returns a read of the company's objects of kind k that pass where (on their id, with
// args: $1 is the company), which puts each, encoded, into out by id.
func relatedRead(k relKind, where string, args []any, out map[int64][]byte) read {
	switch k {
	case relUser:
		return encodedRead[user](users, where, args, out)
	case relOrganization:
		return encodedRead[organization](organizations, where, args, out)
	case relStage:
		return encodedRead[stage](stages, where, args, out)
	case relContact:
		return encodedRead[contact](contacts, where, args, out)
	case relBusiness:
		return encodedRead[business](businesses, where, args, out)
	}
	return encodedRead[country](countries, where, args, out)
}

// encodedRead returns a read of res's objects that pass where, which puts each, encoded, into out by id.
// The objects are encoded one after another into one buffer, which grows a few times for a page's 100
// organizations, where a buffer each grew five or six times for every one.
func encodedRead[T any, P object[T]](res *resource, where string, args []any, out map[int64][]byte) read {
	var buf []byte
	return eachRow[T, P](res.selectSQL+where, args, func(v P) {
		start := len(buf)
		buf = v.appendJSON(buf)
		out[v.key()] = buf[start:len(buf):len(buf)] // full: nothing appended to it reaches the next object
	})
}

// appendExpanded appends v with its expansions: the encoded object with, before its closing brace,
// one member per expansion holding the related object, or null. An expansion of several objects
// (ids) is written by the object itself, in its own member (multiRelated).
func appendExpanded[T any, P object[T]](b []byte, v P, exps []expansion, rel related) []byte {
	m, multi := any(v).(multiRelated)
	if multi && slices.ContainsFunc(exps, func(e expansion) bool { return e.ids != "" }) {
		objects := rel // the address of rel itself would move it to the heap on every call, as for a contact
		b = m.appendExpandedJSON(b, &objects)
	} else {
		b = v.appendJSON(b)
	}
	if len(exps) == 0 {
		return b
	}
	b = b[:len(b)-1] // reopen the object
	for _, e := range exps {
		if e.ids != "" {
			continue
		}
		b = append(b, ',')
		b = appendString(b, e.name)
		b = append(b, ':')
		id, ok := v.relatedID(e.name)
		obj, found := rel[e.kind][id]
		if ok && found {
			b = append(b, obj...)
		} else {
			b = append(b, "null"...)
		}
	}
	return append(b, '}')
}
