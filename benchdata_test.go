package main

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// The benchmark's data generator (issue 9): a company the size of a large CRM tenant, loaded with
// COPY. It is test code, so it never ships in the binary; bench_test.go calls it when ROLODEX_BENCH
// is set. Data is deterministic for a seed: the same ids, names and references on every load.

// benchSize is how much one bench company holds.
type benchSize struct {
	contacts, business, organizations, users int
}

var benchFullSize = benchSize{contacts: 1_000_000, business: 200_000, organizations: 500, users: 50}

// benchCompany is what the loader made: the company, its contacts' id range (contiguous: the
// company is loaded alone), and the ids its references may take.
type benchCompany struct {
	ID                     int64
	UserID                 int64
	ContactLo, ContactHi   int64
	BusinessLo, BusinessHi int64
	Users, Orgs            []int64
	ContactStages          []int64
	Countries              []int64
}

// Word lists for names that look like a real customer base (varied lengths, some non-ASCII).
var (
	benchFirstNames = strings.Fields(`Ana María José Luis Carmen Javier Lucía Pablo Elena Jorge Laura David Marta
		Sergio Paula Daniel Sara Carlos Irene Miguel Nuria Álvaro Cristina Raúl Beatriz Óscar Claire Pierre
		Sophie Hans Greta Lars Ingrid Marco Giulia Luca Chiara Olivia Liam Emma Noah Ava Ethan Mia Aiden
		Zoë Søren Björn François Åsa Małgorzata Jiří Dmitri Yuki Hiroshi Mei Wei Priya Arjun Fatima Omar`)
	benchSurnames = strings.Fields(`García Fernández González Rodríguez López Martínez Sánchez Pérez Gómez
		Martín Jiménez Ruiz Hernández Díaz Moreno Muñoz Álvarez Romero Alonso Gutiérrez Navarro Torres
		Domínguez Vázquez Ramos Gil Ramírez Serrano Blanco Molina Smith Johnson Williams Brown Jones
		Müller Schmidt Schneider Fischer Weber Rossi Russo Ferrari Esposito Bianchi Dupont Durand Lefèvre
		Nakamura Tanaka Wang Li Zhang Kowalski Nowak Novák Petrov Andersson Johansson O'Brien Van der Berg`)
	benchJobTitles = []string{"CEO", "CTO", "Head of Sales", "Sales Manager", "Account Executive",
		"Procurement Lead", "Office Manager", "Marketing Director", "Software Engineer", "Buyer",
		"Operations Manager", "CFO", "Founder", "Consultant", "Product Manager"}
	benchCities = []string{"Madrid", "Barcelona", "Valencia", "Sevilla", "Bilbao", "Lisboa", "Paris",
		"Lyon", "Berlin", "München", "Milano", "Roma", "London", "Dublin", "Amsterdam", "Zürich",
		"Kraków", "Praha", "Stockholm", "Tokyo", "New York", "São Paulo", "México D.F.", "Bogotá"}
	benchStreets = []string{"Calle Mayor", "Gran Vía", "Rue de Rivoli", "Hauptstraße", "Via Roma",
		"High Street", "Avenida da Liberdade", "Main Street", "Paseo de Gracia", "Kungsgatan"}
	benchDomains = []string{"example.com", "acme.io", "globex.es", "initech.com", "umbrella.co.uk",
		"hooli.com", "stark.de", "wayne.fr", "wonka.it", "cyberdyne.jp"}
	benchOrgWords = strings.Fields(`Acme Global Iberia Nordic Atlas Vertex Quantum Solar Blue Green
		Pacific Alpine Urban Prime Delta Orbit Nova Apex Summit Pioneer`)
	benchOrgKinds = []string{"S.L.", "S.A.", "GmbH", "Ltd", "Inc.", "SAS", "S.p.A.", "BV", "AB", "Group"}
	benchDeals    = []string{"Renewal", "Upsell", "New licence", "Consulting", "Hardware refresh",
		"Support plan", "Pilot", "Migration", "Training", "Expansion"}
)

