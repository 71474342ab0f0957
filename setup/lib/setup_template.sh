# shellcheck shell=bash
# pve-sandbox-setup's template and volume-holder steps: the sandbox template (an OS image,
# provisioned in a build CT, then converted) and the CT that holds volumes. Sourced by
# pve-sandbox-setup, whose CONF, logging and Proxmox helpers these functions use.
# shellcheck disable=SC2154  # the sourcing script's variables

# ---- template ----------------------------------------------------------------------------------
provision_script() {
	local user=${CONF[SANDBOX_USER]}
	cat <<PROVISION
set -eu
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends openssh-server ca-certificates curl git python3 python3-venv sudo
apt-get clean
rm -rf /var/lib/apt/lists/*
id $user >/dev/null 2>&1 || useradd -m -s /bin/bash $user
install -d -m 0700 -o $user -g $user /home/$user/.ssh /home/$user/uploads
chmod 0755 /home/$user/uploads
install -m 0600 -o $user -g $user /root/.ssh/authorized_keys /home/$user/.ssh/authorized_keys
rm -f /root/.ssh/authorized_keys
passwd -l root >/dev/null
if [ "${CONF[SANDBOX_SUDO]}" = 1 ]; then
	echo '$user ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/90-$user
	chmod 0440 /etc/sudoers.d/90-$user
fi
cat > /etc/ssh/sshd_config.d/90-pve-sandbox.conf <<'SSHD'
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
AllowUsers $user
X11Forwarding no
AllowAgentForwarding no
# The controller reaches a sandbox's services (its port proxy) over its own connection, to the
# sandbox's loopback only; remote forwarding stays off (docs/design/ports.md).
AllowTcpForwarding local
PermitOpen 127.0.0.1:*
PermitTunnel no
GatewayPorts no
MaxAuthTries 3
# The controller runs many commands at once over one connection (SshConfig::max_channels, 32).
MaxSessions 64
SSHD
# The controller pins ed25519 host keys.
test -f /etc/ssh/ssh_host_ed25519_key || ssh-keygen -q -t ed25519 -N "" -f /etc/ssh/ssh_host_ed25519_key
cat > /etc/security/limits.d/90-pve-sandbox.conf <<'LIMITS'
*	soft	nproc	${CONF[NPROC_SOFT]}
*	hard	nproc	${CONF[NPROC_HARD]}
*	hard	core	0
*	soft	core	0
LIMITS
for s in systemd-resolved snapd postfix; do systemctl disable --now \$s >/dev/null 2>&1 || true; done
systemctl enable ssh
PROVISION
}

# The newest amd64 image named $1 (a name without its version: debian-13-standard) in the pveam
# output on stdin (`pveam list` or `pveam available`), or nothing.
newest_image() {
	{ grep -oE "(^|[/[:space:]])$1_[0-9][0-9A-Za-z.+~-]*_amd64\.tar\.(zst|gz|xz)" || true; } |
		sed 's|^.*[/[:space:]]||' | sort -V | tail -n1
}

# Sets OS_IMAGE, the OS image the templates are created from, and downloads it to
# TEMPLATE_STORAGE when it is not there yet. TEMPLATE_OSTEMPLATE is an exact file name
# (debian-13-standard_13.1-2_amd64.tar.zst), or a name without its version (debian-13-standard):
# then the newest such image already on the storage, else the newest that pveam offers.
ensure_os_image() {
	local want=${CONF[TEMPLATE_OSTEMPLATE]} storage=${CONF[TEMPLATE_STORAGE]} listed
	listed=$(query pveam list "$storage" 2>/dev/null || true)
	if [[ $want =~ \.tar\.(zst|gz|xz)$ ]]; then
		OS_IMAGE=$want
		grep -q "vztmpl/$want" <<<"$listed" && return 0
		run pveam update
	else
		OS_IMAGE=$(newest_image "$want" <<<"$listed")
		[[ -n $OS_IMAGE ]] && return 0
		run pveam update
		OS_IMAGE=$(query pveam available --section system 2>/dev/null | newest_image "$want")
		if [[ -z $OS_IMAGE ]]; then
			[[ $DRY_RUN == 1 ]] || die "TEMPLATE_OSTEMPLATE: pveam offers no image named $want (pveam available --section system)"
			OS_IMAGE="${want}_<newest>_amd64.tar.zst"
		fi
	fi
	run pveam download "$storage" "$OS_IMAGE"
}

step_template() {
	local id=${CONF[TEMPLATE_ID]} pub="${CONF[SSH_KEY]}.pub" cfg
	if cfg=$(query pct config "$id" 2>/dev/null); then
		if grep -Eq '^template:[[:space:]]*1' <<<"$cfg"; then
			say "template $id: present"
			return 0
		fi
		die "CT $id exists and is not a template; finish or remove it (pct destroy $id), then re-run"
	fi
	[[ -f $PVS_ROOT$pub || $DRY_RUN == 1 ]] || die "$pub missing: run the ssh-key step first"

	ensure_os_image
	local b=${CONF[BRIDGE]} prefix=${CONF[SANDBOX_CIDR]#*/} buildip
	buildip=$(template_build_ip)
	run pct create "$id" "${CONF[TEMPLATE_STORAGE]}:vztmpl/$OS_IMAGE" \
		--hostname pve-sandbox-template --description "pve-sandbox template (pve-sandbox-setup)" \
		--tags pve-sandbox --pool "${CONF[POOL]}" --ostype "${CONF[TEMPLATE_OSTYPE]}" \
		--unprivileged 1 --features nesting=0 --swap 0 --memory "${CONF[TEMPLATE_MEMORY]}" \
		--cores "${CONF[TEMPLATE_CORES]}" --rootfs "${CONF[STORAGE]}:${CONF[TEMPLATE_DISK_GB]}" \
		--net0 "name=eth0,bridge=$b,ip=$buildip/$prefix,gw=${CONF[GATEWAY]},firewall=0" \
		--nameserver "${CONF[GATEWAY]}" --ssh-public-keys "$PVS_ROOT$pub" --onboot 0 --start 0
	# Raw LXC limits that clones inherit: a PID cap (fork bombs) and no core dumps.
	local conf="/etc/pve/lxc/$id.conf" extra
	extra=$'lxc.cgroup2.pids.max: '"${CONF[TEMPLATE_PIDS_MAX]}"$'\nlxc.prlimit.core: 0'
	if [[ $DRY_RUN == 1 ]]; then
		say "would append to $conf:"
		say "    ${extra//$'\n'/$'\n'    }"
	else
		say "+ append lxc.cgroup2.pids.max and lxc.prlimit.core to $conf"
		printf '%s\n' "$extra" >>"$PVS_ROOT$conf"
	fi
	# While it is built, the template is a sandbox with internet: bind its port and allow its
	# address (through pve-sandbox-agent when it runs, which would undo direct nft edits), undone
	# below.
	local mac port="veth${id}i0"
	if [[ $DRY_RUN == 1 ]]; then mac="<hwaddr of net0>"; else
		mac=$(query pct config "$id" | sed -n 's/^net0:.*hwaddr=\([0-9A-Fa-f:]\{17\}\).*/\1/p')
		[[ -n $mac ]] || die "no hwaddr in CT $id's net0"
	fi
	local via_agent=0
	if pvs_agent_running; then via_agent=1; fi
	if [[ $via_agent == 1 ]]; then
		run pvs_agent BIND "$port" "$mac" "$buildip"
		run pvs_agent ALLOW "$buildip" ttl=1800
	else
		run nft add element bridge sandbox_l2 port_mac "{ \"$port\" . $mac }"
		run nft add element bridge sandbox_l2 port_ip4 "{ \"$port\" . $buildip }"
		run nft add element inet sandbox internet_allowed "{ $buildip timeout 30m }"
	fi
	local rc=0
	run pct start "$id" || rc=$?
	if [[ $rc == 0 ]]; then
		run pct exec "$id" -- bash -c "$(provision_script)" || rc=$?
		run pct stop "$id" || rc=$?
	fi
	if [[ $via_agent == 1 ]]; then
		run pvs_agent REVOKE "$buildip" || true
		run pvs_agent UNBIND "$port" || true
	else
		run nft delete element inet sandbox internet_allowed "{ $buildip }" || true
		run nft delete element bridge sandbox_l2 port_ip4 "{ \"$port\" . $buildip }" || true
		run nft delete element bridge sandbox_l2 port_mac "{ \"$port\" . $mac }" || true
	fi
	[[ $rc == 0 ]] || die "provisioning CT $id failed; inspect it, then 'pct destroy $id' and re-run"
	run pct set "$id" --net0 "name=eth0,bridge=$b,ip=dhcp,firewall=0,hwaddr=$mac"
	run pct template "$id"
}

