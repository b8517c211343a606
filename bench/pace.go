package main

// BENCH_PACE (issue 49): writes at the database's pace. For each setting it lists of the contacts'
// trigram index (contacts_search, schema/0019: "off" its pending list off, as 0019 had it; a number,
// the list on with that gin_pending_list_limit in kB, as 0021 has 64), set by ALTER INDEX on the
// kept data:
// the first company's single creates and PATCHes under a steady load, with their p99 and longest
// request and the most rows the pending list held (what one flush merges); the import (importBench),
// with the CPU a row of each way; and the floors: PostgreSQL's CPU when pgbench runs the statements
// the server sent for a batch of 100 creates, and for a PATCH that sets custom values, each taken
// from PostgreSQL's log of one such request; pgbench repeats that request's values. The index is
// left as it was.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// paceRow is what one setting of the index measured.
type paceRow struct {
	setting       string
	create, patch result
	pendingRows   int64 // the most rows the pending list held under the steady load
	imp           importFigures
	batchFloor    floor   // pgbench of a batch of 100 creates' statements, at batchesPerCompany clients
	patchCustom   result  // PATCH with custom values, wrk -c32
	patchServer   float64 // the server's part of patchCustom.cpu
	patchFloor    floor   // pgbench of its statements, 32 clients
}

// floor is what pgbench measured running a request's statements: transactions a second, and
// PostgreSQL's CPU a transaction in µs.
type floor struct{ tps, cpu float64 }

// batchesPerCompany is how many batches of one company the server runs at once (batch.go).
const batchesPerCompany = 2

// paceBench runs BENCH_PACE's settings and returns RESULTS.md's section.
func paceBench(ctx context.Context, b *bench, pg *proc, bin, dbURL string) (string, error) {
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		return "", err
	}
	defer db.Close()
	var before sql.NullString
	if err := db.QueryRowContext(ctx, `SELECT array_to_string(reloptions, ', ') FROM pg_class WHERE oid = 'contacts_search'::regclass`).Scan(&before); err != nil {
		return "", err
	}
	defer restoreIndex(context.WithoutCancel(ctx), db, before.String)
	// Autovacuum starts when a table's dead or new rows pass a threshold, which this mode's imports
	// and the deletes of their companies cross at moments no window chooses; a vacuum of the contacts
	// reads each of their indexes, the trigram one too, and its CPU would count in whichever window
	// it ran in. Off for the run, which vacuums at its start and after each setting.
	if err := setAutovacuum(ctx, db, "off"); err != nil {
		return "", err
	}
	defer setAutovacuum(context.WithoutCancel(ctx), db, "")
	if _, err := db.ExecContext(ctx, `VACUUM contacts, events, object_counts`); err != nil {
		return "", err
	}
	if _, err := db.ExecContext(ctx, `CREATE EXTENSION IF NOT EXISTS pgstattuple`); err != nil {
		return "", err
	}
	custom, err := customCompany(ctx, bin, dbURL, b.bases[0])
	if err != nil {
		return "", err
	}
	defer db.ExecContext(context.WithoutCancel(ctx), `DELETE FROM companies WHERE id = $1`, custom.ID)
	var rows []paceRow
	for _, setting := range b.cfg.pace {
		if err := setPending(ctx, db, setting); err != nil {
			return "", err
		}
		fmt.Fprintf(b.stdout, "index %s\n", setting)
		row, err := paceSetting(ctx, b, db, pg, bin, dbURL, custom)
		if err != nil {
			return "", fmt.Errorf("setting %s: %w", setting, err)
		}
		row.setting = setting
		rows = append(rows, row)
	}
	return paceTable(b.cfg, rows), nil
}

// paceSetting measures one setting of the index (paceRow).
func paceSetting(ctx context.Context, b *bench, db *sql.DB, pg *proc, bin, dbURL string, custom company) (paceRow, error) {
	var row paceRow
	var err error
	for _, s := range []*result{&row.create, &row.patch} {
		sc := scenarios[slices.IndexFunc(scenarios, func(s scenario) bool { return s.name == "create" })]
		if s == &row.patch {
			sc = scenarios[slices.IndexFunc(scenarios, func(s scenario) bool { return s.name == "patch" })]
		}
		most := watchPending(ctx, db)
		*s, err = runWrk(ctx, b.script, b.bases[0], b.c, sc, b.cfg.seconds)
		row.pendingRows = max(row.pendingRows, most())
		if err != nil {
			return row, err
		}
		fmt.Fprintf(b.stdout, "  %-7s %6.0f req/s  p99 %s  max %s  pending rows at most %d\n", sc.name, s.rps, ms(float64(s.p99)), ms(float64(s.max)), row.pendingRows)
	}
	if b.cfg.imports > 0 {
		if row.imp, err = importBench(ctx, b.stdout, bin, dbURL, b.bases[0], b.cfg.imports, b.cpu); err != nil {
			return row, err
		}
	}
	if row.batchFloor, err = batchFloor(ctx, b, db, pg, bin, dbURL); err != nil {
		return row, err
	}
	if row.patchCustom, row.patchServer, row.patchFloor, err = patchFloor(ctx, b, pg, bin, dbURL, custom); err != nil {
		return row, err
	}
	// The next setting starts from the same table: without what this one's import left dead.
	_, err = db.ExecContext(ctx, `VACUUM contacts, events, object_counts`)
	return row, err
}

