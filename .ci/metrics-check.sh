#!/usr/bin/env bash
# metrics-check.sh (make metrics-check): start `rolodex dev` with -metrics-addr, send a few requests,
# scrape GET /metrics and parse the whole exposition with a real parser, Debian's
# python3-prometheus-client (text_string_to_metric_families; installed when missing and we are
# root with apt-get); then check that the request counter and the duration histogram moved.
set -euo pipefail
cd "$(dirname "$0")/.."
py=/usr/bin/python3
if ! "$py" -c 'import prometheus_client' 2>/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "Installing python3-prometheus-client (apt-get)..."
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-prometheus-client >/dev/null
  else
    echo "metrics-check needs Debian's python3-prometheus-client: sudo apt-get install python3-prometheus-client" >&2
    exit 1
  fi
fi
freeport() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

make -s build
dir=$(mktemp -d /tmp/rolodex-metrics-check.XXXXXX)
chmod 755 "$dir" # PostgreSQL runs as its own user when we are root
api=127.0.0.1:$(freeport)
mx=127.0.0.1:$(freeport)
./rolodex dev -dir "$dir/dev" -addr "$api" -metrics-addr "$mx" >"$dir/dev.out" 2>"$dir/server.log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 1 300); do
  grep -q '^API key: ' "$dir/dev.out" && break
  kill -0 $pid 2>/dev/null || { cat "$dir/dev.out" "$dir/server.log" >&2; exit 1; }
  sleep 0.2
done
key=$(sed -n 's/^API key: //p' "$dir/dev.out")
[ -n "$key" ] || { echo "rolodex dev printed no API key" >&2; exit 1; }

# The API port serves no /metrics.
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://$api/metrics")" = 404 ]
curl -sf "http://$mx/metrics" -o "$dir/before.txt"
for _ in 1 2 3; do curl -sf -H "x-api-key: $key" "http://$api/v1/contacts?limit=2" -o /dev/null; done
curl -s -o /dev/null "http://$api/v1/contacts" # a 401
curl -sf "http://$mx/metrics" -o "$dir/after.txt"

"$py" - "$dir/before.txt" "$dir/after.txt" <<'PY'
import sys
from prometheus_client.parser import text_string_to_metric_families

def parse(path):
    """Every sample of the exposition, by (name, sorted labels); the parser raises on any bad line."""
    out, families = {}, set()
    for fam in text_string_to_metric_families(open(path).read()):
        families.add((fam.name, fam.type))
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out, families

before, _ = parse(sys.argv[1])
after, families = parse(sys.argv[2])
for want in [("rolodex_http_requests", "counter"), ("rolodex_http_request_duration_seconds", "histogram"),
             ("rolodex_http_requests_in_flight", "gauge"), ("rolodex_db_pool_open_connections", "gauge"),
             ("rolodex_auth_failures", "counter"), ("rolodex_build_info", "gauge")]:
    assert want in families, f"no {want[0]} {want[1]} in the exposition"

def get(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))), 0)

route = "/v1/contacts"
checks = [
    ("requests", "rolodex_http_requests_total", dict(route=route, method="GET", status="2xx"), 3),
    ("histogram count", "rolodex_http_request_duration_seconds_count", dict(route=route), 3),
    ("+Inf bucket", "rolodex_http_request_duration_seconds_bucket", dict(route=route, le="+Inf"), 3),
    ("401s", "rolodex_auth_failures_total", {}, 1),
]
for what, name, labels, want in checks:
    moved = get(after, name, **labels) - get(before, name, **labels)
    assert moved == want, f"{what}: {name}{labels} moved by {moved}, want {want}"
assert get(after, "rolodex_http_request_duration_seconds_sum", route=route) > 0
print(f"metrics-check: {len(after)} samples in {len(families)} families parsed; the series moved")
PY
