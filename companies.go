package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Companies: `rolodex company create` provisions one with everything it starts with, and
// `rolodex dev` a demo company with sample data.

// newCompany is what createCompany made.
type newCompany struct {
	CompanyID int64
	UserID    int64
	APIKey    string
}

// createCompany creates a company with its first user, default contact stages, a default board with
// its stages, EUR as default currency, and an API key for that user, in one transaction, to which
// each of seed adds its statements.
func (s *store) createCompany(ctx context.Context, name string, seed ...func(*tx, newCompany)) (newCompany, error) {
	var nc newCompany
	err := s.write(ctx, func(tx *tx) error {
		const qCompany = `INSERT INTO companies (name, default_currency_id) VALUES ($1, 978) RETURNING id` // 978: EUR
		if err := tx.queryRow(ctx, qCompany, []any{name}, &nc.CompanyID); err != nil {
			return fmt.Errorf("insert company: %w", err)
		}
		const qUser = `INSERT INTO users (company_id, name, surname) VALUES ($1, 'Admin', NULL) RETURNING id`
		if err := tx.queryRow(ctx, qUser, []any{nc.CompanyID}, &nc.UserID); err != nil {
			return fmt.Errorf("insert user: %w", err)
		}
		var boardID int64
		const qBoard = `INSERT INTO boards (company_id, name, is_default) VALUES ($1, 'Sales pipeline', true) RETURNING id`
		if err := tx.queryRow(ctx, qBoard, []any{nc.CompanyID}, &boardID); err != nil {
			return fmt.Errorf("insert board: %w", err)
		}
		const qStages = `INSERT INTO stages (company_id, board_id, name, position)
			SELECT $1, $2, name, ord FROM unnest($3::text[]) WITH ORDINALITY AS s(name, ord)`
		tx.queue(qStages, nc.CompanyID, nil, []string{"Lead", "Prospect", "Customer"}) // the contact stages
		tx.queue(qStages, nc.CompanyID, boardID, []string{"Qualified", "Contact made", "Proposal sent", "Negotiation", "Closing"})
		var err error
		_, nc.APIKey, err = insertAPIKey(ctx, tx, nc.CompanyID, apiKey{Name: "first key", Scopes: []string{"*"}, UserID: nc.UserID})
		for _, f := range seed {
			f(tx, nc)
		}
		return err
	})
	return nc, err
}

// cmdCompanyCreate is `rolodex company create`: it prints the new company, its user and key as one
// JSON line.
func cmdCompanyCreate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("company create", "company create -name NAME [flags]", stderr)
	name := fs.String("name", "", "company name (required)")
	return withStore(fs, getenv, args, 0, func(st *store) error {
		*name = strings.TrimSpace(*name)
		if *name == "" || len(*name) > 255 {
			fs.Usage()
			return fmt.Errorf("-name is required (1 to 255 characters): %w", errUsage)
		}
		if _, err := st.migrate(ctx); err != nil {
			return err
		}
		nc, err := st.createCompany(ctx, *name)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "{\"companyId\":%d,\"userId\":%d,\"apiKey\":%s}\n", nc.CompanyID, nc.UserID,
			appendString(nil, nc.APIKey))
		return nil
	})
}

const demoCompanyName = "Demo company"

// demoCompany returns the demo company of `rolodex dev`, creating it with its sample data on first
// use. key is the API key an earlier run printed: it is kept while it still works for the demo
// company, else a new one is made.
func (s *store) demoCompany(ctx context.Context, key string) (newCompany, error) {
	nc := newCompany{APIKey: key}
	err := s.db.QueryRowContext(ctx, `SELECT id FROM companies WHERE name = $1 ORDER BY id LIMIT 1`, demoCompanyName).Scan(&nc.CompanyID)
	if errors.Is(err, sql.ErrNoRows) {
		return s.createCompany(ctx, demoCompanyName, seedDemo)
	}
	if err == nil {
		err = s.db.QueryRowContext(ctx, `SELECT min(id) FROM users WHERE company_id = $1`, nc.CompanyID).Scan(&nc.UserID)
	}
	if err != nil {
		return nc, fmt.Errorf("find demo company: %w", err)
	}
	if t, err := s.lookupAPIKey(ctx, hashKey(key)); err == nil && t.companyID == nc.CompanyID {
		return nc, nil
	}
	nc.APIKey, err = s.createAPIKey(ctx, nc.CompanyID, 0, []string{"*"}, 0)
	return nc, err
}

