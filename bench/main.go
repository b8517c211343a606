// Command bench is Rolodex's load benchmark (make bench). It builds the server of the working tree,
// and of BASELINE (a git revision) when set; loads two companies of BENCH_CONTACTS contacts into a
// PostgreSQL of its own, kept in BENCH_DIR for the next run; runs wrk on each scenario against each
// server for ROUNDS rounds; and writes the medians to bench/RESULTS.md. Without BASELINE, each
// scenario is paired with GET /healthz of the same server: what the HTTP stack alone serves. With
// BENCH_METRICS=1, with neither: this tree's server with -metrics-addr against the same binary without.
// events100 is also measured against pgbench running the feed's SQL on the same PostgreSQL. Last,
// BENCH_IMPORT contacts are imported into new companies by batches of 100 and by single creates
// (importBench), and another company's retrieve is measured beside 32 heavy reads of the first
// (neighbourBench). With BENCH_CUSTOM=1 (no BASELINE), the first company's contacts carry custom
// field values and each custom scenario (customScenarios) is paired with its built-in equivalent on
// the same server instead. With BENCH_ASSOC=1 (no BASELINE), the first company holds BENCH_CONTACTS
// business records and as many associations, and each association scenario (assocScenarios, in
// assoc.go) is paired with its equivalent on the same server. With BENCH_SEARCH=1 (no BASELINE), each
// search scenario (searchScenarios, in search.go) is paired with its equivalent on the same server.
// With BENCH_SUMMARY=1 (no BASELINE), the first company holds BENCH_CONTACTS business records, and
// each summary (summaryScenarios, in summary.go) is measured against pgbench running its GROUP BY
// statement alone. With BENCH_ACTIVITIES=1 (no BASELINE), the first company also holds BENCH_CONTACTS
// activities, and each activity scenario (activityScenarios, in activities.go) is paired with its
// equivalent on the same server.
package main

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// scenario is one wrk load. bench/wrk.lua puts a random contact id of the company in place of each
// {id}, a random business id in place of each {bid}, and a random number in place of {rand}; a
// keyed scenario sends a new Idempotency-Key each request. conns is wrk's connections (0: 32);
// builtin is what a custom or association scenario is measured against; items is the associations
// a request writes, and target the bound on the paired ratio (assocTable).
type scenario struct {
	name, method, path, body string
	keyed                    bool
	conns                    int
	builtin                  *scenario
	items                    int
	target                   float64
}

const expand5 = "expand[]=organization&expand[]=country&expand[]=stage&expand[]=assignedTo&expand[]=userCreator"

const createBody = `{"name":"Load","surname":"Test {rand}","email":"load{rand}@example.com","countryId":724}`

var scenarios = []scenario{
	{name: "retrieve", method: "GET", path: "/v1/contacts/{id}"},
	{name: "retrieve+5", method: "GET", path: "/v1/contacts/{id}?" + expand5},
	{name: "list100", method: "GET", path: "/v1/contacts?limit=100"},
	{name: "list100+5", method: "GET", path: "/v1/contacts?limit=100&" + expand5},
	{name: "count", method: "GET", path: "/v1/contacts/count"},
	{name: "create", method: "POST", path: "/v1/contacts", body: createBody},
	{name: "create+key", method: "POST", path: "/v1/contacts", body: createBody, keyed: true},
	{name: "patch", method: "PATCH", path: "/v1/contacts/{id}", body: patchBody},
	{name: "patch+key", method: "PATCH", path: "/v1/contacts/{id}", body: patchBody, keyed: true},
	{name: "events100", method: "GET", path: "/v1/events?limit=100"},
	{name: "batch100", method: "POST", path: "/v1/contacts/batch/create", body: batchBody},
}

// batchBody is a batch create of 100 contacts, as an import sends them.
var batchBody = `{"items":[` + strings.TrimSuffix(strings.Repeat(createBody+",", 100), ",") + `]}`

const patchBody = `{"jobTitle":"Analyst {rand}"}`

// customScenarios are BENCH_CUSTOM=1's (API.md section 14, issue 31): each custom list, count or
// write against its built-in equivalent, in a company whose contacts all hold a tier (select: gold,
// silver or bronze, a third each, gold exactly those of the first contact stage) and an arr (number:
// id*7919 mod 1,000,000, a permutation of 0..999,999 at a million contacts), with 50 more fields
// defined and unset (loadSQL). run puts the first contact stage's id in place of {stage}. The range
// page is measured against the plain page: a built-in range, createdAt[gte] of the newer half, walks
// the half it skips, as creation follows the id (2.4 s a page at a million contacts). Counts run at
// 2 connections, as at 32 a count of a third of a million contacts outlives wrk's timeout.
var customScenarios = []scenario{
	{name: "tier page", method: "GET", path: "/v1/contacts?limit=100&custom.tier=gold",
		builtin: &scenario{name: "stageId page", method: "GET", path: "/v1/contacts?limit=100&stageId={stage}"}},
	{name: "tier count", method: "GET", path: "/v1/contacts/count?custom.tier=gold", conns: 2,
		builtin: &scenario{name: "stageId count", method: "GET", path: "/v1/contacts/count?stageId={stage}", conns: 2}},
	{name: "arr sort page", method: "GET", path: "/v1/contacts?limit=100&sort=custom.arr",
		builtin: &scenario{name: "name sort page", method: "GET", path: "/v1/contacts?limit=100&sort=name"}},
	{name: "arr range page", method: "GET", path: "/v1/contacts?limit=100&custom.arr[gte]=500000",
		builtin: &scenario{name: "list page", method: "GET", path: "/v1/contacts?limit=100"}},
	{name: "create+custom", method: "POST", path: "/v1/contacts", body: createBody[:len(createBody)-1] + `,"custom":{"tier":"gold","arr":{rand}}}`,
		builtin: &scenario{name: "create", method: "POST", path: "/v1/contacts", body: createBody}},
	{name: "patch+custom", method: "PATCH", path: "/v1/contacts/{id}", body: `{"jobTitle":"Analyst {rand}","custom":{"tier":"silver","arr":{rand}}}`,
		builtin: &scenario{name: "patch", method: "PATCH", path: "/v1/contacts/{id}", body: patchBody}},
}

// feedSQL is the statement of a first page of GET /v1/events (handleEvents in events.go, limit 100):
// pgbench runs it with $1 the company, $2 and $3 0 (the start), $4 101.
const feedSQL = `SELECT id, xid::text::bigint, type, created_at, request_id, object, previous
		FROM events WHERE company_id = $1 AND xid < pg_snapshot_xmin(pg_current_snapshot()) AND (xid, id) > ($2::bigint::text::xid8, $3) ORDER BY events.xid, events.id LIMIT $4`

// healthz is the HTTP stack's ceiling: the baseline when there is no baseline binary.
var healthz = scenario{name: "/healthz", method: "GET", path: "/healthz"}

// config is the benchmark's knobs, from the environment (the Makefile passes them through).
type config struct {
	seconds, rounds, contacts, imports int
	dir, baseline, command             string
	scenarios                          []scenario
	metrics                            bool // the new server with metrics against itself without
	custom                             bool // custom scenarios against built-in ones, on the new server
	assoc                              bool // association scenarios against their equivalents, on the new server
	search                             bool // search scenarios against their equivalents, on the new server
	searchHits                         []int64
	summary                            bool     // summaries against their statements run alone by pgbench
	activities                         bool     // activity scenarios against their equivalents, on the new server
	pace                               []string // BENCH_PACE: the settings of the contacts' trigram index to measure writes at (pace.go)
}

// company is a loaded bench company: its key and the range of its loaded contact ids, and with
// BENCH_ASSOC or BENCH_ACTIVITIES of its business ids (and organization ids).
type company struct {
	ID       int64  `json:"companyId"`
	Key      string `json:"apiKey"`
	lo, hi   int64
	blo, bhi int64
	olo, ohi int64
}

// result is what one wrk run measured.
type result struct {
	rps      float64
	p50, p99 time.Duration
	max      time.Duration // the longest request
	errors   int           // non-2xx answers and socket errors (timeouts included)
	cpu      float64       // the server process's CPU time a request, in µs (Linux /proc)
}

