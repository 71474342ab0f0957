#!/bin/bash
# Refused-connection counting (#38) benchmark, not in ctest (docs/agent.md "Refused connections"
# has the figures). In the ruleset rig with the agent: forwarded throughput of one TCP stream
# (socat, 1 GiB) from a sandbox in allowlist mode over an allowed pair, with the recording rules
# of chain egress_refuse on (as shipped, egress_refused holding 10,000 elements) vs off (the chain
# reduced to the two reject rules), alternating rounds in the same run; prints both and the ratio.
# Usage: refused_bench.sh AGENT [rounds=5]   (root)
set -euo pipefail
usage() { sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; }
for a in "$@"; do
	case $a in
	-h | --help) usage; exit 0 ;;
	-*) echo "refused_bench.sh: unknown option $a" >&2; usage >&2; exit 2 ;;
	esac
done
if [[ $# -lt 1 || $# -gt 2 || ! ${2:-5} =~ ^[1-9][0-9]*$ ]]; then
	echo "refused_bench.sh: expected AGENT [rounds]" >&2
	usage >&2
	exit 2
fi
AGENT=$1
ROUNDS=${2:-5}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench-lib.sh
source "$HERE/bench-lib.sh"

rig_up 0
rig_load_ruleset "$HERE/../../../nftables/sandbox.nft"
rig_bind "$PORT_A" "$MAC_A" "$IP_A"
ip -n "$NS_R" addr add 203.0.113.20/32 dev lo
ip netns exec "$NS_R" socat -u -b 262144 TCP-LISTEN:80,reuseaddr,fork /dev/null &
RIG_PIDS+=($!)
rig_agent_up "$AGENT"
sleep 0.2
agent "EGRESS $IP_A ports=80 names=a.allowed.test" >/dev/null
agent "PAIR $IP_A a.allowed.test 203.0.113.20 ttl=3600" >/dev/null
# 10,000 recorded refusals of another source, as a busy node would hold.
{
	printf 'add element inet sandbox egress_refused {'
	for n in $(seq 1 10000); do
		printf '%s10.99.9.9 . 11.%d.%d.%d . tcp . 443' "$([[ $n == 1 ]] || echo ,)" \
			$((n / 65536)) $(((n / 256) % 256)) $((n % 256))
	done
	echo '}'
} >"$RIG_TMP/fill.nft"
rig_in "$NS_NODE" nft -f "$RIG_TMP/fill.nft"
rig_in "$NS_NODE" nft list chain inet sandbox egress_refuse | grep -E '^\s+(meta|counter|update|goto)' >"$RIG_TMP/rules.on"
recording() {
	rig_in "$NS_NODE" nft flush chain inet sandbox egress_refuse
	if [[ $1 == on ]]; then
		sed -E 's/counter packets [0-9]+ bytes [0-9]+/counter/; s/^\s+/add rule inet sandbox egress_refuse /' \
			"$RIG_TMP/rules.on" >"$RIG_TMP/rules.nft"
	else
		printf '%s\n' 'add rule inet sandbox egress_refuse meta l4proto tcp counter reject with tcp reset' \
			'add rule inet sandbox egress_refuse counter reject with icmpx type admin-prohibited' >"$RIG_TMP/rules.nft"
	fi
	rig_in "$NS_NODE" nft -f "$RIG_TMP/rules.nft"
}
# Refusals are still refused and recorded only when on.
refused_probe() { rig_in "$NS_A" "$RIG_PYTHON" "$TOOL" connect 203.0.113.20 "$1" | cut -d' ' -f1; }
recording off
echo "off: 203.0.113.20:81 $(refused_probe 81), recorded $(agent "EGRESSREFUSED $IP_A")"
recording on
echo "on:  203.0.113.20:82 $(refused_probe 82), recorded $(agent "EGRESSREFUSED $IP_A")"

transfer() {
	local start end
	start=$(date +%s.%N)
	rig_in "$NS_A" bash -c "head -c 1073741824 /dev/zero | socat -u -b 262144 - TCP:203.0.113.20:80"
	end=$(date +%s.%N)
	awk -v s="$start" -v e="$end" 'BEGIN{printf "%.0f", 8 * 1073741824 / (e - s) / 1e6}'
}
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
echo "--- forwarded throughput of an allowed pair, 1 GiB over one TCP stream ($ROUNDS rounds)"
ratios=()
for r in $(seq 1 "$ROUNDS"); do
	recording on
	on=$(transfer)
	recording off
	off=$(transfer)
	ratio=$(awk -v a="$on" -v b="$off" 'BEGIN{printf "%.2f", a/b}')
	ratios+=("$ratio")
	echo "round $r: recording on ${on} Mbit/s | off ${off} Mbit/s | ratio $ratio"
done
echo "median throughput ratio (recording on / off): $(printf '%s\n' "${ratios[@]}" | median)"
