#!/bin/bash
# Packet tests of the sandbox ruleset's 11 isolation properties in a namespace rig, and of SSH
# from a controller on another host (CONTROLLER_ADDRESSES; the properties run with the list empty).
# Usage: properties.sh --brnf 0|1 [--ruleset FILE]
# Prints one line per check and one PASS/FAIL line per property; exits non-zero on any FAIL.
set -euo pipefail

BRNF=""
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RULESET="$HERE/../../nftables/sandbox.nft"
while [[ $# -gt 0 ]]; do
	case $1 in
	--brnf)
		BRNF=$2
		shift 2
		;;
	--ruleset)
		RULESET=$2
		shift 2
		;;
	*)
		echo "usage: $0 --brnf 0|1 [--ruleset FILE]" >&2
		exit 2
		;;
	esac
done
[[ $BRNF == 0 || $BRNF == 1 ]] || {
	echo "usage: $0 --brnf 0|1" >&2
	exit 2
}
[[ $(id -u) == 0 ]] || {
	echo "FAIL: needs root (network namespaces)" >&2
	exit 1
}

# shellcheck source=rig-lib.sh
source "$HERE/rig-lib.sh"
trap rig_down EXIT
trap 'exit 143' TERM INT HUP

TAG="[brnf=$BRNF]"
FAILED=0
PROP_FAILS=0
PROP_NAME=""
T=0.7 # timeout of a probe that is expected to be blocked

prop_begin() {
	PROP_NAME=$1
	PROP_FAILS=0
	echo "--- $TAG $PROP_NAME"
}
prop_end() {
	if [[ $PROP_FAILS -eq 0 ]]; then
		echo "PASS $TAG $PROP_NAME"
	else
		echo "FAIL $TAG $PROP_NAME ($PROP_FAILS check(s) failed)"
		FAILED=$((FAILED + 1))
	fi
}
check() { # check DESCRIPTION ok|blocked COMMAND...
	local desc=$1 want=$2
	shift 2
	local got=blocked
	if "$@" >/dev/null 2>&1; then got=ok; fi
	if [[ $got == "$want" ]]; then
		echo "    ok   $desc: $got"
	else
		echo "    FAIL $desc: expected $want, got $got"
		PROP_FAILS=$((PROP_FAILS + 1))
	fi
}
assert() { # assert DESCRIPTION CONDITION-COMMAND...
	local desc=$1
	shift
	if "$@"; then
		echo "    ok   $desc"
	else
		echo "    FAIL $desc"
		PROP_FAILS=$((PROP_FAILS + 1))
	fi
}
# hold_and_cut NAME DURATION NS HOST PORT CUT...: a connection from NS to HOST:PORT echoing every
# 0.2 s, and CUT run once it has echoed (20 s at most); HELD is then its "before=N after=M"
# (round trips before and after CUT).
hold_and_cut() {
	local name=$1 duration=$2 ns=$3 host=$4 port=$5 pid
	shift 5
	local out="$RIG_TMP/hold-$name.out" flag="$RIG_TMP/cut-$name"
	rig_probe "$ns" hold "$host" "$port" --flag "$flag" --duration "$duration" >"$out" &
	pid=$!
	rig_await "$out" echoed || true
	"$@"
	touch "$flag"
	wait "$pid" || true
	HELD=$(tail -n1 "$out")
	echo "    ($name: round trips $HELD)"
}
held_before_cut() { [[ $HELD =~ before=([0-9]+) && ${BASH_REMATCH[1]} -gt 0 ]]; }
none_after_cut() { [[ $HELD == *"after=0"* ]]; }
tcp() { rig_probe "$1" tcp "$2" "$3" --timeout "${4:-$T}"; }
udp() { rig_probe "$1" udp "$2" "$3" --timeout "${4:-$T}"; }

root_brnf_before=$(cat /proc/sys/net/bridge/bridge-nf-call-iptables)
rig_up "$BRNF"
rig_controller
echo "rig $RIG_ID up (br_netfilter call-iptables=$(rig_in "$NS_NODE" cat /proc/sys/net/bridge/bridge-nf-call-iptables) in the node namespace)"