// setPending sets the pending list of contacts_search (setting: "off", or a limit in kB), emptied.
func setPending(ctx context.Context, db *sql.DB, setting string) error {
	q := `ALTER INDEX contacts_search SET (fastupdate = off)`
	if setting != "off" {
		q = fmt.Sprintf(`ALTER INDEX contacts_search SET (fastupdate = on, gin_pending_list_limit = %d)`, mustAtoi(setting))
	}
	for _, q := range []string{`ALTER INDEX contacts_search RESET (fastupdate, gin_pending_list_limit)`, q,
		`SELECT gin_clean_pending_list('contacts_search')`} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// restoreIndex gives contacts_search back its options (reloptions, as "a=b, c=d").
func restoreIndex(ctx context.Context, db *sql.DB, options string) {
	db.ExecContext(ctx, `ALTER INDEX contacts_search RESET (fastupdate, gin_pending_list_limit)`)
	if options != "" {
		db.ExecContext(ctx, `ALTER INDEX contacts_search SET (`+options+`)`)
	}
}

// setAutovacuum sets autovacuum ("": as the cluster has it) and makes PostgreSQL take it.
func setAutovacuum(ctx context.Context, db *sql.DB, setting string) error {
	q := `ALTER SYSTEM RESET autovacuum`
	if setting != "" {
		q = `ALTER SYSTEM SET autovacuum = ` + setting
	}
	if _, err := db.ExecContext(ctx, q); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, `SELECT pg_reload_conf()`)
	return err
}

func mustAtoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// watchPending polls the rows in contacts_search's pending list until the returned function is
// called, which returns the most it saw: the rows one flush merges.
func watchPending(ctx context.Context, db *sql.DB) func() int64 {
	stop := make(chan struct{})
	var most int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			var n int64
			if db.QueryRowContext(ctx, `SELECT pending_tuples FROM pgstatginindex('contacts_search')`).Scan(&n) == nil {
				most = max(most, n)
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	return func() int64 {
		close(stop)
		wg.Wait()
		return most
	}
}

// pgTicks is the CPU time PostgreSQL has used, in clock ticks: the postmaster's, its children's
// that ended (which it waited for) and those of its children that run.
func pgTicks(pg *proc) int64 {
	pid := pg.cmd.Process.Pid
	f := procStat(pid)
	if len(f) < 15 {
		return 0
	}
	ticks := atoi64(f[11]) + atoi64(f[12]) + atoi64(f[13]) + atoi64(f[14]) // utime, stime, cutime, cstime
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := procStat(child); len(f) > 12 && f[1] == strconv.Itoa(pid) { // its ppid
			ticks += atoi64(f[11]) + atoi64(f[12])
		}
	}
	return ticks
}

// procStat is /proc/pid/stat's fields after the command's name: state is [0], ppid [1], utime [11].
func procStat(pid int) []string {
	b, _ := os.ReadFile(fmt.Sprint("/proc/", pid, "/stat"))
	_, rest, _ := bytes.Cut(b, []byte(") "))
	return strings.Fields(string(rest))
}

func atoi64(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// newCompany makes a company with bin and returns it.
func newCompany(ctx context.Context, bin, dbURL, name string) (company, error) {
	out, err := runCmd(ctx, "", []string{"DATABASE_URL=" + dbURL}, bin, "company", "create", "-name", name)
	if err != nil {
		return company{}, err
	}
	var c company
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		return c, fmt.Errorf("company create printed %q: %w", out, err)
	}
	return c, nil
}

