# shellcheck shell=bash
# Helpers shared by pve-sandbox-setup and pve-sandbox-check: config file, dry-run, files.

# Every file path goes through $PVS_ROOT (empty on a real host; tests point it at a temp dir).
PVS_ROOT=${PVS_ROOT:-}
DRY_RUN=${DRY_RUN:-0}
CHANGES=0

say() { printf '%s\n' "$*"; }
warn() { printf 'WARNING: %s\n' "$*" >&2; }
die() {
	printf 'ERROR: %s\n' "$*" >&2
	exit 1
}

# Quoted rendering of a command line, for the log and --dry-run.
pvs_cmdline() {
	local out="" a
	for a in "$@"; do
		if [[ $a =~ ^[A-Za-z0-9_./:=,@%+-]+$ ]]; then out+="$a "; else out+="'${a//\'/\'\\\'\'}' "; fi
	done
	printf '%s' "${out% }"
}

# run CMD...: a command that changes the host. Printed always; executed unless --dry-run.
run() {
	CHANGES=$((CHANGES + 1))
	if [[ $DRY_RUN == 1 ]]; then
		say "would run: $(pvs_cmdline "$@")"
		return 0
	fi
	say "+ $(pvs_cmdline "$@")"
	"$@"
}

# query CMD...: a read-only command (also run in --dry-run, so the plan is exact).
query() {
	"$@"
}

# put_file PATH MODE [OWNER:GROUP] < content : writes only when the content or mode differs.
# Returns 0 if the file changed (or would), 1 if it was already right.
put_file() {
	local path=$PVS_ROOT$1 mode=$2 owner=${3:-} tmp
	tmp=$(mktemp)
	cat >"$tmp"
	if [[ -f $path ]] && cmp -s "$tmp" "$path" &&
		[[ $(stat -c %a "$path") == "${mode#0}" ]]; then
		rm -f "$tmp"
		return 1
	fi
	CHANGES=$((CHANGES + 1))
	if [[ $DRY_RUN == 1 ]]; then
		say "would write: $1 (mode $mode)"
		if [[ -f $path ]]; then diff -u "$path" "$tmp" | sed 's/^/    /' || true; else sed 's/^/    /' "$tmp"; fi
		rm -f "$tmp"
		return 0
	fi
	say "+ write $1 (mode $mode)"
	mkdir -p "$(dirname "$path")"
	install -m "$mode" "$tmp" "$path"
	if [[ -n $owner ]]; then chown "$owner" "$path"; fi
	rm -f "$tmp"
	return 0
}

# ensure_dir PATH MODE [OWNER:GROUP]
ensure_dir() {
	local path=$PVS_ROOT$1 mode=$2 owner=${3:-}
	if [[ -d $path && $(stat -c %a "$path") == "${mode#0}" ]] &&
		{ [[ -z $owner ]] || [[ $(stat -c %U:%G "$path") == "$owner" ]]; }; then
		return 0
	fi
	CHANGES=$((CHANGES + 1))
	if [[ $DRY_RUN == 1 ]]; then
		say "would run: install -d -m $mode${owner:+ -o ${owner%%:*} -g ${owner##*:}} $1"
		return 0
	fi
	say "+ install -d -m $mode${owner:+ -o ${owner%%:*} -g ${owner##*:}} $1"
	if [[ -n $owner ]]; then
		install -d -m "$mode" -o "${owner%%:*}" -g "${owner##*:}" "$path"
	else
		install -d -m "$mode" "$path"
	fi
}

# Config: KEY=VALUE lines (optionally quoted), '#' comments. Only known keys are accepted and
# the file is parsed, never sourced.
declare -A CONF=(
	[NODE]=""
	[POOL]="sandbox-pool"
	[API_USER]="pve-sandbox@pve"
	[API_TOKEN]="controller"
	[ROLE]="PVESandbox"
	[TOKEN_FILE]="/etc/pve-sandbox/proxmox-token"
	[STORAGE]="local-lvm"
	[TEMPLATE_STORAGE]="local"
	[BRIDGE]="vmbr1"
	[SANDBOX_CIDR]="10.99.0.0/16"
	[GATEWAY]="10.99.0.1"
	[DHCP_LEASE]="1h"
	[DHCP_HOSTS_DIR]="/run/pve-sandbox/dhcp-hosts"
	[UPSTREAM_DNS]=""
	[RULESET_SCOPE]="auto"
	[SANDBOX_PORTS]='{ "veth*", "fwpr*" }'
	[CONTROLLER_ADDRESSES]=""
	[RESOLVER_PORT]="5353"
	[TEMPLATE_ID]="9000"
	[VOLUME_HOLDER_ID]="8990"
	[TEMPLATE_OSTEMPLATE]="debian-13-standard"
	[TEMPLATE_OSTYPE]="debian"
	[TEMPLATE_MEMORY]="1024"
	[TEMPLATE_CORES]="1"
	[TEMPLATE_DISK_GB]="8"
	[TEMPLATE_PIDS_MAX]="1024"
	[SANDBOX_USER]="sandbox"
	[SANDBOX_SUDO]="1"
	[NPROC_SOFT]="256"
	[NPROC_HARD]="512"
	[SSH_KEY]="/etc/pve-sandbox/ssh/id_ed25519"
	[SSH_KEY_OWNER]=""
	[SSH_KEY_GROUP]=""
	[CONTROLLER_USER]="pve-sandbox-controller"
	[AGENT_USER]="pve-sandbox-agent"
	[RELAY_USER]="pve-sandbox-relay"
)

