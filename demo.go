package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// The demo company `rolodex dev` serves, so a first look needs no set-up.

const demoCompanyName = "Demo company"

// ensureDatabase creates database name on the server at adminURL unless it exists.
func ensureDatabase(ctx context.Context, adminURL, name string) error {
	st, err := openStore(dbConfig{url: adminURL, maxConns: 1})
	if err != nil {
		return err
	}
	defer st.Close()
	var exists bool
	if err := st.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return fmt.Errorf("look for database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	// CREATE DATABASE takes no parameters; the name is quoted as an identifier.
	if _, err := st.db.ExecContext(ctx, `CREATE DATABASE `+quoteIdent(name)); err != nil && pgCode(err) != "42P04" {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// quoteIdent quotes a PostgreSQL identifier.
func quoteIdent(s string) string {
	out := []byte{'"'}
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			out = append(out, '"')
		}
		out = append(out, s[i])
	}
	return string(append(out, '"'))
}

// demoCompany returns the demo company with a new API key (keys are shown once, so every run makes
// one), creating the company and its sample data on first use.
func (s *store) demoCompany(ctx context.Context) (newCompany, error) {
	var nc newCompany
	err := s.db.QueryRowContext(ctx, `SELECT id FROM companies WHERE name = $1 ORDER BY id LIMIT 1`, demoCompanyName).Scan(&nc.CompanyID)
	if err == nil {
		nc.APIKey, err = s.createAPIKey(ctx, nc.CompanyID, 0)
		return nc, err
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nc, fmt.Errorf("find demo company: %w", err)
	}
	if nc, err = s.createCompany(ctx, demoCompanyName); err != nil {
		return nc, err
	}
	return nc, s.seedDemo(ctx, nc)
}

// seedDemo fills a new demo company with sample organizations, users, contacts and business records.
func (s *store) seedDemo(ctx context.Context, nc newCompany) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		const qOrgs = `INSERT INTO organizations (company_id, name)
			SELECT $1, unnest(ARRAY['Acme Corporation', 'Globex', 'Initech', 'Umbrella Logistics', 'Stark Industries'])`
		if _, err := tx.ExecContext(ctx, qOrgs, nc.CompanyID); err != nil {
			return fmt.Errorf("seed organizations: %w", err)
		}
		const qUsers = `INSERT INTO users (company_id, name, surname, email) VALUES
			($1, 'Ana', 'García', 'ana@example.com'), ($1, 'Ben', 'Okafor', 'ben@example.com')`
		if _, err := tx.ExecContext(ctx, qUsers, nc.CompanyID); err != nil {
			return fmt.Errorf("seed users: %w", err)
		}
		// 60 contacts spread over the organizations, stages, users and a few countries.
		const qContacts = `INSERT INTO contacts (company_id, name, surname, email, phone, job_title, city,
				with_sales, country_id, stage_id, organization_id, assigned_to_id, user_creator_id)
			SELECT $1, (ARRAY['Lucía','Omar','Mei','Jonas','Amara','Diego','Sofia','Kenji','Noor','Liam'])[1 + i % 10],
				(ARRAY['Martín','Haddad','Chen','Berg','Okoye','Ruiz','Rossi','Sato','Aziz','Walsh'])[1 + (i / 10) % 10],
				'contact' || i || '@example.com', '+34 600 000 ' || lpad(i::text, 3, '0'),
				(ARRAY['CEO','CTO','Buyer','Sales lead','Office manager'])[1 + i % 5],
				(ARRAY['Madrid','Lisbon','Berlin','Paris','Dublin'])[1 + i % 5], i % 3 = 0,
				(ARRAY[724, 620, 276, 250, 372])[1 + i % 5],
				(SELECT id FROM stages WHERE company_id = $1 AND board_id IS NULL ORDER BY position OFFSET i % 3 LIMIT 1),
				(SELECT id FROM organizations WHERE company_id = $1 ORDER BY id OFFSET i % 5 LIMIT 1),
				(SELECT id FROM users WHERE company_id = $1 ORDER BY id OFFSET i % 3 LIMIT 1), $2
			FROM generate_series(1, 60) AS i`
		if _, err := tx.ExecContext(ctx, qContacts, nc.CompanyID, nc.UserID); err != nil {
			return fmt.Errorf("seed contacts: %w", err)
		}
		// 20 deals over the default board's stages.
		const qBusiness = `INSERT INTO business (company_id, title, value, deadline, position, status_id,
				organization_id, currency_id, user_owner_id, user_creator_id, board_id, stage_id)
			SELECT $1, (ARRAY['Annual licence','Pilot project','Support renewal','Hardware order'])[1 + i % 4] || ' #' || i,
				(i * 1250.5)::numeric, date_trunc('milliseconds', now()) + i * interval '3 days', i, 1 + (i % 7 = 0)::int,
				(SELECT id FROM organizations WHERE company_id = $1 ORDER BY id OFFSET i % 5 LIMIT 1), 978,
				$2, $2, b.id, (SELECT id FROM stages WHERE company_id = $1 AND board_id = b.id ORDER BY position OFFSET i % 5 LIMIT 1)
			FROM generate_series(1, 20) AS i, boards b WHERE b.company_id = $1 AND b.is_default`
		if _, err := tx.ExecContext(ctx, qBusiness, nc.CompanyID, nc.UserID); err != nil {
			return fmt.Errorf("seed business: %w", err)
		}
		return nil
	})
}
