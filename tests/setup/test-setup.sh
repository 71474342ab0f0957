#!/bin/bash
# Runs setup/pve-sandbox-setup against stub pvesh/pveum/pct/pveam/systemctl/ifreload/sysctl/
# apt-get/dpkg-query/nft (tests/setup/pvestub.py) in a scratch root, and asserts on the recorded
# calls, the files written, --dry-run and idempotency. One PASS/FAIL line per check.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SETUP="$HERE/../../setup/pve-sandbox-setup"
T=$(mktemp -d /tmp/pvs-setup-test.XXXXXX)
DNSMASQ_PID=""
stop_dnsmasq() {
	if [[ -n $DNSMASQ_PID ]]; then
		kill "$DNSMASQ_PID" 2>/dev/null || true
		wait "$DNSMASQ_PID" 2>/dev/null || true
		DNSMASQ_PID=""
	fi
}
# Throwaway accounts standing in for the controller, agent and relay users (section 6c).
ACCOUNTS=()
drop_accounts() {
	local u
	for u in "${ACCOUNTS[@]}"; do userdel "$u" 2>/dev/null || true; done
	groupdel "pvsck$$s" 2>/dev/null || true
}
trap 'stop_dnsmasq; drop_accounts; rm -rf "$T"' EXIT
FAILED=0
pass() { echo "PASS $1"; }
fail() {
	echo "FAIL $1"
	FAILED=$((FAILED + 1))
}
check() { # check NAME COMMAND...
	local name=$1
	shift
	if "$@"; then pass "$name"; else fail "$name"; fi
}

mkdir -p "$T/bin"
for tool in pvesh pveum pct pveam systemctl ifreload sysctl apt-get dpkg-query nft; do
	ln -s "$HERE/pvestub.py" "$T/bin/$tool"
done
export PATH="$T/bin:$PATH"

# fresh_host NAME: a new scratch root, stub state and call log.
fresh_host() {
	export PVS_ROOT="$T/$1/root" STUB_STATE="$T/$1/state" STUB_LOG="$T/$1/calls.log"
	mkdir -p "$PVS_ROOT/etc/network" "$STUB_STATE"
	: >"$STUB_LOG"
	cat >"$PVS_ROOT/etc/network/interfaces" <<'IF'
auto lo
iface lo inet loopback

auto vmbr0
iface vmbr0 inet static
	address 192.168.50.10/24
	gateway 192.168.50.1
	bridge-ports eno1
	bridge-stp off
	bridge-fd 0
IF
	CONFIG="$T/$1/setup.conf"
	cat >"$CONFIG" <<'CONF'
# test site
NODE=pve1
POOL=sandbox-pool
BRIDGE=vmbr1
SANDBOX_CIDR=10.99.0.0/16
GATEWAY="10.99.0.1"
RULESET_SCOPE=ports
SSH_KEY=/etc/pve-sandbox/ssh/id_ed25519
TOKEN_FILE=/etc/pve-sandbox/proxmox-token
CONF
}

setup() { "$SETUP" --config "$CONFIG" "$@"; }
calls() { cat "$STUB_LOG"; }
# Mutating calls = anything but the read-only queries.
mutations() {
	grep -Ev '^(pvesh get |pct config |pveam (list|available) |systemctl is-(enabled|active) |dpkg-query |nft -c )' "$STUB_LOG" || true
}
has_call() { grep -Fxq -- "$1" "$STUB_LOG"; }
has_call_re() { grep -Eq -- "$1" "$STUB_LOG"; }
line_of() { grep -Fn -- "$1" "$STUB_LOG" | head -n1 | cut -d: -f1; }
before() { # before A B: first call matching A comes before first call matching B
	local a b
	a=$(line_of "$1")
	b=$(line_of "$2")
	[[ -n $a && -n $b && $a -lt $b ]]
}
file_has() { grep -Eq -- "$2" "$PVS_ROOT$1"; }
mode_of() { stat -c %a "$PVS_ROOT$1"; }

# ---- 1. --dry-run on a fresh host changes nothing and prints every change -----------------------
fresh_host dry
out=$(setup --dry-run all 2>&1) && rc=0 || rc=$?
check "dry-run: exits 0" test "$rc" = 0
check "dry-run: no mutating stub call" test -z "$(mutations)"
check "dry-run: no file written" test -z "$(find "$PVS_ROOT" -type f ! -path '*/etc/network/interfaces')"
for want in "would run: pvesh create /pools --poolid sandbox-pool" "would run: pveum role add PVESandbox" \
	"would run: pveum user add pve-sandbox@pve" "would run: pveum user token add pve-sandbox@pve controller --privsep 1" \
	"would run: pveum acl modify /pool/sandbox-pool --users pve-sandbox@pve --roles PVESandbox" \
	"would run: ifreload -a" "would write: /etc/network/interfaces.d/pve-sandbox-vmbr1" \
	"would write: /etc/dnsmasq.d/pve-sandbox.conf" "would write: /etc/pve-sandbox/sandbox.nft" \
	"would run: install -d -m 0755 /run/pve-sandbox/dhcp-hosts" \
	"would run: systemctl enable pve-sandbox-nftables.service" "would run: pct create 9000" \
	"would run: pct template 9000" "would run: ssh-keygen -q -t ed25519"; do
	check "dry-run prints: $want" grep -Fq -- "$want" <<<"$out"
done

# ---- 2. all on a fresh host ---------------------------------------------------------------------
fresh_host real
out=$(setup all 2>&1) && rc=0 || rc=$?
echo "$out" >"$T/real.out"
check "all: exits 0" test "$rc" = 0
check "pool: created" has_call "pvesh create /pools --poolid sandbox-pool --comment 'pve-sandbox containers'"
privs="Pool.Audit,VM.Allocate,VM.Audit,VM.Clone,VM.Config.CPU,VM.Config.Disk,VM.Config.Memory,VM.Config.Network,VM.Config.Options,VM.PowerMgmt,VM.Snapshot,VM.Snapshot.Rollback"
check "role: least-privilege set" has_call "pveum role add PVESandbox --privs $privs"
check "role: nothing beyond the pool's guests (no Sys./Permissions./Console/Pool.Allocate)" \
	bash -c '! grep -E "^pveum role .*(Sys\.|Permissions\.|VM\.Console|VM\.Monitor|Pool\.Allocate|Datastore\.Allocate[^S]|Realm|User\.)" "$1"' _ "$STUB_LOG"