pvs_load_config() {
	local file=$1 line key value n=0
	[[ -r $file ]] || die "config file $file is not readable"
	while IFS= read -r line || [[ -n $line ]]; do
		n=$((n + 1))
		line=${line%%$'\r'}
		[[ $line =~ ^[[:space:]]*(#|$) ]] && continue
		if [[ ! $line =~ ^[[:space:]]*([A-Z_][A-Z0-9_]*)=(.*)$ ]]; then
			die "$file:$n: expected KEY=VALUE"
		fi
		key=${BASH_REMATCH[1]}
		value=${BASH_REMATCH[2]}
		value=${value%"${value##*[![:space:]]}"}
		if [[ $value =~ ^\"(.*)\"$ || $value =~ ^\'(.*)\'$ ]]; then value=${BASH_REMATCH[1]}; fi
		if [[ $key == DHCP_START || $key == DHCP_END ]]; then
			warn "$file:$n: $key is ignored: dnsmasq hands out only the reservations pve-sandbox-agent publishes (DHCP_HOSTS_DIR), there is no pool any more"
			continue
		fi
		[[ -v CONF[$key] ]] || die "$file:$n: unknown key $key"
		CONF[$key]=$value
	done <"$file"
}

pvs_validate_config() {
	local k
	[[ ${CONF[POOL]} =~ ^[A-Za-z0-9_.-]+$ ]] || die "POOL: bad pool id '${CONF[POOL]}'"
	[[ ${CONF[API_USER]} =~ ^[A-Za-z0-9_.-]+@[A-Za-z0-9_.-]+$ ]] || die "API_USER: expected user@realm"
	[[ ${CONF[API_TOKEN]} =~ ^[A-Za-z][A-Za-z0-9_.-]*$ ]] || die "API_TOKEN: bad token id"
	[[ ${CONF[ROLE]} =~ ^[A-Za-z0-9_.-]+$ ]] || die "ROLE: bad role id"
	for k in STORAGE TEMPLATE_STORAGE; do
		[[ ${CONF[$k]} =~ ^[A-Za-z0-9_.-]+$ ]] || die "$k: bad storage id '${CONF[$k]}'"
	done
	[[ ${CONF[BRIDGE]} =~ ^[A-Za-z0-9_.-]{1,15}$ ]] || die "BRIDGE: bad bridge name"
	[[ ${CONF[SANDBOX_CIDR]} =~ ^([0-9]{1,3}\.){3}[0-9]{1,3}/([0-9]{1,2})$ ]] || die "SANDBOX_CIDR: expected a.b.c.d/len"
	[[ ${CONF[GATEWAY]} =~ ^([0-9]{1,3}\.){3}[0-9]{1,3}$ ]] || die "GATEWAY: expected an IPv4 address"
	[[ -z ${CONF[UPSTREAM_DNS]} || ${CONF[UPSTREAM_DNS]} =~ ^[0-9a-fA-F.:,]+$ ]] || die "UPSTREAM_DNS: expected addresses separated by commas"
	[[ ${CONF[DHCP_LEASE]} =~ ^[0-9]+[smh]?$ ]] || die "DHCP_LEASE: e.g. 1h"
	[[ ${CONF[DHCP_HOSTS_DIR]} =~ ^(/[A-Za-z0-9_.-]+)+$ && ! ${CONF[DHCP_HOSTS_DIR]} =~ /\.\.?(/|$) ]] ||
		die "DHCP_HOSTS_DIR: an absolute path of plain names, e.g. /run/pve-sandbox/dhcp-hosts"
	[[ ${CONF[SANDBOX_PORTS]} =~ ^\{[\ \"A-Za-z0-9_.*,-]+\}$ ]] || die "SANDBOX_PORTS: an nft set of quoted name patterns, e.g. { \"veth*\", \"fwpr*\" }"
	[[ ${CONF[RULESET_SCOPE]} =~ ^(auto|bridge|ports)$ ]] || die "RULESET_SCOPE: auto, bridge or ports"
	[[ ${CONF[RESOLVER_PORT]} =~ ^[1-9][0-9]{0,4}$ ]] && ((CONF[RESOLVER_PORT] <= 65535 && CONF[RESOLVER_PORT] != 53)) ||
		die "RESOLVER_PORT: a port 1-65535 other than 53"
	# (pvs_controller_list: lib/ruleset.sh, sourced by both scripts; its message names the key)
	local err
	err=$(pvs_controller_list "${CONF[CONTROLLER_ADDRESSES]}" "${CONF[SANDBOX_CIDR]}" 2>&1 >/dev/null) || die "$err"
	for k in TEMPLATE_ID VOLUME_HOLDER_ID TEMPLATE_MEMORY TEMPLATE_CORES TEMPLATE_DISK_GB TEMPLATE_PIDS_MAX NPROC_SOFT NPROC_HARD; do
		[[ ${CONF[$k]} =~ ^[1-9][0-9]*$ ]] || die "$k: expected a positive integer"
	done
	[[ ${CONF[TEMPLATE_OSTEMPLATE]} =~ ^[A-Za-z0-9_.+-]+$ ]] || die "TEMPLATE_OSTEMPLATE: bad file name"
	[[ ${CONF[TEMPLATE_OSTYPE]} =~ ^[a-z]+$ ]] || die "TEMPLATE_OSTYPE: bad ostype"
	[[ ${CONF[SANDBOX_USER]} =~ ^[a-z_][a-z0-9_-]*$ ]] || die "SANDBOX_USER: bad user name"
	[[ ${CONF[SANDBOX_SUDO]} =~ ^[01]$ ]] || die "SANDBOX_SUDO: 0 or 1"
	[[ ${CONF[SSH_KEY]} == /* ]] || die "SSH_KEY: must be an absolute path"
	[[ ${CONF[TOKEN_FILE]} == /* ]] || die "TOKEN_FILE: must be an absolute path"
	[[ ${CONF[NODE]} =~ ^[A-Za-z0-9.-]*$ ]] || die "NODE: bad node name"
	if [[ -z ${CONF[NODE]} ]]; then CONF[NODE]=$(hostname -s); fi
	for k in CONTROLLER_USER AGENT_USER RELAY_USER SSH_KEY_OWNER SSH_KEY_GROUP; do
		[[ ${CONF[$k]} =~ ^([a-z_][a-z0-9_-]*)?$ ]] || die "$k: bad account name"
	done
	# The secrets (token file, private key) belong to the controller's account: the default owner
	# is it when it exists on this host, else root (the controller runs elsewhere).
	if [[ -z ${CONF[SSH_KEY_OWNER]} ]]; then
		if getent passwd "${CONF[CONTROLLER_USER]}" >/dev/null; then
			CONF[SSH_KEY_OWNER]=${CONF[CONTROLLER_USER]}
		else
			CONF[SSH_KEY_OWNER]=root
		fi
	fi
	if [[ -z ${CONF[SSH_KEY_GROUP]} ]]; then
		CONF[SSH_KEY_GROUP]=$(id -gn "${CONF[SSH_KEY_OWNER]}" 2>/dev/null || echo root)
	fi
	local never
	for never in "${CONF[AGENT_USER]}" "${CONF[RELAY_USER]}"; do
		[[ ${CONF[SSH_KEY_OWNER]} != "$never" ]] ||
			die "SSH_KEY_OWNER: $never must never read the controller's secrets (token, private key)"
	done
	(( ${CONF[NPROC_SOFT]} <= ${CONF[NPROC_HARD]} )) || die "NPROC_SOFT must not exceed NPROC_HARD"
	return 0
}

# pve-sandbox-agent: it owns the sets' elements and undoes foreign `nft` edits within a second,
# so while it runs, grants and bindings go through its socket.
PVS_AGENT_SOCK=${PVS_AGENT_SOCK:-$PVS_ROOT/run/pve-sandbox/agent.sock}
pvs_agent_running() { [[ -S $PVS_AGENT_SOCK ]]; }
# pvs_agent VERB ARGS...: one request line, one reply line; 0 iff the reply starts with OK.
pvs_agent() {
	"${PVS_PYTHON:-/usr/bin/python3}" - "$PVS_AGENT_SOCK" "$*" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
s.sendall((sys.argv[2] + "\n").encode())
reply = s.makefile().readline().strip()
print(reply)
sys.exit(0 if reply.startswith("OK") else 1)
PY
}