prop_begin "rig sanity before the ruleset"
assert "bridge-nf-call-iptables is per namespace (host value untouched: $root_brnf_before)" \
	test "$(cat /proc/sys/net/bridge/bridge-nf-call-iptables)" = "$root_brnf_before"
check "ct101 -> ct102:22 without ruleset (L2 path exists)" ok tcp "$NS_A" "$IP_B" 22 2
check "node -> internet :80 (route exists)" ok tcp "$NS_NODE" "$INET" 80 2
check "controller host -> ct102:22 (route via the node exists)" ok tcp "$NS_C" "$IP_B" 22 2
prop_end

prop_begin "ruleset loads, reloads and keeps the agent's set elements"
assert "nft -f loads" rig_load_ruleset "$RULESET"
echo "    (bridge scope: $RIG_SCOPE)"
rig_bind "$PORT_A" "$MAC_A" "$IP_A"
rig_bind "$PORT_B" "$MAC_B" "$IP_B"
rig_allow "$IP_A"
rig_in "$NS_NODE" nft add element inet sandbox internet_allowed "{ 10.99.200.200 timeout 1h }"
assert "reload with nft -f succeeds" rig_in "$NS_NODE" nft -f "$RIG_TMP/sandbox.nft"
assert "nft -c on the rendered file is clean" rig_in "$NS_NODE" nft -c -f "$RIG_TMP/sandbox.nft"
elements=$(rig_in "$NS_NODE" nft list set inet sandbox internet_allowed)
assert "internet_allowed kept 10.99.1.5 and the timed 10.99.200.200" \
	bash -c '[[ $1 == *10.99.1.5* && $1 == *"10.99.200.200 timeout"* ]]' _ "$elements"
l2=$(rig_in "$NS_NODE" nft list table bridge sandbox_l2)
assert "port_mac and port_ip4 kept both bindings" \
	bash -c '[[ $1 == *"\"veth101i0\" . 02:99:00:00:01:01"* && $1 == *"\"veth102i0\" . 10.99.1.6"* ]]' _ "$l2"
assert "no table ip nat is created" bash -c '! ip netns exec "$1" nft list table ip nat >/dev/null 2>&1' _ "$NS_NODE"
rig_revoke 10.99.200.200
prop_end

prop_begin "1 internet only on tcp 80/443 and only for allowed containers"
check "allowed ct101 -> internet tcp/80" ok tcp "$NS_A" "$INET" 80 2
check "allowed ct101 -> internet tcp/443" ok tcp "$NS_A" "$INET" 443 2
check "allowed ct101 -> internet tcp/8080" blocked tcp "$NS_A" "$INET" 8080
check "allowed ct101 -> internet tcp/22" blocked tcp "$NS_A" "$INET" 22
check "allowed ct101 -> internet udp/53" blocked udp "$NS_A" "$INET" 53
check "not allowed ct102 -> internet tcp/80" blocked tcp "$NS_B" "$INET" 80
check "not allowed ct102 -> internet tcp/443" blocked tcp "$NS_B" "$INET" 443
check "not allowed ct102 -> internet tcp/22" blocked tcp "$NS_B" "$INET" 22
prop_end

prop_begin "2 revoking an address cuts its established connections"
hold_and_cut revoke 3 "$NS_A" "$INET" 80 rig_revoke "$IP_A"
assert "round trips before the revoke" held_before_cut
assert "no round trip after the revoke" none_after_cut
check "new connection after the revoke" blocked tcp "$NS_A" "$INET" 80
rig_allow "$IP_A"
check "re-allowed: new connection works again" ok tcp "$NS_A" "$INET" 80 2
prop_end

