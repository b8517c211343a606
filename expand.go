package main

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Expansion (API.md section 5): expand[]=name embeds the related object an id field points at, in
// the answer of any request. The objects of a whole answer (one object or a list page) are loaded
// with one query per kind of object (collect the ids, one `id = ANY($2)`), all in one round trip, so
// a page costs the same whatever its length.

// relKind is a kind of related object, each loaded by one query.
type relKind int

const (
	relUser relKind = iota
	relOrganization
	relStage
	relCountry
	numRelKinds
)

// expansion is a name expand[] may give and the kind of object it embeds.
type expansion struct {
	name string
	kind relKind
}

var (
	contactExpansions = []expansion{{"organization", relOrganization}, {"country", relCountry},
		{"stage", relStage}, {"assignedTo", relUser}, {"userCreator", relUser}}
	businessExpansions = []expansion{{"organization", relOrganization}, {"stage", relStage},
		{"userCreator", relUser}}
)

// maxExpandValues bounds expand[]: more values than any resource has is a mistake, not work to do.
const maxExpandValues = 16

// parseExpand returns the expansions named by expand[], once each, in allowed's order. An unknown
// value is a 400 that names it and lists the valid ones.
func parseExpand(q url.Values, allowed []expansion) ([]expansion, *apiError) {
	vals := q["expand[]"]
	if len(vals) > maxExpandValues {
		return nil, badRequest("invalid_expand", fmt.Sprintf("expand[] is given %d times; at most %d.", len(vals), maxExpandValues))
	}
	var out []expansion
	for _, e := range allowed {
		if slices.Contains(vals, e.name) {
			out = append(out, e)
		}
	}
	for _, v := range vals {
		if !slices.ContainsFunc(allowed, func(e expansion) bool { return e.name == v }) {
			return nil, badRequest("invalid_expand", unknownExpandDetail(v, allowed))
		}
	}
	return out, nil
}

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
	return fmt.Sprintf("Unknown expand[] value %q; valid values: %s.", v, strings.Join(names, ", "))
}

// related holds the related objects of one answer, encoded, by kind and id.
type related [numRelKinds]map[int64][]byte

// loadRelated loads every object the expansions exps point at from objs: one query per kind.
func loadRelated[T any, P object[T]](ctx context.Context, st *store, companyID int64, exps []expansion, objs []T) (related, error) {
	var ids [numRelKinds][]int64
	for _, e := range exps {
		for i := range objs {
			if id, ok := P(&objs[i]).relatedID(e.name); ok {
				ids[e.kind] = append(ids[e.kind], id)
			}
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
		reads = append(reads, relatedRead(relKind(k), companyID, slices.Compact(kindIDs), rel[k]))
	}
	if len(reads) == 0 {
		return rel, nil
	}
	if err := st.read(ctx, reads...); err != nil {
		return rel, fmt.Errorf("load related objects: %w", err)
	}
	return rel, nil
}

// relatedRead returns a read of the company's objects of kind k with these ids, which puts each,
// encoded, into out by id.
func relatedRead(k relKind, companyID int64, ids []int64, out map[int64][]byte) read {
	switch k {
	case relUser:
		return encodedRead[user](users, companyID, ids, out)
	case relOrganization:
		return encodedRead[organization](organizations, companyID, ids, out)
	case relStage:
		return encodedRead[stage](stages, companyID, ids, out)
	}
	return encodedRead[country](countries, companyID, ids, out)
}

// encodedRead returns a read of res's objects with these ids, which puts each, encoded, into out by id.
func encodedRead[T any, P object[T]](res *resource, companyID int64, ids []int64, out map[int64][]byte) read {
	return read{res.selectSQL + ` AND id = ANY($2)`, []any{companyID, ids}, func(rows pgx.Rows) error {
		var v T
		dest := P(&v).scanDest()
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			out[P(&v).key()] = P(&v).appendJSON(nil)
		}
		return rows.Err()
	}}
}

// appendExpanded appends v with its expansions: the encoded object with, before its closing brace,
// one member per expansion holding the related object, or null.
func appendExpanded[T any, P object[T]](b []byte, v P, exps []expansion, rel related) []byte {
	b = v.appendJSON(b)
	if len(exps) == 0 {
		return b
	}
	b = b[:len(b)-1] // reopen the object
	for _, e := range exps {
		b = append(b, ',')
		b = appendString(b, e.name)
		b = append(b, ':')
		id, ok := v.relatedID(e.name)
		obj, found := rel[e.kind][id]
		if !ok || !found {
			b = append(b, "null"...)
			continue
		}
		b = append(b, obj...)
	}
	return append(b, '}')
}