func main() {
	if err := run(context.Background(), os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// run is the whole benchmark. Every process it starts is stopped before it returns, also on an
// error or Ctrl-C.
func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := parseConfig(getenv)
	if err != nil {
		return err
	}
	start := time.Now()
	root, err := runCmd(ctx, "", nil, "git", "rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	root = strings.TrimSpace(root)
	tmp, err := os.MkdirTemp("", "rolodex-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	revs, err := buildBinaries(ctx, root, tmp, cfg.baseline)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.dir, 0o755); err != nil {
		return err
	}
	pg, adminURL, err := startPostgres(ctx, cfg.dir)
	if err != nil {
		return err
	}
	defer pg.stop(os.Interrupt) // PostgreSQL's fast shutdown
	c, dbURL, err := prepareData(ctx, cfg, filepath.Join(tmp, "new"), adminURL)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "built %s, data ready, in %s\n", strings.Join(revs, " and "), time.Since(start).Round(time.Second))
	b := &bench{cfg: cfg, c: c, script: filepath.Join(root, "bench", "wrk.lua"), stdout: stdout, pg: pg}
	defer b.stopServers()
	if revs, err = b.startTargets(ctx, tmp, dbURL, revs); err != nil {
		return err
	}
	if cfg.pace != nil {
		section, err := paceBench(ctx, b, pg, filepath.Join(tmp, "new"), dbURL)
		if err != nil {
			return err
		}
		report := header(ctx, cfg, revs, dbURL) + section
		fmt.Fprintf(stdout, "\n%s\nbench took %s\n", report, time.Since(start).Round(time.Second))
		return os.WriteFile(filepath.Join(root, "bench", "RESULTS.md"), []byte(report), 0o644)
	}
	if cfg.summary {
		section, err := summaryBench(ctx, stdout, cfg, c, b.script, b.bases[0], pg.cmd.Path, tmp, dbURL)
		if err != nil {
			return err
		}
		report := header(ctx, cfg, revs, dbURL) + section
		fmt.Fprintf(stdout, "\n%s\nbench took %s\n", report, time.Since(start).Round(time.Second))
		return os.WriteFile(filepath.Join(root, "bench", "RESULTS.md"), []byte(report), 0o644)
	}
	if err := b.pairScenarios(ctx, dbURL); err != nil {
		return err
	}
	picked, notes, err := b.pick(ctx)
	if err != nil {
		return err
	}
	results, tps, err := b.rounds(ctx, picked, func() (float64, error) { return runPgbench(ctx, pg.cmd.Path, tmp, dbURL, c, cfg.seconds) })
	if err != nil {
		return err
	}
	notes = append(notes, pgbenchNote(picked, results, tps)...)
	notes = append(notes, keyNotes(picked, b.names, results)...)
	if cfg.metrics {
		notes = append(notes, cpuNotes(picked, results)...)
	}
	report, err := b.report(ctx, tmp, dbURL, revs, picked, results, notes)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n%s\nbench took %s\n", report, time.Since(start).Round(time.Second))
	return os.WriteFile(filepath.Join(root, "bench", "RESULTS.md"), []byte(report), 0o644)
}

// report renders the run's RESULTS.md: the header, the table of its mode, the sections of the import
// and of another company's retrieve beside a heavy neighbour (each when it runs), and the notes.
func (b *bench) report(ctx context.Context, tmp, dbURL string, revs []string, picked []scenario, results [][2][]result, notes []string) (string, error) {
	cfg := b.cfg
	report := header(ctx, cfg, revs, dbURL)
	switch {
	case cfg.custom:
		report += customTable(picked, results)
	case cfg.assoc || cfg.search || cfg.activities:
		report += assocTable(picked, results)
	default:
		report += table(picked, b.names[1], results)
	}
	if cfg.imports > 0 {
		f, err := importBench(ctx, b.stdout, filepath.Join(tmp, "new"), dbURL, b.bases[0], cfg.imports, b.cpu)
		if err != nil {
			return "", fmt.Errorf("import: %w", err)
		}
		report += f.section(cfg.imports)
	}
	if !cfg.custom && !cfg.assoc && !cfg.search && !cfg.activities && !cfg.metrics {
		section, err := neighbourBench(ctx, b.stdout, filepath.Join(tmp, "new"), dbURL, b.script, b.bases[:len(revs)], b.names[:], b.c, cfg.seconds)
		if err != nil {
			return "", fmt.Errorf("neighbour: %w", err)
		}
		report += section
	}
	for _, n := range notes {
		report += "\n" + n + "\n"
	}
	return report, nil
}

// bench is a run under way: its knobs, the company its requests use, and the two targets that each
// scenario runs against: the new server and the baseline server, or the new server's /healthz, or
// the new server with metrics and without, or (BENCH_CUSTOM, BENCH_ASSOC) each scenario and its
// equivalent on the new server.
type bench struct {
	cfg     config
	c       company
	script  string    // bench/wrk.lua
	names   [2]string // the targets', as the report names them
	bases   [2]string // their base URLs (the same twice when there is one server)
	servers []*proc   // the servers, whose CPU time is measured
	pg      *proc     // PostgreSQL
	stdout  io.Writer
}

// cpu is the CPU time the new server has used, and it and PostgreSQL together, in clock ticks (1/100 s).
func (b *bench) cpu() (server, all int64) {
	server = cpuTicks(b.servers[0])
	return server, server + pgTicks(b.pg)
}

// startTargets starts the servers of the run: revs[0]'s, and revs[1]'s (the baseline) when given, or
// with BENCH_METRICS=1 the new server twice, with -metrics-addr and without. It returns revs with
// the second target's name added when that is the new server without metrics.
func (b *bench) startTargets(ctx context.Context, tmp, dbURL string, revs []string) ([]string, error) {
	b.names = [2]string{"new", "baseline"}
	bins := [2]string{"new", "baseline"}
	var env [2][]string
	if b.cfg.metrics {
		b.names, bins = [2]string{"metrics", "no-metrics"}, [2]string{"new", "new"}
		port, err := freePort()
		if err != nil {
			return revs, err
		}
		env[0] = []string{fmt.Sprint("ROLODEX_METRICS_ADDR=127.0.0.1:", port)}
		revs = append(revs, revs[0]+" without -metrics-addr")
	}
	for i, name := range b.names[:len(revs)] {
		p, base, err := startServer(ctx, filepath.Join(tmp, bins[i]), dbURL, filepath.Join(b.cfg.dir, name+".log"), env[i]...)
		if err != nil {
			return revs, fmt.Errorf("%s server: %w", name, err)
		}
		b.bases[i], b.servers = base, append(b.servers, p)
	}
	if len(revs) == 1 {
		b.bases[1], b.names[1] = b.bases[0], healthz.name
	}
	return revs, nil
}

// stopServers stops the servers that startTargets started.
func (b *bench) stopServers() {
	for _, p := range b.servers {
		p.stop(syscall.SIGTERM)
	}
}

// pairScenarios readies BENCH_CUSTOM's and BENCH_ASSOC's scenarios, each paired with its equivalent
// on the same server: it puts the loaded data's ids in place of their placeholders.
func (b *bench) pairScenarios(ctx context.Context, dbURL string) error {
	var fill *strings.Replacer
	var err error
	switch {
	case b.cfg.custom:
		b.names = [2]string{"custom", "built-in"}
		var stage string
		stage, err = firstStage(ctx, dbURL, b.c)
		fill = strings.NewReplacer("{stage}", stage)
	case b.cfg.assoc:
		b.names = [2]string{"scenario", "equivalent"}
		fill, err = assocPlaceholders(ctx, dbURL, b.bases[0], &b.c)
	case b.cfg.search:
		b.names = [2]string{"scenario", "equivalent"}
		fill, b.cfg.searchHits, err = searchPlaceholders(ctx, b.bases[0], &b.c)
	case b.cfg.activities:
		b.names = [2]string{"scenario", "equivalent"}
		fill, err = activityPlaceholders(ctx, dbURL, b.bases[0], &b.c)
	default:
		return nil
	}
	if err != nil {
		return err
	}
	b.cfg.scenarios = slices.Clone(b.cfg.scenarios)
	for i, s := range b.cfg.scenarios {
		eq := *s.builtin
		s.path, eq.path = fill.Replace(s.path), fill.Replace(eq.path)
		s.builtin = &eq
		b.cfg.scenarios[i] = s
	}
	return nil
}

// load is what scenario s runs on target i: /healthz on the /healthz target, the equivalent of a
// paired scenario on the second target, else s.
func (b *bench) load(i int, s scenario) scenario {
	switch {
	case b.names[i] == healthz.name:
		return healthz
	case s.builtin != nil && i == 1:
		return *s.builtin
	}
	return s
}

// pick sends one request of each scenario to each target first, as a scenario answering 4xx or 5xx
// would measure error pages (one that only the baseline answers 404 is newer than it, and is left
// out, with a note); then runs each for an untimed second, so that the first round does not pay
// for cold caches. It returns the scenarios to measure and the notes.
func (b *bench) pick(ctx context.Context) ([]scenario, []string, error) {
	var picked []scenario
	var notes []string
	for _, s := range b.cfg.scenarios {
		note, err := b.checkTargets(ctx, s)
		if err != nil {
			return nil, nil, err
		}
		if note != "" {
			notes = append(notes, note)
			fmt.Fprintln(b.stdout, note)
			continue
		}
		for i, base := range b.bases {
			if _, err := runWrk(ctx, b.script, base, b.c, b.load(i, s), 1); err != nil {
				return nil, nil, err
			}
		}
		picked = append(picked, s)
	}
	return picked, notes, nil
}

// checkTargets sends s once to each target (check); it returns a note when the baseline has no such
// endpoint, and an error when a target does not answer 2xx.
func (b *bench) checkTargets(ctx context.Context, s scenario) (string, error) {
	for i, base := range b.bases {
		status, err := check(ctx, base, b.c, b.load(i, s))
		if status == http.StatusNotFound && b.names[i] == "baseline" {
			return s.name + ": not run, the baseline has no such endpoint", nil
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", b.names[i], err)
		}
	}
	return "", nil
}

// rounds runs every picked scenario on both targets back to back, in alternating order, so that a
// noisy neighbour on the machine hits both alike, for cfg.rounds rounds; and pgbench after each
// round's events100. It returns the results by scenario, target and round, and pgbench's.
func (b *bench) rounds(ctx context.Context, picked []scenario, pgbench func() (float64, error)) ([][2][]result, []float64, error) {
	results := make([][2][]result, len(picked))
	var tps []float64
	for round := range b.cfg.rounds {
		fmt.Fprintf(b.stdout, "round %d of %d\n", round+1, b.cfg.rounds)
		for j, s := range picked {
			for _, i := range [][]int{{0, 1}, {1, 0}}[round%2] {
				r, err := b.measure(ctx, i, s)
				if err != nil {
					return nil, nil, fmt.Errorf("%s on %s: %w", s.name, b.names[i], err)
				}
				results[j][i] = append(results[j][i], r)
			}
			if s.name != "events100" {
				continue
			}
			t, err := pgbench()
			if err != nil {
				return nil, nil, err
			}
			fmt.Fprintf(b.stdout, "  %-10s %-9s %8.0f tps\n", s.name, "pgbench", t)
			tps = append(tps, t)
		}
	}
	return results, tps, nil
}

// measure runs s on target i for cfg.seconds, with the CPU time its server spent a request.
func (b *bench) measure(ctx context.Context, i int, s scenario) (result, error) {
	server := b.servers[min(i, len(b.servers)-1)]
	cpu := cpuTicks(server)
	r, err := runWrk(ctx, b.script, b.bases[i], b.c, b.load(i, s), b.cfg.seconds)
	if err != nil {
		return r, err
	}
	r.cpu = float64(cpuTicks(server)-cpu) * 1e4 / (r.rps * float64(b.cfg.seconds)) // 100 ticks a second
	fmt.Fprintf(b.stdout, "  %-14s %-9s %8.0f req/s  p50 %s  p99 %s  errors %d\n", s.name, b.names[i], r.rps, ms(float64(r.p50)), ms(float64(r.p99)), r.errors)
	return r, nil
}

// pgbenchNote compares events100 with pgbench running its SQL, when both ran.
func pgbenchNote(picked []scenario, results [][2][]result, tps []float64) []string {
	if tps == nil {
		return nil
	}
	j := slices.IndexFunc(picked, func(s scenario) bool { return s.name == "events100" })
	n, t := median(results[j][0], func(r result) float64 { return r.rps }), middle(tps)
	return []string{fmt.Sprintf("events100 against pgbench running its SQL (-c32 -j2 -M prepared): %.0f req/s / %.0f tps = %.2f", n, t, n/t)}
}

// keyNotes say what an Idempotency-Key costs: each keyed scenario against its plain one, round by
// round on the same server, where they ran one after the other.
func keyNotes(picked []scenario, names [2]string, results [][2][]result) []string {
	var notes []string
	for j, s := range picked {
		p := slices.IndexFunc(picked, func(p scenario) bool { return p.name+"+key" == s.name })
		if p < 0 {
			continue
		}
		var per []string
		for i, name := range names {
			if name == healthz.name {
				break
			}
			var xs []float64
			for k := range results[j][i] {
				xs = append(xs, results[j][i][k].rps/results[p][i][k].rps)
			}
			per = append(per, fmt.Sprintf("%s %.2f (%.2f–%.2f)", name, middle(xs), slices.Min(xs), slices.Max(xs)))
		}
		notes = append(notes, fmt.Sprintf("%s / %s req/s, paired by round: median (range): %s", s.name, picked[p].name, strings.Join(per, "; ")))
	}
	return notes
}

// cpuNotes give the server's CPU time a request, with metrics against without: steadier than req/s
// on a busy machine, as it is what the server itself spent.
func cpuNotes(picked []scenario, results [][2][]result) []string {
	var notes []string
	cpu := func(r result) float64 { return r.cpu }
	for j, s := range picked {
		var xs []float64
		for k := range results[j][0] {
			xs = append(xs, results[j][0][k].cpu/results[j][1][k].cpu)
		}
		notes = append(notes, fmt.Sprintf("%s: server CPU a request, median of the rounds: metrics %.1f µs, no-metrics %.1f µs; paired by round: %.3f (%.3f–%.3f)",
			s.name, median(results[j][0], cpu), median(results[j][1], cpu), middle(xs), slices.Min(xs), slices.Max(xs)))
	}
	return notes
}

// parseConfig reads BENCH_TIME, ROUNDS, BENCH_CONTACTS, BENCH_DIR, BASELINE, BENCH_METRICS,
// BENCH_CUSTOM, BENCH_ASSOC, BENCH_SEARCH, BENCH_SUMMARY, BENCH_ACTIVITIES and BENCH_ONLY, and spells
// the command that sets the same (as `make bench` with what differs from the defaults). The modes but
// BENCH_METRICS run no import.
func parseConfig(getenv func(string) string) (config, error) {
	cfg := config{command: "make bench", scenarios: scenarios}
	or := func(k, def string) string {
		v := getenv(k)
		if v == "" || v == def {
			return def
		}
		cfg.command += " " + k + "=" + v
		return v
	}
	cfg.baseline, cfg.dir = or("BASELINE", ""), or("BENCH_DIR", "/var/tmp/rolodex-bench")
	cfg.metrics, cfg.custom, cfg.assoc = or("BENCH_METRICS", "") == "1", or("BENCH_CUSTOM", "") == "1", or("BENCH_ASSOC", "") == "1"
	cfg.search = or("BENCH_SEARCH", "") == "1"
	cfg.summary = or("BENCH_SUMMARY", "") == "1"
	cfg.activities = or("BENCH_ACTIVITIES", "") == "1"
	if pace := or("BENCH_PACE", ""); pace != "" {
		cfg.pace = strings.Split(pace, ",")
	}
	if err := cfg.checkModes(); err != nil {
		return cfg, err
	}
	d, err := time.ParseDuration(or("BENCH_TIME", "5s"))
	if err != nil || d < time.Second {
		return cfg, fmt.Errorf("BENCH_TIME=%q: want a duration of at least 1s", getenv("BENCH_TIME"))
	}
	cfg.seconds = int(d.Seconds())
	if cfg.rounds, err = strconv.Atoi(or("ROUNDS", "3")); err != nil || cfg.rounds < 1 {
		return cfg, fmt.Errorf("ROUNDS=%q: want a positive integer", getenv("ROUNDS"))
	}
	least := 100
	if cfg.assoc {
		least = minAssocContacts
	} else if cfg.search {
		least = minSearchContacts
	}
	if cfg.contacts, err = strconv.Atoi(or("BENCH_CONTACTS", "20000")); err != nil || cfg.contacts < least {
		return cfg, fmt.Errorf("BENCH_CONTACTS=%q: want an integer of at least %d", getenv("BENCH_CONTACTS"), least)
	}
	if cfg.imports, err = strconv.Atoi(or("BENCH_IMPORT", "100000")); err != nil || cfg.imports < 0 {
		return cfg, fmt.Errorf("BENCH_IMPORT=%q: want a count of contacts, or 0", getenv("BENCH_IMPORT"))
	} else if cfg.custom || cfg.assoc || cfg.search || cfg.summary || cfg.activities {
		cfg.imports = 0
	}
	if only := or("BENCH_ONLY", ""); only != "" {
		cfg.scenarios, err = onlyScenarios(cfg.scenarios, only)
	}
	return cfg, err
}

// checkModes refuses modes that do not go together, and picks the scenarios of the one given: a
// mode compares on one server, so it takes no BASELINE and no other mode.
func (cfg *config) checkModes() error {
	switch {
	case cfg.metrics && cfg.baseline != "":
		return errors.New("BENCH_METRICS=1 compares this tree with itself: give no BASELINE")
	case cfg.custom && (cfg.baseline != "" || cfg.metrics):
		return errors.New("BENCH_CUSTOM=1 compares custom scenarios with built-in ones on this tree: give no BASELINE or BENCH_METRICS")
	case cfg.assoc && (cfg.baseline != "" || cfg.metrics || cfg.custom):
		return errors.New("BENCH_ASSOC=1 compares association scenarios with their equivalents on this tree: give no BASELINE, BENCH_METRICS or BENCH_CUSTOM")
	case cfg.search && (cfg.baseline != "" || cfg.metrics || cfg.custom || cfg.assoc):
		return errors.New("BENCH_SEARCH=1 compares search scenarios with their equivalents on this tree: give no BASELINE or other mode")
	case cfg.summary && (cfg.baseline != "" || cfg.metrics || cfg.custom || cfg.assoc || cfg.search):
		return errors.New("BENCH_SUMMARY=1 compares summaries with their statements on this tree: give no BASELINE or other mode")
	case cfg.pace != nil && (cfg.baseline != "" || cfg.metrics || cfg.custom || cfg.assoc || cfg.search || cfg.summary || cfg.activities):
		return errors.New("BENCH_PACE measures this tree's writes at settings of its index: give no BASELINE or other mode")
	case cfg.activities && (cfg.baseline != "" || cfg.metrics || cfg.custom || cfg.assoc || cfg.search || cfg.summary):
		return errors.New("BENCH_ACTIVITIES=1 compares activity scenarios with their equivalents on this tree: give no BASELINE or other mode")
	case cfg.custom:
		cfg.scenarios = customScenarios
	case cfg.assoc:
		cfg.scenarios = assocScenarios
	case cfg.search:
		cfg.scenarios = searchScenarios
	case cfg.activities:
		cfg.scenarios = activityScenarios
	}
	return nil
}

// onlyScenarios returns the scenarios of all named in only, a comma-separated list, in its order.
func onlyScenarios(all []scenario, only string) ([]scenario, error) {
	var picked []scenario
	for name := range strings.SplitSeq(only, ",") {
		i := slices.IndexFunc(all, func(s scenario) bool { return s.name == name })
		if i < 0 {
			var names []string
			for _, s := range all {
				names = append(names, s.name)
			}
			return nil, fmt.Errorf("BENCH_ONLY: no scenario %q (%s)", name, strings.Join(names, ", "))
		}
		picked = append(picked, all[i])
	}
	return picked, nil
}

// runCmd runs a command to its end (at most 30 minutes) in dir and returns its standard output; an
// error carries its standard error. env adds to this process's environment.
func runCmd(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if ctx.Err() != nil {
		err = ctx.Err() // interrupted or out of time: what it printed does not matter
	}
	if err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, stderr.Bytes())
	}
	return string(out), nil
}