prop_begin "3 container to container is blocked (L2, routed, IPv6 link-local)"
check "ct101 -> ct102 tcp/22 on the bridge" blocked tcp "$NS_A" "$IP_B" 22
check "ct102 -> ct101 tcp/80 on the bridge" blocked tcp "$NS_B" "$IP_A" 80
rig_in "$NS_A" ip route add "$IP_B/32" via 10.99.0.1
rig_in "$NS_A" ip neigh flush dev eth0
check "ct101 -> ct102 tcp/22 routed via the node" blocked tcp "$NS_A" "$IP_B" 22
rig_in "$NS_A" ip route del "$IP_B/32" via 10.99.0.1
ll_b=$(rig_ll "$NS_B" eth0)
check "ct101 -> ct102 link-local [$ll_b]:22" blocked tcp "$NS_A" "$ll_b%eth0" 22
check "ct101 -> ct102 [2001:db8:99::6]:22" blocked tcp "$NS_A" 2001:db8:99::6 22
prop_end

prop_begin "4 containers reach the host only for DHCP and DNS on the bridge address"
check "ct101 -> 10.99.0.1 udp/53" ok udp "$NS_A" 10.99.0.1 53 2
check "ct101 -> 10.99.0.1 tcp/53" ok tcp "$NS_A" 10.99.0.1 53 2
check "ct102 -> 10.99.0.1 udp/53" ok udp "$NS_B" 10.99.0.1 53 2
token="dhcp-$RIG_ID-$BRNF"
rig_probe "$NS_B" dhcp-raw eth0 "$token"
rig_await "$RIG_TMP/log.$NS_NODE" "udp 67 .*$token" 100 || true # the server's log line
check "ct102 DHCP broadcast 0.0.0.0:68 -> 255.255.255.255:67 reaches the host" ok \
	grep -q "udp 67 .*$token" "$RIG_TMP/log.$NS_NODE"
check "ct101 -> 10.99.0.1 tcp/22" blocked tcp "$NS_A" 10.99.0.1 22
check "ct101 -> 10.99.0.1 tcp/8006" blocked tcp "$NS_A" 10.99.0.1 8006
check "ct101 -> 10.99.0.1 udp/161" blocked udp "$NS_A" 10.99.0.1 161
check "ct101 -> host LAN 192.168.50.10 tcp/8006" blocked tcp "$NS_A" 192.168.50.10 8006
check "ct101 -> host LAN 192.168.50.10 tcp/22" blocked tcp "$NS_A" 192.168.50.10 22
check "ct101 -> host LAN 192.168.50.10 udp/53" blocked udp "$NS_A" 192.168.50.10 53
ll_node=$(rig_ll "$NS_NODE" vmbr1)
check "ct101 -> host link-local [$ll_node]:8006" blocked tcp "$NS_A" "$ll_node%eth0" 8006
check "ct101 -> host [2001:db8:99::1]:22" blocked tcp "$NS_A" 2001:db8:99::1 22
prop_end

prop_begin "5 DNS only to the host resolver"
check "allowed ct101 -> outside resolver udp/53" blocked udp "$NS_A" "$RESOLVER" 53
check "allowed ct101 -> outside resolver tcp/53" blocked tcp "$NS_A" "$RESOLVER" 53
check "allowed ct101 -> arbitrary server tcp/53" blocked tcp "$NS_A" "$INET" 53
check "not allowed ct102 -> outside resolver udp/53" blocked udp "$NS_B" "$RESOLVER" 53
check "not allowed ct102 -> outside resolver tcp/53" blocked tcp "$NS_B" "$RESOLVER" 53
check "not allowed ct102 -> arbitrary server tcp/53" blocked tcp "$NS_B" "$INET" 53
check "both: host resolver 10.99.0.1 udp/53 (ct102)" ok udp "$NS_B" 10.99.0.1 53 2
prop_end

prop_begin "6 no private, link-local, metadata or LAN destination even with internet"
for dst in 192.168.50.20 192.168.50.1 169.254.169.254 172.16.5.5 10.20.0.1; do
	check "control: node -> $dst:80 is reachable" ok tcp "$NS_NODE" "$dst" 80 2
	check "allowed ct101 -> $dst:80" blocked tcp "$NS_A" "$dst" 80
done
check "allowed ct101 -> LAN device 192.168.50.20:443" blocked tcp "$NS_A" 192.168.50.20 443
prop_end

