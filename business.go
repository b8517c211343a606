package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// business is a deal in a board's pipeline (API.md section 3, SEED-SPEC.md 2.2).
type business struct {
	ID             int64
	Title          string
	Value          sql.NullString // exact decimal text, as PostgreSQL's numeric keeps it
	Deadline       sql.NullTime
	Private        bool
	Position       int64
	DateWon        sql.NullTime
	ReasonLost     sql.NullString
	StatusID       int64
	OrganizationID sql.NullInt64
	CurrencyID     int64
	UserOwnerID    int64
	UserCreatorID  int64
	BoardID        int64
	StageID        int64
	CreatedAt      time.Time
	UpdatedAt      time.Time
	Version        int64
}

// statusOpen is the status a business starts in (schema/0002_reference_data.sql).
const statusOpen = 1

// fields are the fields a client may set, applied onto b.
func (b *business) fields() []bodyField {
	return []bodyField{
		{"title", requiredText(&b.Title, 255)},
		{"value", money(&b.Value)},
		{"deadline", nullableTime(&b.Deadline)},
		{"private", boolean(&b.Private)},
		{"position", requiredInt(&b.Position, 0, 1<<31-1)},
		{"dateWon", nullableTime(&b.DateWon)},
		{"reasonLost", nullableText(&b.ReasonLost, 1000, nil)},
		{"statusId", requiredID(&b.StatusID)},
		{"organizationId", nullableID(&b.OrganizationID)},
		{"currencyId", requiredID(&b.CurrencyID)},
		{"userOwnerId", requiredID(&b.UserOwnerID)},
		{"boardId", requiredID(&b.BoardID)},
		{"stageId", requiredID(&b.StageID)},
	}
}

// maxMoneyDigits is how many digits an amount may have before its decimal point.
const maxMoneyDigits = 13

// money sets an exact amount or null. The JSON number's own text is read, never a float64: 0 or
// more, at most 2 fractional digits as written (0.10 stays 0.10), an exponent applied (1e2 is 100).
func money(p *sql.NullString) func(json.RawMessage) string {
	return func(raw json.RawMessage) string {
		if isNull(raw) {
			*p = sql.NullString{}
			return ""
		}
		s, msg := parseMoney(string(raw))
		if msg != "" {
			return msg
		}
		*p = sql.NullString{String: s, Valid: true}
		return ""
	}
}