check "user: created" has_call "pveum user add pve-sandbox@pve --comment 'pve-sandbox controller'"
check "token: privilege-separated" has_call "pveum user token add pve-sandbox@pve controller --privsep 1 --comment 'pve-sandbox controller' --output-format json"
for acl in "/pool/sandbox-pool PVESandbox" "/storage/local-lvm PVEDatastoreUser" "/sdn/zones/localnetwork/vmbr1 PVESDNUser"; do
	set -- $acl
	check "acl $1: $2 for the user" has_call "pveum acl modify $1 --users pve-sandbox@pve --roles $2"
	check "acl $1: $2 for the token" has_call "pveum acl modify $1 --tokens 'pve-sandbox@pve!controller' --roles $2"
done
check "acl: nothing on / or /vms" bash -c '! grep -E "^pveum acl modify (/|/vms[^ ]*) " "$1"' _ "$STUB_LOG"
check "token secret: stored" file_has /etc/pve-sandbox/proxmox-token '^0b9e3c2a-5f1d-4c7e-9a8b-stub-secret$'
check "token secret: mode 600" test "$(mode_of /etc/pve-sandbox/proxmox-token)" = 600
check "token secret: not printed" bash -c '! grep -q stub-secret "$1"' _ "$T/real.out"
check "ssh key: private key mode 600" test "$(mode_of /etc/pve-sandbox/ssh/id_ed25519)" = 600
check "ssh key: public key mode 644" test "$(mode_of /etc/pve-sandbox/ssh/id_ed25519.pub)" = 644
check "ssh key: directory mode 750" test "$(mode_of /etc/pve-sandbox/ssh)" = 750
check "ssh key: ed25519" file_has /etc/pve-sandbox/ssh/id_ed25519.pub '^ssh-ed25519 '
stanza=/etc/network/interfaces.d/pve-sandbox-vmbr1
check "bridge: stanza has no ports" file_has "$stanza" '^[[:space:]]+bridge-ports none$'
check "bridge: address is the gateway" file_has "$stanza" '^[[:space:]]+address 10\.99\.0\.1/16$'
check "bridge: a fixed MAC from the gateway address" file_has "$stanza" '^[[:space:]]+hwaddress 02:00:0a:63:00:01$'
check "bridge: IPv6 off on the bridge" file_has "$stanza" 'disable_ipv6=1'
check "bridge: interfaces sources interfaces.d" file_has /etc/network/interfaces '^source /etc/network/interfaces\.d/\*$'
check "bridge: vmbr0 untouched" file_has /etc/network/interfaces 'bridge-ports eno1'
check "bridge: ifreload -a" has_call "ifreload -a"
check "bridge: ip_forward persisted and applied" bash -c 'grep -q "net.ipv4.ip_forward = 1" "$1/etc/sysctl.d/90-pve-sandbox.conf" && grep -Fq "sysctl -q -p $1/etc/sysctl.d/90-pve-sandbox.conf" "$2"' _ "$PVS_ROOT" "$STUB_LOG"
dq=/etc/dnsmasq.d/pve-sandbox.conf
check "dnsmasq: installed" has_call "apt-get install -y dnsmasq"
check "dnsmasq: only on the bridge address" bash -c 'grep -qx "interface=vmbr1" "$1" && grep -qx "listen-address=10.99.0.1" "$1" && grep -qx "bind-interfaces" "$1"' _ "$PVS_ROOT$dq"
check "dnsmasq: static DHCP range (no pool) with /16 netmask" file_has "$dq" '^dhcp-range=vmbr1,10\.99\.0\.0,static,255\.255\.0\.0,1h$'
check "dnsmasq: reservations from the agent's directory" file_has "$dq" '^dhcp-hostsdir=/run/pve-sandbox/dhcp-hosts$'
check "dnsmasq: unknown MACs ignored" file_has "$dq" '^dhcp-ignore=tag:!known$'
check "dnsmasq: no dynamic pool left" bash -c '! grep -E "^dhcp-range=" "$1" | grep -v ",static,"' _ "$PVS_ROOT$dq"
check "dnsmasq: reservations directory exists, mode 755" test "$(mode_of /run/pve-sandbox/dhcp-hosts)" = 755
check "dnsmasq: directory recreated at boot (tmpfiles.d, no package here)" file_has /etc/tmpfiles.d/pve-sandbox-dhcp-hosts.conf '^d /run/pve-sandbox/dhcp-hosts 0755 [a-z-]+ [a-z-]+ -$'
check "dnsmasq: directory created before dnsmasq restarted" grep -Eq '^\+ install -d -m 0755 /run/pve-sandbox/dhcp-hosts$' "$T/real.out"
check "dnsmasq: router and DNS are the gateway" bash -c 'grep -qx "dhcp-option=vmbr1,option:router,10.99.0.1" "$1" && grep -qx "dhcp-option=vmbr1,option:dns-server,10.99.0.1" "$1"' _ "$PVS_ROOT$dq"
check "dnsmasq: rebind protection" file_has "$dq" '^stop-dns-rebind$'
check "dnsmasq: enabled and restarted" bash -c 'grep -qx "systemctl enable dnsmasq.service" "$1" && grep -qx "systemctl restart dnsmasq.service" "$1"' _ "$STUB_LOG"
nftf=/etc/pve-sandbox/sandbox.nft
check "ruleset: rendered with the site's defines" bash -c 'grep -qx "define SANDBOX_BRIDGE = \"vmbr1\"" "$1" && grep -qx "define SANDBOX_CIDR = 10.99.0.0/16" "$1" && grep -qx "define SANDBOX_GW = 10.99.0.1" "$1"' _ "$PVS_ROOT$nftf"
check "ruleset: ports scope as configured" file_has "$nftf" '^[[:space:]]+iifname \$SANDBOX_PORTS jump from_port$'
check "ruleset: no controller addresses by default (element line left commented out)" bash -c 'grep -qx "#pvs-controllers add element inet sandbox controller_addresses { CONTROLLER_ADDRESSES }" "$1" && ! grep -q "^add element" "$1"' _ "$PVS_ROOT$nftf"
check "ruleset: checked with nft -c before install" has_call_re '^nft -c -f '
unit=/etc/systemd/system/pve-sandbox-nftables.service
check "ruleset: unit loads the file at boot before networking" bash -c 'grep -qx "ExecStart=/usr/sbin/nft -f /etc/pve-sandbox/sandbox.nft" "$1" && grep -q "^Before=network-pre.target" "$1" && grep -qx "WantedBy=sysinit.target" "$1"' _ "$PVS_ROOT$unit"
check "ruleset: daemon-reload, enable, restart" bash -c 'grep -qx "systemctl daemon-reload" "$1" && grep -qx "systemctl enable pve-sandbox-nftables.service" "$1" && grep -qx "systemctl restart pve-sandbox-nftables.service" "$1"' _ "$STUB_LOG"
rconf=/etc/pve-sandbox/resolver.yaml
check "resolver: configuration from the site's values" bash -c 'grep -qx "listen: 10.99.0.1" "$1" && grep -qx "port: 5353" "$1" && grep -qx "sandbox_cidr: 10.99.0.0/16" "$1" && grep -qx "upstreams: \[\"10.99.0.1\"\]" "$1"' _ "$PVS_ROOT$rconf"
check "resolver: configuration mode 644" test "$(mode_of "$rconf")" = 644
check "resolver: no unit without the package, none enabled" bash -c '! grep -q "pve-sandbox-resolver" "$1"' _ "$STUB_LOG"
check "template: the newest Debian 13 image pveam offers, downloaded" has_call "pveam download local debian-13-standard_13.6-1_amd64.tar.zst"
check "template: created from it" has_call_re '^pct create 9000 local:vztmpl/debian-13-standard_13\.6-1_amd64\.tar\.zst '
create=$(grep '^pct create 9000 ' "$STUB_LOG" || true)
for flag in "--unprivileged 1" "--features nesting=0" "--swap 0" "--pool sandbox-pool" \
	"--ssh-public-keys $PVS_ROOT/etc/pve-sandbox/ssh/id_ed25519.pub" "--nameserver 10.99.0.1" "--start 0"; do
	check "template: pct create $flag" grep -Fq -- " $flag" <<<"$create"