# ---- volume-holder -----------------------------------------------------------------------------
# Volumes (docs/api.md "Volumes", docs/design/volumes.md): each is the mp0 of a linked clone of
# this template that never starts, so the volume outlives the sandboxes that mount it and goes
# with its holder. The smallest container: no network, no provisioning, never started.
step_volume_holder() {
	local id=${CONF[VOLUME_HOLDER_ID]} cfg
	if cfg=$(query pct config "$id" 2>/dev/null); then
		if grep -Eq '^template:[[:space:]]*1' <<<"$cfg"; then
			say "volume holder template $id: present"
			return 0
		fi
		die "CT $id exists and is not a template; remove it (pct destroy $id), then re-run"
	fi
	ensure_os_image
	run pct create "$id" "${CONF[TEMPLATE_STORAGE]}:vztmpl/$OS_IMAGE" \
		--hostname pve-sandbox-volume-holder \
		--description "pve-sandbox volume holder template (pve-sandbox-setup): never started" \
		--tags pve-sandbox --pool "${CONF[POOL]}" --ostype "${CONF[TEMPLATE_OSTYPE]}" \
		--unprivileged 1 --features nesting=0 --swap 0 --memory 64 --cores 1 \
		--rootfs "${CONF[STORAGE]}:1" --onboot 0 --start 0
	run pct template "$id"
}

# The address the template uses while it is built: the one after the gateway, static (there is
# no DHCP pool; it is bound through the agent like a sandbox's while the template is built).
template_build_ip() {
	local a b c d
	IFS=. read -r a b c d <<<"${CONF[GATEWAY]}"
	((d < 254)) || die "GATEWAY: the template build address is GATEWAY+1, which must be a host address"
	printf '%d.%d.%d.%d\n' "$a" "$b" "$c" "$((d + 1))"
}
