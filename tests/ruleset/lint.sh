#!/bin/bash
# Static checks: the ruleset renders and passes `nft -c` in both scopes (in a throw-away
# namespace), bad parameters are refused, the controller addresses render, reload and are
# compared the way pve-sandbox-check does, and every shell script of nftables/, setup/ and the
# rigs is shellcheck clean.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT="$HERE/../.."
# shellcheck source=../../setup/lib/ruleset.sh
source "$ROOT/setup/lib/ruleset.sh"
FAILED=0
ok() { echo "PASS $1"; }
bad() {
	echo "FAIL $1"
	FAILED=$((FAILED + 1))
}
NS="pvs-lint-$$"
TMP=$(mktemp -d)
cleanup() {
	ip netns del "$NS" 2>/dev/null || true
	rm -rf "$TMP"
}
trap cleanup EXIT
ip netns add "$NS"

pvs_render_ruleset "$ROOT/nftables/sandbox.nft" vmbr7 10.42.0.0/16 10.42.0.1 ports '{ "veth*", "fwpr*" }' >"$TMP/ports.nft"
if ip netns exec "$NS" nft -c -f "$TMP/ports.nft"; then ok "nft -c: rendered ruleset (ports scope)"; else bad "nft -c: rendered ruleset (ports scope)"; fi
if grep -q 'define SANDBOX_BRIDGE = "vmbr7"' "$TMP/ports.nft" && grep -q 'define SANDBOX_CIDR = 10.42.0.0/16' "$TMP/ports.nft" &&
	grep -q 'define SANDBOX_GW = 10.42.0.1' "$TMP/ports.nft"; then
	ok "render: defines filled in"
else
	bad "render: defines filled in"
fi
if grep -q '^[[:space:]]*iifname \$SANDBOX_PORTS jump from_port' "$TMP/ports.nft" && ! grep -q '^[[:space:]]*meta ibrname' "$TMP/ports.nft"; then
	ok "render: ports scope selected"
else
	bad "render: ports scope selected"
fi
pvs_render_ruleset "$ROOT/nftables/sandbox.nft" vmbr7 10.42.0.0/16 10.42.0.1 bridge '{ "veth*" }' >"$TMP/bridge.nft"
if grep -q '^[[:space:]]*meta ibrname \$SANDBOX_BRIDGE jump from_port' "$TMP/bridge.nft" && ! grep -q '^[[:space:]]*iifname \$SANDBOX_PORTS' "$TMP/bridge.nft"; then
	ok "render: bridge scope selected"
else
	bad "render: bridge scope selected"
fi
if pvs_kernel_has_ibrname; then
	if ip netns exec "$NS" nft -c -f "$TMP/bridge.nft"; then ok "nft -c: bridge scope"; else bad "nft -c: bridge scope"; fi
else
	echo "PASS nft -c: bridge scope not checkable, this kernel lacks meta ibrname (ports scope is used here)"
fi
for args in 'vmbr1;10.99.0.0/16;10.99.0.1;nonsense' 'vm br1;10.99.0.0/16;10.99.0.1;ports' \
	'vmbr1;10.99.0.0;10.99.0.1;ports' 'vmbr1;10.99.0.0/16;x;ports'; do
	IFS=';' read -r b c g s <<<"$args"
	if pvs_render_ruleset "$ROOT/nftables/sandbox.nft" "$b" "$c" "$g" "$s" '{ "veth*" }' >/dev/null 2>&1; then
		bad "render refuses bad parameters ($args)"
	else
		ok "render refuses bad parameters ($args)"
	fi
done
if pvs_render_ruleset "$ROOT/nftables/sandbox.nft" vmbr1 10.99.0.0/16 10.99.0.1 ports '{ "veth*" }; flush ruleset' >/dev/null 2>&1; then
	bad "render refuses an injected port set"
else
	ok "render refuses an injected port set"
fi
# The one set the file owns (its elements come from setup.conf) is the only one it flushes.
if grep -E '^[[:space:]]*flush[[:space:]]+(ruleset|set|table)' "$ROOT/nftables/sandbox.nft" |
	grep -vqx 'flush set inet sandbox controller_addresses'; then
	bad "ruleset never flushes the ruleset, a table or a set but its own controller_addresses"
else
	ok "ruleset never flushes the ruleset, a table or a set but its own controller_addresses"