// seedDemo fills a new demo company with sample organizations, users, contacts, business records and
// activities about them, in the transaction that makes it.
func seedDemo(tx *tx, nc newCompany) {
	const qOrgs = `INSERT INTO organizations (company_id, name)
		SELECT $1, unnest(ARRAY['Acme Corporation', 'Globex', 'Initech', 'Umbrella Logistics', 'Stark Industries'])`
	const qUsers = `INSERT INTO users (company_id, name, surname, email) VALUES
		($1, 'Ana', 'García', 'ana@example.com'), ($1, 'Ben', 'Okafor', 'ben@example.com')`
	// 60 contacts spread over the organizations, stages, users and a few countries.
	const qContacts = `INSERT INTO contacts (company_id, name, surname, email, phone, job_title, city,
			with_sales, country_id, stage_id, organization_id, assigned_to_id, user_creator_id)
		SELECT $1, (ARRAY['Lucía','Omar','Mei','Jonas','Amara','Diego','Sofia','Kenji','Noor','Liam'])[1 + i % 10],
			(ARRAY['Martín','Haddad','Chen','Berg','Okoye','García','Rossi','Sato','Aziz','Walsh'])[1 + (i / 10) % 10],
			'contact' || i || '@example.com', '+34 600 000 ' || lpad(i::text, 3, '0'),
			(ARRAY['CEO','CTO','Buyer','Sales lead','Office manager'])[1 + i % 5],
			(ARRAY['Madrid','Lisbon','Berlin','Paris','Dublin'])[1 + i % 5], i % 3 = 0,
			(ARRAY[724, 620, 276, 250, 372])[1 + i % 5],
			(SELECT id FROM stages WHERE company_id = $1 AND board_id IS NULL ORDER BY position OFFSET i % 3 LIMIT 1),
			(SELECT id FROM organizations WHERE company_id = $1 ORDER BY id OFFSET i % 5 LIMIT 1),
			(SELECT id FROM users WHERE company_id = $1 ORDER BY id OFFSET i % 3 LIMIT 1), $2
		FROM generate_series(1, 60) AS i`
	// 20 deals over the default board's stages.
	const qBusiness = `INSERT INTO business (company_id, title, value, deadline, position, status_id,
			organization_id, currency_id, user_owner_id, user_creator_id, board_id, stage_id)
		SELECT $1, (ARRAY['Annual licence','Pilot project','Support renewal','Hardware order'])[1 + i % 4] || ' #' || i,
			(i * 1250.5)::numeric, date_trunc('milliseconds', now()) + i * interval '3 days', i, 1 + (i % 7 = 0)::int,
			(SELECT id FROM organizations WHERE company_id = $1 ORDER BY id OFFSET i % 5 LIMIT 1), 978,
			$2, $2, (SELECT id FROM boards WHERE company_id = $1 AND is_default),
			(SELECT s.id FROM stages s JOIN boards b ON b.company_id = s.company_id AND b.id = s.board_id
				WHERE s.company_id = $1 AND b.is_default ORDER BY s.position OFFSET i % 5 LIMIT 1)
		FROM generate_series(1, 20) AS i`
	// 10 activities, the first ten deals their targets.
	const qActivities = `INSERT INTO activities (company_id, type, subject, body, occurred_at, due_at, user_owner_id, user_creator_id)
		SELECT $1, (ARRAY['call','meeting','task','email','note'])[1 + i % 5], 'Follow-up #' || i, 'Notes of follow-up #' || i,
			date_trunc('milliseconds', now()) - i * interval '1 day',
			CASE WHEN i % 5 = 2 THEN date_trunc('milliseconds', now()) + i * interval '1 day' END, $2, $2
		FROM generate_series(1, 10) AS i`
	const qTargets = `WITH made AS (INSERT INTO associations (company_id, a_kind, a_id, b_kind, b_id, occurred_at, due_at, done_at, type)
		SELECT $1, 'activities', a.id, 'business', b.id, a.occurred_at, a.due_at, a.done_at, a.type
		FROM (SELECT id, occurred_at, due_at, done_at, type, row_number() OVER (ORDER BY id) AS n FROM activities WHERE company_id = $1) AS a
		JOIN (SELECT id, row_number() OVER (ORDER BY id) AS n FROM business WHERE company_id = $1) AS b USING (n)
		RETURNING id, a_kind, a_id, b_kind, b_id, label), ` + targetsAdded + ` SELECT count(*) FROM made`
	tx.queue(qOrgs, nc.CompanyID)
	tx.queue(qUsers, nc.CompanyID)
	tx.queue(qContacts, nc.CompanyID, nc.UserID)
	tx.queue(qBusiness, nc.CompanyID, nc.UserID)
	tx.queue(qActivities, nc.CompanyID, nc.UserID)
	tx.queue(qTargets, nc.CompanyID)
}