prop_begin "7 per-container limit on new connections; a flood does not starve a neighbour"
rig_allow "$IP_B"
sleep 2.5 # let earlier buckets refill
rig_probe "$NS_A" flood "$INET" 80 --n 300 --timeout 1.5 >"$RIG_TMP/flood.out" &
flood_pid=$!
rig_probe "$NS_B" series "$INET" 80 --n 20 --gap 0.05 --timeout 1.5 >"$RIG_TMP/series.out"
wait "$flood_pid" || true
flood=$(cat "$RIG_TMP/flood.out")
series=$(cat "$RIG_TMP/series.out")
echo "    (ct101 flood: $flood/300 connected; ct102 meanwhile: $series/20)"
assert "flooding ct101 was limited (<= 80 of 300)" test "$flood" -le 80
assert "flooding ct101 got its burst (>= 20)" test "$flood" -ge 20
assert "neighbour ct102 was not starved (>= 19 of 20)" test "$series" -ge 19
rig_revoke "$IP_B"
sleep 2.5
prop_end

prop_begin "8 address/MAC spoofing gains nothing (port bindings, ARP included)"
rig_allow 10.99.1.7
rig_in "$NS_B" ip addr add 10.99.1.7/16 dev eth0
check "ct102 as allowed 10.99.1.7 -> internet tcp/80" blocked \
	rig_probe "$NS_B" tcp "$INET" 80 --timeout "$T" --src 10.99.1.7
check "ct102 as 10.99.1.7 -> host DNS tcp/53" blocked \
	rig_probe "$NS_B" tcp 10.99.0.1 53 --timeout "$T" --src 10.99.1.7
assert "node never learned 10.99.1.7 from ARP" \
	bash -c '! ip -n "$1" neigh show 10.99.1.7 | grep -q lladdr' _ "$NS_NODE"
rig_in "$NS_B" ip addr del 10.99.1.7/16 dev eth0
rig_revoke 10.99.1.7
check "control: node -> ct101:22 (fills the node's ARP entry for 10.99.1.5)" ok tcp "$NS_NODE" "$IP_A" 22 2
rig_probe "$NS_B" arp-raw eth0 "$IP_A"
sleep 0.2
assert "gratuitous ARP from ct102 claiming 10.99.1.5 did not poison the node" \
	bash -c '! ip -n "$1" neigh show "$2" | grep -qi "$3"' _ "$NS_NODE" "$IP_A" "$MAC_B"
rig_in "$NS_B" ip addr add "$IP_A/32" dev eth0
check "ct102 using ct101's allowed 10.99.1.5 -> internet tcp/80" blocked \
	rig_probe "$NS_B" tcp "$INET" 80 --timeout "$T" --src "$IP_A"
rig_in "$NS_B" ip addr del "$IP_A/32" dev eth0
rig_in "$NS_A" ip link set eth0 address 02:99:00:00:01:99
check "ct101 with a changed MAC -> internet tcp/80" blocked tcp "$NS_A" "$INET" 80
check "ct101 with a changed MAC -> host DNS udp/53" blocked udp "$NS_A" 10.99.0.1 53
rig_in "$NS_A" ip link set eth0 address "$MAC_A"
rig_in "$NS_NODE" ip neigh flush dev vmbr1
check "control: ct101 with its own MAC -> internet tcp/80" ok tcp "$NS_A" "$INET" 80 2
prop_end

prop_begin "9 IPv6 from containers goes nowhere outside"
check "control: node -> [2001:db8:50::1]:80" ok tcp "$NS_NODE" 2001:db8:50::1 80 2
check "ct101 -> [2001:db8:50::1]:80 (routed IPv6)" blocked tcp "$NS_A" 2001:db8:50::1 80
check "ct101 -> [2001:db8:50::1]:443 (routed IPv6)" blocked tcp "$NS_A" 2001:db8:50::1 443
check "ct101 -> [2001:db8:50::10]:22 (host uplink IPv6)" blocked tcp "$NS_A" 2001:db8:50::10 22
prop_end

