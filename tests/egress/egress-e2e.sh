#!/bin/bash
# Egress by domain (#20) end to end on a real kernel: the ruleset (nftables/sandbox.nft), the
# agent and pve-sandbox-resolver (as nobody) on the rig's node; an authoritative dnsmasq for the
# test zones and echo servers on several "internet" addresses on the router; two sandboxes with
# different lists. Usage: egress-e2e.sh AGENT_BINARY RESOLVER_BINARY [BRNF 0|1]
# Prints one line per check; exits non-zero on any failure. Needs root, ip, nft, dnsmasq, python3.
set -euo pipefail

AGENT=${1:?usage: egress-e2e.sh AGENT RESOLVER}
RESOLVER_BIN=${2:?usage: egress-e2e.sh AGENT RESOLVER}
BRNF=${3:-0} # br_netfilter's bridge-nf-call-* in the rig's node (per namespace)
[[ $BRNF == 0 || $BRNF == 1 ]] || {
	echo "usage: egress-e2e.sh AGENT RESOLVER [0|1]" >&2
	exit 2
}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOOL="$HERE/egress_tool.py"
[[ $(id -u) == 0 ]] || {
	echo "FAIL: needs root (network namespaces)" >&2
	exit 1
}
for tool in dnsmasq nft ip setpriv; do
	command -v "$tool" >/dev/null || {
		echo "FAIL: $tool is missing (scripts/install-deps)" >&2
		exit 1
	}
done

# The router serves tcp only: the test's own dnsmasq takes 203.0.113.53:53.
export RIG_ROUTER_TCP=22,80,443,8080 RIG_ROUTER_UDP=""
# shellcheck source=../ruleset/rig-lib.sh
source "$HERE/../ruleset/rig-lib.sh"
trap rig_down EXIT
trap 'exit 143' TERM INT HUP

FAILED=0
AGENT_PID="" RESOLVER_PID=""

# expect DESCRIPTION WANTED COMMAND...: passes when the command's output starts with WANTED.
expect() {
	local what=$1 want=$2 out
	shift 2
	out=$("$@" 2>&1 | head -n1) || true
	if [[ $out == "$want"* ]]; then
		echo "    ok   $what: $out"
	else
		echo "    FAIL $what: wanted '$want', got '$out'"
		FAILED=$((FAILED + 1))
	fi
}
# no_answer COMMAND...: "no-answer" when a dns probe timed out or failed, else its output.
no_answer() {
	local out
	out=$("$@" 2>&1 | head -n1) || true
	if [[ $out == TIMEOUT* || $out == ERROR* ]]; then echo no-answer; else echo "$out"; fi
}
in_a() { rig_in "$NS_A" "$RIG_PYTHON" "$TOOL" "$@"; }
in_b() { rig_in "$NS_B" "$RIG_PYTHON" "$TOOL" "$@"; }
agent() { rig_in "$NS_NODE" "$RIG_PYTHON" "$TOOL" agent "$RIG_TMP/run/agent.sock" "$*"; }
# Pairs of a source in the kernel.
pairs_of() {
	rig_in "$NS_NODE" nft list set inet sandbox egress_pairs | grep -o "$1 \. [0-9.]* \. [0-9a-z-]*" | wc -l
}

