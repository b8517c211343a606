// contract.mjs: the contract test of `make api-check`. Portman turns the served document into a
// Postman collection with a contract test on every operation (a 2xx status, its Content-Type, a
// JSON body, the body valid against the answer's schema), and newman runs it against the server,
// on the demo data of a fresh `rolodex dev`. Zero failures passes.
//
// The document says how its examples run, and this file knows no operation by name:
//  - a path parameter with an example uses it: the example names demo data;
//  - one without an example takes its value from a link (OpenAPI `links`) of an earlier
//    operation's answer: `$response.body#/<JSON pointer>` or `$request.path.<name>`. That is the
//    document's own flow: create, then change, roll or delete what was created, never demo data;
//  - requests run in this order: the operations no link leads to, in document order; then those
//    one link away, and so on; DELETEs last.
// Input (environment): BASE, KEY (a key with every scope), DOC (the served document), OUT.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import newman from 'newman';

const { BASE, KEY, DOC, OUT } = process.env;
const doc = JSON.parse(readFileSync(DOC, 'utf8'));
const deref = (o) => (o && o.$ref ? o.$ref.split('/').slice(1).reduce((a, k) => a[k], doc) : o);

// The operations in document order, each with its path parameters and the links of its answers.
const ops = [];
for (const [path, item] of Object.entries(doc.paths)) {
  for (const [method, op] of Object.entries(item)) {
    if (method === 'parameters') continue;
    const params = {};
    for (const p of [...(item.parameters ?? []), ...(op.parameters ?? [])].map(deref)) {
      if (p.in === 'path') params[p.name] = p; // an operation's own parameter wins over its path's
    }
    const links = [];
    for (const [status, r] of Object.entries(op.responses ?? {})) {
      for (const l of Object.values(deref(r).links ?? {})) links.push({ status: Number(status), ...l });
    }
    ops.push({ id: op.operationId, method: method.toUpperCase(), path, params, links, index: ops.length });
  }
}
const byId = Object.fromEntries(ops.map((o) => [o.id, o]));
const problems = [];
for (const o of ops) {
  for (const l of o.links) if (!byId[l.operationId]) problems.push(`${o.id} links to no operation ${l.operationId}`);
  for (const [name, p] of Object.entries(o.params)) {
    const linked = ops.some((s) => s.links.some((l) => l.operationId === o.id && name in l.parameters));
    if (!('example' in p) && !linked) problems.push(`${o.id}: path parameter ${name} has neither an example nor a link to it`);
  }
}
if (problems.length) {
  console.error(problems.join('\n'));
  process.exit(1);
}
// depth: how many links away from an operation no link leads to.
const depth = (o, seen = new Set()) => {
  if (seen.has(o.id)) return 0;
  seen.add(o.id);
  const from = ops.filter((s) => s.links.some((l) => l.operationId === o.id));
  return from.length ? 1 + Math.max(...from.map((s) => depth(s, new Set(seen)))) : 0;
};
for (const o of ops) o.depth = depth(o);

execFileSync('node_modules/.bin/portman', ['-l', DOC, '-b', BASE, '-c', 'portman-config.json', '-o', `${OUT}/portman.json`],
  { stdio: ['ignore', 'ignore', 'inherit'] });
const collection = JSON.parse(readFileSync(`${OUT}/portman.json`, 'utf8'));
const leaves = (items) => items.flatMap((i) => (i.item ? leaves(i.item) : [i]));
const requests = leaves(collection.item).map((item) => {
  const path = '/' + item.request.url.path.map((s) => (s.startsWith(':') ? `{${s.slice(1)}}` : s)).join('/');
  const op = ops.find((o) => o.method === item.request.method && o.path === path);
  if (!op) throw new Error(`no operation for ${item.request.method} ${path}`);
  // Parameters without an example get their link's value; the links of this answer set others'.
  for (const v of item.request.url.variable ?? []) {
    if (!('example' in op.params[v.key])) v.value = `{{link.${op.id}.${v.key}}}`;
  }
  item.event ??= [];
  let test = item.event.find((e) => e.listen === 'test');
  if (!test) item.event.push((test = { listen: 'test', script: { exec: [] } }));
  test.script.exec.push(`(${setLinks})(${JSON.stringify(op.links)}, ${JSON.stringify(op.path)});`);
  return { item, op };
});
requests.sort((a, b) => (a.op.method === 'DELETE') - (b.op.method === 'DELETE') || a.op.depth - b.op.depth || a.op.index - b.op.index);
collection.item = requests.map((r) => r.item);
writeFileSync(`${OUT}/contract.json`, JSON.stringify(collection, null, 1));
const missing = ops.filter((o) => !requests.some((r) => r.op === o)).map((o) => o.id);
if (missing.length) {
  console.error(`Portman made no request for ${missing.join(', ')}`);
  process.exit(1);
}

// setLinks runs in newman's sandbox after each answer: it evaluates the answer's links and keeps
// each value as the collection variable link.<operationId>.<parameter>. path is the operation's.
function setLinks(links, path) {
  for (const l of links) {
    if (l.status !== pm.response.code) continue;
    for (const [name, expr] of Object.entries(l.parameters)) {
      let v;
      if (expr.startsWith('$response.body#')) {
        v = expr.slice(15).split('/').filter((s) => s !== '').reduce((a, k) => (a == null ? a : a[k.replace(/~1/g, '/').replace(/~0/g, '~')]), pm.response.json());
      } else if (expr.startsWith('$request.path.')) {
        const names = [];
        const re = new RegExp('^' + path.replace(/\{([^}]+)\}/g, (_, n) => names.push(n) && '([^/]+)') + '$');
        v = pm.request.url.getPath().match(re)?.[1 + names.indexOf(expr.slice(14))];
      }
      if (v !== undefined && v !== null) pm.collectionVariables.set(`link.${l.operationId}.${name}`, String(v));
    }
  }
}

newman.run({ collection, envVar: [{ key: 'apiKey', value: KEY }], reporters: ['cli'] }, (err, summary) => {
  if (err) {
    console.error(err);
    process.exit(1);
  }
  const { failures } = summary.run;
  const s = summary.run.stats;
  console.log(`contract: ${s.requests.total} requests for ${ops.length} operations, ${s.assertions.total} assertions, ${failures.length} failures`);
  process.exit(failures.length || s.requests.failed ? 1 : 0);
});
