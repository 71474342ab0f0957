#!/bin/bash
# Refused connection attempts (#38) on a real kernel: the ruleset (nftables/sandbox.nft) records
# what egress_out refuses in egress_refused / egress_refused_last, the agent reports it
# (EGRESSREFUSED, STATUS). A listed sandbox connects to an unlisted address:port 3 times -> one
# element counted 3; an allowed pair is never recorded; the reply's bound per source holds; full
# sets still refuse. Usage: refused-e2e.sh AGENT_BINARY. Needs root, ip, nft, python3.
set -euo pipefail

AGENT=${1:?usage: refused-e2e.sh AGENT}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOOL="$HERE/egress_tool.py"
[[ $(id -u) == 0 ]] || {
	echo "FAIL: needs root (network namespaces)" >&2
	exit 1
}
for tool in nft ip python3; do
	command -v "$tool" >/dev/null || {
		echo "FAIL: $tool is missing (scripts/install-deps)" >&2
		exit 1
	}
done

export RIG_ROUTER_TCP=80 RIG_ROUTER_UDP=""
# shellcheck source=../ruleset/rig-lib.sh
source "$HERE/../ruleset/rig-lib.sh"
trap rig_down EXIT
trap 'exit 143' TERM INT HUP

FAILED=0
# check DESCRIPTION REGEX VALUE: passes when VALUE matches the extended regex.
check() {
	if [[ $3 =~ $2 ]]; then
		echo "    ok   $1: ${3:0:160}"
	else
		echo "    FAIL $1: wanted /$2/, got '${3:0:300}'"
		FAILED=$((FAILED + 1))
	fi
}
in_a() { rig_in "$NS_A" "$RIG_PYTHON" "$TOOL" "$@" 2>&1 | head -n1; }
in_b() { rig_in "$NS_B" "$RIG_PYTHON" "$TOOL" "$@" 2>&1 | head -n1; }
agent() { rig_in "$NS_NODE" "$RIG_PYTHON" "$TOOL" agent "$RIG_TMP/run/agent.sock" "$*" 2>&1 | head -n1; }
elements() { rig_in "$NS_NODE" nft list set inet sandbox "$1" | grep -o 'expires' | wc -l; }

echo "--- rig"
rig_up 0
rig_load_ruleset "$HERE/../../nftables/sandbox.nft"
rig_bind "$PORT_A" "$MAC_A" "$IP_A"
rig_bind "$PORT_B" "$MAC_B" "$IP_B"
for a in 20 21; do ip -n "$NS_R" addr add "203.0.113.$a/32" dev lo; done
rig_agent_up "$AGENT"
check "EGRESS ct101" '^OK' "$(agent "EGRESS $IP_A ports=80 names=a.allowed.test")"
check "EGRESS ct102" '^OK' "$(agent "EGRESS $IP_B ports=80 names=a.allowed.test")"
check "PAIR ct101 a.allowed.test" '^OK 1' "$(agent "PAIR $IP_A a.allowed.test 203.0.113.20 ttl=3600")"

echo "--- a refused destination, 3 times: one element counted 3"
for i in 1 2 3; do check "ct101 -> 203.0.113.21:8080 ($i) fails at once" '^reset 0\.0' "$(in_a connect 203.0.113.21 8080)"; done
check "EGRESSREFUSED ct101" '^OK 1 203\.0\.113\.21:8080/tcp/3/[0-9]+/[0-9]+$' "$(agent "EGRESSREFUSED $IP_A")"
check "STATUS egress_connections_refused" ' egress_connections_refused=3 ' "$(agent STATUS)"

echo "--- an allowed pair is not recorded"
check "ct101 -> a.allowed.test:80 (pair)" '^open' "$(in_a connect 203.0.113.20 80)"
check "EGRESSREFUSED ct101 unchanged" '^OK 1 203\.0\.113\.21:8080/tcp/3/' "$(agent "EGRESSREFUSED $IP_A")"
check "no element for the pair" '^0$' \
	"$(rig_in "$NS_NODE" nft list set inet sandbox egress_refused | grep -c '203\.0\.113\.20 \. tcp \. 80' || true)"

echo "--- udp: refused (admin-prohibited) and recorded with its port"
in_a dns 203.0.113.21 x.test --port 5000 --timeout 0.3 >/dev/null || true
check "EGRESSREFUSED ct101 has udp 5000" ' 203\.0\.113\.21:5000/udp/1/' "$(agent "EGRESSREFUSED $IP_A")"

echo "--- the reply's bound: 32 destinations, the rest summed"
for p in $(seq 9001 9040); do in_a connect 203.0.113.21 "$p" --timeout 0.5 >/dev/null; done
out=$(agent "EGRESSREFUSED $IP_A")
# The rest: the 8 oldest of them, udp 5000 (1) and tcp 8080 (3).
check "EGRESSREFUSED ct101: 32 items and the rest" '^OK 33 .* 0\.0\.0\.0:0/\*/12/[0-9]+/[0-9]+$' "$out"
check "other sources are not in it" '^OK 0$' "$(agent "EGRESSREFUSED $IP_B")"
check "STATUS egress_connections_refused" ' egress_connections_refused=44 ' "$(agent STATUS)"

echo "--- full sets record nothing more and still refuse"
for set in egress_refused egress_refused_last; do
	have=$(elements "$set")
	{
		printf 'add element inet sandbox %s {' "$set"
		for n in $(seq 1 $((16384 - have))); do
			printf '%s10.99.9.9 . 11.%d.%d.%d . tcp . 1' "$([[ $n == 1 ]] || echo ,)" \
				$((n / 65536)) $(((n / 256) % 256)) $((n % 256))
		done
		echo '}'
	} >"$RIG_TMP/fill-$set.nft"
	rig_in "$NS_NODE" nft -f "$RIG_TMP/fill-$set.nft"
	check "$set full" '^16384$' "$(elements "$set")"
done
check "ct102 -> 203.0.113.21:7000 still fails at once" '^reset 0\.0' "$(in_b connect 203.0.113.21 7000)"
check "ct102 -> 203.0.113.21:7000 again" '^reset 0\.0' "$(in_b connect 203.0.113.21 7000)"
in_b dns 203.0.113.21 x.test --port 5000 --timeout 0.3 >/dev/null || true
check "ct102 udp -> 203.0.113.21:5000 still refused (2nd udp reject)" 'counter packets 2 .*admin-prohibited' \
	"$(rig_in "$NS_NODE" nft list chain inet sandbox egress_refuse)"
check "nothing recorded for ct102" '^OK 0$' "$(agent "EGRESSREFUSED $IP_B")"
check "ct101 -> a.allowed.test:80 (pair) still open" '^open' "$(in_a connect 203.0.113.20 80)"
check "the reject rules counted them" 'reject with tcp reset' \
	"$(rig_in "$NS_NODE" nft list chain inet sandbox egress_refuse | grep -E 'counter packets [1-9][0-9]* .*tcp reset')"

echo
if [[ $FAILED -eq 0 ]]; then
	echo "ALL PASS refused e2e"
else
	echo "FAIL refused e2e: $FAILED check(s)"
	tail -n 20 "$RIG_TMP/agent.log"
	exit 1
fi
