package main

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// business is a deal in a board's pipeline (API.md section 3, SEED-SPEC.md 2.2).
type business struct {
	ID             int64
	Title          string
	Value          pgtype.Text // exact decimal text, as PostgreSQL's numeric keeps it
	Deadline       pgtype.Timestamptz
	Private        bool
	Position       pgtype.Int8 // never null once stored; not given on create: the end of its stage
	DateWon        pgtype.Timestamptz
	ReasonLost     pgtype.Text
	StatusID       int64 // 0 (not given on create): the "open" status
	OrganizationID pgtype.Int8
	CurrencyID     int64 // 0 (not given on create): the company's currency
	UserOwnerID    int64 // 0 (not given on create): the key's user
	UserCreatorID  int64
	BoardID        int64 // 0 (not given on create): the company's default board
	StageID        int64 // 0 (not given on create): the board's first stage
	CreatedAt      time.Time
	UpdatedAt      time.Time
	Version        int64
	Custom         customValues
}

// statusOpen is the status a business starts in (schema/0002_reference_data.sql).
const statusOpen = 1

func (b *business) fields() []bodyField {
	return []bodyField{
		{"title", requiredText(&b.Title, 255), true},
		{"value", money(&b.Value), false},
		{"deadline", nullableTime(&b.Deadline), false},
		{"private", boolean(&b.Private), false},
		{"position", requiredInt(&b.Position, 0, 1<<31-1), false},
		{"dateWon", nullableTime(&b.DateWon), false},
		{"reasonLost", nullableText(&b.ReasonLost, 1000, nil), false},
		{"statusId", requiredID(&b.StatusID), false},
		{"organizationId", nullableID(&b.OrganizationID), false},
		{"currencyId", requiredID(&b.CurrencyID), false},
		{"userOwnerId", requiredID(&b.UserOwnerID), false},
		{"boardId", requiredID(&b.BoardID), false},
		{"stageId", requiredID(&b.StageID), false},
		{"custom", b.Custom.apply, false},
	}
}

// appendJSON appends b as JSON, keys in a fixed order; value is written from its exact decimal text.
func (b *business) appendJSON(dst []byte) []byte {
	return appendObject(dst, "id", &b.ID, "title", &b.Title, "value", (*decimal)(&b.Value), "deadline", &b.Deadline,
		"private", &b.Private, "position", &b.Position, "dateWon", &b.DateWon, "reasonLost", &b.ReasonLost,
		"statusId", &b.StatusID, "organizationId", &b.OrganizationID, "currencyId", &b.CurrencyID,
		"userOwnerId", &b.UserOwnerID, "userCreatorId", &b.UserCreatorID, "boardId", &b.BoardID,
		"stageId", &b.StageID, "createdAt", &b.CreatedAt, "updatedAt", &b.UpdatedAt, "custom", &b.Custom)
}

func (b *business) key() int64     { return b.ID }
func (b *business) version() int64 { return b.Version }

func (b *business) sortKey(sort string) (string, bool) {
	switch sort {
	case "createdAt":
		return timeKey(b.CreatedAt), false
	case "updatedAt":
		return timeKey(b.UpdatedAt), false
	case "title":
		return b.Title, false
	case "value":
		return b.Value.String, !b.Value.Valid
	case "deadline":
		if !b.Deadline.Valid {
			return "", true
		}
		return timeKey(b.Deadline.Time), false
	case "position":
		return strconv.FormatInt(b.Position.Int64, 10), false
	}
	return b.Custom.sortKey(sort)
}

func (b *business) relatedID(name string) (int64, bool) {
	switch name {
	case "organization":
		return b.OrganizationID.Int64, b.OrganizationID.Valid
	case "stage":
		return b.StageID, true
	case "userCreator":
		return b.UserCreatorID, true
	}
	return 0, false
}

// SQL of business. Every statement is scoped by company_id.

func (b *business) scanDest() []any {
	return append([]any{&b.ID, &b.Title, &b.Value, &b.Deadline, &b.Private, &b.Position, &b.DateWon, &b.ReasonLost,
		&b.StatusID, &b.OrganizationID, &b.CurrencyID, &b.UserOwnerID, &b.UserCreatorID, &b.BoardID, &b.StageID,
		&b.CreatedAt, &b.UpdatedAt, &b.Version}, b.Custom.scanDest()...)
}

var businesses = &resource{
	path:  "/v1/business",
	table: "business",
	selectSQL: `SELECT id, title, value::text, deadline, private, position, date_won, reason_lost,
		status_id, organization_id, currency_id, user_owner_id, user_creator_id, board_id, stage_id,
		created_at, updated_at, version, ` + customColumns("business", "business") + `
		FROM business WHERE company_id = $1`,
	countSQL:   `SELECT count(*) FROM business WHERE company_id = $1`,
	event:      "business",
	lists:      businessLists,
	expansions: businessExpansions,
}

