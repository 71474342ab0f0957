#!/usr/bin/env bash
# Runs a command against the real pve-sandbox stack, as scripts/demo builds it: a network
# namespace for the Proxmox node with the sandbox bridge and the hardened ruleset,
# pve-sandbox-agent, pvesim (netns backend: each sandbox is a namespace with a real sshd) and
# pve-sandbox-controller. The command runs inside the node's namespace, where the API listens
# on 127.0.0.1, with these variables set:
#
#   PVS_URL            the controller (http://127.0.0.1:8080)
#   PVS_TOKEN          token "agent": policy rules below apply to it (max 6 sandboxes)
#   PVS_ADMIN_TOKEN    token "admin": admin, decides approvals, no rules
#   PVS_LIMITED_TOKEN  token "limited": at most 1 sandbox
#   PVS_STACK_HOME     the sandbox user's home (sandboxes share this machine's filesystem)
#   PVS_STACK_DIR      the stack's temp dir (logs: controller.log, agent.log, pvesim.log)
#
# Everything is stopped and removed when the command ends; its exit status is this script's.
# A missing binary or tool is an error (exit 1), never a skip.
#
# Needs root. Usage: tests/python/stack.sh BUILD_DIR COMMAND [ARGS...]
# shellcheck disable=SC2154,SC2034  # variables shared with scripts/lib/demo.sh
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