// buildBinaries builds the working tree into tmp/new and, when baseline is a git revision, that
// revision into tmp/baseline, from git archive (which leaves no worktree behind if the bench is
// killed). It returns the names git gives them.
func buildBinaries(ctx context.Context, root, tmp, baseline string) ([]string, error) {
	build := func(dir, name string) error {
		_, err := runCmd(ctx, dir, []string{"CGO_ENABLED=0"}, "go", "build", "-o", filepath.Join(tmp, name), ".")
		return err
	}
	rev, err := runCmd(ctx, root, nil, "git", "describe", "--always", "--dirty")
	if err != nil {
		return nil, err
	}
	revs := []string{strings.TrimSpace(rev)}
	if err := build(root, "new"); err != nil || baseline == "" {
		return revs, err
	}
	if rev, err = runCmd(ctx, root, nil, "git", "rev-parse", "--short", baseline+"^{commit}"); err != nil {
		return nil, err
	}
	revs = append(revs, strings.TrimSpace(rev))
	src := filepath.Join(tmp, "baseline-src")
	if _, err := runCmd(ctx, root, nil, "sh", "-c", `mkdir "$0" && git archive "$1" | tar -x -C "$0"`, src, revs[1]); err != nil {
		return nil, err
	}
	return revs, build(src, "baseline")
}

