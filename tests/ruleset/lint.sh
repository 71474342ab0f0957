#!/bin/bash
# Static checks: the ruleset renders and passes `nft -c` in both scopes (in a throw-away
# namespace), bad parameters are refused, and every shell script of nftables/, setup/ and the
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
if grep -Eq '^[[:space:]]*flush[[:space:]]+(ruleset|set|table)' "$ROOT/nftables/sandbox.nft"; then
	bad "ruleset never flushes the ruleset, a table or a set"
else
	ok "ruleset never flushes the ruleset, a table or a set"
fi

mapfile -t scripts < <(
	find "$ROOT/setup" "$ROOT/tests/ruleset" "$ROOT/tests/setup" -type f \( -name '*.sh' -o -name 'pve-sandbox-*' -o -name 'stub-*' \) 2>/dev/null | sort
)
if shellcheck -x -S warning "${scripts[@]}"; then
	ok "shellcheck -S warning (${#scripts[@]} scripts)"
else
	bad "shellcheck -S warning"
fi
[[ $FAILED -eq 0 ]] || exit 1
echo "ALL PASS lint"
