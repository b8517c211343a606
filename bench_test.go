package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The load benchmark of issue 9 (`make bench`). It runs only when ROLODEX_BENCH=1:
//
//	a tuned PostgreSQL of its own in BENCH_DIR (default /var/tmp/rolodex-bench, kept between runs),
//	two companies of 1,000,000 contacts and 200,000 business records (loaded once, then cached),
//	the real server (BENCH_BIN, default ./rolodex serve) with a pool of 32 connections,
//	wrk at 32 connections for each scenario, ROUNDS (3) rounds of BENCH_TIME (10s), medians,
//	and in the same rounds the ceilings: pgbench -M prepared running the SQL the server sends, and a
//	static 600-byte JSON handler behind the same middleware (the HTTP limit).
//
// The result is appended to bench/RESULTS.md. BENCH_PROFILE=1 then also profiles a server hosted in
// this process (CPU and allocations) under the retrieve and list scenarios, into bench/out/.

// benchConfig is the benchmark's knobs, from the environment.
type benchConfig struct {
	dir      string
	bin      string
	duration time.Duration
	rounds   int
	conns    int
	only     string // run only scenarios whose name contains this
	profile  bool
	results  string
	outDir   string
}

func benchConfigFromEnv(t *testing.T) benchConfig {
	c := benchConfig{dir: envOr(os.Getenv, "BENCH_DIR", "/var/tmp/rolodex-bench"),
		bin: envOr(os.Getenv, "BENCH_BIN", "./rolodex"), only: os.Getenv("BENCH_ONLY"),
		profile: os.Getenv("BENCH_PROFILE") == "1", results: envOr(os.Getenv, "BENCH_RESULTS", "bench/RESULTS.md"),
		outDir: "bench/out"}
	var err error
	if c.duration, err = time.ParseDuration(envOr(os.Getenv, "BENCH_TIME", "10s")); err != nil || c.duration < time.Second {
		t.Fatalf("BENCH_TIME=%q: want a duration of at least 1s", os.Getenv("BENCH_TIME"))
	}
	if c.rounds, err = envInt(os.Getenv, "ROUNDS", 3); err != nil || c.rounds < 1 {
		t.Fatalf("ROUNDS: want a positive integer (%v)", err)
	}
	if c.conns, err = envInt(os.Getenv, "BENCH_CONNS", 32); err != nil || c.conns < 1 {
		t.Fatalf("BENCH_CONNS: want a positive integer (%v)", err)
	}
	return c
}

// benchGeneratorVersion names the data the generator makes; a cached load of another version is reloaded.
const benchGeneratorVersion = 2

// benchDB is the loaded benchmark database.
type benchDB struct {
	pg        *localPG
	url       string
	st        *store
	companies []benchCompany
	loadTime  time.Duration // 0: cached
}

func TestBench(t *testing.T) {
	if os.Getenv("ROLODEX_BENCH") != "1" {
		t.Skip("the load benchmark runs with ROLODEX_BENCH=1 (make bench)")
	}
	cfg := benchConfigFromEnv(t)
	for _, tool := range []string{"wrk", "pgbench"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing: apt-get install wrk postgresql-client (make bench installs them as root)", tool)
		}
	}
	if _, err := os.Stat(cfg.bin); err != nil {
		t.Fatalf("server binary %s: %v (make build)", cfg.bin, err)
	}
	if err := os.MkdirAll(cfg.outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	db := openBenchDB(t, ctx, cfg)
	defer db.pg.Stop()
	defer db.st.Close()
	c := db.companies[0]

	writeBenchPlans(t, cfg, db, c)

	key, err := db.st.createAPIKey(ctx, c.ID, c.UserID)
	if err != nil {
		t.Fatal(err)
	}
	srv := startBenchServer(t, cfg, db.url)
	defer srv.stop()
	static := startStaticServer(t, db.st)
	defer static.Close()
	floor := startFloorServer(t, cfg, db.url, c.ID)
	defer floor.Close()

	scenarios := benchScenarios(t, ctx, db, c)
	var results []scenarioResult
	staticRes := scenarioResult{scenario: benchScenario{name: "static 600-byte JSON (HTTP ceiling)"}}
	for round := 1; round <= cfg.rounds; round++ {
		st, err := runInProcess(t, cfg, "http://"+static.Addr, benchScenario{method: "GET", path: "/v1/static"}, key)
		if err != nil {
			t.Fatalf("static ceiling: %v", err)
		}
		staticRes.http = append(staticRes.http, st)
	}
	for _, s := range scenarios {
		if cfg.only != "" && !strings.Contains(s.name, cfg.only) {
			continue
		}
		r := scenarioResult{scenario: s}
		if s.skip == "" {
			s.skip = probeScenario(srv.base, s, key)
			r.scenario.skip = s.skip
		}
		if s.skip == "" {
			// An untimed warm-up first, as pgbench then runs on the pages the server's rounds read.
			warm := cfg
			warm.duration = min(cfg.duration, 3*time.Second)
			if _, err := runWrk(warm, srv.base, s, key); err != nil {
				t.Fatalf("%s: warm-up: %v", s.name, err)
			}
		}
		for round := 1; round <= cfg.rounds && s.skip == ""; round++ {
			h, err := runWrk(cfg, srv.base, s, key)
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			r.http = append(r.http, h)
			if s.pgScript == "" {
				continue
			}
			p, err := runPgbench(cfg, db.pg, s)
			if err != nil {
				t.Fatalf("%s: pgbench: %v", s.name, err)
			}
			r.db = append(r.db, p)
			t.Logf("%s round %d: %.0f req/s (p99 %s), pgbench %.0f tps", s.name, round, h.rps, fmtDur(h.p99), p.rps)
			if s.floorPath != "" {
				bare := s
				bare.path = s.floorPath
				f, err := runInProcess(t, cfg, "http://"+floor.Addr, bare, key)
				if err != nil {
					t.Fatalf("%s: bare stack: %v", s.name, err)
				}
				r.floor = append(r.floor, f)
				t.Logf("%s round %d: bare stack %.0f req/s", s.name, round, f.rps)
			}
		}
		results = append(results, r)
	}
	rss := srv.peakRSS()
	cleanupBenchWrites(t, ctx, db)

	report := benchReport(cfg, db, results, staticRes, rss)
	fmt.Println(report)
	f, err := os.OpenFile(cfg.results, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(report); err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if n := r.errors(); n > 0 {
			t.Errorf("%s: %d errors (non-2xx or socket errors); want 0", r.scenario.name, n)
		}
	}
	if cfg.profile {
		srv.stop()
		profileInProcess(t, ctx, cfg, db, scenarios, key)
	}
}