// proc is a long-running child (PostgreSQL, a server) that must be stopped however the bench ends.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once it has exited
}

// startProc starts cmd with its output going to the file logPath, and returns once ready(ctx) holds.
// It fails, with the end of the log, when the process exits, ctx ends or ten minutes pass first: a
// server migrates kept data before it listens, which takes minutes at a million rows.
func startProc(ctx context.Context, cmd *exec.Cmd, logPath string, ready func(context.Context) bool) (*proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); f.Close(); close(p.done) }()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	for !ready(ctx) {
		err := errors.New("exited")
		select {
		case <-time.After(100 * time.Millisecond):
			continue
		case <-p.done:
		case <-ctx.Done():
			err = fmt.Errorf("not ready: %w", ctx.Err())
		}
		p.stop(os.Interrupt)
		b, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("%s %w; the end of %s:\n%s", filepath.Base(cmd.Path), err, logPath, b[max(0, len(b)-2000):])
	}
	return p, nil
}

// stop sends sig and waits up to 20 s for the process to exit, then kills it.
func (p *proc) stop(sig os.Signal) {
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// cpuTicks is the user and system CPU time p has used, in clock ticks (1/100 s); 0 where /proc is not.
func cpuTicks(p *proc) int64 {
	b, _ := os.ReadFile(fmt.Sprint("/proc/", p.cmd.Process.Pid, "/stat"))
	_, rest, _ := bytes.Cut(b, []byte(") ")) // after the command's name, which may hold spaces
	f := strings.Fields(string(rest))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64) // utime, field 14 of proc(5)
	s, _ := strconv.ParseInt(f[12], 10, 64) // stime, field 15
	return u + s
}

// freePort returns a free loopback port in 20000-32767: below Linux's ephemeral ports, so no
// client socket can take it before the server binds it.
func freePort() (int, error) {
	for range 100 {
		port := 20000 + rand.IntN(12768)
		if l, err := net.Listen("tcp", fmt.Sprint("127.0.0.1:", port)); err == nil {
			return port, l.Close()
		}
	}
	return 0, errors.New("no free port in 20000-32767")
}

// startPostgres starts the PostgreSQL cluster in dir/data (running initdb the first time) on
// 127.0.0.1 only, and returns it with the URL of its database "postgres".
func startPostgres(ctx context.Context, dir string) (*proc, string, error) {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres") // Debian and Ubuntu
	if p, err := exec.LookPath("postgres"); err == nil {
		bins = append(bins, p)
	}
	if len(bins) == 0 {
		return nil, "", errors.New("PostgreSQL's server binaries are missing: apt-get install postgresql (make bench does it as root)")
	}
	binDir, data := filepath.Dir(bins[len(bins)-1]), filepath.Join(dir, "data")
	// PostgreSQL refuses to run as root: then it runs as the user postgres, who gets dir.
	attr := &syscall.SysProcAttr{}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, "", fmt.Errorf("as root, PostgreSQL runs as the user postgres: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, "", err
		}
		attr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		cmd := exec.CommandContext(ctx, filepath.Join(binDir, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C")
		cmd.Dir, cmd.SysProcAttr = dir, attr
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, "", fmt.Errorf("initdb in %s: %w\n%s", data, err, out)
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	// No unix socket; memory for a small box with a few GB to spare; fsync on, as in production.
	cmd := exec.Command(filepath.Join(binDir, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", "",
		"-c", "listen_addresses=127.0.0.1", "-c", "shared_buffers=1GB", "-c", "max_wal_size=8GB", "-c", "maintenance_work_mem=512MB", "-c", "jit=off")
	cmd.Dir, cmd.SysProcAttr = dir, attr
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, "", err
	}
	defer db.Close()
	p, err := startProc(ctx, cmd, filepath.Join(dir, "postgres.log"), func(ctx context.Context) bool { return db.PingContext(ctx) == nil })
	return p, url, err
}

// loadVersion names the data that loadSQL makes; a cached load of another version is reloaded. A
// load with custom fields (BENCH_CUSTOM=1) is recorded as loadVersion + customLoad.
const loadVersion, customLoad = 3, 100

// Rows per company besides the contacts: 50 users (and the admin), 500 organizations, and one
// business record for every 5 contacts.
const users, organizations, businessPerContact = 50, 500, 5

// loadSQL fills company $1 with $2 rows each of users, organizations, contacts (each with an
// organization, country, stage, assigned user and creator, so that every expansion finds an
// object), business records and events: the contact.created of each contact, its object the
// contact as the API shows it. Values follow from the row number: every load is the same. Where the
// company has the contact fields tier and arr (customFieldsSQL), each contact holds a value of both
// in its custom column, which customValuesSQL copies into custom_values.
var loadSQL = []string{
	`INSERT INTO users (company_id, name, surname, email)
	 SELECT $1, 'User ' || g, 'Bench', 'user' || g || '@example.com' FROM generate_series(1, $2) AS g`,
	`INSERT INTO organizations (company_id, name) SELECT $1, 'Organization ' || g FROM generate_series(1, $2) AS g`,
	`WITH u AS (SELECT array_agg(id ORDER BY id) AS ids FROM users WHERE company_id = $1),
	      o AS (SELECT array_agg(id ORDER BY id) AS ids FROM organizations WHERE company_id = $1),
	      s AS (SELECT array_agg(id ORDER BY id) AS ids FROM stages WHERE company_id = $1 AND board_id IS NULL),
	      f AS (SELECT min(id) FILTER (WHERE key = 'tier') AS tier, min(id) FILTER (WHERE key = 'arr') AS arr
	          FROM custom_fields WHERE company_id = $1 AND object = 'contact' AND deleted_at IS NULL)
	 INSERT INTO contacts (company_id, name, surname, email, phone, job_title, city, with_sales, country_id,
	     stage_id, organization_id, assigned_to_id, user_creator_id, created_at, updated_at, custom)
	 SELECT $1, 'Name ' || g, 'Surname ' || g % 997, 'contact' || g || '@example.com', '+34 600 ' || lpad((g % 1000000)::text, 6, '0'),
	     'Job ' || g % 50, 'City ' || g % 100, g % 3 = 0, (ARRAY[724, 620, 276, 250, 372])[1 + g % 5],
	     s.ids[1 + g % cardinality(s.ids)], o.ids[1 + g % cardinality(o.ids)], u.ids[1 + g % cardinality(u.ids)],
	     u.ids[1 + g / 7 % cardinality(u.ids)], timestamptz '2025-01-01' + g * interval '1 s', timestamptz '2025-01-01' + g * interval '1 s',
	     ('{"' || f.tier || '":"' || (ARRAY['gold', 'silver', 'bronze'])[1 + g % 3] || '","' || f.arr || '":' || g::bigint * 7919 % 1000000 || '}')::json
	 FROM generate_series(1, $2) AS g, u, o, s, f ORDER BY g`,
	`WITH u AS (SELECT array_agg(id ORDER BY id) AS ids FROM users WHERE company_id = $1),
	      o AS (SELECT array_agg(id ORDER BY id) AS ids FROM organizations WHERE company_id = $1),
	      b AS (SELECT id FROM boards WHERE company_id = $1 AND is_default),
	      s AS (SELECT array_agg(st.id ORDER BY st.position) AS ids FROM stages st JOIN b ON st.board_id = b.id WHERE st.company_id = $1)
	 INSERT INTO business (company_id, title, value, status_id, organization_id, currency_id, user_owner_id,
	     user_creator_id, board_id, stage_id, position)
	 SELECT $1, 'Deal ' || g, round(g % 10000000 / 100.0, 2), 1 + g % 3, o.ids[1 + g % cardinality(o.ids)],
	     (SELECT default_currency_id FROM companies WHERE id = $1), u.ids[1 + g % cardinality(u.ids)],
	     u.ids[1 + g / 7 % cardinality(u.ids)], b.id, s.ids[1 + g % cardinality(s.ids)], g
	 FROM generate_series(1, $2) AS g, u, o, b, s`,
	`INSERT INTO events (company_id, type, created_at, request_id, object)
	 SELECT $1, 'contact.created', c.created_at, 'bench', row_to_json(o)::text
	 FROM contacts AS c, LATERAL (SELECT c.id::text AS id, c.name, c.surname, c.dni, c.job_title AS "jobTitle", c.email,
	     c.secondary_email AS "secondaryEmail", c.phone, c.mobile_phone AS "mobilePhone", c.url_avatar AS "urlAvatar",
	     c.address, c.city, c.with_sales AS "withSales", c.country_id AS "countryId", c.classification,
	     c.stage_id AS "stageId", c.organization_id AS "organizationId", c.assigned_to_id AS "assignedToId",
	     c.user_creator_id AS "userCreatorId",
	     to_char(c.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "createdAt",
	     to_char(c.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "updatedAt") AS o
	 WHERE c.company_id = $1 ORDER BY c.id LIMIT $2`,
}

// customFieldsSQL defines 50 contact fields of company $1, of every type, and before them, when $2,
// tier (select: gold, silver, bronze) and arr (number), as POST /v1/customFields would store them,
// with their keys in custom_field_keys.
const customFieldsSQL = `WITH f AS (INSERT INTO custom_fields (company_id, object, key, label, type, options)
	SELECT $1::bigint, 'contact', key, label, type, options FROM (VALUES
	    ('tier', 'Tier', 'select', '[{"value":"gold","label":"Gold"},{"value":"silver","label":"Silver"},{"value":"bronze","label":"Bronze"}]'),
	    ('arr', 'ARR', 'number', NULL)) AS f (key, label, type, options) WHERE $2::boolean
	UNION ALL
	SELECT $1::bigint, 'contact', 'extra_' || g, 'Extra ' || g, t, CASE WHEN t LIKE '%elect' THEN '[{"value":"a","label":"A"},{"value":"b","label":"B"}]' END
	FROM generate_series(1, 50) AS g, LATERAL (SELECT (ARRAY['text', 'number', 'money', 'date', 'datetime', 'boolean', 'select',
	    'multiSelect', 'url', 'email', 'user'])[1 + g % 11] AS t) AS t
	RETURNING company_id, object, id, key)
	INSERT INTO custom_field_keys (company_id, object, keys)
	SELECT company_id, object, string_agg(id || ':' || key, ',' ORDER BY id) FROM f GROUP BY company_id, object`

// customValuesSQL writes the rows of custom_values of company $1's contacts' select and number
// values (their custom column, which loadSQL set), as saveCustom would.
const customValuesSQL = `INSERT INTO custom_values (company_id, field_id, object_id, text_value, num_value)
	SELECT $1, f.id, c.id, CASE f.type WHEN 'select' THEN e.value END, CASE f.type WHEN 'number' THEN e.value::numeric END
	FROM contacts AS c, json_each_text(c.custom) AS e, custom_fields AS f
	WHERE c.company_id = $1 AND c.custom IS NOT NULL AND f.company_id = $1 AND f.id = e.key::bigint`

// prepareData makes sure the database rolodex holds cfg.contacts contacts per company, and returns
// the first company and the database's URL. A load is kept when the table bench_load, written
// last, records its size and version (cfg.loadVersion); else the database is made anew (loadData).
func prepareData(ctx context.Context, cfg config, bin, adminURL string) (c company, url string, err error) {
	url = strings.Replace(adminURL, "/postgres?", "/rolodex?", 1)
	db, err := sql.Open("pgx", url)
	if err != nil {
		return c, url, err
	}
	const qCached = `SELECT company_id, api_key, lo, hi FROM bench_load WHERE contacts = $1 AND version = $2`
	cached := db.QueryRowContext(ctx, qCached, cfg.contacts, cfg.loadVersion()).Scan(&c.ID, &c.Key, &c.lo, &c.hi) == nil
	if cached {
		err = cleanLoad(ctx, db, cfg, c)
	}
	db.Close()
	if cached || err != nil {
		return c, url, err
	}
	admin, err := sql.Open("pgx", adminURL)
	if err != nil {
		return c, url, err
	}
	defer admin.Close()
	for _, q := range []string{`DROP DATABASE IF EXISTS rolodex WITH (FORCE)`, `CREATE DATABASE rolodex`} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			return c, url, err
		}
	}
	c, err = loadData(ctx, cfg, bin, url)
	return c, url, err
}

