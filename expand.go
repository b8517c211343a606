package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Expansion (API.md section 5): expand[]=name embeds the related object an id field points at, in
// the response of any request.
//   - A retrieve (GET /v1/{resource}/{id}) joins the related objects into its one statement
//     (getJoined): one round trip, one statement, whatever it expands.
//   - A list page, and the answer of a create or update, load them with one query per kind of
//     object for the whole response (collect the ids, one `id = ANY($2)`), so a page costs the
//     same number of queries whatever its length; the queries of all kinds go out together, in one
//     round trip. A page names the same few users again and again: asking for each once is less
//     work for PostgreSQL than joining them into every row.

// relKind is a kind of related object, each loaded by one query.
type relKind int

const (
	relUser relKind = iota
	relOrganization
	relStage
	relCountry
	numRelKinds
)

// expansion is a name expand[] may give, the kind of object it embeds and the column of the
// expanding object that holds the related id.
type expansion struct {
	name string
	kind relKind
	col  string
}

var (
	contactExpansions = []expansion{{"organization", relOrganization, "organization_id"},
		{"country", relCountry, "country_id"}, {"stage", relStage, "stage_id"},
		{"assignedTo", relUser, "assigned_to_id"}, {"userCreator", relUser, "user_creator_id"}}
	businessExpansions = []expansion{{"organization", relOrganization, "organization_id"},
		{"stage", relStage, "stage_id"}, {"userCreator", relUser, "user_creator_id"}}
)

// relTables are the table and columns (id first) of each kind of related object. Countries are
// global; the others belong to a company and are joined on it too.
var relTables = [numRelKinds]struct {
	table, columns string
	global         bool
}{
	relUser:         {"users", userColumns, false},
	relOrganization: {"organizations", organizationColumns, false},
	relStage:        {"stages", stageColumns, false},
	relCountry:      {"countries", countryColumns, true},
}

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

// getJoined makes a resource's retrieve: its object (table, the columns its scanDest reads) by company
// and id, with the expansions asked for LEFT JOINed into the same statement, their objects returned
// encoded. The statement of every set of expansions is made once, here.
func getJoined[T any, PT scanner[T]](db *sql.DB, table, columns string, allowed []expansion) func(context.Context, int64, int64, []expansion) (T, *related, error) {
	stmts := make([]string, 1<<len(allowed))
	for set := range stmts {
		var exps []expansion
		for i, e := range allowed {
			if set&(1<<i) != 0 {
				exps = append(exps, e)
			}
		}
		stmts[set] = joinedGetSQL(table, columns, exps)
	}
	return func(ctx context.Context, companyID, id int64, exps []expansion) (T, *related, error) {
		set := 0
		for _, e := range exps { // exps is a subset of allowed, in allowed's order (parseExpand)
			set |= 1 << slices.IndexFunc(allowed, func(a expansion) bool { return a.name == e.name })
		}
		var v T
		dest := pgxDest(PT(&v).scanDest())
		rows := make([]relRow, len(exps))
		for i, e := range exps {
			rows[i] = newRelRow(e.kind)
			dest = append(dest, rows[i].dest...)
		}
		err := withPgx(ctx, db, func(c *pgx.Conn) error { return c.QueryRow(ctx, stmts[set], companyID, id).Scan(dest...) })
		if errors.Is(err, pgx.ErrNoRows) {
			return v, nil, errNotFound
		}
		if err != nil {
			return v, nil, fmt.Errorf("get %s %d: %w", table, id, err)
		}
		if len(exps) == 0 {
			return v, nil, nil
		}
		var rel related
		var buf []byte // one buffer for all the objects: rel keeps slices of it
		for i, e := range exps {
			if *rows[i].id == 0 { // the join found nothing: the id field is null
				continue
			}
			if rel[e.kind] == nil {
				rel[e.kind] = make(map[int64][]byte, 2)
			}
			start := len(buf)
			buf = rows[i].encode(buf)
			rel[e.kind][*rows[i].id] = buf[start:len(buf):len(buf)]
		}
		return v, &rel, nil
	}
}