// benchYear is the year the timestamps spread over, ending at a fixed instant so loads repeat.
var benchYearEnd = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

// loadBenchCompany creates a company named name and loads size into it with COPY. The connection
// that copies sets session_replication_role = replica (superuser only), which skips the foreign-key
// triggers: every reference is drawn from ids created just before, so the data is valid by construction.
func loadBenchCompany(ctx context.Context, st *store, name string, size benchSize, seed uint64) (benchCompany, error) {
	nc, err := st.createCompany(ctx, name)
	if err != nil {
		return benchCompany{}, err
	}
	bc := benchCompany{ID: nc.CompanyID, UserID: nc.UserID}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	start := benchYearEnd.AddDate(-1, 0, 0)
	stamp := func() (time.Time, time.Time) {
		c := start.Add(time.Duration(rng.Int64N(int64(365 * 24 * time.Hour)))).Truncate(time.Millisecond)
		u := c
		if rng.IntN(2) == 0 {
			u = c.Add(time.Duration(rng.Int64N(int64(benchYearEnd.Sub(c))))).Truncate(time.Millisecond)
		}
		return c, u
	}
	pick := func(words []string) string { return words[rng.IntN(len(words))] }

	conn, err := st.db.Conn(ctx)
	if err != nil {
		return bc, err
	}
	defer conn.Close()
	for _, q := range []string{`SET session_replication_role = replica`, `SET synchronous_commit = off`} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return bc, fmt.Errorf("%s: %w", q, err)
		}
	}
	copyRows := func(table string, cols []string, n int, row func(i int) []any) error {
		return conn.Raw(func(dc any) error {
			pc := dc.(*stdlib.Conn).Conn()
			i := 0
			_, err := pc.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromFunc(func() ([]any, error) {
				if i == n {
					return nil, nil
				}
				i++
				return row(i - 1), nil
			}))
			if err != nil {
				return fmt.Errorf("copy %s: %w", table, err)
			}
			return nil
		})
	}
	ids := func(q string, args ...any) ([]int64, error) {
		rows, err := conn.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return nil, err
			}
			out = append(out, id)
		}
		return out, rows.Err()
	}

	// Users (the first one exists), organizations, two more boards with their stages.
	err = copyRows("users", []string{"company_id", "name", "surname", "email", "created_at", "updated_at"}, size.users-1,
		func(i int) []any {
			c, u := stamp()
			first, last := pick(benchFirstNames), pick(benchSurnames)
			return []any{bc.ID, first, last, benchEmail(first, last, i, "rolodex-bench.test"), c, u}
		})
	if err != nil {
		return bc, err
	}
	err = copyRows("organizations", []string{"company_id", "name", "created_at", "updated_at"}, size.organizations,
		func(i int) []any {
			c, u := stamp()
			return []any{bc.ID, pick(benchOrgWords) + " " + pick(benchOrgWords) + " " + pick(benchOrgKinds) + " " + strconv.Itoa(i), c, u}
		})
	if err != nil {
		return bc, err
	}
	const qBoards = `INSERT INTO boards (company_id, name) VALUES ($1, 'Partners'), ($1, 'Renewals')`
	if _, err := conn.ExecContext(ctx, qBoards, bc.ID); err != nil {
		return bc, err
	}
	const qStages = `INSERT INTO stages (company_id, board_id, name, position)
		SELECT b.company_id, b.id, s.name, s.ord FROM boards b,
		unnest(ARRAY['Discovery', 'Offer', 'Signed']) WITH ORDINALITY AS s(name, ord)
		WHERE b.company_id = $1 AND NOT b.is_default`
	if _, err := conn.ExecContext(ctx, qStages, bc.ID); err != nil {
		return bc, err
	}
	if bc.Users, err = ids(`SELECT id FROM users WHERE company_id = $1 ORDER BY id`, bc.ID); err != nil {
		return bc, err
	}
	if bc.Orgs, err = ids(`SELECT id FROM organizations WHERE company_id = $1 ORDER BY id`, bc.ID); err != nil {
		return bc, err
	}
	if bc.ContactStages, err = ids(`SELECT id FROM stages WHERE company_id = $1 AND board_id IS NULL ORDER BY id`, bc.ID); err != nil {
		return bc, err
	}
	if bc.Countries, err = ids(`SELECT id FROM countries ORDER BY id`); err != nil {
		return bc, err
	}
	type boardStage struct{ board, stage int64 }
	var boardStages []boardStage
	rows, err := conn.QueryContext(ctx, `SELECT board_id, id FROM stages WHERE company_id = $1 AND board_id IS NOT NULL ORDER BY id`, bc.ID)
	if err != nil {
		return bc, err
	}
	for rows.Next() {
		var bs boardStage
		if err := rows.Scan(&bs.board, &bs.stage); err != nil {
			rows.Close()
			return bc, err
		}
		boardStages = append(boardStages, bs)
	}
	rows.Close()
	statuses, err := ids(`SELECT id FROM statuses ORDER BY id`)
	if err != nil {
		return bc, err
	}

	// maybe returns v, or nil (SQL NULL) 30% of the time.
	maybe := func(v any) any {
		if rng.IntN(10) < 3 {
			return nil
		}
		return v
	}
	pickID := func(ids []int64) int64 { return ids[rng.IntN(len(ids))] }
	contactCols := []string{"company_id", "name", "surname", "dni", "job_title", "email", "secondary_email",
		"phone", "mobile_phone", "url_avatar", "address", "city", "with_sales", "country_id", "classification",
		"stage_id", "organization_id", "assigned_to_id", "user_creator_id", "created_at", "updated_at"}
	err = copyRows("contacts", contactCols, size.contacts, func(i int) []any {
		first, last := pick(benchFirstNames), pick(benchSurnames)
		if rng.IntN(4) == 0 {
			first += " " + pick(benchFirstNames)
		}
		c, u := stamp()
		return []any{bc.ID, first, maybe(last + " " + pick(benchSurnames)),
			maybe(fmt.Sprintf("%08d%c", rng.IntN(100_000_000), "TRWAGMYFPDXBNJZSQVHLCKE"[rng.IntN(23)])),
			maybe(pick(benchJobTitles)), maybe(benchEmail(first, last, i, pick(benchDomains))),
			maybe(benchEmail(last, first, i, "mail.example.org")),
			maybe(fmt.Sprintf("+34 9%02d %03d %03d", rng.IntN(100), rng.IntN(1000), rng.IntN(1000))),
			maybe(fmt.Sprintf("+34 6%02d %03d %03d", rng.IntN(100), rng.IntN(1000), rng.IntN(1000))),
			maybe("https://cdn.example.com/avatars/" + strconv.Itoa(i) + ".png"),
			maybe(pick(benchStreets) + " " + strconv.Itoa(1+rng.IntN(200)) + ", " + strconv.Itoa(1+rng.IntN(9)) + "º"),
			maybe(pick(benchCities)), rng.IntN(3) == 0, maybe(pickID(bc.Countries)), maybe(int64(1 + rng.IntN(5))),
			maybe(pickID(bc.ContactStages)), maybe(pickID(bc.Orgs)), maybe(pickID(bc.Users)), pickID(bc.Users), c, u}
	})
	if err != nil {
		return bc, err
	}
	businessCols := []string{"company_id", "title", "value", "deadline", "private", "position", "date_won",
		"reason_lost", "status_id", "organization_id", "currency_id", "user_owner_id", "user_creator_id",
		"board_id", "stage_id", "created_at", "updated_at"}
	currencies := []int64{978, 840, 826}
	err = copyRows("business", businessCols, size.business, func(i int) []any {
		bs := boardStages[rng.IntN(len(boardStages))]
		c, u := stamp()
		var value any = fmt.Sprintf("%d.%02d", rng.IntN(100_000), rng.IntN(100))
		if rng.IntN(10) < 3 {
			value = nil
		}
		return []any{bc.ID, pick(benchDeals) + " " + pick(benchOrgWords) + " #" + strconv.Itoa(i), value,
			maybe(c.AddDate(0, 3, 0)), rng.IntN(10) == 0, int32(i), maybe(u), maybe(pick(benchDeals) + " went elsewhere"),
			pickID(statuses), maybe(pickID(bc.Orgs)), pickID(currencies), pickID(bc.Users), pickID(bc.Users),
			bs.board, bs.stage, c, u}
	})
	if err != nil {
		return bc, err
	}
	const qRange = `SELECT min(id), max(id) FROM %s WHERE company_id = $1`
	if err := conn.QueryRowContext(ctx, fmt.Sprintf(qRange, "contacts"), bc.ID).Scan(&bc.ContactLo, &bc.ContactHi); err != nil {
		return bc, err
	}
	if err := conn.QueryRowContext(ctx, fmt.Sprintf(qRange, "business"), bc.ID).Scan(&bc.BusinessLo, &bc.BusinessHi); err != nil {
		return bc, err
	}
	if n := bc.ContactHi - bc.ContactLo + 1; n != int64(size.contacts) {
		return bc, fmt.Errorf("contacts of company %d: ids span %d, want %d contiguous ids", bc.ID, n, size.contacts)
	}
	return bc, nil
}

