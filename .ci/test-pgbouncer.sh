#!/usr/bin/env bash
# test-pgbouncer (make test-pgbouncer): the whole test suite through PgBouncer in transaction mode.
#  1. A private PostgreSQL from `rolodex dev` (trust auth, on 127.0.0.1 and a port below 32768), in a
#     folder of this run's own.
#  2. pgbouncer in front of it, with an ini of its own in that folder: pool_mode = transaction, one
#     wildcard database entry (every database the tests create gets its pool, and CREATE and DROP
#     DATABASE go through it too: no direct connection is needed), trust auth like PostgreSQL's,
#     on 127.0.0.1 and a free port below 32768, no Unix socket.
#  3. go test ./... with DATABASE_URL on pgbouncer and default_query_exec_mode=exec, as the README says.
# Both are stopped at the end, on failure too. GO and RACE come from the Makefile; arguments go to
# go test (-run TestX).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
RACE=${RACE:-}
pgbouncer=$(command -v pgbouncer || echo /usr/sbin/pgbouncer) # Debian's is in /usr/sbin
[ -x "$pgbouncer" ] || { echo "pgbouncer is missing: sudo apt-get install pgbouncer" >&2; exit 1; }

work=$(mktemp -d /tmp/rolodex-pgbouncer.XXXXXX)
chmod 755 "$work" # PostgreSQL and pgbouncer run as their own user when we are root
dev= bouncer=
cleanup() {
  set +e
  [ -n "$bouncer" ] && kill "$bouncer" 2>/dev/null && wait "$bouncer" 2>/dev/null
  # rolodex dev stops its PostgreSQL when it ends; a fast shutdown (SIGINT) of a postmaster it left behind.
  [ -n "$dev" ] && kill "$dev" 2>/dev/null && wait "$dev" 2>/dev/null
  if pm=$(head -1 "$work/pg/data/postmaster.pid" 2>/dev/null) && kill -INT "$pm" 2>/dev/null; then
    for _ in $(seq 1 100); do kill -0 "$pm" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

. .ci/freeport.sh

echo "== a private PostgreSQL (rolodex dev in $work/pg)"
"$GO" build -o "$work/rolodex" .
"$work/rolodex" dev -dir "$work/pg" -addr 127.0.0.1:0 >"$work/dev.out" 2>"$work/dev.log" &
dev=$!
for _ in $(seq 1 300); do
  grep -q '^DATABASE_URL=' "$work/dev.out" && break
  kill -0 "$dev" 2>/dev/null || { cat "$work/dev.out" "$work/dev.log" >&2; exit 1; }
  sleep 0.2
done
pgurl=$(sed -n 's/^DATABASE_URL=//p' "$work/dev.out")
pgport=$(sed -n 's|^postgres://postgres@127\.0\.0\.1:\([0-9]*\)/.*|\1|p' <<<"$pgurl")
[ -n "$pgport" ] || { echo "no TCP DATABASE_URL from rolodex dev: $pgurl" >&2; cat "$work/dev.out" "$work/dev.log" >&2; exit 1; }
echo "PostgreSQL on 127.0.0.1:$pgport"

echo "== pgbouncer in transaction mode in front of it"
mkdir "$work/pgbouncer"
printf '"postgres" ""\n' >"$work/pgbouncer/users.txt"
runas=()
if [ "$(id -u)" = 0 ]; then # pgbouncer refuses to run as root
  user=$(id -un postgres 2>/dev/null || echo nobody)
  chown -R "$user" "$work/pgbouncer"
  runas=(-u "$user")
fi
# start_bouncer starts pgbouncer on a free port below 32768 (three tries) and sets bouncer and port.
start_bouncer() {
  port= bouncer=
  for _ in 1 2 3; do
    port=$(freeport)
    cat >"$work/pgbouncer/pgbouncer.ini" <<EOF
[databases]
* = host=127.0.0.1 port=$pgport

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $work/pgbouncer/users.txt
pool_mode = transaction
; The server sends statement_timeout as a startup parameter, which pgbouncer 1.18 refuses unless it is
; ignored; then the request's deadline (the same length) still cancels a slow query through pgbouncer.
ignore_startup_parameters = statement_timeout
max_client_conn = 2000
default_pool_size = 20
logfile = $work/pgbouncer/pgbouncer.log
pidfile = $work/pgbouncer/pgbouncer.pid
EOF
    "$pgbouncer" ${runas[@]+"${runas[@]}"} "$work/pgbouncer/pgbouncer.ini" >/dev/null 2>&1 &
    bouncer=$!
    for _ in $(seq 1 50); do
      (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
      kill -0 "$bouncer" 2>/dev/null || break
      sleep 0.1
    done
    kill "$bouncer" 2>/dev/null && wait "$bouncer" 2>/dev/null || true
    bouncer=
  done
  echo "pgbouncer did not start" >&2
  cat "$work/pgbouncer/pgbouncer.log" >&2
  return 1
}
start_bouncer
echo "pgbouncer $("$pgbouncer" --version | head -1 | awk '{print $2}') on 127.0.0.1:$port"

# pgbouncer 1.18 (Debian 12's) can die when a server connection it is cancelling gets an answer:
# "FATAL ... server_proto: server in bad state: 11" (pgbouncer#822, fixed in 1.21 by #927). pgx
# sends a cancel request when it drops a connection whose query a cancelled context interrupted,
# and a test dropping its database WITH (FORCE) meanwhile makes the server answer. When the suite
# fails and pgbouncer died that way, the failure is pgbouncer's: it is restarted and the suite run
# once more, and the log says so.
export DATABASE_URL
for try in 1 2; do
  echo "== go test ./... through pgbouncer"
  DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable&default_query_exec_mode=exec"
  status=0
  "$GO" test $RACE -count=1 -timeout 30m "$@" ./... || status=$?
  [ "$status" = 0 ] && exit 0
  echo "== pgbouncer's log (last 40 lines)" >&2
  tail -40 "$work/pgbouncer/pgbouncer.log" >&2
  if [ "$try" = 1 ] && ! kill -0 "$bouncer" 2>/dev/null &&
    grep -Eq 'FATAL .*(server in bad state|bad client state)' "$work/pgbouncer/pgbouncer.log"; then
    echo "== pgbouncer died of its known cancel-request bug (pgbouncer#822): restarting it, running the suite again" >&2
    wait "$bouncer" 2>/dev/null || true
    mv "$work/pgbouncer/pgbouncer.log" "$work/pgbouncer/pgbouncer.log.1"
    start_bouncer
    continue
  fi
  exit "$status"
done