// joinedGetSQL is the statement of a retrieve with the expansions exps: $1 the company, $2 the id.
func joinedGetSQL(table, columns string, exps []expansion) string {
	return joinedSelect(table, columns, exps) + ` WHERE company_id = $1 AND id = $2`
}

// joinedSelect returns "SELECT columns, <the related objects' columns> FROM table LEFT JOIN ...",
// to which a WHERE on table's own columns is added. Each related table is joined as a subquery
// whose columns are renamed e<i>_<n>, so that the unqualified names of the WHERE and of columns
// (id, name, company_id...) still mean table's own; PostgreSQL flattens such subqueries, so the
// plan is that of a plain join: one primary-key probe per expansion.
func joinedSelect(table, columns string, exps []expansion) string {
	var sel, from strings.Builder
	sel.WriteString("SELECT " + columns)
	from.WriteString(" FROM " + table)
	for i, e := range exps {
		rt := relTables[e.kind]
		alias := "e" + strconv.Itoa(i)
		n := len(strings.Split(rt.columns, ","))
		names := make([]string, n)
		for c := range names {
			names[c] = alias + "_" + strconv.Itoa(c+1)
		}
		sel.WriteString(", " + strings.Join(names, ", "))
		on := alias + "." + names[0] + " = " + table + "." + e.col
		if rt.global {
			fmt.Fprintf(&from, " LEFT JOIN (SELECT %s FROM %s) %s (%s) ON %s", rt.columns, rt.table, alias,
				strings.Join(names, ", "), on)
		} else {
			fmt.Fprintf(&from, " LEFT JOIN (SELECT %s, company_id FROM %s) %s (%s, %s_company) ON %s_company = %s.company_id AND %s",
				rt.columns, rt.table, alias, strings.Join(names, ", "), alias, alias, table, on)
		}
	}
	return sel.String() + from.String()
}

// relRow is one joined related object: its scan destinations (a NULL, from a join that found
// nothing, scans as the zero value, so a zero id means no object), its id and its encoder.
type relRow struct {
	dest   []any
	id     *int64
	encode func([]byte) []byte
}

func newRelRow(k relKind) relRow {
	switch k {
	case relUser:
		v := new(user)
		return relRow{nullAsZero(v.scanDest()), &v.ID, func(b []byte) []byte { return appendUser(b, v) }}
	case relOrganization:
		v := new(organization)
		return relRow{nullAsZero(v.scanDest()), &v.ID, func(b []byte) []byte { return appendOrganization(b, v) }}
	case relStage:
		v := new(stage)
		return relRow{nullAsZero(v.scanDest()), &v.ID, func(b []byte) []byte { return appendStage(b, v) }}
	default: // relCountry
		v := new(country)
		return relRow{nullAsZero(v.scanDest()), &v.ID, func(b []byte) []byte { return appendCountry(b, v) }}
	}
}

// nullAsZero wraps scan destinations so that a NULL scans as the zero value (pgxDest's wrappers
// already take NULL for the sql.Null types).
func nullAsZero(dest []any) []any {
	for i, d := range dest {
		switch d := d.(type) {
		case *int64:
			dest[i] = zeroInt64{d}
		case *string:
			dest[i] = zeroString{d}
		case *time.Time:
			dest[i] = zeroTime{d}
		case *bool:
			dest[i] = zeroBool{d}
		}
	}
	return pgxDest(dest)
}

type zeroInt64 struct{ p *int64 }

func (z zeroInt64) ScanInt64(v pgtype.Int8) error { *z.p = v.Int64; return nil }

type zeroString struct{ p *string }

func (z zeroString) ScanText(v pgtype.Text) error { *z.p = v.String; return nil }

type zeroTime struct{ p *time.Time }

func (z zeroTime) ScanTimestamptz(v pgtype.Timestamptz) error { *z.p = v.Time; return nil }

type zeroBool struct{ p *bool }

func (z zeroBool) ScanBool(v pgtype.Bool) error { *z.p = v.Bool; return nil }
