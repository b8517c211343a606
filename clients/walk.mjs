// walk.mjs: a walk through every endpoint of Rolodex and its main error cases, through two Prism
// proxies in front of the real server. Run by check.sh, which starts them:
//   STRICT  prism proxy --errors: the request must be valid for the document, and a response that
//           breaks the document comes back as Prism's own error (no X-Request-Id from the server).
//   LAX     prism proxy without --errors, for requests that break the document on purpose (no key,
//           limit=0, a wrong Content-Type, ...): Prism forwards them and reports what it finds in
//           the sl-violations header; any violation located in the response fails the walk.
// Paths the document does not have (/v2/..., a method a path lacks) go through LAX as well; Prism
// cannot check those answers against an operation, so the walk checks them against the document's
// Problem schema itself.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createHmac } from 'node:crypto';

const { STRICT, LAX, KEY, DOC } = process.env;
if (!STRICT || !LAX || !KEY || !DOC) {
  console.error('walk.mjs needs STRICT, LAX, KEY and DOC in the environment (see check.sh)');
  process.exit(2);
}
const doc = JSON.parse(readFileSync(DOC, 'utf8'));
const failures = [];
let steps = 0;

// step sends one request and checks the answer; it returns the parsed body (or null).
async function step(name, { via = 'strict', method = 'GET', path, key = KEY, body, headers = {}, want }) {
  steps++;
  const base = via === 'strict' ? STRICT : LAX;
  const h = { ...headers };
  if (key) h['x-api-key'] = key;
  let payload = body;
  if (body !== undefined && typeof body !== 'string') payload = JSON.stringify(body);
  if (payload !== undefined && !('content-type' in h)) h['content-type'] = 'application/json';
  let res, text;
  try {
    res = await fetch(base + path, { method, headers: h, body: payload });
    text = await res.text();
  } catch (err) {
    failures.push(`${name}: ${method} ${path}: ${err.message}`);
    console.log(`FAIL ${name}: ${err.message}`);
    return null;
  }
  const problems = [];
  if (res.status !== want) problems.push(`status ${res.status}, want ${want}`);
  if (!res.headers.get('x-request-id')) problems.push('no X-Request-Id: the answer is Prism\'s, not the server\'s');
  const violations = parseViolations(res.headers.get('sl-violations'));
  const responseViolations = violations.filter(v => v.location?.[0] === 'response' && v.severity === 'Error');
  if (via === 'strict' && violations.length > 0) problems.push('violations: ' + JSON.stringify(violations));
  if (via === 'lax' && responseViolations.length > 0) problems.push('response violations: ' + JSON.stringify(responseViolations));
  let parsed = null;
  if (text) {
    try { parsed = JSON.parse(text); } catch { problems.push('body is not JSON: ' + text.slice(0, 200)); }
  }
  if (problems.length > 0) {
    failures.push(`${name}: ${method} ${path}: ${problems.join('; ')} (body ${text.slice(0, 300)})`);
    console.log(`FAIL ${name}: ${problems.join('; ')}`);
  } else {
    console.log(`ok   ${name} (${method} ${path} -> ${res.status}${via === 'lax' && violations.length ? `, request violations expected: ${violations.length}` : ''})`);
  }
  return { status: res.status, headers: res.headers, body: parsed };
}

function parseViolations(header) {
  if (!header) return [];
  try { return JSON.parse(header); } catch { return [{ location: ['response'], severity: 'Error', message: header }]; }
}

// checkProblem holds a body to the document's Problem schema (for answers Prism cannot check).
function checkProblem(name, r, status) {
  steps++;
  const schema = doc.components.schemas.Problem;
  const problems = [];
  if (!r || !r.body) problems.push('no body');
  else {
    for (const k of schema.required) if (!(k in r.body)) problems.push(`no ${k}`);
    for (const [k, v] of Object.entries(r.body)) {
      const p = schema.properties[k];
      if (!p) { problems.push(`unknown member ${k}`); continue; }
      const t = p.type === 'integer' ? 'number' : p.type;
      if (t !== 'array' && typeof v !== t) problems.push(`${k} is ${typeof v}, want ${p.type}`);
      if (t === 'array' && !Array.isArray(v)) problems.push(`${k} is not an array`);
      if (p.const !== undefined && v !== p.const) problems.push(`${k} = ${v}, want ${p.const}`);
    }
    if (r.body.status !== status) problems.push(`status member ${r.body.status}, want ${status}`);
    if (!(r.headers.get('content-type') || '').startsWith('application/problem+json')) problems.push('Content-Type is not application/problem+json');
  }
  if (problems.length) { failures.push(`${name}: ${problems.join('; ')}`); console.log(`FAIL ${name}: ${problems.join('; ')}`); }
  else console.log(`ok   ${name}: a Problem as the document describes it`);
}

function expect(name, cond, detail) {
  steps++;
  if (cond) { console.log(`ok   ${name}`); return; }
  failures.push(`${name}: ${detail}`);
  console.log(`FAIL ${name}: ${detail}`);
}

