package main

// BENCH_ACTIVITIES=1: activities and the timeline (issue 46, API.md sections 18 and 19), each
// scenario paired with its equivalent on the same server, in a first company of BENCH_CONTACTS
// activities (activitiesSQL) with their targets and events.

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// activitiesLoad is added to loadVersion by a load with activities (BENCH_ACTIVITIES=1).
const activitiesLoad = 400

// activitiesPerRecord is how many activities each business record with activities has (about), and
// recordUpdates how many business.updated events.
const activitiesPerRecord, recordUpdates = 400, 40

// orgPage is the equivalent of the reads: a contacts page of one organization, which walks its index.
var orgPage = scenario{name: "organizationId page", method: "GET", path: "/v1/contacts?limit=100&organizationId={org}"}

// activityScenarios are BENCH_ACTIVITIES=1's, each against its equivalent with the target
// (assocTable). {record} is the first business record, of activitiesPerRecord activities and its
// events (activityPlaceholders); {org} the first organization, of the 500th part of the contacts.
// The create's targets are a random contact, business record and organization.
var activityScenarios = []scenario{
	{name: "target page", method: "GET", path: "/v1/activities?limit=100&target=business:{record}&done=false&sort=dueAt", target: 2, builtin: &orgPage},
	{name: "timeline page", method: "GET", path: "/v1/business/{record}/timeline?limit=100", target: 2, builtin: &orgPage},
	{name: "timeline page 5", method: "GET", path: "/v1/business/{record}/timeline?limit=100&cursor={cursor}", target: 2, builtin: &orgPage},
	{name: "create activity", method: "POST", path: "/v1/activities", body: activityBody, target: 1.5,
		builtin: &scenario{name: "create contact", method: "POST", path: "/v1/contacts", body: createBody}},
}

const activityBody = `{"type":"call","subject":"Call {rand}","targets":[{"object":"contact","id":"{id}"},` +
	`{"object":"business","id":{bid}},{"object":"organization","id":{oid}}]}`

// utc is the SQL of a timestamptz column x as the API writes it.
const utc = `to_char(%[1]s AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`

func utcOf(x string) string { return fmt.Sprintf(utc, x) }