// loadVersion is the version of the load that cfg asks for, as bench_load records it.
func (cfg config) loadVersion() int {
	switch {
	case cfg.custom:
		return loadVersion + customLoad
	case cfg.assoc:
		return loadVersion + assocLoad
	case cfg.summary:
		return loadVersion + summaryLoad
	case cfg.activities:
		return loadVersion + activitiesLoad
	}
	return loadVersion
}

// cleanLoad deletes from a kept load what earlier runs wrote, so that every run starts from the same
// rows: the contacts and events they created and, with BENCH_ASSOC, the associations (the load's
// are the first cfg.contacts ids). A load from before associations has no table of them.
func cleanLoad(ctx context.Context, db *sql.DB, cfg config, c company) error {
	const qClean = `WITH e AS (DELETE FROM events WHERE request_id <> 'bench')
		DELETE FROM contacts WHERE company_id = $1 AND id > $2`
	err := withoutCountTriggers(ctx, db, func() error {
		if _, err := db.ExecContext(ctx, qClean, c.ID, c.hi); err != nil {
			return err
		}
		if cfg.activities { // 403,000 activities' deletes, each its count's upsert, ran for more than 12 minutes
			return cleanActivities(ctx, db, cfg.contacts)
		}
		return nil
	})
	if err != nil {
		return err
	}
	vacuum := `VACUUM ANALYZE contacts, events, custom_values`
	if cfg.assoc {
		if _, err := db.ExecContext(ctx, `DELETE FROM associations WHERE id > $1`, cfg.contacts); err != nil {
			return err
		}
		vacuum += ", associations"
	}
	if cfg.activities {
		vacuum += ", activities, associations"
	}
	_, err = db.ExecContext(ctx, vacuum)
	return err
}

// loadData fills the new database at url: bin creates the companies (migrating it), with cfg.custom
// customFieldsSQL defines their fields (tier and arr only the first's), loadRows fills them, with
// the secondary indexes built once after it rather than row by row (at a million contacts, minutes
// sooner), and VACUUM ANALYZE. bench_load records the load last. It returns the first company.
func loadData(ctx context.Context, cfg config, bin, url string) (company, error) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return company{}, err
	}
	defer db.Close()
	var cs []company
	for _, name := range []string{"Bench A", "Bench B"} {
		out, err := runCmd(ctx, "", []string{"DATABASE_URL=" + url}, bin, "company", "create", "-name", name)
		if err != nil {
			return company{}, err
		}
		var c company
		if err := json.Unmarshal([]byte(out), &c); err != nil {
			return c, fmt.Errorf("company create printed %q: %w", out, err)
		}
		cs = append(cs, c)
		if !cfg.custom {
			continue
		}
		if _, err := db.ExecContext(ctx, customFieldsSQL, c.ID, len(cs) == 1); err != nil {
			return c, err
		}
	}
	const qIndexes = `SELECT string_agg(pg_get_indexdef(indexrelid), '; '), string_agg(indexrelid::regclass::text, ', ')
		FROM pg_index WHERE indrelid IN ('contacts'::regclass, 'business'::regclass, 'events'::regclass, 'custom_values'::regclass,
			'associations'::regclass, 'activities'::regclass) AND NOT indisprimary`
	var indexes, names string
	if err := db.QueryRowContext(ctx, qIndexes).Scan(&indexes, &names); err != nil {
		return company{}, err
	}
	if _, err := db.ExecContext(ctx, `DROP INDEX `+names); err != nil {
		return company{}, err
	}
	if err := withoutCountTriggers(ctx, db, func() error { return loadRows(ctx, db, cfg, cs) }); err != nil {
		return company{}, err
	}
	c, err := loadedRange(ctx, db, cfg, cs[0])
	if err != nil {
		return c, err
	}
	const qMarker = `CREATE TABLE bench_load (company_id bigint, api_key text, contacts integer, version integer, lo bigint, hi bigint)`
	for _, q := range []string{indexes, `VACUUM ANALYZE`, qMarker} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return c, err
		}
	}
	_, err = db.ExecContext(ctx, `INSERT INTO bench_load VALUES ($1, $2, $3, $4, $5, $6)`, c.ID, c.Key, cfg.contacts, cfg.loadVersion(), c.lo, c.hi)
	return c, err
}

