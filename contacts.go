package main

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// contact is a person the company deals with (API.md section 3, SEED-SPEC.md 2.1).
type contact struct {
	ID             int64
	Name           string
	Surname        sql.NullString
	DNI            sql.NullString
	JobTitle       sql.NullString
	Email          sql.NullString
	SecondaryEmail sql.NullString
	Phone          sql.NullString
	MobilePhone    sql.NullString
	URLAvatar      sql.NullString
	Address        sql.NullString
	City           sql.NullString
	WithSales      bool
	CountryID      sql.NullInt64
	Classification sql.NullInt64
	StageID        sql.NullInt64
	OrganizationID sql.NullInt64
	AssignedToID   sql.NullInt64
	UserCreatorID  int64
	CreatedAt      time.Time
	UpdatedAt      time.Time
	Version        int64
}

// contactFields are the fields a client may set, applied onto c.
func (c *contact) fields() []bodyField {
	return []bodyField{
		{"name", requiredText(&c.Name, 255)},
		{"surname", nullableText(&c.Surname, 255, nil)},
		{"dni", nullableText(&c.DNI, 255, nil)},
		{"jobTitle", nullableText(&c.JobTitle, 255, nil)},
		{"email", nullableText(&c.Email, 255, checkEmail)},
		{"secondaryEmail", nullableText(&c.SecondaryEmail, 255, checkEmail)},
		{"phone", nullableText(&c.Phone, 255, nil)},
		{"mobilePhone", nullableText(&c.MobilePhone, 255, nil)},
		{"urlAvatar", nullableText(&c.URLAvatar, 1000, checkHTTPURL)},
		{"address", nullableText(&c.Address, 1000, nil)},
		{"city", nullableText(&c.City, 255, nil)},
		{"withSales", boolean(&c.WithSales)},
		{"countryId", nullableID(&c.CountryID)},
		{"classification", nullableInt(&c.Classification, -1<<31, 1<<31-1)},
		{"stageId", nullableID(&c.StageID)},
		{"organizationId", nullableID(&c.OrganizationID)},
		{"assignedToId", nullableID(&c.AssignedToID)},
	}
}

var readOnlyFields = []string{"id", "userCreatorId", "createdAt", "updatedAt"}

// appendContact appends c as JSON, keys in a fixed order; id is a string of digits (SEED-SPEC.md 2.1).
func appendContact(b []byte, c *contact) []byte {
	b = append(b, `{"id":"`...)
	b = strconv.AppendInt(b, c.ID, 10)
	b = append(b, `","name":`...)
	b = appendString(b, c.Name)
	b = append(b, `,"surname":`...)
	b = appendNullString(b, c.Surname)
	b = append(b, `,"dni":`...)
	b = appendNullString(b, c.DNI)
	b = append(b, `,"jobTitle":`...)
	b = appendNullString(b, c.JobTitle)
	b = append(b, `,"email":`...)
	b = appendNullString(b, c.Email)
	b = append(b, `,"secondaryEmail":`...)
	b = appendNullString(b, c.SecondaryEmail)
	b = append(b, `,"phone":`...)
	b = appendNullString(b, c.Phone)
	b = append(b, `,"mobilePhone":`...)
	b = appendNullString(b, c.MobilePhone)
	b = append(b, `,"urlAvatar":`...)
	b = appendNullString(b, c.URLAvatar)
	b = append(b, `,"address":`...)
	b = appendNullString(b, c.Address)
	b = append(b, `,"city":`...)
	b = appendNullString(b, c.City)
	b = append(b, `,"withSales":`...)
	b = strconv.AppendBool(b, c.WithSales)
	b = append(b, `,"countryId":`...)
	b = appendNullInt(b, c.CountryID)
	b = append(b, `,"classification":`...)
	b = appendNullInt(b, c.Classification)
	b = append(b, `,"stageId":`...)
	b = appendNullInt(b, c.StageID)
	b = append(b, `,"organizationId":`...)
	b = appendNullInt(b, c.OrganizationID)
	b = append(b, `,"assignedToId":`...)
	b = appendNullInt(b, c.AssignedToID)
	b = append(b, `,"userCreatorId":`...)
	b = strconv.AppendInt(b, c.UserCreatorID, 10)
	b = append(b, `,"createdAt":`...)
	b = appendTime(b, c.CreatedAt)
	b = append(b, `,"updatedAt":`...)
	b = appendTime(b, c.UpdatedAt)
	return append(b, '}')
}

// SQL of contacts. Every statement is scoped by company_id.

const contactColumns = `id, name, surname, dni, job_title, email, secondary_email, phone, mobile_phone,
	url_avatar, address, city, with_sales, country_id, classification, stage_id, organization_id,
	assigned_to_id, user_creator_id, created_at, updated_at, version`

