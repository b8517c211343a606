# freeport prints a loopback port below the ephemeral range that nothing listens on (sourced by the
# scripts that start servers of their own).
freeport() {
  local p
  for _ in $(seq 1 100); do
    p=$((20000 + RANDOM % 12000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return 0; fi
  done
  echo "no free port" >&2
  return 1
}