// loadRows fills each company of cs with loadSQL and customValuesSQL; with cfg.assoc the first holds
// assocOrganizations organizations, a business record a contact (not one for every
// businessPerContact) and associationsSQL's associations; with cfg.summary, a business record a
// contact, each with a value of summaryFieldSQL's field.
func loadRows(ctx context.Context, db *sql.DB, cfg config, cs []company) error {
	for k, c := range cs {
		counts := []int{users, organizations, cfg.contacts, cfg.contacts / businessPerContact, cfg.contacts}
		if cfg.assoc && k == 0 {
			counts[1], counts[3] = assocOrganizations, cfg.contacts
		}
		if cfg.summary && k == 0 {
			counts[3] = cfg.contacts
		}
		for i, n := range counts {
			if _, err := db.ExecContext(ctx, loadSQL[i], c.ID, n); err != nil {
				return fmt.Errorf("load company %d: %w\n%s", c.ID, err, loadSQL[i])
			}
		}
		if _, err := db.ExecContext(ctx, customValuesSQL, c.ID); err != nil {
			return fmt.Errorf("load company %d: %w\n%s", c.ID, err, customValuesSQL)
		}
		if cfg.summary && k == 0 {
			for _, q := range summaryFieldSQL {
				if _, err := db.ExecContext(ctx, q, c.ID); err != nil {
					return fmt.Errorf("load company %d: %w\n%s", c.ID, err, q)
				}
			}
		}
		if cfg.activities && k == 0 {
			if err := loadActivities(ctx, db, c, cfg.contacts); err != nil {
				return err
			}
		}
		if !cfg.assoc || k > 0 {
			continue
		}
		if _, err := db.ExecContext(ctx, associationsSQL, c.ID, cfg.contacts, assocOrganizations*9/10); err != nil {
			return fmt.Errorf("load company %d: %w\n%s", c.ID, err, associationsSQL)
		}
	}
	return nil
}

// loadedRange returns c with the range of its loaded contact ids, which wrk picks from: one INSERT
// numbers its rows from the identity without gaps. With cfg.assoc it checks that the associations
// hold the ids 1 to cfg.contacts, which cleanLoad keeps.
func loadedRange(ctx context.Context, db *sql.DB, cfg config, c company) (company, error) {
	err := db.QueryRowContext(ctx, `SELECT min(id), max(id) FROM contacts WHERE company_id = $1`, c.ID).Scan(&c.lo, &c.hi)
	if err != nil || c.hi-c.lo+1 != int64(cfg.contacts) {
		return c, fmt.Errorf("contact ids of company %d: %d..%d, want %d in a row (%v)", c.ID, c.lo, c.hi, cfg.contacts, err)
	}
	if !cfg.assoc {
		return c, nil
	}
	var lo, hi, n int64
	err = db.QueryRowContext(ctx, `SELECT min(id), max(id), count(*) FROM associations`).Scan(&lo, &hi, &n)
	if err != nil || lo != 1 || hi != int64(cfg.contacts) || n != hi {
		return c, fmt.Errorf("association ids: %d..%d (%d), want 1..%d (%v)", lo, hi, n, cfg.contacts, err)
	}
	return c, nil
}

// withoutCountTriggers runs f, which inserts or deletes many rows of contacts, business or
// activities in one statement, with the count triggers (schema/0010_citus.sql: one upsert of the
// company's count a row) turned off, and then counts those tables' rows once. Within one
// transaction every row's upsert walks the versions the earlier rows left of the same count row: one
// INSERT ... SELECT of 100,000 contacts took 194 s with the trigger and 23 s without, and a million
// did not end in 16 minutes. docs/scaling.md gives operators the same steps for a bulk import.
func withoutCountTriggers(ctx context.Context, db *sql.DB, f func() error) error {
	const qTriggers = `SELECT format('ALTER TABLE %s %%s TRIGGER %I', tgrelid::regclass, tgname) FROM pg_trigger
		WHERE tgrelid IN ('contacts'::regclass, 'business'::regclass, 'activities'::regclass) AND tgfoid::regproc::text LIKE 'count%'`
	rows, err := db.QueryContext(ctx, qTriggers)
	if err != nil {
		return err
	}
	var alters []string
	for rows.Next() {
		var alter string
		if err := rows.Scan(&alter); err != nil {
			rows.Close()
			return err
		}
		alters = append(alters, alter)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(alters) == 0 { // no counts: a schema from before them
		return f()
	}
	for _, a := range alters {
		if _, err := db.ExecContext(ctx, fmt.Sprintf(a, "DISABLE")); err != nil {
			return err
		}
	}
	if err := f(); err != nil {
		return err
	}
	const qRecount = `DELETE FROM object_counts WHERE tbl IN ('contacts', 'business', 'activities');
		INSERT INTO object_counts (company_id, tbl, stripe, n)
			SELECT company_id, 'contacts', 0, count(*) FROM contacts GROUP BY company_id
			UNION ALL SELECT company_id, 'business', 0, count(*) FROM business GROUP BY company_id
			UNION ALL SELECT company_id, 'activities', 0, count(*) FROM activities GROUP BY company_id`
	if _, err := db.ExecContext(ctx, qRecount); err != nil {
		return err
	}
	for _, a := range alters {
		if _, err := db.ExecContext(ctx, fmt.Sprintf(a, "ENABLE")); err != nil {
			return err
		}
	}
	return nil
}

var client = &http.Client{Timeout: 10 * time.Second}

// startServer starts `bin serve` on a free loopback port without rate limits and with events kept
// for 100 years (the loaded ones date from 2025), its log in logPath, and returns once GET /healthz
// answers 200: a server listens once it has migrated. (Not /readyz: before 133c224 it refused a
// database migrated past the binary's schema, as a baseline's is.)
func startServer(ctx context.Context, bin, dbURL, logPath string, env ...string) (*proc, string, error) {
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	base := fmt.Sprint("http://127.0.0.1:", port)
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, fmt.Sprint("ROLODEX_ADDR=127.0.0.1:", port),
		"ROLODEX_RATE_LIMIT=0", "ROLODEX_AUTH_FAILURE_LIMIT=0", "ROLODEX_EVENT_RETENTION=876000h")
	cmd.Env = append(cmd.Env, env...)
	p, err := startProc(ctx, cmd, logPath, func(ctx context.Context) bool {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/healthz", nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	return p, base, err
}

// check sends s once, for the company's first contact and business record (the body's ids drawn as
// wrk.lua draws them), and fails unless the answer is 2xx; it returns the answer's status.
func check(ctx context.Context, base string, c company, s scenario) (int, error) {
	var body io.Reader
	if s.body != "" {
		body = strings.NewReader(fillIDs(strings.ReplaceAll(s.body, "{rand}", "1"), c))
	}
	path := strings.NewReplacer("{id}", strconv.FormatInt(c.lo, 10), "{bid}", strconv.FormatInt(c.blo, 10)).Replace(s.path)
	req, err := http.NewRequestWithContext(ctx, s.method, base+path, body)
	if err != nil {
		return 0, err
	}
	req.Header.Set("x-api-key", c.Key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1000))
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("scenario %s: %s %s answered %s: %s", s.name, s.method, path, resp.Status, b)
	}
	return resp.StatusCode, nil
}

var (
	wrkRPS    = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	wrkP50    = regexp.MustCompile(`\n\s+50%\s+([0-9.]+)(us|ms|s|m|h)\s`)
	wrkP99    = regexp.MustCompile(`\n\s+99%\s+([0-9.]+)(us|ms|s|m|h)\s`)
	wrkMax    = regexp.MustCompile(`\n\s+Latency\s+[0-9.]+(?:us|ms|s|m|h)\s+[0-9.]+(?:us|ms|s|m|h)\s+([0-9.]+)(us|ms|s|m|h)\s`)
	wrkErrors = regexp.MustCompile(`(?:Non-2xx or 3xx responses:|Socket errors: connect|, read|, write|, timeout) ([0-9]+)`)
)

// runWrk runs s for seconds with wrk (2 threads, s.conns or 32 connections, bench/wrk.lua) and
// reads its report. A request times out after 5 s, one of many items after 30 s: a batch of 1,000
// associations at 32 connections waits seconds for one of the server's 16 (p99 4.5 s).
func runWrk(ctx context.Context, script, base string, c company, s scenario, seconds int) (result, error) {
	timeout := "5s"
	if s.items > 1 {
		timeout = "30s"
	}
	out, err := runCmd(ctx, "", []string{"BENCH_METHOD=" + s.method, "BENCH_PATH=" + s.path, "BENCH_BODY=" + s.body, fmt.Sprint("BENCH_KEYED=", s.keyed),
		"BENCH_KEY=" + c.Key, fmt.Sprint("BENCH_ID_LO=", c.lo), fmt.Sprint("BENCH_ID_HI=", c.hi), fmt.Sprint("BENCH_BID_LO=", c.blo), fmt.Sprint("BENCH_BID_HI=", c.bhi),
		fmt.Sprint("BENCH_OID_LO=", c.olo), fmt.Sprint("BENCH_OID_HI=", c.ohi)},
		"wrk", "-t2", fmt.Sprint("-c", cmp.Or(s.conns, 32)), fmt.Sprint("-d", seconds, "s"), "--timeout", timeout, "--latency", "-s", script, base)
	if err != nil {
		return result{}, err
	}
	rps, p50, p99 := wrkRPS.FindStringSubmatch(out), wrkP50.FindStringSubmatch(out), wrkP99.FindStringSubmatch(out)
	if rps == nil || p50 == nil || p99 == nil {
		return result{}, fmt.Errorf("no Requests/sec, 50%% or 99%% in wrk's report:\n%s", out)
	}
	var r result
	r.rps, _ = strconv.ParseFloat(rps[1], 64)
	r.p50, _ = time.ParseDuration(p50[1] + p50[2])
	r.p99, _ = time.ParseDuration(p99[1] + p99[2])
	if m := wrkMax.FindStringSubmatch(out); m != nil {
		r.max, _ = time.ParseDuration(m[1] + m[2])
	}
	for _, m := range wrkErrors.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[1])
		r.errors += n
	}
	return r, nil
}

var pgbenchTPS = regexp.MustCompile(`\ntps = ([0-9.]+) \((?:without|excluding)`)