// customCompany makes a company whose contacts have the fields tier (select) and arr (number), and
// 1,000 contacts that hold silver and a number, and returns it with their ids.
func customCompany(ctx context.Context, bin, dbURL, base string) (company, error) {
	c, err := newCompany(ctx, bin, dbURL, "Pace custom")
	if err != nil {
		return c, err
	}
	for _, f := range []string{`{"object":"contact","key":"tier","label":"Tier","type":"select","options":[{"value":"gold","label":"Gold"},{"value":"silver","label":"Silver"}]}`,
		`{"object":"contact","key":"arr","label":"ARR","type":"number"}`} {
		if err := post(ctx, base+"/v1/customFields", c.Key, f); err != nil {
			return c, err
		}
	}
	item := `{"name":"Custom","surname":"Row","email":"custom@example.com","countryId":724,"custom":{"tier":"silver","arr":7}}`
	batch := `{"items":[` + strings.TrimSuffix(strings.Repeat(item+",", 100), ",") + `]}`
	for range 10 {
		if err := post(ctx, base+"/v1/contacts/batch/create", c.Key, batch); err != nil {
			return c, err
		}
	}
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		return c, err
	}
	defer db.Close()
	err = db.QueryRowContext(ctx, `SELECT min(id), max(id) FROM contacts WHERE company_id = $1`, c.ID).Scan(&c.lo, &c.hi)
	return c, err
}

// patchCustomBody is the PATCH whose floor patchFloor measures: it sets a field and a custom value.
const patchCustomBody = `{"jobTitle":"Analyst {rand}","custom":{"tier":"silver","arr":{rand}}}`

// batchFloor captures the statements of a batch create of 100 contacts (importContacts' items) in
// a company of its own, and runs them with pgbench at batchesPerCompany clients.
func batchFloor(ctx context.Context, b *bench, db *sql.DB, pg *proc, bin, dbURL string) (floor, error) {
	c, err := newCompany(ctx, bin, dbURL, "Pace floor")
	if err != nil {
		return floor{}, err
	}
	defer db.ExecContext(context.WithoutCancel(ctx), `DELETE FROM companies WHERE id = $1`, c.ID)
	stmts, err := captureSQL(ctx, b, bin, dbURL, "INSERT INTO contacts", func(base string) error {
		_, err := importContacts(ctx, base, c.Key, 100, 100, 1, nil)
		return err
	})
	if err != nil {
		return floor{}, err
	}
	f, err := pgbenchFloor(ctx, b, pg, dbURL, "batch100.sql", stmts, c, "", batchesPerCompany)
	f.cpu /= 100 // a row
	fmt.Fprintf(b.stdout, "  floor of a batch of 100: %.1f tps, PostgreSQL %.0f µs a row\n", f.tps, f.cpu)
	return f, err
}

// patchFloor runs PATCHes that set custom values in company c by wrk -c32, with the CPU a request
// of the server and PostgreSQL, and pgbench of the statements of one, captured, at 32 clients.
func patchFloor(ctx context.Context, b *bench, pg *proc, bin, dbURL string, c company) (r result, server float64, f floor, err error) {
	s := scenario{name: "patch+custom", method: "PATCH", path: "/v1/contacts/{id}", body: patchCustomBody}
	s1, t := b.cpu()
	if r, err = runWrk(ctx, b.script, b.bases[0], c, s, b.cfg.seconds); err != nil {
		return r, 0, f, err
	}
	s2, t2 := b.cpu()
	perRequest := func(ticks int64) float64 { return float64(ticks) * 1e4 / (r.rps * float64(b.cfg.seconds)) }
	r.cpu, server = perRequest(t2-t), perRequest(s2-s1)
	id := strconv.FormatInt(c.lo, 10)
	stmts, err := captureSQL(ctx, b, bin, dbURL, "UPDATE contacts", func(base string) error {
		return send(ctx, "PATCH", base+"/v1/contacts/"+id, c.Key, strings.ReplaceAll(patchCustomBody, "{rand}", "12345"))
	})
	if err != nil {
		return r, server, f, err
	}
	f, err = pgbenchFloor(ctx, b, pg, dbURL, "patch.sql", stmts, c, id, 32)
	fmt.Fprintf(b.stdout, "  patch+custom %.0f req/s, %.0f µs a request (the server %.0f); its floor %.0f tps, PostgreSQL %.0f µs\n", r.rps, r.cpu, server, f.tps, f.cpu)
	return r, server, f, err
}

// captureSQL starts a server of bin whose connections log every statement, runs do against it,
// and returns the transaction (loggedStatements) of the connection that sent a statement starting
// with mark: what the request sent, in order.
func captureSQL(ctx context.Context, b *bench, bin, dbURL, mark string, do func(base string) error) ([]statement, error) {
	logPath := filepath.Join(b.cfg.dir, "postgres.log")
	fi, err := os.Stat(logPath)
	if err != nil {
		return nil, err
	}
	p, base, err := startServer(ctx, bin, dbURL+"&log_statement=all", filepath.Join(b.cfg.dir, "capture.log"))
	if err != nil {
		return nil, err
	}
	err = do(base)
	p.stop(os.Interrupt)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(fi.Size(), io.SeekStart); err != nil {
		return nil, err
	}
	log, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	return loggedStatements(string(log), mark)
}

