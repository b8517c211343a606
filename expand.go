package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Expansion (API.md section 5): expand[]=name embeds the related object an id field points at, in
// the response of any request. Related objects are loaded with one query per kind of object for the
// whole response (collect the ids, one `id = ANY($2)`), so a list page costs the same number of
// queries whatever its length; the queries of all kinds go out together, in one round trip.

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
	if len(vals) == 0 {
		return nil, nil
	}
	if len(vals) > maxExpandValues {
		return nil, badRequest("invalid_expand", fmt.Sprintf("expand[] is given %d times; at most %d.", len(vals), maxExpandValues))
	}
	want := make([]bool, len(allowed))
	for _, v := range vals {
		i := 0
		for i < len(allowed) && allowed[i].name != v {
			i++
		}
		if i == len(allowed) {
			return nil, badRequest("invalid_expand", unknownExpandDetail(v, allowed))
		}
		want[i] = true
	}
	var out []expansion
	for i, e := range allowed {
		if want[i] {
			out = append(out, e)
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

// related holds the encoded related objects of one response, by kind and id.
type related [numRelKinds]map[int64][]byte

// loadRelated loads, with one query per kind (all in one round trip), every object the expansions
// point at from objs.
// ref returns the id an object's expansion points at (not valid: null).
func loadRelated[T any](ctx context.Context, st *store, companyID int64, exps []expansion, objs []T,
	ref func(*T, string) sql.NullInt64) (*related, error) {
	if len(exps) == 0 {
		return nil, nil
	}
	var ids [numRelKinds][]int64
	for _, e := range exps {
		for i := range objs {
			if id := ref(&objs[i], e.name); id.Valid {
				ids[e.kind] = append(ids[e.kind], id.Int64)
			}
		}
	}
	for k := range ids {
		slices.Sort(ids[k]) // a page of 100 contacts names the same few users again and again
		ids[k] = slices.Compact(ids[k])
	}
	return st.relatedObjects(ctx, companyID, &ids)
}

// appendExpanded appends v with its expansions: the encoded object with, before its closing brace,
// one member per expansion holding the related object, or null.
func appendExpanded[T any](b []byte, res *resource[T], v *T, exps []expansion, rel *related) []byte {
	b = res.encode(b, v)
	if len(exps) == 0 {
		return b
	}
	b = b[:len(b)-1] // reopen the object
	for _, e := range exps {
		b = append(b, ',')
		b = appendString(b, e.name)
		b = append(b, ':')
		obj, ok := []byte(nil), false
		if id := res.ref(v, e.name); id.Valid {
			obj, ok = rel[e.kind][id.Int64]
		}
		if !ok {
			b = append(b, "null"...)
			continue
		}
		b = append(b, obj...)
	}
	return append(b, '}')
}