build_dir=${1:?usage: stack.sh BUILD_DIR COMMAND [ARGS...]}
shift
[[ $# -gt 0 ]] || {
  echo "usage: stack.sh BUILD_DIR COMMAND [ARGS...]" >&2
  exit 2
}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[[ $(id -u) -eq 0 ]] || {
  echo "stack.sh: run as root (it creates network namespaces)" >&2
  exit 1
}
agent_bin=$build_dir/hostagent/pve-sandbox-agent
controller_bin=$build_dir/controller/service/pve-sandbox-controller
pvesim_bin=$build_dir/tests/pvesim/pvesim
for b in "$agent_bin" "$controller_bin" "$pvesim_bin"; do
  [[ -x $b ]] || {
    echo "stack.sh: $b is missing (build it)" >&2
    exit 1
  }
done
for tool in ip nft curl ssh-keygen useradd /usr/sbin/sshd /usr/bin/python3; do
  command -v "$tool" >/dev/null || {
    echo "stack.sh: $tool is missing (scripts/install-deps installs it)" >&2
    exit 1
  }
done

id=pvsdemo$$ # the demo's prefix: reap_stale removes what a killed run left
ns_node=$id-node
api_port=8080
pve_port=8006
user=$id
tmp=""
user_created=0
# shellcheck source=../../scripts/lib/demo.sh
source "$root/scripts/lib/demo.sh"
in_node() { ip netns exec "$ns_node" "$@"; }

reap_stale
tmp=$(mktemp -d "/tmp/$id.XXXXXX")
chmod 755 "$tmp"

ip netns add "$ns_node"
in_node ip link set lo up
in_node sysctl -qw net.ipv4.ip_forward=1
in_node ip link add vmbr1 address 02:00:0a:63:00:01 type bridge stp_state 0 forward_delay 0
in_node ip addr add 10.99.0.1/16 dev vmbr1
in_node ip link set vmbr1 up

# shellcheck source=../../setup/lib/ruleset.sh
source "$root/setup/lib/ruleset.sh"
if pvs_kernel_has_ibrname; then scope=bridge; else scope=ports; fi
pvs_render_ruleset "$root/nftables/sandbox.nft" vmbr1 10.99.0.0/16 10.99.0.1 "$scope" \
  '{ "veth*", "fwpr*" }' >"$tmp/sandbox.nft"
in_node nft -f "$tmp/sandbox.nft"

cat >"$tmp/agent.yaml" <<YAML
socket: $tmp/agent.sock
socket_group: ""
allowed_uids: [0]
sandbox_cidr: 10.99.0.0/16
gateway: 10.99.0.1
state_file: $tmp/agent-state
YAML
start "$ns_node" "$tmp/agent.log" "$agent_bin" --config "$tmp/agent.yaml"
wait_for "pve-sandbox-agent" test -S "$tmp/agent.sock"

mkdir -m 755 "$tmp/home"
useradd -M -U -d "$tmp/home" -s /bin/sh -p '*' "$user"
user_created=1
chown "$user:$user" "$tmp/home"
ssh-keygen -q -t ed25519 -N '' -C "$id" -f "$tmp/id_ed25519"
cp "$tmp/id_ed25519.pub" "$tmp/authorized_keys"
chmod 644 "$tmp/authorized_keys"
head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/pve-token-secret"
chmod 600 "$tmp/pve-token-secret"
pve_token_id='root@pam!sandbox'
start "$ns_node" "$tmp/pvesim.log" "$pvesim_bin" --port "$pve_port" \
  --token-file "$pve_token_id=$tmp/pve-token-secret" --auth-delay-ms 0 --pool pve-sandbox \
  --backend netns --bridge vmbr1 --no-create-bridge --bridge-cidr 10.99.0.1/16 \
  --ns-prefix "$id-" --authorized-keys "$tmp/authorized_keys" --ssh-user "$user" \
  --template 9000 --template 8990 --info-file "$tmp/pvesim.info"
wait_for "pvesim" test -s "$tmp/pvesim.info"
fingerprint=$(sed -n 's/^fingerprint=//p' "$tmp/pvesim.info")
template_host_key=$(sed -n 's/^ssh_host_key=//p' "$tmp/pvesim.info")

new_token() { # NAME -> "TOKEN HASH"
  local out
  out=$("$controller_bin" --new-token "$1")
  echo "$(sed -n 's/^token: //p' <<<"$out") $(sed -n 's/^ *sha256: //p' <<<"$out")"
}
read -r agent_token agent_hash <<<"$(new_token agent)"
read -r admin_token admin_hash <<<"$(new_token admin)"
read -r limited_token limited_hash <<<"$(new_token limited)"
cat >"$tmp/controller.yaml" <<YAML
listen:
  address: 127.0.0.1
  port: $api_port
http:
  max_upload_bytes: 1073741824
  max_download_bytes: 1073741824
auth:
  max_streams_per_token: 4
  tokens:
    - {name: agent, sha256: $agent_hash, max_sandboxes: 6}
    - {name: admin, sha256: $admin_hash, admin: true, max_sandboxes: 6}
    - {name: limited, sha256: $limited_hash, max_sandboxes: 1}
audit:
  file: $tmp/audit.jsonl
egress:
  lists:
    python-packages: {names: [pypi.org, files.pythonhosted.org], ports: [443]}
policy:
  approval_wait_seconds: 1
  default:
    - {action: exec, command: '^echo approve-me', decision: approve, message: "a person approves this"}
    - {action: exec, command: '^echo deny-me', decision: deny, message: "deny-me is not allowed"}
    - {actions: [files.write, files.edit], path: '/*/needs-ok/*', decision: approve, message: "writes to needs-ok need a person"}
    - {action: internet, egress_names: '(^|\\.)approve\\.example$', decision: approve, message: "this name needs a person"}
    - {action: terminal.input, command: '^echo approve-typed', decision: approve, message: "typed line needs a person"}
  tokens:
    - {token: admin, rules: []}
proxmox:
  url: https://127.0.0.1:$pve_port
  node: pve
  token_id: "$pve_token_id"
  token_secret_file: $tmp/pve-token-secret
  fingerprint: "$fingerprint"
  template_vmid: 9000
  vmid_min: 10000
  vmid_max: 10999
ssh:
  user: $user
  private_key_file: $tmp/id_ed25519
  host_key_policy: pinned
  host_key_fingerprint: "$template_host_key"
agent:
  socket: $tmp/agent.sock
volumes:
  holder_template_vmid: 8990
YAML
"$controller_bin" --check-config --config "$tmp/controller.yaml" >"$tmp/check-config.log" 2>&1 || {
  cat "$tmp/check-config.log" >&2
  die "the controller refused its configuration"
}
start "$ns_node" "$tmp/controller.log" "$controller_bin" --config "$tmp/controller.yaml"
wait_for "pve-sandbox-controller" in_node curl -sf -m 2 "http://127.0.0.1:$api_port/v1/health"

set +e
in_node env PVS_URL="http://127.0.0.1:$api_port" PVS_TOKEN="$agent_token" \
  PVS_ADMIN_TOKEN="$admin_token" PVS_LIMITED_TOKEN="$limited_token" \
  PVS_STACK_HOME="$tmp/home" PVS_STACK_DIR="$tmp" "$@"
rc=$?
set -e
if [[ $rc -ne 0 ]]; then
  echo "--- controller.log (last lines)" >&2
  tail -n 30 "$tmp/controller.log" >&2
fi
exit "$rc"
