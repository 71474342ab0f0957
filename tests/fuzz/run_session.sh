#!/usr/bin/env bash
# Runs a bounded libFuzzer session on a scratch copy of a seed corpus, so that new inputs found
# in CI never dirty the source tree. Usage: run_session.sh <fuzzer> <corpus-dir> <seconds>
set -euo pipefail
fuzzer=$1 corpus=$2 seconds=$3
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp -r "$corpus"/. "$scratch"/
# -rss_limit_mb keeps a runaway input from eating the machine; artifacts go to the scratch dir.
# Not exec: the trap removes the scratch copy after a clean session; a failed one keeps it, so
# the crashing input is there to read.
status=0
"$fuzzer" -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=70000 \
  -artifact_prefix="$scratch/" -print_final_stats=1 "$scratch" || status=$?
if ((status != 0)); then
  trap - EXIT
  echo "run_session: $fuzzer failed ($status); its corpus and artifacts stay in $scratch" >&2
fi
exit "$status"
