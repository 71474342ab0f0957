#!/bin/bash
# Runs setup/pve-sandbox-check's network items for real in the namespace rig (br_netfilter on):
# with the hardened ruleset every network item must PASS (and the Proxmox-only items SKIP);
# with a permissive ruleset that only has the right tables and sets, the check must FAIL them.
# The site lists a controller on another host: loaded as configured, ruleset-loaded PASSes; the
# permissive ruleset's empty controller_addresses is reported as not what setup.conf says.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CHECK="$HERE/../../setup/pve-sandbox-check"
[[ $(id -u) == 0 ]] || {
	echo "FAIL: needs root (network namespaces)"
	exit 1
}
# shellcheck source=rig-lib.sh
source "$HERE/rig-lib.sh"
trap rig_down EXIT
trap 'exit 143' TERM INT HUP
FAILED=0
pass() { echo "PASS $1"; }
fail() {
	echo "FAIL $1"
	FAILED=$((FAILED + 1))
}

rig_up 1
rig_load_ruleset "$HERE/../../nftables/sandbox.nft" "$CTL"
rig_in "$NS_L" ip route add 10.99.0.0/16 via 192.168.50.10
cat >"$RIG_TMP/check.conf" <<CONF
NODE=rig
BRIDGE=vmbr1
SANDBOX_CIDR=10.99.0.0/16
GATEWAY=10.99.0.1
CHECK_INTERNET=$INET
CHECK_RESOLVER=$RESOLVER
CHECK_LAN=192.168.50.20
CHECK_INTERNET6=2001:db8:50::1
CONTROLLER_ADDRESSES=$CTL
CONF
RIGSPEC="node=$NS_NODE,ct=$NS_A:$PORT_A,ct2=$NS_B:$PORT_B,lan=$NS_L"
NETWORK_ITEMS=(network.bridge-no-ports network.ruleset-loaded network.ip-forward network.default-deny
	network.internet-allowed network.revoke-cuts network.dns-host-only network.host-services
	network.private-destinations network.ipv6 network.inbound network.cross-container network.spoofing
	network.rate-limit network.scan)

rc=0
PVS_PYTHON=$RIG_PYTHON "$CHECK" --config "$RIG_TMP/check.conf" --rig "$RIGSPEC" --json >"$RIG_TMP/good.json" 2>"$RIG_TMP/good.err" || rc=$?
jq -r '.items[] | "    \(.status) \(.id): \(.evidence)"' "$RIG_TMP/good.json" 2>/dev/null || cat "$RIG_TMP/good.err"
[[ $rc == 0 ]] && pass "hardened ruleset: pve-sandbox-check exits 0" || fail "hardened ruleset: pve-sandbox-check exits 0 (rc $rc)"
for id in "${NETWORK_ITEMS[@]}"; do
	st=$(jq -r --arg id "$id" '.items[] | select(.id == $id) | .status' "$RIG_TMP/good.json" 2>/dev/null || true)
	[[ $st == PASS ]] && pass "hardened ruleset: $id PASS" || fail "hardened ruleset: $id is '${st:-missing}', expected PASS"
done
skips=$(jq -r '[.items[] | select(.status == "SKIP") | .id] | join(" ")' "$RIG_TMP/good.json" 2>/dev/null || true)
[[ $skips == *container.unprivileged* && $skips == *security.apparmor* && $skips == *functional.fork-bomb* && $skips == *network.ruleset-persistent* &&
	$skips == *dhcp.reservations-only* ]] &&
	pass "Proxmox-only items are SKIPped in the rig ($skips)" || fail "Proxmox-only items SKIPped (got: $skips)"
left=$(rig_in "$NS_NODE" nft list set inet sandbox internet_allowed)
[[ $left == *elements* ]] && fail "the check left grants behind" || pass "the check left no grant behind"

# A permissive ruleset with the right tables and sets (and NAT): the check must notice.
rig_in "$NS_NODE" nft delete table inet sandbox
rig_in "$NS_NODE" nft delete table bridge sandbox_l2
rig_in "$NS_NODE" nft -f - <<'NFT'
table inet sandbox {
	set internet_allowed {
		type ipv4_addr
		flags timeout
	}
	set controller_addresses {
		type ipv4_addr
		flags interval
	}
	chain input {
		type filter hook input priority filter; policy accept;
	}
	chain forward {
		type filter hook forward priority filter; policy accept;
	}
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		oifname != "vmbr1" ip saddr 10.99.0.0/16 masquerade
	}
}
table bridge sandbox_l2 {
	set port_mac {
		type ifname . ether_addr
	}
	set port_ip4 {
		type ifname . ipv4_addr
	}
}
NFT
# (text output this time: the format operators read)
rc=0
out=$(PVS_PYTHON=$RIG_PYTHON "$CHECK" --config "$RIG_TMP/check.conf" --rig "$RIGSPEC" --only network 2>&1) || rc=$?
sed 's/^/    /' <<<"$out"
[[ $rc == 1 ]] && pass "permissive ruleset: pve-sandbox-check exits 1" || fail "permissive ruleset: exit code $rc, expected 1"
for id in network.default-deny network.internet-allowed network.revoke-cuts network.dns-host-only network.host-services \
	network.private-destinations network.ipv6 network.inbound network.cross-container network.spoofing network.rate-limit network.scan; do
	grep -Eq "^FAIL +$id " <<<"$out" && pass "permissive ruleset: $id FAIL" || fail "permissive ruleset: $id not reported as FAIL"
done
grep -A1 -E '^FAIL +network.ruleset-loaded ' <<<"$out" | grep -Fq "set controller_addresses holds 'nothing', CONTROLLER_ADDRESSES says '$CTL'" &&
	pass "permissive ruleset: ruleset-loaded FAIL, controller_addresses is not setup.conf's" ||
	fail "permissive ruleset: ruleset-loaded should FAIL on controller_addresses"
grep -A1 -E '^FAIL +network.ruleset-loaded ' <<<"$out" | grep -Fq "inet sandbox/proxy_routes" &&
	pass "permissive ruleset: ruleset-loaded names the missing proxy_routes (the port proxy's route)" ||
	fail "permissive ruleset: ruleset-loaded should name the missing proxy_routes"
grep -Eq '^ +evidence: ' <<<"$out" && grep -Eq '^summary: [0-9]+ PASS, [1-9][0-9]* FAIL, [0-9]+ SKIP$' <<<"$out" &&
	pass "text output: PASS/FAIL lines with evidence and a summary" || fail "text output format"

[[ $FAILED -eq 0 ]] || {
	echo "FAILED check-rig: $FAILED"
	exit 1
}
echo "ALL PASS check-rig"