// benchEmail makes a plausible, unique address: ascii-folded "first.last.N@domain".
func benchEmail(first, last string, n int, domain string) string {
	fold := func(s string) string {
		var b strings.Builder
		for _, r := range strings.ToLower(s) {
			switch {
			case r >= 'a' && r <= 'z':
				b.WriteRune(r)
			case strings.ContainsRune("áàäâå", r):
				b.WriteByte('a')
			case strings.ContainsRune("éèëê", r):
				b.WriteByte('e')
			case strings.ContainsRune("íìïî", r):
				b.WriteByte('i')
			case strings.ContainsRune("óòöôø", r):
				b.WriteByte('o')
			case strings.ContainsRune("úùüû", r):
				b.WriteByte('u')
			case r == 'ñ' || r == 'ń':
				b.WriteByte('n')
			}
		}
		return b.String()
	}
	return fold(first) + "." + fold(last) + "." + strconv.Itoa(n) + "@" + domain
}

// benchCompanyRefs reloads a bench company's ranges and reference ids from the database, for a
// cached load.
func benchCompanyRefs(ctx context.Context, db *sql.DB, companyID int64, contactHi int64) (benchCompany, error) {
	bc := benchCompany{ID: companyID, ContactHi: contactHi}
	err := db.QueryRowContext(ctx, `SELECT min(id) FROM users WHERE company_id = $1`, companyID).Scan(&bc.UserID)
	if err != nil {
		return bc, err
	}
	err = db.QueryRowContext(ctx, `SELECT min(id) FROM contacts WHERE company_id = $1`, companyID).Scan(&bc.ContactLo)
	if err != nil {
		return bc, err
	}
	lists := []struct {
		dst *[]int64
		q   string
	}{
		{&bc.Users, `SELECT id FROM users WHERE company_id = $1 ORDER BY id`},
		{&bc.Orgs, `SELECT id FROM organizations WHERE company_id = $1 ORDER BY id`},
		{&bc.ContactStages, `SELECT id FROM stages WHERE company_id = $1 AND board_id IS NULL ORDER BY id`},
		{&bc.Countries, `SELECT id FROM countries WHERE $1::bigint > 0 ORDER BY id`},
	}
	for _, l := range lists {
		rows, err := db.QueryContext(ctx, l.q, companyID)
		if err != nil {
			return bc, err
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return bc, err
			}
			*l.dst = append(*l.dst, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return bc, err
		}
	}
	return bc, nil
}