// openBenchDB starts the benchmark's PostgreSQL, tunes it, and loads both companies unless a load of
// this generator and schema version is already there.
func openBenchDB(t *testing.T, ctx context.Context, cfg benchConfig) *benchDB {
	t.Helper()
	if moved, ok := reachableDataDir(cfg.dir); ok {
		cfg.dir = moved
	}
	if err := os.MkdirAll(cfg.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(filepath.Join(cfg.dir, "postgres.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	pg, err := startLocalPG(ctx, cfg.dir, logf, false)
	if err != nil {
		t.Fatal(err)
	}
	// Tuned for a 2-core box with plenty of memory; fsync stays on. ALTER SYSTEM persists the settings
	// in the cluster, and a restart applies those that need one (shared_buffers).
	tune := map[string]string{"shared_buffers": "1GB", "effective_cache_size": "4GB", "work_mem": "16MB",
		"maintenance_work_mem": "512MB", "max_wal_size": "8GB", "checkpoint_timeout": "30min",
		"random_page_cost": "1.1", "jit": "off", "wal_buffers": "16MB"}
	admin, err := openStore(dbConfig{url: pg.URL("postgres"), maxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range tune {
		if _, err := admin.db.ExecContext(ctx, "ALTER SYSTEM SET "+k+" = '"+v+"'"); err != nil {
			t.Fatalf("ALTER SYSTEM SET %s: %v", k, err)
		}
	}
	admin.db.ExecContext(ctx, "SELECT pg_reload_conf()")
	var pending bool
	admin.db.QueryRowContext(ctx, "SELECT count(*) > 0 FROM pg_settings WHERE pending_restart").Scan(&pending)
	admin.Close()
	if pending {
		pg.Stop()
		if pg, err = startLocalPG(ctx, cfg.dir, logf, false); err != nil {
			t.Fatal(err)
		}
	}
	const dbname = "rolodex_bench"
	db := &benchDB{pg: pg, url: pg.URL(dbname)}
	if err := ensureDatabase(ctx, pg.URL("postgres"), dbname); err != nil {
		t.Fatal(err)
	}
	if db.st, err = openStore(dbConfig{url: db.url, maxConns: 4}); err != nil {
		t.Fatal(err)
	}
	if db.companies, err = cachedBenchLoad(ctx, db.st); err != nil {
		t.Fatal(err)
	}
	if len(db.companies) == 2 {
		t.Logf("using the cached load in %s", cfg.dir)
		// A run that stopped before its clean-up, or writes made by hand against this database, leave
		// dead rows that slow the count and the index-only scans: start from a vacuumed table.
		if _, err := db.st.db.ExecContext(ctx, `VACUUM ANALYZE contacts`); err != nil {
			t.Fatalf("vacuum: %v", err)
		}
		return db
	}
	// Start over in an empty database: drop and recreate it.
	db.st.Close()
	admin, err = openStore(dbConfig{url: pg.URL("postgres"), maxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"DROP DATABASE IF EXISTS " + dbname + " WITH (FORCE)", "CREATE DATABASE " + dbname} {
		if _, err := admin.db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	admin.Close()
	if db.st, err = openStore(dbConfig{url: db.url, maxConns: 4}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.st.migrate(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// COPY into tables without their list indexes, then build them: many times faster than keeping
	// a dozen indexes up to date row by row.
	indexes := dropListIndexes(t, ctx, db.st.db)
	for i := range 2 {
		t0 := time.Now()
		bc, err := loadBenchCompany(ctx, db.st, fmt.Sprintf("Bench company %d", i+1), benchFullSize, uint64(i+1))
		if err != nil {
			t.Fatalf("load company %d: %v", i+1, err)
		}
		t.Logf("loaded company %d (contacts %d..%d) in %s", bc.ID, bc.ContactLo, bc.ContactHi, time.Since(t0).Round(time.Millisecond))
		db.companies = append(db.companies, bc)
	}
	t0 := time.Now()
	for _, def := range indexes {
		if _, err := db.st.db.ExecContext(ctx, def); err != nil {
			t.Fatalf("%s: %v", def, err)
		}
	}
	t.Logf("built %d list indexes in %s", len(indexes), time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	if _, err := db.st.db.ExecContext(ctx, "VACUUM ANALYZE"); err != nil {
		t.Fatal(err)
	}
	t.Logf("VACUUM ANALYZE in %s", time.Since(t0).Round(time.Millisecond))
	db.loadTime = time.Since(start)
	const qMeta = `CREATE TABLE bench_meta AS SELECT $1::int AS generator, $2::int AS schema_version,
		unnest($3::bigint[]) AS company_id, unnest($4::bigint[]) AS contact_hi`
	_, err = db.st.db.ExecContext(ctx, qMeta, benchGeneratorVersion, latestSchemaVersion(),
		[]int64{db.companies[0].ID, db.companies[1].ID}, []int64{db.companies[0].ContactHi, db.companies[1].ContactHi})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// dropListIndexes drops the secondary indexes of contacts and business (not their keys) and returns
// the statements that make them again.
func dropListIndexes(t *testing.T, ctx context.Context, db *sql.DB) []string {
	rows, err := db.QueryContext(ctx, `SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
		FROM pg_index i WHERE i.indrelid IN ('contacts'::regclass, 'business'::regclass) AND NOT i.indisunique`)
	if err != nil {
		t.Fatal(err)
	}
	var names, defs []string
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			t.Fatal(err)
		}
		names, defs = append(names, name), append(defs, def)
	}
	rows.Close()
	for _, name := range names {
		if _, err := db.ExecContext(ctx, "DROP INDEX "+name); err != nil {
			t.Fatal(err)
		}
	}
	return defs
}

// cachedBenchLoad returns the companies of an earlier load of this generator and schema version, or
// none.
func cachedBenchLoad(ctx context.Context, st *store) ([]benchCompany, error) {
	rows, err := st.db.QueryContext(ctx, `SELECT company_id, contact_hi FROM bench_meta
		WHERE generator = $1 AND schema_version = $2 ORDER BY company_id`, benchGeneratorVersion, latestSchemaVersion())
	if pgCode(err) == "42P01" { // no bench_meta: never loaded
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	type meta struct{ id, hi int64 }
	var ms []meta
	for rows.Next() {
		var m meta
		if err := rows.Scan(&m.id, &m.hi); err != nil {
			rows.Close()
			return nil, err
		}
		ms = append(ms, m)
	}
	rows.Close()
	var out []benchCompany
	for _, m := range ms {
		bc, err := benchCompanyRefs(ctx, st.db, m.id, m.hi)
		if err != nil {
			return nil, err
		}
		out = append(out, bc)
	}
	return out, rows.Err()
}

// cleanupBenchWrites removes what the create scenarios added, so the cached load stays the same size.
func cleanupBenchWrites(t *testing.T, ctx context.Context, db *benchDB) {
	for _, c := range db.companies {
		if _, err := db.st.db.ExecContext(ctx, `DELETE FROM contacts WHERE company_id = $1 AND id > $2`, c.ID, c.ContactHi); err != nil {
			t.Errorf("clean up created contacts: %v", err)
		}
	}
	if _, err := db.st.db.ExecContext(ctx, `VACUUM ANALYZE contacts`); err != nil {
		t.Errorf("vacuum: %v", err)
	}
}

// benchServer is the real binary, serving the benchmark database.
type benchServer struct {
	cmd  *exec.Cmd
	base string
	done chan struct{}

	mu      sync.Mutex
	maxRSS  int64 // KiB, from VmRSS samples
	lastHWM int64 // KiB, VmHWM at the last sample
}

func startBenchServer(t *testing.T, cfg benchConfig, dbURL string) *benchServer {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"serve", "-addr", addr, "-db-max-conns", strconv.Itoa(cfg.conns)}
	// The per-key rate limit (issue 7) would turn most benchmark requests into 429s.
	if help, _ := exec.Command(cfg.bin, "serve", "-h").CombinedOutput(); bytes.Contains(help, []byte("rate-limit")) {
		args = append(args, "-rate-limit", "0")
	}
	cmd := exec.Command(cfg.bin, args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "ROLODEX_RATE_LIMIT=0")
	logf, err := os.Create(filepath.Join(cfg.outDir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &benchServer{cmd: cmd, base: "http://" + addr, done: make(chan struct{})}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); logf.Close() }()
	if err := waitHealthy(s.base, exited); err != nil {
		cmd.Process.Kill()
		t.Fatalf("server did not start: %v (log: %s)", err, logf.Name())
	}
	go s.pollRSS()
	return s
}

// pollRSS samples the server's resident memory until it stops.
func (s *benchServer) pollRSS() {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		rss, hwm := procMemory(s.cmd.Process.Pid)
		s.mu.Lock()
		s.maxRSS = max(s.maxRSS, rss)
		s.lastHWM = max(s.lastHWM, hwm)
		s.mu.Unlock()
		select {
		case <-s.done:
			return
		case <-tick.C:
		}
	}
}

// peakRSS is the server's peak resident memory in KiB: VmHWM, or the largest VmRSS sample.
func (s *benchServer) peakRSS() int64 {
	rss, hwm := procMemory(s.cmd.Process.Pid)
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(s.maxRSS, s.lastHWM, rss, hwm)
}

func (s *benchServer) stop() {
	select {
	case <-s.done:
		return
	default:
	}
	close(s.done)
	s.cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(100 * time.Millisecond)
}

// procMemory reads VmRSS and VmHWM (KiB) of a process.
func procMemory(pid int) (rss, hwm int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		switch name {
		case "VmRSS":
			rss = n
		case "VmHWM":
			hwm = n
		}
	}
	return rss, hwm
}

// staticBody is the HTTP ceiling's answer: 600 bytes of JSON, about one contact.
var staticBody = func() []byte {
	b := []byte(`{"id":"1042","name":"Ana María","surname":"Pérez García","email":"ana.perez@example.com","pad":"`)
	for len(b) < 598 {
		b = append(b, 'x')
	}
	return append(b, `"}`...)
}()

// writeBenchPlans EXPLAINs every list and count statement on the loaded company of a million
// contacts, with the planner's own choices, into bench/PLANS.md, and fails the benchmark on a
// sequential scan, a sort not read from an index, or a cursor that is not an index condition.
func writeBenchPlans(t *testing.T, cfg benchConfig, db *benchDB, c benchCompany) {
	var b strings.Builder
	fmt.Fprintf(&b, "# Query plans on %d contacts and %d business records of one company (of two)\n\n",
		c.ContactHi-c.ContactLo+1, benchFullSize.business)
	fmt.Fprintf(&b, "Written by `make bench` on %s. Each is the plan PostgreSQL chose by itself.\n", time.Now().UTC().Format(time.DateOnly))
	bad := 0
	for _, p := range explainLists(t, db.st.db, c.ID, "") {
		probs := p.problems()
		if len(probs) > 0 {
			bad++
			t.Errorf("plan of %s %s: %v\n%s", p.table, p.what, probs, p.plan)
		}
		fmt.Fprintf(&b, "\n## %s: %s\n\n```sql\n%s\n```\n\n```\n%s```\n", p.table, p.what, p.sql, p.plan)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(cfg.results), "PLANS.md"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("query plans: %d with problems; see bench/PLANS.md", bad)
}

// pgbenchSQL turns a statement and its arguments into a pgbench script line and its -D variables:
// $1 (the company) is :cid, $n is :an.
func pgbenchSQL(q string, args []any) (string, []string) {
	var vars []string
	for n := len(args); n >= 2; n-- {
		q = strings.ReplaceAll(q, "$"+strconv.Itoa(n), ":a"+strconv.Itoa(n))
		var v string
		switch a := args[n-1].(type) {
		case time.Time:
			v = a.Format(time.RFC3339Nano)
		case []int64:
			v = strings.Trim(strings.Join(strings.Fields(fmt.Sprint(a)), ","), "[]")
			v = "{" + v + "}"
		default:
			v = fmt.Sprint(a)
		}
		vars = append(vars, "a"+strconv.Itoa(n)+"="+v)
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(q, "$1", ":cid")), " ") + ";", vars
}

// startStaticServer serves GET /v1/static (600 bytes of JSON) through the server's own middleware
// (withMiddleware, rate limit off as in the benchmarked server) and http.Server settings, without a database
// query: the HTTP stack's ceiling.
func startStaticServer(t *testing.T, st *store) *http.Server {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create("bench/out/static.log")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	log := newLogger(logf)
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", handleHealthz())
	mux.Handle("GET /v1/static", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, staticBody)
	}))
	h := withMiddleware(withPattern(mux), st, log, limits{requestTimeout: 10 * time.Second})
	srv := newHTTPServer(h, log)
	srv.Addr = addr
	go srv.ListenAndServe()
	if err := waitHealthy("http://"+addr, make(chan error)); err != nil {
		t.Fatal(err)
	}
	return srv
}

// runInProcess runs wrk against a server of this process (the static and bare-stack servers) with
// the collector the rolodex binary sets for itself (tuneGC, in main).
func runInProcess(t *testing.T, cfg benchConfig, base string, s benchScenario, key string) (runStats, error) {
	prevLimit, prevPercent := debug.SetMemoryLimit(-1), debug.SetGCPercent(100)
	defer func() { debug.SetMemoryLimit(prevLimit); debug.SetGCPercent(prevPercent) }()
	if err := tuneGC(os.Getenv); err != nil {
		t.Fatal(err)
	}
	return runWrk(cfg, base, s, key)
}

// startFloorServer serves the retrieves on the bare stack: GET /v1/floor/{id} runs the retrieve's
// statement and /v1/floor/{id}/expanded the statement of the retrieve with all 5 expansions (expand.go
// builds it), for company companyID, through the same http.Server settings and the same database/sql
// pool of pgx connections (withPgx), the columns' bytes copied out as they come, with no middleware,
// no key, no decoding and no JSON. No server on this stack can do less for those requests, so its
// rate, as a share of the database ceiling, is what the stack itself leaves.
func startFloorServer(t *testing.T, cfg benchConfig, dbURL string, companyID int64) *http.Server {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	st, err := openStore(dbConfig{url: dbURL, maxConns: cfg.conns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", handleHealthz())
	for path, q := range map[string]string{
		"GET /v1/floor/{id}":          joinedGetSQL("contacts", contactColumns, nil),
		"GET /v1/floor/{id}/expanded": joinedGetSQL("contacts", contactColumns, contactExpansions),
	} {
		mux.Handle(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
			b := make([]byte, 0, 2048)
			err := withPgx(r.Context(), st.db, func(c *pgx.Conn) error {
				rows, err := c.Query(r.Context(), q, companyID, id)
				if err != nil {
					return err
				}
				for rows.Next() {
					for _, v := range rows.RawValues() {
						b = append(append(b, v...), ',')
					}
				}
				rows.Close()
				return rows.Err()
			})
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write(b)
		}))
	}
	srv := newHTTPServer(mux, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv.Addr = addr
	go srv.ListenAndServe()
	if err := waitHealthy("http://"+addr, make(chan error)); err != nil {
		t.Fatal(err)
	}
	return srv
}

// benchScenario is one request shape: what wrk sends and what pgbench runs as its database ceiling.
type benchScenario struct {
	name         string
	method, path string // "{id}" in path: a random id from idLo..idHi
	body         string // "{rand}": a random number
	idLo, idHi   int64
	pgScript     string   // pgbench script: the SQL the server sends for one request
	pgVars       []string // pgbench -D name=value
	target       float64  // the target, as a fraction of the database ceiling (0: none)
	floorPath    string   // the same request on the bare stack (startFloorServer), or ""
	skip         string   // why the scenario cannot run on this server
}

// benchScenarios builds the scenarios for company c. The SQL comes from contacts.go, expand.go and
// list.go (the same column lists and builders), with the parameters the server would send.
func benchScenarios(t *testing.T, ctx context.Context, db *benchDB, c benchCompany) []benchScenario {
	t.Helper()
	cid := strconv.FormatInt(c.ID, 10)
	one := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	// A retrieve is one statement, its expansions joined in (expand.go): the server's own builder
	// makes it.
	getSQL := func(exps []expansion) string {
		return strings.NewReplacer("$1", ":cid", "$2", ":id").Replace(one(joinedGetSQL("contacts", contactColumns, exps))) + ";"
	}
	getContact, getExpanded := getSQL(nil), getSQL(contactExpansions)
	// The list statements come from the server's own list builder (list.go), so pgbench runs exactly
	// what the server sends.
	listSQL := func(query url.Values, after *cursorPos) (string, []string) {
		lq, aerr := contactLists.parse(query)
		if aerr != nil {
			t.Fatal(aerr)
		}
		lq.after = after
		return pgbenchSQL(lq.selectSQL(`SELECT `+contactColumns+` FROM contacts WHERE company_id = $1`, c.ID))
	}
	listContacts, listVars := listSQL(url.Values{"limit": {"100"}}, nil)
	randIDs := fmt.Sprintf("\\set id random(%d, %d)\n", c.ContactLo, c.ContactHi)
	// A page's expansion queries take the ids of the page's contacts, as the server collects them.
	expandPage := `\startpipeline
SELECT ` + one(userColumns) + ` FROM users WHERE company_id = :cid AND id = ANY(:users);
SELECT ` + one(organizationColumns) + ` FROM organizations WHERE company_id = :cid AND id = ANY(:orgs);
SELECT ` + one(stageColumns) + ` FROM stages WHERE company_id = :cid AND id = ANY(:stages);
SELECT ` + one(countryColumns) + ` FROM countries WHERE id = ANY(:countries);
\endpipeline
`
	pageVars := firstPageRefs(t, ctx, db.st, c.ID)
	all5 := "expand[]=organization&expand[]=country&expand[]=stage&expand[]=assignedTo&expand[]=userCreator"
	// Page 10,000 of 100 starts after the 999,900th contact; the server's own cursor encoder makes
	// the cursor. (After issue 6 cursors are signed: call the same signing function here.)
	after := c.ContactLo + 999_900 - 1
	cursorKey, err := db.st.listCursorKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cursor := (&listQuery{sort: &byID}).cursor(cursorKey, "/v1/contacts\n"+strconv.FormatInt(c.ID, 10), after, "", false)
	page10k, page10kVars := listSQL(url.Values{"limit": {"100"}}, &cursorPos{id: after})
	since := "2026-05-01T00:00:00Z"
	filtered, filteredVars := listSQL(url.Values{"limit": {"100"}, "sort": {"updatedAt"}, "updatedAt[gte]": {since}}, nil)

	ss := []benchScenario{
		{name: "retrieve", method: "GET", path: "/v1/contacts/{id}", target: 0.45,
			pgScript: randIDs + getContact + "\n", floorPath: "/v1/floor/{id}"},
		{name: "retrieve + 5 expansions", method: "GET", path: "/v1/contacts/{id}?" + all5, target: 0.60,
			pgScript: randIDs + getExpanded + "\n", floorPath: "/v1/floor/{id}/expanded"},
		{name: "list 100", method: "GET", path: "/v1/contacts?limit=100", target: 0.40,
			pgScript: listContacts + "\n", pgVars: listVars},
		{name: "list 100 + 5 expansions", method: "GET", path: "/v1/contacts?limit=100&" + all5, target: 0.50,
			pgScript: listContacts + "\n" + expandPage, pgVars: append(pageVars, listVars...)},
		{name: "list page 10,000", method: "GET", path: "/v1/contacts?limit=100&cursor=" + cursor,
			pgScript: page10k + "\n", pgVars: page10kVars},
		{name: "list updatedAt[gte] + sort", method: "GET", path: "/v1/contacts?limit=100&sort=updatedAt&updatedAt%5Bgte%5D=" + since,
			pgScript: filtered + "\n", pgVars: filteredVars},
		{name: "count", method: "GET", path: "/v1/contacts/count",
			pgScript: "SELECT count(*) FROM contacts WHERE company_id = :cid;\n"},
		{name: "create", method: "POST", path: "/v1/contacts",
			body: `{"name":"Bench","surname":"Create {rand}","email":"bench.{rand}@example.com","phone":"+34 910 000 000","jobTitle":"Buyer"}`,
			pgScript: one(`INSERT INTO contacts (company_id, name, surname, dni, job_title, email, secondary_email, phone,
				mobile_phone, url_avatar, address, city, with_sales, country_id, classification, stage_id,
				organization_id, assigned_to_id, user_creator_id)
				VALUES (:cid, 'Bench', 'Create ' || :r, NULL, 'Buyer', 'bench.' || :r || '@example.com', NULL, '+34 910 000 000',
				NULL, NULL, NULL, NULL, false, NULL, NULL, NULL, NULL, NULL, :uid)
				RETURNING id, created_at, updated_at, version;`) + "\n"},
		// The server's PATCH (updateLocked): BEGIN and the row's lock in one round trip, the UPDATE of
		// every column and COMMIT in a second. A patch of jobTitle changes no reference, so the server
		// checks none. pgbench writes the columns back to themselves (same row width) and a new job title.
		{name: "patch", method: "PATCH", path: "/v1/contacts/{id}", body: `{"jobTitle":"Patched {rand}"}`,
			pgScript: randIDs + "\\set r random(1, 1000000000)\n" +
				"\\startpipeline\nBEGIN;\n" +
				one(`SELECT `+contactColumns+` FROM contacts WHERE company_id = :cid AND id = :id FOR UPDATE;`) + "\n" +
				"\\endpipeline\n\\startpipeline\n" +
				one(`UPDATE contacts SET name = name, surname = surname, dni = dni, job_title = 'Patched ' || :r, email = email,
				secondary_email = secondary_email, phone = phone, mobile_phone = mobile_phone, url_avatar = url_avatar,
				address = address, city = city, with_sales = with_sales, country_id = country_id, classification = classification,
				stage_id = stage_id, organization_id = organization_id, assigned_to_id = assigned_to_id, version = version + 1,
				updated_at = greatest(date_trunc('milliseconds', now()), updated_at + interval '1 millisecond')
				WHERE company_id = :cid AND id = :id RETURNING updated_at, version;`) + "\nCOMMIT;\n\\endpipeline\n"},
	}
	for i := range ss {
		ss[i].idLo, ss[i].idHi = c.ContactLo, c.ContactHi
		ss[i].pgVars = append(ss[i].pgVars, "cid="+cid, "uid="+strconv.FormatInt(c.UserID, 10))
		if ss[i].name == "create" {
			ss[i].pgScript = "\\set r random(1, 1000000000)\n" + ss[i].pgScript
		}
	}
	return ss
}

// firstPageRefs returns pgbench variables holding the ids the server's expansion queries get for the
// first page of 100 contacts: users (assignedTo, then userCreator), organizations, stages, countries.
func firstPageRefs(t *testing.T, ctx context.Context, st *store, companyID int64) []string {
	t.Helper()
	rows, err := st.db.QueryContext(ctx, `SELECT organization_id, country_id, stage_id, assigned_to_id, user_creator_id
		FROM contacts WHERE company_id = $1 ORDER BY id LIMIT 100`, companyID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var org, country, stage, assigned, creator []string
	add := func(dst *[]string, v sql.NullInt64) {
		if v.Valid {
			*dst = append(*dst, strconv.FormatInt(v.Int64, 10))
		}
	}
	for rows.Next() {
		var o, c, s, a, u sql.NullInt64
		if err := rows.Scan(&o, &c, &s, &a, &u); err != nil {
			t.Fatal(err)
		}
		add(&org, o)
		add(&country, c)
		add(&stage, s)
		add(&assigned, a)
		add(&creator, u)
	}
	arr := func(ids []string) string { return "{" + strings.Join(ids, ",") + "}" }
	return []string{"users=" + arr(append(assigned, creator...)), "orgs=" + arr(org), "stages=" + arr(stage),
		"countries=" + arr(country)}
}

// probeScenario sends one request of s and returns why the scenario cannot run ("" when it can).
func probeScenario(base string, s benchScenario, key string) string {
	path := strings.ReplaceAll(s.path, "{id}", strconv.FormatInt(s.idLo, 10))
	body := strings.ReplaceAll(s.body, "{rand}", "1")
	req, err := http.NewRequest(s.method, base+path, strings.NewReader(body))
	if err != nil {
		return err.Error()
	}
	req.Header.Set("x-api-key", key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		var p struct{ Detail string }
		json.Unmarshal(b, &p)
		return fmt.Sprintf("not served yet: %d %s", resp.StatusCode, p.Detail)
	}
	return ""
}

// runStats is one round of one load generator.
type runStats struct {
	rps      float64
	p50, p99 time.Duration
	errors   int64
}

// runWrk runs wrk for one round of s against base.
func runWrk(cfg benchConfig, base string, s benchScenario, key string) (runStats, error) {
	threads := min(2, cfg.conns)
	cmd := exec.Command("wrk", "-t", strconv.Itoa(threads), "-c", strconv.Itoa(cfg.conns),
		"-d", strconv.Itoa(int(cfg.duration.Seconds()))+"s", "--timeout", "5s", "-s", "bench/wrk.lua", base)
	cmd.Env = append(os.Environ(), "BENCH_METHOD="+s.method, "BENCH_PATH="+s.path, "BENCH_BODY="+s.body,
		"BENCH_KEY="+key, "BENCH_ID_LO="+strconv.FormatInt(s.idLo, 10), "BENCH_ID_HI="+strconv.FormatInt(s.idHi, 10))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return runStats{}, fmt.Errorf("wrk: %v\n%s", err, out)
	}
	_, js, ok := strings.Cut(string(out), "BENCHJSON ")
	if !ok {
		return runStats{}, fmt.Errorf("wrk printed no result:\n%s", out)
	}
	var r struct {
		Requests, DurationUs, P50Us, P99Us    int64
		Connect, Read, Write, Status, Timeout int64
	}
	if err := json.NewDecoder(strings.NewReader(js)).Decode(&r); err != nil {
		return runStats{}, fmt.Errorf("wrk result %q: %v", js, err)
	}
	return runStats{rps: float64(r.Requests) / (float64(r.DurationUs) / 1e6),
		p50: time.Duration(r.P50Us) * time.Microsecond, p99: time.Duration(r.P99Us) * time.Microsecond,
		errors: r.Connect + r.Read + r.Write + r.Status + r.Timeout}, nil
}

var (
	pgbenchTPS    = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)
	pgbenchFailed = regexp.MustCompile(`number of failed transactions: ([0-9]+)`)
)

// runPgbench runs s's SQL with pgbench -M prepared at the same concurrency, and reads the latency
// percentiles from its per-transaction log.
func runPgbench(cfg benchConfig, pg *localPG, s benchScenario) (runStats, error) {
	dir, err := os.MkdirTemp("", "rolodex-pgbench-")
	if err != nil {
		return runStats{}, err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "script.sql")
	if err := os.WriteFile(script, []byte(s.pgScript), 0o644); err != nil {
		return runStats{}, err
	}
	args := []string{"-n", "-M", "prepared", "-c", strconv.Itoa(cfg.conns), "-j", "2",
		"-T", strconv.Itoa(int(cfg.duration.Seconds())), "-f", script, "-l", "--log-prefix", filepath.Join(dir, "log"),
		"-h", "127.0.0.1", "-p", strconv.Itoa(pg.port), "-U", "postgres"}
	for _, v := range s.pgVars {
		args = append(args, "-D", v)
	}
	cmd := exec.Command("pgbench", append(args, "rolodex_bench")...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return runStats{}, fmt.Errorf("%v\n%s\nscript:\n%s", err, out, s.pgScript)
	}
	m := pgbenchTPS.FindSubmatch(out)
	if m == nil {
		return runStats{}, fmt.Errorf("no tps in pgbench output:\n%s", out)
	}
	var r runStats
	r.rps, _ = strconv.ParseFloat(string(m[1]), 64)
	if m := pgbenchFailed.FindSubmatch(out); m != nil {
		r.errors, _ = strconv.ParseInt(string(m[1]), 10, 64)
	}
	// Log lines: client_id transaction_no latency_us script_no epoch_s epoch_us.
	logs, _ := filepath.Glob(filepath.Join(dir, "log.*"))
	var lat []int64
	for _, name := range logs {
		f, err := os.Open(name)
		if err != nil {
			return r, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) >= 3 {
				if us, err := strconv.ParseInt(fs[2], 10, 64); err == nil {
					lat = append(lat, us)
				}
			}
		}
		f.Close()
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		r.p50 = time.Duration(lat[len(lat)/2]) * time.Microsecond
		r.p99 = time.Duration(lat[len(lat)*99/100]) * time.Microsecond
	}
	return r, nil
}

// scenarioResult is every round of one scenario.
type scenarioResult struct {
	scenario        benchScenario
	http, db, floor []runStats
}

func (r scenarioResult) errors() int64 {
	var n int64
	for _, s := range r.http {
		n += s.errors
	}
	return n
}

// median returns the median of each measure over the rounds.
// medianRatio is the median over rounds of a[i].rps / b[i].rps.
func medianRatio(a, b []runStats) float64 {
	var rs []float64
	for i := range a {
		if b[i].rps > 0 {
			rs = append(rs, a[i].rps/b[i].rps)
		}
	}
	if len(rs) == 0 {
		return 0
	}
	slices.Sort(rs)
	if len(rs)%2 == 0 {
		return (rs[len(rs)/2-1] + rs[len(rs)/2]) / 2
	}
	return rs[len(rs)/2]
}

func median(rs []runStats) runStats {
	if len(rs) == 0 {
		return runStats{}
	}
	pick := func(f func(runStats) float64) float64 {
		vs := make([]float64, len(rs))
		for i, r := range rs {
			vs[i] = f(r)
		}
		slices.Sort(vs)
		if len(vs)%2 == 1 {
			return vs[len(vs)/2]
		}
		return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
	}
	var out runStats
	out.rps = pick(func(r runStats) float64 { return r.rps })
	out.p50 = time.Duration(pick(func(r runStats) float64 { return float64(r.p50) }))
	out.p99 = time.Duration(pick(func(r runStats) float64 { return float64(r.p99) }))
	for _, r := range rs {
		out.errors += r.errors
	}
	return out
}

func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	}
}

// machineLine describes where the benchmark ran.
func machineLine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	pgv, _ := exec.Command("pgbench", "--version").Output()
	wrkv, _ := exec.Command("wrk", "-v").CombinedOutput()
	wrkLine, _, _ := strings.Cut(string(wrkv), "\n")
	wrkLine, _, _ = strings.Cut(wrkLine, " [")
	return fmt.Sprintf("%s, %d cores, Linux %s, %s, %s, %s", model, runtime.NumCPU(), strings.TrimSpace(string(kernel)),
		runtime.Version(), strings.TrimSpace(string(pgv)), strings.TrimSpace(wrkLine))
}