prop_begin "10 no new inbound connections into containers; SSH from the node works"
rig_in "$NS_R" ip route add 10.99.0.0/16 via 192.168.50.10
rig_in "$NS_L" ip route add 10.99.0.0/16 via 192.168.50.10
check "internet/router -> allowed ct101:22" blocked tcp "$NS_R" "$IP_A" 22
check "internet/router -> ct102:80" blocked tcp "$NS_R" "$IP_B" 80
check "LAN device -> allowed ct101:22" blocked tcp "$NS_L" "$IP_A" 22
check "LAN device -> ct102:22" blocked tcp "$NS_L" "$IP_B" 22
check "controller host, CONTROLLER_ADDRESSES empty -> ct102:22" blocked tcp "$NS_C" "$IP_B" 22
check "node -> ct101:22 (controller SSH)" ok tcp "$NS_NODE" "$IP_A" 22 2
check "node -> ct102:22 (controller SSH)" ok tcp "$NS_NODE" "$IP_B" 22 2
# A controller on the node itself reaches every port of a container, with no route: its packets
# leave by output, which table inet sandbox does not hook, and the replies are established
# ones in sandbox_to_host (the port proxy's route transport needs no element there).
assert "proxy_routes is empty" \
	bash -c '[[ $(ip netns exec "$1" nft list set inet sandbox proxy_routes) != *elements* ]]' _ "$NS_NODE"
check "node -> ct102:80 (any port, no route: the node's own output)" ok tcp "$NS_NODE" "$IP_B" 80 2
prop_end

prop_begin "11 an unrelated guest on the uplink bridge keeps working"
check "guest -> router 192.168.50.1:80" ok tcp "$NS_G" 192.168.50.1 80 2
check "guest -> internet $INET:80" ok tcp "$NS_G" "$INET" 80 2
check "guest -> LAN device 192.168.50.20:22" ok tcp "$NS_G" 192.168.50.20 22 2
check "LAN device -> guest:80" ok tcp "$NS_L" 192.168.50.30 80 2
check "node -> guest:80" ok tcp "$NS_NODE" 192.168.50.30 80 2
prop_end

prop_begin "extra: sandbox source addresses are refused from outside the sandbox bridge"
rig_in "$NS_L" ip addr add "$IP_A/32" dev eth0
rig_in "$NS_L" ip route add 203.0.113.0/24 via 192.168.50.10
token="spoof-$RIG_ID-$BRNF"
rig_probe "$NS_L" udp "$RESOLVER" 53 --timeout "$T" --src "$IP_A" --token "$token" || true
check "LAN host using ct101's granted address, via the node's NAT, reaches nothing" blocked \
	grep -q "$token" "$RIG_TMP/log.$NS_R"
check "control: the same LAN host with its own address is routed by the node" ok \
	rig_probe "$NS_L" udp "$RESOLVER" 53 --timeout 2 --src 192.168.50.20
rig_in "$NS_L" ip addr del "$IP_A/32" dev eth0
prop_end

prop_begin "extra: a listed controller on another host gets SSH to sandboxes, its routed ports, and nothing else"
# ct101 has internet, ct102 has none; the controller's address is public, so to a sandbox with
# internet it is "the internet" until it is listed.
assert "ct102 holds no grant" bash -c '! ip netns exec "$1" nft get element inet sandbox internet_allowed "{ $2 }" >/dev/null 2>&1' _ "$NS_NODE" "$IP_B"
check "control, list empty: ct101 (internet) -> controller $CTL:443" ok tcp "$NS_A" "$CTL" 443 2
check "control, list empty: ct101 (internet) from port 22 -> controller $CTL:443" ok \
	rig_probe "$NS_A" tcp "$CTL" 443 --timeout 2 --sport 22