done
check "template: PID cap and no core dumps in the CT config" bash -c 'grep -qx "lxc.cgroup2.pids.max: 1024" "$1" && grep -qx "lxc.prlimit.core: 0" "$1"' _ "$PVS_ROOT/etc/pve/lxc/9000.conf"
check "template: port bound and address allowed before start" before 'nft add element inet sandbox internet_allowed' 'pct start 9000'
check "template: L2 binding uses the CT's MAC and port" has_call "nft add element bridge sandbox_l2 port_mac '{ \"veth9000i0\" . BC:24:11:AA:BB:28 }'"
check "template: provisioned with pct exec" has_call_re '^pct exec 9000 -- bash -c '
# (the provisioning script is the multi-line argument of the one pct exec call)
check "template: provisioning creates the sandbox user and sshd policy" bash -c 'grep -q "useradd -m -s /bin/bash sandbox" "$1" && grep -q "PermitRootLogin no" "$1" && grep -q "PasswordAuthentication no" "$1"' _ "$STUB_LOG"
check "template: nproc and core limits" bash -c 'grep -Eq "hard[[:space:]]+nproc[[:space:]]+512" "$1" && grep -Eq "hard[[:space:]]+core[[:space:]]+0" "$1"' _ "$STUB_LOG"
check "template: internet revoked after stop" before 'pct stop 9000' 'nft delete element inet sandbox internet_allowed'
check "template: back to DHCP, then made a template" before "pct set 9000 --net0 name=eth0,bridge=vmbr1,ip=dhcp,firewall=0,hwaddr=BC:24:11:AA:BB:28" "pct template 9000"
check "order: ssh-key before template" before 'pvesh create /pools' 'pct create 9000'
check "all: reports its changes" grep -Eq '^done: [1-9][0-9]* change\(s\) made$' "$T/real.out"

# ---- 3. idempotency ------------------------------------------------------------------------------
: >"$STUB_LOG"
out=$(setup all 2>&1) && rc=0 || rc=$?
check "re-run: exits 0" test "$rc" = 0
check "re-run: no mutating call" test -z "$(mutations)"
check "re-run: reports 0 changes" grep -qx 'done: 0 change(s) made' <<<"$out"
: >"$STUB_LOG"
out=$(setup --dry-run all 2>&1) && rc=0 || rc=$?
check "dry-run after setup: 0 changes" grep -qx 'dry run: 0 change(s) would be made' <<<"$out"