var (
	logEntry  = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \S+ \[(\d+)\] (\w+):  (.*)$`)
	logSQL    = regexp.MustCompile(`^(?:statement|execute [^:]*): `)
	logParam  = regexp.MustCompile(`\$(\d+) = (NULL|'(?:[^']|'')*')`)
	sqlParam  = regexp.MustCompile(`\$(\d+)`)
	logParams = regexp.MustCompile(`(?i)^parameters: `)
)

// statement is a statement as PostgreSQL logged it: its SQL, and its parameters' values by number,
// as logged ('text' or NULL).
type statement struct {
	sql    string
	params map[string]string
}

// loggedStatements reads PostgreSQL's log (log_statement = all) and returns the transaction of the
// backend that ran a statement starting with mark, from its BEGIN to its COMMIT.
func loggedStatements(log, mark string) ([]statement, error) {
	type entry struct {
		pid, level, msg string
	}
	var entries []*entry
	for line := range strings.Lines(log) {
		line = strings.TrimSuffix(line, "\n")
		if m := logEntry.FindStringSubmatch(line); m != nil {
			entries = append(entries, &entry{m[1], m[2], m[3]})
		} else if len(entries) > 0 {
			entries[len(entries)-1].msg += "\n" + line
		}
	}
	byPid := map[string][]statement{}
	var pid string
	at := 0 // the mark's statement
	for _, e := range entries {
		stmts := byPid[e.pid]
		switch {
		case e.level == "LOG" && logSQL.MatchString(e.msg):
			q := strings.TrimSpace(e.msg[len(logSQL.FindString(e.msg)):])
			byPid[e.pid] = append(stmts, statement{sql: q})
			if pid == "" && strings.HasPrefix(q, mark) {
				pid, at = e.pid, len(stmts)
			}
		case e.level == "DETAIL" && logParams.MatchString(e.msg) && len(stmts) > 0:
			params := map[string]string{}
			for _, m := range logParam.FindAllStringSubmatch(e.msg, -1) {
				params[m[1]] = m[2]
			}
			stmts[len(stmts)-1].params = params
		}
	}
	if pid == "" {
		return nil, fmt.Errorf("no statement starting %q in PostgreSQL's log", mark)
	}
	stmts := byPid[pid]
	begin := -1
	for i := at; i >= 0; i-- {
		if stmts[i].sql == "BEGIN" {
			begin = i
			break
		}
	}
	end := slices.IndexFunc(stmts[at:], func(s statement) bool { return s.sql == "COMMIT" })
	if begin < 0 || end < 0 {
		return nil, fmt.Errorf("no BEGIN and COMMIT around %q in PostgreSQL's log", mark)
	}
	return stmts[begin : at+end+1], nil
}