// A webhook receiver on 127.0.0.1, where check.sh lets the server send webhooks.
const received = [];
const receiver = createServer((req, res) => {
  const chunks = [];
  req.on('data', c => chunks.push(c));
  req.on('end', () => { received.push({ headers: req.headers, body: Buffer.concat(chunks) }); res.writeHead(204).end(); });
});
await new Promise(resolve => receiver.listen(0, '127.0.0.1', resolve));

const q = s => encodeURIComponent(s);
const since = '2020-01-01T00:00:00Z';

// Service endpoints: no key.
await step('liveness', { path: '/healthz', key: null, want: 200 });
await step('readiness', { path: '/readyz', key: null, want: 200 });
await step('the document itself', { path: '/v1/openapi.json', key: null, want: 200 });

// Reference resources.
const users = await step('list users', { path: '/v1/users', want: 200 });
const userId = users?.body?.data?.[0]?.id ?? 1;
await step('retrieve a user', { path: `/v1/users/${userId}`, want: 200 });
await step('list organizations', { path: '/v1/organizations?limit=2', want: 200 });
const org = await step('create an organization', { method: 'POST', path: '/v1/organizations', body: { name: 'Walk Org' }, want: 201 });
const orgId = org?.body?.id ?? 1;
await step('retrieve an organization', { path: `/v1/organizations/${orgId}`, want: 200 });
const boards = await step('list boards', { path: '/v1/boards', want: 200 });
const boardId = boards?.body?.data?.[0]?.id ?? 1;
await step('retrieve a board', { path: `/v1/boards/${boardId}`, want: 200 });
const stages = await step('list stages', { path: '/v1/stages?limit=100', want: 200 });
const contactStages = (stages?.body?.data ?? []).filter(s => s.boardId === null).map(s => s.id);
const contactStage = contactStages[0] ?? 1;
const otherContactStage = contactStages[1] ?? contactStage;
const boardStages = await step('list the stages of a board', { path: `/v1/stages?boardId=${boardId}`, want: 200 });
const boardStage = boardStages?.body?.data?.[1]?.id ?? 1;
await step('retrieve a stage', { path: `/v1/stages/${contactStage}`, want: 200 });
await step('list statuses', { path: '/v1/statuses', want: 200 });
await step('list currencies', { path: '/v1/currencies?limit=100', want: 200 });
const countries = await step('list countries', { path: '/v1/countries?limit=100', want: 200 });
if (countries?.body?.pagination?.nextCursor) {
  await step('list countries, next page', { path: `/v1/countries?limit=100&cursor=${q(countries.body.pagination.nextCursor)}`, want: 200 });
}

// Contacts.
const c = await step('create a contact, expanded', {
  method: 'POST', path: '/v1/contacts?expand[]=organization&expand[]=stage',
  body: { name: 'Ada', surname: 'Lovelace', email: 'ada.walk@example.com', jobTitle: '', countryId: 826, stageId: contactStage,
          organizationId: orgId, assignedToId: userId, withSales: true, urlAvatar: 'https://example.com/ada.png', classification: 3 },
  want: 201,
});
const cid = c?.body?.id ?? '1';
const cTag = c?.headers?.get('etag') ?? '"1"';
await step('retrieve a contact, every expansion', {
  path: `/v1/contacts/${cid}?expand[]=organization&expand[]=country&expand[]=stage&expand[]=assignedTo&expand[]=userCreator`, want: 200 });
const page1 = await step('list contacts with expand', { path: '/v1/contacts?limit=5&expand[]=organization&expand[]=assignedTo', want: 200 });
if (page1?.body?.pagination?.nextCursor) {
  await step('list contacts, next page', { path: `/v1/contacts?limit=5&expand[]=organization&expand[]=assignedTo&cursor=${q(page1.body.pagination.nextCursor)}`, want: 200 });
}
await step('count contacts', { path: '/v1/contacts/count', want: 200 });
const sorted = await step('list contacts by updatedAt, newest first', { path: '/v1/contacts?sort=-updatedAt&limit=3', want: 200 });
if (sorted?.body?.pagination?.nextCursor) {
  await step('list contacts by updatedAt, page 2', { path: `/v1/contacts?sort=-updatedAt&limit=3&cursor=${q(sorted.body.pagination.nextCursor)}`, want: 200 });
}
await step('list contacts by name, filtered by stages and withSales', { path: `/v1/contacts?sort=name&stageId=${contactStage},${otherContactStage}&withSales=true`, want: 200 });
await step('list contacts by surname descending, filtered by organization, user and country',
  { path: `/v1/contacts?sort=-surname&organizationId=${orgId}&assignedToId=${userId}&userCreatorId=${userId}&countryId=826`, want: 200 });
