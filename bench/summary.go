package main

// BENCH_SUMMARY=1: summaries (issue 48, API.md section 21), each over HTTP against pgbench running
// its GROUP BY statement alone on the same PostgreSQL, in a first company of BENCH_CONTACTS business
// records, each holding the business custom field tier (summaryFieldSQL).

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// summaryLoad is added to loadVersion by a load for summaries (BENCH_SUMMARY=1).
const summaryLoad = 300

// summaryConns is the concurrency of both sides: a summary reads every record of the company, and
// the machine has 2 cores.
const summaryConns = 2

// summaryScenario is a summary request and the statement a developer would write for the same
// numbers against the schema, which pgbench runs ({company}: the company's id, {tier}: the field's).
type summaryScenario struct {
	name, path, sql string
	target          float64 // the bound on the time of a request over that of the statement
}

var summaryScenarios = []summaryScenario{
	{name: "by stage, sum:value", path: "/v1/business/summary?groupBy=stageId&metrics=sum:value", target: 1.5,
		sql: `SELECT stage_id, currency_id, count(*), sum(value) FROM business WHERE company_id = {company}
			GROUP BY stage_id, currency_id ORDER BY stage_id, currency_id`},
	{name: "the same, custom.tier=gold", path: "/v1/business/summary?groupBy=stageId&metrics=sum:value&custom.tier=gold", target: 2,
		sql: `SELECT b.stage_id, b.currency_id, count(*), sum(b.value) FROM business b
			JOIN custom_values v ON v.company_id = b.company_id AND v.object_id = b.id
			WHERE b.company_id = {company} AND v.field_id = {tier} AND v.text_value = 'gold'
			GROUP BY b.stage_id, b.currency_id ORDER BY b.stage_id, b.currency_id`},
}

// summaryFieldSQL defines company $1's business field tier (select: gold, silver, bronze) and gives
// each of its business records a value, g's (loadSQL's position) 1 + g mod 3: a third each, in every
// stage. As loadSQL and customValuesSQL would: the keys, the records' custom column, custom_values.
var summaryFieldSQL = []string{
	`WITH f AS (INSERT INTO custom_fields (company_id, object, key, label, type, options)
		VALUES ($1, 'business', 'tier', 'Tier', 'select',
			'[{"value":"gold","label":"Gold"},{"value":"silver","label":"Silver"},{"value":"bronze","label":"Bronze"}]')
		RETURNING company_id, object, id, key)
	INSERT INTO custom_field_keys (company_id, object, keys) SELECT company_id, object, id || ':' || key FROM f`,
	`UPDATE business b SET custom = json_build_object(f.id::text, (ARRAY['gold', 'silver', 'bronze'])[1 + b.position % 3])
	FROM custom_fields f WHERE b.company_id = $1 AND f.company_id = $1 AND f.object = 'business' AND f.key = 'tier'`,
	`INSERT INTO custom_values (company_id, field_id, object_id, text_value)
	SELECT $1, e.key::bigint, b.id, e.value FROM business b, json_each_text(b.custom) AS e WHERE b.company_id = $1`,
}

// summaryBench runs summaryScenarios for cfg.rounds rounds, each scenario by wrk on the server at
// base and by pgbench (beside postgres) back to back in alternating order, and returns RESULTS.md's
// section.
func summaryBench(ctx context.Context, stdout io.Writer, cfg config, c company, script, base, postgres, dir, dbURL string) (string, error) {
	tier, err := summaryTier(ctx, dbURL, c)
	if err != nil {
		return "", err
	}
	fill := strings.NewReplacer("{company}", strconv.FormatInt(c.ID, 10), "{tier}", tier)
	rps := make([][]result, len(summaryScenarios))
	tps := make([][]float64, len(summaryScenarios))
	for round := range cfg.rounds {
		fmt.Fprintf(stdout, "round %d of %d\n", round+1, cfg.rounds)
		for j, s := range summaryScenarios {
			wrk := scenario{name: s.name, method: "GET", path: s.path, conns: summaryConns}
			if _, err := check(ctx, base, c, wrk); err != nil {
				return "", err
			}
			for _, side := range [][]int{{0, 1}, {1, 0}}[round%2] {
				if side == 0 {
					r, err := runWrk(ctx, script, base, c, wrk, cfg.seconds)
					if err != nil {
						return "", err
					}
					fmt.Fprintf(stdout, "  %-28s %8.1f req/s  p50 %s\n", s.name, r.rps, ms(float64(r.p50)))
					rps[j] = append(rps[j], r)
					continue
				}
				t, err := pgbenchSQL(ctx, postgres, filepath.Join(dir, fmt.Sprint("summary", j, ".sql")), dbURL, fill.Replace(s.sql), summaryConns, cfg.seconds)
				if err != nil {
					return "", err
				}
				fmt.Fprintf(stdout, "  %-28s %8.1f tps (pgbench)\n", s.name, t)
				tps[j] = append(tps[j], t)
			}
		}
	}
	return summaryTable(cfg, rps, tps), nil
}