// pgbenchFloor runs stmts as one transaction, in one pipeline as the server sends them, with
// pgbench -M prepared at clients for cfg.seconds, and returns its tps and PostgreSQL's CPU a
// transaction in µs. Each parameter is a parameter again, its value given by -D (a NULL is written
// in), but a value id, which is a random contact id of c's; a statement of more parameters than
// pgbench takes (a batch's events) has all its values written in.
func pgbenchFloor(ctx context.Context, b *bench, pg *proc, dbURL, name string, stmts []statement, c company, id string, clients int) (floor, error) {
	var script strings.Builder
	fmt.Fprintf(&script, "\\set id random(%d, %d)\n\\startpipeline\n", c.lo, c.hi)
	var defines []string
	for i, st := range stmts {
		inline := len(sqlParam.FindAllString(st.sql, -1)) > 255 // pgbench's most of a statement: its values written in
		script.WriteString(sqlParam.ReplaceAllStringFunc(st.sql, func(p string) string {
			v := st.params[p[1:]]
			switch {
			case v == "NULL":
				return v
			case id != "" && v == "'"+id+"'":
				return ":id"
			case inline: // as E'...', whose colons pgbench does not take for variables
				return "E'" + strings.NewReplacer(`\`, `\\`, ":", `\x3a`).Replace(v[1:len(v)-1]) + "'"
			}
			name := fmt.Sprintf("s%dp%s", i, p[1:])
			defines = append(defines, "-D", name+"="+strings.ReplaceAll(v[1:len(v)-1], "''", "'"))
			return ":" + name
		}) + ";\n")
	}
	script.WriteString("\\endpipeline\n")
	path := filepath.Join(b.cfg.dir, name)
	if err := os.WriteFile(path, []byte(script.String()), 0o644); err != nil {
		return floor{}, err
	}
	postgres, err := filepath.EvalSymlinks(pg.cmd.Path)
	if err != nil {
		return floor{}, err
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		return floor{}, err
	}
	args := append([]string{"-n", fmt.Sprint("-c", clients), fmt.Sprint("-j", min(clients, 2)), fmt.Sprint("-T", b.cfg.seconds), "-M", "prepared",
		"-f", path, "-h", u.Hostname(), "-p", u.Port(), "-U", u.User.Username()}, defines...)
	t := pgTicks(pg)
	out, err := runCmd(ctx, "", nil, filepath.Join(filepath.Dir(postgres), "pgbench"), append(args, strings.TrimPrefix(u.Path, "/"))...)
	ticks := pgTicks(pg) - t
	if err != nil {
		return floor{}, err
	}
	m := pgbenchTPS.FindStringSubmatch(out)
	if m == nil {
		return floor{}, fmt.Errorf("no tps in pgbench's report:\n%s", out)
	}
	tps, _ := strconv.ParseFloat(m[1], 64)
	return floor{tps, float64(ticks) * 1e4 / (tps * float64(b.cfg.seconds))}, nil
}

// paceTable renders BENCH_PACE's rows.
func paceTable(cfg config, rows []paceRow) string {
	var s strings.Builder
	fmt.Fprintf(&s, "\n## Writes at the database's pace (BENCH_PACE, issue 49)\n\n`%s`: the first company's single creates and PATCHes "+
		"(wrk -c32, %d s each), with the most rows the contacts' trigram index held in its pending list (what one flush merges); "+
		"%d contacts imported into new companies by single creates and by batches of 100 at %d concurrent requests, with the CPU "+
		"(server and PostgreSQL) a row; another company's single creates (4 clients) alone and during a batch import. By the index's "+
		"setting (off: fastupdate off, schema/0019; a number: fastupdate on with that gin_pending_list_limit in kB):\n\n",
		cfg.command, cfg.seconds, cfg.imports, importConns)
	s.WriteString("| index | create req/s | create p99 | create max | PATCH req/s | PATCH p99 | PATCH max | pending rows | single rows/s | batch rows/s | **batch/single** | single CPU a row | batch CPU a row | neighbour alone, during | **kept** |\n")
	s.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&s, "| %s | %.0f | %s | %s | %.0f | %s | %s | %d | %.0f | %.0f | **%.2f** | %.0f µs | %.0f µs | %.0f/s, %.0f/s | **%.0f%%** |\n",
			r.setting, r.create.rps, ms(float64(r.create.p99)), ms(float64(r.create.max)), r.patch.rps, ms(float64(r.patch.p99)), ms(float64(r.patch.max)),
			r.pendingRows, r.imp.single, r.imp.batched, r.imp.batched/r.imp.single, r.imp.singleCPU, r.imp.batchCPU, r.imp.alone, r.imp.during, 100*r.imp.during/r.imp.alone)
	}
	fmt.Fprintf(&s, "\nThe floors: pgbench -M prepared running, in one pipeline, the statements the server sent for one request (from PostgreSQL's "+
		"log, with their parameters), %d s: a batch of 100 creates at %d clients (the batches a company runs at once), a PATCH that sets "+
		"a field and two custom values at 32 (against wrk -c32 of the same PATCH); CPU is the server's and PostgreSQL's against PostgreSQL's alone.\n\n", cfg.seconds, batchesPerCompany)
	s.WriteString("| index | batch item CPU (the server's) | its floor | **ratio** | PATCH+custom req/s | floor tps | **time ratio** | PATCH CPU (the server's) | floor CPU | **CPU ratio** |\n")
	s.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&s, "| %s | %.0f µs (%.0f) | %.0f µs | **%.2f** | %.0f | %.0f | **%.2f** | %.0f µs (%.0f) | %.0f µs | **%.2f** |\n", r.setting,
			r.imp.batchCPU, r.imp.batchServerCPU, r.batchFloor.cpu, r.imp.batchCPU/r.batchFloor.cpu, r.patchCustom.rps, r.patchFloor.tps, r.patchFloor.tps/r.patchCustom.rps,
			r.patchCustom.cpu, r.patchServer, r.patchFloor.cpu, r.patchCustom.cpu/r.patchFloor.cpu)
	}
	return s.String()
}
