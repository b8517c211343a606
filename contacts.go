package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// contact is a person the company deals with (API.md section 3, SEED-SPEC.md 2.1).
type contact struct {
	ID             int64
	Name           string
	Surname        pgtype.Text
	DNI            pgtype.Text
	JobTitle       pgtype.Text
	Email          pgtype.Text
	SecondaryEmail pgtype.Text
	Phone          pgtype.Text
	MobilePhone    pgtype.Text
	URLAvatar      pgtype.Text
	Address        pgtype.Text
	City           pgtype.Text
	WithSales      bool
	CountryID      pgtype.Int8
	Classification pgtype.Int8
	StageID        pgtype.Int8
	OrganizationID pgtype.Int8
	AssignedToID   pgtype.Int8
	UserCreatorID  int64
	CreatedAt      time.Time
	UpdatedAt      time.Time
	Version        int64
	Custom         customValues
}

func (c *contact) fields() []bodyField {
	return []bodyField{
		{"name", requiredText(&c.Name, 255), true},
		{"surname", nullableText(&c.Surname, 255, nil), false},
		{"dni", nullableText(&c.DNI, 255, nil), false},
		{"jobTitle", nullableText(&c.JobTitle, 255, nil), false},
		{"email", nullableText(&c.Email, 255, checkEmail), false},
		{"secondaryEmail", nullableText(&c.SecondaryEmail, 255, checkEmail), false},
		{"phone", nullableText(&c.Phone, 255, nil), false},
		{"mobilePhone", nullableText(&c.MobilePhone, 255, nil), false},
		{"urlAvatar", nullableText(&c.URLAvatar, 1000, checkHTTPURL), false},
		{"address", nullableText(&c.Address, 1000, nil), false},
		{"city", nullableText(&c.City, 255, nil), false},
		{"withSales", boolean(&c.WithSales), false},
		{"countryId", nullableID(&c.CountryID), false},
		{"classification", nullableInt(&c.Classification, -1<<31, 1<<31-1), false},
		{"stageId", nullableID(&c.StageID), false},
		{"organizationId", nullableID(&c.OrganizationID), false},
		{"assignedToId", nullableID(&c.AssignedToID), false},
		{"custom", c.Custom.apply, false},
	}
}

// appendJSON appends c as JSON, keys in a fixed order; id is a string of digits (SEED-SPEC.md 2.1).
func (c *contact) appendJSON(b []byte) []byte {
	return appendObject(b, "id", (*textID)(&c.ID), "name", &c.Name, "surname", &c.Surname, "dni", &c.DNI,
		"jobTitle", &c.JobTitle, "email", &c.Email, "secondaryEmail", &c.SecondaryEmail, "phone", &c.Phone,
		"mobilePhone", &c.MobilePhone, "urlAvatar", &c.URLAvatar, "address", &c.Address, "city", &c.City,
		"withSales", &c.WithSales, "countryId", &c.CountryID, "classification", &c.Classification,
		"stageId", &c.StageID, "organizationId", &c.OrganizationID, "assignedToId", &c.AssignedToID,
		"userCreatorId", &c.UserCreatorID, "createdAt", &c.CreatedAt, "updatedAt", &c.UpdatedAt, "custom", &c.Custom)
}

func (c *contact) key() int64     { return c.ID }
func (c *contact) version() int64 { return c.Version }

func (c *contact) sortKey(sort string) (string, bool) {
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
	return c.Custom.sortKey(sort)
}

func (c *contact) relatedID(name string) (int64, bool) {
	switch name {
	case "organization":
		return c.OrganizationID.Int64, c.OrganizationID.Valid
	case "country":
		return c.CountryID.Int64, c.CountryID.Valid
	case "stage":
		return c.StageID.Int64, c.StageID.Valid
	case "assignedTo":
		return c.AssignedToID.Int64, c.AssignedToID.Valid
	case "userCreator":
		return c.UserCreatorID, true
	}
	return 0, false
}

// SQL of contacts. Every statement is scoped by company_id.

func (c *contact) scanDest() []any {
	return append([]any{&c.ID, &c.Name, &c.Surname, &c.DNI, &c.JobTitle, &c.Email, &c.SecondaryEmail, &c.Phone,
		&c.MobilePhone, &c.URLAvatar, &c.Address, &c.City, &c.WithSales, &c.CountryID, &c.Classification,
		&c.StageID, &c.OrganizationID, &c.AssignedToID, &c.UserCreatorID, &c.CreatedAt, &c.UpdatedAt, &c.Version}, c.Custom.scanDest()...)
}

var contacts = &resource{
	path:  "/v1/contacts",
	table: "contacts",
	selectSQL: `SELECT id, name, surname, dni, job_title, email, secondary_email, phone, mobile_phone,
		url_avatar, address, city, with_sales, country_id, classification, stage_id, organization_id,
		assigned_to_id, user_creator_id, created_at, updated_at, version, ` + customColumns("contacts", "contact") + `
		FROM contacts WHERE company_id = $1`,
	countSQL:   `SELECT count(*) FROM contacts WHERE company_id = $1`,
	event:      "contact",
	lists:      contactLists,
	expansions: contactExpansions,
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
	ranges:     true,
	custom:     "contact",
	associates: "contacts",
	times:      []summaryField{{name: "createdAt", col: "created_at"}, {name: "updatedAt", col: "updated_at"}},
	// q: name, surname, e-mail or phone contains it. The fields are joined by a newline, which q
	// cannot hold, so no match spans two fields.
	q:    `(name || E'\n' || coalesce(surname, '') || E'\n' || coalesce(email, '') || E'\n' || coalesce(phone, ''))`,
	qDoc: storedDoc,
}

