#!/usr/bin/env bash
# scripts/demo --keep as a new user runs it: after the walkthrough the stack stays up, the
# printed export lines work from the host's shell (sandboxctl and curl on 127.0.0.1), and
# Ctrl-C (SIGINT) tears everything down: exit 0, no namespace and no process of the demo left.
#
# Usage: tests/service/e2e/demo_keep.sh BUILD_DIR
set -euo pipefail
build_dir=${1:?usage: demo_keep.sh BUILD_DIR}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
out=$(mktemp)
demo=""
fail() {
  echo "demo_keep: FAILED: $*" >&2
  sed 's/^/  | /' "$out" >&2
  exit 1
}
finish() {
  [[ -n $demo ]] && kill -INT "$demo" 2>/dev/null && wait "$demo" 2>/dev/null
  rm -f "$out"
}
trap finish EXIT

# setsid: the demo gets its own session, as in a terminal; the SIGINT below reaches only it
# (env --default-signal: a background job starts with SIGINT ignored, which bash cannot undo).
setsid env --default-signal=INT bash "$root/scripts/demo" --no-build --build-dir "$build_dir" --keep >"$out" 2>&1 &
demo=$!
for _ in $(seq 1 1200); do
  grep -q '^export SANDBOXCTL_TOKEN=' "$out" && break
  kill -0 "$demo" 2>/dev/null || fail "the demo exited before it printed the export lines"
  sleep 0.1
done
grep -q '^export SANDBOXCTL_TOKEN=' "$out" || fail "no export lines after 120 s"
id=$(grep -o 'pvsdemo[0-9]*-node' "$out" | head -n1)
id=${id%-node}
[[ -n $id ]] || fail "no namespace name in the output"

# What the user pastes: the export lines, then sandboxctl from the host.
eval "$(grep '^export SANDBOXCTL_' "$out")"
ctl=$build_dir/controller/sandboxctl/sandboxctl
curl -sf -m 5 -H "Authorization: Bearer $SANDBOXCTL_TOKEN" "$SANDBOXCTL_URL/v1/sandboxes" |
  grep -q '"sandboxes"' || fail "curl with the printed URL and token did not list sandboxes"
created=$("$ctl" --json create --ttl 300) || fail "sandboxctl create from the host failed"
sb=$(sed -n 's/.*"id" *: *"\([^"]*\)".*/\1/p' <<<"$created" | head -n1)
[[ -n $sb ]] || fail "no sandbox id in: $created"
[[ $("$ctl" exec "$sb" -- echo kept) == kept ]] || fail "exec in the kept stack"
grep -q 'controller.log' "$out" || fail "the log paths are not printed"

# Ctrl-C with the sandbox still alive: the teardown must take it too.
kill -INT "$demo"
rc=0
wait "$demo" || rc=$?
demo=""
[[ $rc -eq 0 ]] || fail "the demo exited $rc after Ctrl-C"
grep -q 'Demo complete' "$out" || fail "the teardown did not complete"
left=$(ip netns list | awk '{print $1}' | grep -c "^$id-" || true)
[[ $left -eq 0 ]] || fail "$left namespaces of $id are left"
pgrep -f "$id" >/dev/null && fail "processes of $id are left: $(pgrep -af "$id")"
echo "demo_keep: ok (sandbox $sb created and used from the host, all gone after Ctrl-C)"
