#!/usr/bin/env bash
# The service benches of two builds in one run, alternating (before, after, before, after), so
# both see the same machine: bench_service exec and list, bench_hot_pool (REST and library),
# mcp_bench and terminal_ws_bench. Root (the benches build netns stacks). Not a ctest.
#
# Usage: tests/bench/service/before_after.sh BEFORE_BUILD_DIR AFTER_BUILD_DIR [rounds=2]
set -euo pipefail

usage() { echo "usage: $0 BEFORE_BUILD_DIR AFTER_BUILD_DIR [rounds=2]" >&2; exit 2; }
[[ $# -ge 2 && $# -le 3 && $1 != --help && $1 != -h ]] || usage
before=$(cd "$1" && pwd)
after=$(cd "$2" && pwd)
rounds=${3:-2}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || usage

run() {  # label build-dir bench args...
  local label=$1 dir=$2 bench=$3
  shift 3
  echo "--- $label: $bench $*"
  "$dir/tests/bench/$bench" "$@" 2>&1 | grep -Ev '^(INFO|DEBUG)|^[0-9T:.-]+Z (INFO|DEBUG)'
}

for ((r = 1; r <= rounds; r++)); do
  echo "=== round $r of $rounds"
  for side in before after; do
    dir=$before
    [[ $side == after ]] && dir=$after
    run "$side" "$dir" service/bench_service exec 200
    run "$side" "$dir" service/bench_service list 100
    run "$side" "$dir" service/bench_hot_pool 100 5 5
    run "$side" "$dir" service/mcp_bench 300
    run "$side" "$dir" terminal/terminal_ws_bench 300
  done
done