// activitiesSQL fills company $1 with $2 activities and what their writes leave (createActivity):
// activity g, one every 30 s of 2025 on, is of type note, task, call, meeting or email in turn, done
// when g is even, due (g mod 30 days after it occurred) when a task, call or meeting; it targets the
// business record g mod $3 (by position) and, when g is odd, contact g. Each has its activity.created
// event, each target its association.created (and its place in the activity's list), and each of the first $3 business records
// recordUpdates business.updated events spread over the same time. With $3 prime to 10, each of those
// records has $2 / $3 activities of every type, half of them not done. The activities' ids are 1 to
// $2 in a new database (cleanLoad keeps those).
var activitiesSQL = []string{
	`WITH u AS (SELECT array_agg(id ORDER BY id) AS ids FROM users WHERE company_id = $1)
	 INSERT INTO activities (company_id, type, subject, body, occurred_at, due_at, done_at, duration_seconds,
	     user_owner_id, user_creator_id, created_at, updated_at)
	 SELECT $1, t.type, CASE WHEN t.type <> 'note' THEN initcap(t.type) || ' ' || g END,
	     CASE WHEN t.type = 'note' OR g % 4 = 0 THEN 'What was said in activity ' || g END,
	     t.at, CASE WHEN t.type IN ('task', 'call', 'meeting') THEN t.at + g % 30 * interval '1 day' END,
	     CASE WHEN g % 2 = 0 THEN t.at + interval '1 hour' END, CASE WHEN t.type IN ('call', 'meeting') THEN 60 * (1 + g % 60) END,
	     u.ids[1 + g % cardinality(u.ids)], u.ids[1 + g / 7 % cardinality(u.ids)], t.at, t.at
	 FROM generate_series(1, $2) AS g, u, LATERAL (SELECT (ARRAY['note', 'task', 'call', 'meeting', 'email'])[1 + g % 5] AS type,
	     timestamptz '2025-01-01' + g * interval '30 s' AS at) AS t
	 ORDER BY g`,
	`WITH a AS (SELECT id, created_at, occurred_at, due_at, done_at, type, row_number() OVER (ORDER BY id) AS g FROM activities WHERE company_id = $1),
	      b AS (SELECT min(id) AS lo FROM business WHERE company_id = $1),
	      c AS (SELECT min(id) AS lo FROM contacts WHERE company_id = $1)
	 INSERT INTO associations (company_id, a_kind, a_id, b_kind, b_id, created_at, occurred_at, due_at, done_at, type)
	 SELECT $1, 'activities', a.id, e.kind, e.id, a.created_at, a.occurred_at, a.due_at, a.done_at, a.type
	 FROM a, b, c, LATERAL (VALUES (1, 'business', b.lo + a.g % $3), (2, 'contacts', CASE WHEN a.g % 2 = 1 THEN c.lo + (a.g - 1) % $2 END)) AS e (n, kind, id)
	 WHERE e.id IS NOT NULL ORDER BY a.id, e.n`,
	`UPDATE activities a SET targets = t.targets
	 FROM (SELECT a_id, array_agg(b_kind || ':' || b_id ORDER BY id) AS targets FROM associations
	     WHERE company_id = $1 AND a_kind = 'activities' GROUP BY a_id) t
	 WHERE a.company_id = $1 AND a.id = t.a_id`,
	`WITH t AS (SELECT a_id, json_agg(json_build_object('object', CASE b_kind WHEN 'contacts' THEN 'contact' ELSE b_kind END,
	         'id', CASE b_kind WHEN 'contacts' THEN to_json(b_id::text) ELSE to_json(b_id) END) ORDER BY id) AS targets
	     FROM associations WHERE company_id = $1 AND a_kind = 'activities' GROUP BY a_id)
	 INSERT INTO events (company_id, type, created_at, request_id, object, about)
	 SELECT $1, 'activity.created', a.created_at, 'bench', json_build_object('id', a.id, 'type', a.type, 'subject', a.subject,
	     'body', a.body, 'occurredAt', ` + utcOf("a.occurred_at") + `, 'dueAt', ` + utcOf("a.due_at") + `, 'doneAt', ` + utcOf("a.done_at") + `,
	     'durationSeconds', a.duration_seconds, 'userOwnerId', a.user_owner_id, 'userCreatorId', a.user_creator_id,
	     'createdAt', ` + utcOf("a.created_at") + `, 'updatedAt', ` + utcOf("a.updated_at") + `, 'custom', json '{}', 'targets', t.targets)::text,
	     'activity:' || a.id
	 FROM activities AS a JOIN t ON t.a_id = a.id WHERE a.company_id = $1 ORDER BY a.id`,
	`INSERT INTO events (company_id, type, created_at, request_id, object, about, about_other)
	 SELECT $1, 'association.created', s.created_at, 'bench', json_build_object('from', json_build_object('object', 'activity', 'id', s.a_id),
	     'to', json_build_object('object', k.object, 'id', CASE k.object WHEN 'contact' THEN to_json(s.b_id::text) ELSE to_json(s.b_id) END),
	     'label', NULL, 'createdAt', ` + utcOf("s.created_at") + `)::text, 'activity:' || s.a_id, k.object || ':' || s.b_id
	 FROM associations AS s, LATERAL (SELECT CASE s.b_kind WHEN 'contacts' THEN 'contact' ELSE s.b_kind END AS object) AS k
	 WHERE s.company_id = $1 AND s.a_kind = 'activities' ORDER BY s.id`,
	`INSERT INTO events (company_id, type, created_at, request_id, object, previous, about)
	 SELECT $1, 'business.updated', timestamptz '2025-01-01' + j * $2::integer / ` + strconv.Itoa(recordUpdates) + ` * interval '30 s' + b.id % 1000 * interval '1 s',
	     'bench', json_build_object('id', b.id, 'title', b.title, 'value', b.value + j, 'organizationId', b.organization_id)::text,
	     json_build_object('value', b.value + j - 1)::text, 'business:' || b.id
	 FROM (SELECT id, title, value, organization_id FROM business WHERE company_id = $1 ORDER BY id LIMIT $3) AS b,
	     generate_series(1, ` + strconv.Itoa(recordUpdates) + `) AS j
	 ORDER BY 3`,
}

