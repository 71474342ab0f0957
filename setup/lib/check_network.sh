# shellcheck shell=bash
# pve-sandbox-check's network items: egress, isolation, the resolver. Sourced by pve-sandbox-check, whose executors (node, ct,
# probe, reach, ...), record and CONF these functions use.
# shellcheck disable=SC2154  # the sourcing script's variables

# ---- network items -------------------------------------------------------------------------------
# Egress by domain (docs/agent.md "The egress resolver"): configured = resolver.yaml exists.
check_egress_resolver() {
	local id=network.egress-resolver title="egress resolver serves listed sandboxes"
	local conf=$PVS_ROOT/etc/pve-sandbox/resolver.yaml port=${CONF[RESOLVER_PORT]} gw=${CONF[GATEWAY]}
	if [[ $MODE == rig ]]; then
		record SKIP "$id" "$title" "rig mode: covered by the egress_e2e test (tests/egress)"
		return
	fi
	if [[ ! -f $conf ]]; then
		record SKIP "$id" "$title" "not configured (no /etc/pve-sandbox/resolver.yaml): sandboxes have internet on or off only"
		return
	fi
	local problems=() state uid listening
	state=$(systemctl is-active pve-sandbox-resolver.service 2>/dev/null || true)
	[[ $state == active ]] || problems+=("pve-sandbox-resolver.service is ${state:-unknown}")
	listening=$(ss -Hlnu "sport = :$port" 2>/dev/null; ss -Hlnt "sport = :$port" 2>/dev/null)
	grep -q "$gw:$port" <<<"$listening" || problems+=("nothing listens on $gw:$port (setup.conf RESOLVER_PORT; resolver.yaml listen/port)")
	grep -Eq "^port:[[:space:]]*$port([[:space:]]|$)" "$conf" || problems+=("resolver.yaml port is not RESOLVER_PORT $port")
	uid=$(id -u pve-sandbox-resolver 2>/dev/null || true)
	if [[ -z $uid ]]; then
		problems+=("no user pve-sandbox-resolver")
	elif ! grep -Eq "^resolver_uids:.*[^0-9]$uid([^0-9]|$)" "$PVS_ROOT/etc/pve-sandbox/agent.yaml" 2>/dev/null; then
		problems+=("agent.yaml resolver_uids does not list pve-sandbox-resolver ($uid): every ASK/PAIR is refused")
	fi
	# The resolver's limits against its unit (TasksMax, LimitNOFILE) and the agent's max_clients.
	local limits args=() f
	for f in "$PVS_ROOT"/{lib,usr/lib,etc}/systemd/system/pve-sandbox-resolver.service \
		"$PVS_ROOT"/etc/systemd/system/pve-sandbox-resolver.service.d/*.conf; do
		[[ -f $f ]] && args+=(--unit "$f")
	done
	[[ -r $PVS_ROOT/etc/pve-sandbox/agent.yaml ]] && args+=(--agent-config "$PVS_ROOT/etc/pve-sandbox/agent.yaml")
	if command -v pve-sandbox-resolver >/dev/null &&
		! limits=$(pve-sandbox-resolver --config "$conf" check-config "${args[@]}" 2>&1); then
		problems+=("pve-sandbox-resolver check-config: ${limits##*ERROR }")
	fi
	if ((${#problems[@]} == 0)); then
		record PASS "$id" "$title" "active, udp+tcp on $gw:$port, uid $uid in resolver_uids"
	else
		record FAIL "$id" "$title" "$(join_by '; ' "${problems[@]}")"
	fi
}

check_network() {
	local b=${CONF[BRIDGE]} gw=${CONF[GATEWAY]} inet=${CONF[CHECK_INTERNET]} res=${CONF[CHECK_RESOLVER]}
	local ports phys=""
	ports=$(node ip -o link show master "$b" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | tr '\n' ' ')
	for p in $ports; do [[ $p =~ ^(veth|fwpr|tap) ]] || phys+=" $p"; done
	if ! node ip link show "$b" >/dev/null 2>&1; then
		record FAIL network.bridge-no-ports "sandbox bridge has no physical port" "bridge $b does not exist"
	elif [[ -n $phys ]]; then
		record FAIL network.bridge-no-ports "sandbox bridge has no physical port" "non-guest ports on $b:$phys"
	else
		record PASS network.bridge-no-ports "sandbox bridge has no physical port" "ports of $b: ${ports:-none}"
	fi

	local t l2 missing=""
	t=$(node nft list table inet sandbox 2>/dev/null || true)
	l2=$(node nft list table bridge sandbox_l2 2>/dev/null || true)
	grep -q 'set internet_allowed' <<<"$t" || missing+=" inet sandbox/internet_allowed"
	grep -q 'flags timeout' <<<"$t" || missing+=" internet_allowed:flags-timeout"
	grep -q 'set egress_listed' <<<"$t" || missing+=" inet sandbox/egress_listed"
	grep -q 'set egress_pairs' <<<"$t" || missing+=" inet sandbox/egress_pairs"
	grep -q 'set proxy_routes' <<<"$t" || missing+=" inet sandbox/proxy_routes"
	grep -q 'hook forward' <<<"$t" || missing+=" forward-chain"
	grep -q 'hook input' <<<"$t" || missing+=" input-chain"
	grep -q 'set port_mac' <<<"$l2" || missing+=" bridge sandbox_l2/port_mac"
	grep -q 'set port_ip4' <<<"$l2" || missing+=" bridge sandbox_l2/port_ip4"
	# The controller addresses loaded must be setup.conf's CONTROLLER_ADDRESSES.
	local want have="" wrong=""
	want=$(pvs_controller_list "${CONF[CONTROLLER_ADDRESSES]}" "${CONF[SANDBOX_CIDR]}" | sort | paste -sd' ')
	if grep -q 'set controller_addresses' <<<"$t"; then
		have=$(node nft -j list set inet sandbox controller_addresses 2>/dev/null | pvs_set_elements | sort | paste -sd' ')
		[[ $have == "$want" ]] ||
			wrong="set controller_addresses holds '${have:-nothing}', CONTROLLER_ADDRESSES says '${want:-nothing}' (run pve-sandbox-setup ruleset)"
	else
		missing+=" inet sandbox/controller_addresses"
	fi
	if [[ -z $missing && -z $wrong ]]; then
		record PASS network.ruleset-loaded "ruleset loaded" "table inet sandbox ($(grep -c 'chain ' <<<"$t") chains) and table bridge sandbox_l2 present; controller addresses: ${want:-none}"
	else
		record FAIL network.ruleset-loaded "ruleset loaded" "${missing:+missing:$missing}${missing:+${wrong:+; }}$wrong"
	fi
	if [[ $MODE == rig ]]; then
		record SKIP network.ruleset-persistent "ruleset loaded at boot" "rig mode: no systemd"
	else
		local en
		en=$(systemctl is-enabled pve-sandbox-nftables.service 2>/dev/null || true)
		if [[ $en == enabled && -f /etc/pve-sandbox/sandbox.nft ]] && nft -c -f /etc/pve-sandbox/sandbox.nft >/dev/null 2>&1; then
			record PASS network.ruleset-persistent "ruleset loaded at boot" "pve-sandbox-nftables.service enabled; /etc/pve-sandbox/sandbox.nft passes nft -c"
		else
			record FAIL network.ruleset-persistent "ruleset loaded at boot" "unit: ${en:-missing}; file: $([[ -f /etc/pve-sandbox/sandbox.nft ]] && echo present || echo missing)"
		fi
	fi
	check_egress_resolver
	local fwd
	fwd=$(node cat /proc/sys/net/ipv4/ip_forward)
	[[ $fwd == 1 ]] && record PASS network.ip-forward "node routes for the bridge" "net.ipv4.ip_forward=1" ||
		record FAIL network.ip-forward "node routes for the bridge" "net.ipv4.ip_forward=$fwd (sandboxes with internet cannot reach it)"

	read -r IP1 MAC1 < <(ct_addr 1)
	read -r IP2 MAC2 < <(ct_addr 2)
	if [[ -z $IP1 || -z $IP2 ]]; then
		record FAIL network.containers "test containers have addresses" "ct1=${IP1:-none} ct2=${IP2:-none}"
		return 0
	fi
	bind_port "$PORT1" "$MAC1" "$IP1"
	bind_port "$PORT2" "$MAC2" "$IP2"
	revoke "$IP1"
	revoke "$IP2"

	# Default deny, then allow.
	local r80 r443 r22 r8080
	r80=$(reach 1 tcp "$inet" 80) r443=$(reach 1 tcp "$inet" 443)
	[[ $r80 == blocked && $r443 == blocked ]] &&
		record PASS network.default-deny "no internet without a grant" "ct $IP1 -> $inet:80 $r80, :443 $r443" ||
		record FAIL network.default-deny "no internet without a grant" "ct $IP1 -> $inet:80 $r80, :443 $r443"
	allow "$IP1"
	r80=$(reach 1 tcp "$inet" 80 3) r443=$(reach 1 tcp "$inet" 443 3) r22=$(reach 1 tcp "$inet" 22) r8080=$(reach 1 tcp "$inet" 8080)
	[[ $r80 == open && $r443 == open && $r22 == blocked && $r8080 == blocked ]] &&
		record PASS network.internet-allowed "a grant opens tcp 80/443 and nothing else" "ct $IP1 granted -> :80 $r80, :443 $r443, :22 $r22, :8080 $r8080" ||
		record FAIL network.internet-allowed "a grant opens tcp 80/443 and nothing else" "ct $IP1 granted -> :80 $r80, :443 $r443, :22 $r22, :8080 $r8080"

	# Revocation cuts an open connection.
	local flag hold
	flag=$(mktemp -u /tmp/pvs-check-flag.XXXXXX)
	if [[ $MODE == rig ]]; then
		probe 1 hold "$inet" 80 --flag "$flag" --duration 3 >"$flag.out" 2>/dev/null &
		local hp=$! _
		for _ in $(seq 1 200); do
			grep -q echoed "$flag.out" 2>/dev/null && break
			sleep 0.1
		done
		revoke "$IP1"
		touch "$flag"
		wait "$hp" || true
		hold=$(tail -n1 "$flag.out")
		rm -f "$flag" "$flag.out"
		[[ $hold =~ before=([1-9][0-9]*)\ after=0 ]] &&
			record PASS network.revoke-cuts "revoking cuts established connections" "echo round trips $hold" ||
			record FAIL network.revoke-cuts "revoking cuts established connections" "echo round trips $hold"
	else
		record SKIP network.revoke-cuts "revoking cuts established connections" "needs an echo server outside; covered by the rig tests (tests/ruleset)"
		revoke "$IP1"
	fi

	# DNS: only the node's resolver, with and without a grant.
	local dh dr1 dr2 dt
	dh=$(reach 2 udp "$gw" 53 2)
	dr2=$(reach 2 udp "$res" 53)
	allow "$IP1"
	dr1=$(reach 1 udp "$res" 53) dt=$(reach 1 tcp "$res" 53)
	[[ $dh == open && $dr1 == blocked && $dr2 == blocked && $dt == blocked ]] &&
		record PASS network.dns-host-only "DNS only to the node's resolver" "$gw:53/udp $dh; $res:53 udp granted $dr1, tcp granted $dt, udp not granted $dr2" ||
		record FAIL network.dns-host-only "DNS only to the node's resolver" "$gw:53/udp $dh; $res:53 udp granted $dr1, tcp granted $dt, udp not granted $dr2"

	# Host services.
	local lanip ev="" bad=0 port dst r
	lanip=$(node ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')
	for dst in "$gw" ${lanip:+"$lanip"}; do
		for port in 22 8006 3128 111; do
			r=$(reach 1 tcp "$dst" "$port")
			ev+="$dst:$port $r, "
			[[ $r == blocked ]] || bad=1
		done
	done
	[[ $bad == 0 ]] && record PASS network.host-services "containers reach no node service but DHCP/DNS" "${ev%, }" ||
		record FAIL network.host-services "containers reach no node service but DHCP/DNS" "${ev%, }"

	# Private, link-local, metadata destinations with a grant.
	ev="" bad=0
	for dst in 169.254.169.254 ${CONF[CHECK_LAN]:+"${CONF[CHECK_LAN]}"} ${lanip:+"$lanip"}; do
		r=$(reach 1 tcp "$dst" 80)
		ev+="$dst:80 $r, "
		[[ $r == blocked ]] || bad=1
	done
	[[ $bad == 0 ]] && record PASS network.private-destinations "no LAN/private/metadata even with internet" "granted ct: ${ev%, }" ||
		record FAIL network.private-destinations "no LAN/private/metadata even with internet" "granted ct: ${ev%, }"

	# IPv6.
	local ll6 r6a r6b="n/a"
	ll6=$(node ip -6 -o addr show dev "$b" scope link 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | head -n1)
	r6a=blocked
	[[ -n $ll6 ]] && r6a=$(reach 1 tcp "$ll6%eth0" 22)
	[[ -n ${CONF[CHECK_INTERNET6]} ]] && r6b=$(reach 1 tcp "${CONF[CHECK_INTERNET6]}" 80)
	[[ $r6a == blocked && $r6b != open ]] &&
		record PASS network.ipv6 "IPv6 from containers goes nowhere" "node link-local ${ll6:-none}:22 $r6a; ${CONF[CHECK_INTERNET6]:-no v6 target}:80 $r6b" ||
		record FAIL network.ipv6 "IPv6 from containers goes nowhere" "node link-local ${ll6:-none}:22 $r6a; ${CONF[CHECK_INTERNET6]:-no v6 target}:80 $r6b"

	# Inbound: the node reaches the containers' sshd; the LAN does not.
	local ns1 rl="n/a"
	ns1=$(reach node tcp "$IP1" 22 3)
	if [[ -n $LAN_NS ]]; then rl=$(reach lan tcp "$IP1" 22); fi
	[[ $ns1 == open && $rl != open ]] &&
		record PASS network.inbound "only the node opens connections to containers" "node -> $IP1:22 $ns1; LAN -> $IP1:22 $rl" ||
		record FAIL network.inbound "only the node opens connections to containers" "node -> $IP1:22 $ns1; LAN -> $IP1:22 $rl"

	# Cross-container.
	local xl xr xh
	xl=$(reach 1 tcp "$IP2" 22)
	ct 1 ip route add "$IP2/32" via "$gw" >/dev/null 2>&1 || true
	xr=$(reach 1 tcp "$IP2" 22)
	ct 1 ip route del "$IP2/32" via "$gw" >/dev/null 2>&1 || true
	xh=$(reach 2 tcp "$IP1" 22)
	[[ $xl == blocked && $xr == blocked && $xh == blocked ]] &&
		record PASS network.cross-container "containers cannot reach each other" "ct1 -> ct2:22 on the bridge $xl, routed via node $xr; ct2 -> ct1:22 $xh" ||
		record FAIL network.cross-container "containers cannot reach each other" "ct1 -> ct2:22 on the bridge $xl, routed via node $xr; ct2 -> ct1:22 $xh"

	# Spoofing: ct2 (no grant) takes ct1's granted address; ct1 changes its MAC.
	local sp1 sp2
	ct 2 ip addr add "$IP1/32" dev eth0
	sp1=$(if probe 2 tcp "$inet" 80 --timeout 1 --src "$IP1" >/dev/null 2>&1; then echo open; else echo blocked; fi)
	ct 2 ip addr del "$IP1/32" dev eth0
	ct 1 ip link set eth0 address 02:00:5e:00:53:99
	sp2=$(reach 1 tcp "$inet" 80)
	ct 1 ip link set eth0 address "$MAC1"
	node ip neigh flush dev "$b" >/dev/null 2>&1 || true
	[[ $sp1 == blocked && $sp2 == blocked ]] &&
		record PASS network.spoofing "a taken address or MAC gains nothing" "ct2 as $IP1 -> $inet:80 $sp1; ct1 with another MAC -> $inet:80 $sp2" ||
		record FAIL network.spoofing "a taken address or MAC gains nothing" "ct2 as $IP1 -> $inet:80 $sp1; ct1 with another MAC -> $inet:80 $sp2"

	# Rate limit: a flood of new connections to the node's resolver is cut to the per-container
	# budget; the neighbour still gets its queries through.
	local fl nb
	sleep 2
	probe 1 flood "$gw" 53 --n 400 --timeout 1.5 >"/tmp/pvs-check-flood.$$" 2>/dev/null &
	local fp=$!
	nb=$(probe 2 series "$gw" 53 --n 10 --gap 0.05 --timeout 1.5 2>/dev/null || echo 0)
	wait "$fp" || true
	fl=$(cat "/tmp/pvs-check-flood.$$" 2>/dev/null || echo 0)
	rm -f "/tmp/pvs-check-flood.$$"
	[[ $fl -le 250 && $nb -ge 9 ]] &&
		record PASS network.rate-limit "per-container limit on new connections" "flood: $fl/400 connections to $gw:53 accepted; neighbour meanwhile $nb/10" ||
		record FAIL network.rate-limit "per-container limit on new connections" "flood: $fl/400 connections to $gw:53 accepted; neighbour meanwhile $nb/10"

	# Network scan: from a granted container, the node and its LAN address show only DNS.
	sleep 2
	local open=""
	for dst in "$gw" ${lanip:+"$lanip"}; do
		for port in 21 22 23 25 53 80 111 139 443 445 3128 5900 8006 8080; do
			[[ $(reach 1 tcp "$dst" "$port" 0.5) == open ]] && open+=" $dst:$port"
		done
	done
	[[ $open == " $gw:53" ]] &&
		record PASS network.scan "a port scan from a container finds only DNS" "open: $gw:53 (14 ports on $gw${lanip:+ and $lanip} scanned)" ||
		record FAIL network.scan "a port scan from a container finds only DNS" "open:${open:- none}"
	revoke "$IP1"
}
