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
		return nil
	})
}
