#!/usr/bin/env bash
# ctest driver: runs telemetry_fixture_server and checks that the Python
# client written from docs/PROTOCOL.md decodes every topic and gets ok
# replies, and that it does fail on an unknown command.
# Usage: python_client_test.sh FIXTURE_SERVER CLIENT_PY
set -euo pipefail
server=$1
client=$2

# pyzmq comes from Debian's python3-zmq, installed for /usr/bin/python3; a
# python3 earlier on PATH (pyenv, venv) may lack it.
py=python3
if ! "$py" -c 'import zmq' 2>/dev/null; then py=/usr/bin/python3; fi

tmp=$(mktemp -d)
pid=
cleanup() {
  if [[ -n $pid ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

"$server" --seconds 60 --period-ms 50 --trace-level summary >"$tmp/endpoints" &
pid=$!
for _ in $(seq 100); do
  grep -q '^control ' "$tmp/endpoints" && break
  kill -0 "$pid" || { echo "fixture server died"; exit 1; }
  sleep 0.1
done
telemetry=$(awk '$1 == "telemetry" {print $2}' "$tmp/endpoints")
control=$(awk '$1 == "control" {print $2}' "$tmp/endpoints")
echo "fixture: telemetry=$telemetry control=$control"

# spans only flow at trace level "full": the trace command (sent before
# listening) must take effect for this to pass.
all=meta,step,spans,kstats,occupancy,experts,request,requests,event,heartbeat
"$py" "$client" --telemetry "$telemetry" --control "$control" --expect-topics "$all" \
  --seconds 20 --command status --command describe --command 'trace {"level":"full"}' \
  --command 'cancel {"id":41}' --command flush_cache

echo "--- an unknown command must make the client fail"
if "$py" "$client" --telemetry "$telemetry" --control "$control" --expect-topics heartbeat \
  --seconds 20 --command fly; then
  echo "client exited 0 although 'fly' must be NOT_FOUND"
  exit 1
fi
echo "--- cancelling a request that is not there must make the client fail (NOT_FOUND)"
if "$py" "$client" --telemetry "$telemetry" --control "$control" --expect-topics heartbeat \
  --seconds 20 --command 'cancel {"id":12345}'; then
  echo "client exited 0 although cancelling request 12345 must be NOT_FOUND"
  exit 1
fi
echo "PASS"