func (c *contact) scanDest() []any {
	return []any{&c.ID, &c.Name, &c.Surname, &c.DNI, &c.JobTitle, &c.Email, &c.SecondaryEmail, &c.Phone,
		&c.MobilePhone, &c.URLAvatar, &c.Address, &c.City, &c.WithSales, &c.CountryID, &c.Classification,
		&c.StageID, &c.OrganizationID, &c.AssignedToID, &c.UserCreatorID, &c.CreatedAt, &c.UpdatedAt, &c.Version}
}

// writableValues are the values of the columns a client sets, in the order of $2.. in
// insertContact and updateContact.
func (c *contact) writableValues() []any {
	return []any{c.Name, c.Surname, c.DNI, c.JobTitle, c.Email, c.SecondaryEmail, c.Phone, c.MobilePhone,
		c.URLAvatar, c.Address, c.City, c.WithSales, c.CountryID, c.Classification, c.StageID,
		c.OrganizationID, c.AssignedToID}
}

// contactLists is what GET /v1/contacts and /v1/contacts/count take (API.md section 6).
// schema/0003_lists.sql has an index for each sort and id filter.
var contactLists = &listSpec{
	sorts: []sortField{
		{name: "createdAt", col: "created_at", kind: keyTime},
		{name: "updatedAt", col: "updated_at", kind: keyTime},
		{name: "name", col: "name", kind: keyText},
		{name: "surname", col: "surname", kind: keyText, nullable: true},
	},
	filters: []filter{
		{name: "organizationId", col: "organization_id"},
		{name: "assignedToId", col: "assigned_to_id"},
		{name: "stageId", col: "stage_id"},
		{name: "countryId", col: "country_id"},
		{name: "userCreatorId", col: "user_creator_id"},
		{name: "withSales", col: "with_sales", kind: filterBool},
		{name: "email", col: "email", kind: filterEmail},
	},
	ranges: true,
	// q: name, surname, e-mail or phone contains it. The fields are joined by a newline, which q
	// cannot hold, so no match spans two fields.
	q: `(name || E'\n' || coalesce(surname, '') || E'\n' || coalesce(email, '') || E'\n' || coalesce(phone, ''))`,
}

// contactSortKey returns c's key in the sort of that name (list.go cursors carry it).
func contactSortKey(c *contact, sort string) (string, bool) {
	switch sort {
	case "createdAt":
		return timeKey(c.CreatedAt), false
	case "updatedAt":
		return timeKey(c.UpdatedAt), false
	case "name":
		return c.Name, false
	case "surname":
		return c.Surname.String, !c.Surname.Valid
	}
	return "", false
}

// checkContactRefs returns a field error for each reference of c that is not an object the company may
// use: a country, one of its contact stages, organizations and users. Another company's object is
// reported exactly like one that does not exist.
func checkContactRefs(ctx context.Context, q rowFunc, companyID int64, c *contact) ([]fieldError, error) {
	if !c.CountryID.Valid && !c.StageID.Valid && !c.OrganizationID.Valid && !c.AssignedToID.Valid {
		return nil, nil
	}
	const sqlRefs = `SELECT
		$2::bigint IS NULL OR EXISTS (SELECT FROM countries WHERE id = $2),
		$3::bigint IS NULL OR EXISTS (SELECT FROM stages WHERE company_id = $1 AND id = $3 AND board_id IS NULL),
		$4::bigint IS NULL OR EXISTS (SELECT FROM organizations WHERE company_id = $1 AND id = $4),
		$5::bigint IS NULL OR EXISTS (SELECT FROM users WHERE company_id = $1 AND id = $5)`
	var ok [4]bool
	err := q(ctx, sqlRefs, companyID, c.CountryID, c.StageID, c.OrganizationID, c.AssignedToID).
		Scan(&ok[0], &ok[1], &ok[2], &ok[3])
	if err != nil {
		return nil, fmt.Errorf("check contact references: %w", err)
	}
	return refErrors(ok[:], []string{"countryId", "stageId", "organizationId", "assignedToId"},
		[]string{"country", "contact stage", "organization", "user"}), nil
}