// parseMoney returns the canonical decimal text of a JSON number that is a valid amount, or what is
// wrong with it.
func parseMoney(s string) (string, string) {
	if s == "" || s[0] == '"' || s[0] == '{' || s[0] == '[' || s == "true" || s == "false" {
		return "", "must be a number"
	}
	if s[0] == '-' {
		return "", "must be 0 or more"
	}
	mant, expText, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, hasPoint := strings.Cut(mant, ".")
	if !allDigits(intPart) || (len(intPart) > 1 && intPart[0] == '0') || (hasPoint && !allDigits(frac)) {
		return "", "must be a number"
	}
	exp := 0
	if hasExp {
		e, err := strconv.Atoi(expText)
		if err != nil || !allDigits(strings.TrimLeft(expText, "+-")) {
			return "", "must be a number"
		}
		if e > 2*maxMoneyDigits || e < -2*maxMoneyDigits {
			return "", fmt.Sprintf("must be below 1e%d with at most 2 decimal places", maxMoneyDigits)
		}
		exp = e
	}
	// Move the decimal point exp places within the digits, padding with zeros.
	digits, point := intPart+frac, len(intPart)+exp
	if point > len(digits) {
		digits += strings.Repeat("0", point-len(digits))
	}
	if point < 0 {
		digits, point = strings.Repeat("0", -point)+digits, 0
	}
	whole, fraction := strings.TrimLeft(digits[:point], "0"), digits[point:]
	if whole == "" {
		whole = "0"
	}
	if len(fraction) > 2 {
		return "", "must have at most 2 decimal places"
	}
	if len(whole) > maxMoneyDigits {
		return "", fmt.Sprintf("must be below 1e%d", maxMoneyDigits)
	}
	if fraction == "" {
		return whole, ""
	}
	return whole + "." + fraction, ""
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// appendBusiness appends b as JSON, keys in a fixed order; value is written from its decimal text.
func appendBusiness(dst []byte, b *business) []byte {
	dst = append(dst, `{"id":`...)
	dst = strconv.AppendInt(dst, b.ID, 10)
	dst = append(dst, `,"title":`...)
	dst = appendString(dst, b.Title)
	dst = append(dst, `,"value":`...)
	if b.Value.Valid {
		dst = append(dst, b.Value.String...) // validated decimal text: a JSON number as it is
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"deadline":`...)
	dst = appendNullTime(dst, b.Deadline)
	dst = append(dst, `,"private":`...)
	dst = strconv.AppendBool(dst, b.Private)
	dst = append(dst, `,"position":`...)
	dst = strconv.AppendInt(dst, b.Position, 10)
	dst = append(dst, `,"dateWon":`...)
	dst = appendNullTime(dst, b.DateWon)
	dst = append(dst, `,"reasonLost":`...)
	dst = appendNullString(dst, b.ReasonLost)
	dst = append(dst, `,"statusId":`...)
	dst = strconv.AppendInt(dst, b.StatusID, 10)
	dst = append(dst, `,"organizationId":`...)
	dst = appendNullInt(dst, b.OrganizationID)
	dst = append(dst, `,"currencyId":`...)
	dst = strconv.AppendInt(dst, b.CurrencyID, 10)
	dst = append(dst, `,"userOwnerId":`...)
	dst = strconv.AppendInt(dst, b.UserOwnerID, 10)
	dst = append(dst, `,"userCreatorId":`...)
	dst = strconv.AppendInt(dst, b.UserCreatorID, 10)
	dst = append(dst, `,"boardId":`...)
	dst = strconv.AppendInt(dst, b.BoardID, 10)
	dst = append(dst, `,"stageId":`...)
	dst = strconv.AppendInt(dst, b.StageID, 10)
	dst = append(dst, `,"createdAt":`...)
	dst = appendTime(dst, b.CreatedAt)
	dst = append(dst, `,"updatedAt":`...)
	dst = appendTime(dst, b.UpdatedAt)
	return append(dst, '}')
}

// SQL of business. Every statement is scoped by company_id.

const businessColumns = `id, title, value::text, deadline, private, position, date_won, reason_lost,
	status_id, organization_id, currency_id, user_owner_id, user_creator_id, board_id, stage_id,
	created_at, updated_at, version`

func (b *business) scanDest() []any {
	return []any{&b.ID, &b.Title, &b.Value, &b.Deadline, &b.Private, &b.Position, &b.DateWon, &b.ReasonLost,
		&b.StatusID, &b.OrganizationID, &b.CurrencyID, &b.UserOwnerID, &b.UserCreatorID, &b.BoardID, &b.StageID,
		&b.CreatedAt, &b.UpdatedAt, &b.Version}
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
	ranges: true,
	q:      "title",
}

// businessSortKey returns b's key in the sort of that name (list.go cursors carry it).
func businessSortKey(b *business, sort string) (string, bool) {
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
		return strconv.FormatInt(b.Position, 10), false
	}
	return "", false
}

// checkBusinessRefs returns a field error for each reference of b that is not an object the company
// may use: a status, a currency, its organization, user and board, and a stage of that board.
// Another company's object is reported exactly like one that does not exist.
func checkBusinessRefs(ctx context.Context, q rowFunc, companyID int64, b *business) ([]fieldError, error) {
	const sqlRefs = `SELECT
		EXISTS (SELECT FROM statuses WHERE id = $2::bigint),
		$3::bigint IS NULL OR EXISTS (SELECT FROM organizations WHERE company_id = $1 AND id = $3),
		EXISTS (SELECT FROM currencies WHERE id = $4::bigint),
		EXISTS (SELECT FROM users WHERE company_id = $1 AND id = $5),
		EXISTS (SELECT FROM boards WHERE company_id = $1 AND id = $6),
		EXISTS (SELECT FROM stages WHERE company_id = $1 AND board_id = $6 AND id = $7)`
	var ok [6]bool
	err := q(ctx, sqlRefs, companyID, b.StatusID, b.OrganizationID, b.CurrencyID,
		b.UserOwnerID, b.BoardID, b.StageID).Scan(&ok[0], &ok[1], &ok[2], &ok[3], &ok[4], &ok[5])
	if err != nil {
		return nil, fmt.Errorf("check business references: %w", err)
	}
	if !ok[4] {
		ok[5] = true // a bad board is the error; its stages are beside the point
	}
	return refErrors(ok[:], []string{"statusId", "organizationId", "currencyId", "userOwnerId", "boardId", "stageId"},
		[]string{"status", "organization", "currency", "user", "board", "stage of the business's board"}), nil
}

// createBusiness creates a business record from the members of a POST body for the tenant. Absent
// fields take the defaults: the company's currency and default board, the board's first stage, the
// "open" status, the key's user as owner, and the end of the stage as position.
func (s *store) createBusiness(ctx context.Context, t tenant, members []member) (business, error) {
	var b business
	errs := applyMembers(members, b.fields(), readOnlyFields)
	if b.Title == "" && !hasField(errs, "title") {
		errs = append(errs, fieldError{Field: "title", Message: "is required"})
	}
	if b.StatusID == 0 {
		b.StatusID = statusOpen
	}
	if b.UserOwnerID == 0 {
		b.UserOwnerID = t.userID
	}
	if b.CurrencyID == 0 || b.BoardID == 0 || b.StageID == 0 {
		const qDefaults = `SELECT c.default_currency_id, coalesce($2, d.id, 0),
			coalesce($3, (SELECT s.id FROM stages s WHERE s.company_id = $1 AND s.board_id = coalesce($2, d.id)
				ORDER BY s.position, s.id LIMIT 1), 0)
			FROM companies c LEFT JOIN boards d ON d.company_id = c.id AND d.is_default
			WHERE c.id = $1`
		var currency int64
		err := s.db.QueryRowContext(ctx, qDefaults, t.companyID, nullID(b.BoardID), nullID(b.StageID)).
			Scan(&currency, &b.BoardID, &b.StageID)
		if err != nil {
			return b, fmt.Errorf("business defaults: %w", err)
		}
		if b.CurrencyID == 0 {
			b.CurrencyID = currency
		}
	}
	refErrs, err := checkBusinessRefs(ctx, dbRow(s.db), t.companyID, &b)
	if err := fieldFailure(errs, refErrs, err); err != nil {
		return b, err
	}
	b.UserCreatorID = t.userID
	position := sql.NullInt64{Int64: b.Position, Valid: hasMember(members, "position")}
	const q = `INSERT INTO business (company_id, title, value, deadline, private, position, date_won,
		reason_lost, status_id, organization_id, currency_id, user_owner_id, board_id, stage_id, user_creator_id)
		VALUES ($1, $2, $3::numeric, $4, $5,
			coalesce($6, (SELECT least(coalesce(max(position), 0)::bigint + 1, 2147483647)
				FROM business WHERE company_id = $1 AND stage_id = $14)),
			$7, $8, $9, $10, $11, $12, $13, $14, $15)
		RETURNING id, position, created_at, updated_at, version`
	// A pgx batch is one implicit transaction: the stage's lock and the insert go out in one round
	// trip and commit together at its end, or neither does.
	err = withPgx(ctx, s.db, func(conn *pgx.Conn) error {
		var batch pgx.Batch
		if !position.Valid {
			// Creates that default their position take turns per stage, so each gets its own end of it.
			// NO KEY UPDATE does not block the foreign-key checks of other writes to the stage.
			batch.Queue(`SELECT FROM stages WHERE company_id = $1 AND id = $2 FOR NO KEY UPDATE`, t.companyID, b.StageID)
		}
		batch.Queue(q, t.companyID, b.Title, b.Value, b.Deadline, b.Private, position, b.DateWon, b.ReasonLost,
			b.StatusID, b.OrganizationID, b.CurrencyID, b.UserOwnerID, b.BoardID, b.StageID, t.userID)
		br := conn.SendBatch(ctx, &batch)
		defer br.Close()
		if !position.Valid {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("lock stage: %w", err)
			}
		}
		err := br.QueryRow().Scan(&b.ID, &b.Position, &b.CreatedAt, &b.UpdatedAt, &b.Version)
		if err != nil {
			return fmt.Errorf("insert business: %w", mapWriteError(err))
		}
		return br.Close()
	})
	return b, err
}

// updateBusiness applies a merge patch to the company's business id in one transaction, like
// updateContact; stageId must stay a stage of boardId whichever of them changes.
func (s *store) updateBusiness(ctx context.Context, companyID, id int64, ifMatch string, members []member) (business, error) {
	var b business
	lock := `SELECT ` + businessColumns + ` FROM business WHERE company_id = $1 AND id = $2 FOR UPDATE`
	err := s.updateLocked(ctx, lock, []any{companyID, id}, b.scanDest(), func(conn *pgx.Conn) (string, []any, []any, error) {
		if !ifMatchOK(ifMatch, b.Version) {
			return "", nil, nil, errPreconditionFailed
		}
		b.Deadline.Time, b.DateWon.Time = b.Deadline.Time.UTC(), b.DateWon.Time.UTC() // as the body's are
		old := b
		errs := applyMembers(members, b.fields(), readOnlyFields)
		if errs == nil && b == old {
			return "", nil, nil, nil // nothing changed: updatedAt and the ETag stay
		}
		var refErrs []fieldError
		var err error
		if b.StatusID != old.StatusID || b.OrganizationID != old.OrganizationID || b.CurrencyID != old.CurrencyID ||
			b.UserOwnerID != old.UserOwnerID || b.BoardID != old.BoardID || b.StageID != old.StageID {
			refErrs, err = checkBusinessRefs(ctx, connRow(conn), companyID, &b)
		}
		if err := fieldFailure(errs, refErrs, err); err != nil {
			return "", nil, nil, err
		}
		const upd = `UPDATE business SET title = $3, value = $4::numeric, deadline = $5, private = $6,
			position = $7, date_won = $8, reason_lost = $9, status_id = $10, organization_id = $11,
			currency_id = $12, user_owner_id = $13, board_id = $14, stage_id = $15, version = version + 1,
			updated_at = greatest(date_trunc('milliseconds', now()), updated_at + interval '1 millisecond')
			WHERE company_id = $1 AND id = $2
			RETURNING updated_at, version`
		return upd, []any{companyID, id, b.Title, b.Value, b.Deadline, b.Private, b.Position, b.DateWon,
				b.ReasonLost, b.StatusID, b.OrganizationID, b.CurrencyID, b.UserOwnerID, b.BoardID, b.StageID},
			[]any{&b.UpdatedAt, &b.Version}, nil
	})
	return b, err
}

// deleteBusiness deletes the company's business id if If-Match admits it. It returns errNotFound or
// errPreconditionFailed.
func (s *store) deleteBusiness(ctx context.Context, companyID, id int64, ifMatch string) error {
	const q = `DELETE FROM business WHERE company_id = $1 AND id = $2 RETURNING version`
	return s.deleteIfMatch(ctx, q, companyID, id, ifMatch)
}

// businessResource binds business records to the generic handlers.
func businessResource(st *store) *resource[business] {
	return &resource[business]{
		path:       "/v1/business",
		lists:      businessLists,
		list:       listRows[business](st.db, `SELECT `+businessColumns+` FROM business WHERE company_id = $1`),
		count:      countRows(st.db, `SELECT count(*) FROM business WHERE company_id = $1`),
		sortKey:    businessSortKey,
		get:        getJoined[business](st.db, "business", businessColumns, businessExpansions),
		create:     st.createBusiness,
		update:     st.updateBusiness,
		delete:     st.deleteBusiness,
		st:         st,
		expansions: businessExpansions,
		ref:        businessRef,
		encode:     appendBusiness,
		id:         func(b *business) int64 { return b.ID },
		version:    func(b *business) int64 { return b.Version },
	}
}

// businessRef returns the id the business's expansion name points at.
func businessRef(b *business, name string) sql.NullInt64 {
	switch name {
	case "organization":
		return b.OrganizationID
	case "stage":
		return sql.NullInt64{Int64: b.StageID, Valid: true}
	case "userCreator":
		return sql.NullInt64{Int64: b.UserCreatorID, Valid: true}
	}
	return sql.NullInt64{}
}