await step('list contacts by e-mail (any case) and text', { path: `/v1/contacts?email=ADA.WALK@example.com&q=lovel&sort=createdAt`, want: 200 });
await step('list contacts created in a window', { path: `/v1/contacts?createdAt[gte]=${q(since)}&createdAt[lt]=${q('2100-01-01T00:00:00+02:00')}&updatedAt[gt]=${q(since)}&updatedAt[lte]=${q('2100-01-01T00:00:00Z')}`, want: 200 });
await step('count contacts with filters', { path: `/v1/contacts/count?stageId=${contactStage}&q=ada&withSales=true`, want: 200 });
const cp = await step('update a contact with If-Match', {
  method: 'PATCH', path: `/v1/contacts/${cid}?expand[]=assignedTo`, headers: { 'if-match': cTag }, body: { jobTitle: 'Analyst', surname: null }, want: 200 });
const cTag2 = cp?.headers?.get('etag') ?? '"2"';
await step('an empty patch changes nothing', { method: 'PATCH', path: `/v1/contacts/${cid}`, body: {}, want: 200 });

// Business.
const b = await step('create a business record, expanded', {
  method: 'POST', path: '/v1/business?expand[]=stage',
  body: { title: 'Walk deal', value: 1234.5, deadline: '2026-12-01T10:00:00+02:00', organizationId: orgId, reasonLost: null }, want: 201 });
const bid = b?.body?.id ?? 1;
const bTag = b?.headers?.get('etag') ?? '"1"';
await step('retrieve a business record, every expansion', { path: `/v1/business/${bid}?expand[]=organization&expand[]=stage&expand[]=userCreator`, want: 200 });
const bpage = await step('list business with expand', { path: '/v1/business?limit=3&expand[]=stage', want: 200 });
if (bpage?.body?.pagination?.nextCursor) {
  await step('list business, next page', { path: `/v1/business?limit=3&expand[]=stage&cursor=${q(bpage.body.pagination.nextCursor)}`, want: 200 });
}
await step('count business', { path: '/v1/business/count', want: 200 });
await step('list business by value, largest first', { path: '/v1/business?sort=-value&limit=3', want: 200 });
await step('list business by deadline, filtered by board, status and privacy',
  { path: `/v1/business?sort=deadline&boardId=${boardId}&statusId=1,2&private=false`, want: 200 });
await step('list business by position, filtered by stage, owner, currency and organization',
  { path: `/v1/business?sort=position&stageId=${boardStage}&userOwnerId=${userId}&currencyId=978&organizationId=${orgId}`, want: 200 });
await step('list business by title with text and dates', { path: `/v1/business?sort=-title&q=walk&updatedAt[gte]=${q(since)}&createdAt[lte]=${q('2100-01-01T00:00:00Z')}`, want: 200 });
await step('count business with filters', { path: `/v1/business/count?boardId=${boardId}&statusId=1&q=walk`, want: 200 });
const board = await step('summarize business: the pipeline board', { path: `/v1/business/summary?groupBy=stageId&metrics=sum:value,avg:value,min:value,max:value&boardId=${boardId}`, want: 200 });
expect('a money metric groups by currency too', board?.body?.data?.length > 0 && board.body.data.every(g => 'currencyId' in g.group), `groups ${JSON.stringify(board?.body?.data?.[0])}`);
const months = await step('summarize business by month and privacy, a page of 1', { path: '/v1/business/summary?groupBy=createdAt:month,private&limit=1', want: 200 });
if (months?.body?.pagination?.nextCursor) {
  await step('summarize business, next page', { path: `/v1/business/summary?groupBy=createdAt:month,private&limit=1&cursor=${q(months.body.pagination.nextCursor)}`, want: 200 });
}
await step('summarize contacts by stage, filtered', { path: `/v1/contacts/summary?groupBy=stageId,withSales&countryId=724`, want: 200 });
await step('summarize organizations by year', { path: '/v1/organizations/summary?groupBy=createdAt:year', want: 200 });
await step('400: a summary by a field it cannot group by', { via: 'lax', path: '/v1/business/summary?groupBy=title', want: 400 });
await step('400: a metric of a field that is no number', { via: 'lax', path: '/v1/business/summary?metrics=sum:title', want: 400 });
const bp = await step('update a business record with If-Match', {
  method: 'PATCH', path: `/v1/business/${bid}`, headers: { 'if-match': bTag }, body: { value: 0.1, stageId: boardStage }, want: 200 });
expect('the value reads back exactly', bp?.body?.value === 0.1, `value ${bp?.body?.value}`);

// Activities, with targets (API.md section 18).
const act = await step('create an activity with targets, expanded', {
  method: 'POST', path: '/v1/activities?expand[]=userOwner&expand[]=targets',
  body: { type: 'call', subject: 'Walk call', body: 'Asked for a quote.', occurredAt: '2026-11-21T09:30:00+01:00', durationSeconds: 900,
    targets: [{ object: 'business', id: bid }, { object: 'organization', id: orgId }] }, want: 201 });