// runPgbench runs feedSQL for c's first page of events with pgbench at wrk's concurrency for
// seconds, its script in dir, and returns its transactions a second. pgbench is beside the file
// postgres, which the PATH may only have a link to.
func runPgbench(ctx context.Context, postgres, dir, dbURL string, c company, seconds int) (float64, error) {
	postgres, err := filepath.EvalSymlinks(postgres)
	if err != nil {
		return 0, err
	}
	script := filepath.Join(dir, "events100.sql")
	q := strings.NewReplacer("$1", strconv.FormatInt(c.ID, 10), "$2", "0", "$3", "0", "$4", "101").Replace(feedSQL)
	if err := os.WriteFile(script, []byte(q+";\n"), 0o644); err != nil {
		return 0, err
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		return 0, err
	}
	out, err := runCmd(ctx, "", nil, filepath.Join(filepath.Dir(postgres), "pgbench"), "-n", "-c32", "-j2", fmt.Sprint("-T", seconds), "-M", "prepared", "-f", script,
		"-h", u.Hostname(), "-p", u.Port(), "-U", u.User.Username(), strings.TrimPrefix(u.Path, "/"))
	if err != nil {
		return 0, err
	}
	m := pgbenchTPS.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no tps in pgbench's report:\n%s", out)
	}
	return strconv.ParseFloat(m[1], 64)
}

// header describes the run: when, on what machine, what against what, the command and the data.
func header(ctx context.Context, cfg config, revs []string, dbURL string) string {
	pgVersion := "?"
	if db, err := sql.Open("pgx", dbURL); err == nil {
		db.QueryRowContext(ctx, "SHOW server_version").Scan(&pgVersion)
		db.Close()
	}
	var kib int
	if mem, err := os.ReadFile("/proc/meminfo"); err == nil {
		fmt.Sscanf(string(mem), "MemTotal: %d kB", &kib)
	}
	baseline := "GET /healthz of the same server (the HTTP stack's ceiling), paired with each scenario"
	if len(revs) > 1 {
		baseline = fmt.Sprintf("`%s` (%s)", revs[1], cfg.baseline)
	}
	if cfg.metrics {
		baseline = "the same binary without -metrics-addr (new: with it, scraped by nobody)"
	}
	data, load := "", "wrk -t2 -c32"
	if cfg.custom {
		baseline = "each custom scenario's built-in equivalent, on the same server, in the same company"
		data = " The first company's contacts each hold the custom fields tier (select: gold, silver or bronze, a third each; gold" +
			" exactly the contacts of the first contact stage) and arr (number, 0 to 999,999), of 52 contact fields it defines;" +
			" the second company defines the other 50 (every type) and holds no value."
		load = "wrk -t2 -c32 (the counts -c2)"
	}
	if cfg.assoc {
		baseline = "each association scenario's equivalent, on the same server, in the same company"
		data = assocData(cfg.contacts)
	}
	if cfg.search {
		baseline = "each search scenario's equivalent, on the same server, in the same company"
		data = searchData(cfg.searchHits)
	}
	if cfg.summary {
		baseline = "each summary's GROUP BY statement, run alone by pgbench on the same PostgreSQL"
		data = fmt.Sprintf(" With BENCH_SUMMARY, the first company holds %d business records (not %d).", cfg.contacts, cfg.contacts/businessPerContact)
		load = fmt.Sprintf("wrk -t2 -c%d against pgbench -c%d -j%d", summaryConns, summaryConns, summaryConns)
	}
	if cfg.activities {
		baseline = "each activity scenario's equivalent, on the same server, in the same company"
		data = activitiesData(cfg.contacts)
	}
	return fmt.Sprintf("# Rolodex load benchmark\n\nThe latest `make bench` (bench/main.go), %s.\n\n"+
		"- Machine: %d cores, %.1f GiB memory, %s/%s, %s, PostgreSQL %s; shared and noisy: compare ratios.\n"+
		"- New: `%s` (the working tree). Baseline: %s.\n- Command: `%s`\n"+
		"- Data: 2 companies, each of %d contacts (and the contact.created event of each), %d business records, %d organizations, %d users; requests use the first.%s\n"+
		"- Load: %s for %ds per scenario and target, back to back in alternating order; rounds: %d; medians.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), float64(kib)/(1<<20), runtime.GOOS, runtime.GOARCH,
		runtime.Version(), pgVersion, revs[0], baseline, cfg.command, cfg.contacts, cfg.contacts/businessPerContact,
		organizations, users+1, data, load, cfg.seconds, cfg.rounds)
}

// table renders the medians as markdown: req/s, new/baseline (as a % of /healthz without a baseline
// binary), the same ratio taken round by round (its median is the steadier on a noisy machine, as
// each round's pair ran side by side), p99, and the errors of all rounds.
func table(picked []scenario, base string, results [][2][]result) string {
	head, pct := "new/"+base, base == healthz.name
	if pct {
		head = "% of " + base
	}
	ratio := func(x float64) string {
		if pct {
			return fmt.Sprintf("%.0f%%", 100*x)
		}
		return fmt.Sprintf("%.2f", x)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| scenario | new req/s | %[1]s req/s | %[2]s | paired by round: median (range) | new p99 | %[1]s p99 | errors (new; %[1]s) |\n", base, head)
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|\n")
	rps, p99 := func(r result) float64 { return r.rps }, func(r result) float64 { return float64(r.p99) }
	for j, s := range picked {
		rs := results[j]
		var paired []float64
		var errs [2]int
		for k := range rs[0] {
			paired = append(paired, rs[0][k].rps/rs[1][k].rps)
			errs[0], errs[1] = errs[0]+rs[0][k].errors, errs[1]+rs[1][k].errors
		}
		n, o := median(rs[0], rps), median(rs[1], rps)
		fmt.Fprintf(&b, "| %s | %.0f | %.0f | %s | %s (%s–%s) | %s | %s | %d; %d |\n", s.name, n, o, ratio(n/o), ratio(middle(paired)),
			ratio(slices.Min(paired)), ratio(slices.Max(paired)), ms(median(rs[0], p99)), ms(median(rs[1], p99)), errs[0], errs[1])
	}
	return b.String()
}

// firstStage returns the id of company c's first contact stage: that of the gold contacts, as
// loadSQL assigns them ({stage} in customScenarios).
func firstStage(ctx context.Context, dbURL string, c company) (string, error) {
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		return "", err
	}
	defer db.Close()
	var stage string
	const q = `SELECT min(id)::text FROM stages WHERE company_id = $1 AND board_id IS NULL`
	return stage, db.QueryRowContext(ctx, q, c.ID).Scan(&stage)
}

// customTable renders BENCH_CUSTOM=1's medians as markdown: each custom scenario against its
// built-in equivalent, as how many times slower it is by req/s (built-in over custom) and by p50
// (custom over built-in), both also paired by round, against the target of issue 31: within 2x for
// a read, 15% for a write.
func customTable(picked []scenario, results [][2][]result) string {
	var b strings.Builder
	b.WriteString("| custom scenario | built-in equivalent | custom req/s | built-in req/s | req/s: built-in/custom, paired median (range) " +
		"| custom p50 | built-in p50 | p50: custom/built-in, paired median (range) | target | errors (custom; built-in) |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---|---:|\n")
	rps, p50 := func(r result) float64 { return r.rps }, func(r result) float64 { return float64(r.p50) }
	for j, s := range picked {
		rs := results[j]
		var slower [2][]float64 // by req/s, by p50
		var errs [2]int
		for k := range rs[0] {
			slower[0] = append(slower[0], rs[1][k].rps/rs[0][k].rps)
			slower[1] = append(slower[1], float64(rs[0][k].p50)/float64(rs[1][k].p50))
			errs[0], errs[1] = errs[0]+rs[0][k].errors, errs[1]+rs[1][k].errors
		}
		target := 2.0
		if s.method != "GET" {
			target = 1.15
		}
		verdict := "met"
		if middle(slower[0]) > target || middle(slower[1]) > target {
			verdict = "**missed**"
		}
		cell := func(xs []float64) string {
			return fmt.Sprintf("%.2f (%.2f–%.2f)", middle(xs), slices.Min(xs), slices.Max(xs))
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | %s | %s | %s | %s | %.2fx: %s | %d; %d |\n", s.describe(), s.builtin.describe(), median(rs[0], rps), median(rs[1], rps), cell(slower[0]),
			ms(median(rs[0], p50)), ms(median(rs[1], p50)), cell(slower[1]), target, verdict, errs[0], errs[1])
	}
	return b.String()
}

// describe is the scenario's name and request, for a table.
func (s scenario) describe() string {
	if s.body != "" {
		return fmt.Sprintf("%s: `%s %s` `%s`", s.name, s.method, s.path, s.body)
	}
	return fmt.Sprintf("%s: `%s %s`", s.name, s.method, s.path)
}

// median returns the median of f over rs.
func median(rs []result, f func(result) float64) float64 {
	xs := make([]float64, 0, len(rs))
	for _, r := range rs {
		xs = append(xs, f(r))
	}
	return middle(xs)
}

// middle returns the median of xs (the mean of the middle two for an even count).
func middle(xs []float64) float64 {
	xs = slices.Sorted(slices.Values(xs))
	return (xs[(len(xs)-1)/2] + xs[len(xs)/2]) / 2
}

// ms renders nanoseconds as milliseconds.
func ms(ns float64) string { return fmt.Sprintf("%.2f ms", ns/1e6) }

// importConns is the concurrency of the import, single creates and batches alike (wrk's -c32).
const importConns = 32