# ---- 4. a changed site value touches only what depends on it ------------------------------------
echo "DHCP_LEASE=2h" >>"$CONFIG"
: >"$STUB_LOG"
out=$(setup all 2>&1) && rc=0 || rc=$?
check "changed DHCP lease: exits 0" test "$rc" = 0
check "changed DHCP lease: only dnsmasq restarted" test "$(mutations)" = "systemctl restart dnsmasq.service"
check "changed DHCP lease: file updated" file_has "$dq" '^dhcp-range=vmbr1,10\.99\.0\.0,static,255\.255\.0\.0,2h$'
# RESOLVER_PORT: the ruleset and the resolver's configuration change together.
echo "RESOLVER_PORT=5300" >>"$CONFIG"
: >"$STUB_LOG"
out=$(setup all 2>&1) && rc=0 || rc=$?
check "changed RESOLVER_PORT: exits 0" test "$rc" = 0
check "changed RESOLVER_PORT: only the ruleset reloaded" test "$(mutations)" = "systemctl restart pve-sandbox-nftables.service"
check "changed RESOLVER_PORT: ruleset and resolver.yaml follow" bash -c 'grep -qx "define RESOLVER_PORT = 5300" "$1" && grep -qx "port: 5300" "$2"' _ "$PVS_ROOT$nftf" "$PVS_ROOT/etc/pve-sandbox/resolver.yaml"
sed -i '/^RESOLVER_PORT=5300$/d' "$CONFIG"
out=$(setup all 2>&1) && rc=0 || rc=$?
# Controllers on other hosts: only the ruleset changes; an empty list takes them out again.
echo 'CONTROLLER_ADDRESSES="192.0.2.10  198.51.100.0/24"' >>"$CONFIG"
: >"$STUB_LOG"
out=$(setup all 2>&1) && rc=0 || rc=$?
check "controller addresses: exits 0" test "$rc" = 0
check "controller addresses: only the ruleset reloaded" test "$(mutations)" = "systemctl restart pve-sandbox-nftables.service"
check "controller addresses: the elements of controller_addresses" file_has "$nftf" '^add element inet sandbox controller_addresses \{ 192\.0\.2\.10, 198\.51\.100\.0/24 \}$'
check "controller addresses: checked with nft -c" has_call_re '^nft -c -f '
echo 'CONTROLLER_ADDRESSES=' >>"$CONFIG"
: >"$STUB_LOG"
out=$(setup all 2>&1) && rc=0 || rc=$?
check "controller addresses emptied: exits 0" test "$rc" = 0
check "controller addresses emptied: only the ruleset reloaded" test "$(mutations)" = "systemctl restart pve-sandbox-nftables.service"
check "controller addresses emptied: element line commented out again" bash -c '! grep -q "^add element" "$1"' _ "$PVS_ROOT$nftf"
# The pool keys of older configs are accepted with a warning and change nothing.
printf 'DHCP_START=10.99.1.1\nDHCP_END=10.99.254.254\n' >>"$CONFIG"
: >"$STUB_LOG"
out=$(setup all 2>&1) && rc=0 || rc=$?
check "old DHCP_START/DHCP_END: exits 0" test "$rc" = 0
check "old DHCP_START/DHCP_END: warned as ignored" bash -c 'grep -q "WARNING: .*DHCP_START is ignored" <<<"$1" && grep -q "WARNING: .*DHCP_END is ignored" <<<"$1"' _ "$out"
check "old DHCP_START/DHCP_END: nothing changed" test -z "$(mutations)"
# The directory vanished (e.g. /run emptied without the tmpfiles entry): recreated, dnsmasq restarted.
rmdir "$PVS_ROOT/run/pve-sandbox/dhcp-hosts"
: >"$STUB_LOG"
out=$(setup dnsmasq 2>&1) && rc=0 || rc=$?
check "missing reservations directory: recreated" test -d "$PVS_ROOT/run/pve-sandbox/dhcp-hosts"
check "missing reservations directory: dnsmasq restarted to watch it" test "$(mutations)" = "systemctl restart dnsmasq.service"
# An agent.yaml without the matching dhcp_hosts_dir is pointed out.
mkdir -p "$PVS_ROOT/etc/pve-sandbox" && echo "sandbox_cidr: 10.99.0.0/16" >"$PVS_ROOT/etc/pve-sandbox/agent.yaml"
out=$(setup dnsmasq 2>&1) && rc=0 || rc=$?
check "agent.yaml without dhcp_hosts_dir: warned" grep -q "WARNING: .*dhcp_hosts_dir: /run/pve-sandbox/dhcp-hosts" <<<"$out"
echo "dhcp_hosts_dir: /run/pve-sandbox/dhcp-hosts" >>"$PVS_ROOT/etc/pve-sandbox/agent.yaml"
out=$(setup dnsmasq 2>&1) && rc=0 || rc=$?
check "agent.yaml with dhcp_hosts_dir: no warning" bash -c '! grep -q "WARNING: .*agent.yaml" <<<"$1"' _ "$out"

# ---- 5. drift is repaired -----------------------------------------------------------------------
python3 - "$STUB_STATE/state.json" <<'PY'
import json, sys
p = sys.argv[1]
st = json.load(open(p))
st["roles"]["PVESandbox"].append("Sys.Modify")
st["active"]["pve-sandbox-nftables.service"] = False
json.dump(st, open(p, "w"))
PY
chmod 644 "$PVS_ROOT/etc/pve-sandbox/ssh/id_ed25519"
: >"$STUB_LOG"
out=$(setup api-user ruleset ssh-key 2>&1) && rc=0 || rc=$?
check "drift: exits 0" test "$rc" = 0
check "drift: role privileges reset" has_call "pveum role modify PVESandbox --privs $privs"
check "drift: ruleset unit started again" has_call "systemctl restart pve-sandbox-nftables.service"
check "drift: private key mode repaired" test "$(mode_of /etc/pve-sandbox/ssh/id_ed25519)" = 600
check "drift: key not regenerated" bash -c '! grep -q "^ssh-keygen" "$1"' _ "$STUB_LOG"

# ---- 6. pve-sandbox-check's container items against the stubbed node set up above ------------
CHECK="$HERE/../../setup/pve-sandbox-check"
# (the node of sections 2-5: set up, then repaired)
json=$("$CHECK" --config "$CONFIG" --only container --json 2>/dev/null) && rc=0 || rc=$?
st() { jq -r --arg id "$1" '.items[] | select(.id == $id) | .status' <<<"$json"; }
check "check: prepared node passes the container items (exit 0)" test "$rc" = 0
for id in container.unprivileged container.nesting container.swap container.pool-scope; do
	check "check: $id PASS on the prepared node" test "$(st "$id")" = PASS
done
check "check: evidence names the pool's containers" bash -c 'jq -e ".items[] | select(.id == \"container.unprivileged\") | .evidence | test(\"1 CT\")" <<<"$1" >/dev/null' _ "$json"
# A privileged container with nesting and swap in the pool, and an ACL on / for the token.
printf 'unprivileged: 0\nfeatures: nesting=1\nswap: 512\n' >"$PVS_ROOT/etc/pve/lxc/9100.conf"
python3 - "$STUB_STATE/state.json" <<'PY'
import json, sys
p = sys.argv[1]
st = json.load(open(p))
st["cts"]["9100"] = {"status": "running", "pool": "sandbox-pool"}
st["acl"].append({"path": "/", "roleid": "PVEAdmin", "type": "token", "ugid": "pve-sandbox@pve!controller", "propagate": 1})
json.dump(st, open(p, "w"))
PY
json=$("$CHECK" --config "$CONFIG" --only container --json 2>/dev/null) && rc=0 || rc=$?
check "check: a bad node fails (exit 1)" test "$rc" = 1
for id in container.unprivileged container.nesting container.swap container.pool-scope; do
	check "check: $id FAIL on the bad node" test "$(st "$id")" = FAIL