const aid = act?.body?.id ?? 1;
expect('an activity lists its targets', act?.body?.targets?.length === 2 && act?.body?.targets?.[0]?.data?.id === bid, `targets ${JSON.stringify(act?.body?.targets)}`);
await step('retrieve an activity, every expansion', { path: `/v1/activities/${aid}?expand[]=userOwner&expand[]=userCreator&expand[]=targets`, want: 200 });
await step('list activities of a target, open ones by due date', { path: `/v1/activities?target=business:${bid}&done=false&sort=dueAt&expand[]=targets`, want: 200 });
await step('list activities by type, owner, text and times', { path: `/v1/activities?type=call&type=note&userOwnerId=${userId}&q=quote&occurredAt[gte]=${q('2026-01-01T00:00:00Z')}&dueAt[lt]=${q('2100-01-01T00:00:00Z')}&sort=-occurredAt`, want: 200 });
await step('count activities with filters', { path: `/v1/activities/count?target=organization:${orgId}&done=false`, want: 200 });
await step('summarize activities by type and done, with their durations', { path: '/v1/activities/summary?groupBy=type,done&metrics=sum:durationSeconds,avg:durationSeconds', want: 200 });
await step('update an activity: done, one target left', { method: 'PATCH', path: `/v1/activities/${aid}`, body: { doneAt: '2026-11-21T10:00:00Z', targets: [{ object: 'business', id: bid }] }, want: 200 });
await step('422: a note without a body', { via: 'lax', method: 'POST', path: '/v1/activities', body: { type: 'note' }, want: 422 });
const madeActs = await step('batch: create activities', { method: 'POST', path: '/v1/activities/batch/create', body: doc.paths['/v1/activities/batch/{op}'].post.requestBody.content['application/json'].examples.create.value, want: 200 });
const actIds = (madeActs?.body?.data ?? []).map(d => d.object.id);
await step('batch: update activities', { method: 'POST', path: '/v1/activities/batch/update', body: { items: [{ id: actIds[1], doneAt: '2026-12-01T08:00:00Z' }] }, want: 200 });
await step('batch: delete activities', { method: 'POST', path: '/v1/activities/batch/delete', body: { ids: actIds }, want: 200 });
await step('delete an activity', { method: 'DELETE', path: `/v1/activities/${aid}`, want: 204 });

// Search (one box across the kinds).
const found = await step('search, every kind the key reads', { path: '/v1/search?q=an&limit=1', want: 200 });
await step('search, the next page', { path: `/v1/search?q=an&limit=1&cursor=${q(found?.body?.pagination?.nextCursor)}`, want: 200 });
await step('search by phone digits, contacts and organizations', { path: '/v1/search?q=600000012&objects=contacts,organizations', want: 200 });
await step('count the hits of a search', { path: '/v1/search/count?q=an', want: 200 });
await step('400: a search of one character', { via: 'lax', path: '/v1/search?q=a', want: 400 });

// Errors the document describes for requests it admits (through the strict proxy).
await step('400: unknown query parameter', { path: '/v1/contacts?colour=red', want: 400 });
await step('400: a cursor this server did not make', { path: '/v1/contacts?cursor=bm90LWEtY3Vyc29y', want: 400 });
await step('400: a cursor used with another sort', ...(sorted?.body?.pagination?.nextCursor
  ? [{ path: `/v1/contacts?sort=name&limit=3&cursor=${q(sorted.body.pagination.nextCursor)}`, want: 400 }]
  : [{ path: '/v1/contacts?sort=name&cursor=x', want: 400 }]));
await step('401: an unknown key', { path: '/v1/contacts', key: 'rdx_notakeynotakeynotakeynotakeynotak', want: 401 });
await step('404: no such contact', { path: '/v1/contacts/999999999', want: 404 });
await step('404: no such business record', { path: '/v1/business/999999999', want: 404 });
await step('404: no such user', { path: '/v1/users/999999999', want: 404 });
await step('412: a stale If-Match on PATCH', { method: 'PATCH', path: `/v1/contacts/${cid}`, headers: { 'if-match': cTag }, body: { city: 'London' }, want: 412 });
await step('412: a stale If-Match on DELETE', { method: 'DELETE', path: `/v1/business/${bid}`, headers: { 'if-match': '"999"' }, want: 412 });
await step('422: a reference to nothing', { method: 'POST', path: '/v1/contacts', body: { name: 'Nobody', organizationId: 999999999 }, want: 422 });
await step('422: a stage of another board', { method: 'PATCH', path: `/v1/business/${bid}`, body: { stageId: contactStage }, want: 422 });

