#!/usr/bin/env bash
# The agent's privilege model, as the systemd unit runs it: a dedicated non-root user whose only
# capability is CAP_NET_ADMIN (ambient, bounding set reduced to it, no_new_privs). Proves that
# this is enough to serve every verb on real kernel nftables, and that without CAP_NET_ADMIN the
# same user can change nothing. Runs in a network namespace it creates.
# Usage: test_least_privilege.sh <pve-sandbox-agent> <contract.nft>
set -euo pipefail

agent=$(readlink -f "$1")
contract=$(readlink -f "$2")
ns=pvslp$$
dir=$(mktemp -d /tmp/pvslp.XXXXXX)
pid=""
failures=0

cleanup() {
  if [[ -n "$pid" ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

user=nobody
group=nogroup
getent passwd "$user" >/dev/null && getent group "$group" >/dev/null ||
  { echo "FAIL: needs the $user user and the $group group"; exit 1; }
uid=$(id -u "$user")

ip netns add "$ns"
ip netns exec "$ns" nft -f "$contract"
chmod 0755 "$dir"
mkdir "$dir/run" "$dir/state"
chown "$user:$group" "$dir/run" "$dir/state"
# The controller side connects as root (uid 0) through the relay.
cat >"$dir/agent.yaml" <<YAML
socket: $dir/run/agent.sock
socket_group: ""
allowed_uids: [0]
sandbox_cidr: 10.99.0.0/16
gateway: 10.99.0.1
state_file: $dir/state/agent-state
dhcp_hosts_dir: $dir/run/dhcp-hosts
YAML
chmod 0644 "$dir/agent.yaml"

# start_agent <capabilities, e.g. +net_admin or "">
start_agent() {
  local caps=$1
  local capargs=(--inh-caps=-all --ambient-caps=-all --bounding-set=-all)
  if [[ -n "$caps" ]]; then
    capargs=(--inh-caps="-all,$caps" --ambient-caps="-all,$caps" --bounding-set="-all,$caps")
  fi
  rm -f "$dir/run/agent.sock"
  # The unit's UMask=0077: the DHCP reservations must still be readable by dnsmasq.
  umask 077
  ip netns exec "$ns" setpriv --reuid="$user" --regid="$group" --clear-groups --no-new-privs \
    "${capargs[@]}" "$agent" --config "$dir/agent.yaml" 2>"$dir/agent.log" &
  pid=$!
  umask 022
  for _ in $(seq 1 200); do # 20 s at most; a refusal to start ends it at once
    [[ -S "$dir/run/agent.sock" ]] && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
stop_agent() {
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=""
}
ask() { printf '%s\n' "$1" | ip netns exec "$ns" "$agent" relay --socket "$dir/run/agent.sock"; }
expect() {
  local what=$1 request=$2 want=$3 got
  got=$(ask "$request" || true)
  # shellcheck disable=SC2053 # $want is a glob pattern on purpose
  if [[ "$got" == $want ]]; then pass "$what: $request -> $got"; else fail "$what: $request -> '$got', wanted '$want'"; fi
}

# ---- with CAP_NET_ADMIN only ------------------------------------------------------------------
if start_agent +net_admin; then
  pass "agent starts as $user (uid $uid) with CAP_NET_ADMIN only"
  status=$(grep -E '^(Uid|CapEff|CapAmb|CapBnd|NoNewPrivs):' "/proc/$pid/status" | tr -s '\t ' ' ' | paste -sd';' -)
  echo "   /proc/$pid/status: $status"
  # CAP_NET_ADMIN is bit 12: 0x1000.
  if grep -qE '^CapEff:\s+0000000000001000$' "/proc/$pid/status" &&
    grep -qE "^Uid:\s+$uid\s" "/proc/$pid/status"; then
    pass "effective capabilities are exactly CAP_NET_ADMIN, uid $uid"
  else
    fail "effective capabilities are exactly CAP_NET_ADMIN, uid $uid"
  fi
  expect "hello" "HELLO 1" "OK pve-sandbox-agent *"
  expect "allow" "ALLOW 10.99.0.7 ttl=60" "OK"
  expect "bind" "BIND veth101i0 02:00:00:00:00:07 10.99.0.7" "OK"
  expect "sync" "SYNC 10.99.0.8 10.99.0.9@30" "OK 2"
  expect "list" "LIST" "OK 2 10.99.0.*"
  expect "revoke" "REVOKE 10.99.0.8" "OK"
  expect "egress" "EGRESS 10.99.0.10 ports=80,443 names=pypi.org,*.github.com" "OK"
  expect "ask" "ASK 10.99.0.10 api.github.com" "OK allow ports=80,443*"
  expect "pair" "PAIR 10.99.0.10 api.github.com 203.0.113.5 ttl=60" "OK 2"
  expect "egresses" "EGRESSES" "OK 1 10.99.0.10=80,443/pypi.org,\*.github.com"
  pairs_now=$(ip netns exec "$ns" nft list set inet sandbox egress_pairs)
  if [[ "$pairs_now" == *"10.99.0.10 . 203.0.113.5 . 443"* ]]; then
    pass "the kernel pair set holds what the unprivileged agent wrote"
  else
    fail "the kernel pair set holds what the unprivileged agent wrote"
  fi
  expect "egress off" "EGRESS 10.99.0.10 off" "OK"
  # Captured first: with pipefail, `nft | grep -q` fails when grep's early exit kills nft (SIGPIPE).
  set_now=$(ip netns exec "$ns" nft list set inet sandbox internet_allowed)
  if [[ "$set_now" == *10.99.0.9* ]]; then
    pass "the kernel set holds what the unprivileged agent wrote"
  else
    fail "the kernel set holds what the unprivileged agent wrote"
  fi
  if [[ -s "$dir/state/agent-state" ]]; then pass "state written to its own directory"; else fail "state written to its own directory"; fi
  res=$dir/run/dhcp-hosts/veth101i0
  if [[ "$(cat "$res" 2>/dev/null)" == "02:00:00:00:00:07,10.99.0.7" && "$(stat -c %a "$res")" == 644 &&
    "$(stat -c %a "$dir/run/dhcp-hosts")" == 755 ]]; then
    pass "DHCP reservation written, world-readable (0644 in a 0755 directory) despite umask 077"
  else
    ls -la "$dir/run/dhcp-hosts" || true
    fail "DHCP reservation written, world-readable (0644 in a 0755 directory) despite umask 077"
  fi
  stop_agent
else
  cat "$dir/agent.log"
  fail "agent starts as $user with CAP_NET_ADMIN only"
fi

# ---- without any capability -------------------------------------------------------------------
ip netns exec "$ns" nft flush set inet sandbox internet_allowed
if start_agent ""; then
  got=$(ask "ALLOW 10.99.0.20" || true)
  set_now=$(ip netns exec "$ns" nft list set inet sandbox internet_allowed)
  if [[ "$got" == ERR* && "$set_now" != *10.99.0.20* ]]; then
    pass "without CAP_NET_ADMIN nothing changes: ALLOW -> $got"
  else
    fail "without CAP_NET_ADMIN nothing changes: ALLOW -> '$got'"
  fi
  stop_agent
else
  # Refusing to start is also a correct outcome; it must say why.
  if grep -qi 'permit\|permission\|EPERM' "$dir/agent.log"; then
    pass "without CAP_NET_ADMIN the agent refuses to start: $(head -c 200 "$dir/agent.log" | tail -1)"
  else
    cat "$dir/agent.log"
    fail "without CAP_NET_ADMIN the agent fails clearly"
  fi
fi

echo "least privilege: $failures failure(s)"
((failures == 0))
