#!/bin/bash
# Egress by domain (#20) benchmark, not in ctest (docs/architecture.md "Egress by domain" has the
# figures). In the ruleset rig with the agent and pve-sandbox-resolver:
#  1. resolver overhead: p50/p99 of A queries from a listed sandbox through the resolver (ASK,
#     upstream, PAIR, answer) vs the same queries from the node straight to the upstream
#     (dnsmasq), in alternating rounds;
#  2. forwarded throughput of one TCP stream (socat, 1 GiB) from a sandbox in allowlist mode with
#     10,000 pairs in egress_pairs vs the same sandbox with internet on, alternating rounds.
# Usage: egress_bench.sh AGENT RESOLVER [rounds=3]   (root)
set -euo pipefail
usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; }
for a in "$@"; do
	case $a in
	-h | --help) usage; exit 0 ;;
	-*) echo "egress_bench.sh: unknown option $a" >&2; usage >&2; exit 2 ;;
	esac
done
if [[ $# -lt 2 || $# -gt 3 || ! ${3:-3} =~ ^[1-9][0-9]*$ ]]; then
	echo "egress_bench.sh: expected AGENT RESOLVER [rounds]" >&2
	usage >&2
	exit 2
fi
AGENT=$1
RESOLVER_BIN=$2
ROUNDS=${3:-3}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench-lib.sh
source "$HERE/bench-lib.sh"

rig_up 0
chmod 755 "$RIG_TMP"
mkdir -m 755 "$RIG_TMP/run" "$RIG_TMP/state"
rig_load_ruleset "$HERE/../../../nftables/sandbox.nft"
rig_bind "$PORT_A" "$MAC_A" "$IP_A"
ip -n "$NS_R" addr add 203.0.113.20/32 dev lo
ip netns exec "$NS_R" dnsmasq --keep-in-foreground --conf-file=/dev/null --pid-file= --no-resolv \
	--no-hosts --listen-address=203.0.113.53 --bind-interfaces --local=/test/ \
	--host-record=a.allowed.test,203.0.113.20,300 &
RIG_PIDS+=($!)
ip netns exec "$NS_R" socat -u -b 262144 TCP-LISTEN:80,reuseaddr,fork /dev/null &
RIG_PIDS+=($!)
cat >"$RIG_TMP/agent.yaml" <<CONF
sandbox_cidr: 10.99.0.0/16
socket: $RIG_TMP/run/agent.sock
socket_group: nogroup
allowed_uids: [0]
resolver_uids: [65534]
state_file: $RIG_TMP/state/agent-state
max_pairs_per_source: 20000
log_level: warn
CONF
cat >"$RIG_TMP/resolver.yaml" <<CONF
listen: 10.99.0.1
sandbox_cidr: 10.99.0.0/16
upstreams: ["203.0.113.53"]
agent_socket: $RIG_TMP/run/agent.sock
queries_per_second: 0
log_level: warn
CONF
ip netns exec "$NS_NODE" "$AGENT" serve --config "$RIG_TMP/agent.yaml" 2>"$RIG_TMP/agent.log" &
RIG_PIDS+=($!)
for _ in $(seq 1 100); do [[ -S $RIG_TMP/run/agent.sock ]] && break; sleep 0.05; done
ip netns exec "$NS_NODE" setpriv --reuid=65534 --regid=65534 --clear-groups "$RESOLVER_BIN" \
	--config "$RIG_TMP/resolver.yaml" 2>"$RIG_TMP/resolver.log" &
RIG_PIDS+=($!)
sleep 0.5
agent "EGRESS $IP_A ports=80 names=a.allowed.test" >/dev/null
GW=10.99.0.1

median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
echo "--- resolver overhead per query (A, 300 queries a round, $ROUNDS rounds)"
overheads=()
for r in $(seq 1 "$ROUNDS"); do
	via=$(rig_in "$NS_A" "$RIG_PYTHON" "$TOOL" dnsbench $GW a.allowed.test --n 300)
	direct=$(rig_in "$NS_NODE" "$RIG_PYTHON" "$TOOL" dnsbench 203.0.113.53 a.allowed.test --n 300)
	echo "round $r: via resolver $via | upstream direct $direct"
	via50=${via#p50_us=}
	via50=${via50%% *}
	dir50=${direct#p50_us=}
	dir50=${dir50%% *}
	echo "round $r: p50 overhead $((via50 - dir50)) us, ratio $(awk -v a="$via50" -v b="$dir50" 'BEGIN{printf "%.2f", a/b}')x"
	overheads+=($((via50 - dir50)))
done
echo "median p50 overhead: $(printf '%s\n' "${overheads[@]}" | median) us per query"

echo "--- forwarded throughput, 1 GiB over one TCP stream ($ROUNDS rounds)"
# 10,000 pairs for ct101: 157 PAIR requests of 64 destinations (11.0.0.0/8), plus the target.
{
	for i in $(seq 0 156); do
		dsts=""
		for j in $(seq 0 63); do
			n=$((i * 64 + j))
			dsts+="${dsts:+,}11.$((n / 65536)).$(((n / 256) % 256)).$((n % 256))"
		done
		echo "PAIR $IP_A a.allowed.test $dsts ttl=3600"
	done
} >"$RIG_TMP/pairs"
rig_in "$NS_NODE" socat -t 30 - "UNIX-CONNECT:$RIG_TMP/run/agent.sock" <"$RIG_TMP/pairs" | grep -vc '^OK' || true
rig_in "$NS_A" "$RIG_PYTHON" "$TOOL" dns $GW a.allowed.test >/dev/null
echo "pairs in the set: $(rig_in "$NS_NODE" nft list set inet sandbox egress_pairs | grep -o ' \. 80' | wc -l)"
transfer() {
	local start end
	start=$(date +%s.%N)
	rig_in "$NS_A" bash -c "head -c 1073741824 /dev/zero | socat -u -b 262144 - TCP:203.0.113.20:80"
	end=$(date +%s.%N)
	awk -v s="$start" -v e="$end" 'BEGIN{printf "%.0f", 8 * 1073741824 / (e - s) / 1e6}'
}
ratios=()
for r in $(seq 1 "$ROUNDS"); do
	agent "EGRESS $IP_A ports=80 names=a.allowed.test" >/dev/null
	agent "REVOKE $IP_A" >/dev/null
	listed=$(transfer)
	agent "ALLOW $IP_A" >/dev/null
	agent "EGRESS $IP_A off" >/dev/null
	on=$(transfer)
	ratio=$(awk -v a="$listed" -v b="$on" 'BEGIN{printf "%.2f", a/b}')
	ratios+=("$ratio")
	echo "round $r: allowlist with 10,000 pairs ${listed} Mbit/s | internet on ${on} Mbit/s | ratio $ratio"
	# Back to allowlist mode: EGRESS off cut the pairs, so put them back.
	agent "EGRESS $IP_A ports=80 names=a.allowed.test" >/dev/null
	rig_in "$NS_NODE" socat -t 30 - "UNIX-CONNECT:$RIG_TMP/run/agent.sock" <"$RIG_TMP/pairs" >/dev/null
	rig_in "$NS_A" "$RIG_PYTHON" "$TOOL" dns $GW a.allowed.test >/dev/null
done
echo "median throughput ratio (allowlist with 10,000 pairs / internet on): $(printf '%s\n' "${ratios[@]}" | median)"
