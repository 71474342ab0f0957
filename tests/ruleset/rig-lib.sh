# shellcheck shell=bash
# Network-namespace rig for the sandbox ruleset. Sourced by the ruleset and check tests.
#
#   ns node   : the Proxmox node. vmbr1 = sandbox bridge 10.99.0.1/16 (+ 2001:db8:99::1),
#               vmbr0 = uplink bridge 192.168.50.10/24 (+ 2001:db8:50::10), default via router.
#               Services: tcp 22, 8006, 53; udp 53, 67, 161.
#   ns ct101  : container on port veth101i0, 10.99.1.5, MAC 02:99:00:00:01:01; tcp 22, 80.
#   ns ct102  : container on port veth102i0, 10.99.1.6, MAC 02:99:00:00:01:02; tcp 22, 80.
#   ns router : on vmbr0 as 192.168.50.1; "internet" on its loopback: 203.0.113.10 (tcp 22, 53, 80,
#               443, 8080; udp 53), 203.0.113.53 (resolver, tcp/udp 53), 169.254.169.254,
#               172.16.5.5 and 10.20.0.1 (private), 2001:db8:50::1.
#   ns lan    : LAN device on vmbr0, 192.168.50.20 (tcp 22, 80, 443).
#   ns guest  : an unrelated guest bridged on vmbr0 through port tap200i0, 192.168.50.30 (tcp 80).
#   ns ctl    : only after rig_controller: a controller on another host, on the node's link ctl0
#               (node 198.51.100.1, 2001:db8:51::1): 198.51.100.10 (to be listed) and
#               198.51.100.11 (not), 2001:db8:51::10; routes the sandbox networks via the node.
#               tcp 22, 443.
#
# Every name carries RIG_ID, so parallel rigs never collide. All addresses live only inside
# these namespaces.

RIG_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RIG_PROBE="$RIG_DIR/../../setup/lib/netprobe.py"
# The system interpreter: a version-manager shim on PATH can cost a second per probe.
RIG_PYTHON=${RIG_PYTHON:-/usr/bin/python3}
RIG_ID=${RIG_ID:-pvr$$}
RIG_TMP=""
RIG_PIDS=()
NS_NODE="${RIG_ID}-node"
NS_A="${RIG_ID}-ct101"
NS_B="${RIG_ID}-ct102"
NS_R="${RIG_ID}-router"
NS_L="${RIG_ID}-lan"
NS_G="${RIG_ID}-guest"
NS_C="${RIG_ID}-ctl"
RIG_ALL_NS=("$NS_NODE" "$NS_A" "$NS_B" "$NS_R" "$NS_L" "$NS_G" "$NS_C")
IP_A=10.99.1.5
IP_B=10.99.1.6
MAC_A=02:99:00:00:01:01
MAC_B=02:99:00:00:01:02
PORT_A=veth101i0
PORT_B=veth102i0
INET=203.0.113.10
RESOLVER=203.0.113.53
CTL=198.51.100.10
CTL_UNLISTED=198.51.100.11

rig_in() {
	local ns=$1
	shift
	ip netns exec "$ns" "$@"
}

rig_probe() {
	local ns=$1
	shift
	ip netns exec "$ns" "$RIG_PYTHON" "$RIG_PROBE" "$@"
}

