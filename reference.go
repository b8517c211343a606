package main

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// Reference resources (API.md section 4): the objects *Id fields point at, so a client can find the
// ids it may use. Users, organizations, stages and boards belong to a company; statuses, currencies
// and countries are global. Each type has one encoder, used both by its own endpoints and by
// expand[], so an expanded object and the same object fetched directly are byte-identical.

type user struct {
	ID        int64
	Name      string
	Surname   sql.NullString
	Email     sql.NullString
	CreatedAt time.Time
	UpdatedAt time.Time
}

type organization struct {
	ID        int64
	Name      string
	CreatedAt time.Time
	UpdatedAt time.Time
}

type stage struct {
	ID        int64
	BoardID   sql.NullInt64 // null for contact stages
	Name      string
	Position  int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

type board struct {
	ID        int64
	Name      string
	IsDefault bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

// refData is a row of the global code lists: statuses, and the common part of currencies and
// countries (code is the ISO alphabetic code).
type refData struct {
	ID        int64
	Code      string
	Name      string
	CreatedAt time.Time
	UpdatedAt time.Time
}

type currency struct {
	refData
	MinorUnit int64
}

type country struct {
	refData
	Alpha3 string
}

func appendUser(b []byte, u *user) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, u.ID, 10)
	b = append(b, `,"name":`...)
	b = appendString(b, u.Name)
	b = append(b, `,"surname":`...)
	b = appendNullString(b, u.Surname)
	b = append(b, `,"email":`...)
	b = appendNullString(b, u.Email)
	return appendStamps(b, u.CreatedAt, u.UpdatedAt)
}

func appendOrganization(b []byte, o *organization) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, o.ID, 10)
	b = append(b, `,"name":`...)
	b = appendString(b, o.Name)
	return appendStamps(b, o.CreatedAt, o.UpdatedAt)
}

func appendStage(b []byte, s *stage) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, s.ID, 10)
	b = append(b, `,"name":`...)
	b = appendString(b, s.Name)
	b = append(b, `,"boardId":`...)
	b = appendNullInt(b, s.BoardID)
	b = append(b, `,"position":`...)
	b = strconv.AppendInt(b, s.Position, 10)
	return appendStamps(b, s.CreatedAt, s.UpdatedAt)
}

func appendBoard(b []byte, bd *board) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, bd.ID, 10)
	b = append(b, `,"name":`...)
	b = appendString(b, bd.Name)
	b = append(b, `,"isDefault":`...)
	b = strconv.AppendBool(b, bd.IsDefault)
	return appendStamps(b, bd.CreatedAt, bd.UpdatedAt)
}

func appendRefData(b []byte, r *refData) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, r.ID, 10)
	b = append(b, `,"code":`...)
	b = appendString(b, r.Code)
	b = append(b, `,"name":`...)
	b = appendString(b, r.Name)
	return b
}

func appendStatus(b []byte, s *refData) []byte {
	return appendStamps(appendRefData(b, s), s.CreatedAt, s.UpdatedAt)
}

func appendCurrency(b []byte, c *currency) []byte {
	b = appendRefData(b, &c.refData)
	b = append(b, `,"minorUnit":`...)
	b = strconv.AppendInt(b, c.MinorUnit, 10)
	return appendStamps(b, c.CreatedAt, c.UpdatedAt)
}

func appendCountry(b []byte, c *country) []byte {
	b = appendRefData(b, &c.refData)
	b = append(b, `,"alpha3":`...)
	b = appendString(b, c.Alpha3)
	return appendStamps(b, c.CreatedAt, c.UpdatedAt)
}

// appendStamps appends createdAt and updatedAt and closes the object.
func appendStamps(b []byte, created, updated time.Time) []byte {
	b = append(b, `,"createdAt":`...)
	b = appendTime(b, created)
	b = append(b, `,"updatedAt":`...)
	b = appendTime(b, updated)
	return append(b, '}')
}

// SQL of the reference resources. Company-owned tables are scoped by company_id; $1 is always the
// company (ignored by the global tables), $2 the page's last id or the ids to load, $3 the limit.

