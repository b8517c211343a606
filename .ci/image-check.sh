#!/usr/bin/env bash
# image-check (make image-check): what the Dockerfile promises, proven without a Docker engine.
#  1. Build the binary exactly as the Dockerfile does (CGO_ENABLED=0, -trimpath, version stamped).
#  2. ldd finds no dynamic dependencies.
#  3. In an empty root directory holding nothing but the binary (like FROM scratch, no /etc, no
#     socket directory), as the image's non-root user 10001: `rolodex version` prints the stamped
#     version, and `rolodex serve` migrates a local PostgreSQL over TCP 127.0.0.1 and answers /readyz.
# Needs root (chroot) and PostgreSQL's server binaries (make postgres installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "image-check needs root for chroot" >&2; exit 1; }

version=$(git describe --tags --always --dirty 2>/dev/null || echo devel)-image-check
work=$(mktemp -d /tmp/rolodex-image-check.XXXXXX)
chmod 755 "$work" # PostgreSQL runs as its own user
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

echo "== build (the Dockerfile's command)"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${version}" -o "$work/rolodex" .

echo "== ldd"
if out=$(ldd "$work/rolodex" 2>&1); then
  echo "$out"
  echo "ldd found dynamic dependencies: the binary is not static" >&2
  exit 1
fi
echo "$out"
case "$out" in *"not a dynamic executable"*|*"statically linked"*) ;; *) echo "unexpected ldd output" >&2; exit 1 ;; esac

root=$work/root
chroot=$(command -v chroot)
mkdir -m 755 "$root"
install -m 755 "$work/rolodex" "$root/rolodex"
echo "== the root directory holds only:"
find "$root" -mindepth 1 | sed "s|^$root||"
[ "$(find "$root" -mindepth 1 | wc -l)" = 1 ]

echo "== rolodex version"
# env -i: nothing of our environment; --userspec: the image's non-root user.
got=$(env -i "$chroot" --userspec=10001:10001 "$root" /rolodex version)
echo "$got"
[ "$got" = "rolodex $version" ] || { echo "want: rolodex $version" >&2; exit 1; }

echo "== a local PostgreSQL (from rolodex dev, on TCP 127.0.0.1)"
"$work/rolodex" dev -dir "$work/dev" -addr 127.0.0.1:0 >"$work/dev.out" 2>"$work/dev.log" &
pids+=($!)
for _ in $(seq 1 300); do
  grep -q '^DATABASE_URL=' "$work/dev.out" && break
  kill -0 "${pids[0]}" 2>/dev/null || { cat "$work/dev.out" "$work/dev.log" >&2; exit 1; }
  sleep 0.2
done
dburl=$(sed -n 's/^DATABASE_URL=//p' "$work/dev.out")
case "$dburl" in postgres://*@127.0.0.1:*) ;; *) echo "no TCP DATABASE_URL from rolodex dev: $dburl" >&2; exit 1 ;; esac
# A database of its own, so `serve` in the jail migrates it from nothing.
psql -q "$dburl" -c 'CREATE DATABASE image_check'
dburl=${dburl/\/rolodex\?/\/image_check?}

echo "== rolodex serve in the empty root"
: >"$work/serve.log" # there before the loop reads it: the background job's redirection may come after
env -i DATABASE_URL="$dburl" ROLODEX_ADDR=127.0.0.1:0 "$chroot" --userspec=10001:10001 "$root" /rolodex serve 2>"$work/serve.log" &
serve=$!
pids+=($serve)
addr= ready=
for _ in $(seq 1 150); do
  addr=${addr:-$(sed -n 's/.*"msg":"listening","addr":"\([^"]*\)".*/\1/p' "$work/serve.log")}
  if [ -n "$addr" ] && ready=$(curl -sf "http://$addr/readyz"); then break; fi
  kill -0 "$serve" 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }
  sleep 0.2
done
echo "GET /readyz: $ready"
case "$ready" in *'"status":"ready"'*) ;; *) cat "$work/serve.log" >&2; exit 1 ;; esac
curl -sf "http://$addr/v1/openapi.json" -o "$work/openapi.json"
echo "GET /v1/openapi.json: $(head -c 30 "$work/openapi.json")..."
kill -TERM "$serve"
wait "$serve"
grep -q '"msg":"stopped"' "$work/serve.log" || { echo "serve did not stop cleanly" >&2; cat "$work/serve.log" >&2; exit 1; }
echo "image-check: static, runs as 10001 in an empty root, serves and stops cleanly"