// summaryTier returns the id of company c's business field tier.
func summaryTier(ctx context.Context, dbURL string, c company) (string, error) {
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		return "", err
	}
	defer db.Close()
	var id string
	const q = `SELECT id::text FROM custom_fields WHERE company_id = $1 AND object = 'business' AND key = 'tier' AND deleted_at IS NULL`
	return id, db.QueryRowContext(ctx, q, c.ID).Scan(&id)
}

// pgbenchSQL runs q with pgbench (beside the file postgres, which the PATH may only have a link to)
// at conns clients for seconds, its script written to script, and returns its transactions a second.
func pgbenchSQL(ctx context.Context, postgres, script, dbURL, q string, conns, seconds int) (float64, error) {
	postgres, err := filepath.EvalSymlinks(postgres)
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(script, []byte(strings.Join(strings.Fields(q), " ")+";\n"), 0o644); err != nil {
		return 0, err
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		return 0, err
	}
	out, err := runCmd(ctx, "", nil, filepath.Join(filepath.Dir(postgres), "pgbench"), "-n", fmt.Sprint("-c", conns), fmt.Sprint("-j", conns),
		fmt.Sprint("-T", seconds), "-M", "prepared", "-f", script, "-h", u.Hostname(), "-p", u.Port(), "-U", u.User.Username(), strings.TrimPrefix(u.Path, "/"))
	if err != nil {
		return 0, err
	}
	m := pgbenchTPS.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no tps in pgbench's report:\n%s", out)
	}
	return strconv.ParseFloat(m[1], 64)
}

// summaryTable renders BENCH_SUMMARY=1's results: each summary's req/s against its statement's tps,
// the ratio (the time of a request over that of the statement) round by round, and the target.
func summaryTable(cfg config, rps [][]result, tps [][]float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Summaries (BENCH_SUMMARY=1)\n\n`%s`: %d business records in the first company, a third each of tier gold, silver,"+
		" bronze; wrk -c%d against pgbench -c%d -M prepared of the statement alone, %d s each, %d rounds.\n\n",
		cfg.command, cfg.contacts, summaryConns, summaryConns, cfg.seconds, cfg.rounds)
	b.WriteString("| summary | req/s | statement tps | request/statement time, paired: median (range) | p50 | target | errors |\n")
	b.WriteString("|---|---:|---:|---:|---:|---|---:|\n")
	for j, s := range summaryScenarios {
		var xs []float64
		errs := 0
		for k, r := range rps[j] {
			xs = append(xs, tps[j][k]/r.rps)
			errs += r.errors
		}
		met := "met"
		if middle(xs) > s.target {
			met = "**missed**"
		}
		fmt.Fprintf(&b, "| `%s` | %.1f | %.1f | %.2f (%.2f–%.2f) | %s | at most %.1fx: %s | %d |\n", strings.TrimPrefix(s.path, "/v1/business/summary?"),
			median(rps[j], func(r result) float64 { return r.rps }), middle(tps[j]), middle(xs), slices.Min(xs), slices.Max(xs),
			ms(median(rps[j], func(r result) float64 { return float64(r.p50) })), s.target, met, errs)
	}
	return b.String()
}