start_agent() {
	# Not through a function: $! must be the agent itself (ip netns exec execs it).
	ip netns exec "$NS_NODE" "$AGENT" serve --config "$RIG_TMP/agent.yaml" >>"$RIG_TMP/agent.log" 2>&1 &
	AGENT_PID=$!
	RIG_PIDS+=("$AGENT_PID")
	for _ in $(seq 1 400); do
		[[ -S $RIG_TMP/run/agent.sock ]] && agent HELLO 1 >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	echo "FAIL: the agent did not start" >&2
	cat "$RIG_TMP/agent.log" >&2
	exit 1
}
stop_agent() {
	kill "$AGENT_PID"
	wait "$AGENT_PID" 2>/dev/null || true
	[[ ! -e $RIG_TMP/run/agent.sock ]] || {
		echo "FAIL: the agent left its socket behind" >&2
		exit 1
	}
}
start_resolver() {
	ip netns exec "$NS_NODE" setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$RESOLVER_BIN" --config "$RIG_TMP/resolver.yaml" >>"$RIG_TMP/resolver.log" 2>&1 &
	RESOLVER_PID=$!
	RIG_PIDS+=("$RESOLVER_PID")
	for _ in $(seq 1 100); do
		rig_in "$NS_NODE" ss -Hlun "sport = :5353" | grep -q 10.99.0.1 && return 0
		sleep 0.05
	done
	echo "FAIL: the resolver did not start" >&2
	cat "$RIG_TMP/resolver.log" >&2
	exit 1
}

echo "--- rig (br_netfilter $BRNF)"
rig_up "$BRNF"
chmod 755 "$RIG_TMP"
mkdir -m 755 "$RIG_TMP/run" "$RIG_TMP/state"
rig_load_ruleset "$HERE/../../nftables/sandbox.nft"
rig_bind "$PORT_A" "$MAC_A" "$IP_A"
rig_bind "$PORT_B" "$MAC_B" "$IP_B"
for a in 20 21 22 23 24 25; do ip -n "$NS_R" addr add "203.0.113.$a/32" dev lo; done
ip -n "$NS_R" addr add 1.1.1.1/32 dev lo
# shellcheck disable=SC2054 # dnsmasq options contain commas
records=(--host-record=a.allowed.test,203.0.113.20,300 --host-record=b.other.test,203.0.113.21,300
	--host-record=x.wild.test,203.0.113.22,300 --host-record=wild.test,203.0.113.23,300
	--host-record=c.target.test,203.0.113.24,300 --cname=www.alias.test,c.target.test,300
	--host-record=short.ttl.test,203.0.113.25,1 --host-record=doh.test,1.1.1.1,300)
for i in $(seq 1 40); do records+=("--host-record=n$i.flood.test,203.0.113.$((100 + i)),300"); done
rig_in "$NS_R" dnsmasq --keep-in-foreground --conf-file=/dev/null --pid-file= --no-resolv --no-hosts \
	--listen-address=203.0.113.53 --bind-interfaces --local=/test/ --log-facility="$RIG_TMP/dnsmasq.log" \
	"${records[@]}" &
RIG_PIDS+=($!)
cat >"$RIG_TMP/agent.yaml" <<CONF
sandbox_cidr: 10.99.0.0/16
socket: $RIG_TMP/run/agent.sock
socket_group: nogroup
allowed_uids: [0]
resolver_uids: [65534]
state_file: $RIG_TMP/state/agent-state
pair_ttl_floor_seconds: 2
max_pairs_per_source: 20
drift_check_ms: 100
log_level: debug
CONF
cat >"$RIG_TMP/resolver.yaml" <<CONF
listen: 10.99.0.1
port: 5353
sandbox_cidr: 10.99.0.0/16
upstreams: ["203.0.113.53"]
agent_socket: $RIG_TMP/run/agent.sock
upstream_timeout_ms: 1000
log_level: debug
egress_log: true
egress_log_window_ms: 3600000
CONF
start_agent
start_resolver
for _ in $(seq 1 50); do
	[[ $(rig_in "$NS_R" "$RIG_PYTHON" "$TOOL" dns 203.0.113.53 a.allowed.test) == NOERROR* ]] && break
	sleep 0.1
done
GW=10.99.0.1

echo "--- lists"
expect "EGRESS ct101" OK agent "EGRESS $IP_A ports=80 names=a.allowed.test,*.wild.test,www.alias.test,short.ttl.test"
expect "EGRESS ct102" OK agent "EGRESS $IP_B ports=80,443 names=b.other.test,*.flood.test"
expect "EGRESSES" "OK 2 $IP_A=80/" agent EGRESSES