fi

# CONTROLLER_ADDRESSES: rendered as the elements of controller_addresses, empty by default.
if grep -qx '#pvs-controllers add element inet sandbox controller_addresses { CONTROLLER_ADDRESSES }' "$TMP/ports.nft"; then
	ok "render: no controller addresses by default (element line commented out)"
else
	bad "render: no controller addresses by default (element line commented out)"
fi
pvs_render_ruleset "$ROOT/nftables/sandbox.nft" vmbr7 10.42.0.0/16 10.42.0.1 ports '{ "veth*" }' \
	"192.0.2.10  198.51.100.0/24,203.0.113.7/32" >"$TMP/ctl.nft"
if grep -qx 'add element inet sandbox controller_addresses { 192.0.2.10, 198.51.100.0/24, 203.0.113.7 }' "$TMP/ctl.nft" &&
	ip netns exec "$NS" nft -c -f "$TMP/ctl.nft"; then
	ok "render: controller addresses filled in, nft -c clean"
else
	bad "render: controller addresses filled in, nft -c clean"
fi
for list in 'x' '192.0.2.1;flush ruleset' '192.0.2.1 }' '192.0.2.300' '192.0.2.1/33' '192.0.2.5/24' '0.0.0.0/0' \
	'10.42.7.0/24' '10.0.0.0/8' '192.0.2.1 192.0.2.1' '192.0.2.0/24 192.0.2.9' '127.0.0.1' '224.0.0.1' '2001:db8::1' '*'; do
	if err=$(pvs_render_ruleset "$ROOT/nftables/sandbox.nft" vmbr7 10.42.0.0/16 10.42.0.1 ports '{ "veth*" }' "$list" 2>&1 >/dev/null); then
		bad "render refuses CONTROLLER_ADDRESSES='$list'"
	elif [[ $err != CONTROLLER_ADDRESSES:* ]]; then
		bad "render refuses CONTROLLER_ADDRESSES='$list' with a message naming the key (got: $err)"
	else
		ok "render refuses CONTROLLER_ADDRESSES='$list': ${err#CONTROLLER_ADDRESSES: }"
	fi
done
# Loaded for real: a reload rewrites the file's own elements (none again when the list empties)
# and keeps the agent's; pvs_set_elements reads them back as pve-sandbox-check compares them.
elements_of() { ip netns exec "$NS" nft -j list set inet sandbox "$1" | pvs_set_elements | sort | paste -sd' '; }
ip netns exec "$NS" nft -f "$TMP/ctl.nft"
ip netns exec "$NS" nft add element inet sandbox internet_allowed '{ 10.42.1.5 }'
got1=$(elements_of controller_addresses)
pvs_render_ruleset "$ROOT/nftables/sandbox.nft" vmbr7 10.42.0.0/16 10.42.0.1 ports '{ "veth*" }' "192.0.2.11" >"$TMP/ctl2.nft"
ip netns exec "$NS" nft -f "$TMP/ctl2.nft"
got2=$(elements_of controller_addresses)
ip netns exec "$NS" nft -f "$TMP/ports.nft"
got3=$(elements_of controller_addresses) kept=$(elements_of internet_allowed)
if [[ $got1 == "192.0.2.10 198.51.100.0/24 203.0.113.7" && $got2 == 192.0.2.11 && -z $got3 && $kept == 10.42.1.5 ]]; then
	ok "reload: controller_addresses rewritten each time ($got1 | $got2 | none), internet_allowed kept ($kept)"
else
	bad "reload: controller_addresses rewritten each time (got '$got1' | '$got2' | '$got3'), internet_allowed kept (got '$kept')"
fi

mapfile -t scripts < <(
	find "$ROOT/setup" "$ROOT/tests/ruleset" "$ROOT/tests/setup" "$ROOT/tests/egress" "$ROOT/tests/bench/egress" -type f \( -name '*.sh' -o -name 'pve-sandbox-*' -o -name 'stub-*' \) 2>/dev/null | sort
)
if shellcheck -x -S warning "${scripts[@]}"; then
	ok "shellcheck -S warning (${#scripts[@]} scripts)"
else
	bad "shellcheck -S warning"
fi
[[ $FAILED -eq 0 ]] || exit 1
echo "ALL PASS lint"