// activityRecords is $3 of activitiesSQL for n activities: the business records with activities,
// prime to 10 so that each record's share of them cycles through the types and done.
func activityRecords(n int) int {
	r := max(1, n/activitiesPerRecord)
	for r%2 == 0 || r%5 == 0 {
		r++
	}
	return r
}

// loadActivities runs activitiesSQL for company c, of n contacts, and checks that its activities'
// ids are 1 to n.
func loadActivities(ctx context.Context, db *sql.DB, c company, n int) error {
	args := []any{c.ID, n, activityRecords(n)}
	for _, q := range activitiesSQL {
		used := len(args) // each statement takes the parameters it names, $1 to $used
		for !strings.Contains(q, "$"+strconv.Itoa(used)) {
			used--
		}
		if _, err := db.ExecContext(ctx, q, args[:used]...); err != nil {
			return fmt.Errorf("load company %d: %w\n%s", c.ID, err, q)
		}
	}
	var lo, hi, count int64
	err := db.QueryRowContext(ctx, `SELECT min(id), max(id), count(*) FROM activities`).Scan(&lo, &hi, &count)
	if err != nil || lo != 1 || hi != int64(n) || count != hi {
		return fmt.Errorf("activity ids: %d..%d (%d), want 1..%d (%v)", lo, hi, count, n, err)
	}
	return nil
}

// cleanActivities deletes the activities that earlier runs created, and their targets: those after
// the load's n.
func cleanActivities(ctx context.Context, db *sql.DB, n int) error {
	const q = `WITH t AS (DELETE FROM associations WHERE a_kind = 'activities' AND a_id > $1)
		DELETE FROM activities WHERE id > $1`
	_, err := db.ExecContext(ctx, q, n)
	return err
}

// activityPlaceholders sets the ranges of c's business and organization ids, which the create draws
// its targets from, and returns what activityScenarios' paths take: {record}, the first business
// record, {org}, the first organization, and {cursor}, the cursor of the record's fifth timeline page,
// walked to on the server at base.
func activityPlaceholders(ctx context.Context, dbURL, base string, c *company) (*strings.Replacer, error) {
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	const q = `SELECT (SELECT min(id) FROM organizations WHERE company_id = $1), (SELECT max(id) FROM organizations WHERE company_id = $1),
		min(id), max(id) FROM business WHERE company_id = $1`
	if err := db.QueryRowContext(ctx, q, c.ID).Scan(&c.olo, &c.ohi, &c.blo, &c.bhi); err != nil {
		return nil, err
	}
	cursor, err := timelineCursor(ctx, base, *c, c.blo, 4)
	if err != nil {
		return nil, err
	}
	return strings.NewReplacer("{record}", strconv.FormatInt(c.blo, 10), "{org}", strconv.FormatInt(c.olo, 10),
		"{cursor}", url.QueryEscape(cursor)), nil
}

// timelineCursor walks pages of 100 of the timeline of c's business record id, and returns the
// nextCursor of the pages-th: the cursor of a later page, read as of the walk's start.
func timelineCursor(ctx context.Context, base string, c company, id int64, pages int) (string, error) {
	cursor := ""
	for range pages {
		var page struct {
			Pagination struct {
				NextCursor string `json:"nextCursor"`
			} `json:"pagination"`
		}
		u := fmt.Sprintf("%s/v1/business/%d/timeline?limit=100", base, id)
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		if err := getJSON(ctx, u, c.Key, &page); err != nil {
			return "", err
		}
		if cursor = page.Pagination.NextCursor; cursor == "" {
			return "", fmt.Errorf("business record %d's timeline has fewer than %d pages", id, pages+1)
		}
	}
	return cursor, nil
}

// activitiesData describes BENCH_ACTIVITIES=1's load of n contacts a company, for the report's header.
func activitiesData(n int) string {
	r := activityRecords(n)
	return fmt.Sprintf(" With BENCH_ACTIVITIES, the first company also holds %d activities, one every 30 s from 2025-01-01 (note, task,"+
		" call, meeting, email in turn; every other done; tasks, calls and meetings due), each targeting one of its first %d business"+
		" records in turn (%d each) and every other one a contact too, with the events their creates write (activity.created, association.created);"+
		" each of those records has %d business.updated events as well. Reads use the first record, the create a random contact, record"+
		" and organization.", n, r, n/r, recordUpdates)
}