done
check "check: evidence names the offender" bash -c 'jq -e ".items[] | select(.id == \"container.pool-scope\") | .evidence | test(\"/:PVEAdmin\")" <<<"$1" >/dev/null && jq -e ".items[] | select(.id == \"container.nesting\") | .evidence | test(\"9100\")" <<<"$1" >/dev/null' _ "$json"

# ---- 6b. pve-sandbox-check's DHCP item: dnsmasq answers only the agent's reservations -----------
# The configuration comes from `setup dnsmasq` in a scratch root; "dnsmasq.service" is a real
# dnsmasq (in a network namespace of its own, DHCP on, DNS off) watching the scratch root's
# reservations directory, whose pid the systemctl stub reports as MainPID.
fresh_host dhcp
if ! command -v dnsmasq >/dev/null; then
	fail "dhcp: dnsmasq is not installed (apt-get install dnsmasq-base)"
fi
out=$(setup dnsmasq 2>&1) || fail "dhcp: setup dnsmasq"
hosts=/run/pve-sandbox/dhcp-hosts
mkdir -p "$PVS_ROOT/etc/pve-sandbox"
printf 'sandbox_cidr: 10.99.0.0/16\ndhcp_hosts_dir: "%s"   # published for dnsmasq\n' "$hosts" >"$PVS_ROOT/etc/pve-sandbox/agent.yaml"
printf '# Configuration file for dnsmasq.\n#dhcp-range=192.168.0.50,192.168.0.150,12h\n' >"$PVS_ROOT/etc/dnsmasq.conf"
printf 'dhcp-range=10.99.2.1,10.99.2.200,12h\n' >"$PVS_ROOT/etc/dnsmasq.d/pve-sandbox.conf.dpkg-old"
printf 'bc:24:11:2a:3b:4c,10.99.0.7\n' >"$PVS_ROOT$hosts/veth9100i0"
touch -d '1 hour ago' "$PVS_ROOT/etc/dnsmasq.conf" "$PVS_ROOT/etc/dnsmasq.d/"* "$PVS_ROOT/etc/pve-sandbox/agent.yaml"
start_dnsmasq() {
	stop_dnsmasq
	unshare -n dnsmasq -k --port=0 -C /dev/null --dhcp-range=10.99.0.0,static --dhcp-hostsdir="$PVS_ROOT$hosts" \
		--dhcp-leasefile="$T/dhcp/leases" --pid-file= --user=root --log-facility="$T/dhcp/dnsmasq.log" &
	DNSMASQ_PID=$!
	local _
	for _ in $(seq 1 200); do
		if grep -qs '^inotify wd:' /proc/"$DNSMASQ_PID"/fdinfo/*; then break; fi
		sleep 0.1
	done
	python3 - "$STUB_STATE/state.json" "$DNSMASQ_PID" <<'PY'
import json, sys
p = sys.argv[1]
st = json.load(open(p))
st.setdefault("mainpid", {})["dnsmasq.service"] = int(sys.argv[2])
json.dump(st, open(p, "w"))
PY
}
set_active() { # set_active 0|1: dnsmasq.service's state in the stub
	python3 - "$STUB_STATE/state.json" "$1" <<'PY'
import json, sys
p = sys.argv[1]
st = json.load(open(p))
st["active"]["dnsmasq.service"] = sys.argv[2] == "1"
json.dump(st, open(p, "w"))
PY
}
dhcp_check() { # dhcp_check NAME STATUS EVIDENCE-REGEX: the item's status, evidence and exit code
	local json rc=0 status ev want_rc=0
	json=$("$CHECK" --config "$CONFIG" --only dhcp --json 2>"$STUB_STATE/check.err") || rc=$?
	status=$(jq -r '.items[] | select(.id == "dhcp.reservations-only") | .status' <<<"$json" 2>/dev/null || true)
	ev=$(jq -r '.items[] | select(.id == "dhcp.reservations-only") | .evidence' <<<"$json" 2>/dev/null || true)
	[[ $2 == FAIL ]] && want_rc=1
	if [[ $status == "$2" && $rc == "$want_rc" ]] && grep -Eq -- "$3" <<<"$ev"; then
		pass "check dhcp: $1 -> $2"
	else
		fail "check dhcp: $1 -> $2 /$3/ (got $status, exit $rc: $ev $(cat "$STUB_STATE/check.err"))"
	fi
}
start_dnsmasq
dhcp_check "as set up, dnsmasq watching the directory" PASS \
	"^dhcp-range=vmbr1,10\.99\.0\.0,static,255\.255\.0\.0,1h \(/etc/dnsmasq.d/pve-sandbox.conf\), dhcp-ignore=tag:!known, dhcp-hostsdir=$hosts = the agent's dhcp_hosts_dir \(1 reservation\(s\)\); dnsmasq.service active \(pid [0-9]+\), watching $hosts$"
: >"$STUB_LOG"
json=$("$CHECK" --config "$CONFIG" --only container,dhcp --json 2>/dev/null | jq -c '[.items[].id]') || true
check "check dhcp: group dhcp next to container" test "$json" = '["container.unprivileged","container.nesting","container.swap","container.pool-scope","dhcp.reservations-only"]'
check "check dhcp: clones no container" bash -c '! grep -q "^pct clone" "$1"' _ "$STUB_LOG"
# One fault at a time, each undone (files restored with their old mtime) before the next.
dq=$PVS_ROOT/etc/dnsmasq.d/pve-sandbox.conf
cp -p "$dq" "$T/dhcp/conf.orig"
cp -p "$PVS_ROOT/etc/pve-sandbox/agent.yaml" "$T/dhcp/agent.orig"
cp -p "$PVS_ROOT/etc/dnsmasq.conf" "$T/dhcp/main.orig"
restore() {
	cp -p "$T/dhcp/conf.orig" "$dq"
	cp -p "$T/dhcp/agent.orig" "$PVS_ROOT/etc/pve-sandbox/agent.yaml"
	cp -p "$T/dhcp/main.orig" "$PVS_ROOT/etc/dnsmasq.conf"
	rm -f "$PVS_ROOT/etc/dnsmasq.d/local.conf"
}
echo 'dhcp-range=10.99.1.1,10.99.1.200,12h' >>"$PVS_ROOT/etc/dnsmasq.conf"
touch -d '1 hour ago' "$PVS_ROOT/etc/dnsmasq.conf"
dhcp_check "a dynamic pool in /etc/dnsmasq.conf" FAIL "dynamic pool on the bridge: dhcp-range=10\.99\.1\.1,10\.99\.1\.200,12h \(/etc/dnsmasq\.conf\)"
restore
printf 'dhcp-range=tag:lab,10.99.3.1,10.99.3.9\n' >"$PVS_ROOT/etc/dnsmasq.d/local.conf"
touch -d '1 hour ago' "$PVS_ROOT/etc/dnsmasq.d/local.conf"
dhcp_check "a tagged dynamic pool in /etc/dnsmasq.d" FAIL "dynamic pool on the bridge: dhcp-range=tag:lab,10\.99\.3\.1,10\.99\.3\.9 \(/etc/dnsmasq\.d/local\.conf\)"
restore
printf 'dhcp-range=192.168.7.10,192.168.7.99,1h\n' >"$PVS_ROOT/etc/dnsmasq.d/local.conf"
touch -d '1 hour ago' "$PVS_ROOT/etc/dnsmasq.d/local.conf"
dhcp_check "a pool on another network is not the bridge's" PASS "^dhcp-range=vmbr1,"
restore
printf 'dhcp-host=bc:24:11:00:00:01,10.99.0.50\n' >"$PVS_ROOT/etc/dnsmasq.d/local.conf"
touch -d '1 hour ago' "$PVS_ROOT/etc/dnsmasq.d/local.conf"
dhcp_check "a reservation outside the agent's directory" FAIL "reservations besides the agent's: dhcp-host=bc:24:11:00:00:01,10\.99\.0\.50"
restore
sed -i '/^dhcp-ignore=/d' "$dq"
touch -d '1 hour ago' "$dq"
dhcp_check "without dhcp-ignore=tag:!known" FAIL "no dhcp-ignore=tag:!known"
restore
sed -i 's/^dhcp-range=.*/dhcp-range=vmbr1,10.99.0.10,10.99.255.200,255.255.0.0,1h/' "$dq"
touch -d '1 hour ago' "$dq"
dhcp_check "the setup range turned into a pool" FAIL "dynamic pool on the bridge: .*; no static dhcp-range in 10\.99\.0\.0/16"
restore
sed -i 's|^dhcp-hostsdir=.*|dhcp-hostsdir=/run/elsewhere|' "$dq"
touch -d '1 hour ago' "$dq"
dhcp_check "dhcp-hostsdir is not the agent's directory" FAIL "dhcp-hostsdir=/run/elsewhere is not the agent's dhcp_hosts_dir $hosts"
restore
echo 'dhcp-hostsdir=/etc/more-hosts' >>"$dq"
touch -d '1 hour ago' "$dq"
dhcp_check "a second dhcp-hostsdir besides the agent's" FAIL "^reservations besides the agent's: dhcp-hostsdir=/etc/more-hosts \("
restore
sed -i '/^dhcp_hosts_dir:/d' "$PVS_ROOT/etc/pve-sandbox/agent.yaml"
dhcp_check "agent.yaml without dhcp_hosts_dir" FAIL "agent.yaml sets no dhcp_hosts_dir"
restore
set_active 0
dhcp_check "dnsmasq.service not running" FAIL "dnsmasq.service is inactive"
set_active 1
touch "$dq" -d "@$(($(date +%s) + 5))"
dhcp_check "configuration changed after dnsmasq started" FAIL "changed after dnsmasq started \(restart dnsmasq\): /etc/dnsmasq.d/pve-sandbox.conf"
restore
mv "$PVS_ROOT$hosts" "$T/dhcp/hosts.saved"
dhcp_check "the directory is missing" FAIL "$hosts does not exist"
mkdir "$PVS_ROOT$hosts"
dhcp_check "the directory was recreated after dnsmasq started" FAIL "does not watch $hosts \(it started before the directory existed"
start_dnsmasq
dhcp_check "dnsmasq restarted" PASS "\(0 reservation\(s\)\); dnsmasq.service active \(pid [0-9]+\), watching $hosts$"
stop_dnsmasq
# DHCP off: no dnsmasq configuration, no dhcp_hosts_dir (agent default "").
fresh_host dhcpoff
mkdir -p "$PVS_ROOT/etc/pve-sandbox" "$PVS_ROOT/etc/dnsmasq.d"
echo 'sandbox_cidr: 10.99.0.0/16' >"$PVS_ROOT/etc/pve-sandbox/agent.yaml"
dhcp_check "DHCP off" PASS "^DHCP off: containers use static addresses"
rm "$PVS_ROOT/etc/pve-sandbox/agent.yaml"
dhcp_check "DHCP off, no agent.yaml (agent default)" PASS "^DHCP off: .*no /etc/pve-sandbox/agent.yaml\)$"
echo 'sandbox_cidr: 10.99.0.0/16' >"$PVS_ROOT/etc/pve-sandbox/agent.yaml"
echo 'dhcp_hosts_dir: /run/pve-sandbox/dhcp-hosts' >>"$PVS_ROOT/etc/pve-sandbox/agent.yaml"
dhcp_check "agent publishes, dnsmasq has no reservations range" FAIL "no static dhcp-range in 10\.99\.0\.0/16; no dhcp-ignore=tag:!known.*dhcp-hostsdir=none is not the agent's"

# ---- 7. a failing provisioning cleans up its grants and does not make a template -----------------
fresh_host failing
export STUB_FAIL="pct exec"
out=$(setup ssh-key template 2>&1) && rc=0 || rc=$?
unset STUB_FAIL
check "failed provisioning: exits non-zero" test "$rc" != 0
check "failed provisioning: internet grant removed" has_call_re '^nft delete element inet sandbox internet_allowed'
check "failed provisioning: L2 bindings removed" has_call_re '^nft delete element bridge sandbox_l2 port_mac'
check "failed provisioning: no template made" bash -c '! grep -q "^pct template" "$1"' _ "$STUB_LOG"
: >"$STUB_LOG"
out=$(setup template 2>&1) && rc=0 || rc=$?
check "half-built CT is not silently reused" bash -c '[[ $1 != 0 ]] && grep -q "exists and is not a template" <<<"$2"' _ "$rc" "$out"

# ---- 7a. the volume holder template: a small container, never started, made a template once ----
fresh_host holder
out=$(setup volume-holder 2>&1) && rc=0 || rc=$?
check "volume-holder: exits 0" test "$rc" = 0
check "volume-holder: created stopped, no network" bash -c 'grep -Eq "^pct create 8990 .*--rootfs local-lvm:1 .*--start 0" "$1" && ! grep -Eq "^pct create 8990 .*--net0" "$1"' _ "$STUB_LOG"
check "volume-holder: made a template, never started" bash -c 'grep -qx "pct template 8990" "$1" && ! grep -q "^pct start 8990" "$1"' _ "$STUB_LOG"
: >"$STUB_LOG"
out=$(setup volume-holder 2>&1) && rc=0 || rc=$?
check "volume-holder: a second run changes nothing" bash -c '[[ $1 == 0 ]] && [[ -z $(grep -v "^pct config\|^pveam list" "$2") ]]' _ "$rc" "$STUB_LOG"
# An exact image name is used as it is; a name without version takes what the storage has.
fresh_host exactimage
echo "TEMPLATE_OSTEMPLATE=debian-12-standard_12.12-1_amd64.tar.zst" >>"$CONFIG"
out=$(setup volume-holder 2>&1) && rc=0 || rc=$?
check "os image: an exact name is downloaded as it is" bash -c '[[ $1 == 0 ]] && grep -qx "pveam download local debian-12-standard_12.12-1_amd64.tar.zst" "$2" && ! grep -q "^pveam available" "$2"' _ "$rc" "$STUB_LOG"
fresh_host storedimage
echo '{"vztmpl": {"local": ["debian-13-standard_13.1-2_amd64.tar.zst"]}}' >"$STUB_STATE/state.json"
out=$(setup volume-holder 2>&1) && rc=0 || rc=$?
check "os image: a Debian 13 image already on the storage is used, nothing downloaded" bash -c '[[ $1 == 0 ]] && grep -q "^pct create 8990 local:vztmpl/debian-13-standard_13.1-2_amd64.tar.zst " "$2" && ! grep -q "^pveam download" "$2"' _ "$rc" "$STUB_LOG"

# ---- 7b. with pve-sandbox-agent running, the template's grant and binding go through it ------
fresh_host withagent
mkdir -p "$PVS_ROOT/run/pve-sandbox"
/usr/bin/python3 - "$PVS_ROOT/run/pve-sandbox/agent.sock" "$T/withagent/agent.log" <<'PY' &
import os, socket, sys
path, log = sys.argv[1], sys.argv[2]
srv = socket.socket(socket.AF_UNIX)
srv.bind(path)
srv.listen(8)
while True:
    c, _ = srv.accept()
    line = c.makefile().readline().strip()
    with open(log, "a") as f:
        f.write(line + "\n")
    c.sendall(b"OK\n")
    c.close()
PY
agent_pid=$!
for _ in $(seq 1 200); do [[ -S $PVS_ROOT/run/pve-sandbox/agent.sock ]] && break; sleep 0.1; done
out=$(setup ssh-key template 2>&1) && rc=0 || rc=$?
kill "$agent_pid" 2>/dev/null || true
wait "$agent_pid" 2>/dev/null || true
alog=$(cat "$T/withagent/agent.log" 2>/dev/null || true)
check "agent: template step exits 0" test "$rc" = 0
check "agent: requests BIND, ALLOW with a lease, REVOKE, UNBIND in order" test "$alog" = "BIND veth9000i0 BC:24:11:AA:BB:28 10.99.0.2
ALLOW 10.99.0.2 ttl=1800
REVOKE 10.99.0.2
UNBIND veth9000i0"
check "agent: no direct nft edits while the agent runs" bash -c '! grep -q "^nft " "$1"' _ "$STUB_LOG"

# ---- 8. config and usage errors ---------------------------------------------------------------
fresh_host bad
bad_config() { # bad_config NAME LINE
	cp "$CONFIG" "$CONFIG.bad"
	echo "$2" >>"$CONFIG.bad"
	: >"$STUB_LOG"
	if "$SETUP" --config "$CONFIG.bad" all >/dev/null 2>&1; then
		fail "config refused: $1"
	elif [[ -n $(mutations) ]]; then
		fail "config refused: $1 (but something ran)"
	else
		pass "config refused: $1"
	fi
}
bad_config "unknown key" "BRIGDE=vmbr1"
bad_config "bad CIDR" "SANDBOX_CIDR=10.99.0.0"
bad_config "shell in a value" 'BRIDGE=vmbr1;reboot'
bad_config "command substitution" 'POOL=$(reboot)'
bad_config "bad port set" 'SANDBOX_PORTS={ "veth*" }; flush ruleset'
bad_config "nproc soft > hard" "NPROC_SOFT=1000"
bad_config "relative DHCP_HOSTS_DIR" "DHCP_HOSTS_DIR=run/dhcp-hosts"
bad_config "DHCP_HOSTS_DIR with .." "DHCP_HOSTS_DIR=/run/../etc"
bad_config "not KEY=VALUE" "just words"
bad_config "the agent owns the secrets" "SSH_KEY_OWNER=pve-sandbox-agent"
bad_config "the relay owns the secrets" "SSH_KEY_OWNER=pve-sandbox-relay"
bad_config "controller addresses: nft injection" 'CONTROLLER_ADDRESSES="192.0.2.10 }; flush ruleset"'
bad_config "controller addresses: a host name" "CONTROLLER_ADDRESSES=controller.example"
bad_config "resolver port 53" "RESOLVER_PORT=53"
bad_config "resolver port out of range" "RESOLVER_PORT=70000"
bad_config "resolver port injection" 'RESOLVER_PORT=5353; flush ruleset'

bad_config "controller addresses: IPv6" "CONTROLLER_ADDRESSES=2001:db8::10"
bad_config "controller addresses: host bits set" "CONTROLLER_ADDRESSES=192.0.2.5/24"
bad_config "controller addresses: everyone" "CONTROLLER_ADDRESSES=0.0.0.0/0"
bad_config "controller addresses: inside the sandbox CIDR" "CONTROLLER_ADDRESSES=10.99.0.20"
cp "$CONFIG" "$CONFIG.bad" && echo "CONTROLLER_ADDRESSES=192.0.2.10 10.99.0.20" >>"$CONFIG.bad"
out=$("$SETUP" --config "$CONFIG.bad" ruleset 2>&1) && rc=0 || rc=$?
check "controller addresses: the refusal says which entry and why" \
	bash -c '[[ $1 != 0 && $2 == *"ERROR: CONTROLLER_ADDRESSES: '"'"'10.99.0.20'"'"' overlaps the sandbox network (10.99.0.0/16)"* ]]' _ "$rc" "$out"
out=$("$HERE/../../setup/pve-sandbox-check" --config "$CONFIG.bad" --only dhcp 2>&1) && rc=0 || rc=$?
check "controller addresses: pve-sandbox-check refuses it too" bash -c '[[ $1 != 0 && $2 == *"ERROR: CONTROLLER_ADDRESSES: "* ]]' _ "$rc" "$out"
if "$SETUP" --config "$CONFIG" frobnicate >/dev/null 2>&1; then fail "unknown step refused"; else pass "unknown step refused"; fi
if "$SETUP" --config "$T/nope.conf" all >/dev/null 2>&1; then fail "missing config file refused"; else pass "missing config file refused"; fi
printf 'auto vmbr1\niface vmbr1 inet manual\n' >>"$PVS_ROOT/etc/network/interfaces"
: >"$STUB_LOG"
out=$(setup bridge 2>&1) && rc=0 || rc=$?
check "bridge already in /etc/network/interfaces: refused" bash -c '[[ $1 != 0 ]] && grep -q "already defined" <<<"$2"' _ "$rc" "$out"
check "render-ruleset prints the ruleset and changes nothing" bash -c '"$1" --config "$2" render-ruleset | grep -q "^table inet sandbox" && [[ -z $(grep -Ev "^(nft -c|pvesh get)" "$3") ]]' _ "$SETUP" "$CONFIG" "$STUB_LOG"

# ---- 6c. secrets: readable by the controller's account alone ----------------------------------
# Real accounts (removed on exit) and the kernel's own access check (setpriv ... test -r).
ctl=pvsck$$c agent=pvsck$$a relay=pvsck$$r
groupadd "pvsck$$s" # a group shared by the controller and the agent, as pve-sandbox is
for u in "$ctl" "$agent" "$relay"; do
	useradd --system --no-create-home --shell /usr/sbin/nologin --gid "pvsck$$s" "$u" && ACCOUNTS+=("$u")
done
fresh_host secrets
printf 'CONTROLLER_USER=%s\nAGENT_USER=%s\nRELAY_USER=%s\n' "$ctl" "$agent" "$relay" >>"$CONFIG"
chmod 0755 "$T" "$T/secrets" # the accounts must be able to reach the scratch root
out=$(setup ssh-key 2>&1) || fail "secrets: setup ssh-key ($out)"
check "secrets: the key belongs to the controller's account by default" \
	test "$(stat -c %U:%a "$PVS_ROOT/etc/pve-sandbox/ssh/id_ed25519")" = "$ctl:600"
mkdir -p "$PVS_ROOT/etc/pve-sandbox"
printf 'secret\n' >"$PVS_ROOT/etc/pve-sandbox/proxmox-token"
chown "$ctl:pvsck$$s" "$PVS_ROOT/etc/pve-sandbox/proxmox-token"
chmod 0600 "$PVS_ROOT/etc/pve-sandbox/proxmox-token"
secrets_check() { # secrets_check NAME STATUS EVIDENCE-REGEX
	local json rc=0 status ev want_rc=0
	json=$("$CHECK" --config "$CONFIG" --only secrets --json 2>"$T/secrets/check.err") || rc=$?
	status=$(jq -r '.items[] | select(.id == "secrets.controller-only") | .status' <<<"$json" 2>/dev/null || true)
	ev=$(jq -r '.items[] | select(.id == "secrets.controller-only") | .evidence' <<<"$json" 2>/dev/null || true)
	[[ $2 == FAIL ]] && want_rc=1
	if [[ $status == "$2" && $rc == "$want_rc" ]] && grep -Eq -- "$3" <<<"$ev"; then
		pass "check secrets: $1 -> $2"
	else
		fail "check secrets: $1 -> $2 /$3/ (got $status, exit $rc: $ev $(cat "$T/secrets/check.err"))"
	fi
}
tok=$PVS_ROOT/etc/pve-sandbox/proxmox-token
secrets_check "as set up" PASS "proxmox-token 600 $ctl:pvsck$$s, .*id_ed25519 600 $ctl:pvsck$$s; not readable by $agent, $relay$"
chmod 0640 "$tok"
secrets_check "group-readable by the shared group" FAIL "proxmox-token: readable by $agent $relay"
chmod 0604 "$tok"
secrets_check "world-readable" FAIL "proxmox-token: mode 604 gives other users access"
chmod 0600 "$tok"
chown root "$tok"
secrets_check "owned by root, the controller locked out" FAIL "proxmox-token: the controller \($ctl\) cannot read it"
chown "$ctl" "$tok"
setfacl -m "u:$relay:r" "$tok"
secrets_check "an ACL for the relay" FAIL "proxmox-token: readable by $relay"
setfacl -b "$tok"
rm "$tok"
secrets_check "token file missing" FAIL "proxmox-token: missing"

example="$HERE/../../setup/setup.conf.example"
check "setup.conf.example parses and renders the default site" bash -c '"$1" --config "$2" render-ruleset | grep -qx "define SANDBOX_BRIDGE = \"vmbr1\""' _ "$SETUP" "$example"
check "setup.conf.example: CONTROLLER_ADDRESSES empty, no controller element rendered" bash -c 'grep -qx "CONTROLLER_ADDRESSES=\"\"" "$2" && ! "$1" --config "$2" render-ruleset | grep -q "^add element"' _ "$SETUP" "$example"

if [[ $FAILED -eq 0 ]]; then
	echo "ALL PASS setup"
else
	echo "FAILED setup: $FAILED check(s)"
	exit 1
fi
