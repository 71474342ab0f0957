#!/bin/bash
# Resolver fairness benchmark (#32 finding 4), not in ctest (figures in docs/architecture.md
# "Egress by domain"). In the ruleset rig with the agent and pve-sandbox-resolver: ct101 floods
# random names under its listed wildcards at 90 q/s (under the 100 q/s budget; every one a cache
# miss) while ct102 asks its one listed name at 20 q/s; both sources' answer times are printed
# side by side, for two kinds of misses:
#  - slow: *.slow.test is forwarded by the upstream dnsmasq to a server that never answers, so
#    each query holds its slot for upstream_timeout_ms (before #32 four such queries blocked all
#    four workers);
#  - wild: *.wild.test answers every name at once (203.0.113.20), so each query costs ASK, the
#    upstream and a PAIR.
# Usage: resolver_fairness_bench.sh AGENT RESOLVER [seconds=10]   (root)
set -euo pipefail
AGENT=${1:?usage: resolver_fairness_bench.sh AGENT RESOLVER [seconds]}
RESOLVER_BIN=${2:?usage: resolver_fairness_bench.sh AGENT RESOLVER [seconds]}
SECONDS_EACH=${3:-10}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench-lib.sh
source "$HERE/bench-lib.sh"

rig_up 0
chmod 755 "$RIG_TMP"
mkdir -m 755 "$RIG_TMP/run" "$RIG_TMP/state"
rig_load_ruleset "$HERE/../../../nftables/sandbox.nft"
rig_bind "$PORT_A" "$MAC_A" "$IP_A"
rig_bind "$PORT_B" "$MAC_B" "$IP_B"
ip -n "$NS_R" addr add 203.0.113.20/32 dev lo
ip -n "$NS_R" addr add 203.0.113.99/32 dev lo
# A "server" that takes queries and never answers.
ip netns exec "$NS_R" socat -u UDP4-RECV:53,bind=203.0.113.99 /dev/null &
RIG_PIDS+=($!)
ip netns exec "$NS_R" dnsmasq --keep-in-foreground --conf-file=/dev/null --pid-file= --no-resolv \
	--no-hosts --listen-address=203.0.113.53 --bind-interfaces --local=/test/ \
	--host-record=a.allowed.test,203.0.113.20,300 --address=/wild.test/203.0.113.20 \
	--server=/slow.test/203.0.113.99 --dns-forward-max=1000 &
RIG_PIDS+=($!)
cat >"$RIG_TMP/agent.yaml" <<CONF
sandbox_cidr: 10.99.0.0/16
socket: $RIG_TMP/run/agent.sock
socket_group: nogroup
allowed_uids: [0]
resolver_uids: [65534]
state_file: $RIG_TMP/state/agent-state
log_level: warn
CONF
# The packaged defaults but for the addresses, with only keys main's resolver knows too, so the
# same file runs the resolver of main for a comparison.
cat >"$RIG_TMP/resolver.yaml" <<CONF
listen: 10.99.0.1
sandbox_cidr: 10.99.0.0/16
upstreams: ["203.0.113.53"]
agent_socket: $RIG_TMP/run/agent.sock
log_level: error
CONF
ip netns exec "$NS_NODE" "$AGENT" serve --config "$RIG_TMP/agent.yaml" 2>"$RIG_TMP/agent.log" &
RIG_PIDS+=($!)
for _ in $(seq 1 100); do [[ -S $RIG_TMP/run/agent.sock ]] && break; sleep 0.05; done
ip netns exec "$NS_NODE" setpriv --reuid=65534 --regid=65534 --clear-groups "$RESOLVER_BIN" \
	--config "$RIG_TMP/resolver.yaml" 2>"$RIG_TMP/resolver.log" &
RIG_PIDS+=($!)
sleep 0.5
agent "EGRESS $IP_A ports=80 names=*.slow.test,*.wild.test" >/dev/null
agent "EGRESS $IP_B ports=80 names=a.allowed.test" >/dev/null
GW=10.99.0.1

paced() { rig_in "$1" "$RIG_PYTHON" "$TOOL" dnspaced "$GW" "${@:2}" --seconds "$SECONDS_EACH"; }
for kind in slow wild; do
	echo "--- $kind misses: ct101 floods random names under $kind.test at 90 q/s, ct102 asks a.allowed.test at 20 q/s, ${SECONDS_EACH} s"
	paced "$NS_A" --random-under "$kind.test" --rate 90 >"$RIG_TMP/flood.out" &
	flood=$!
	sleep 1
	victim=$(paced "$NS_B" a.allowed.test --rate 20)
	wait "$flood"
	echo "ct101 (flooding) $(cat "$RIG_TMP/flood.out")"
	echo "ct102 (other)    $victim"
	sleep 3 # the slow queries time out before the next round
done
echo "--- alone: ct102 asks a.allowed.test at 20 q/s"
echo "ct102 (alone)    $(paced "$NS_B" a.allowed.test --rate 20)"
