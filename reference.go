package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// Reference resources (API.md section 4): the objects *Id fields point at, so that a client can find
// the ids it may use. Users, organizations, stages and boards belong to a company; statuses,
// currencies and countries are global. Each type has one encoder, used both by its own endpoints and
// by expand[], so an expanded object and the same object fetched directly are byte-identical.

// refObject gives the reference types what the shared handlers ask of every object and they do not
// have: no version (so no ETag), no sort but by id, nothing to expand.
type refObject struct{}

func (refObject) version() int64                 { return 0 }
func (refObject) sortKey(string) (string, bool)  { return "", false }
func (refObject) relatedID(string) (int64, bool) { return 0, false }

type user struct {
	refObject
	ID        int64
	Name      string
	Surname   pgtype.Text
	Email     pgtype.Text
	CreatedAt time.Time
	UpdatedAt time.Time
}

type organization struct {
	refObject
	ID        int64
	Name      string
	CreatedAt time.Time
	UpdatedAt time.Time
	Custom    customValues
}

type stage struct {
	refObject
	ID        int64
	BoardID   pgtype.Int8 // null for contact stages
	Name      string
	Position  int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

type board struct {
	refObject
	ID        int64
	Name      string
	IsDefault bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

// status, currency and country are the global code lists; code is the ISO alphabetic code.
type status struct {
	refObject
	ID        int64
	Code      string
	Name      string
	CreatedAt time.Time
	UpdatedAt time.Time
}

type currency struct {
	status
	MinorUnit int64
}

type country struct {
	status
	Alpha3 string
}

func (u *user) key() int64         { return u.ID }
func (o *organization) key() int64 { return o.ID }
func (s *stage) key() int64        { return s.ID }
func (b *board) key() int64        { return b.ID }
func (s *status) key() int64       { return s.ID }

func (u *user) appendJSON(b []byte) []byte {
	return appendObject(b, "id", &u.ID, "name", &u.Name, "surname", &u.Surname, "email", &u.Email,
		"createdAt", &u.CreatedAt, "updatedAt", &u.UpdatedAt)
}

func (o *organization) appendJSON(b []byte) []byte {
	return appendObject(b, "id", &o.ID, "name", &o.Name, "createdAt", &o.CreatedAt, "updatedAt", &o.UpdatedAt, "custom", &o.Custom)
}

func (s *stage) appendJSON(b []byte) []byte {
	return appendObject(b, "id", &s.ID, "name", &s.Name, "boardId", &s.BoardID, "position", &s.Position,
		"createdAt", &s.CreatedAt, "updatedAt", &s.UpdatedAt)
}

func (bd *board) appendJSON(b []byte) []byte {
	return appendObject(b, "id", &bd.ID, "name", &bd.Name, "isDefault", &bd.IsDefault,
		"createdAt", &bd.CreatedAt, "updatedAt", &bd.UpdatedAt)
}

func (s *status) appendJSON(b []byte) []byte {
	return appendObject(b, "id", &s.ID, "code", &s.Code, "name", &s.Name, "createdAt", &s.CreatedAt, "updatedAt", &s.UpdatedAt)
}

func (c *currency) appendJSON(b []byte) []byte {
	return appendObject(b, "id", &c.ID, "code", &c.Code, "name", &c.Name, "minorUnit", &c.MinorUnit,
		"createdAt", &c.CreatedAt, "updatedAt", &c.UpdatedAt)
}

func (c *country) appendJSON(b []byte) []byte {
	return appendObject(b, "id", &c.ID, "code", &c.Code, "name", &c.Name, "alpha3", &c.Alpha3,
		"createdAt", &c.CreatedAt, "updatedAt", &c.UpdatedAt)
}

// SQL of the reference resources. Company-owned tables are scoped by company_id. The global ones
// take the company as $1 too (and ignore it), so that every resource's statements take the same
// arguments.

func (u *user) scanDest() []any {
	return []any{&u.ID, &u.Name, &u.Surname, &u.Email, &u.CreatedAt, &u.UpdatedAt}
}
func (o *organization) scanDest() []any {
	return append([]any{&o.ID, &o.Name, &o.CreatedAt, &o.UpdatedAt}, o.Custom.scanDest()...)
}
func (s *stage) scanDest() []any {
	return []any{&s.ID, &s.BoardID, &s.Name, &s.Position, &s.CreatedAt, &s.UpdatedAt}
}
func (bd *board) scanDest() []any {
	return []any{&bd.ID, &bd.Name, &bd.IsDefault, &bd.CreatedAt, &bd.UpdatedAt}
}
func (s *status) scanDest() []any   { return []any{&s.ID, &s.Code, &s.Name, &s.CreatedAt, &s.UpdatedAt} }
func (c *currency) scanDest() []any { return append(c.status.scanDest(), &c.MinorUnit) }
func (c *country) scanDest() []any  { return append(c.status.scanDest(), &c.Alpha3) }

var (
	users = &resource{path: "/v1/users", lists: &listSpec{},
		selectSQL: `SELECT id, name, surname, email, created_at, updated_at FROM users WHERE company_id = $1`}
	organizations = &resource{path: "/v1/organizations", table: "organizations", lists: &listSpec{custom: "organization", associates: "organizations",
		times: []summaryField{{name: "createdAt", col: "created_at"}, {name: "updatedAt", col: "updated_at"}}}, event: "organization",
		selectSQL: `SELECT id, name, created_at, updated_at, ` + customColumns("organizations", "organization") + ` FROM organizations WHERE company_id = $1`,
		inUse: `SELECT EXISTS (SELECT FROM contacts WHERE company_id = $1 AND organization_id = $2)
			OR EXISTS (SELECT FROM business WHERE company_id = $1 AND organization_id = $2)`}
	stages = &resource{path: "/v1/stages", lists: &listSpec{filters: []filter{{name: "boardId", col: "board_id"}}},
		selectSQL: `SELECT id, board_id, name, position, created_at, updated_at FROM stages WHERE company_id = $1`}
	boards = &resource{path: "/v1/boards", lists: &listSpec{},
		selectSQL: `SELECT id, name, is_default, created_at, updated_at FROM boards WHERE company_id = $1`}
	statuses = &resource{path: "/v1/statuses", lists: &listSpec{},
		selectSQL: `SELECT id, code, name, created_at, updated_at FROM statuses WHERE $1::bigint > 0`}
	currencies = &resource{path: "/v1/currencies", lists: &listSpec{},
		selectSQL: `SELECT id, code, name, created_at, updated_at, minor_unit FROM currencies WHERE $1::bigint > 0`}
	countries = &resource{path: "/v1/countries", lists: &listSpec{},
		selectSQL: `SELECT id, code, name, created_at, updated_at, alpha3 FROM countries WHERE $1::bigint > 0`}
)

// fields are what a POST /v1/organizations body may set.
func (o *organization) fields() []bodyField {
	return []bodyField{{"name", requiredText(&o.Name, 255), true}, {"custom", o.Custom.apply, false}}
}

// createOrganization stores a new organization o for the tenant's company in tx, with its event.
// Round trips: the INSERT (with BEGIN); the event goes with COMMIT.
func createOrganization(ctx context.Context, tx *tx, t tenant, o organization) (organization, error) {
	if err := checkCustom(ctx, tx, t.companyID, "organization", 0, &o.Custom, nil); err != nil {
		return o, err
	}
	const q = `INSERT INTO organizations (company_id, name, custom) VALUES ($1, $2, $3)
		RETURNING id, name, created_at, updated_at`
	if err := tx.queryRow(ctx, q, []any{t.companyID, o.Name, o.Custom.stored()}, &o.ID, &o.Name, &o.CreatedAt, &o.UpdatedAt); err != nil {
		return o, fmt.Errorf("insert organization: %w", mapWriteError(err))
	}
	if err := saveCustom(ctx, tx, t.companyID, o.ID, &o.Custom); err != nil {
		return o, err
	}
	recordEvent(tx, t.companyID, "organization.created", o.appendJSON(nil), nil)
	return o, nil
}

// updateOrganization applies p to the company's organization id in tx, like updateContact. Round
// trips: the lock (with BEGIN), the UPDATE; the event goes with COMMIT.
func updateOrganization(ctx context.Context, tx *tx, t tenant, id int64, p patch) (organization, error) {
	fields := queueCustomFields(tx, t.companyID, "organization", p.members, nil) // read with the lock
	old, o, changed, err := lockObject[organization](ctx, tx, organizations, t.companyID, id, p)
	if err != nil || !changed {
		return o, err
	}
	if err := checkCustom(ctx, tx, t.companyID, "organization", id, &o.Custom, fields); err != nil {
		return o, err
	}
	q := `UPDATE organizations SET name = $3, custom = coalesce($4::json, custom), ` + touched + `
		WHERE company_id = $1 AND id = $2 RETURNING updated_at`
	if err := tx.queryRow(ctx, q, []any{t.companyID, id, o.Name, o.Custom.stored()}, &o.UpdatedAt); err != nil {
		return o, fmt.Errorf("update organization %d: %w", id, mapWriteError(err))
	}
	if err := saveCustom(ctx, tx, t.companyID, id, &o.Custom); err != nil {
		return o, err
	}
	recordEvent(tx, t.companyID, "organization.updated", o.appendJSON(nil), old.appendJSON(nil))
	return o, nil
}