// Errors for requests that break the document on purpose (through the lax proxy).
await step('400: limit=0', { via: 'lax', path: '/v1/contacts?limit=0', want: 400 });
await step('400: an unknown expand[] value', { via: 'lax', path: '/v1/business?expand[]=country', want: 400 });
await step('400: an unknown sort field', { via: 'lax', path: '/v1/contacts?sort=email', want: 400 });
await step('400: a bad id filter', { via: 'lax', path: '/v1/contacts?stageId=0,x', want: 400 });
await step('400: a bad date filter', { via: 'lax', path: '/v1/business?createdAt[gte]=yesterday', want: 400 });
await step('400: a path id that is not a number', { via: 'lax', path: '/v1/contacts/abc', want: 400 });
await step('400: a repeated parameter', { via: 'lax', path: '/v1/contacts?limit=2&limit=3', want: 400 });
// Prism parses a JSON body and sends it on re-encoded, so a malformed body (or one naming a member
// twice) cannot pass through it; a body that is JSON but not an object can.
await step('400: a body that is not one JSON object', { via: 'lax', method: 'POST', path: '/v1/organizations', body: '["Globex"]', want: 400 });
await step('401: no key', { via: 'lax', path: '/v1/business', key: null, want: 401 });
await step('413: a body over 1 MiB', { via: 'lax', method: 'POST', path: '/v1/contacts', body: { name: 'Big', address: 'x'.repeat(1100000) }, want: 413 });
await step('415: a body that is not application/json', { via: 'lax', method: 'POST', path: '/v1/contacts', headers: { 'content-type': 'text/plain' }, body: '{"name":"Plain"}', want: 415 });
await step('422: bad fields', { via: 'lax', method: 'POST', path: '/v1/contacts', body: { name: '', email: 'not-an-address', colour: 'red', id: '7' }, want: 422 });
await step('422: a value with 3 decimals', { via: 'lax', method: 'POST', path: '/v1/business', body: { title: 'Odd', value: 1.005 }, want: 422 });

// Retries and the change feed.
const keyed = { method: 'POST', path: '/v1/organizations', body: { name: 'Keyed Org' }, headers: { 'idempotency-key': `walk-${Date.now()}` } };
const first = await step('create with an Idempotency-Key', { ...keyed, want: 201 });
const again = await step('the same create again: replayed', { ...keyed, want: 201 });
expect('a replay answers the same object, marked', again?.body?.id === first?.body?.id && again?.headers?.get('idempotent-replayed') === 'true',
  `ids ${first?.body?.id}, ${again?.body?.id}; Idempotent-Replayed: ${again?.headers?.get('idempotent-replayed')}`);
await step('422: the key with another body', { ...keyed, via: 'lax', body: { name: 'Other Org' }, want: 422 });
await step('400: an Idempotency-Key too long', { ...keyed, via: 'lax', headers: { 'idempotency-key': 'k'.repeat(256) }, want: 400 });
const feed = await step('list events', { path: '/v1/events?limit=5&type=contact.*&type=organization.created', want: 200 });
const eventId = feed?.body?.data?.[0]?.id ?? 1;
await step('retrieve an event', { path: `/v1/events/${eventId}`, want: 200 });
if (feed?.body?.pagination?.nextCursor) {
  await step('list events, resumed', { path: `/v1/events?limit=5&type=contact.*&type=organization.created&cursor=${q(feed.body.pagination.nextCursor)}`, want: 200 });
}
await step('400: an unknown event type', { via: 'lax', path: '/v1/events?type=contact.renamed', want: 400 });

// API keys: a read-only key, its scope, rolling and revoking.
const made = await step('create an API key', { method: 'POST', path: '/v1/apiKeys', body: { name: 'Walk', scopes: ['contacts:read'] }, want: 201 });
const madeKey = made?.body?.key;
await step('list API keys', { path: '/v1/apiKeys?limit=5', want: 200 });
await step('retrieve an API key', { path: `/v1/apiKeys/${made?.body?.id}`, want: 200 });
await step('a read-only key reads', { path: '/v1/contacts?limit=1', key: madeKey, want: 200 });
await step('403: a read-only key writes', { method: 'POST', path: '/v1/contacts', key: madeKey, body: { name: 'No' }, want: 403 });
const rolledKey = await step('roll an API key', { method: 'POST', path: `/v1/apiKeys/${made?.body?.id}/roll`, body: { expiresIn: 60 }, want: 201 });
await step('revoke an API key', { method: 'DELETE', path: `/v1/apiKeys/${rolledKey?.body?.id}`, want: 204 });
await step('422: an unknown scope', { via: 'lax', method: 'POST', path: '/v1/apiKeys', body: { scopes: ['contacts:delete'] }, want: 422 });

// Webhooks, sent to the receiver above.
const hook = await step('create a webhook endpoint', {
  method: 'POST', path: '/v1/webhooks', body: { url: `http://127.0.0.1:${receiver.address().port}/hooks`, events: ['organization.*'], description: 'Walk' }, want: 201 });
const hookId = hook?.body?.id ?? 1;
const secret = hook?.body?.secret ?? '';
expect('the endpoint\'s secret is shown at its creation', secret.startsWith('whsec_'), `secret ${secret}`);
await step('list webhook endpoints', { path: '/v1/webhooks?limit=5', want: 200 });
await step('retrieve a webhook endpoint', { path: `/v1/webhooks/${hookId}`, want: 200 });
await step('update a webhook endpoint', { method: 'PATCH', path: `/v1/webhooks/${hookId}`, body: { events: ['organization.created', 'contact.*'], description: null }, want: 200 });
const hooked = await step('a change to deliver', { method: 'POST', path: '/v1/organizations', body: { name: 'Hooked Org' }, want: 201 });
for (let i = 0; i < 100 && received.length === 0; i++) await new Promise(resolve => setTimeout(resolve, 100));
const got = received[0];
const [, t, v1] = /^t=([0-9]+),v1=([0-9a-f]{64})$/.exec(got?.headers?.['rolodex-signature'] ?? '') ?? [];
const signed = t && createHmac('sha256', secret).update(`${t}.`).update(got.body).digest('hex') === v1;
expect('the change was delivered, signed with the secret', signed && JSON.parse(got.body).data.object.id === hooked?.body?.id,
  `received ${received.length}: ${got?.headers?.['rolodex-signature']} ${got?.body}`);
