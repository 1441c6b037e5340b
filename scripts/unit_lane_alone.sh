#!/usr/bin/env bash
# Shows that the unit lane needs no server, no fio and no browser: runs it (`make unit`'s
# selection, or pytest arguments given here) in mount, network and PID namespaces of its own
# (root), where fio, node and chromium are hidden and only loopback exists, so no stack of
# another worktree can answer either. A watcher lists every process in the namespace; the
# script fails if any was Azurite, the Cosmos DB server, uvicorn, an agent, fio or Chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "needs root (namespaces, bind mounts)" >&2; exit 2; }
seen=$(mktemp)
export seen
exec unshare --mount --net --pid --fork --mount-proc bash -s -- "$@" <<'EOF'
set -uo pipefail
ip link set lo up
for program in fio node chromium; do
  path=$(command -v "$program" || true)
  [ -n "$path" ] && mount --bind /dev/null "$(readlink -f "$path")"
done
for program in fio node chromium; do
  if command -v "$program" >/dev/null && "$program" --version >/dev/null 2>&1; then
    echo "could not hide $program" >&2; exit 2
  fi
done
( while :; do ps -eo args= >> "$seen"; sleep 0.2; done ) &
watcher=$!
if [ $# -eq 0 ]; then set -- -m "unit and not slow and not timing"; fi  # make unit's
.venv/bin/pytest -q -p no:cacheprovider "$@"
rc=$?
kill "$watcher"
pattern='azurite|cosmosdb-server|uvicorn|-m agent|benchagent|(^|/)fio( |$)|chromium'
if sort -u "$seen" | grep -E "$pattern"; then
  echo "the unit lane started the processes above" >&2
  rc=1
else
  echo "no server, agent, fio or browser process started ($(sort -u "$seen" | wc -l) seen)"
fi
rm -f "$seen"
exit $rc
EOF