const (
	userColumns         = `id, name, surname, email, created_at, updated_at`
	organizationColumns = `id, name, created_at, updated_at`
	stageColumns        = `id, board_id, name, position, created_at, updated_at`
	boardColumns        = `id, name, is_default, created_at, updated_at`
	statusColumns       = `id, code, name, created_at, updated_at`
	currencyColumns     = `id, code, name, created_at, updated_at, minor_unit`
	countryColumns      = `id, code, name, created_at, updated_at, alpha3`
)

func (u *user) scanDest() []any {
	return []any{&u.ID, &u.Name, &u.Surname, &u.Email, &u.CreatedAt, &u.UpdatedAt}
}
func (o *organization) scanDest() []any { return []any{&o.ID, &o.Name, &o.CreatedAt, &o.UpdatedAt} }
func (s *stage) scanDest() []any {
	return []any{&s.ID, &s.BoardID, &s.Name, &s.Position, &s.CreatedAt, &s.UpdatedAt}
}
func (bd *board) scanDest() []any {
	return []any{&bd.ID, &bd.Name, &bd.IsDefault, &bd.CreatedAt, &bd.UpdatedAt}
}
func (r *refData) scanDest() []any  { return []any{&r.ID, &r.Code, &r.Name, &r.CreatedAt, &r.UpdatedAt} }
func (c *currency) scanDest() []any { return append(c.refData.scanDest(), &c.MinorUnit) }
func (c *country) scanDest() []any  { return append(c.refData.scanDest(), &c.Alpha3) }

// relatedObjects returns the company's objects with these ids (by kind; each sorted, without
// repeats), encoded, by kind and id: one query per kind that has ids, all sent in one round trip.
func (s *store) relatedObjects(ctx context.Context, companyID int64, ids *[numRelKinds][]int64) (*related, error) {
	var rel related
	var b pgx.Batch
	for k, kindIDs := range ids {
		if len(kindIDs) == 0 {
			continue
		}
		out := make(map[int64][]byte, len(kindIDs))
		rel[k] = out
		switch relKind(k) {
		case relUser:
			queueEncoded(&b, out, appendUser, func(u *user) int64 { return u.ID },
				`SELECT `+userColumns+` FROM users WHERE company_id = $1 AND id = ANY($2)`, companyID, kindIDs)
		case relOrganization:
			queueEncoded(&b, out, appendOrganization, func(o *organization) int64 { return o.ID },
				`SELECT `+organizationColumns+` FROM organizations WHERE company_id = $1 AND id = ANY($2)`, companyID, kindIDs)
		case relStage:
			queueEncoded(&b, out, appendStage, func(st *stage) int64 { return st.ID },
				`SELECT `+stageColumns+` FROM stages WHERE company_id = $1 AND id = ANY($2)`, companyID, kindIDs)
		case relCountry:
			queueEncoded(&b, out, appendCountry, func(c *country) int64 { return c.ID },
				`SELECT `+countryColumns+` FROM countries WHERE id = ANY($1)`, kindIDs)
		}
	}
	if b.Len() == 0 {
		return &rel, nil
	}
	err := withPgx(ctx, s.db, func(c *pgx.Conn) error { return c.SendBatch(ctx, &b).Close() })
	if err != nil {
		return nil, fmt.Errorf("load related objects: %w", err)
	}
	return &rel, nil
}

// queueEncoded queues q on b; its rows are encoded with enc into out, by id.
func queueEncoded[T any, PT scanner[T]](b *pgx.Batch, out map[int64][]byte, enc func([]byte, *T) []byte,
	id func(*T) int64, q string, args ...any) {
	b.Queue(q, args...).Query(func(rows pgx.Rows) error {
		var v T
		dest := pgxDest(PT(&v).scanDest()) // every column is scanned on every row, so v needs no reset
		var buf []byte                     // one buffer for all the objects: out keeps slices of it
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			start := len(buf)
			buf = enc(buf, &v)
			out[id(&v)] = buf[start:len(buf):len(buf)]
		}
		return rows.Err()
	})
}