// businessLists is what GET /v1/business and /v1/business/count take (API.md section 6).
// schema/0003_lists.sql has an index for each sort and id filter.
var businessLists = &listSpec{
	sorts: []sortField{
		{name: "createdAt", col: "created_at", kind: keyTime},
		{name: "updatedAt", col: "updated_at", kind: keyTime},
		{name: "title", col: "title", kind: keyText},
		{name: "value", col: "value", kind: keyNumeric, nullable: true},
		{name: "deadline", col: "deadline", kind: keyTime, nullable: true},
		{name: "position", col: "position", kind: keyInt},
	},
	filters: []filter{
		{name: "organizationId", col: "organization_id"},
		{name: "stageId", col: "stage_id"},
		{name: "boardId", col: "board_id"},
		{name: "statusId", col: "status_id"},
		{name: "userOwnerId", col: "user_owner_id"},
		{name: "currencyId", col: "currency_id"},
		{name: "private", col: "private", kind: filterBool},
	},
	ranges:     true,
	custom:     "business",
	associates: "business",
	q:          "title",
	qDoc:       storedDoc,
	times: []summaryField{{name: "createdAt", col: "created_at"}, {name: "updatedAt", col: "updated_at"},
		{name: "deadline", col: "deadline"}, {name: "dateWon", col: "date_won"}},
	numbers:  []summaryField{{name: "value", col: "value", money: true}},
	currency: "currency_id",
}

// checkBusinessRefs returns fieldErrors naming each reference of b that is not an object the company
// may use: a status, a currency, its organization, user and board, and a stage of that board.
// Another company's object is reported exactly like one that does not exist.
func checkBusinessRefs(ctx context.Context, tx *tx, companyID int64, b *business) error {
	const q = `SELECT
		EXISTS (SELECT FROM statuses WHERE id = $2::bigint),
		$3::bigint IS NULL OR EXISTS (SELECT FROM organizations WHERE company_id = $1 AND id = $3),
		EXISTS (SELECT FROM currencies WHERE id = $4::bigint),
		EXISTS (SELECT FROM users WHERE company_id = $1 AND id = $5),
		EXISTS (SELECT FROM boards WHERE company_id = $1 AND id = $6),
		NOT EXISTS (SELECT FROM boards WHERE company_id = $1 AND id = $6)
			OR EXISTS (SELECT FROM stages WHERE company_id = $1 AND board_id = $6 AND id = $7)`
	var ok [6]bool
	err := tx.queryRowAlike(ctx, q, []any{companyID, b.StatusID, b.OrganizationID, b.CurrencyID, b.UserOwnerID, b.BoardID, b.StageID},
		&ok[0], &ok[1], &ok[2], &ok[3], &ok[4], &ok[5])
	if err != nil {
		return fmt.Errorf("check business references: %w", err)
	}
	// A bad board is the error; its stages are beside the point.
	return refErrors(ok[:], []string{"statusId", "organizationId", "currencyId", "userOwnerId", "boardId", "stageId"},
		[]string{"status", "organization", "currency", "user", "board", "stage of the business's board"})
}