const hookDeliveries = await step('list an endpoint\'s deliveries', { path: `/v1/webhooks/${hookId}/deliveries?limit=5`, want: 200 });
const deliveryId = hookDeliveries?.body?.data?.[0]?.id ?? 1;
await step('send a delivery again', { method: 'POST', path: `/v1/webhooks/${hookId}/deliveries/${deliveryId}/retry`, body: {}, want: 202 });
await step('rotate a webhook endpoint\'s secret', { method: 'POST', path: `/v1/webhooks/${hookId}/rotateSecret`, body: {}, want: 201 });
await step('422: a webhook URL that leads inside', { method: 'POST', path: '/v1/webhooks', body: { url: 'http://10.0.0.1/hooks', events: ['*'] }, want: 422 });
await step('422: an unknown event type', { via: 'lax', method: 'POST', path: '/v1/webhooks', body: { url: 'http://127.0.0.1:9/', events: ['contact.renamed'] }, want: 422 });
await step('404: no such webhook endpoint', { path: '/v1/webhooks/999999999', want: 404 });
await step('delete a webhook endpoint', { method: 'DELETE', path: `/v1/webhooks/${hookId}`, want: 204 });
receiver.close();

// Paths and methods the document does not have.
checkProblem('404: another version', await step('404: another version', { via: 'lax', path: '/v2/contacts', want: 404 }), 404);
const notAllowed = await step('405: a method the path does not have', { via: 'lax', method: 'PUT', path: `/v1/contacts/${cid}`, body: { name: 'x' }, want: 405 });
checkProblem('405 body', notAllowed, 405);
expect('405 names the allowed methods', notAllowed?.headers?.get('allow') === 'GET, HEAD, PATCH, DELETE', `Allow: ${notAllowed?.headers?.get('allow')}`);

// Batches and upsert (API.md section 15), with the document's own examples where they run as they are.
const example = (path, name) => doc.paths[path].post.requestBody.content['application/json'].examples[name].value;
const madeContacts = await step('batch: create contacts', { method: 'POST', path: '/v1/contacts/batch/create?expand[]=organization', body: example('/v1/contacts/batch/{op}', 'create'), want: 200 });
const batchIds = (madeContacts?.body?.data ?? []).map(d => d.object.id);
await step('batch: upsert contacts by e-mail', { method: 'POST', path: '/v1/contacts/batch/upsert', body: example('/v1/contacts/batch/{op}', 'upsert'), want: 200 });
await step('batch: update contacts, a stale ifMatch: 207', { method: 'POST', path: '/v1/contacts/batch/update',
  body: { atomic: false, items: [{ id: batchIds[0], city: 'Arlington' }, { id: batchIds[1], ifMatch: '"999"', jobTitle: 'Mathematician' }] }, want: 207 });
await step('batch: 422 for an atomic batch with a bad item', { via: 'lax', method: 'POST', path: '/v1/contacts/batch/create', body: { items: [{ name: 'Fine' }, { name: 'Bad', email: 'nope' }] }, want: 422 });
await step('batch: delete contacts', { method: 'POST', path: '/v1/contacts/batch/delete', body: { ids: batchIds }, want: 200 });
const madeDeals = await step('batch: create business records', { method: 'POST', path: '/v1/business/batch/create', body: example('/v1/business/batch/{op}', 'create'), want: 200 });
const dealIds = (madeDeals?.body?.data ?? []).map(d => d.object.id);
await step('batch: update business records', { method: 'POST', path: '/v1/business/batch/update', body: { items: [{ id: dealIds[0], value: 1500 }] }, want: 200 });
await step('batch: delete business records', { method: 'POST', path: '/v1/business/batch/delete', body: { ids: dealIds }, want: 200 });
const madeOrgs = await step('batch: create organizations', { method: 'POST', path: '/v1/organizations/batch/create', body: example('/v1/organizations/batch/{op}', 'create'), want: 200 });
const batchOrgIds = (madeOrgs?.body?.data ?? []).map(d => d.object.id);
const upserted = await step('batch: upsert organizations by name', { method: 'POST', path: '/v1/organizations/batch/upsert', body: example('/v1/organizations/batch/{op}', 'upsert'), want: 200 });
batchOrgIds.push(...(upserted?.body?.data ?? []).filter(d => d.status === 'created').map(d => d.object.id));
await step('update an organization', { method: 'PATCH', path: `/v1/organizations/${batchOrgIds[0]}`, body: { name: 'Globex Corporation' }, want: 200 });
await step('409: delete an organization still referenced', { method: 'DELETE', path: `/v1/organizations/${orgId}`, want: 409 });
await step('delete an organization', { method: 'DELETE', path: `/v1/organizations/${batchOrgIds[0]}`, want: 204 });
await step('batch: delete organizations', { method: 'POST', path: '/v1/organizations/batch/delete', body: { ids: batchOrgIds.slice(1) }, want: 200 });