echo "--- an allowed name is reachable on its ports, nothing else is"
expect "ct101 resolves a.allowed.test" "NOERROR 203.0.113.20" in_a dns $GW a.allowed.test
expect "ct101 -> a.allowed.test:80" open in_a connect 203.0.113.20 80
expect "ct101 -> a.allowed.test:443 (port not listed) fails at once" "reset 0." in_a connect 203.0.113.20 443
expect "ct101 resolves b.other.test (not listed)" REFUSED in_a dns $GW b.other.test
expect "ct101 -> 203.0.113.21:80 (direct IP) fails at once" "reset 0." in_a connect 203.0.113.21 80
expect "ct101 -> 203.0.113.10:80 (direct IP)" "reset 0." in_a connect 203.0.113.10 80
expect "ct101 TXT a.allowed.test" REFUSED in_a dns $GW a.allowed.test --type TXT
expect "ct101 AAAA a.allowed.test: empty" "NOERROR" in_a dns $GW a.allowed.test --type AAAA
expect "ct101 resolves over TCP" "NOERROR 203.0.113.20" in_a dns $GW a.allowed.test --tcp

echo "--- DNS only through the node's resolver"
expect "ct101 -> 203.0.113.53 udp/53 directly" TIMEOUT in_a dns 203.0.113.53 a.allowed.test --timeout 0.7
expect "ct101 -> 203.0.113.53 tcp/53 directly" timeout in_a connect 203.0.113.53 53 --timeout 0.7
expect "ct101 -> 203.0.113.53 tcp/853 (DoT)" timeout in_a connect 203.0.113.53 853 --timeout 0.7
expect "ct101 -> gateway:5353 without the redirect" TIMEOUT in_a dns $GW a.allowed.test --port 5353 --timeout 0.7
expect "EGRESS ct101 + doh.test (a name of a public DoH resolver)" OK agent "EGRESS $IP_A ports=80,443 names=a.allowed.test,*.wild.test,www.alias.test,short.ttl.test,doh.test"
expect "ct101 doh.test resolves" "NOERROR 1.1.1.1" in_a dns $GW doh.test
expect "ct101 -> 1.1.1.1:443 (DoH resolver, paired) dropped" timeout in_a connect 1.1.1.1 443 --timeout 0.7
expect "EGRESS ct101 back to its list" OK agent "EGRESS $IP_A ports=80 names=a.allowed.test,*.wild.test,www.alias.test,short.ttl.test"

echo "--- wildcard and CNAME"
expect "ct101 x.wild.test" "NOERROR 203.0.113.22" in_a dns $GW x.wild.test
expect "ct101 -> x.wild.test:80" open in_a connect 203.0.113.22 80
expect "ct101 wild.test (apex, not matched by *.wild.test)" REFUSED in_a dns $GW wild.test
expect "ct101 -> 203.0.113.23:80" "reset 0." in_a connect 203.0.113.23 80
expect "ct101 www.alias.test (CNAME to c.target.test)" "NOERROR 203.0.113.24" in_a dns $GW www.alias.test
expect "ct101 -> www.alias.test:80" open in_a connect 203.0.113.24 80
expect "ct101 c.target.test itself" REFUSED in_a dns $GW c.target.test

echo "--- two sandboxes, two lists"
expect "ct102 b.other.test" "NOERROR 203.0.113.21" in_b dns $GW b.other.test
expect "ct102 -> b.other.test:443" open in_b connect 203.0.113.21 443
expect "ct102 a.allowed.test" REFUSED in_b dns $GW a.allowed.test
expect "ct102 -> 203.0.113.20:80 (ct101's pair)" "reset 0." in_b connect 203.0.113.20 80

echo "--- egress log: the resolver's decisions of ct102, kept by the agent (SIGUSR1: flush now)"
kill -USR1 "$RESOLVER_PID"
out=""
for _ in $(seq 1 50); do
	out=$(agent "EGRESSLOG $IP_B" 2>&1 | head -n1) || true
	[[ $out == "OK 2 "* ]] && break
	sleep 0.1
