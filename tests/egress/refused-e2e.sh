#!/bin/bash
# Refused connection attempts (#38) on a real kernel: the ruleset (nftables/sandbox.nft) records
# what egress_out refuses in egress_refused / egress_refused_last, the agent reports it
# (EGRESSREFUSED, STATUS). A listed sandbox connects to an unlisted address:port 3 times -> one
# element counted 3; an allowed pair is never recorded; a source's bound of new destinations
# (the rest in its others) and the reply's bound hold, and another source is unaffected; ICMP
# is recorded with port 0; a source's records and bucket go with its list (#46); full sets still
# refuse. Usage: refused-e2e.sh AGENT_BINARY. Needs
# root, ip, nft, ping, python3.
set -euo pipefail

AGENT=${1:?usage: refused-e2e.sh AGENT}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOOL="$HERE/egress_tool.py"
[[ $(id -u) == 0 ]] || {
	echo "FAIL: needs root (network namespaces)" >&2
	exit 1
}
for tool in nft ip ping python3; do
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
for i in 1 2 3; do check "ct101 -> 203.0.113.21:8080 ($i) fails at once" '^reset 0\.' "$(in_a connect 203.0.113.21 8080)"; done
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

echo "--- a source's bound: 32 new destinations at once, the rest in its others"
ping_b() { rig_in "$NS_B" ping -n -c 1 -W 1 203.0.113.21 >/dev/null 2>&1 || true; }
ping_b
for p in $(seq 9001 9040); do in_b connect 203.0.113.21 "$p" --timeout 0.5 >/dev/null; done
ping_b
# The ICMP destination (port 0) was recorded before the flood, so its second ping counts there
# (a known destination takes no token); the reply's 32 items and one item for the rest, which
# sums ct102's others and anything recorded beyond the reply's bound: 9 either way.
out=$(agent "EGRESSREFUSED $IP_B")
check "EGRESSREFUSED ct102: icmp counted 2, 32 items and the rest" \
	'^OK 33 203\.0\.113\.21:0/1/2/[0-9]+/[0-9]+ .* 0\.0\.0\.0:0/\*/9/[0-9]+/[0-9]+$' "$out"
recorded=$(rig_in "$NS_NODE" nft list set inet sandbox egress_refused | grep -c "$IP_B \. 203\.0\.113\.21 \. tcp" || true)
check "ct102's recorded tcp destinations: its bound (31, one more if its bucket refilled)" '^3[12]$' "$recorded"
check "ct102's others: one element" '^1$' \
	"$(rig_in "$NS_NODE" nft list set inet sandbox egress_refused | grep -c "$IP_B \. 0\.0\.0\.0 \. tcp \. 0" || true)"
check "ct101 -> 203.0.113.21:9100: another source still records" '^reset 0\.' "$(in_a connect 203.0.113.21 9100)"
check "EGRESSREFUSED ct101 has it" '^OK 3 203\.0\.113\.21:9100/tcp/1/' "$(agent "EGRESSREFUSED $IP_A")"
check "STATUS egress_connections_refused" ' egress_connections_refused=47 ' "$(agent STATUS)"

echo "--- the list goes, and so does what the ruleset recorded of it (#46)"
# ct102 spent its bucket above. Its address goes to the next sandbox (the controller reuses
# addresses lowest-free), which must read nothing of ct102's refusals nor inherit its bucket.
of_b() { rig_in "$NS_NODE" nft list set inet sandbox "$1" | grep -oE "(^|[{ ,])${IP_B//./\\.} " | wc -l; }
check "ct102 is in egress_refused_rate before" '^1$' "$(of_b egress_refused_rate)"
check "EGRESS ct102 off" '^OK' "$(agent "EGRESS $IP_B off")"
for set in egress_refused egress_refused_last egress_refused_rate; do
	check "no element of ct102 in $set" '^0$' "$(of_b "$set")"
done
check "ct101's refusals stay" '^OK 3 203\.0\.113\.21:9100/tcp/1/' "$(agent "EGRESSREFUSED $IP_A")"
check "EGRESS on the address again (the next sandbox)" '^OK' "$(agent "EGRESS $IP_B ports=80 names=a.allowed.test")"
check "EGRESSREFUSED: nothing of the last sandbox" '^OK 0$' "$(agent "EGRESSREFUSED $IP_B")"
for p in $(seq 9201 9232); do in_b connect 203.0.113.21 "$p" --timeout 0.5 >/dev/null; done
check "a fresh bucket: 32 new destinations, each recorded, no others" \
	'^OK 32( 203\.0\.113\.21:92[0-3][0-9]/tcp/1/[0-9]+/[0-9]+){32}$' "$(agent "EGRESSREFUSED $IP_B")"

echo "--- full sets record nothing more and still refuse"
for set in egress_refused egress_refused_last; do
	have=$(elements "$set")
	{
		printf 'add element inet sandbox %s {' "$set"
		awk -v n=$((16384 - have)) 'BEGIN { for (i = 1; i <= n; i++)
			printf "%s10.99.9.9 . 11.%d.%d.%d . tcp . 1", (i == 1 ? "" : ","), int(i / 65536), int(i / 256) % 256, i % 256 }'
		echo '}'
	} >"$RIG_TMP/fill-$set.nft"
	rig_in "$NS_NODE" nft -f "$RIG_TMP/fill-$set.nft"
	check "$set full" '^16384$' "$(elements "$set")"
done
check "ct101 -> 203.0.113.21:7000 still fails at once" '^reset 0\.' "$(in_a connect 203.0.113.21 7000)"
check "ct101 -> 203.0.113.21:7000 again" '^reset 0\.' "$(in_a connect 203.0.113.21 7000)"
in_a dns 203.0.113.21 x.test --port 5002 --timeout 0.3 >/dev/null || true
check "ct101 udp -> 203.0.113.21:5002 still refused (4th admin-prohibited: 2 udp, 2 icmp)" 'counter packets 4 .*admin-prohibited' \
	"$(rig_in "$NS_NODE" nft list chain inet sandbox egress_reject)"
check "nothing new recorded for ct101" '^OK 3 203\.0\.113\.21:9100/tcp/1/' "$(agent "EGRESSREFUSED $IP_A")"
check "ct101 -> a.allowed.test:80 (pair) still open" '^open' "$(in_a connect 203.0.113.20 80)"
check "the reject rules counted them" 'reject with tcp reset' \
	"$(rig_in "$NS_NODE" nft list chain inet sandbox egress_reject | grep -E 'counter packets [1-9][0-9]* .*tcp reset')"

echo
if [[ $FAILED -eq 0 ]]; then
	echo "ALL PASS refused e2e"
else
	echo "FAIL refused e2e: $FAILED check(s)"
	tail -n 20 "$RIG_TMP/agent.log"
	exit 1
fi