// checkContactRefs returns fieldErrors naming each reference of c that is not an object the company
// may use: a country, one of its contact stages, organizations or users. Another company's object is
// reported exactly like one that does not exist.
func checkContactRefs(ctx context.Context, tx *tx, companyID int64, c *contact) error {
	const q = `SELECT
		$2::bigint IS NULL OR EXISTS (SELECT FROM countries WHERE id = $2),
		$3::bigint IS NULL OR EXISTS (SELECT FROM stages WHERE company_id = $1 AND id = $3 AND board_id IS NULL),
		$4::bigint IS NULL OR EXISTS (SELECT FROM organizations WHERE company_id = $1 AND id = $4),
		$5::bigint IS NULL OR EXISTS (SELECT FROM users WHERE company_id = $1 AND id = $5)`
	var ok [4]bool
	err := tx.queryRowAlike(ctx, q, []any{companyID, c.CountryID, c.StageID, c.OrganizationID, c.AssignedToID},
		&ok[0], &ok[1], &ok[2], &ok[3])
	if err != nil {
		return fmt.Errorf("check contact references: %w", err)
	}
	return refErrors(ok[:], []string{"countryId", "stageId", "organizationId", "assignedToId"},
		[]string{"country", "contact stage", "organization", "user"})
}

// createContact stores a new contact c for the tenant in tx (its user is the creator), with its
// event. References to objects the company does not have are fieldErrors. Round trips: the
// reference check (with BEGIN), the INSERT; the event goes with COMMIT.
func createContact(ctx context.Context, tx *tx, t tenant, c contact) (contact, error) {
	fields := queueCustomFields(tx, t.companyID, "contact", nil, &c.Custom) // read with the reference check
	if err := checkContactRefs(ctx, tx, t.companyID, &c); err != nil {
		return c, err
	}
	if err := checkCustom(ctx, tx, t.companyID, "contact", 0, &c.Custom, fields); err != nil {
		return c, err
	}
	const q = `INSERT INTO contacts (company_id, user_creator_id, name, surname, dni, job_title, email,
		secondary_email, phone, mobile_phone, url_avatar, address, city, with_sales, country_id,
		classification, stage_id, organization_id, assigned_to_id, custom)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)
		RETURNING id, created_at, updated_at, version`
	c.UserCreatorID = t.userID
	err := tx.queryRow(ctx, q, append([]any{t.companyID, t.userID}, c.writableValues()...),
		&c.ID, &c.CreatedAt, &c.UpdatedAt, &c.Version)
	if err != nil {
		return c, fmt.Errorf("insert contact: %w", mapWriteError(err))
	}
	if err := saveCustom(ctx, tx, t.companyID, c.ID, &c.Custom); err != nil {
		return c, err
	}
	recordEvent(tx, t.companyID, "contact.created", c.appendJSON(nil), nil)
	return c, nil
}

// updateContact applies p to the company's contact id in tx (lockObject), moving updatedAt and the
// version, with its event. References the patch changes to objects the company does not have are
// fieldErrors (the ones already stored were checked when they were written, and the foreign keys
// keep them so). Round trips: the lock (with BEGIN), the reference check when a reference changed,
// the UPDATE; the event goes with COMMIT.
func updateContact(ctx context.Context, tx *tx, t tenant, id int64, p patch) (contact, error) {
	fields := queueCustomFields(tx, t.companyID, "contact", p.members, nil) // read with the lock
	old, c, changed, err := lockObject[contact](ctx, tx, contacts, t.companyID, id, p)
	if err != nil || !changed {
		return c, err
	}
	if err := checkCustom(ctx, tx, t.companyID, "contact", id, &c.Custom, fields); err != nil {
		return c, err
	}
	if c.CountryID != old.CountryID || c.StageID != old.StageID || c.OrganizationID != old.OrganizationID ||
		c.AssignedToID != old.AssignedToID {
		if err := checkContactRefs(ctx, tx, t.companyID, &c); err != nil {
			return c, err
		}
	}
	q := `UPDATE contacts SET name = $3, surname = $4, dni = $5, job_title = $6, email = $7,
		secondary_email = $8, phone = $9, mobile_phone = $10, url_avatar = $11, address = $12, city = $13,
		with_sales = $14, country_id = $15, classification = $16, stage_id = $17, organization_id = $18,
		assigned_to_id = $19, custom = coalesce($20::json, custom), ` + bumpVersion + `
		WHERE company_id = $1 AND id = $2
		RETURNING updated_at, version`
	err = tx.queryRow(ctx, q, append([]any{t.companyID, id}, c.writableValues()...), &c.UpdatedAt, &c.Version)
	if err != nil {
		return c, fmt.Errorf("update contact %d: %w", id, mapWriteError(err))
	}
	if err := saveCustom(ctx, tx, t.companyID, id, &c.Custom); err != nil {
		return c, err
	}
	recordEvent(tx, t.companyID, "contact.updated", c.appendJSON(nil), old.appendJSON(nil))
	return c, nil
}

// writableValues are the values of the columns a client sets, in the order of the statements above.
func (c *contact) writableValues() []any {
	return []any{c.Name, c.Surname, c.DNI, c.JobTitle, c.Email, c.SecondaryEmail, c.Phone, c.MobilePhone,
		c.URLAvatar, c.Address, c.City, c.WithSales, c.CountryID, c.Classification, c.StageID,
		c.OrganizationID, c.AssignedToID, c.Custom.stored()}
}