// Merging duplicates (API.md section 16): a dry run, the merge, and the merged id that leads to the survivor.
const dupA = await step('create a contact to merge into', { method: 'POST', path: '/v1/contacts', body: { name: 'Grace', city: 'Arlington' }, want: 201 });
const dupB = await step('create its duplicate', { method: 'POST', path: '/v1/contacts', body: { name: 'Grace H.', email: 'grace.walk@example.com' }, want: 201 });
const mergePath = `/v1/contacts/${dupA?.body?.id}/merge`;
await step('merge: a dry run', { method: 'POST', path: mergePath, body: { mergeIds: [dupB?.body?.id], dryRun: true }, want: 200 });
const merged = await step('merge contacts', { method: 'POST', path: mergePath, body: { mergeIds: [dupB?.body?.id] }, want: 200 });
expect('the merge fills the survivor from the duplicate', merged?.body?.object?.email === 'grace.walk@example.com', `object ${JSON.stringify(merged?.body?.object)}`);
const gone = await step('404: a merged id names the survivor', { path: `/v1/contacts/${dupB?.body?.id}`, want: 404 });
expect('mergedInto is the survivor', gone?.body?.code === 'merged' && gone?.body?.mergedInto === dupA?.body?.id, `body ${JSON.stringify(gone?.body)}`);
await step('422: merging a merged id', { method: 'POST', path: mergePath, body: { mergeIds: [dupB?.body?.id] }, want: 422 });
await step('merge organizations', { method: 'POST', path: `/v1/organizations/${orgId}/merge`, body: { mergeIds: [first?.body?.id] }, want: 200 });

// Associations (API.md section 17): many-to-many with labels, read from either end, and the filters
// and events they bring. The walk's own objects: its contact, business record and organization.
const assoc = `/v1/business/${bid}/associations/contacts/${cid}`;
const champion = await step('associate a business record with a contact, labelled', { method: 'PUT', path: assoc, body: { label: 'champion' }, want: 201 });
expect('the association is seen from the path\'s object, its ids typed as in their objects',
  champion?.body?.from?.object === 'business' && champion?.body?.from?.id === bid && champion?.body?.to?.object === 'contact' &&
  champion?.body?.to?.id === cid && champion?.body?.label === 'champion', `association ${JSON.stringify(champion?.body)}`);
await step('the same PUT again: 200, nothing changed', { method: 'PUT', path: assoc, body: { label: 'champion' }, want: 200 });
await step('associate them unlabelled, from the other end, with no body', { method: 'PUT', path: `/v1/contacts/${cid}/associations/business/${bid}`, want: 201 });
await step('associate a contact with an organization', { method: 'PUT', path: `/v1/contacts/${cid}/associations/organizations/${orgId}`, body: { label: null }, want: 201 });
await step('associate an organization with a business record', { method: 'PUT', path: `/v1/organizations/${orgId}/associations/business/${bid}`, body: { label: 'billing' }, want: 201 });
const dealsOf = await step('list a contact\'s business records, expanded', { path: `/v1/contacts/${cid}/associations/business?limit=1&expand[]=stage`, want: 200 });
if (dealsOf?.body?.pagination?.nextCursor) {
  await step('list a contact\'s business records, next page', { path: `/v1/contacts/${cid}/associations/business?limit=1&expand[]=stage&cursor=${q(dealsOf.body.pagination.nextCursor)}`, want: 200 });
}
await step('list a business record\'s contacts by label', { path: `/v1/business/${bid}/associations/contacts?label=champion&expand[]=organization&expand[]=country`, want: 200 });
await step('list a contact\'s organizations', { path: `/v1/contacts/${cid}/associations/organizations`, want: 200 });
await step('list an organization\'s business records', { path: `/v1/organizations/${orgId}/associations/business?expand[]=userCreator`, want: 200 });
await step('list a business record\'s organizations', { path: `/v1/business/${bid}/associations/organizations`, want: 200 });
await step('list an organization\'s contacts', { path: `/v1/organizations/${orgId}/associations/contacts`, want: 200 });
const pairCount = await step('count a business record\'s contacts', { path: `/v1/business/${bid}/associations/contacts/count`, want: 200 });
expect('a pair with two labels counts 2', pairCount?.body?.count === 2, `count ${JSON.stringify(pairCount?.body)}`);
await step('count a contact\'s business records by label', { path: `/v1/contacts/${cid}/associations/business/count?label=champion`, want: 200 });
await step('count an organization\'s contacts', { path: `/v1/organizations/${orgId}/associations/contacts/count`, want: 200 });
const champions = await step('list contacts associated with a business record by a label', { path: `/v1/contacts?associated.business=${bid}&associatedLabel=champion&sort=name`, want: 200 });
expect('the associated filter finds the contact', champions?.body?.data?.length === 1 && champions.body.data[0].id === cid, `data ${JSON.stringify(champions?.body?.data?.map(o => o.id))}`);
await step('count contacts associated with an organization', { path: `/v1/contacts/count?associated.organizations=${orgId}`, want: 200 });
await step('list business records associated with a contact and an organization', { path: `/v1/business?associated.contacts=${cid}&associated.organizations=${orgId}&sort=-value`, want: 200 });
await step('count business records associated with a contact by a label', { path: `/v1/business/count?associated.contacts=${cid}&associatedLabel=champion`, want: 200 });
await step('list organizations associated with a contact', { path: `/v1/organizations?associated.contacts=${cid}&associated.business=${bid}`, want: 200 });
const pair = { from: { object: 'business', id: bid }, to: { object: 'contact', id: cid } };
const assocBatch = await step('batch: create associations', { method: 'POST', path: '/v1/associations/batch/create',
  body: { items: [{ ...pair, label: 'decision_maker' }, { ...pair, label: 'champion' }] }, want: 200 });
