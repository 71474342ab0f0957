# Shared by scripts/demo and scripts/demo-cluster: output, processes started in namespaces and
# stopped again by pid, cleanup of everything a demo made, and sandboxctl as an application runs
# it. The sourcing script sets: id (prefix of its namespaces), user/user_created, tmp, and
# defines in_api (runs a command where the controller's API listens) before calling ctl.
# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154  # variables shared with the sourcing script (ctl_out, id, ...)

pids=()     # running processes we started, stopped in reverse order
all_pids=() # every process we started, to prove none is left

bold="" plain=""
if [[ -t 1 ]]; then
  bold=$(tput bold 2>/dev/null || true)
  plain=$(tput sgr0 2>/dev/null || true)
fi
step() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }
say() { printf '   %s\n' "$*"; }
indent() { sed 's/^/   | /'; }
die() {
  printf '\nscripts/demo: FAILED: %s\n' "$*" >&2
  exit 1
}

# Namespaces of earlier demos that were killed (SIGKILL) before they could clean up.
reap_stale() {
  local ns owner
  for ns in $(ip netns list | awk '{print $1}' | grep -E '^pvsdemo[0-9]+-' || true); do
    owner=${ns%%-*}
    [[ -d /proc/${owner#pvsdemo} ]] && continue
    for pid in $(ip netns pids "$ns" 2>/dev/null || true); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
}

stop_pid() {
  local pid=$1
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  local i ns
  # In reverse order of start: the controller first (it stops acting), then pvesim (it removes
  # its CT namespaces and sshds), then the agents and the rest.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    stop_pid "${pids[i]}"
  done
  pids=()
  # The lxc backend: what a pvesim that did not get to clean up left (containers, mounts).
  [[ -n ${lxc_run:-} && -d $lxc_run ]] && "$pvesim_bin" --token x=y --lxc-sweep >/dev/null 2>&1
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^$id-" || true); do
    for pid in $(ip netns pids "$ns" 2>/dev/null || true); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null
  done
  [[ $user_created -eq 1 ]] && userdel -f "$user" 2>/dev/null
  user_created=0
  if [[ -n $tmp && -d $tmp ]]; then
    if [[ $rc -ne 0 && $rc -ne 130 ]]; then
      for f in "$tmp"/*.log; do
        [[ -s $f ]] || continue
        printf '\n--- %s (last lines)\n' "${f##*/}" >&2
        tail -n 20 "$f" >&2
      done
    fi
    rm -rf "$tmp"
  fi
  tmp=""
  return "$rc"
}
trap cleanup EXIT
trap 'echo; echo "interrupted: cleaning up"; exit 130' INT TERM

# start NAMESPACE LOG COMMAND...: runs COMMAND in NAMESPACE in the background, in a session of
# its own so that Ctrl-C reaches only this script, which then stops the services in order.
start() {
  local ns=$1 log=$2
  shift 2
  setsid ip netns exec "$ns" "$@" >"$log" 2>&1 </dev/null &
  pids+=($!)
  all_pids+=($!)
}
# start_net NAMESPACE LOG COMMAND...: the same, but only in the namespace's network (nsenter):
# `ip netns exec` remounts /sys, which hides the cgroup mounts LXC needs (pvesim's lxc backend).
start_net() {
  local ns=$1 log=$2
  shift 2
  setsid nsenter --net="/run/netns/$ns" "$@" >"$log" 2>&1 </dev/null &
  pids+=($!)
  all_pids+=($!)
}
# wait_for WHAT COMMAND...: up to 30 s until COMMAND succeeds.
wait_for() {
  local what=$1
  shift
  for _ in $(seq 1 300); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  die "$what did not come up"
}

# sandboxctl as the application runs it (in_api: where the controller listens).
ctl_rc=0
ctl_out=""
# Prints argv the way one would type it (quotes only where the shell needs them).
shown() {
  local a out=""
  for a in "$@"; do
    if [[ $a =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then
      out+=" $a"
    elif [[ $a != *\'* ]]; then
      out+=" '$a'"
    else
      out+=" $(printf '%q' "$a")"
    fi
  done
  printf '%s' "${out# }"
}
ctl() {
  printf '   %s$ sandboxctl %s%s\n' "$bold" "$(shown "$@")" "$plain"
  set +e
  ctl_out=$(in_api env HOME="$tmp" SANDBOXCTL_TOKEN="$api_token" "$sandboxctl_bin" \
    --url "http://127.0.0.1:$api_port" "$@" 2>&1)
  ctl_rc=$?
  set -e
  if [[ -n $ctl_out ]]; then printf '%s\n' "$ctl_out" | indent; fi
}
ctl_ok() {
  ctl "$@"
  [[ $ctl_rc -eq 0 ]] || die "sandboxctl $* exited with $ctl_rc"
}