// createContact creates a contact from the members of a POST body for the tenant (the key's user is
// its creator). Bad fields and references are an *apiError.
func (s *store) createContact(ctx context.Context, t tenant, members []member) (contact, error) {
	var c contact
	errs := applyMembers(members, c.fields(), readOnlyFields)
	if c.Name == "" && !hasField(errs, "name") {
		errs = append(errs, fieldError{Field: "name", Message: "is required"})
	}
	refErrs, err := checkContactRefs(ctx, dbRow(s.db), t.companyID, &c)
	if err := fieldFailure(errs, refErrs, err); err != nil {
		return c, err
	}
	const q = `INSERT INTO contacts (company_id, name, surname, dni, job_title, email, secondary_email, phone,
		mobile_phone, url_avatar, address, city, with_sales, country_id, classification, stage_id,
		organization_id, assigned_to_id, user_creator_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
		RETURNING id, created_at, updated_at, version`
	c.UserCreatorID = t.userID
	args := append(append([]any{t.companyID}, c.writableValues()...), t.userID)
	err = s.db.QueryRowContext(ctx, q, args...).Scan(&c.ID, &c.CreatedAt, &c.UpdatedAt, &c.Version)
	if err != nil {
		return c, fmt.Errorf("insert contact: %w", mapWriteError(err))
	}
	return c, nil
}

// updateContact applies a merge patch to the company's contact id in one transaction: it locks the
// row, checks If-Match, applies the members and, when something changed, validates and writes it,
// moving updatedAt. It returns errNotFound, errPreconditionFailed, or an *apiError for bad fields.
// References are checked only when the patch changes them: the ones already stored were checked when
// they were written, and the company-scoped foreign keys keep them so.
func (s *store) updateContact(ctx context.Context, companyID, id int64, ifMatch string, members []member) (contact, error) {
	var c contact
	lock := `SELECT ` + contactColumns + ` FROM contacts WHERE company_id = $1 AND id = $2 FOR UPDATE`
	err := s.updateLocked(ctx, lock, []any{companyID, id}, c.scanDest(), func(conn *pgx.Conn) (string, []any, []any, error) {
		if !ifMatchOK(ifMatch, c.Version) {
			return "", nil, nil, errPreconditionFailed
		}
		old := c
		errs := applyMembers(members, c.fields(), readOnlyFields)
		if errs == nil && c == old {
			return "", nil, nil, nil // nothing changed: updatedAt and the ETag stay
		}
		var refErrs []fieldError
		var err error
		if c.CountryID != old.CountryID || c.StageID != old.StageID || c.OrganizationID != old.OrganizationID ||
			c.AssignedToID != old.AssignedToID {
			refErrs, err = checkContactRefs(ctx, connRow(conn), companyID, &c)
		}
		if err := fieldFailure(errs, refErrs, err); err != nil {
			return "", nil, nil, err
		}
		const upd = `UPDATE contacts SET name = $3, surname = $4, dni = $5, job_title = $6, email = $7,
			secondary_email = $8, phone = $9, mobile_phone = $10, url_avatar = $11, address = $12, city = $13,
			with_sales = $14, country_id = $15, classification = $16, stage_id = $17, organization_id = $18,
			assigned_to_id = $19, version = version + 1,
			updated_at = greatest(date_trunc('milliseconds', now()), updated_at + interval '1 millisecond')
			WHERE company_id = $1 AND id = $2
			RETURNING updated_at, version`
		return upd, append([]any{companyID, id}, c.writableValues()...), []any{&c.UpdatedAt, &c.Version}, nil
	})
	return c, err
}

// deleteContact deletes the company's contact id if If-Match admits it. It returns errNotFound or
// errPreconditionFailed.
func (s *store) deleteContact(ctx context.Context, companyID, id int64, ifMatch string) error {
	const q = `DELETE FROM contacts WHERE company_id = $1 AND id = $2 RETURNING version`
	return s.deleteIfMatch(ctx, q, companyID, id, ifMatch)
}

// contactsResource binds contacts to the generic handlers.
func contactsResource(st *store) *resource[contact] {
	return &resource[contact]{
		path:       "/v1/contacts",
		lists:      contactLists,
		list:       listRows[contact](st.db, `SELECT `+contactColumns+` FROM contacts WHERE company_id = $1`),
		count:      countRows(st.db, `SELECT count(*) FROM contacts WHERE company_id = $1`),
		sortKey:    contactSortKey,
		get:        getJoined[contact](st.db, "contacts", contactColumns, contactExpansions),
		create:     st.createContact,
		update:     st.updateContact,
		delete:     st.deleteContact,
		st:         st,
		expansions: contactExpansions,
		ref:        contactRef,
		encode:     appendContact,
		id:         func(c *contact) int64 { return c.ID },
		version:    func(c *contact) int64 { return c.Version },
	}
}

// contactRef returns the id the contact's expansion name points at.
func contactRef(c *contact, name string) sql.NullInt64 {
	switch name {
	case "organization":
		return c.OrganizationID
	case "country":
		return c.CountryID
	case "stage":
		return c.StageID
	case "assignedTo":
		return c.AssignedToID
	case "userCreator":
		return sql.NullInt64{Int64: c.UserCreatorID, Valid: true}
	}
	return sql.NullInt64{}
}
