#!/usr/bin/env bash
# The web console's first paint on loopback: the controller serving /ui/ against a plain static
# file server (python3 -m http.server) serving the same files (controller/console/), measured in
# headless chromium by first_paint.mjs (puppeteer-core as pinned for the console e2e test).
# Prints medians, p90s and the ratio; the target is first paint < 300 ms. Not a ctest.
#
# Usage: tests/bench/console/bench_console.sh [--build-dir DIR] [--runs N]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
build=$root/build
runs=30
usage() { sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; }
bad() { echo "bench_console: $1" >&2; usage >&2; exit 2; }
while (($#)); do
  case $1 in
    --build-dir) (($# >= 2)) || bad "--build-dir needs a value"; build=$2; shift 2 ;;
    --runs)
      [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || bad "--runs takes a whole number"
      runs=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) bad "unknown argument $1" ;;
  esac
done
controller=$build/controller/service/pve-sandbox-controller
for need in "$controller" /usr/bin/chromium; do
  [[ -x $need ]] || { echo "bench_console: $need is missing (build it / scripts/install-deps)" >&2; exit 1; }
done
command -v node >/dev/null || { echo "bench_console: node is missing (scripts/install-deps)" >&2; exit 1; }

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# puppeteer-core, pinned (the e2e test's lock file), installed once into the build tree.
node_dir=$build/tests/bench/console/node
if ! cmp -s "$root/tests/service/api/console/package-lock.json" "$node_dir/installed.lock"; then
  mkdir -p "$node_dir"
  cp "$root/tests/service/api/console/package.json" "$root/tests/service/api/console/package-lock.json" "$node_dir/"
  PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund --prefix "$node_dir" >/dev/null
  cp "$root/tests/service/api/console/package-lock.json" "$node_dir/installed.lock"
fi
cp "$root/tests/bench/console/first_paint.mjs" "$node_dir/"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
api_port=$(free_port)
peer_port=$(free_port)
# The console needs no Proxmox: its files are served while the controller keeps retrying one
# that is not there (the API answers 503 "starting" meanwhile).
cat >"$work/controller.yaml" <<YAML
listen: {address: 127.0.0.1, port: $api_port}
auth:
  tokens:
    - {name: bench, sha256: 0000000000000000000000000000000000000000000000000000000000000000}
audit: {file: $work/audit.log}
log_level: error
proxmox:
  url: https://127.0.0.1:9
  node: pve
  token_id: bench@pve!bench
  token_secret_env: PVS_BENCH_SECRET
  template_vmid: 9000
ssh: {host_key_policy: insecure, private_key_file: $work/id}
YAML
: >"$work/id"
PVS_BENCH_SECRET=x "$controller" --config="$work/controller.yaml" >"$work/controller.log" 2>&1 &
pids+=($!)
mkdir -p "$work/peer"
cp -r "$root/controller/console" "$work/peer/ui"
(cd "$work/peer" && exec python3 -m http.server "$peer_port" --bind 127.0.0.1 >"$work/peer.log" 2>&1) &
pids+=($!)
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$api_port/ui/" >/dev/null && curl -sf "http://127.0.0.1:$peer_port/ui/" >/dev/null && break
  sleep 0.1
done
curl -sf "http://127.0.0.1:$api_port/ui/" >/dev/null || { cat "$work/controller.log" >&2; exit 1; }
node "$node_dir/first_paint.mjs" --controller "http://127.0.0.1:$api_port/ui/" \
  --peer "http://127.0.0.1:$peer_port/ui/" --runs "$runs"