// createBusiness stores a new business record b for the tenant in tx, with its event. What b leaves
// unset takes the defaults: the company's currency and default board, the board's first stage, the
// "open" status, the key's user as owner, and the end of the stage as position. Round trips: the
// defaults (with BEGIN) when one is needed, the reference check, the INSERT (after the stage's lock
// when the position is the default); the event goes with COMMIT.
func createBusiness(ctx context.Context, tx *tx, t tenant, b business) (business, error) {
	b.StatusID = cmp.Or(b.StatusID, statusOpen)
	b.UserOwnerID = cmp.Or(b.UserOwnerID, t.userID)
	if b.CurrencyID == 0 || b.BoardID == 0 || b.StageID == 0 {
		const defaults = `SELECT CASE WHEN $2::bigint = 0 THEN c.default_currency_id ELSE $2 END,
				CASE WHEN $3::bigint = 0 THEN coalesce(d.id, 0) ELSE $3 END,
				CASE WHEN $4::bigint = 0 THEN coalesce((SELECT s.id FROM stages s WHERE s.company_id = $1
					AND s.board_id = CASE WHEN $3 = 0 THEN d.id ELSE $3 END ORDER BY s.position, s.id LIMIT 1), 0)
				ELSE $4 END
			FROM companies c LEFT JOIN boards d ON d.company_id = c.id AND d.is_default
			WHERE c.id = $1`
		err := tx.queryRowAlike(ctx, defaults, []any{t.companyID, b.CurrencyID, b.BoardID, b.StageID},
			&b.CurrencyID, &b.BoardID, &b.StageID)
		if err != nil {
			return b, fmt.Errorf("business defaults: %w", err)
		}
	}
	fields := queueCustomFields(tx, t.companyID, "business", nil, &b.Custom) // read with the reference check
	if err := checkBusinessRefs(ctx, tx, t.companyID, &b); err != nil {
		return b, err
	}
	if err := checkCustom(ctx, tx, t.companyID, "business", 0, &b.Custom, fields); err != nil {
		return b, err
	}
	b.UserCreatorID = t.userID
	if !b.Position.Valid {
		// Creates that default their position take turns per stage, so that each gets its own end of
		// it. NO KEY UPDATE does not block the foreign-key checks of other writes to the stage.
		tx.queue(`SELECT FROM stages WHERE company_id = $1 AND id = $2 FOR NO KEY UPDATE`, t.companyID, b.StageID)
	}
	const insert = `INSERT INTO business (company_id, user_creator_id, title, value, deadline, private,
		position, date_won, reason_lost, status_id, organization_id, currency_id, user_owner_id, board_id, stage_id, custom)
		SELECT $1, $2, $3, $4::numeric, $5, $6, coalesce($7, least(coalesce(max(position), 0)::bigint + 1, 2147483647)),
			$8, $9, $10, $11, $12, $13, $14, $15, $16::json
		FROM business WHERE company_id = $1 AND stage_id = $15
		RETURNING id, position, created_at, updated_at, version`
	err := tx.queryRow(ctx, insert, append([]any{t.companyID, t.userID}, b.writableValues()...),
		&b.ID, &b.Position, &b.CreatedAt, &b.UpdatedAt, &b.Version)
	if err != nil {
		return b, fmt.Errorf("insert business: %w", mapWriteError(err))
	}
	if err := saveCustom(ctx, tx, t.companyID, b.ID, &b.Custom); err != nil {
		return b, err
	}
	recordEvent(tx, t.companyID, "business.created", b.appendJSON(nil), nil)
	return b, nil
}

// updateBusiness applies p to the company's business record id in tx, like updateContact (and with
// its round trips); stageId must stay a stage of boardId whichever of them changes.
func updateBusiness(ctx context.Context, tx *tx, t tenant, id int64, p patch) (business, error) {
	fields := queueCustomFields(tx, t.companyID, "business", p.members, nil) // read with the lock
	old, b, changed, err := lockObject[business](ctx, tx, businesses, t.companyID, id, p)
	if err != nil || !changed {
		return b, err
	}
	if err := checkCustom(ctx, tx, t.companyID, "business", id, &b.Custom, fields); err != nil {
		return b, err
	}
	if b.StatusID != old.StatusID || b.OrganizationID != old.OrganizationID || b.CurrencyID != old.CurrencyID ||
		b.UserOwnerID != old.UserOwnerID || b.BoardID != old.BoardID || b.StageID != old.StageID {
		if err := checkBusinessRefs(ctx, tx, t.companyID, &b); err != nil {
			return b, err
		}
	}
	q := `UPDATE business SET title = $3, value = $4::numeric, deadline = $5, private = $6,
		position = $7, date_won = $8, reason_lost = $9, status_id = $10, organization_id = $11,
		currency_id = $12, user_owner_id = $13, board_id = $14, stage_id = $15, custom = coalesce($16::json, custom),
		` + bumpVersion + `
		WHERE company_id = $1 AND id = $2
		RETURNING updated_at, version`
	err = tx.queryRow(ctx, q, append([]any{t.companyID, id}, b.writableValues()...), &b.UpdatedAt, &b.Version)
	if err != nil {
		return b, fmt.Errorf("update business %d: %w", id, mapWriteError(err))
	}
	if err := saveCustom(ctx, tx, t.companyID, id, &b.Custom); err != nil {
		return b, err
	}
	recordEvent(tx, t.companyID, "business.updated", b.appendJSON(nil), old.appendJSON(nil))
	return b, nil
}

// writableValues are the values of the columns a client sets, in the order of the statements above.
func (b *business) writableValues() []any {
	return []any{b.Title, b.Value, b.Deadline, b.Private, b.Position, b.DateWon, b.ReasonLost, b.StatusID,
		b.OrganizationID, b.CurrencyID, b.UserOwnerID, b.BoardID, b.StageID, b.Custom.stored()}
}