done
log_re='^OK 2 b\.other\.test/allow/1/[0-9]+/b\.other\.test/203\.0\.113\.21 a\.allowed\.test/refuse/1/[0-9]+/-/-$'
if [[ $out =~ $log_re ]]; then
	echo "    ok   EGRESSLOG ct102: $out"
else
	echo "    FAIL EGRESSLOG ct102: got '$out'"
	FAILED=$((FAILED + 1))
fi

echo "--- egress log: an allowed name's addresses at once, its AAAA query first (as getaddrinfo)"
# The resolver answers AAAA empty without going upstream, so that decision comes before the A
# query's; the line must still show the address before the window ends (no SIGUSR1 here).
expect "ct102 AAAA b.other.test: empty" "NOERROR" in_b dns $GW b.other.test --type AAAA
expect "ct102 A b.other.test" "NOERROR 203.0.113.21" in_b dns $GW b.other.test
log_re='^OK 3 .* b\.other\.test/allow/2/[0-9]+/b\.other\.test/203\.0\.113\.21$'
for _ in $(seq 1 50); do
	out=$(agent "EGRESSLOG $IP_B" 2>&1 | head -n1) || true
	[[ $out =~ $log_re ]] && break
	sleep 0.1
done
if [[ $out =~ $log_re ]]; then
	echo "    ok   EGRESSLOG ct102 before the window ends: $out"
else
	echo "    FAIL EGRESSLOG ct102 before the window ends: got '$out'"
	FAILED=$((FAILED + 1))
fi

echo "--- TTL expiry (TTL 1 s, floor 2 s)"
expect "ct101 short.ttl.test" "NOERROR 203.0.113.25" in_a dns $GW short.ttl.test
expect "ct101 -> short.ttl.test:80" open in_a connect 203.0.113.25 80
sleep 3
expect "ct101 -> short.ttl.test:80 after the TTL" "reset 0." in_a connect 203.0.113.25 80

echo "--- list changes at runtime, both ways; narrowing cuts an established flow"
expect "ct101 b.other.test before" REFUSED in_a dns $GW b.other.test
expect "EGRESS ct101 + b.other.test" OK agent "EGRESS $IP_A ports=80 names=a.allowed.test,b.other.test"
expect "ct101 b.other.test after" "NOERROR 203.0.113.21" in_a dns $GW b.other.test
expect "ct101 -> b.other.test:80" open in_a connect 203.0.113.21 80
expect "ct101 x.wild.test after *.wild.test was removed" REFUSED in_a dns $GW x.wild.test
expect "ct101 -> x.wild.test:80 (its pair was cut)" "reset 0." in_a connect 203.0.113.22 80
expect "ct101 a.allowed.test again" "NOERROR 203.0.113.20" in_a dns $GW a.allowed.test
rm -f "$RIG_TMP/flag"
rig_probe "$NS_A" hold 203.0.113.20 80 --duration 3 --flag "$RIG_TMP/flag" >"$RIG_TMP/hold" &
hold_pid=$!
rig_await "$RIG_TMP/hold" echoed || true # its first round trip (the check below says if not)
expect "EGRESS ct101 without a.allowed.test" OK agent "EGRESS $IP_A ports=80 names=b.other.test"
touch "$RIG_TMP/flag"
wait "$hold_pid" || true
expect "established flow to a.allowed.test cut" "before=" grep -o 'before=[1-9][0-9]* after=0$' "$RIG_TMP/hold"
expect "ct101 -> b.other.test:80 still" open in_a connect 203.0.113.21 80