expect('batch: a new one is created, an existing one unchanged', assocBatch?.body?.data?.[0]?.status === 'created' && assocBatch?.body?.data?.[1]?.status === 'unchanged',
  `data ${JSON.stringify(assocBatch?.body?.data)}`);
await step('batch: delete associations, one of a missing object: 207', { method: 'POST', path: '/v1/associations/batch/delete',
  body: { atomic: false, items: [{ ...pair, label: 'decision_maker' }, { from: { object: 'business', id: 999999999 }, to: { object: 'contact', id: cid } }] }, want: 207 });
await step('batch: 422 for an atomic batch with an item for a missing object', { method: 'POST', path: '/v1/associations/batch/create',
  body: { items: [pair, { from: { object: 'organization', id: 999999999 }, to: { object: 'contact', id: cid } }] }, want: 422 });
await step('batch: 207 for an item with two ends of one kind', { method: 'POST', path: '/v1/associations/batch/create',
  body: { atomic: false, items: [{ from: { object: 'contact', id: cid }, to: { object: 'contact', id: cid } }] }, want: 207 });
await step('batch: 404 for an op associations lack', { via: 'lax', method: 'POST', path: '/v1/associations/batch/update', body: { items: [pair] }, want: 404 });
await step('404: an association with an object of another company or none', { method: 'PUT', path: `/v1/business/${bid}/associations/contacts/999999999`, want: 404 });
await step('404: an association of a kind with itself', { via: 'lax', path: `/v1/contacts/${cid}/associations/contacts`, want: 404 });
await step('422: a label that is not a word', { via: 'lax', method: 'PUT', path: assoc, body: { label: 'Champion' }, want: 422 });
await step('400: a list label that is not a word', { via: 'lax', path: `/v1/business/${bid}/associations/contacts?label=Champion`, want: 400 });
await step('400: associatedLabel without an associated filter', { via: 'lax', path: '/v1/contacts?associatedLabel=champion', want: 400 });
const dealReader = await step('create a key that reads business records only', { method: 'POST', path: '/v1/apiKeys', body: { name: 'Walk deals', scopes: ['business:read'] }, want: 201 });
await step('403: reading associations needs read on both kinds', { path: `/v1/business/${bid}/associations/contacts`, key: dealReader?.body?.key, want: 403 });
await step('revoke that key', { method: 'DELETE', path: `/v1/apiKeys/${dealReader?.body?.id}`, want: 204 });
let assocEvents = null;
for (let i = 0; i < 20 && !(assocEvents?.body?.data?.length > 0); i++) {
  if (i > 0) await new Promise(resolve => setTimeout(resolve, 100));
  assocEvents = await step('list association events', { path: '/v1/events?type=association.*&limit=100', want: 200 });
}
expect('association events carry the association', assocEvents?.body?.data?.some(e => e.type === 'association.created' && e.data.object.label === 'champion'),
  `events ${JSON.stringify(assocEvents?.body?.data?.map(e => e.type))}`);
await step('remove an association by its label', { method: 'DELETE', path: `${assoc}?label=champion`, want: 204 });
await step('404: remove it again', { method: 'DELETE', path: `${assoc}?label=champion`, want: 404 });
await step('remove the unlabelled association from the other end', { method: 'DELETE', path: `/v1/contacts/${cid}/associations/business/${bid}`, want: 204 });
await step('remove an organization\'s labelled association', { method: 'DELETE', path: `/v1/organizations/${orgId}/associations/business/${bid}?label=billing`, want: 204 });

// Deletes last.
await step('delete a contact with If-Match', { method: 'DELETE', path: `/v1/contacts/${cid}`, headers: { 'if-match': cTag2 }, want: 204 });
await step('404: a second delete', { method: 'DELETE', path: `/v1/contacts/${cid}`, want: 404 });
await step('delete a business record', { method: 'DELETE', path: `/v1/business/${bid}`, want: 204 });

console.log(`\n${steps} checks, ${failures.length} failed`);
if (failures.length) {
  console.log('Failures:\n  ' + failures.join('\n  '));
  process.exit(1);
}
