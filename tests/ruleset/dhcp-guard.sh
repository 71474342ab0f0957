#!/bin/bash
# The ruleset's DHCP guard, proved with packets against a real dnsmasq in a namespace rig:
# a tenant cannot RELEASE or DECLINE its neighbour's reservation (the client hardware address
# in a DHCP request must be the frame's source MAC), and cannot flood dnsmasq (per-port rate).
# Usage: dhcp-guard.sh [--ruleset FILE]. One PASS/FAIL line per check; exits non-zero on a FAIL.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RULESET="$HERE/../../nftables/sandbox.nft"
if [[ ${1:-} == --ruleset ]]; then RULESET=$2; fi
[[ $(id -u) == 0 ]] || {
	echo "FAIL: needs root (network namespaces)" >&2
	exit 1
}
for tool in dnsmasq busybox nft; do
	command -v "$tool" >/dev/null || {
		echo "FAIL: $tool is not installed (scripts/install-deps)" >&2
		exit 1
	}
done

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
SEND="$HERE/dhcp_send.py"

# A node with the sandbox bridge and two containers, no uplink: DHCP never leaves the bridge.
rig_reap_stale
RIG_TMP=$(mktemp -d "/tmp/${RIG_ID}.XXXXXX")
ip netns add "$NS_NODE"
ip -n "$NS_NODE" link set lo up
ip -n "$NS_NODE" link add vmbr1 address 02:00:0a:63:00:01 type bridge stp_state 0 forward_delay 0
ip -n "$NS_NODE" link set vmbr1 up
ip -n "$NS_NODE" addr add 10.99.0.1/16 dev vmbr1
rig_container "$NS_A" "$PORT_A" "$IP_A" "$MAC_A" 2001:db8:99::5
rig_container "$NS_B" "$PORT_B" "$IP_B" "$MAC_B" 2001:db8:99::6
rig_load_ruleset "$RULESET"
rig_bind "$PORT_A" "$MAC_A" "$IP_A"
rig_bind "$PORT_B" "$MAC_B" "$IP_B"

# dnsmasq as setup configures it: reservations only, from the agent's directory.
hosts=$RIG_TMP/dhcp-hosts leases=$RIG_TMP/leases
mkdir -p "$hosts"
printf '%s,%s\n' "$MAC_A" "$IP_A" >"$hosts/$PORT_A"
printf '%s,%s\n' "$MAC_B" "$IP_B" >"$hosts/$PORT_B"
rig_in "$NS_NODE" dnsmasq -k --port=0 -C /dev/null --interface=vmbr1 --bind-interfaces \
	--dhcp-range=10.99.0.0,static,255.255.0.0,1h --dhcp-hostsdir="$hosts" --dhcp-ignore='tag:!known' \
	--dhcp-leasefile="$leases" --pid-file= --user=root --log-dhcp --log-facility="$RIG_TMP/dnsmasq.log" &
RIG_PIDS+=($!)

has_lease() { grep -qi " $1 $2 " "$leases" 2>/dev/null; }
# wait_lease MAC IP 0|1: until the lease file does (1) or does not (0) hold the lease, 3 s at most.
wait_lease() {
	local _
	for _ in $(seq 1 30); do
		if has_lease "$1" "$2"; then [[ $3 == 1 ]] && return 0; else [[ $3 == 0 ]] && return 0; fi
		sleep 0.1
	done
	return 1
}
get_lease() { # get_lease NS: a real DHCP client takes its reservation
	rig_in "$1" busybox udhcpc -i eth0 -f -q -n -t 4 -T 1 -s /bin/true >/dev/null 2>&1
}
# drops N: the packet count of the N-th counter in dhcp_from_port (0: rate, 1: chaddr).
drops() {
	local n
	n=$(rig_in "$NS_NODE" nft -j list chain bridge sandbox_l2 dhcp_from_port 2>/dev/null |
		jq --argjson n "$1" '[.nftables[] | select(.rule) | .rule.expr[] | select(.counter) | .counter.packets][$n] // -1' || true)
	echo "${n:--1}"
}

get_lease "$NS_A" && wait_lease "$MAC_A" "$IP_A" 1 && pass "container A gets its reservation" ||
	fail "container A gets its reservation"
get_lease "$NS_B" && wait_lease "$MAC_B" "$IP_B" 1 && pass "container B gets its reservation" ||
	fail "container B gets its reservation"

# A releases and declines B's reservation in B's name, from A's own (bound) MAC and address.
rig_in "$NS_A" "$RIG_PYTHON" "$SEND" release "$MAC_B" "$IP_B" "$IP_A" 10.99.0.1
rig_in "$NS_A" "$RIG_PYTHON" "$SEND" decline "$MAC_B" "$IP_B" "$IP_A" 255.255.255.255
sleep 1
has_lease "$MAC_B" "$IP_B" && pass "A cannot RELEASE or DECLINE B's lease" ||
	fail "A cannot RELEASE or DECLINE B's lease (B's lease is gone)"
(($(drops 1) >= 2)) && pass "the spoofed requests are dropped at the bridge port ($(drops 1))" ||
	fail "the spoofed requests are dropped at the bridge port (counter $(drops 1))"

# The same message in A's own name works: the guard checks the name, not the message type.
rig_in "$NS_A" "$RIG_PYTHON" "$SEND" release "$MAC_A" "$IP_A" "$IP_A" 10.99.0.1
wait_lease "$MAC_A" "$IP_A" 0 && pass "A can RELEASE its own lease" || fail "A can RELEASE its own lease"

# A flood: 200 DISCOVERs at once; the port's bucket passes its burst of 20 (+10/s).
rig_in "$NS_A" "$RIG_PYTHON" "$SEND" discover "$MAC_A" 0.0.0.0 "$IP_A" 255.255.255.255 200
sleep 0.5
seen=$(grep -c "DHCPDISCOVER(vmbr1) $MAC_A" "$RIG_TMP/dnsmasq.log" || true)
(($(drops 0) >= 100)) && pass "a DISCOVER flood is cut to the port's budget ($(drops 0) of 200 dropped, dnsmasq saw $seen)" ||
	fail "a DISCOVER flood is cut to the port's budget (counter $(drops 0), dnsmasq saw $seen of 200)"
get_lease "$NS_B" && pass "B is served meanwhile (the budget is per port)" || fail "B is served meanwhile"

if [[ $FAILED -eq 0 ]]; then echo "ALL PASS dhcp-guard"; else
	echo "FAILED dhcp-guard: $FAILED check(s)"
	exit 1
fi
