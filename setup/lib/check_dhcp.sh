# shellcheck shell=bash
# pve-sandbox-check's DHCP item: dnsmasq's reservations and the agent's hosts directory. Sourced by pve-sandbox-check, whose executors (node, ct,
# probe, reach, ...), record and CONF these functions use.
# shellcheck disable=SC2154  # the sourcing script's variables

# ---- DHCP item -----------------------------------------------------------------------------------
# dnsmasq's configuration as the Debian package reads it: /etc/dnsmasq.conf, then the files of
# /etc/dnsmasq.d (conf-dir rules: no dot files, no "~" backups, no "#...#", no dpkg leftovers).
dnsmasq_conf_files() {
	local f n
	if [[ -f $PVS_ROOT/etc/dnsmasq.conf ]]; then printf '%s\n' /etc/dnsmasq.conf; fi
	for f in "$PVS_ROOT"/etc/dnsmasq.d/*; do
		[[ -f $f ]] || continue
		n=${f##*/}
		[[ $n == *~ || $n == \#*\# || $n =~ \.dpkg-(dist|old|new)$ ]] && continue
		printf '%s\n' "${f#"$PVS_ROOT"}"
	done
}
ip4_int() { # ip4_int A.B.C.D -> the address as an integer (fails if it is not one)
	local a b c d
	[[ $1 =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$ ]] || return 1
	a=${BASH_REMATCH[1]} b=${BASH_REMATCH[2]} c=${BASH_REMATCH[3]} d=${BASH_REMATCH[4]}
	printf '%s\n' $(((10#$a << 24) | (10#$b << 16) | (10#$c << 8) | 10#$d))
}
in_cidr() { # in_cidr ADDRESS A.B.C.D/LEN
	local a n p=${2#*/} mask
	a=$(ip4_int "$1") || return 1
	n=$(ip4_int "${2%/*}") || return 1
	mask=$(((0xffffffff << (32 - p)) & 0xffffffff))
	(((a & mask) == (n & mask)))
}
# range_kind VALUE (of a dhcp-range line) -> "static START", "dynamic START[,END]" or "other"
# (IPv6, proxy): the leading tag:/set:/net:/interface: fields and a bare network id are skipped.
range_kind() {
	local fields i=0 start next
	IFS=, read -ra fields <<<"$1"
	while ((i < ${#fields[@]})) && [[ ${fields[i]} =~ ^(tag|set|net|interface): || ! ${fields[i]} =~ ^[0-9.]+$|: ]]; do
		i=$((i + 1))
	done
	start=${fields[i]:-} next=${fields[i + 1]:-}
	if ! ip4_int "$start" >/dev/null; then
		echo other
	elif [[ $next == static ]]; then
		echo "static $start"
	elif [[ $next == proxy ]]; then
		echo other
	elif ip4_int "$next" >/dev/null; then
		echo "dynamic $start,$next"
	else
		echo "dynamic $start"
	fi
}
# watches_dir PID DIR: dnsmasq process PID has an inotify watch on DIR's inode (dnsmasq sets up
# its dhcp-hostsdir watch only at start, and only if the directory exists then).
watches_dir() {
	local ino major minor f line i d
	read -r ino major minor < <(stat -c '%i %Hd %Ld' "$2") || return 1
	for f in /proc/"$1"/fdinfo/*; do
		[[ -r $f ]] || continue
		while IFS= read -r line; do
			[[ $line =~ ^inotify\ .*\ ino:([0-9a-f]+)\ sdev:([0-9a-f]+)( |$) ]] || continue
			i=$((16#${BASH_REMATCH[1]})) d=$((16#${BASH_REMATCH[2]}))
			if ((i == ino && d >> 20 == major && (d & 0xfffff) == minor)); then return 0; fi
		done <"$f"
	done
	return 1
}
join_by() { # join_by SEP ITEM...
	local sep=$1 out=""
	shift
	while (($# > 0)); do
		out+="${out:+$sep}$1"
		shift
	done
	printf '%s' "$out"
}
# started_at PID -> the process start in whole seconds since the epoch (up to 2 s early).
started_at() {
	local btime ticks
	btime=$(awk '$1 == "btime" {print $2}' /proc/stat)
	ticks=$(sed 's/.*) //' "/proc/$1/stat" | awk '{print $20}')
	printf '%s\n' $((btime + ticks / $(getconf CLK_TCK)))
}

check_dhcp() {
	local id=dhcp.reservations-only title="dnsmasq answers only the agent's reservations"
	if [[ $MODE == rig ]]; then
		record SKIP "$id" "$title" "rig mode: no dnsmasq or agent configuration to inspect"
		return 0
	fi
	local cidr=${CONF[SANDBOX_CIDR]} yaml=/etc/pve-sandbox/agent.yaml agent_dir="" line
	if [[ -f $PVS_ROOT$yaml ]]; then
		while IFS= read -r line || [[ -n $line ]]; do
			if [[ $line =~ ^dhcp_hosts_dir:[[:space:]]*(.*)$ ]]; then
				agent_dir=${BASH_REMATCH[1]}
				agent_dir=${agent_dir%%[[:space:]]#*}
				agent_dir=${agent_dir%"${agent_dir##*[![:space:]]}"}
				if [[ $agent_dir =~ ^\"(.*)\"$ || $agent_dir =~ ^\'(.*)\'$ ]]; then agent_dir=${BASH_REMATCH[1]}; fi
			fi
		done <"$PVS_ROOT$yaml"
	fi
	agent_dir=${agent_dir%/}
	local files=() f key val kind static=() dynamic=() dirs=() foreign=() ignore="" a fs
	mapfile -t files < <(dnsmasq_conf_files)
	for f in "${files[@]}"; do
		while IFS= read -r line || [[ -n $line ]]; do
			line=${line%$'\r'}
			line=${line#"${line%%[![:space:]]*}"}
			line=${line%"${line##*[![:space:]]}"}
			[[ -z $line || $line == \#* ]] && continue
			key=${line%%=*} val=""
			[[ $line == *=* ]] && val=${line#*=}
			case $key in
			dhcp-range)
				kind=$(range_kind "$val")
				case $kind in
				static\ *) in_cidr "${kind#* }" "$cidr" && static+=("$line ($f)") ;;
				dynamic\ *) a=${kind#* } && in_cidr "${a%%,*}" "$cidr" && dynamic+=("$line ($f)") ;;
				esac
				;;
			dhcp-hostsdir) dirs+=("${val%/}") ;;
			dhcp-hostsfile) foreign+=("$line ($f)") ;;
			dhcp-host)
				IFS=, read -ra fs <<<"$val"
				for a in "${fs[@]}"; do
					if in_cidr "$a" "$cidr"; then foreign+=("$line ($f)"); fi
				done
				;;
			dhcp-ignore) [[ $val == 'tag:!known' || $val == '#known' ]] && ignore=$line ;;
			esac
		done <"$PVS_ROOT$f"
	done
	local read_ev
	local yaml_ev="$yaml: dhcp_hosts_dir ${agent_dir:-unset}"
	[[ -f $PVS_ROOT$yaml ]] || yaml_ev="no $yaml"
	read_ev="read $(join_by ', ' "${files[@]}"); $yaml_ev"
	((${#files[@]} > 0)) || read_ev="no dnsmasq configuration; $yaml_ev"
	if [[ ${#static[@]} == 0 && ${#dynamic[@]} == 0 && ${#dirs[@]} == 0 && ${#foreign[@]} == 0 && -z $agent_dir ]]; then
		record PASS "$id" "$title" "DHCP off: containers use static addresses (no dhcp-range in $cidr, no dhcp-hostsdir; $read_ev)"
		return 0
	fi
	local problems=() d other=()
	((${#dynamic[@]} == 0)) || problems+=("dynamic pool on the bridge: $(join_by ', ' "${dynamic[@]}")")
	((${#static[@]} > 0)) || problems+=("no static dhcp-range in $cidr")
	[[ -n $ignore ]] || problems+=("no dhcp-ignore=tag:!known (unknown MACs are answered)")
	((${#foreign[@]} == 0)) || problems+=("reservations besides the agent's: $(join_by ', ' "${foreign[@]}")")
	for d in "${dirs[@]}"; do [[ $d == "$agent_dir" ]] || other+=("$d"); done
	if [[ -z $agent_dir ]]; then
		problems+=("agent.yaml sets no dhcp_hosts_dir: the agent publishes no reservation (dhcp-hostsdir=${dirs[*]:-none})")
	elif ((${#dirs[@]} == ${#other[@]})); then
		problems+=("dhcp-hostsdir=${dirs[*]:-none} is not the agent's dhcp_hosts_dir $agent_dir")
	elif [[ ! -d $PVS_ROOT$agent_dir ]]; then
		problems+=("$agent_dir does not exist")
	fi
	if [[ -n $agent_dir && ${#other[@]} -gt 0 && ${#other[@]} -lt ${#dirs[@]} ]]; then
		problems+=("reservations besides the agent's: dhcp-hostsdir=${other[*]}")
	fi
	# The running dnsmasq: active, watching the directory, started after its configuration.
	local state pid="" run_ev="" n
	state=$(systemctl is-active dnsmasq.service 2>/dev/null || true)
	if [[ $state != active ]]; then
		problems+=("dnsmasq.service is ${state:-unknown}")
	else
		pid=$(systemctl show -p MainPID --value dnsmasq.service 2>/dev/null || true)
		if [[ ! $pid =~ ^[1-9][0-9]*$ || ! -d /proc/$pid ]]; then
			problems+=("dnsmasq.service has no main process (MainPID=${pid:-none})")
		else
			run_ev="dnsmasq.service active (pid $pid)"
			if [[ -n $agent_dir && -d $PVS_ROOT$agent_dir ]]; then
				if watches_dir "$pid" "$PVS_ROOT$agent_dir"; then
					run_ev+=", watching $agent_dir"
				else
					problems+=("dnsmasq (pid $pid) does not watch $agent_dir (it started before the directory existed, or the directory was recreated since): restart dnsmasq")
				fi
			fi
			local since stale=()
			since=$(started_at "$pid")
			for f in "${files[@]}"; do
				(($(stat -c %Y "$PVS_ROOT$f") <= since + 1)) || stale+=("$f")
			done
			((${#stale[@]} == 0)) || problems+=("changed after dnsmasq started (restart dnsmasq): ${stale[*]}")
		fi
	fi
	if ((${#problems[@]} > 0)); then
		record FAIL "$id" "$title" "$(join_by '; ' "${problems[@]}") ($read_ev)"
		return 0
	fi
	n=$(find "$PVS_ROOT$agent_dir" -maxdepth 1 -type f ! -name '.*' | wc -l)
	record PASS "$id" "$title" "$(join_by ', ' "${static[@]}"), $ignore, dhcp-hostsdir=$agent_dir = the agent's dhcp_hosts_dir ($n reservation(s)); $run_ev"
}