echo "--- on/off/allowlist transitions"
expect "allowlist -> on: ALLOW" OK agent "ALLOW $IP_A"
expect "allowlist -> on: EGRESS off" OK agent "EGRESS $IP_A off"
expect "ct101 (on) -> 203.0.113.10:80" open in_a connect 203.0.113.10 80
expect "on -> allowlist: EGRESS" OK agent "EGRESS $IP_A ports=80 names=a.allowed.test"
expect "on -> allowlist: REVOKE" OK agent "REVOKE $IP_A"
expect "ct101 (allowlist) -> 203.0.113.10:80" "reset 0." in_a connect 203.0.113.10 80
expect "allowlist -> off: EGRESS off" OK agent "EGRESS $IP_A off"
expect "ct101 (off) -> 203.0.113.20:80" timeout in_a connect 203.0.113.20 80 --timeout 0.7
# The rig's node runs an echo server on udp/53: the query comes back unanswered.
expect "ct101 (off) DNS goes to the node's own port 53 again" NOT-A-RESPONSE in_a dns $GW a.allowed.test --timeout 0.7
expect "EGRESS ct101 again" OK agent "EGRESS $IP_A ports=80 names=a.allowed.test"

echo "--- restarts keep enforcement (fail closed)"
expect "ct101 a.allowed.test" "NOERROR 203.0.113.20" in_a dns $GW a.allowed.test
stop_agent
expect "agent down: ct101 -> a.allowed.test:80 (pair in the kernel)" open in_a connect 203.0.113.20 80
expect "agent down: ct101 -> 203.0.113.21:80" "reset 0." in_a connect 203.0.113.21 80
expect "agent down: DNS answers nothing new" SERVFAIL in_a dns $GW b.other.test
start_agent
expect "agent restarted: lists from its journal" "OK 2 $IP_A=80/a.allowed.test $IP_B=80,443/" agent EGRESSES
expect "agent restarted: ct101 -> a.allowed.test:80" open in_a connect 203.0.113.20 80
kill "$RESOLVER_PID"
wait "$RESOLVER_PID" 2>/dev/null || true
expect "resolver down: ct101 DNS gets no answer" no-answer no_answer in_a dns $GW a.allowed.test --timeout 0.7
expect "resolver down: ct101 -> 203.0.113.21:80" "reset 0." in_a connect 203.0.113.21 80
start_resolver
expect "resolver restarted: ct101 a.allowed.test" "NOERROR 203.0.113.20" in_a dns $GW a.allowed.test

echo "--- a flood of queries does not grow the set beyond the source's limit (20 pairs)"
servfail=0
for i in $(seq 1 40); do
	out=$(in_b dns $GW "n$i.flood.test" || true)
	[[ $out == SERVFAIL* ]] && servfail=$((servfail + 1))
done
n=$(pairs_of "$IP_B")
expect "ct102 pairs after 40 names x 2 ports" yes bash -c "[[ $n -le 20 && $n -ge 18 ]] && echo yes || echo 'no ($n)'"
expect "ct102 queries over the limit get SERVFAIL" yes bash -c "[[ $servfail -ge 29 ]] && echo yes || echo 'no ($servfail)'"
# One socket is one conntrack flow (the ruleset's per-flow DNS budget does not see it): the
# resolver's own per-source budget (queries_per_second 100, burst 200) drops the rest, and of
# what it admits the source's slots and queue (8 + 32, #32) take what they can; the others are
# dropped too. At least those 40 are answered, at most the budget.
burst=$(in_b dnsburst $GW not.listed.test --n 600)
burst=${burst#answered=}
expect "ct102 burst of 600 queries from one socket: at most the budget answered" yes \
	bash -c "[[ $burst -ge 40 && $burst -le 320 ]] && echo 'yes ($burst)' || echo 'no ($burst)'"
expect "STATUS counts" "OK" agent STATUS
agent STATUS | tr ' ' '\n' | grep -E '^(egress_sources|pairs)=' | sed 's/^/         /'

echo
if [[ $FAILED -eq 0 ]]; then
	echo "ALL PASS egress e2e"
else
	echo "FAIL egress e2e: $FAILED check(s)"
	echo "--- agent log (tail)"
	tail -n 30 "$RIG_TMP/agent.log"
	echo "--- resolver log (tail)"
	tail -n 30 "$RIG_TMP/resolver.log"
	exit 1
fi
