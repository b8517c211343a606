#!/usr/bin/env bash
# check.sh: hold the running server to its OpenAPI document with tools nobody here wrote (make api-check).
#  1. npm ci: the pinned tools of package-lock.json.
#  2. Build ./rolodex and start `rolodex dev` (a PostgreSQL of its own, a demo company, the server).
#  3. redocly lint the document the server serves.
#  4. walk.mjs: every endpoint and the main error cases through Prism proxies in front of the server.
#  5. redocly lint (the same rules) and openapi-typescript: types from the document served for the
#     demo company's key once it has defined two contact fields, tier (select) and arr (number);
#     client.ts (openapi-fetch) must compile against them with tsc, without casts, its custom values
#     and filters typed by those fields, and then run against the server.
#  6. contract.mjs: a Portman contract test of every operation, from the served document's own
#     examples and links, run by newman on the demo data: zero failures.
set -euo pipefail
cd "$(dirname "$0")"
root=$(cd .. && pwd)
out=$PWD/out
mkdir -p "$out"

command -v node >/dev/null || { echo "check.sh needs Node.js (20 or newer) and npm" >&2; exit 1; }
echo "node $(node --version), npm $(npm --version)"
npm ci --no-audit --no-fund --loglevel=error

freeport() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

pids=()
devdir=$(mktemp -d /tmp/rolodex-api-check.XXXXXX)
chmod 755 "$devdir" # PostgreSQL runs as its own user when we are root
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$devdir"
}
trap cleanup EXIT

# waitfor URL SECONDS: poll until URL answers at all.
waitfor() {
  for _ in $(seq 1 $(($2 * 5))); do
    curl -s -o /dev/null "$1" && return 0
    sleep 0.2
  done
  echo "timed out waiting for $1" >&2
  return 1
}

make -C "$root" -s build
port=$(freeport)
# Webhooks may go to walk.mjs's receiver on 127.0.0.1, and nowhere else but public addresses, of
# which the walk names none.
ROLODEX_WEBHOOK_ALLOW_CIDRS=127.0.0.1/32 "$root/rolodex" dev -dir "$devdir/dev" -addr "127.0.0.1:$port" >"$out/dev.out" 2>"$out/server.log" &
pids+=($!)
for _ in $(seq 1 300); do
  grep -q '^API key: ' "$out/dev.out" && break
  kill -0 "${pids[0]}" 2>/dev/null || { cat "$out/dev.out" "$out/server.log" >&2; exit 1; }
  sleep 0.2
done
key=$(sed -n 's/^API key: //p' "$out/dev.out")
[ -n "$key" ] || { echo "rolodex dev printed no API key" >&2; cat "$out/dev.out" >&2; exit 1; }
base=http://127.0.0.1:$port
waitfor "$base/readyz" 30
echo "server at $base"

# The served document is the one every tool checks.
curl -sf "$base/v1/openapi.json" -o "$out/openapi.json"
cmp "$out/openapi.json" "$root/api/openapi.json"

echo "== redocly lint"
node_modules/.bin/redocly lint --config redocly.yaml "$out/openapi.json"

echo "== prism proxy walk"
strict=$(freeport)
node_modules/.bin/prism proxy --errors -h 127.0.0.1 -p "$strict" "$out/openapi.json" "$base" >"$out/prism-strict.log" 2>&1 &
pids+=($!)
lax=$(freeport)
node_modules/.bin/prism proxy -h 127.0.0.1 -p "$lax" "$out/openapi.json" "$base" >"$out/prism-lax.log" 2>&1 &
pids+=($!)
waitfor "http://127.0.0.1:$strict/healthz" 60
waitfor "http://127.0.0.1:$lax/healthz" 60
walk=0
STRICT=http://127.0.0.1:$strict LAX=http://127.0.0.1:$lax KEY=$key DOC=$out/openapi.json node walk.mjs || walk=$?

echo "== openapi-typescript + openapi-fetch client, typed by the company's custom fields"
define() {
  curl -sf -X POST -H "x-api-key: $key" -H 'Content-Type: application/json' -d "$1" "$base/v1/customFields" >/dev/null ||
    { echo "defining a custom field failed: $1" >&2; exit 1; }
}
define '{"object": "contact", "key": "tier", "label": "Tier", "type": "select",
  "options": [{"value": "gold", "label": "Gold"}, {"value": "silver", "label": "Silver"}, {"value": "bronze", "label": "Bronze"}]}'
define '{"object": "contact", "key": "arr", "label": "ARR", "type": "number"}'
curl -sf -H "x-api-key: $key" "$base/v1/openapi.json" -o "$out/openapi-typed.json"
node_modules/.bin/redocly lint --config redocly.yaml "$out/openapi-typed.json"
node_modules/.bin/openapi-typescript --redocly redocly.yaml "$out/openapi-typed.json" -o "$out/schema.d.ts"
if grep -nE '\bas\b|\bany\b|@ts-' client.ts; then
  echo "client.ts must compile against the generated types as they are: no casts, any or @ts- comments" >&2
  exit 1
fi
node_modules/.bin/tsc -p tsconfig.json
ROLODEX_URL=$base ROLODEX_KEY=$key node "$out/client.js"

echo "== portman + newman contract test"
BASE=$base KEY=$key DOC=$out/openapi.json OUT=$out node contract.mjs >"$out/contract.log" 2>&1 || {
  cat "$out/contract.log" >&2
  echo "the contract test failed (its collection: $out/contract.json)" >&2
  exit 1
}
tail -n 1 "$out/contract.log"

if [ "$walk" != 0 ]; then
  echo "the prism walk failed (see above; Prism's logs are in $out/prism-*.log)" >&2
  exit "$walk"
fi
echo "api-check: all passed"