# rig_await FILE PATTERN [TENTHS]: until FILE has a line matching PATTERN (grep), polled every
# 0.1 s for TENTHS tenths of a second at most (200: 20 s); the caller checks what it needs after.
rig_await() {
	local _
	for _ in $(seq 1 "${3:-200}"); do
		grep -q -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

rig_sysctl() {
	ip netns exec "$1" sysctl -qw "$2=$3" >/dev/null
}

rig_down() {
	local pid ns
	for pid in "${RIG_PIDS[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${RIG_PIDS[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	RIG_PIDS=()
	# A server started through a function in the background is a grandchild of this shell: the
	# pids above are its subshells. Whatever still runs in a rig namespace goes by its pid.
	local pids
	for ns in "${RIG_ALL_NS[@]}"; do
		pids=$(ip netns pids "$ns" 2>/dev/null || true)
		if [[ -n $pids ]]; then
			# shellcheck disable=SC2086 # one pid per word
			kill $pids 2>/dev/null || true
			for pid in $pids; do
				for _ in $(seq 1 20); do
					kill -0 "$pid" 2>/dev/null || break
					sleep 0.05
				done
				kill -9 "$pid" 2>/dev/null || true
			done
		fi
		ip netns del "$ns" 2>/dev/null || true
	done
	if [[ -n $RIG_TMP && -d $RIG_TMP ]]; then
		rm -rf "$RIG_TMP"
	fi
}

rig_serve() {
	local ns=$1 tcp=$2 udp=$3
	local ready="$RIG_TMP/ready.$ns"
	rig_probe "$ns" serve --tcp "$tcp" --udp "$udp" --log "$RIG_TMP/log.$ns" --ready "$ready" \
		>/dev/null 2>&1 &
	RIG_PIDS+=($!)
	for _ in $(seq 1 400); do # 20 s at most: only a failure waits that long
		[[ -e $ready ]] && return 0
		sleep 0.05
	done
	echo "rig: server in $ns did not start" >&2
	return 1
}

# rig_port NS_CT PORTNAME BRIDGE IPV4/LEN MAC GW
rig_container() {
	local ns=$1 port=$2 ip=$3 mac=$4 ip6=$5
	ip netns add "$ns"
	rig_sysctl "$ns" net.ipv6.conf.default.accept_dad 0
	rig_sysctl "$ns" net.ipv6.conf.all.accept_dad 0
	ip -n "$NS_NODE" link add "$port" type veth peer name eth0 netns "$ns"
	ip -n "$NS_NODE" link set "$port" master vmbr1 up
	ip -n "$ns" link set lo up
	ip -n "$ns" link set eth0 address "$mac"
	ip -n "$ns" link set eth0 up
	ip -n "$ns" addr add "$ip/16" dev eth0
	ip -n "$ns" -6 addr add "$ip6/64" dev eth0 nodad
	ip -n "$ns" route add default via 10.99.0.1
	ip -n "$ns" -6 route add default via 2001:db8:99::1
}

rig_lan_host() {
	local ns=$1 port=$2 ip=$3
	ip netns add "$ns"
	rig_sysctl "$ns" net.ipv6.conf.default.accept_dad 0
	ip -n "$NS_NODE" link add "$port" type veth peer name eth0 netns "$ns"
	ip -n "$NS_NODE" link set "$port" master vmbr0 up
	ip -n "$ns" link set lo up
	ip -n "$ns" link set eth0 up
	ip -n "$ns" addr add "$ip/24" dev eth0
}

# Namespaces of rigs whose test process is gone (killed by a timeout) and that hold no process.
rig_reap_stale() {
	local ns id
	for ns in $(ip netns list | awk '{print $1}' | grep -E '^pvr[0-9]+-' || true); do
		id=${ns%%-*}
		[[ -d /proc/${id#pvr} ]] && continue
		[[ -z $(ip netns pids "$ns" 2>/dev/null) ]] && ip netns del "$ns" 2>/dev/null || true
	done
}

# rig_up BRNF(0|1)
rig_up() {
	local brnf=$1
	rig_reap_stale
	RIG_TMP=$(mktemp -d "/tmp/${RIG_ID}.XXXXXX")
	ip netns add "$NS_NODE"
	rig_sysctl "$NS_NODE" net.ipv6.conf.default.accept_dad 0
	rig_sysctl "$NS_NODE" net.ipv6.conf.all.accept_dad 0
	rig_sysctl "$NS_NODE" net.ipv4.ip_forward 1
	rig_sysctl "$NS_NODE" net.ipv6.conf.all.forwarding 1
	rig_sysctl "$NS_NODE" net.bridge.bridge-nf-call-iptables "$brnf"
	rig_sysctl "$NS_NODE" net.bridge.bridge-nf-call-ip6tables "$brnf"
	rig_sysctl "$NS_NODE" net.bridge.bridge-nf-call-arptables "$brnf"
	ip -n "$NS_NODE" link set lo up
	ip -n "$NS_NODE" link add vmbr1 address 02:00:0a:63:00:01 type bridge stp_state 0 forward_delay 0
	ip -n "$NS_NODE" link add vmbr0 address 02:00:0a:00:00:01 type bridge stp_state 0 forward_delay 0
	ip -n "$NS_NODE" link set vmbr1 up
	ip -n "$NS_NODE" link set vmbr0 up
	ip -n "$NS_NODE" addr add 10.99.0.1/16 dev vmbr1
	ip -n "$NS_NODE" -6 addr add 2001:db8:99::1/64 dev vmbr1 nodad
	ip -n "$NS_NODE" addr add 192.168.50.10/24 dev vmbr0
	ip -n "$NS_NODE" -6 addr add 2001:db8:50::10/64 dev vmbr0 nodad

	# Upstream router with the "internet" behind it.
	ip netns add "$NS_R"
	rig_sysctl "$NS_R" net.ipv6.conf.default.accept_dad 0
	ip -n "$NS_NODE" link add uplink0 type veth peer name eth0 netns "$NS_R"
	ip -n "$NS_NODE" link set uplink0 master vmbr0 up
	ip -n "$NS_R" link set lo up
	ip -n "$NS_R" link set eth0 up
	ip -n "$NS_R" addr add 192.168.50.1/24 dev eth0
	ip -n "$NS_R" -6 addr add 2001:db8:50::1/64 dev eth0 nodad
	ip -n "$NS_R" -6 route add 2001:db8:99::/64 via 2001:db8:50::10
	local a
	for a in "$INET" "$RESOLVER" 169.254.169.254 172.16.5.5 10.20.0.1; do
		ip -n "$NS_R" addr add "$a/32" dev lo
	done
	ip -n "$NS_NODE" route add default via 192.168.50.1
	ip -n "$NS_NODE" -6 route add default via 2001:db8:50::1

	rig_lan_host "$NS_L" lan0 192.168.50.20
	ip -n "$NS_L" route add default via 192.168.50.1
	rig_lan_host "$NS_G" tap200i0 192.168.50.30
	ip -n "$NS_G" route add default via 192.168.50.1

	rig_container "$NS_A" "$PORT_A" "$IP_A" "$MAC_A" 2001:db8:99::5
	rig_container "$NS_B" "$PORT_B" "$IP_B" "$MAC_B" 2001:db8:99::6

	# Wait for link-local addresses (used by the IPv6 checks).
	for _ in $(seq 1 60); do
		if [[ -z $(ip -n "$NS_NODE" -6 addr show tentative) && -z $(ip -n "$NS_A" -6 addr show tentative) &&
			-z $(ip -n "$NS_B" -6 addr show tentative) ]]; then
			break
		fi
		sleep 0.1
	done

	rig_serve "$NS_NODE" 22,53,8006 53,67,161
	rig_serve "$NS_A" 22,80 ""
	rig_serve "$NS_B" 22,80 ""
	# RIG_ROUTER_TCP/UDP: a test that runs its own DNS server on the router overrides them.
	rig_serve "$NS_R" "${RIG_ROUTER_TCP:-22,53,80,443,8080}" "${RIG_ROUTER_UDP-53}"
	rig_serve "$NS_L" 22,80,443 ""
	rig_serve "$NS_G" 80 ""
}

# rig_controller: the controller on another host (ns ctl, see the top), routed to the node.
rig_controller() {
	ip netns add "$NS_C"
	rig_sysctl "$NS_C" net.ipv6.conf.default.accept_dad 0
	ip -n "$NS_NODE" link add ctl0 type veth peer name eth0 netns "$NS_C"
	ip -n "$NS_NODE" addr add 198.51.100.1/24 dev ctl0
	ip -n "$NS_NODE" -6 addr add 2001:db8:51::1/64 dev ctl0 nodad
	ip -n "$NS_NODE" link set ctl0 up
	ip -n "$NS_C" link set lo up
	ip -n "$NS_C" link set eth0 up
	ip -n "$NS_C" addr add "$CTL/24" dev eth0
	ip -n "$NS_C" addr add "$CTL_UNLISTED/24" dev eth0
	ip -n "$NS_C" -6 addr add 2001:db8:51::10/64 dev eth0 nodad
	ip -n "$NS_C" route add 10.99.0.0/16 via 198.51.100.1
	ip -n "$NS_C" -6 route add 2001:db8:99::/64 via 2001:db8:51::1
	rig_serve "$NS_C" 22,443 ""
}

# Link-local IPv6 address of DEV in NS.
rig_ll() {
	ip -n "$1" -6 -o addr show dev "$2" scope link | awk '{print $4}' | cut -d/ -f1 | head -n1
}

# rig_load_ruleset RULESET_SRC [CONTROLLERS] : renders for the rig's bridge/CIDR (and the
# controller addresses, default none) and loads it into the node.
rig_load_ruleset() {
	local src=$1 controllers=${2:-} scope
	# shellcheck source=../../setup/lib/ruleset.sh
	source "$RIG_DIR/../../setup/lib/ruleset.sh"
	if pvs_kernel_has_ibrname; then scope=bridge; else scope=ports; fi
	export RIG_SCOPE=$scope
	pvs_render_ruleset "$src" vmbr1 10.99.0.0/16 10.99.0.1 "$scope" '{ "veth*", "fwpr*" }' "$controllers" \
		>"$RIG_TMP/sandbox.nft"
	ip netns exec "$NS_NODE" nft -f "$RIG_TMP/sandbox.nft"
}

# rig_agent_up AGENT : starts pve-sandbox-agent in the node (root its only client, socket and
# state under $RIG_TMP) and waits for its socket; fails loudly when it does not come up.
rig_agent_up() {
	mkdir -m 755 "$RIG_TMP/run" "$RIG_TMP/state"
	cat >"$RIG_TMP/agent.yaml" <<CONF
sandbox_cidr: 10.99.0.0/16
socket: $RIG_TMP/run/agent.sock
socket_group: nogroup
allowed_uids: [0]
state_file: $RIG_TMP/state/agent-state
log_level: warn
CONF
	ip netns exec "$NS_NODE" "$1" serve --config "$RIG_TMP/agent.yaml" >>"$RIG_TMP/agent.log" 2>&1 &
	RIG_PIDS+=($!)
	for _ in $(seq 1 400); do
		[[ -S $RIG_TMP/run/agent.sock ]] && return 0
		sleep 0.05
	done
	echo "FAIL: the agent did not start" >&2
	cat "$RIG_TMP/agent.log" >&2
	return 1
}

rig_bind() {
	local port=$1 mac=$2 ip=$3
	rig_in "$NS_NODE" nft add element bridge sandbox_l2 port_mac "{ \"$port\" . $mac }"
	rig_in "$NS_NODE" nft add element bridge sandbox_l2 port_ip4 "{ \"$port\" . $ip }"
}

rig_allow() {
	rig_in "$NS_NODE" nft add element inet sandbox internet_allowed "{ $1 }"
}

rig_revoke() {
	rig_in "$NS_NODE" nft delete element inet sandbox internet_allowed "{ $1 }" 2>/dev/null || true
}
