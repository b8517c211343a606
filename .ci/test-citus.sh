#!/usr/bin/env bash
# test-citus (make test-citus): the whole test suite on a Citus cluster on loopback.
#  1. Citus 13.2.2 built from ../shared/citus (its build.sh; Debian has no package), unless that
#     version is installed already.
#  2. A coordinator and two workers, each a PostgreSQL of its own (data folder and port below 32768)
#     under a folder of this run's own, with citus preloaded and in template1, so that every database
#     the tests create has the extension; CREATE DATABASE on the coordinator reaches the workers too.
#     The workers are registered in the coordinator's postgres database; the tests copy that
#     registration into each database they create (helpers_test.go), and `rolodex migrate` then
#     distributes the tables (citus.go).
#  3. go test ./... with DATABASE_URL on the coordinator.
# The nodes are stopped at the end, on failure too. GO and RACE come from the Makefile; arguments go
# to go test (-run TestX). KEEP=1 leaves the cluster running and prints its URL (for a look by hand).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
RACE=${RACE:-}

src=${CITUS_SRC:-../shared/citus}
[ -x "$src/build.sh" ] || src=/work/shared/citus
bin=$(dirname "$(readlink -f "$(command -v initdb 2>/dev/null || ls /usr/lib/postgresql/15/bin/initdb 2>/dev/null || echo /missing/initdb)")")
[ -x "$bin/initdb" ] || { echo "PostgreSQL 15's server binaries are missing: sudo apt-get install postgresql-15" >&2; exit 1; }
if ! grep -qs "default_version = '13.2" "$("$bin/pg_config" --sharedir 2>/dev/null || echo /missing)/extension/citus.control"; then
  [ -x "$src/build.sh" ] || { echo "Citus is not installed and its source is not in $src (set CITUS_SRC)" >&2; exit 1; }
  [ "$(id -u)" = 0 ] || { echo "Citus is not installed: run sudo $src/build.sh" >&2; exit 1; }
  echo "== building Citus from $src (1-3 minutes)"
  PG_CONFIG="$bin/pg_config" "$src/build.sh"
fi

work=$(mktemp -d /tmp/rolodex-citus.XXXXXX)
chmod 755 "$work"
runas=()
if [ "$(id -u)" = 0 ]; then # PostgreSQL refuses to run as root
  runas=(runuser -u postgres --)
  id postgres >/dev/null 2>&1 || { echo "no postgres user to run PostgreSQL as" >&2; exit 1; }
  chown postgres "$work"
fi
nodes=()
cleanup() {
  set +e
  for d in "${nodes[@]}"; do "${runas[@]}" "$bin/pg_ctl" -D "$d" -m immediate stop >/dev/null 2>&1; done
  rm -rf "$work"
}
if [ "${KEEP:-}" = 1 ]; then trap 'echo "kept: $work"' EXIT; else trap cleanup EXIT; fi
trap 'exit 130' INT TERM

. .ci/freeport.sh

# node NAME starts a PostgreSQL with citus in $work/NAME and prints its port.
node() {
  local dir=$work/$1 port
  "${runas[@]}" "$bin/initdb" -D "$dir" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$work/$1.initdb.log" 2>&1 ||
    { cat "$work/$1.initdb.log" >&2; return 1; }
  for _ in 1 2 3; do
    port=$(freeport)
    # Durability is not under test here: fsync off keeps CREATE DATABASE and the shards' DDL quick.
    cat >>"$dir/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
shared_preload_libraries = 'citus'
max_connections = 300
max_prepared_transactions = 300
fsync = off
synchronous_commit = off
full_page_writes = off
citus.shard_count = 4
EOF
    "${runas[@]}" "$bin/pg_ctl" -D "$dir" -l "$work/$1.log" -w -t 60 start >/dev/null && { nodes+=("$dir"); echo "$port"; return 0; }
    tail -5 "$work/$1.log" >&2
  done
  return 1
}

psqlc() { "${runas[@]}" "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres "$@"; }

echo "== a coordinator and two workers in $work"
coord=$(node coordinator)
w1=$(node worker1)
w2=$(node worker2)
for p in "$coord" "$w1" "$w2"; do
  for db in template1 postgres; do psqlc -p "$p" -d "$db" -c "CREATE EXTENSION citus"; done
done
psqlc -p "$coord" -d postgres >/dev/null <<EOF
SELECT citus_set_coordinator_host('127.0.0.1', $coord);
SELECT citus_add_node('127.0.0.1', $w1);
SELECT citus_add_node('127.0.0.1', $w2);
ALTER SYSTEM SET citus.enable_create_database_propagation = on;
SELECT pg_reload_conf();
EOF
echo "citus $(psqlc -p "$coord" -d postgres -At -c "SELECT extversion FROM pg_extension WHERE extname = 'citus'"):" \
  "coordinator 127.0.0.1:$coord, workers 127.0.0.1:$w1 and 127.0.0.1:$w2 (4 shards a table)"

export DATABASE_URL="postgres://postgres@127.0.0.1:$coord/postgres?sslmode=disable"
if [ "${KEEP:-}" = 1 ]; then echo "DATABASE_URL=$DATABASE_URL"; exit 0; fi
echo "== go test ./... on the coordinator"
status=0
"$GO" test $RACE -count=1 -timeout 30m "$@" ./... || status=$?
if [ "$status" != 0 ]; then
  for n in coordinator worker1 worker2; do echo "== $n's log (last 20 lines)" >&2; tail -20 "$work/$n.log" >&2; done
fi
exit "$status"