assert "reload with CONTROLLER_ADDRESSES=\"$CTL 192.0.2.0/24\"" rig_load_ruleset "$RULESET" "$CTL 192.0.2.0/24"
elements=$(rig_in "$NS_NODE" nft list set inet sandbox controller_addresses 2>&1 || true)
assert "controller_addresses holds the list" bash -c '[[ $1 == *"elements = { 192.0.2.0/24, $2 }"* ]]' _ "$elements" "$CTL"
assert "internet_allowed kept ct101's grant" bash -c '[[ $(ip netns exec "$1" nft list set inet sandbox internet_allowed) == *"$2"* ]]' _ "$NS_NODE" "$IP_A"
check "(a) controller -> ct102:22 (no internet): connect, echo both ways" ok tcp "$NS_C" "$IP_B" 22 2
check "(a) controller -> ct101:22 (internet)" ok tcp "$NS_C" "$IP_A" 22 2
check "(b) controller -> ct102:80" blocked tcp "$NS_C" "$IP_B" 80
check "(b) controller -> ct101:80" blocked tcp "$NS_C" "$IP_A" 80
check "(c) unlisted $CTL_UNLISTED on the controller host -> ct102:22" blocked \
	rig_probe "$NS_C" tcp "$IP_B" 22 --timeout "$T" --src "$CTL_UNLISTED"
check "(c) LAN device -> ct102:22" blocked tcp "$NS_L" "$IP_B" 22
check "(c) controller over IPv6 -> [2001:db8:99::6]:22" blocked tcp "$NS_C" 2001:db8:99::6 22
check "(d) ct102 -> controller $CTL:22" blocked tcp "$NS_B" "$CTL" 22
check "(d) ct101 (internet) -> controller $CTL:443" blocked tcp "$NS_A" "$CTL" 443
check "(d) ct101 (internet) from port 22 -> controller $CTL:443 (not a reply)" blocked \
	rig_probe "$NS_A" tcp "$CTL" 443 --timeout "$T" --sport 22
# The port proxy's routes (proxy_routes, filled by the agent's ROUTE): one container port for
# the listed controller, while the element lives; removing it cuts the open connection.
rig_in "$NS_NODE" nft add element inet sandbox proxy_routes "{ $IP_B . 80 timeout 1m }"
check "(f) controller -> ct102:80, routed" ok tcp "$NS_C" "$IP_B" 80 2
check "(f) controller -> ct101:80, not routed" blocked tcp "$NS_C" "$IP_A" 80
check "(f) unlisted $CTL_UNLISTED -> ct102:80, routed" blocked \
	rig_probe "$NS_C" tcp "$IP_B" 80 --timeout "$T" --src "$CTL_UNLISTED"
check "(f) LAN device -> ct102:80, routed" blocked tcp "$NS_L" "$IP_B" 80
check "(f) ct102 from port 80 -> controller $CTL:443 (not a reply)" blocked \
	rig_probe "$NS_B" tcp "$CTL" 443 --timeout "$T" --sport 80
hold_and_cut route 2.5 "$NS_C" "$IP_B" 80 \
	rig_in "$NS_NODE" nft delete element inet sandbox proxy_routes "{ $IP_B . 80 }"
assert "(f) the routed connection echoed while routed" held_before_cut
assert "(f) removing the route cut the open connection" none_after_cut
check "(f) controller -> ct102:80, route removed" blocked tcp "$NS_C" "$IP_B" 80
hold_and_cut controller 2.5 "$NS_C" "$IP_B" 22 \
	assert "reload with the list empty again" rig_load_ruleset "$RULESET" ""
assert "(a) the open session echoed before the controller was unlisted" held_before_cut
assert "(e) unlisting the controller cut its open session" none_after_cut
assert "(e) controller_addresses is empty again" \
	bash -c '[[ $(ip netns exec "$1" nft list set inet sandbox controller_addresses) != *elements* ]]' _ "$NS_NODE"
check "(e) list empty: controller -> ct102:22" blocked tcp "$NS_C" "$IP_B" 22
check "(e) list empty: ct101 (internet) -> controller $CTL:443 as before" ok tcp "$NS_A" "$CTL" 443 2
prop_end

if [[ $FAILED -eq 0 ]]; then
	echo "ALL PASS $TAG"
else
	echo "FAILED $TAG: $FAILED propert(y/ies)"
	exit 1
fi
