# shellcheck shell=bash
# Rendering of nftables/sandbox.nft for one site. Sourced by pve-sandbox-setup,
# pve-sandbox-check and the ruleset tests.

# pvs_render_ruleset SRC BRIDGE CIDR GW SCOPE PORTS
#   SCOPE: "bridge" (meta ibrname, needs CONFIG_NFT_BRIDGE_META, Proxmox kernels have it)
#          or "ports" (match bridge ports by name pattern, see docs).
#   PORTS: nft set of port-name patterns, e.g. '{ "veth*", "fwpr*" }' (scope "ports" only).
# Writes the rendered ruleset to stdout.
pvs_render_ruleset() {
	local src=$1 bridge=$2 cidr=$3 gw=$4 scope=$5 ports=$6
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
	local scope_sed=()
	if [[ $scope == ports ]]; then
		scope_sed=(-e 's/^\(\t*\)\(.*\) # pvs-scope:bridge$/\1#pvs-scope:bridge \2/'
			-e 's/^\(\t*\)#pvs-scope:ports /\1/')
	fi
	sed -e "s|^define SANDBOX_BRIDGE = .*|define SANDBOX_BRIDGE = \"$bridge\"|" \
		-e "s|^define SANDBOX_CIDR = .*|define SANDBOX_CIDR = $cidr|" \
		-e "s|^define SANDBOX_GW = .*|define SANDBOX_GW = $gw|" \
		-e "s|^define SANDBOX_PORTS = .*|define SANDBOX_PORTS = $ports|" \
		"${scope_sed[@]}" "$src"
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