// benchReport is the markdown section appended to bench/RESULTS.md.
func benchReport(cfg benchConfig, db *benchDB, results []scenarioResult, static scenarioResult, rssKiB int64) string {
	var b strings.Builder
	commit, _ := exec.Command("git", "describe", "--always", "--dirty").Output()
	fmt.Fprintf(&b, "\n## %s (commit %s)\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), strings.TrimSpace(string(commit)))
	fmt.Fprintf(&b, "Machine: %s.  \n", machineLine())
	fmt.Fprintf(&b, "Run: %d connections, %d rounds of %s per scenario (medians), wrk -t2 and pgbench -M prepared -j2, "+
		"server pool %d. Data: 2 companies × %d contacts, %d business, %d organizations, %d users",
		cfg.conns, cfg.rounds, cfg.duration, cfg.conns, benchFullSize.contacts, benchFullSize.business,
		benchFullSize.organizations, benchFullSize.users)
	if db.loadTime > 0 {
		fmt.Fprintf(&b, " (loaded with COPY + VACUUM ANALYZE in %s).\n\n", db.loadTime.Round(time.Second))
	} else {
		b.WriteString(" (cached load).\n\n")
	}
	st := median(static.http)
	fmt.Fprintf(&b, "HTTP ceiling (static 600-byte JSON, same middleware and server settings): %.0f req/s, p50 %s, p99 %s.  \n",
		st.rps, fmtDur(st.p50), fmtDur(st.p99))
	fmt.Fprintf(&b, "Server peak RSS (VmHWM): %.1f MiB (target < 64 MiB: %s).\n\n", float64(rssKiB)/1024,
		map[bool]string{true: "met", false: "missed"}[rssKiB < 64*1024])
	b.WriteString("| scenario | req/s | p50 | p99 | errors | pgbench tps | pgbench p50 | pgbench p99 | % of DB ceiling | % of HTTP ceiling | target |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range results {
		if r.scenario.skip != "" {
			fmt.Fprintf(&b, "| %s | - | - | - | - | - | - | - | - | - | %s |\n", r.scenario.name, r.scenario.skip)
			continue
		}
		h, d := median(r.http), median(r.db)
		ratio := func(a, b float64) string {
			if b == 0 {
				return "-"
			}
			return fmt.Sprintf("%.0f%%", 100*a/b)
		}
		target := ""
		if r.scenario.target > 0 && d.rps > 0 {
			got := h.rps / d.rps
			if got >= r.scenario.target {
				target = fmt.Sprintf("≥ %.0f%%: met", 100*r.scenario.target)
			} else {
				target = fmt.Sprintf("≥ %.0f%%: missed by %.0f points", 100*r.scenario.target, 100*(r.scenario.target-got))
			}
		}
		if r.scenario.name == "retrieve" {
			target += fmt.Sprintf("; p99 < 10 ms: %s", map[bool]string{true: "met", false: "missed"}[h.p99 < 10*time.Millisecond])
		}
		fmt.Fprintf(&b, "| %s | %.0f | %s | %s | %d | %.0f | %s | %s | %s | %s | %s |\n", r.scenario.name, h.rps,
			fmtDur(h.p50), fmtDur(h.p99), h.errors, d.rps, fmtDur(d.p50), fmtDur(d.p99), ratio(h.rps, d.rps),
			ratio(h.rps, st.rps), target)
	}
	b.WriteString("\nwrk corrects its latencies for coordinated omission (stats_correct in wrk.c): a request that stalls " +
		"for S also counts for the requests its connection would have sent meanwhile, one sample per mean interval " +
		"between them, so a rare long stall lifts wrk's p99 far above pgbench's, whose per-transaction log is not corrected.\n")
	var p1, p10k runStats
	for _, r := range results {
		switch r.scenario.name {
		case "list 100":
			p1 = median(r.http)
		case "list page 10,000":
			p10k = median(r.http)
		}
	}
	if p1.p50 > 0 && p10k.p50 > 0 {
		fmt.Fprintf(&b, "\nPage 10,000 by cursor: p50 %.2fx page 1's (target ≤ 1.2x: %s).\n", float64(p10k.p50)/float64(p1.p50),
			map[bool]string{true: "met", false: "missed"}[float64(p10k.p50) <= 1.2*float64(p1.p50)])
	}
	for _, r := range results {
		if len(r.floor) == 0 || len(r.floor) != len(r.db) || len(r.floor) != len(r.http) {
			continue
		}
		// Each round's three runs follow each other, so a round's ratios compare like with like; the
		// machine's drift between rounds is larger than what is compared.
		f := median(r.floor)
		fmt.Fprintf(&b, "\nThe %s on the bare stack (its statement through the same http.Server and pgx pool, with no "+
			"middleware, key, decoding or JSON: startFloorServer): %.0f req/s, p99 %s; in the median round %.0f%% of "+
			"the DB ceiling, the most this stack leaves on this machine, and Rolodex did %.0f%% of the bare stack's rate.\n",
			r.scenario.name, f.rps, fmtDur(f.p99), 100*medianRatio(r.floor, r.db), 100*medianRatio(r.http, r.floor))
	}
	return b.String()
}

// profileInProcess hosts the server in this process (through run(), like the tests) and records a
// CPU and an allocation profile under each of the retrieve and list scenarios, into bench/out.
func profileInProcess(t *testing.T, ctx context.Context, cfg benchConfig, db *benchDB, scenarios []benchScenario, key string) {
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	env := map[string]string{"DATABASE_URL": db.url, "ROLODEX_ADDR": addr, "ROLODEX_RATE_LIMIT": "0",
		"ROLODEX_DB_MAX_CONNS": strconv.Itoa(cfg.conns)}
	done := make(chan error, 1)
	logf, err := os.Create(filepath.Join(cfg.outDir, "profile-server.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	go func() {
		done <- run(ctx, []string{"rolodex", "serve"}, func(k string) string { return env[k] }, io.Discard, logf)
	}()
	defer func() { cancel(); <-done }()
	if err := waitHealthy("http://"+addr, done); err != nil {
		t.Fatal(err)
	}
	// The collector as the rolodex binary sets it (tuneGC, in main), for this process while it profiles.
	prevLimit, prevPercent := debug.SetMemoryLimit(-1), debug.SetGCPercent(100)
	defer func() { debug.SetMemoryLimit(prevLimit); debug.SetGCPercent(prevPercent) }()
	if err := tuneGC(os.Getenv); err != nil {
		t.Fatal(err)
	}
	runtime.MemProfileRate = 64 << 10
	for _, s := range scenarios {
		if !slices.Contains([]string{"retrieve", "retrieve + 5 expansions", "list 100", "list 100 + 5 expansions"}, s.name) {
			continue
		}
		slug := strings.NewReplacer(" + ", "-", " ", "-").Replace(s.name)
		cpu, err := os.Create(filepath.Join(cfg.outDir, slug+".cpu.pprof"))
		if err != nil {
			t.Fatal(err)
		}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if err := pprof.StartCPUProfile(cpu); err != nil {
			t.Fatal(err)
		}
		res, err := runWrk(cfg, "http://"+addr, s, key)
		pprof.StopCPUProfile()
		runtime.ReadMemStats(&after)
		cpu.Close()
		if err != nil {
			t.Fatal(err)
		}
		n := res.rps * cfg.duration.Seconds()
		heap, err := os.Create(filepath.Join(cfg.outDir, slug+".allocs.pprof"))
		if err != nil {
			t.Fatal(err)
		}
		pprof.Lookup("allocs").WriteTo(heap, 0)
		heap.Close()
		t.Logf("profiled %s: %.0f req/s in process, %.0f allocations and %.0f bytes per request (whole process); %s",
			s.name, res.rps, float64(after.Mallocs-before.Mallocs)/n, float64(after.TotalAlloc-before.TotalAlloc)/n, cpu.Name())
	}
}
