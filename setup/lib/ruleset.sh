# shellcheck shell=bash
# Rendering of nftables/sandbox.nft for one site. Sourced by pve-sandbox-setup,
# pve-sandbox-check and the ruleset tests.

# pvs_ip4_int A.B.C.D -> the address as an integer (fails unless it is one, without leading zeros).
pvs_ip4_int() {
	local o n=0
	[[ $1 =~ ^(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})$ ]] || return 1
	for o in "${BASH_REMATCH[@]:1}"; do
		((o <= 255)) || return 1
		n=$((n << 8 | o))
	done
	printf '%s\n' "$n"
}

# pvs_controller_list LIST CIDR
#   LIST: setup.conf's CONTROLLER_ADDRESSES, the controllers on other hosts that may open SSH
#   (tcp 22) to sandboxes through the node: IPv4 addresses or a.b.c.d/len prefixes separated by
#   spaces (commas are tolerated). CIDR: the sandbox network, which no entry may overlap.
# Prints the entries one per line, canonical (a.b.c.d for a /32, else a.b.c.d/len); nothing for
# an empty list. Anything else is refused: the reason on stderr, return 2.
pvs_controller_list() {
	local cidr=$2 e a len n m lo hi i
	local -a items=() out=() los=() his=() names=()
	local refuse="CONTROLLER_ADDRESSES:"
	read -ra items <<<"${1//[,$'\n']/ }"
	# The sandbox network first: no entry may overlap it.
	len=${cidr#*/}
	if ! n=$(pvs_ip4_int "${cidr%/*}") || [[ $cidr != */* || ! $len =~ ^[0-9]{1,2}$ ]] || ((len > 32)); then
		echo "$refuse cannot check against the sandbox CIDR '$cidr'" >&2
		return 2
	fi
	m=$(((0xffffffff << (32 - len)) & 0xffffffff))
	los=("$((n & m))") his=("$(((n & m) | (~m & 0xffffffff)))") names=("the sandbox network ($cidr)")
	for e in "${items[@]}"; do
		a=${e%/*} len=32
		[[ $e == */* ]] && len=${e#*/}
		if ! n=$(pvs_ip4_int "$a") || [[ ! $len =~ ^(0|[1-9][0-9]?)$ ]] || ((len > 32)); then
			echo "$refuse '$e' is not an IPv4 address or a.b.c.d/len prefix (expected e.g. \"192.0.2.10 198.51.100.0/24\")" >&2
			return 2
		fi
		if ((len < 8)); then
			echo "$refuse '$e' is too broad (a prefix must be /8 or longer): list the controllers' own addresses" >&2
			return 2
		fi
		if ((n >> 24 == 0 || n >> 24 == 127 || n >> 24 >= 224)); then
			echo "$refuse '$e' is not a unicast host address (0/8, 127/8, multicast and reserved are refused)" >&2
			return 2
		fi
		m=$(((0xffffffff << (32 - len)) & 0xffffffff))
		lo=$((n & m)) hi=$(((n & m) | (~m & 0xffffffff)))
		if ((lo != n)); then
			echo "$refuse '$e' has host bits set (the network is $((lo >> 24)).$((lo >> 16 & 255)).$((lo >> 8 & 255)).$((lo & 255))/$len)" >&2
			return 2
		fi
		for i in "${!los[@]}"; do
			if ((lo == los[i] && hi == his[i] && i > 0)); then
				echo "$refuse '$e' is listed twice" >&2
				return 2
			elif ((lo <= his[i] && los[i] <= hi)); then
				echo "$refuse '$e' overlaps ${names[i]}" >&2
				return 2
			fi
		done
		los+=("$lo") his+=("$hi") names+=("'$e'")
		if ((len == 32)); then out+=("$a"); else out+=("$a/$len"); fi
	done
	if ((${#out[@]} > 0)); then printf '%s\n' "${out[@]}"; fi
	return 0
}

# pvs_set_elements < `nft -j list set ...`: the set's elements one per line, as nft prints them
# (a.b.c.d, a.b.c.d/len, a.b.c.d-e.f.g.h).
pvs_set_elements() {
	jq -r '.nftables[] | .set? // empty | .elem[]? | if type == "string" then .
		elif .prefix then "\(.prefix.addr)/\(.prefix.len)" elif .range then "\(.range[0])-\(.range[1])"
		else tostring end'
}

# pvs_render_ruleset SRC BRIDGE CIDR GW SCOPE PORTS [CONTROLLERS [RESOLVER_PORT]]
#   SCOPE: "bridge" (meta ibrname, needs CONFIG_NFT_BRIDGE_META, Proxmox kernels have it)
#          or "ports" (match bridge ports by name pattern, see docs).
#   PORTS: nft set of port-name patterns, e.g. '{ "veth*", "fwpr*" }' (scope "ports" only).
#   CONTROLLERS: CONTROLLER_ADDRESSES (see pvs_controller_list); empty by default.
#   RESOLVER_PORT: the egress resolver's port on GW (1-65535, not 53); default 5353.
# Writes the rendered ruleset to stdout.
pvs_render_ruleset() {
	local src=$1 bridge=$2 cidr=$3 gw=$4 scope=$5 ports=$6 controllers=${7:-} resolver_port=${8:-5353}
	if ! [[ $resolver_port =~ ^[1-9][0-9]{0,4}$ ]] || ((resolver_port > 65535 || resolver_port == 53)); then
		echo "pvs_render_ruleset: bad RESOLVER_PORT '$resolver_port' (1-65535, not 53)" >&2
		return 2
	fi
	case $scope in
	bridge | ports) ;;
	*)
		echo "pvs_render_ruleset: scope must be bridge or ports, not '$scope'" >&2
		return 2
		;;
	esac
	[[ $bridge =~ ^[A-Za-z0-9_.-]{1,15}$ ]] || {
		echo "pvs_render_ruleset: bad bridge name '$bridge'" >&2
		return 2
	}
	[[ $cidr =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}/[0-9]{1,2}$ ]] || {
		echo "pvs_render_ruleset: bad CIDR '$cidr'" >&2
		return 2
	}
	[[ $gw =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] || {
		echo "pvs_render_ruleset: bad gateway '$gw'" >&2
		return 2
	}
	[[ $ports =~ ^\{[\ \"A-Za-z0-9_.*,-]+\}$ ]] || {
		echo "pvs_render_ruleset: bad port pattern set '$ports'" >&2
		return 2
	}
	local elements
	elements=$(pvs_controller_list "$controllers" "$cidr") || return 2
	local scope_sed=() controller_sed=()
	if [[ $scope == ports ]]; then
		scope_sed=(-e 's/^\(\t*\)\(.*\) # pvs-scope:bridge$/\1#pvs-scope:bridge \2/'
			-e 's/^\(\t*\)#pvs-scope:ports /\1/')
	fi
	# An empty list leaves the element line commented out (nft has no empty element list).
	if [[ -n $elements ]]; then
		elements=$(paste -sd, <<<"$elements")
		controller_sed=(-e "s|^#pvs-controllers \(add element inet sandbox controller_addresses\) { CONTROLLER_ADDRESSES }\$|\1 { ${elements//,/, } }|")
	fi
	sed -e "s|^define SANDBOX_BRIDGE = .*|define SANDBOX_BRIDGE = \"$bridge\"|" \
		-e "s|^define SANDBOX_CIDR = .*|define SANDBOX_CIDR = $cidr|" \
		-e "s|^define SANDBOX_GW = .*|define SANDBOX_GW = $gw|" \
		-e "s|^define SANDBOX_PORTS = .*|define SANDBOX_PORTS = $ports|" \
		-e "s|^define RESOLVER_PORT = .*|define RESOLVER_PORT = $resolver_port|" \
		"${scope_sed[@]}" "${controller_sed[@]}" "$src"
}

# pvs_kernel_has_ibrname: 0 if this kernel accepts `meta ibrname` in the bridge family.
# Probes in a throw-away network namespace, so the node's ruleset is never touched.
pvs_kernel_has_ibrname() {
	local ns="pvs-probe-$$-$RANDOM" rc=0
	ip netns add "$ns" || return 2
	printf 'table bridge probe {\n\tchain p {\n\t\ttype filter hook prerouting priority 0; policy accept;\n\t\tmeta ibrname "probe0" counter\n\t}\n}\n' |
		ip netns exec "$ns" nft -f - 2>/dev/null || rc=1
	ip netns del "$ns"
	return "$rc"
}