// importFigures is what importBench measured: rows a second by single creates and by batches, the
// CPU (server and PostgreSQL) a row of each in µs, and another company's creates a second alone and
// during an import.
type importFigures struct {
	single, batched, singleCPU, batchCPU, alone, during float64
	batchServerCPU                                      float64 // the server's part of batchCPU
	beside                                              float64 // the rows a second of the import during the other company's creates
}

// importBench imports n contacts into a new company by single creates, and n into another by
// batches of 100, each at importConns concurrent requests, on the new server at base, with the CPU
// time cpu (in clock ticks) counts; then measures a third company's single creates (4 clients, 5 s)
// alone and while a fourth imports by batches. It deletes the companies it made.
func importBench(ctx context.Context, stdout io.Writer, bin, dbURL, base string, n int, cpu func() (server, all int64)) (importFigures, error) {
	var f importFigures
	var cs []company
	defer func() {
		if db, err := sql.Open("pgx", dbURL); err == nil {
			for _, c := range cs {
				db.ExecContext(ctx, `DELETE FROM companies WHERE id = $1`, c.ID)
			}
			db.Close()
		}
	}()
	for i := range 4 {
		c, err := newCompany(ctx, bin, dbURL, fmt.Sprint("Import ", i))
		if err != nil {
			return f, err
		}
		cs = append(cs, c)
	}
	var err error
	perRow := func(ticks int64) float64 { return float64(ticks) * 1e4 / float64(n) } // 100 ticks a second
	_, t := cpu()
	if f.single, err = importContacts(ctx, base, cs[0].Key, n, 1, importConns, nil); err != nil {
		return f, err
	}
	s, t1 := cpu()
	f.singleCPU = perRow(t1 - t)
	if f.batched, err = importContacts(ctx, base, cs[1].Key, n, 100, importConns, nil); err != nil {
		return f, err
	}
	s2, t2 := cpu()
	f.batchCPU, f.batchServerCPU = perRow(t2-t1), perRow(s2-s)
	fmt.Fprintf(stdout, "  import: single creates %.0f rows/s (%.0f µs a row), batches of 100 %.0f rows/s (%.0f µs a row, the server %.0f)\n",
		f.single, f.singleCPU, f.batched, f.batchCPU, f.batchServerCPU)
	if f.alone, err = timedCreates(ctx, base, cs[2].Key, 5*time.Second); err != nil {
		return f, err
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		var err error
		f.beside, err = importContacts(ctx, base, cs[3].Key, 10*n, 100, importConns, stop)
		done <- err
	}()
	time.Sleep(time.Second) // the import under way
	f.during, err = timedCreates(ctx, base, cs[2].Key, 5*time.Second)
	close(stop)
	if ierr := <-done; err == nil {
		err = ierr
	}
	fmt.Fprintf(stdout, "  another company's creates: %.0f/s alone, %.0f/s during an import (of %.0f rows/s)\n", f.alone, f.during, f.beside)
	return f, err
}

// section is the import's section of RESULTS.md, of n contacts.
func (f importFigures) section(n int) string {
	return fmt.Sprintf("\n## Import (API.md section 15)\n\n%d contacts into an empty company, %d concurrent requests, on the new server:\n\n"+
		"| import | rows/s | time | CPU a row (server and PostgreSQL) |\n|---|---:|---:|---:|\n| single creates | %.0f | %.1f s | %.0f µs |\n| batches of 100 | %.0f | %.1f s | %.0f µs |\n\n"+
		"Batches against single creates: **%.2fx** the rows per second (target: at least 4x).\n\n"+
		"Another company's single creates (4 clients, 5 s): %.0f/s alone, %.0f/s while a third imports by batches at %d "+
		"concurrent requests: **%.0f%%** (target: at least 80%%).\n",
		n, importConns, f.single, float64(n)/f.single, f.singleCPU, f.batched, float64(n)/f.batched, f.batchCPU, f.batched/f.single,
		f.alone, f.during, importConns, 100*f.during/f.alone)
}

// importContacts creates n contacts in the key's company at base by conns concurrent clients,
// batch a request (1: POST /v1/contacts; more: POST /v1/contacts/batch/create), until all are in
// or stop closes, and returns the contacts created per second.
func importContacts(ctx context.Context, base, key string, n, batch, conns int, stop <-chan struct{}) (float64, error) {
	var next, created atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	start := time.Now()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				first := next.Add(int64(batch)) - int64(batch)
				if first >= int64(n) {
					return
				}
				path, body := "/v1/contacts", fmt.Sprintf(`{"name":"Import","surname":"Row %d","email":"row%d@example.com","countryId":724}`, first, first)
				if batch > 1 {
					items := make([]string, batch)
					for i := range items {
						items[i] = fmt.Sprintf(`{"name":"Import","surname":"Row %d","email":"row%d@example.com","countryId":724}`, first+int64(i), first+int64(i))
					}
					path, body = "/v1/contacts/batch/create", `{"items":[`+strings.Join(items, ",")+`]}`
				}
				if err := post(ctx, base+path, key, body); err != nil {
					errs <- err
					return
				}
				created.Add(int64(batch))
			}
		}()
	}
	wg.Wait()
	close(errs)
	return float64(created.Load()) / time.Since(start).Seconds(), <-errs
}

// timedCreates runs single creates in the key's company by 4 clients for d, and returns creates per second.
func timedCreates(ctx context.Context, base, key string, d time.Duration) (float64, error) {
	stop := make(chan struct{})
	time.AfterFunc(d, func() { close(stop) })
	return importContacts(ctx, base, key, 1<<40, 1, 4, stop)
}

// post POSTs body to url as key and fails unless the answer is 2xx.
func post(ctx context.Context, url, key, body string) error {
	return send(ctx, "POST", url, key, body)
}

// send sends body to url by method as key and fails unless the answer is 2xx.
func send(ctx context.Context, method, url, key, body string) error {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("x-api-key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s answered %s: %.300s", method, url, resp.Status, b)
	}
	return nil
}

// neighbourRead is the read a company runs 32 of at once in neighbourBench: a count of its contacts
// whose name, surname, e-mail or phone contains "ame", which is every one of them.
var neighbourRead = scenario{name: "heavy count", method: "GET", path: "/v1/contacts/count?q=ame", conns: 32}

// neighbourBench measures, on each server of bases (named names), the p50 and p99 of another
// company's retrieve (wrk, 4 connections, seconds) alone and while company heavy runs 32 of
// neighbourRead at once (issue 44: a company uses at most half of the pool), and returns the
// report's section. The other company is new, with one contact, and deleted at the end.
func neighbourBench(ctx context.Context, stdout io.Writer, bin, dbURL, script string, bases, names []string, heavy company, seconds int) (string, error) {
	out, err := runCmd(ctx, "", []string{"DATABASE_URL=" + dbURL}, bin, "company", "create", "-name", "Neighbour")
	if err != nil {
		return "", err
	}
	var other company
	if err := json.Unmarshal([]byte(out), &other); err != nil {
		return "", fmt.Errorf("company create printed %q: %w", out, err)
	}
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		return "", err
	}
	defer db.Close()
	defer db.ExecContext(context.WithoutCancel(ctx), `DELETE FROM companies WHERE id = $1`, other.ID)
	if err := post(ctx, bases[0]+"/v1/contacts", other.Key, `{"name": "Neighbour"}`); err != nil {
		return "", err
	}
	if err := db.QueryRowContext(ctx, `SELECT id FROM contacts WHERE company_id = $1`, other.ID).Scan(&other.lo); err != nil {
		return "", err
	}
	other.hi = other.lo
	retrieve := scenario{name: "retrieve", method: "GET", path: "/v1/contacts/{id}", conns: 4}
	section := fmt.Sprintf("\n## Another company's retrieve beside a heavy neighbour (issue 44)\n\n"+
		"One contact of another company retrieved by wrk -c4 for %ds, alone and while the first company runs 32 `GET %s` at once "+
		"(a server's pool is 16 connections, of which a company uses at most 8):\n\n"+
		"| server | alone p50 | alone p99 | beside p50 | beside p99 | retrieve errors | heavy count req/s | heavy count errors |\n"+
		"|---|---:|---:|---:|---:|---:|---:|---:|\n", seconds, neighbourRead.path)
	for i, base := range bases {
		if _, err := check(ctx, base, heavy, neighbourRead); err != nil {
			return "", err
		}
		alone, err := runWrk(ctx, script, base, other, retrieve, seconds)
		if err != nil {
			return "", err
		}
		type outcome struct {
			r   result
			err error
		}
		load := make(chan outcome, 1)
		go func() {
			r, err := runWrk(ctx, script, base, heavy, neighbourRead, seconds+2)
			load <- outcome{r, err}
		}()
		time.Sleep(time.Second) // the neighbour's reads under way
		beside, err := runWrk(ctx, script, base, other, retrieve, seconds)
		h := <-load
		if err = cmp.Or(err, h.err); err != nil {
			return "", err
		}
		fmt.Fprintf(stdout, "  %-9s retrieve alone p99 %s, beside 32 heavy counts p99 %s (%.0f counts/s)\n", names[i], ms(float64(alone.p99)), ms(float64(beside.p99)), h.r.rps)
		section += fmt.Sprintf("| %s | %s | %s | %s | %s | %d | %.0f | %d |\n", names[i], ms(float64(alone.p50)), ms(float64(alone.p99)),
			ms(float64(beside.p50)), ms(float64(beside.p99)), alone.errors+beside.errors, h.r.rps, h.r.errors)
	}
	return section, nil
}