// refResource binds a reference type to the generic list and retrieve handlers. listQ selects the
// rows of a list ($1 the company; list.go adds the order and the page), getQ one object ($1 company,
// $2 id), when it has a retrieve endpoint.
func refResource[T any, PT scanner[T]](st *store, path, listQ, getQ string, enc func([]byte, *T) []byte, id func(*T) int64) *resource[T] {
	res := &resource[T]{st: st, path: path, encode: enc, id: id, lists: &listSpec{}}
	res.list = listRows[T, PT](st.db, listQ)
	if getQ != "" {
		res.get = func(ctx context.Context, companyID, id int64, _ []expansion) (T, *related, error) {
			v, err := queryOne[T, PT](ctx, st.db, getQ, companyID, id)
			return v, nil, err
		}
	}
	return res
}

func usersResource(st *store) *resource[user] {
	return refResource(st, "/v1/users",
		`SELECT `+userColumns+` FROM users WHERE company_id = $1`,
		`SELECT `+userColumns+` FROM users WHERE company_id = $1 AND id = $2`,
		appendUser, func(u *user) int64 { return u.ID })
}

func organizationsResource(st *store) *resource[organization] {
	res := refResource(st, "/v1/organizations",
		`SELECT `+organizationColumns+` FROM organizations WHERE company_id = $1`,
		`SELECT `+organizationColumns+` FROM organizations WHERE company_id = $1 AND id = $2`,
		appendOrganization, func(o *organization) int64 { return o.ID })
	res.create = st.createOrganization
	return res
}

// createOrganization creates an organization from a POST body: {"name": ...}.
func (s *store) createOrganization(ctx context.Context, t tenant, members []member) (organization, error) {
	var o organization
	fields := []bodyField{{"name", requiredText(&o.Name, 255)}}
	errs := applyMembers(members, fields, []string{"id", "createdAt", "updatedAt"})
	if o.Name == "" && !hasField(errs, "name") {
		errs = append(errs, fieldError{Field: "name", Message: "is required"})
	}
	if errs != nil {
		return o, validationFailed(errs...)
	}
	const q = `INSERT INTO organizations (company_id, name) VALUES ($1, $2) RETURNING ` + organizationColumns
	o, err := queryOne[organization](ctx, s.db, q, t.companyID, o.Name)
	if err != nil {
		return o, fmt.Errorf("insert organization: %w", mapWriteError(err))
	}
	return o, nil
}

func stagesResource(st *store) *resource[stage] {
	res := refResource(st, "/v1/stages",
		`SELECT `+stageColumns+` FROM stages WHERE company_id = $1`,
		`SELECT `+stageColumns+` FROM stages WHERE company_id = $1 AND id = $2`,
		appendStage, func(s *stage) int64 { return s.ID })
	res.lists = &listSpec{filters: []filter{{name: "boardId", col: "board_id"}}}
	return res
}

func boardsResource(st *store) *resource[board] {
	return refResource(st, "/v1/boards",
		`SELECT `+boardColumns+` FROM boards WHERE company_id = $1`,
		`SELECT `+boardColumns+` FROM boards WHERE company_id = $1 AND id = $2`,
		appendBoard, func(b *board) int64 { return b.ID })
}

// The global lists ignore $1 (the company) but take it, so that every list has the same parameters.

func statusesResource(st *store) *resource[refData] {
	return refResource(st, "/v1/statuses",
		`SELECT `+statusColumns+` FROM statuses WHERE $1::bigint > 0`, "",
		appendStatus, func(r *refData) int64 { return r.ID })
}

func currenciesResource(st *store) *resource[currency] {
	return refResource(st, "/v1/currencies",
		`SELECT `+currencyColumns+` FROM currencies WHERE $1::bigint > 0`, "",
		appendCurrency, func(c *currency) int64 { return c.ID })
}

func countriesResource(st *store) *resource[country] {
	return refResource(st, "/v1/countries",
		`SELECT `+countryColumns+` FROM countries WHERE $1::bigint > 0`, "",
		appendCountry, func(c *country) int64 { return c.ID })
}
